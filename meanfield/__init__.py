"""meanfield: multi-head self-attention dynamics, as n particles and as a mean-field PDE on S^2.

The mathematics is specified in ``MODEL.md`` (shared docs); ``docs/`` explains the package.

Package map: four layers, imports flow downwards only and form no cycle, lazy imports included
(``tests/test_layers.py`` checks both; ``benchmarks/architecture.py`` counts them)::

    core/       the primitives
      validate          input checks shared by every public function (named ValueErrors), MASS_TOL
      cost              the one cost guard: memory and time estimated from sizes, refused above the limits
      choices           the allowed values of every string choice (samplings, W2 methods, ...), once
      heads             Head(M, V, beta, kernel, normalization) and presets
      kernels           KERNELS and NORMALIZATIONS: registries of what a head's kernel / normalization means
      sums              chunked kernel sums shared by particles and the continuum quadrature path
      backends          where the direct sums run (numpy, torch on CPU/CUDA): the only torch / array_api_compat user
      prefix            compiled causal prefix sums of zonal features on S^1 / S^2: the only numba user
      sinkhorn          the Sinkhorn scaling solve of doubly stochastic (Sinkhorn) attention
      funk_hecke        Funk-Hecke multipliers of zonal kernels on S^2 (and on S^{d-1}, Gegenbauer basis)
      zonal             ZonalOperator (zonal heads in spherical harmonics) and required_lmax
      bispherical       GeneralOperator: any head on S^2 as a bi-spherical-harmonic operator (MODEL.md section 8)
      sinkhorn          Sinkhorn scalings of one head (doubly stochastic attention): solve_scaling
      field_forces      the one per-head loop (kernel sums, then the normalization) of the PDE models
      sphere            SphereGrid(lmax): the only spherical-harmonic (ducc0/pyshtools) user
      tableaux          Butcher tableaux in a registry (SCHEMES), stability polynomials and reaches
      steppers          Stepper interface: explicit RK, and split (IMEX, ARS IMEX RK, exponential, Lawson) steppers y' = L y + N
      controllers       step-size control: fixed grid, embedded error control
      integrate         the one driver: integrate(rhs, y0, ...) -> Trajectory (t_eval, hooks, checkpoints)
      sde               token noise: stochastic steppers on S^{d-1} (Noise) of the one driver
      methods           METHODS: every scheme by name with its capability flags
      options           the driver's option objects: StepControl, SaveAt, Checkpointing, Monitor
      dense             dense output (cubic Hermite) and root-located events (Event) of the driver
      driver_parts      the driver's recorder, checkpoint schedule, progress bar, Brownian stream
      model             structural protocols of the models (Model, TokenModel, DensityModel, SplitModel, ...)
      initial           seeded token configurations (uniform, vMF, equiangular, orthonormal)
      densities         initial densities on S^2 and sampling particles from them
      axisymmetric      axisymmetric densities on S^{d-1}: the law of <x, e>, sampling particles from it
      random_heads      seeded random-weight ensembles (Gaussian, Wigner, GOE scores; V = +-M, random V)
      schedules         heads that change with t (layers): HeadSchedule, integrate_schedule
      resolution        is a truncated density resolved: negative mass, spectral tail, the monitor
    models/     the two models
      fastsum           spectral (Funk-Hecke) particle sums for zonal heads on S^2, and spectral_sum (the choice)
      generalsum        spectral particle sums for general heads on S^2 (bi-spherical operators), O(n)
      particles         ParticleSystem: the finite-n system in any dimension d
      continuum         ContinuumPDE: the mean-field continuity equation on S^2
      circle            CirclePDE: the mean-field PDE on S^1 in Fourier modes
      axisymmetric      AxisymmetricPDE: the PDE on S^{d-1} (any d) for axisymmetric data, Gegenbauer basis
      batched           BatchedSystem: B particle systems at once (shared or per-system heads, causal masks)
      causal            CausalSystem: causal (masked) attention at scale, direct sums (any d) or spectral prefix sums (S^1, S^2)
      causal_continuum  CausalCirclePDE, CausalSpherePDE: the causal continuum on S^1 / S^2 x positions [0, 1] (zonal heads)
      step_rules        the transformer's discrete updates (post-LN, nGPT, pre-LN, peri-LN) and their limits
      plans             how each model is solved: the RunPlan builders of the models' plan methods (checks, cost)
      encoder           a trained transformer's weights (EncoderWeights): its factored heads, bias report, numpy forward pass
    analysis/   what is measured on the models
      diagnostics       particle diagnostics (energy rates, radial shadows, Condition 8, entropies) and observer
      clustering        clustering measures of tokens (min / mean inner product, clusters; KD-tree path)
      cluster_tracking  clusters along trajectories: identities, masses, centres, merge events (tokens, density peaks)
      equilibria        stationary states of the axisymmetric noisy PDE (Newton), branches, free energy, spectra
      phase_transition  the degree-1 branch's classification: nu_#, nu_fold, nu_global, beta_*
      continuation      pseudo-arclength continuation with fold and branch-point detection, branch switching
      sphere_states     stationary states on the full S^2 (Newton-Krylov, phase conditions), their spectra
      mmd               the spectral MMD between particles and a density, and its iid expectation
      field_diagnostics continuum diagnostics and the resolution monitor
      theory            closed forms of MODEL.md sections 2-3 (equiangular dynamics, phi, beta*)
      stability         Funk-Hecke coefficients, growth rates sigma_l, critical noise
      normalization     equiangular reduced ODEs of the step rules' limits (post-LN, nGPT, pre-LN, peri-LN)
      transport         W2 distances on the sphere (the only POT user) and TransportResult
      semidiscrete      W2 between particles and a continuous density: Laguerre cells on S^2, damped Newton
      ensembles         measures over a batch of systems (one-cluster fraction, pair density, Gram rank)
      axisymmetric      hooks for the circle/axisymmetric PDEs; exact 1-D W2 of the angle marginal
      head_measures     the paper's hypotheses measured on heads: orthogonality delta, alignment, symmetry, effective beta,
                        along trajectories
    workflow/   runs, files and the command line
      simulate          solve_particles / solve_continuum: the names of solve for particles and the continuum
      solve             solve(model, start, t_final): the one loop over the models' plans, observers and monitors added
      ramp              noisy particles under a piecewise-constant nu ramp (hysteresis, escape times)
      paired            paired particle / PDE runs compared by W2 (the main job's engine)
      reduced           solve_reduced: the name of solve for the circle / axisymmetric PDEs
      inputs            research inputs of configs: coefficient files, zonal profiles, token files
      schema            the one schema of every config: sections of checked keys, TOML in and out, ConfigError
      config            RunConfig: the main job's settings, TOML in and out, validated (files resolved)
      checkpoint        integrator states of long runs, saved atomically; resume
      run               the main job: PDE + particles + W2 -> xarray Dataset
      preflight         every check before the main job computes; its time and memory estimate (piloted)
      jobs              the job folder's lifecycle: lock, refusals, checkpoint marker, result, figures
      extend            continue a finished run to a later time (meanfield run --extend DIR --t-final T)
      results           NetCDF datasets with config, schema and package version
      plotting          figures and animations (the only matplotlib user)
      view              meanfield view: one self-contained interactive HTML page of a result (the only plotly user)
      pretrained        the only safetensors / tokenizers user: BERT / GPT-2 checkpoints -> EncoderWeights, tokenize
      tasks             a generic resumable task farm on dask.distributed (index, one file per task)
      sweep             parameter sweeps of the main job (run_tasks over configs)
      phase_diagram     beta x t phase diagrams of ensembles (dataset, figure, CLI)
      equilibria_config the settings of meanfield equilibria (TOML in and out, validated)
      equilibria_branches  the branches of stationary states a config asks for (continuation, stability)
      equilibria_sphere the full-S^2 check of those branches (Newton-Krylov re-solve, S^2 spectra)
      equilibria_general  general heads: the primary branch on the full sphere, its branch points, switches
      equilibria_job    meanfield equilibria: branches of stationary states -> NetCDF + bifurcation figure
      transition_map    the transition type, nu_#, nu_fold, nu_global over (d, beta) as dask tasks
      cli               the ``meanfield`` command

``meanfield/_version.py`` holds the version, the one module outside the layers (any layer may import it).

What the top level exports (``meanfield.__all__``, all bound when ``import meanfield`` runs):

* the objects of a first script: the heads and their presets (``Head``, ``scalar_heads``, ...), the
  models (``ParticleSystem``, ``ContinuumPDE``, ``CirclePDE``, ``AxisymmetricPDE``), ``SphereGrid``,
  the driver (``integrate``, ``SCHEMES``, ``Trajectory``), ``required_lmax``, the solvers
  (``solve_particles``, ``solve_continuum``, ``solve_reduced``), the density inputs
  (``zonal_density``, ``density_from_coefficients``) and ``__version__``;
* five modules whose functions a script calls by module (``mf.theory.beta_star(...)``):
  ``densities``, ``initial`` (of ``core``), ``diagnostics``, ``field_diagnostics``, ``theory`` (of
  ``analysis``).  They are the modules themselves, bound as attributes of the package: there is no
  second module name (``import meanfield.theory`` fails; ``from meanfield import theory`` and
  ``from meanfield.analysis import theory`` give the same module).

Every other name is imported from the one module that defines it (``from meanfield.analysis
import transport``, ``from meanfield.workflow.jobs import main_job``).  No name has a second home:
the short module names of version 0.1 (``meanfield.transport``, ``meanfield.run``, ...) and the
re-exports kept for them were removed in 0.2.0.
"""

