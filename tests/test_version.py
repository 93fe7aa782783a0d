"""The version is written once (``meanfield/_version.py``) and every place that states it reads it:
``pyproject.toml`` (dynamic), ``meanfield.__version__``, ``meanfield --version`` and the datasets'
``meanfield_version`` / ``source`` attributes."""

import pathlib
import re
import tomllib

import numpy as np
import pytest
import xarray as xr

import meanfield
from meanfield import _version
from meanfield.workflow import results
from meanfield.workflow.cli import main

REPO = pathlib.Path(meanfield.__file__).resolve().parents[1]


def test_the_version_is_0_2_0_and_defined_once():
    assert _version.__version__ == "0.2.0"
    assert meanfield.__version__ is _version.__version__
    # no other module of the package (nor the build file) writes a version string of its own
    text = "\n".join(p.read_text() for p in (REPO / "meanfield").rglob("*.py") if p.name != "_version.py")
    assert not re.search(r"__version__\s*=", text)


def test_pyproject_reads_the_version_module():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "meanfield._version.__version__"}


def test_cli_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as err:
        main(["--version"])
    assert err.value.code == 0 and capsys.readouterr().out.strip() == f"meanfield {_version.__version__}"


def test_dataset_attributes_carry_the_package_version():
    # provenance (written into every saved run and sweep point) and the CF "source" attribute
    assert results.provenance(command="test")["meanfield_version"] == _version.__version__
    ds = xr.Dataset({"w2": (("time",), np.zeros(2))}, coords={"time": [0.0, 1.0], "lat": [0.0], "lon": [0.0]})
    assert results.describe(ds).attrs["source"] == f"meanfield {_version.__version__}"
