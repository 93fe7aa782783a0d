"""README's commands and .ci/run stay in step (CI must run exactly README's test command)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_ci_runs_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = re.search(r"TEST_COMMAND='(.+)'", ci).group(1)
    assert test_command in readme_commands()
    assert test_command.endswith('-m pytest -m "not slow"')        # both tiers: library and extended


def test_readme_main_job_command_uses_the_cli():
    first = readme_commands()[0]
    assert first.startswith('python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]"')
    assert first.endswith(".venv/bin/meanfield run")


def test_the_extended_tier_holds_studies_benchmarks_and_docs():
    # the marker comes from tests/conftest.py by file name; collect-only costs a few seconds
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-m", "extended", "-p", "no:cacheprovider"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = {line.split("::")[0] for line in out.splitlines() if "::" in line}
    names = {Path(f).name for f in files}
    assert names and all(n.startswith(("test_study_", "test_benchmarks_", "test_docs")) for n in names)
    assert any(n.startswith("test_study_") for n in names) and any(n.startswith("test_benchmarks_") for n in names)
    assert "test_docs.py" in names
    default = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert not ({Path(line.split("::")[0]).name for line in default.splitlines() if "::" in line} & names)
