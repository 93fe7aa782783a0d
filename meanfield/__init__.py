"""meanfield: multi-head self-attention dynamics, as n particles and as a mean-field PDE on S^2.

The mathematics is specified in ``MODEL.md`` (shared docs); ``docs/`` explains the package.

Package map (imports flow downwards only)::

    heads             Head(M, V, beta, kernel, normalization) and presets
    integrate         explicit Runge-Kutta tableaux in a registry; integrate(rhs, y0, ...) -> Trajectory
    sphere            SphereGrid(lmax): the only spherical-harmonic (ducc0/pyshtools) user
    kernels           kernel sums shared by particles and the continuum quadrature path
    initial           seeded token configurations (uniform, vMF, equiangular, orthonormal)
    densities         initial densities on S^2 and sampling particles from them
    particles         ParticleSystem: the finite-n system in any dimension d
    continuum         ContinuumPDE: the mean-field continuity equation on S^2
    diagnostics       particle diagnostics (energy rates, radial shadows, Condition 8, entropy, clusters)
    field_diagnostics continuum diagnostics and the resolution monitor
    theory            closed forms of MODEL.md sections 2-3
    transport         W2 distances on the sphere (the only POT user; imported on first use)
    simulate          solve_particles / solve_continuum: integrator + observe hooks
    cli               the ``meanfield`` command
"""

from importlib import import_module

from . import densities, diagnostics, field_diagnostics, initial, theory
from .continuum import ContinuumPDE
from .heads import (Head, approx_orthogonal_heads, orthogonal_block_heads, perturbed_value_heads,
                    random_symmetric_heads, scalar_heads)
from .integrate import SCHEMES, Trajectory, integrate
from .particles import ParticleSystem
from .simulate import solve_continuum, solve_particles
from .sphere import SphereGrid

__version__ = "0.1.0"

__all__ = ["Head", "scalar_heads", "orthogonal_block_heads", "random_symmetric_heads", "perturbed_value_heads",
           "approx_orthogonal_heads", "ParticleSystem", "ContinuumPDE", "SphereGrid", "integrate", "SCHEMES",
           "Trajectory", "solve_particles", "solve_continuum", "densities", "diagnostics", "field_diagnostics",
           "initial", "theory", "transport", "__version__"]


def __getattr__(name):
    if name == "transport":          # POT is slow to import: load it on first use
        return import_module(".transport", __name__)
    raise AttributeError(f"module 'meanfield' has no attribute {name!r}")
