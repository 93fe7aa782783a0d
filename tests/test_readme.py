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
    assert test_command.endswith("-m pytest")


def test_readme_main_job_command_uses_the_cli():
    first = readme_commands()[0]
    assert first.startswith('python3 -m venv .venv && .venv/bin/pip install -q -e ".[test]"')
    assert first.endswith(".venv/bin/meanfield run")
