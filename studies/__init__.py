"""Reproducible research studies: ``studies/<name>/run.py`` (data) and ``report.py`` (figures + report).

Run one from the repository root with ``python -m studies.<name>.run [--quick] [--out DIR]``
(it runs the study and then its report), or through ``meanfield study NAME [--quick]``.
"""
