"""Quick mode of the phase-diagram study: run, report, and its key numbers."""

import numpy as np

from meanfield.workflow.phase_diagram import MEASURES, PhaseDiagramConfig, phase_diagram
from studies._common import load_json
from studies.phase_diagram.report import report
from studies.phase_diagram.run import QUICK, SEED, first_crossing, run


def test_first_crossing_interpolates_between_samples():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([[0.0, 0.0, 0.9], [0.2, 0.1, 0.9], [0.6, 0.2, 0.9], [1.0, 0.3, 0.9]])
    # first column: 0.5 lies 3/4 of the way from 0.2 (t = 1) to 0.6 (t = 2); second never; third at t = 0
    # (exact arithmetic on these binary fractions up to one rounding: 1e-15)
    np.testing.assert_allclose(first_crossing(t, y, 0.5), [1.75, np.nan, 0.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(first_crossing(t, y[:, 0], 0.5), 1.75, rtol=0, atol=1e-15)


def test_phase_diagram_quick(tmp_path):
    s = run(tmp_path, quick=True)
    path = report(tmp_path)
    assert path.exists() and (tmp_path / "phase_diagram.png").exists() and (tmp_path / "t_half.png").exists()
    text = path.read_text()
    assert text.index("## Verdicts against the paper's hypotheses") < text.index("## Claims and verdicts")

    # the study's own loop (per-start densities every layer) gives the workflow's measures exactly
    d = load_json(tmp_path / "data.json")
    cfg = PhaseDiagramConfig(betas=QUICK.betas, t_final=QUICK.t_final, dt=0.1, record_every=QUICK.record_every,
                             n=32, d=2, batch=QUICK.batch, rule="post_ln", normalization="softmax", seed=SEED)
    ds = phase_diagram(cfg, progress=False)
    for m in MEASURES:     # same starts, same layers, same observer: identical numbers
        np.testing.assert_array_equal(np.array(d["measures"][m]), ds[m].values)
    np.testing.assert_array_equal(np.array(d["t"]), ds["t"].values)

    # 5 betas in [0.5, 3.5], 32 starts: the three smallest cross 0.5 cleanly (20 % wide intervals at most), the
    # two largest only on the plateau (intervals 31 % of t_half wide and unbounded in this seed); 3 keep the trend
    assert s["n_clean"] >= 3 and s["n_betas_reaching_half"] == 5
    # the trend test of the verdict: with 3 clean points Spearman is 1 only if every replicate keeps the order
    assert s["spearman_ci"][0] > 0.8 and s["rise_t_half"][1] > 0
    # all 32 runs in one cluster at beta = 0.5 by t = 20, none at beta = 3.5: Wilson intervals disjoint
    assert s["one_cluster_final_small_beta"][1] > s["one_cluster_final_large_beta"][2]
    # the equiangular curve is faster at every clean beta (full run: ratios 1.4-1.9); [1, 5] bounds that
    # factor with margin for 32 starts
    assert 1.0 < s["ratio_min_lower"] and s["ratio_range"][1] < 5.0
    assert "**reproduced**" in text and "**outside the hypotheses**" in text
