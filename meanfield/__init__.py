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
    theory            closed forms of MODEL.md sections 2-3 (re-exports stability)
    stability         Funk-Hecke coefficients, growth rates sigma_l, critical noise
    transport         W2 distances on the sphere (the only POT user; imported on first use)
    simulate          solve_particles / solve_continuum: integrator + observe hooks
    paired            paired particle / PDE runs compared by W2 (imported on first use)
    config            RunConfig: the main job's settings, TOML in and out, validated
    checkpoint        integrator states of long runs, saved atomically; resume
    run               the main job: PDE + particles + W2 -> xarray Dataset (imported on first use)
    results           NetCDF datasets with config, schema and package version
    plotting          figures and animations (the only matplotlib user; imported on first use)
    sweep             parameter sweeps of the main job on dask.distributed
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


_LAZY = ("transport", "paired", "config", "checkpoint", "run", "results", "plotting", "sweep", "fastsum")


def __getattr__(name):
    if name in _LAZY:                # POT, xarray, matplotlib, dask are slow to import: load on first use
        return import_module(f".{name}", __name__)
    raise AttributeError(f"module 'meanfield' has no attribute {name!r}")
