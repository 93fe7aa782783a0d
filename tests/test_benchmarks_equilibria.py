"""benchmarks/equilibria.py in its quick mode: every table is written and the numbers that are correctness (not
speed) hold; times are not asserted (speed is measured by the script, never by a test)."""

import pytest

from benchmarks import equilibria


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return equilibria.run(quick=True, write=True, path=tmp_path_factory.mktemp("bench") / "RESULTS_equilibria.md")


def test_tables_and_targets(quick):
    for heading in ("### Targets", "### 1.", "### 2.", "### 3.", "### 4.", "### 5.", "### 6."):
        assert heading in quick["md"]
    assert len(quick["targets"]) == 5 and all(t[3] in ("met", "MISSED") for t in quick["targets"])


def test_correctness_columns(quick):
    # beta_* from the branch within the 1e-6 of the Bessel root; the S^2 branch equals the axisymmetric one
    assert max(float(r[3]) for r in quick["beta_star"]) <= 1e-6
    assert quick["branch"]["ok"] and quick["branch"]["err"] <= 1e-9
    assert quick["newton"]["krylov"] <= 100
    # every eigenvalue found at uniform is a sigma_l (ARPACK tolerance 1e-12; central differences exact for mean)
    assert all(float(r[3]) <= 1e-8 for r in quick["spectrum"])
