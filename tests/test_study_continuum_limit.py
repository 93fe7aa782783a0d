"""Quick mode of the continuum-limit study: W2(particles, PDE) decreases with n at t = 0 and later."""

import numpy as np

from studies._common import load_json
from studies.continuum_limit.report import report
from studies.continuum_limit.run import run


def test_quick_study(tmp_path):
    summary = run(tmp_path, quick=True)
    path = report(tmp_path)
    d = np.load(tmp_path / "data.npz")
    s = load_json(tmp_path / "data.json")
    t, w2 = d["t_eval"], d["w2_exact"]
    for tw in (0.0, 0.5):                       # t = 0 and a later time (the lmax-31 PDE stops near 0.556)
        k = int(np.nonzero(t == tw)[0][0])
        assert np.all(np.isfinite(w2[:, k]))
        # n = 64, 256, 1024 (one sample each): the expected ratio per 4x in n is ~0.5 (n^-1/2);
        # sampling noise of one sample is ~10 %, so strict decrease is safe
        assert np.all(np.diff(w2[:, k]) < 0), (tw, w2[:, k])
        # over 16x in n the expected factor is ~0.25-0.3; 0.5 leaves room for noise of both end points
        assert w2[-1, k] / w2[0, k] < 0.5
        slope = s["fits"][f"t={tw:g}"]["exact_slope"]
        # the claim: slope -1/2 up to logs; +-0.2 covers one-sample noise over a 16x range of n
        assert -0.7 < slope < -0.3, slope
    # the PDE stop is reported and W2 is NaN after it while the particles continued to t_final
    assert 0 < summary["pde_t_stop"] < t[-1]
    assert np.all(np.isnan(w2[:, -1])) and np.all(np.isfinite(d["p_energy"][:, -1]))
    # the larger-beta case stops earlier than the main case
    assert all(m["status"] == 1 and m["t_stop"] < summary["pde_t_stop"] for m in s["resolution_case"].values())
    text = path.read_text()
    assert "| claim |" in text
    for fig in ("w2_vs_n.png", "self_convergence.png", "observables.png", "resolution_loss.png"):
        assert (tmp_path / fig).stat().st_size > 10_000
