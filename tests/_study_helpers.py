"""Shared plumbing of the study tests (tests/test_study_*.py): one quick run per test module."""

import importlib

import pytest

from studies._common import load_json


def quick_study_fixture(name, with_report=False):
    """A module-scoped fixture that runs ``studies.<name>`` once in quick mode into a fresh folder.

    Returns ``(out, summary, path)`` with ``path`` the written ``report.md`` if ``with_report``,
    else ``(out, summary, data)`` with ``data`` the study's ``data.json``.
    """
    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory):
        out = tmp_path_factory.mktemp(name)
        summary = importlib.import_module(f"studies.{name}.run").run(out, quick=True)
        if with_report:
            return out, summary, importlib.import_module(f"studies.{name}.report").report(out)
        return out, summary, load_json(out / "data.json")

    return fixture
