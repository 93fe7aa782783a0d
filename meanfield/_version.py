"""The package version, defined here once.

``pyproject.toml`` reads it (``dynamic = ["version"]``), and so do ``meanfield.__version__``,
``meanfield --version`` and the ``meanfield_version`` attribute of every dataset.  Nothing else
states the version.
"""

__version__ = "0.2.0"
