"""Hostile-input cases still failing (issue 26), as strict xfails of tests/test_hostile_api.py.

(entry, argument, kind) -> (helper whose fix should make it pass, the first failure seen). kind: bad (listed
bad values), huge (cost refusals), gen (hypothesis-drawn bad values; heavy: the slow profile's extra
failures, its other marks are gen's), edge (legal extremes). "open": no
helper of the issue-26 round owns it.  An XPASS is a failure (strict): delete the line when a fix lands
(``python -m benchmarks.hostile_xfail_table prune RUN.txt`` does it).
"""

XFAIL = {
}
