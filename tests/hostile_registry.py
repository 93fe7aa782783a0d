"""The hostile-input registry (issue 26, item 4): every public entry point, a valid call and its bad values.

``REGISTRY`` (filled by ``hostile_cases_core`` and ``hostile_cases_analysis``) maps an entry point's
name to a :class:`Spec`: a function taking keyword arguments, a valid baseline call (``base()`` -> kwargs, built lazily and cached) and, per argument, the bad values that must be
refused with a ``ValueError`` naming the argument (``bad``: types and values; ``huge``: sizes whose cost
must be refused before anything is allocated or started).  ``edge`` values are legal but extreme: they
must give a finite result or a named refusal.  ``tests/test_hostile_api.py`` runs every case (and
hypothesis-generated ones) and fails for any public name without an entry; ``benchmarks/hostile_probe.py``
runs the same cases in capped child processes and tallies the outcomes.

``SURFACE`` lists what must be covered: ``meanfield.__all__``, the public callables of the public modules
it exposes and of the modules named by issue 26, and the main methods of the models of the protocol
(``core/model.py``).  ``EXEMPT`` holds the names that need no entry, each with its reason.

Object arguments (a model, a grid, a dataset) are fuzzed through their values (a model of another
dimension, a grid of another lmax), not with foreign types; every number, string, flag, array and
head argument is fuzzed with the foreign types too.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass, field

import numpy as np

import meanfield as mf

NAN, INF = float("nan"), float("inf")
HUGE = 10**9          # a size whose cost (memory or time) must be refused by the guard, never attempted


# ------------------------------------------------------------------------------------- bad-value kinds
class Bad(list):
    """Concrete bad values, plus ``strategy()``: a hypothesis strategy of more values that are all bad
    (None: no generator).  Imported lazily so that the probe runs without hypothesis."""

    def __init__(self, values, strategy=None):
        super().__init__(values)
        self.strategy = strategy


def _st():
    from hypothesis import strategies as st

    return st


def _nonfinite():
    return _st().sampled_from([NAN, INF, -INF])


def _types(*extra):
    """Foreign types for a scalar argument: None, a string, a bool, a complex number (no list: the closed
    forms take arrays)."""
    return [None, "1", True, 1 + 1j, *extra]


def real_pos(*extra):
    return Bad(_types(NAN, INF, -INF, 0.0, -1.0, *extra),
               lambda: _nonfinite() | _st().floats(max_value=0.0, allow_nan=False))


def real_nonneg(*extra):
    return Bad(_types(NAN, INF, -INF, -1.0, *extra),
               lambda: _nonfinite() | _st().floats(max_value=-1e-300, allow_nan=False))


def real_finite(*extra):
    return Bad(_types(NAN, INF, -INF, *extra),
               lambda: _nonfinite() | _st().complex_numbers(allow_nan=False).filter(lambda z: z.imag != 0))


def int_pos(lo=1, *extra):
    return Bad([None, "3", True, 2.5, NAN, lo - 1, -7, *extra],
               lambda: _st().integers(max_value=lo - 1) | _st().floats(-1e6, 1e6).filter(lambda x: x != round(x)))


def choice(*extra):
    return Bad([None, "bogus", 3, "", *extra], lambda: _st().text("#~!?", min_size=1, max_size=6))


def flag(*extra):
    return Bad([None, "yes", 2, 1.0, *extra])


def seed(*extra):
    return Bad(["seed", 2.5, -1, True, *extra], lambda: _st().integers(max_value=-1))


def _poked(a):
    """``a`` with one entry (drawn) replaced by NaN or +-inf."""
    a = np.asarray(a)
    st = _st()
    return st.tuples(st.integers(0, max(a.size - 1, 0)), _nonfinite()).map(lambda iv: _poke_at(a, *iv))


def _poke_at(a, i, value):
    b = np.array(a, dtype=complex if np.iscomplexobj(a) else float, copy=True)
    b.reshape(-1)[i] = value
    return b


def tokens(X, *, unit=True, extra=()):
    """Bad token arrays derived from a valid ``X``: foreign types, complex, NaN, inf, wrong dims and d,
    empty, and (``unit``) rows off the unit sphere, which must never be renormalized silently."""
    X = np.asarray(X, float)
    bad = [None, "X", X.astype(complex) * (1 + 1j), _poke(X, NAN), _poke(X, INF), X[..., :-1],
           X.reshape(-1)[: X.shape[-1]] if X.ndim > 1 else X[None, None], X[..., None], X[..., :0]]
    if unit:
        bad.append(2.0 * X)

    def strategy():
        st = _st()
        out = _poked(X) | st.integers(1, 3).map(lambda k: np.concatenate([X] + [X[..., :1]] * k, axis=-1))
        if unit:      # rows scaled off the sphere by a drawn factor, far outside any round-off tolerance
            out = out | st.one_of(st.floats(1.001, 1e3), st.floats(1e-3, 0.999)).map(lambda s: s * X)
        return out
    return Bad([*bad, *extra], strategy)


def array(a, *, complex_ok=False, strict_shape=True, extra=()):
    """Bad real (or complex) arrays derived from a valid ``a``: types, NaN, inf, complex, wrong shapes
    (``strict_shape``: a shorter vector is wrong too; False where fewer coefficients are legal)."""
    a = np.asarray(a)
    bad = [None, "a", _poke(a.astype(complex if complex_ok else float), NAN),
           _poke(a.astype(complex if complex_ok else float), INF), a[..., None, None]]
    if strict_shape:
        bad.append(a.reshape(-1)[:-1])
    if not complex_ok:
        bad.append(a.astype(complex) * (1 + 1j))

    def strategy():
        st = _st()
        out = _poked(a.astype(complex if complex_ok else float))
        if a.size > 1 and strict_shape:
            out = out | st.integers(1, a.size - 1).map(lambda k: a.reshape(-1)[:k].copy())
        if not complex_ok:
            out = out | st.floats(1e-6, 1e3).map(lambda im: a + 1j * im)
        return out
    return Bad([*bad, *extra], strategy)


def heads(h, *, extra=()):
    """Bad head tuples: types, empty, mixed dimensions, a bare matrix."""
    d = np.shape(h[0].M)[0]
    other = mf.scalar_heads([1.0], d + 1)[0]
    return [None, "heads", (), (h[0], other), np.eye(d), *extra]


def has_nonfinite(value):
    """Whether ``value`` is a numeric array (or number) holding a NaN or an infinity."""
    try:
        a = np.asarray(value)
    except Exception:  # noqa: BLE001 -- anything that is not an array holds no NaN
        return False
    return a.dtype.kind in "fc" and not bool(np.all(np.isfinite(a)))


def _poke(a, value):
    b = np.array(a, copy=True)
    if b.size:
        b.reshape(-1)[min(1, b.size - 1)] = value
    return b


def finite(out, depth=0):
    """Whether every number in ``out`` (arrays, floats, dicts, sequences, dataclass-like objects) is finite."""
    if depth > 4 or out is None or isinstance(out, (str, bytes, bool)):
        return True
    if isinstance(out, (int, float, complex, np.number)):
        return bool(np.isfinite(out))
    if isinstance(out, np.ndarray):
        return not np.issubdtype(out.dtype, np.number) or bool(np.all(np.isfinite(out)))
    if isinstance(out, dict):
        return all(finite(v, depth + 1) for v in out.values())
    if isinstance(out, (list, tuple)):
        return all(finite(v, depth + 1) for v in out[:100])
    if hasattr(out, "y_final") and hasattr(out, "status"):          # a Trajectory: its final state
        return finite(out.y_final, depth + 1)
    if hasattr(out, "__dataclass_fields__"):
        return all(finite(getattr(out, k, None), depth + 1) for k in out.__dataclass_fields__)
    return True                                                     # models, datasets, callables: not numbers


# ---------------------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Spec:
    """One entry point: ``fn(**base())`` is a valid call; each ``bad[arg]`` value must raise ``exc`` whose
    message contains ``arg`` (or one of ``names[arg]``); ``huge[arg]`` likewise (a cost refusal)."""

    fn: object
    base: object
    bad: dict = field(default_factory=dict)
    huge: dict = field(default_factory=dict)
    edge: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)
    finite: bool = True               # the baseline result must be finite (False: inf is a legal answer)
    exc: tuple = (ValueError,)
    traced: bool = True               # False: the valid call (a figure, many small Newton steps) runs ten times
                                      # slower under tracemalloc; its memory is bounded by the address-space cap
    propagates_nonfinite: tuple = ()  # arguments (a model's rhs state) where NaN/inf in -> non-finite out is the
                                      # documented answer (the driver rejects such a stage), not a refusal

    def tokens_for(self, arg):
        return (arg, *self.names.get(arg, ()))

    def names_arg(self, arg, message) -> bool:
        """Whether ``message`` names ``arg`` (or one of ``names[arg]``): a short token (``n``, ``d``, ``X``,
        ``nu``) only as a whole word, since as a substring it would be found in almost any message."""
        return any(re.search(rf"(?<![A-Za-z0-9_-]){re.escape(t)}(?![A-Za-z0-9_-])", message) if len(t) <= 2
                   else t in message for t in self.tokens_for(arg))


REGISTRY: dict[str, Spec] = {}


def entry(name, fn, base, **kw):
    REGISTRY[name] = Spec(fn, functools.cache(base), **kw)


def bad_values(spec, arg, kind):
    """The concrete bad (``kind="bad"``/``"huge"``) or edge values of ``arg`` (lists or ``f(base)``);
    a :class:`Bad` list also carries a strategy of more bad values.  ``None`` is dropped where it is the
    argument's documented default (it means 'not given' there)."""
    values = getattr(spec, kind)[arg]
    values = values(spec.base()) if callable(values) else values
    strategy = getattr(values, "strategy", None)
    if _default_is_none(spec.fn, arg):
        values = [v for v in values if v is not None]
    return Bad(values, strategy)


