"""The benchmark of issue 34, item 1 (benchmarks/factored_heads.py) in its quick mode: every table and target row is
written and the numbers that are correctness (not speed) hold.  Times are not asserted (speed is measured by the
script: a shared machine's load would make a timing assertion flaky)."""

import pytest

from benchmarks import factored_heads


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return factored_heads.run(quick=True, out=tmp_path_factory.mktemp("bench") / "RESULTS_factored_heads_quick.md")


def test_every_table_and_target_is_written(quick):
    text = quick["path"].read_text()
    for heading in ("# Factored heads (issue 34, item 1)", "## Targets", "## 1. Speed", "## 2. Where the time goes"):
        assert heading in text
    assert len(quick["targets"]) == 2
    for row in quick["targets"]:
        assert row[3] in ("met", "MISSED", "-", "- (quick)"), row
    assert quick["targets"][0][3] == "- (quick)"          # the speed target is judged at n = 512 (full mode) only


def test_factored_and_dense_results_agree(quick):
    # the same sums in another order: measured 2e-16..2e-15 relative to the largest entry; 1e-12 is round-off with room
    for key, (t_dense, t_factored, err) in quick["speed"].items():
        assert err <= 1e-12, (key, err)
        assert t_dense > 0 and t_factored > 0
    assert quick["targets"][1][3] == "met"
