"""Quick mode of the phase-diagram study: run, report, and its key numbers."""

from studies.phase_diagram.report import report
from studies.phase_diagram.run import run


def test_phase_diagram_quick(tmp_path):
    s = run(tmp_path, quick=True)
    path = report(tmp_path)
    assert path.exists() and (tmp_path / "phase_diagram.png").exists()
    # 5 betas in [0.5, 3.5], 32 starts: the time to pair density 0.5 grows with beta (full mode: rho = 0.99);
    # 0.8 tolerates one swapped neighbour pair of the sampled times, not a flat or decreasing trend
    assert s["spearman_beta_t_half"] > 0.8
    # every beta of the quick grid clusters before t = 20 at small B, slower than the equiangular curve by a
    # factor 1.4-3.5 in the full run; [1, 5] bounds that factor with margin for 32 starts
    assert s["n_betas_reaching_half"] == 5
    lo, _, hi = s["ratio_t_half_to_equiangular"]
    assert 1.0 < lo and hi < 5.0