@functools.cache
def _signature(fn):
    import inspect

    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _default_is_none(fn, arg):
    sig = _signature(fn)
    return sig is not None and arg in sig.parameters and sig.parameters[arg].default is None


def cases(kind="bad"):
    """Every ``(entry, arg)`` with values of ``kind``."""
    return [(name, arg) for name, spec in REGISTRY.items() for arg in getattr(spec, kind)]


def call(name, overrides=None):
    spec = REGISTRY[name]
    kw = dict(spec.base())
    kw.update(overrides or {})
    return spec.fn(**kw)


def method(factory, name):
    """``obj.name(**kw)`` with ``obj = factory()`` (a cached model), as a keyword function."""
    return lambda **kw: getattr(factory(), name)(**kw)


# ------------------------------------------------------------------------------- cached valid objects
@functools.cache
def X3():
    return mf.initial.uniform_sphere(8, 3, seed=0)


@functools.cache
def H3():
    return mf.scalar_heads([1.0, -0.5], 3)


@functools.cache
def PS():
    return mf.ParticleSystem(H3())


@functools.cache
def BS():
    from meanfield.models.batched import BatchedSystem

    return BatchedSystem(mf.scalar_heads([1.0], 3, normalization="softmax"))


@functools.cache
def XB():
    return X3().reshape(2, 4, 3)


