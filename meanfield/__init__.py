"""meanfield: multi-head self-attention dynamics, as n particles and as a mean-field PDE on S^2.

The mathematics is specified in ``MODEL.md`` (shared docs); ``docs/`` explains the package.

Package map: four layers, imports flow downwards only (``tests/test_layers.py`` checks it)::

    core/       the primitives
      validate          input checks shared by every public function (named ValueErrors)
      choices           the allowed values of every string choice (samplings, W2 methods, ...), once
      heads             Head(M, V, beta, kernel, normalization) and presets
      kernels           KERNELS and NORMALIZATIONS: registries of what a head's kernel / normalization means
      sums              chunked kernel sums shared by particles and the continuum quadrature path
      funk_hecke        Funk-Hecke multipliers of zonal kernels on S^2 (and on S^{d-1}, Gegenbauer basis)
      zonal             ZonalOperator (zonal heads in spherical harmonics) and required_lmax
      sphere            SphereGrid(lmax): the only spherical-harmonic (ducc0/pyshtools) user
      tableaux          Butcher tableaux in a registry (SCHEMES), stability polynomials and reaches
      steppers          Stepper interface: explicit RK, and split (IMEX, ARS IMEX RK, exponential, Lawson) steppers y' = L y + N
      controllers       step-size control: fixed grid, embedded error control
      integrate         the one driver: integrate(rhs, y0, ...) -> Trajectory (t_eval, hooks, checkpoints)
      sde               token noise: stochastic steppers on S^{d-1} (Noise) of the one driver
      methods           METHODS: every scheme by name with its capability flags
      options           the driver's option objects: StepControl, SaveAt, Checkpointing
      dense             dense output (cubic Hermite) and root-located events (Event) of the driver
      driver_parts      the driver's recorder, checkpoint schedule, progress bar, Brownian stream
      model             structural protocols of the models (Model, TokenModel, DensityModel, SplitModel, ...)
      initial           seeded token configurations (uniform, vMF, equiangular, orthonormal)
      densities         initial densities on S^2 and sampling particles from them
      axisymmetric      axisymmetric densities on S^{d-1}: the law of <x, e>, sampling particles from it
      random_heads      seeded random-weight ensembles (Gaussian, Wigner, GOE scores; V = +-M, random V)
      schedules         heads that change with t (layers): HeadSchedule, integrate_schedule
    models/     the two models
      fastsum           spectral (Funk-Hecke) particle sums for zonal heads on S^2
      particles         ParticleSystem: the finite-n system in any dimension d
      continuum         ContinuumPDE: the mean-field continuity equation on S^2
      circle            CirclePDE: the mean-field PDE on S^1 in Fourier modes
      axisymmetric      AxisymmetricPDE: the PDE on S^{d-1} (any d) for axisymmetric data, Gegenbauer basis
      batched           BatchedSystem: B particle systems at once (shared or per-system heads, causal masks)
      step_rules        the transformer's discrete updates (post-LN, nGPT, pre-LN, peri-LN) and their limits
    analysis/   what is measured on the models
      diagnostics       particle diagnostics (energy rates, radial shadows, Condition 8, entropy, clusters)
      field_diagnostics continuum diagnostics and the resolution monitor
      theory            closed forms of MODEL.md sections 2-3 (re-exports stability)
      stability         Funk-Hecke coefficients, growth rates sigma_l, critical noise
      transport         W2 distances on the sphere (the only POT user; imported on first use)
      semidiscrete      W2 between particles and a continuous density: Laguerre cells on S^2, damped Newton
      mmd               the spectral MMD between particles and a density, and its iid expectation
      ensembles         measures over a batch of systems (one-cluster fraction, pair density, Gram rank)
      axisymmetric      hooks for the circle/axisymmetric PDEs; exact 1-D W2 of the angle marginal
    workflow/   runs, files and the command line
      simulate          solve_particles / solve_continuum: integrator + observe hooks
      paired            paired particle / PDE runs compared by W2 (the main job's engine)
      reduced           solve_reduced: the circle / axisymmetric PDEs with observers and monitor
      config            RunConfig: the main job's settings, TOML in and out, validated
      inputs            research inputs of configs: coefficient files, zonal profiles, head matrices
      checkpoint        integrator states of long runs, saved atomically; resume
      extend            continue a finished run to a later time (meanfield run --extend DIR --t-final T)
      run               the main job: PDE + particles + W2 -> xarray Dataset
      results           NetCDF datasets with config, schema and package version
      plotting          figures and animations (the only matplotlib user)
      sweep             parameter sweeps of the main job on dask.distributed
      phase_diagram     beta x t phase diagrams of ensembles (dataset, figure, CLI)
      cli               the ``meanfield`` command

Every module of version 0.1 is also importable by its old short name (``meanfield.transport``,
``meanfield.run``, ...): see :data:`MODULES`.
"""

