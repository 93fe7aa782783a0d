"""Hostile-input cases of ``hostile_cases_more`` still failing (issue 26), strict xfails merged into
``tests/test_hostile_api.py``'s XFAIL (same format as ``hostile_xfail.py``; kept apart to ease merges)."""

XFAIL = {
}
