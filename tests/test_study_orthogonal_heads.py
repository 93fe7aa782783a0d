"""Quick mode of the orthogonal-heads study (the paper's setting in the continuum limit): run, report, key numbers."""

import numpy as np

from studies.orthogonal_heads.report import _load, analyse, report
from studies.orthogonal_heads.run import run


def test_orthogonal_heads_quick(tmp_path):
    s = run(tmp_path, quick=True)
    assert set(s) == {"plane_axis", "plane_axis_rotated"} and all(v["pde_status"] == 0 for v in s.values())
    path = report(tmp_path)
    text = path.read_text()
    assert "## Verdicts against the paper's hypotheses" in text
    assert (tmp_path / "rate_n.png").exists() and (tmp_path / "rates.png").exists()
    a = analyse(_load(tmp_path))
    for name in ("plane_axis", "plane_axis_rotated"):
        r = a[name]
        # the interference through the radial shadows is O(1) of the self terms (measured 0.7-0.9), not round-off
        assert r["off_min"] > 0.1
    # value-aligned heads: the total energy grows (Thm 11: an identity, PDE and particles; increments ~5e-3 here)
    assert a["plane_axis"]["pde_dE_min"] > 0 and a["plane_axis"]["particle_dE_min"] > 0
    # i.i.d. samples at t = 0: the MMD is the iid expectation's order, so the first time's means fall with n
    d = np.load(tmp_path / "case_plane_axis.npz")
    m0 = [d["mmd"][d["n"] == n, 0].mean() for n in d["n_values"]]
    assert m0[0] > m0[-1]