@functools.cache
def GRID():
    return mf.SphereGrid(8)


@functools.cache
def RHO():
    return mf.densities.vmf_density(GRID(), [0.0, 0.0, 1.0], 2.0)


@functools.cache
def CPDE():
    return mf.ContinuumPDE(mf.scalar_heads([1.0], 3), lmax=8, kernel_tol=1e-6)


@functools.cache
def CIRC():
    return mf.CirclePDE(mf.scalar_heads([1.0], 2), kmax=16)


@functools.cache
def C_CIRC():
    c = CIRC().uniform().copy()
    c[1] = 0.05
    return c


@functools.cache
def AXI():
    return mf.AxisymmetricPDE(mf.scalar_heads([1.0], 4, beta=2.0), d=4, lmax=12, nu=0.5)


@functools.cache
def B_AXI():
    b = AXI().uniform().copy()
    b[1] = 0.05
    return b


H_SINGLE = lambda: mf.scalar_heads([1.0], 3)      # noqa: E731


# --------------------------------------------------------------------------------- the surface to cover
PUBLIC_MODULES = ("meanfield.core.densities", "meanfield.core.initial", "meanfield.analysis.diagnostics",
                  "meanfield.analysis.field_diagnostics", "meanfield.analysis.theory")
ISSUE_MODULES = ("meanfield.models.step_rules", "meanfield.core.schedules", "meanfield.core.random_heads",
                 "meanfield.analysis.transport", "meanfield.analysis.semidiscrete", "meanfield.analysis.mmd",
                 "meanfield.analysis.ensembles", "meanfield.analysis.axisymmetric", "meanfield.analysis.clustering",
                 "meanfield.workflow.extend", "meanfield.workflow.phase_diagram", "meanfield.analysis.equilibria",
                 "meanfield.analysis.phase_transition")
