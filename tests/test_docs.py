"""Docs that run: every ```python block of README.md and docs/*.md, and every gallery script.

The blocks of one file run in one fresh interpreter (imports paid once), each block in its own
namespace, in a temporary working directory; a block that needs a finished run
(``meanfield-output/result.nc``) finds a small one there.  A failing block is reported by file,
index and first line.

The gallery (``examples/plot_*.py``) replaced the guide's snippets: each script runs here as a plain
script in a temporary directory (so ``pytest -m extended`` checks the recipes without Sphinx), and the
documentation build executes them again to draw their pages (``.ci/docs``).  The guide keeps no
```python block of its own; each of its links to a script must name one that exists.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SMALL_RUN = {"pde": {"lmax": 11}, "particles": {"n": 50}, "integrator": {"t_final": 0.2, "n_frames": 3},
             "outputs": {"figures": False, "animation": False}}

RUNNER = r'''
import json, sys, traceback
blocks = json.loads(sys.stdin.read())
for i, code in enumerate(blocks):
    try:
        exec(compile(code, f"<block {i}>", "exec"), {"__name__": "__main__"})
    except BaseException:
        print(f"BLOCK {i} FAILED: {code.strip().splitlines()[0]}")
        traceback.print_exc()
        sys.exit(1)
print(f"{len(blocks)} blocks ran")
'''


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


GALLERY = sorted((ROOT / "examples").glob("plot_*.py"))


def test_the_docs_have_python_blocks():
    assert sum(len(python_blocks(f)) for f in FILES) >= 2           # README and getting started


def test_the_gallery_replaces_the_guide_snippets():
    guide = (ROOT / "docs" / "guide.md").read_text()
    assert not python_blocks(ROOT / "docs" / "guide.md")            # its examples are the gallery's scripts
    assert 10 <= len(GALLERY) <= 15                                  # issue 25: 10-15 recipes
    linked = set(re.findall(r"\]\(\.\./examples/(plot_\w+\.py)\)", guide))
    assert linked and linked <= {p.name for p in GALLERY}             # no link to a missing script
    for path in GALLERY:                                             # sphinx-gallery needs a titled docstring
        text = path.read_text()
        title, underline = text.split("\n")[1:3]
        assert text.startswith('"""') and title and underline == "=" * len(title), path.name


@pytest.mark.parametrize("path", GALLERY, ids=lambda p: p.name)
def test_every_gallery_script_runs(path, tmp_path):
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg",
                                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert proc.returncode == 0, f"{path.name}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("path", [f for f in FILES if python_blocks(f)], ids=lambda p: p.name)
def test_every_python_block_runs(path, tmp_path):
    import json

    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.jobs import main_job

    blocks = python_blocks(path)
    if any("meanfield-output/result.nc" in b for b in blocks):
        main_job(RunConfig.from_dict(SMALL_RUN), tmp_path / "meanfield-output", progress=False)
    proc = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(blocks), capture_output=True, text=True,
                          cwd=tmp_path, timeout=600,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg"))
    assert proc.returncode == 0, f"{path.name}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert f"{len(blocks)} blocks ran" in proc.stdout


def test_ci_builds_the_docs_with_readme_command():
    readme = (ROOT / "README.md").read_text()
    docs_command = re.search(r"DOCS_COMMAND='(.+)'", (ROOT / ".ci" / "docs").read_text()).group(1)
    assert docs_command in re.findall(r"```bash\n(.+?)\n```", readme)
    assert docs_command.endswith("-m sphinx -W --keep-going -b html docs docs/_build/html")   # warnings as errors