import importlib.abc
import importlib.util
import sys
from importlib import import_module

from .analysis import diagnostics, field_diagnostics, theory
from .core import densities, initial
from .core.heads import (Head, approx_orthogonal_heads, orthogonal_block_heads, perturbed_value_heads,
                         random_symmetric_heads, scalar_heads)
from .core.integrate import SCHEMES, Trajectory, integrate
from .core.sphere import SphereGrid
from .core.zonal import required_lmax
from .models.continuum import ContinuumPDE
from .models.particles import ParticleSystem
from .models.axisymmetric import AxisymmetricPDE
from .models.circle import CirclePDE
from .workflow.simulate import solve_continuum, solve_particles
from .workflow.reduced import solve_reduced
from .workflow.inputs import density_from_coefficients, zonal_density

__version__ = "0.1.0"

__all__ = ["Head", "scalar_heads", "orthogonal_block_heads", "random_symmetric_heads", "perturbed_value_heads",
           "approx_orthogonal_heads", "ParticleSystem", "ContinuumPDE", "SphereGrid", "integrate", "SCHEMES",
           "Trajectory", "required_lmax", "solve_particles", "solve_continuum", "densities", "diagnostics", "field_diagnostics",
           "initial", "theory", "transport", "__version__"]
__all__ += ["CirclePDE", "AxisymmetricPDE", "solve_reduced"]
__all__ += ["zonal_density", "density_from_coefficients"]
from .core.methods import METHODS                    # noqa: E402  (the one method table)
from .core.sde import Noise                          # noqa: E402
from .core.options import Checkpointing, SaveAt, StepControl    # noqa: E402  (the driver's option objects)
__all__ += ["METHODS", "Noise", "StepControl", "SaveAt", "Checkpointing"]

MODULES = {
    "validate": "core.validate", "heads": "core.heads", "kernels": "core.kernels", "funk_hecke": "core.funk_hecke",
    "sphere": "core.sphere", "integrate": "core.integrate", "initial": "core.initial", "densities": "core.densities",
    "particles": "models.particles", "fastsum": "models.fastsum", "continuum": "models.continuum",
    "diagnostics": "analysis.diagnostics", "field_diagnostics": "analysis.field_diagnostics",
    "theory": "analysis.theory", "stability": "analysis.stability", "transport": "analysis.transport",
    "simulate": "workflow.simulate", "paired": "workflow.paired", "config": "workflow.config",
    "checkpoint": "workflow.checkpoint", "run": "workflow.run", "results": "workflow.results",
    "plotting": "workflow.plotting", "sweep": "workflow.sweep", "cli": "workflow.cli",
    "extend": "workflow.extend",
}
"""Short module name -> its place in the layers (``meanfield.<short>`` imports ``meanfield.<place>``)."""


class _ShortNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import meanfield.transport`` returns the module ``meanfield.analysis.transport`` itself."""

    def find_spec(self, fullname, path=None, target=None):
        prefix, _, short = fullname.partition(".")
        if prefix == __name__ and short in MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return import_module(f"{__name__}.{MODULES[spec.name.partition('.')[2]]}")

    def exec_module(self, module):
        pass


if not any(isinstance(f, _ShortNames) for f in sys.meta_path):
    sys.meta_path.append(_ShortNames())
for _short, _place in MODULES.items():     # already loaded: register the short name now, so that a later
    if f"{__name__}.{_place}" in sys.modules:   # `import meanfield.integrate` cannot rebind mf.integrate
        sys.modules.setdefault(f"{__name__}.{_short}", sys.modules[f"{__name__}.{_place}"])


def __getattr__(name):
    if name in MODULES:          # POT, xarray, matplotlib, dask are slow to import: load on first use
        return import_module(f".{MODULES[name]}", __name__)
    raise AttributeError(f"module 'meanfield' has no attribute {name!r}")
