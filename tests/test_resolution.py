"""One resolution rule for the three PDEs (meanfield.core.resolution): negative mass, spectral tail and
the monitor, and the continuum observers' shared keys."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis import axisymmetric as ax_hooks
from meanfield.analysis import field_diagnostics as fd
from meanfield.core import resolution
from meanfield.core.densities import vmf_density


def test_negative_mass_and_tail_definitions():
    f = np.array([1.0, -0.5, 2.0, -0.25])
    # -int min(f, 0) with the mean as the quadrature: (0.5 + 0.25) / 4, exact in binary
    assert resolution.negative_mass(f, np.mean) == 0.1875
    assert resolution.negative_mass(np.abs(f), np.mean) == 0.0          # no negative part
    S = np.array([7.0, 3.0, 0.0, 1.0])
    # sqrt(S_3 / (S_1 + S_2 + S_3)) = 1/2 exactly; degree 0 never counts; no power above degree 0: 0
    assert resolution.spectral_tail(S, 2) == 0.5
    assert resolution.spectral_tail(np.array([1.0, 0.0, 0.0]), 1) == 0.0


def _pdes():
    heads = mf.scalar_heads([1.0], 3, beta=2.0)
    sphere = mf.ContinuumPDE(heads, lmax=12, kernel_tol=1e-6)
    axi = mf.AxisymmetricPDE(heads, 3, 12)
    circ = mf.CirclePDE(mf.scalar_heads([1.0], 2, beta=2.0), 12)
    return [(sphere, sphere.state(vmf_density(sphere.grid, [0, 0, 1.0], 30.0)), fd.field_resolution_monitor),
            (axi, axi.state(axi.project_profile(lambda t: np.exp(30 * t))), ax_hooks.reduced_resolution_monitor),
            (circ, circ.state(circ.project(lambda th: np.exp(30 * np.cos(th)))), ax_hooks.reduced_resolution_monitor)]


@pytest.mark.parametrize("k", [0, 1, 2], ids=["sphere", "axisymmetric", "circle"])
def test_one_monitor_rule_for_every_pde(k):
    pde, y, monitor = _pdes()[k]
    # a concentrated start (kappa 30) at degree 12: its tail is far above 1e-6, so the rule stops it
    msg = monitor(pde, 1e-6, np.inf)(0.0, y)
    assert msg.startswith("density no longer resolved") and "spectral tail" in msg
    assert monitor(pde, np.inf, np.inf)(0.0, y) is None                 # inf never stops, for every model
    with pytest.raises(ValueError, match="tail_tol must be .*received nan"):
        monitor(pde, np.nan)
    with pytest.raises(ValueError, match="negative_tol must be .*received -1"):
        monitor(pde, 1e-3, -1.0)


def test_continuum_observers_share_keys():
    sphere, y, _ = _pdes()[0]
    axi, yb, _ = _pdes()[1]
    rec_s, rec_a = fd.field_observer(sphere)(0.0, y), ax_hooks.reduced_observer(axi)(0.0, yb)
    # the reduced PDEs record a subset of the S^2 PDE's keys, each with the same meaning
    assert set(rec_a) == {"mass", "energy", "energy_head", "boltzmann_entropy", "negative_mass", "spectral_tail"}
    assert set(rec_a) <= set(rec_s) and "relative_entropy" in rec_s and "entropy" not in rec_s
    # energy is the sum of energy_head in both (the same reduction of the same array: exact)
    assert rec_a["energy"] == rec_a["energy_head"].sum() and rec_s["energy"] == rec_s["energy_head"].sum()
