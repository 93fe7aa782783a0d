"""Quick mode of the approximate-orthogonality study: run, report, and its key numeric claims."""

from studies.approximate_orthogonality.report import report
from studies.approximate_orthogonality.run import run


def test_approximate_orthogonality_quick(tmp_path):
    s = run(tmp_path, quick=True)
    path = report(tmp_path)
    assert path.exists() and (tmp_path / "approx_orthogonality.png").exists()
    for g in ("flat", "sphere"):
        # coupling <u^h,u^h'> obeys |.| <= delta sum_i w_i |A^h||A^h'| (Cauchy-Schwarz, exact up to round-off)
        assert s[f"{g}_max_bound_ratio"] <= 1 + 1e-12
        # linear in delta near orthogonality (angles >= 85 deg): slope within 0.15 of 1
        assert abs(s[f"{g}_slope_initial_small"] - 1) < 0.15
        # exactly orthogonal heads: no coupling beyond round-off
        assert s[f"{g}_coupling_at_zero"] < 1e-14
    # flat dynamics: every per-head rate stays non-negative for angles 70-90 degrees
    assert s["flat_min_frac_head_times_nonneg"] == 1.0
