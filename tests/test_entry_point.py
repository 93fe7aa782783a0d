"""The console entry point (meanfield_cli) handles SIGINT / SIGTERM before importing the package:
a signal during the imports prints one line and exits 128 + signal, never a traceback (issue 14, item 1)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")


def _caught(pid, signum):
    """True once process ``pid`` has a handler for ``signum`` (SigCgt of /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to see when the handler is installed")
@pytest.mark.parametrize("signum, status, name", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C")])
def test_signal_during_the_package_imports_prints_one_line(signum, status, name):
    proc = subprocess.Popen([sys.executable, "-m", "meanfield_cli", "config", "--default"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    # SIGTERM is not caught by Python by default: once it is, meanfield_cli has installed its handlers and is
    # importing the package (which takes far longer than this loop's 1 ms polls)
    while not _caught(proc.pid, signal.SIGTERM) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    assert proc.poll() is None, "the command ended before the handler was seen"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode == status
    assert err.strip().splitlines() == [f"meanfield: interrupted ({name}) while starting"]
    assert out == ""                                           # nothing was printed: the command did not run


def test_the_console_script_is_the_entry_point():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'meanfield = "meanfield_cli:main"' in text
    proc = subprocess.run([sys.executable, "-m", "meanfield_cli", "--version"], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("meanfield ")
