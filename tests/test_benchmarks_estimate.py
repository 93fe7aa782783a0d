"""The estimate benchmark (benchmarks/estimate.py) in its quick mode: the row runs and is well formed.
The factor between estimate and actual is measured by the script (RESULTS_estimate.md), never
asserted here (a timing on a shared machine)."""

import math

from benchmarks import estimate


def test_quick_mode_runs_and_reports_a_finite_factor(capsys):
    worst = estimate.main(["--quick", "--no-write"])
    out = capsys.readouterr().out
    assert math.isfinite(worst) and worst >= 1.0        # max(r, 1/r) of a positive ratio is at least 1
    assert "tiny (quick mode)" in out and "estimate took" in out