MORE_MODULES = ("meanfield.analysis.normalization", "meanfield.analysis.stability", "meanfield.analysis.continuation",
                "meanfield.analysis.sphere_states", "meanfield.workflow.preflight",
                "meanfield.workflow.view", "meanfield.analysis.cluster_tracking",   # entries in hostile_cases_more
                "meanfield.analysis.head_measures")                                # in hostile_cases_head_measures
LAYERS = ("core", "models", "analysis", "workflow")
PROTOCOL_MODELS = {"ParticleSystem": ("velocity", "rhs", "energy"), "BatchedSystem": ("velocity", "rhs", "field"),
                   "ContinuumPDE": ("velocity", "rhs", "energies"), "CirclePDE": ("velocity", "rhs", "energies"),
                   "AxisymmetricPDE": ("velocity", "rhs", "energies")}
SHORT = {"meanfield.models.step_rules": "step_rules", "meanfield.core.schedules": "schedules",
         "meanfield.core.random_heads": "random_heads"}

NO_BAD = {
    "densities.uniform_density": "its only input is a grid object (objects are fuzzed through their values)",
    "axisymmetric.reduced_observer": "its only input is a model object",
    "equilibria.has_free_energy": "its only input is a model object",
    "equilibria.noise_problem": "its only input is a model object",
    "semidiscrete.geodesic_bracket": "its only input is a LaguerreSolution returned by solve_semidiscrete",
    "semidiscrete.grid_of_nodes": "documented to return None for anything that is not a grid's nodes",
    "preflight.available_memory": "it takes no argument (reads /proc/meminfo)",
}
"""Entries whose baseline runs but whose arguments are not fuzzed, each with its reason."""

