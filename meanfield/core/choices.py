"""The allowed values of every string choice of the package, each defined once.

Modules that accept one of these choices import the tuple from here, under its name here (no
second name); :func:`meanfield.core.validate.choice` checks a value against it.  Kernels and normalizations live with the heads (their registries), schemes
with the integrator (``SCHEMES``).

Each tuple lists the default first where there is one.
"""

from __future__ import annotations

__all__ = ["SAMPLINGS", "SAMPLING_NEGATIVE_POLICIES", "W2_SOLVERS", "W2_METHODS", "W2_METRICS",
           "W2_NEGATIVE_POLICIES", "GEOMETRIES", "SUMMATION_PATHS", "SUMMATIONS", "CONTINUUM_SUMMATIONS",
           "SWEEP_MODES"]

SAMPLINGS = ("iid", "stratified")
"""How particles are drawn from a density (:func:`meanfield.core.densities.sample_particles` ``method``)."""

SAMPLING_NEGATIVE_POLICIES = ("raise", "clip")
"""What sampling does with a density of negative mass (``sample_particles(negative=...)``)."""

W2_SOLVERS = ("exact", "sinkhorn", "sliced", "semidiscrete")
"""The W2 solvers themselves ("semidiscrete": particles against the continuous density only)."""

W2_METHODS = ("auto",) + W2_SOLVERS
"""W2 ``method`` of :mod:`meanfield.analysis.transport` and the run config's ``outputs.w2_method``: a solver, or ``"auto"``."""

W2_METRICS = ("geodesic", "chordal")
"""Ground cost of the W2 distances on the sphere (``metric``)."""

W2_NEGATIVE_POLICIES = ("error", "drop")
"""What W2 against a density does with negative quadrature weights (``negative``)."""

GEOMETRIES = ("sphere", "flat")
"""``ParticleSystem(geometry=...)``: spherical dynamics (tangent projection, tokens on S^{d-1}) or flat (R^d)."""

SUMMATION_PATHS = ("direct", "spectral")
"""How the particle interaction sums are computed: O(n^2) direct, or spectral (Funk-Hecke) fast sums."""

SUMMATIONS = ("auto",) + SUMMATION_PATHS
"""``ParticleSystem(summation=...)``: a path, or ``"auto"`` (chosen by heads and size)."""

CONTINUUM_SUMMATIONS = ("auto", "spectral", "quadrature")
"""``ContinuumPDE(summation=...)`` and ``CirclePDE(summation=...)``: how the PDE's velocity is computed: spectrally (Funk-Hecke multipliers for zonal
heads, bi-spherical operators for any other heads; ``"auto"`` is the same), or by direct quadrature over the grid
nodes (the O(nodes^2) reference)."""

SWEEP_MODES = ("grid", "list")
"""Sweep files: Cartesian product of the parameter lists, or their zip."""
