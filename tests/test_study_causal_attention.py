"""Quick mode of the causal-attention study (convergence to one cluster, Rényi parking, the causal continuum)."""

import numpy as np

from studies._common import VERDICTS
from studies.causal_attention.report import _load, analyse, report
from studies.causal_attention.run import QUICK, run


def test_causal_attention_quick(tmp_path):
    s = run(tmp_path, quick=True)
    assert s["runs"] == len(QUICK.conv_betas) * len(QUICK.conv_ns) * QUICK.seeds
    path = report(tmp_path)
    text = path.read_text()
    assert "## Verdicts against the paper's hypotheses" in text
    for name in ("convergence_time.png", "parking.png", "mean_field_w2.png"):
        assert (tmp_path / name).exists()
    cfg, d = _load(tmp_path)
    a = analyse(cfg, d)
    assert all(a[k]["verdict"] in VERDICTS for k in ("conv", "park", "mf"))
    # beta = 1 converges to one cluster quickly (t ~ 20-40 measured) in every seed
    assert np.isfinite(d["conv_T1"][0]).all()
    # the continuum conserves the mass of every position (round-off) and stays resolved
    assert float(d["mf_mass_drift"]) < 1e-12 and float(d["mf_tail"]) < 1e-8
    # W2 falls with n at t = 0 (i.i.d. samples; 4x the tokens, 3 seeds: a factor 1.4 at least, n^-1/2 predicts 2)
    assert a["mf"]["m0"][-1] < a["mf"]["m0"][0] / 1.4
    # the greedy Rényi count grows with beta (16 -> 64: the separation halves)
    assert a["park"]["greedy"][-1] > a["park"]["greedy"][0]
    # the "lost in the middle" part: the closed forms at lambda = 0 to rounding (harmonic tail, -log s) ...
    assert float(d["lim_closed_particles"]) < 1e-12 and float(d["lim_closed_continuum"]) < 1e-12
    assert (tmp_path / "attention_received.png").exists()
    assert a["lim"]["verdict"] in VERDICTS and a["lim"]["u_verdict"] in VERDICTS and a["sph"]["verdict"] in VERDICTS
    # ... particles approach the continuum's received profile (4x the tokens, 3 seeds: a factor 1.3 at least)
    assert a["lim"]["m_all"][-1, 0] < a["lim"]["m_all"][0, 0] / 1.3
    # the uniform state is stationary (its profile stays -log s) and i.i.d. uniform tokens show primacy
    assert float(d["lim_uniform_tendency"]) < 1e-15 and all(s["primacy"] for s in a["lim"]["shapes"])
    # the S^2 continuum conserves every position's mass; W2 to the particles falls with n at t = 0
    assert float(d["sph_mass_drift"]) < 1e-12 and a["sph"]["m0"][-1] < a["sph"]["m0"][0]
    # part 6, a general head: the same checks, and its verdict row is in the report
    assert a["sphg"]["verdict"] in VERDICTS and float(d["sphg_mass_drift"]) < 1e-12
    assert a["sphg"]["m0"][-1] < a["sphg"]["m0"][0] and "on S^2 with a general head" in text
