"""The benchmark of issue 35 (benchmarks/gpu.py) in its quick mode: every table and target row is written, the GPU rows
say they were not measured when no device is lent, and the numbers that are correctness (not speed) hold.  Times are
not asserted (a shared machine's load would make a timing assertion flaky)."""

import pytest

from benchmarks import gpu


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return gpu.run(quick=True, out=tmp_path_factory.mktemp("bench") / "RESULTS_gpu_quick.md")


def test_every_table_and_target_is_written(quick):
    text = quick["path"].read_text()
    for heading in ("# One engine for CPU and GPU (issue 35)", "## Targets", "## 1. One velocity", "## 2. A trajectory"):
        assert heading in text
    for row in quick["targets"]:
        assert row[3] in ("met", "MISSED", "-", "blocked on the device"), row
    if not gpu._cuda():
        assert gpu.NO_DEVICE in text and quick["targets"][-1][3] == "blocked on the device"


def test_backends_agree_with_numpy(quick):
    # float64: the same sums, another BLAS (measured <= 6e-16); float32: its own error (measured ~5e-7)
    for (label, threads, n), (t, err) in quick["velocity"].items():
        assert t > 0
        assert err <= (1e-5 if "float32" in label else 1e-12), (label, threads, n, err)
    conversion, share = quick["conversion"]
    assert conversion >= 0 and share >= 0