EXEMPT = {
    "__version__": "a version string, no input",
    "SCHEMES": "a registry (dict of tableaux), no input; its names are fuzzed through integrate(method=...)",
    "METHODS": "a registry (dict of capabilities), no input; fuzzed through integrate(method=...)",
    "Trajectory": "the driver's result object, built only by integrate (whose inputs are fuzzed)",
    "densities": "a module: its callables are entries densities.*",
    "initial": "a module: its callables are entries initial.*",
    "diagnostics": "a module: its callables are entries diagnostics.*",
    "field_diagnostics": "a module: its callables are entries field_diagnostics.*",
    "theory": "a module: its callables are entries theory.*",
    "transport.TransportResult": "a result object returned by the W2 functions, not built by users",
    "semidiscrete.LaguerreSolution": "a result object returned by solve_semidiscrete, not built by users",
    "equilibria.StationaryState": "a result object returned by the stationary solvers (axisymmetric and S^2: the one "
                                  "stationary-state type), not built by users",
    "phase_transition.Transition": "a result object returned by classify_transition / phase_transition, not built by users",
    "continuation.Branch": "a result object returned by continue_branch / switch_branch, not built by users",
    "continuation.SpecialPoint": "a fold or branch point found by continue_branch; switch_branch's point is fuzzed",
    "cluster_tracking.ClusterTrack": "a result object returned by the track_* functions, not built by users",
    "cluster_tracking.MergeEvent": "a record inside ClusterTrack.merges, not built by users",
}

