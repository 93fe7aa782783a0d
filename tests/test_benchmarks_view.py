"""The viewer benchmark of issue 25 (benchmarks/view.py) in its quick mode: it builds the page, opens it in
headless chromium and reports size and times without console errors.  Times are not asserted here (speed is
measured by the script, never by a test)."""

import os

import pytest

from benchmarks import view as bench


def test_quick_mode_reports_size_and_opening(capsys):
    pytest.importorskip("playwright.sync_api")
    if not os.path.exists(bench.CHROMIUM):
        pytest.skip(f"{bench.CHROMIUM} missing (.ci/browser installs it in CI)")
    assert bench.main(["--quick", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "MB (target < 10 MB)" in out
    lines = [line for line in out.splitlines() if "open" in line and "chromium CPU" in line]
    assert len(lines) == 2 and all(line.endswith("0 console errors") for line in lines)
