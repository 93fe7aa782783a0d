"""Helpers the benchmark scripts share: Markdown tables and their section of ``RESULTS.md``."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

import numpy as np


def table(header, rows):
    """A Markdown table: ``header`` (sequence of str) and ``rows`` (sequences of anything ``str`` formats)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def write_section(path: Path, section: str, md: str) -> None:
    """Write ``md`` (starting with the heading ``section``) as the last section of ``path``, replacing
    the old one from ``section`` on and keeping what comes before it."""
    old = path.read_text() if path.exists() else ""
    head = old.split("\n" + section)[0].rstrip("\n") if section in old else old.rstrip("\n")
    path.write_text(head + "\n\n" + md + "\n")


def provenance(load0, load1, total, command, load_note="shared machine"):
    """The line under a section heading: date, machine, numpy, load average at start / end, total time, command."""
    return (f"Date: {datetime.datetime.now():%Y-%m-%d %H:%M}. Machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"numpy {np.__version__}. Load average at start / end: {load0:.1f} / {load1:.1f} ({load_note}). "
            f"Total {total:.0f} s. Command: `{command}`.")


def finish(summary, section, md, write, path):
    """Print the summary lines and, when ``write``, put ``md`` as ``section`` of ``path``."""
    print("\n" + "\n".join(summary))
    if write:
        write_section(path, section, md)