_TOP = "its user entry points are exported by meanfield.__all__ and covered there"
MODULES_NOT_FUZZED = {
    # core: the top-level objects' homes, and the plumbing under the models and the driver
    "meanfield.core.axisymmetric": "angle_quantiles is reached through the axisymmetric.w2_marginal entry; "
                                   "sample_axisymmetric has its entry (core.axisymmetric.sample_axisymmetric); "
                                   "angle_marginal has none yet (a gap: not fuzzed)",
    "meanfield.core.choices": "constant tuples of allowed strings, no callables; fuzzed by every choice() argument",
    "meanfield.core.controllers": "step-size controllers built by integrate from StepControl (whose fields are fuzzed)",
    "meanfield.core.cost": "the cost guard itself: every huge case of the suite goes through it",
    "meanfield.core.dense": "dense output and events of integrate, built from SaveAt (fuzzed); no direct user call",
    "meanfield.core.driver_parts": "internal plumbing of the driver (recorder, progress bar), reached only through "
                                   "integrate",
    "meanfield.core.field_forces": "the per-head loop of the PDE models, reached through their velocity/rhs entries",
    "meanfield.core.funk_hecke": "multipliers computed by the PDE model constructors (CirclePDE, AxisymmetricPDE "
                                 "entries); no direct entry yet",
    "meanfield.core.heads": _TOP + " (Head and the presets); check_heads is the validator those entries exercise",
    "meanfield.core.integrate": _TOP + " (integrate, Trajectory); estimate_nfev and Piecewise are driver helpers",
    "meanfield.core.kernels": "kernel and normalization registries chosen by name through Head(kernel=, "
                              "normalization=) (fuzzed); their classes are not built by users",
    "meanfield.core.methods": "the METHODS registry, fuzzed through integrate(method=...)",
    "meanfield.core.model": "structural protocols (typing.Protocol classes), no input",
    "meanfield.core.options": _TOP + " (StepControl, SaveAt, Checkpointing, Monitor)",
    "meanfield.core.resolution": "the resolution monitor, covered through field_diagnostics and "
                                 "axisymmetric.reduced_resolution_monitor entries",
    "meanfield.core.sde": _TOP + " (Noise); its steppers are built by integrate from Noise",
    "meanfield.core.sinkhorn": "the Sinkhorn scaling solve under the models' velocity with Sinkhorn heads (the "
                               "normalization is fuzzed through Head); solve_scaling has its entry "
                               "(sinkhorn.solve_scaling, hostile_cases_more)",
    "meanfield.core.sphere": _TOP + " (SphereGrid); its conversions are called on the grid's own arrays",
    "meanfield.core.steppers": "steppers built by integrate from method names (fuzzed through integrate)",
    "meanfield.core.sums": "chunked kernel sums under ParticleSystem / BatchedSystem velocity (fuzzed)",
    "meanfield.core.prefix": "the compiled causal prefix sums under CausalSystem(summation='spectral') (fuzzed through "
                             "CausalSystem); causal_far_sums refuses bad shapes by name (tests/test_prefix.py)",
    "meanfield.core.backends": "backend plumbing chosen through ParticleSystem / BatchedSystem(backend=, device=, "
                               "dtype=) (validated by get_backend; bad values tested in tests/test_backends.py)",
    "meanfield.core.tableaux": "Butcher tableaux of SCHEMES, chosen by name through integrate(method=...)",
    "meanfield.core.validate": "the validators every entry of the suite calls; tested by test_validate.py",
    "meanfield.core.zonal": _TOP + " (required_lmax); ZonalOperator is built by the models",
    "meanfield.core.bispherical": "the operators of general heads, built by the models (ParticleSystem with "
                                  "summation='spectral', ContinuumPDE with general heads: fuzzed there); its own "
                                  "functions are checked by test_bispherical.py",
    # models: the top-level models and their helpers
    "meanfield.models.axisymmetric": _TOP + " (AxisymmetricPDE and its protocol methods)",
    "meanfield.models.batched": "BatchedSystem and its protocol methods are covered (PROTOCOL_MODELS); the rest "
                                "are its projections, called on its own arrays",
    "meanfield.models.circle": _TOP + " (CirclePDE and its protocol methods)",
    "meanfield.models.continuum": _TOP + " (ContinuumPDE and its protocol methods)",
    "meanfield.models.fastsum": "the spectral particle sum chosen by ParticleSystem(summation=...) (fuzzed)",
    "meanfield.models.generalsum": "the spectral particle sum of general heads, chosen by ParticleSystem(summation=...) "
                                   "(fuzzed)",
    "meanfield.models.particles": _TOP + " (ParticleSystem and its protocol methods); check_tokens is the "
                                  "validator those entries exercise",
    # workflow: the jobs take validated configs; their inputs are the config loaders and main(argv)
    "meanfield.workflow.checkpoint": "integrator state files written by the driver, reached through "
                                     "Checkpointing (fuzzed) and the jobs' resume",
    "meanfield.workflow.cli": "covered through the config loaders and the main(argv) entries cli.*",
    "meanfield.workflow.config": "RunConfig files are fuzzed through the cli.config_check entry (TOML in)",
    "meanfield.workflow.equilibria_branches": "driven by a validated EquilibriaConfig; no direct entry yet",
    "meanfield.workflow.equilibria_config": "the equilibria TOML loader; no direct entry yet",
    "meanfield.workflow.equilibria_job": "the equilibria job, driven by its validated config; no direct entry yet",
    "meanfield.workflow.equilibria_sphere": "the S^2 check of the equilibria job, driven by its config",
    "meanfield.workflow.equilibria_general": "the equilibria job with general heads, driven by a validated "
                                             "EquilibriaConfig (tests/test_equilibria_general.py: its refusals)",
    "meanfield.workflow.inputs": _TOP + " (zonal_density, density_from_coefficients); the file loaders are "
                                 "fuzzed through cli.config_check (positions files)",
    "meanfield.workflow.jobs": "every job's folder lifecycle (JobFolder) and the main job, driven by validated "
                               "configs (cli entries); JobFolder's bad arguments and refusals: tests/test_job_shape.py",
    "meanfield.workflow.paired": "the main job's engine, reached through run(config) with a validated RunConfig",
    "meanfield.workflow.plotting": "figures whose inputs are datasets made by the package",
    "meanfield.workflow.ramp": "noise ramps of particles: noise_ramp, first_crossing, order_parameter and "
                               "stage_seed have their entries (ramp.*, hostile_cases_more)",
    "meanfield.workflow.reduced": _TOP + " (solve_reduced)",
    "meanfield.workflow.results": "NetCDF files written and read by the package (save/load of its own datasets)",
    "meanfield.workflow.run": "the main job run(config): its input is a RunConfig, whose TOML is fuzzed through "
                              "cli.config_check; run itself is called (not fuzzed) by the extend.* baselines",
    "meanfield.workflow.simulate": _TOP + " (solve_particles, solve_continuum)",
    "meanfield.workflow.solve": _TOP + " (solve)",
    "meanfield.models.plans": "the run plans behind the models' plan methods, reached through the top-level solve, "
                              "solve_particles, solve_continuum and solve_reduced entries (fuzzed)",
    "meanfield.workflow.sweep": "sweeps of the main job over validated configs; no direct entry yet",
    "meanfield.workflow.tasks": "a generic task farm on dask, fed by the sweep / transition-map jobs",
    "meanfield.workflow.transition_map": "the transition map job over validated configs; no direct entry yet",
    "meanfield.models.encoder": "weights of a trained transformer (EncoderWeights, read from checkpoints); its "
                                "refusals (shapes, token ids, layer, flags) are tested by tests/test_encoder.py",
    "meanfield.workflow.pretrained": "reads checkpoint folders and texts; every bad folder, config, tensor and text is "
                                     "refused by name in tests/test_pretrained.py (safetensors files written there)",
    "meanfield.models.causal": "CausalSystem (issue 36): its refusals (Sinkhorn by name, summations, spectral "
                               "geometry/d/zonal, shapes, unit rows, weights, rhs stages) are tested by "
                               "tests/test_causal.py; the feature and degree helpers take its validated arrays",
    "meanfield.models.causal_continuum": "CausalCirclePDE and CausalSpherePDE (issue 36): their refusals (Sinkhorn, non-zonal heads on S^1, general heads without an operator rule on S^2, rules, "
                                         "positions, state shapes, windows, a too coarse position grid with the "
                                         "measured error) are tested by tests/test_causal.py",
    "meanfield.workflow.schema": "the one config schema (checkers, Section, TOML in and out) under every config loader; "
                                 "fuzzed through them (cli.config_check, phase_diagram.load_phase_config, cli.equilibria) "
                                 "and its refusals named by tests/test_schema.py",
}
"""The modules of the four layers outside the covered surface (``PUBLIC_MODULES + ISSUE_MODULES + MORE_MODULES``),
each with the reason its callables need no entry of their own (``tests/test_hostile_api.py`` fails for a module of
the layers in neither)."""


