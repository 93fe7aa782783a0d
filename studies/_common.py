"""Shared plumbing for studies: command line, data files and the markdown report.

Every study package ``studies/<name>/`` has

* ``run.py`` with ``run(out_dir: Path, quick: bool = False) -> dict``: computes and writes its
  data (``data.npz`` / ``data.json``) into ``out_dir`` and returns the headline numbers;
* ``report.py`` with ``report(data_dir: Path, out_dir: Path | None = None) -> Path``: reads the
  data, writes PNG figures and ``report.md`` (a table: claim, what we measured, verdict) and
  returns the report's path.

Full-mode outputs are committed in ``studies/<name>/output/``; quick modes run in the tests.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

__all__ = ["main", "save_json", "load_json", "open_study_data", "save_figure", "markdown_table", "write_report", "study_dir"]

ROOT = Path(__file__).resolve().parent


def study_dir(name: str) -> Path:
    return ROOT / name


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, (np.floating, float)):
        return None if not np.isfinite(x) else float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def save_json(path, data) -> Path:
    """Write a JSON file (numpy scalars/arrays converted; non-finite floats become null)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(data), indent=2, sort_keys=True))
    return path


def load_json(path):
    return json.loads(Path(path).read_text())


def open_study_data(data_dir, out_dir=None):
    """For a report: ``(out, arrays, summary)`` -- the output folder (default ``data_dir``, created),
    the arrays of ``data.npz`` as a dict (empty if there is none) and ``data.json``."""
    data_dir = Path(data_dir)
    out = Path(out_dir) if out_dir is not None else data_dir
    out.mkdir(parents=True, exist_ok=True)
    npz = data_dir / "data.npz"
    arrays = dict(np.load(npz)) if npz.is_file() else {}
    return out, arrays, load_json(data_dir / "data.json")


def save_figure(fig, path, dpi=110):
    """Lay out, write (PNG) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def markdown_table(header, rows) -> str:
    """A markdown table; ``|`` inside a cell is escaped so it cannot split the cell."""
    cell = lambda c: str(c).replace("\\|", "|").replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_report(path, title, intro, claims, figures=(), notes="") -> Path:
    """Write ``report.md``: title, intro, a claims table (claim, measured, verdict), figures, notes."""
    parts = [f"# {title}", "", intro.strip(), "", "## Claims and verdicts", "",
             markdown_table(["claim", "what we measured", "verdict"], claims), ""]
    for fname, caption in figures:
        parts += [f"![{caption}]({fname})", "", f"*{caption}*", ""]
    if notes:
        parts += ["## Notes", "", notes.strip(), ""]
    path = Path(path)
    path.write_text("\n".join(parts))
    return path


def main(run, report, default_out: Path, doc: str = ""):
    """Command line of a study: ``--quick`` and ``--out DIR`` (default: the study's output/)."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0] if doc else None)
    p.add_argument("--quick", action="store_true", help="small fast version (what the tests run)")
    p.add_argument("--out", type=Path, default=None, help=f"output folder (default {default_out})")
    args = p.parse_args()
    out = args.out or (default_out if not args.quick else default_out.parent / "output-quick")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    summary = run(out, quick=args.quick)
    path = report(out, out)
    print(json.dumps(_plain(summary), indent=2))
    print(f"report: {path} ({time.perf_counter() - t0:.1f} s)")
