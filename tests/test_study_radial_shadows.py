"""Quick mode of the radial-shadows study: run, report, and its key numeric claims."""

from studies.radial_shadows.report import report
from studies.radial_shadows.run import run


def test_radial_shadows_quick(tmp_path):
    s = run(tmp_path, quick=True)
    path = report(tmp_path)
    assert path.exists() and (tmp_path / "scan.png").exists()
    # flat dynamics: <u^h, u^h'> = 0 exactly (disjoint blocks), so per-head rates are sums of squares
    assert s["flat_min_rel_rate"] >= -1e-12
    assert s["flat_max_rel_cross"] < 1e-14
    # sphere: C[h,h'] = -sum_i w_i a^h a^h' is algebraic: round-off (relative 1e-12)
    assert s["max_cross_term_error"] < 1e-12
    # row sums of C equal the exact rates up to round-off in cancelling sums (relative 1e-10)
    assert s["max_rowsum_error"] < 1e-10
    # norm-bounded reading of Condition 8 implies the exact one: never violated
    assert s["implication_failures"] == 0
    # the implication "Condition 8 at all tokens => dE_h/dt >= 0" is tested on real cases, never violated
    assert s["both_hold_count"] > 0
    assert s["both_hold_but_negative"] == 0
    # per-head energies do decrease on the sphere in these runs (the point of Thm 17)
    assert s["frac_head_times_negative"] > 0