def layer_modules():
    """Every module of meanfield's four layers, by name (``pkgutil`` over the packages' paths; nothing imported)."""
    import pkgutil

    out = []
    for layer in LAYERS:
        pkg = importlib.import_module(f"meanfield.{layer}")
        out += [f"meanfield.{layer}.{m.name}" for m in pkgutil.iter_modules(pkg.__path__)]
    return sorted(out)


def unlisted_modules():
    """Modules of the layers neither in the covered surface nor in :data:`MODULES_NOT_FUZZED`."""
    covered = set(PUBLIC_MODULES + ISSUE_MODULES + MORE_MODULES)
    return [m for m in layer_modules() if m not in covered and m not in MODULES_NOT_FUZZED]


def surface():
    """Every public name that needs a registry entry (or an exemption): see the module docstring."""
    names = list(mf.__all__)
    for mod in PUBLIC_MODULES + ISSUE_MODULES + MORE_MODULES:
        m = importlib.import_module(mod)
        short = SHORT.get(mod, mod.rsplit(".", 1)[1])
        for n in m.__all__:
            if callable(getattr(m, n)):          # constants (tuples, floats) take no input
                names.append(f"{short}.{n}")
    for model, methods in PROTOCOL_MODELS.items():
        names += [model] + [f"{model}.{m}" for m in methods]
    return list(dict.fromkeys(names))


# the entries, registered on import (they use the kinds and objects above)
import hostile_cases_core  # noqa: E402,F401,I001
import hostile_cases_analysis  # noqa: E402,F401,I001
import hostile_cases_more  # noqa: E402,F401,I001
import hostile_cases_head_measures  # noqa: E402,F401,I001
