"""Helpers the benchmark scripts share: Markdown tables and their section of ``RESULTS.md``."""

from __future__ import annotations

from pathlib import Path


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