from ._version import __version__
from .analysis import diagnostics, field_diagnostics, theory
from .core import densities, initial
from .core.heads import (
                         Head,
                         approx_orthogonal_heads,
                         orthogonal_block_heads,
                         perturbed_value_heads,
                         random_symmetric_heads,
                         scalar_heads,
)
from .core.integrate import Trajectory, integrate
from .core.methods import METHODS
from .core.options import Checkpointing, Monitor, SaveAt, StepControl
from .core.sde import Noise
from .core.sphere import SphereGrid
from .core.tableaux import SCHEMES
from .core.zonal import required_lmax
from .models.axisymmetric import AxisymmetricPDE
from .models.circle import CirclePDE
from .models.continuum import ContinuumPDE
from .models.particles import ParticleSystem
from .workflow.inputs import density_from_coefficients, zonal_density
from .workflow.reduced import solve_reduced
from .workflow.simulate import solve_continuum, solve_particles
from .workflow.solve import solve

__all__ = ["Head", "scalar_heads", "orthogonal_block_heads", "random_symmetric_heads", "perturbed_value_heads",
           "approx_orthogonal_heads", "ParticleSystem", "ContinuumPDE", "CirclePDE", "AxisymmetricPDE", "SphereGrid",
           "integrate", "SCHEMES", "METHODS", "Trajectory", "Noise", "StepControl", "SaveAt", "Checkpointing", "Monitor",
           "required_lmax", "solve", "solve_particles", "solve_continuum", "solve_reduced", "zonal_density",
           "density_from_coefficients", "densities", "initial", "diagnostics", "field_diagnostics", "theory",
           "__version__"]
