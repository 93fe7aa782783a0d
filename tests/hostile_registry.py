"""The hostile-input registry (issue 26, item 4): every public entry point, a valid call and its bad values.

``REGISTRY`` maps an entry point's name to a :class:`Spec`: a function taking keyword arguments, a valid
baseline call (``base()`` -> kwargs, built lazily and cached) and, per argument, the bad values that must be
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

    def tokens_for(self, arg):
        return (arg, *self.names.get(arg, ()))


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


# --------------------------------------------------------------------------------- core: heads
entry("Head", mf.Head, lambda: dict(M=np.eye(3), V=np.eye(3), beta=1.0, kernel="exp", normalization="mean"),
      bad={"M": lambda b: array(b["M"], extra=(np.eye(3)[:2],)), "V": lambda b: array(b["V"], extra=(np.eye(4),)),
           "beta": real_pos(), "kernel": choice(), "normalization": choice()})
entry("scalar_heads", mf.scalar_heads, lambda: dict(lambdas=[1.0, -0.5], d=3, beta=1.0),
      bad={"lambdas": [None, "x", [], [NAN], [INF], [1j], [[1.0]]], "d": int_pos(2), "beta": real_pos()},
      names={"lambdas": ("lambda",)})
entry("orthogonal_block_heads", mf.orthogonal_block_heads, lambda: dict(d=4, n_heads=2, strengths=1.0, beta=1.0),
      bad={"d": int_pos(2), "n_heads": int_pos(1, 5), "strengths": real_finite(), "beta": real_pos()})
entry("random_symmetric_heads", mf.random_symmetric_heads, lambda: dict(d=3, n_heads=2, seed=0, scale=1.0, beta=1.0),
      bad={"d": int_pos(2), "n_heads": int_pos(1), "seed": seed(), "scale": real_nonneg(), "beta": real_pos()},
      huge={"d": [HUGE], "n_heads": [HUGE]})
entry("perturbed_value_heads", mf.perturbed_value_heads, lambda: dict(heads=H3(), epsilon=0.1, seed=0),
      bad={"heads": lambda b: heads(b["heads"]), "epsilon": real_nonneg(), "seed": seed()})
entry("approx_orthogonal_heads", mf.approx_orthogonal_heads,
      lambda: dict(d=4, n_heads=2, delta=0.1, alpha=1.0, rank=1, beta=1.0),
      bad={"d": int_pos(2), "n_heads": int_pos(1), "delta": real_nonneg(), "alpha": real_finite(),
           "rank": int_pos(1, 9), "beta": real_pos()},
      huge={"d": [HUGE]})
entry("required_lmax", mf.required_lmax, lambda: dict(heads=H_SINGLE(), tolerance=1e-6, cap=64),
      bad={"heads": lambda b: heads(b["heads"]), "tolerance": real_pos(), "cap": int_pos(1)},
      huge={"cap": [HUGE]})

# --------------------------------------------------------------------------------- models
_model_heads = {"heads": lambda b: heads(b["heads"])}
entry("ParticleSystem", mf.ParticleSystem, lambda: dict(heads=H3(), geometry="sphere", summation="auto"),
      bad={**_model_heads, "geometry": choice(), "summation": choice(), "tolerance": real_pos(),
           "nu": real_nonneg(), "chunk_bytes": int_pos(1), "lmax": int_pos(1)})
entry("ParticleSystem.velocity", method(PS, "velocity"), lambda: dict(X=X3(), w=None),
      bad={"X": lambda b: tokens(X3()), "w": [np.full(8, 0.5), np.full(7, 1 / 7), _poke(np.full(8, 1 / 8), NAN), "w"]})
entry("ParticleSystem.rhs", method(PS, "rhs"), lambda: dict(t=0.0, y=X3()),
      bad={"y": lambda b: tokens(X3())}, names={"y": ("X",)})
entry("ParticleSystem.energy", method(PS, "energy"), lambda: dict(X=X3()), bad={"X": lambda b: tokens(X3())})

entry("BatchedSystem", lambda **kw: __import__("meanfield.models.batched", fromlist=["x"]).BatchedSystem(**kw),
      lambda: dict(heads=H3(), geometry="sphere", causal=False, summation="direct"),
      bad={**_model_heads, "geometry": choice(), "causal": flag(), "summation": choice(), "tolerance": real_pos(),
           "chunk_bytes": int_pos(1)})
entry("BatchedSystem.velocity", method(BS, "velocity"), lambda: dict(X=XB()),
      bad={"X": lambda b: [None, "X", XB().astype(complex) * (1 + 1j), _poke(XB(), NAN), _poke(XB(), INF),
                           XB()[..., :-1], XB()[..., None], 2.0 * XB(), XB()[0, 0]]},
      huge={"X": [np.broadcast_to(XB()[:1, :1], (1, 100000, 3))]})
entry("BatchedSystem.rhs", method(BS, "rhs"), lambda: dict(t=0.0, y=XB()),
      bad={"y": lambda b: [None, _poke(XB(), NAN), 2.0 * XB(), XB()[..., :-1]]}, names={"y": ("X",)})
entry("BatchedSystem.field", method(BS, "field"), lambda: dict(X=XB()),
      bad={"X": lambda b: [None, _poke(XB(), NAN), XB().astype(complex) * (1 + 1j), XB()[..., :-1]]})

entry("ContinuumPDE", mf.ContinuumPDE, lambda: dict(heads=H_SINGLE(), lmax=8, nu=0.0, kernel_tol=1e-6),
      bad={**_model_heads, "lmax": int_pos(1), "nu": real_nonneg(), "kernel_tol": real_nonneg(), "method": choice()},
      huge={"lmax": [HUGE]})
entry("ContinuumPDE.velocity", method(CPDE, "velocity"), lambda: dict(rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
entry("ContinuumPDE.rhs", method(CPDE, "rhs"), lambda: dict(t=0.0, y=CPDE().state(RHO())),
      bad={"y": lambda b: array(b["y"])})
entry("ContinuumPDE.energies", method(CPDE, "energies"), lambda: dict(rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})

entry("CirclePDE", mf.CirclePDE, lambda: dict(heads=mf.scalar_heads([1.0], 2), kmax=16, nu=0.0),
      bad={**_model_heads, "kmax": int_pos(1), "nu": real_nonneg(), "kernel_tol": real_nonneg(), "method": choice()},
      huge={"kmax": [HUGE, 10**10]},
      edge={"heads": [mf.scalar_heads([1.0], 2, beta=750.0, normalization="softmax")]})
entry("CirclePDE.velocity", method(CIRC, "velocity"), lambda: dict(c=C_CIRC()),
      bad={"c": lambda b: array(b["c"], complex_ok=True)})
entry("CirclePDE.rhs", method(CIRC, "rhs"), lambda: dict(t=0.0, y=CIRC().state(C_CIRC())),
      bad={"y": lambda b: array(b["y"])})
entry("CirclePDE.energies", method(CIRC, "energies"), lambda: dict(c=C_CIRC()),
      bad={"c": lambda b: array(b["c"], complex_ok=True)})

entry("AxisymmetricPDE", mf.AxisymmetricPDE, lambda: dict(heads=mf.scalar_heads([1.0], 4), d=4, lmax=12, nu=0.5),
      bad={**_model_heads, "d": int_pos(2), "lmax": int_pos(1), "nu": real_nonneg(),
           "axis": [np.zeros(4), np.ones(4), np.ones(3) / np.sqrt(3), [NAN] * 4, "axis"]},
      huge={"lmax": [HUGE]}, names={"d": ("heads",)})
entry("AxisymmetricPDE.velocity", method(AXI, "velocity"), lambda: dict(b=B_AXI()),
      bad={"b": lambda b: array(b["b"])})
entry("AxisymmetricPDE.rhs", method(AXI, "rhs"), lambda: dict(t=0.0, y=AXI().state(B_AXI())),
      bad={"y": lambda b: array(b["y"])})
entry("AxisymmetricPDE.energies", method(AXI, "energies"), lambda: dict(b=B_AXI()),
      bad={"b": lambda b: array(b["b"])})

entry("SphereGrid", mf.SphereGrid, lambda: dict(lmax=8),
      bad={"lmax": int_pos(0), "nlat": int_pos(1), "nlon": int_pos(1), "nthreads": int_pos(1)},
      huge={"lmax": [HUGE]})

# --------------------------------------------------------------------------------- driver and solvers
entry("integrate", mf.integrate, lambda: dict(rhs=lambda t, y: -y, y0=np.ones(2), t_span=(0.0, 1.0), method="rk4",
                                              step=mf.StepControl(dt=0.1)),
      bad={"y0": [None, "y0", np.array([1.0, NAN]), np.array([INF, 1.0]), np.ones(2) * (1 + 1j)], "t_span": [None, "t", (0.0,), (0.0, NAN), (0.0, INF), (1.0, 1j)],
           "method": choice()},
      huge={"step": [mf.StepControl(dt=1e-9)]}, names={"step": ("dt", "max_steps")})
entry("Noise", mf.Noise, lambda: dict(nu=0.1, seed=0, geometry="sphere"),
      bad={"nu": real_nonneg(), "seed": seed(), "geometry": choice()})
entry("StepControl", mf.StepControl, lambda: dict(dt=0.1), finite=False,     # dt_max = inf by default
      bad={"dt": real_pos(), "rtol": real_pos(), "atol": real_pos(), "dt_max": [None, "1", True, NAN, 0.0, -1.0],
           "max_steps": int_pos(1)})
entry("SaveAt", mf.SaveAt, lambda: dict(t_eval=[0.0, 1.0]),
      bad={"t_eval": [np.array([1.0, NAN]), "t", [1j], [[0.0, 1.0]]], "states": flag(), "dense": flag()})
entry("Checkpointing", mf.Checkpointing, lambda: dict(save=None, every=None),
      bad={"every": real_pos(), "resume": ["resume", 3, [1, 2]]})
entry("solve", mf.solve, lambda: dict(model=PS(), start=X3(), t_final=0.1),
      bad={"start": lambda b: tokens(X3()), "t_final": real_nonneg()}, names={"start": ("X", "X0", "y0")})
entry("solve_particles", mf.solve_particles, lambda: dict(system=PS(), X0=X3(), t_final=0.1),
      bad={"X0": lambda b: tokens(X3()), "t_final": real_nonneg()})
entry("solve_continuum", mf.solve_continuum, lambda: dict(pde=CPDE(), rho_lm0=RHO(), t_final=0.05),
      bad={"rho_lm0": lambda b: array(b["rho_lm0"], complex_ok=True), "t_final": real_nonneg()},
      names={"rho_lm0": ("rho",)})
entry("solve_reduced", mf.solve_reduced, lambda: dict(pde=CIRC(), c0=C_CIRC(), t_final=0.1),
      bad={"c0": lambda b: array(b["c0"], complex_ok=True), "t_final": real_nonneg()})
entry("zonal_density", mf.zonal_density,
      lambda: dict(grid=GRID(), mu=np.linspace(-1.0, 1.0, 9), rho=1.0 + 0.5 * np.linspace(-1.0, 1.0, 9)),
      bad={"mu": lambda b: [None, "mu", b["mu"][::-1].copy(), _poke(b["mu"], NAN), b["mu"][:1], b["mu"] * 2,
                            b["mu"] + 0j * b["mu"] + 1j],
           "rho": lambda b: array(b["rho"], extra=(-b["rho"],))}, names={"mu": ("profile",), "rho": ("profile",)})
entry("density_from_coefficients", mf.density_from_coefficients,
      lambda: dict(grid=GRID(), coefficients=RHO()),
      bad={"coefficients": lambda b: array(b["coefficients"], complex_ok=True, strict_shape=False)})

# --------------------------------------------------------------------------------- core modules
entry("densities.uniform_density", mf.densities.uniform_density, lambda: dict(grid=GRID()))
entry("densities.perturbed_uniform", mf.densities.perturbed_uniform,
      lambda: dict(grid=GRID(), perturbations={(2, 0): 0.01}),
      bad={"perturbations": [None, "p", {(20, 0): 0.1}, {(2, 0): NAN}, {(2, 3): 0.1}, {(2, 0): 10.0}]})
entry("densities.vmf_density", mf.densities.vmf_density, lambda: dict(grid=GRID(), mu=[0.0, 0.0, 1.0], kappa=2.0),
      bad={"mu": [None, "mu", [0, 0], [NAN, 0, 1], [0, 0, 2.0], [1j, 0, 0]], "kappa": real_nonneg()},
      edge={"kappa": [1e-12, 700.0]})
entry("densities.vmf_mixture_density", mf.densities.vmf_mixture_density,
      lambda: dict(grid=GRID(), mus=np.eye(3)[:2], kappas=[1.0, 2.0], weights=[0.5, 0.5]),
      bad={"mus": lambda b: tokens(b["mus"]), "kappas": [None, "k", [1.0], [NAN, 1.0], [-1.0, 1.0]],
           "weights": [[0.5, 0.6], [1.0], [NAN, 0.5], "w"], "floor": real_nonneg(1.5)})
entry("densities.density_from_particles", mf.densities.density_from_particles,
      lambda: dict(grid=GRID(), X=X3()), bad={"X": lambda b: tokens(X3()), "kappa": real_pos()})
entry("densities.negative_mass", mf.densities.negative_mass, lambda: dict(grid=GRID(), rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "oversample": int_pos(1)},
      huge={"oversample": [HUGE]})
entry("densities.sample_particles", mf.densities.sample_particles,
      lambda: dict(grid=GRID(), rho_lm=RHO(), n=10, seed=0),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "n": int_pos(1), "method": choice(),
           "seed": seed(), "negative": choice()}, huge={"n": [HUGE]})
entry("densities.normalize", mf.densities.normalize, lambda: dict(grid=GRID(), rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
entry("densities.check_density", mf.densities.check_density, lambda: dict(grid=GRID(), rho_lm=RHO()),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
entry("densities.vmf_multiplier", mf.densities.vmf_multiplier, lambda: dict(lmax=8, kappa=2.0),
      bad={"lmax": int_pos(0), "kappa": real_nonneg()}, huge={"lmax": [HUGE]})
entry("densities.default_kde_kappa", mf.densities.default_kde_kappa, lambda: dict(lmax=8),
      bad={"lmax": int_pos(0)})

entry("initial.uniform_sphere", mf.initial.uniform_sphere, lambda: dict(n=5, d=3, seed=0),
      bad={"n": int_pos(1), "d": int_pos(2), "seed": seed()}, huge={"n": [HUGE], "d": [HUGE]})
entry("initial.von_mises_fisher", mf.initial.von_mises_fisher, lambda: dict(n=5, mu=[0.0, 0.0, 1.0], kappa=2.0),
      bad={"n": int_pos(1), "mu": [None, "mu", [0.0], [NAN, 0, 1], [0, 0, 2.0], [1j, 0, 0]], "kappa": real_nonneg()},
      huge={"n": [HUGE]}, edge={"kappa": [1e-12, 1e6]})
entry("initial.vmf_mixture", mf.initial.vmf_mixture, lambda: dict(n=6, mus=np.eye(3)[:2], kappas=[1.0, 2.0]),
      bad={"n": int_pos(1), "mus": lambda b: [None, "mus", b["mus"] * 2, _poke(b["mus"], NAN), b["mus"] * (1 + 1j)],
           "kappas": [None, "k", [NAN, 1.0], [-1.0, 1.0]],
           "weights": [[0.5, 0.6], [1.0], [NAN, 0.5], "w"]}, huge={"n": [HUGE]})
entry("initial.equiangular", mf.initial.equiangular, lambda: dict(n=4, d=4, gamma=0.3),
      bad={"n": int_pos(1), "d": int_pos(2), "gamma": real_finite(1.5, -2.0)}, huge={"n": [HUGE]})
entry("initial.orthonormal", mf.initial.orthonormal, lambda: dict(n=3, d=4, seed=0),
      bad={"n": int_pos(1, 5), "d": int_pos(1), "seed": seed()}, huge={"d": [HUGE]})
entry("initial.random_rotation", mf.initial.random_rotation, lambda: dict(d=3, seed=0),
      bad={"d": int_pos(1), "seed": seed()}, huge={"d": [HUGE]})

from meanfield.core import random_heads as _rh, schedules as _sch  # noqa: E402

entry("random_heads.random_heads", _rh.random_heads, lambda: dict(d=3, n_heads=2, seed=0),
      bad={"d": int_pos(2), "n_heads": int_pos(1), "score": choice(), "value": choice(), "systems": int_pos(1),
           "seed": seed(), "scale": real_nonneg(), "beta": real_pos()},
      huge={"d": [100000], "n_heads": [HUGE], "systems": [HUGE]})
entry("random_heads.score_matrix", _rh.score_matrix, lambda: dict(score="gaussian", d=3, rng=np.random.default_rng(0)),
      bad={"score": choice(), "d": int_pos(1), "rng": ["rng", 2.5]}, huge={"d": [HUGE]})
entry("random_heads.value_matrix", _rh.value_matrix,
      lambda: dict(value="identity", score="gaussian", M=np.eye(3), rng=np.random.default_rng(0)),
      bad={"value": choice(), "M": lambda b: array(b["M"], extra=(np.eye(3)[:2],))})
entry("schedules.HeadSchedule", _sch.HeadSchedule, lambda: dict(entries=((0.0, H3()), (1.0, H3()))),
      bad={"entries": lambda b: [None, "e", (), ((NAN, H3()),), ((0.0, H3()), (0.0, H3())),
                                 ((0.0, H3()), (1.0, mf.scalar_heads([1.0], 4))), ((0.0, None),)]},
      names={"entries": ("schedule",)})
entry("schedules.ScheduledSystem", _sch.ScheduledSystem,
      lambda: dict(schedule=_sch.HeadSchedule(((0.0, H3()),)), make_system=mf.ParticleSystem),
      bad={"schedule": [None, "s", H3()], "make_system": [None, "f", 3]})
entry("schedules.random_layers", _sch.random_layers, lambda: dict(d=3, n_layers=2, layer_time=0.5, seed=0),
      bad={"d": int_pos(2), "n_layers": int_pos(1), "layer_time": real_pos(), "t0": real_finite()},
      huge={"n_layers": [HUGE]})
entry("schedules.integrate_schedule", _sch.integrate_schedule,
      lambda: dict(schedule=_sch.HeadSchedule(((0.0, H3()), (0.05, H3()))), make_system=mf.ParticleSystem,
                   y0=X3(), t_span=(0.0, 0.1), method="rk4", step=mf.StepControl(dt=0.01)),
      bad={"y0": lambda b: tokens(X3()), "t_span": [None, (0.0, NAN), (0.0,), "t"]},
      names={"y0": ("X",)})

# --------------------------------------------------------------------------------- step rules
from meanfield.models import step_rules as _sr  # noqa: E402

entry("step_rules.StepRule", _sr.StepRule, lambda: dict(name="post_ln", order=1),
      bad={"name": choice(), "order": int_pos(1, 9), "layer_dt": real_pos()}, names={"name": ("rule",)})
entry("step_rules.step", _sr.step, lambda: dict(system=BS(), y=XB(), dt=0.1, rule="post_ln"),
      bad={"y": lambda b: [None, "y", XB().astype(complex) * (1 + 1j), _poke(XB(), NAN), _poke(XB(), INF),
                           XB()[..., :-1], 2.0 * XB()],
           "dt": real_pos(), "rule": choice()}, names={"y": ("X",)})
entry("step_rules.iterate", _sr.iterate, lambda: dict(system=BS(), X0=XB(), dt=0.1, n_steps=3, rule="post_ln"),
      bad={"X0": lambda b: [None, "X", _poke(XB(), NAN), XB()[..., :-1], 2.0 * XB()], "dt": real_pos(),
           "n_steps": int_pos(1), "rule": choice(), "every": int_pos(1), "save_states": flag()},
      huge={"n_steps": [HUGE]})
entry("step_rules.limit_rhs", _sr.limit_rhs, lambda: dict(system=BS(), rule="post_ln"), bad={"rule": choice()})
entry("step_rules.directions", _sr.directions, lambda: dict(y=XB(), rule="post_ln"),
      bad={"y": lambda b: [None, "y", _poke(XB(), NAN), XB().astype(complex) * (1 + 1j)], "rule": choice()})

# --------------------------------------------------------------------------------- particle diagnostics
for _n in ("dissipation", "energy_rate_terms", "radial_shadows", "radial_dominance", "attention_entropy",
           "attention_entropy_rate"):
    entry(f"diagnostics.{_n}", getattr(mf.diagnostics, _n), lambda: dict(system=PS(), X=X3()),
          bad={"X": lambda b: tokens(X3()), "w": [np.full(8, 0.5), np.full(7, 1 / 7), "w"]})
entry("diagnostics.observer", mf.diagnostics.observer, lambda: dict(system=PS(), threshold=0.99),
      bad={"threshold": real_finite(1.5, -2.0), "per_token": flag(), "clustering": flag(),
           "w": [np.full(8, 0.5), "w"]})
entry("diagnostics.observer_passes", mf.diagnostics.observer_passes, lambda: dict(system=PS(), n=8),
      bad={"n": int_pos(1)})

# --------------------------------------------------------------------------------- field diagnostics
for _n in ("mass", "negative_mass", "spectral_tail", "concentration", "boltzmann_entropy", "attention_entropy",
           "dissipation", "free_energy_dissipation"):
    entry(f"field_diagnostics.{_n}", getattr(mf.field_diagnostics, _n), lambda: dict(pde=CPDE(), rho_lm=RHO()),
          bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True)})
entry("field_diagnostics.observer", mf.field_diagnostics.observer, lambda: dict(pde=CPDE(), entropy=True),
      bad={"entropy": flag()})
entry("field_diagnostics.resolution_monitor", mf.field_diagnostics.resolution_monitor,
      lambda: dict(pde=CPDE(), tail_tol=1e-3, negative_tol=1e-4),
      bad={"tail_tol": _types(NAN, 0.0, -1.0), "negative_tol": _types(NAN, 0.0, -1.0)})

# --------------------------------------------------------------------------------- theory (closed forms)
th = mf.theory
_lam = {"lambdas": [None, "l", [], [NAN], [INF], [1j]]}
_beta, _n = {"beta": real_pos()}, {"n": int_pos(2)}
entry("theory.equiangular_rate", th.equiangular_rate, lambda: dict(gamma=0.2, lambdas=[1.0], beta=1.0, n=4),
      bad={"gamma": real_finite(2.0), **_lam, **_beta, **_n, "kernel": choice(), "normalization": choice()})
entry("theory.solve_equiangular", th.solve_equiangular,
      lambda: dict(gamma0=0.2, lambdas=[1.0], beta=1.0, n=4, t=[0.0, 1.0]),
      bad={"gamma0": real_finite(2.0), **_lam, **_beta, **_n, "t": [None, "t", [NAN], [1j], [1.0, 0.0]]})
entry("theory.clustering_time", th.clustering_time,
      lambda: dict(gamma0=0.2, gamma_target=0.9, lambdas=[1.0], beta=1.0, n=4),
      bad={"gamma0": real_finite(2.0), "gamma_target": real_finite(2.0), **_lam, **_beta, **_n}, finite=False)
entry("theory.linearized_clustering_time", th.linearized_clustering_time,
      lambda: dict(gamma0=0.2, gamma_target=0.9, lambdas=[1.0], beta=1.0, n=4),
      bad={"gamma0": real_finite(2.0), "gamma_target": real_finite(2.0), **_lam, **_beta, **_n}, finite=False)
entry("theory.late_rate", th.late_rate, lambda: dict(lambdas=[1.0], beta=1.0), bad={**_lam, **_beta})
for _f in ("phi", "phi_derivative", "phi_second_derivative"):
    entry(f"theory.{_f}", getattr(th, _f), lambda: dict(lam=0.5, beta=1.0, n=4),
          bad={"lam": real_finite(), **_beta, **_n}, names={"lam": ("lambda",)})
entry("theory.lambda_max", th.lambda_max, lambda: dict(beta=1.0, n=4), bad={**_beta, **_n})
entry("theory.phi_inflection", th.phi_inflection, lambda: dict(beta=1.0, n=4), bad={**_beta, **_n}, finite=False)
entry("theory.early_rate", th.early_rate, lambda: dict(lambdas=[1.0, 0.5], beta=1.0, n=4), bad={**_lam, **_beta, **_n})
entry("theory.heterogeneity_gain", th.heterogeneity_gain, lambda: dict(lambdas=[1.0, 0.5], beta=1.0, n=4),
      bad={**_lam, **_beta, **_n})
entry("theory.c_star", th.c_star, lambda: dict(H=2), bad={"H": int_pos(1)})
entry("theory.beta_star", th.beta_star, lambda: dict(H=2, n=8), bad={"H": int_pos(1), **_n, "alpha": real_pos()},
      finite=False)
entry("theory.radial_fraction", th.radial_fraction, lambda: dict(beta=1.0, alpha=1.0, n=4),
      bad={**_beta, "alpha": real_finite(), **_n})
entry("theory.radial_dominance_margins", th.radial_dominance_margins, lambda: dict(beta=1.0, alphas=[1.0, 0.5], n=4),
      bad={"beta": real_nonneg(), "alphas": [None, "a", [], [NAN], [1j]], **_n, "normalization": choice(), "reading": choice()},
      finite=False)
entry("theory.radial_dominance_threshold", th.radial_dominance_threshold, lambda: dict(alphas=[1.0, 0.5], n=4),
      bad={"alphas": [None, "a", [], [NAN], [1j]], **_n, "normalization": choice(), "reading": choice()},
      finite=False)

# --------------------------------------------------------------------------------- analysis: transport, mmd
from meanfield.analysis import (axisymmetric as _ax, clustering as _cl, ensembles as _en, equilibria as _eq,  # noqa: E402
                                mmd as _mmd, phase_transition as _pt, semidiscrete as _sd, transport as _tr)

entry("transport.w2_distance", _tr.w2_distance, lambda: dict(X=X3(), Y=X3()[::-1].copy()),
      bad={"X": lambda b: tokens(X3()), "Y": lambda b: tokens(X3()), "metric": choice(), "method": choice(),
           "a": [np.full(8, 0.5), "a"], "n_projections": int_pos(1)}, huge={"n_projections": [HUGE]})
entry("transport.w2_particles_density", _tr.w2_particles_density,
      lambda: dict(X=X3(), nodes=mf.initial.uniform_sphere(20, 3, seed=1), density_weights=np.full(20, 1 / 20)),
      bad={"X": lambda b: tokens(X3()), "nodes": lambda b: tokens(b["nodes"]),
           "density_weights": [np.full(20, 0.1), np.full(19, 1 / 19), _poke(np.full(20, 1 / 20), NAN), "w"]})
entry("transport.w2_particles_field", _tr.w2_particles_field, lambda: dict(X=X3(), rho_lm=RHO(), grid=GRID()),
      bad={"X": lambda b: tokens(X3()), "rho_lm": lambda b: array(b["rho_lm"], complex_ok=True),
           "metric": choice(), "tol": real_pos(), "n_quad": int_pos(1), "max_iter": int_pos(1)},
      huge={"n_quad": [10**6]})
entry("transport.cost_matrix", _tr.cost_matrix, lambda: dict(X=X3(), Y=X3()),
      bad={"X": lambda b: tokens(X3()), "Y": lambda b: tokens(X3()), "metric": choice()})
entry("semidiscrete.solve_semidiscrete", _sd.solve_semidiscrete,
      lambda: dict(X=X3(), b=np.full(8, 1 / 8), grid=GRID(), rho_lm=RHO()),
      bad={"X": lambda b: tokens(X3()), "b": [np.full(8, 0.5), np.full(7, 1 / 7), _poke(np.full(8, 1 / 8), NAN), "b"],
           "rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "tol": real_pos(), "n_quad": int_pos(1),
           "max_iter": int_pos(1)}, huge={"n_quad": [10**6]})
entry("semidiscrete.grid_of_nodes", _sd.grid_of_nodes, lambda: dict(nodes=GRID().nodes.reshape(-1, 3)),
      bad={})     # documented: None for anything that is not a grid's nodes (see NO_BAD)
entry("semidiscrete.geodesic_bracket", _sd.geodesic_bracket,
      lambda: dict(sol=_sd.solve_semidiscrete(X3(), np.full(8, 1 / 8), GRID(), RHO())),
      bad={})
entry("mmd.mmd_weights", _mmd.mmd_weights, lambda: dict(lmax=8, kernel="sobolev", s=2.0),
      bad={"lmax": int_pos(0), "kernel": choice(), "s": real_pos(), "beta": real_pos()}, huge={"lmax": [HUGE]})
entry("mmd.mmd_particles_field", _mmd.mmd_particles_field, lambda: dict(X=X3(), rho_lm=RHO(), grid=GRID()),
      bad={"X": lambda b: tokens(X3()), "rho_lm": lambda b: array(b["rho_lm"], complex_ok=True),
           "a": [np.full(8, 0.5), "a"], "kernel": choice(), "s": real_pos(), "beta": real_pos()})
entry("mmd.mmd_iid_expectation", _mmd.mmd_iid_expectation, lambda: dict(grid=GRID(), rho_lm=RHO(), n=10),
      bad={"rho_lm": lambda b: array(b["rho_lm"], complex_ok=True), "n": int_pos(1), "kernel": choice(),
           "s": real_pos(), "beta": real_pos()})

# --------------------------------------------------------------------------------- ensembles, clustering
for _n, _extra in (("gram", {}), ("pair_density", {"threshold": real_finite(1.5, -2.0)}),
                   ("one_cluster", {"threshold": real_finite(1.5, -2.0)}),
                   ("cluster_counts", {"threshold": real_finite(1.5, -2.0)}), ("gram_rank", {"tol": real_pos()})):
    entry(f"ensembles.{_n}", getattr(_en, _n), lambda: dict(X=XB()),
          bad={"X": lambda b: [None, "X", XB().astype(complex) * (1 + 1j), _poke(XB(), NAN), _poke(XB(), INF),
                               XB()[0, 0], 10.0 * XB()], **_extra})
entry("ensembles.ensemble_observer", _en.ensemble_observer, lambda: dict(),
      bad={"pair_threshold": real_finite(1.5), "cluster_threshold": real_finite(1.5), "rank_tol": real_pos()})
entry("clustering.clustering", _cl.clustering, lambda: dict(X=X3(), threshold=0.99),
      bad={"X": lambda b: tokens(X3()), "threshold": real_finite("0.9", 1.5, -2.0), "chunk_rows": int_pos(1),
           "method": choice()},
      huge={"X": [mf.initial.uniform_sphere(2000, 200, seed=0)]}, names={"X": ("chunk_rows", "method")})
entry("clustering.mean_inner", _cl.mean_inner, lambda: dict(X=X3()), bad={"X": lambda b: tokens(X3())})

# --------------------------------------------------------------------------------- axisymmetric analysis
entry("axisymmetric.observer", _ax.observer, lambda: dict(pde=AXI()))
entry("axisymmetric.resolution_monitor", _ax.resolution_monitor, lambda: dict(pde=AXI()),
      bad={"tail_tol": _types(NAN, 0.0, -1.0), "negative_tol": _types(NAN, 0.0, -1.0)})
entry("axisymmetric.w2_marginal", _ax.w2_marginal,
      lambda: dict(X=mf.initial.uniform_sphere(50, 4, seed=0), profile=lambda t: np.ones_like(t), axis=None, cost="angle"),
      bad={"X": lambda b: tokens(b["X"]), "cost": choice(), "n_sub": int_pos(1),
           "axis": [np.zeros(4), np.ones(3), [NAN, 0, 0, 1], "axis"]}, huge={"n_sub": [HUGE]})
entry("axisymmetric.w2_marginal_samples", _ax.w2_marginal_samples,
      lambda: dict(X=mf.initial.uniform_sphere(50, 4, seed=0), Y=mf.initial.uniform_sphere(50, 4, seed=1)),
      bad={"X": lambda b: tokens(b["X"]), "Y": lambda b: [*tokens(b["Y"]), mf.initial.uniform_sphere(50, 3, seed=1)],
           "cost": choice(), "axis": [np.zeros(4), [NAN, 0, 0, 1], "axis"]})

# --------------------------------------------------------------------------------- equilibria, transition
entry("equilibria.potential", _eq.potential, lambda: dict(pde=AXI(), b=B_AXI()), bad={"b": lambda b: array(b["b"])})
entry("equilibria.self_consistency_residual", _eq.self_consistency_residual,
      lambda: dict(pde=AXI(), b=B_AXI(), nu=0.5), bad={"b": lambda b: array(b["b"]), "nu": real_pos()})
entry("equilibria.solve_stationary", _eq.solve_stationary, lambda: dict(pde=AXI(), b0=B_AXI(), nu=0.5, maxiter=5),
      bad={"b0": lambda b: array(b["b0"]), "nu": real_pos(), "tol": real_pos(), "maxiter": int_pos(1)})
entry("equilibria.free_energy_gap", _eq.free_energy_gap, lambda: dict(pde=AXI(), b=B_AXI(), nu=0.5),
      bad={"b": lambda b: array(b["b"]), "nu": real_pos()})
entry("equilibria.branch_state", _eq.branch_state, lambda: dict(pde=AXI(), amplitude=0.05, degree=1, maxiter=10),
      bad={"amplitude": real_finite(), "degree": int_pos(1), "tol": real_pos(), "maxiter": int_pos(1)})
entry("equilibria.degree_one_state", _eq.degree_one_state, lambda: dict(pde=AXI(), amplitude=0.05, maxiter=10),
      bad={"amplitude": real_finite(), "tol": real_pos(), "maxiter": int_pos(1)})
entry("equilibria.branch_states", _eq.branch_states, lambda: dict(pde=AXI(), grid=[0.05, 0.1], degree=1),
      bad={"grid": [None, "g", [], [NAN], [1j]], "degree": int_pos(1)}, names={"grid": ("amplitude",)})
entry("equilibria.has_free_energy", _eq.has_free_energy, lambda: dict(pde=AXI()))
entry("equilibria.normalizations_have_free_energy", _eq.normalizations_have_free_energy,
      lambda: dict(names=["mean"]), bad={"names": [None, ["bogus"], [3], "x"]}, names={"names": ("normalization",)})
entry("equilibria.noise_problem", _eq.noise_problem, lambda: dict(pde=AXI()))
entry("equilibria.beta_problem", _eq.beta_problem, lambda: dict(pde=AXI(), nu=0.5), bad={"nu": real_pos()})
entry("equilibria.resolution_error", _eq.resolution_error, lambda: dict(pde=AXI(), b=B_AXI(), nu=0.5),
      bad={"b": lambda b: array(b["b"]), "nu": real_pos()})
entry("equilibria.nu_sharp", _eq.nu_sharp, lambda: dict(pde=AXI(), degree=1), bad={"degree": int_pos(1, 99)})
entry("equilibria.linear_spectrum", _eq.linear_spectrum, lambda: dict(pde=AXI(), b=AXI().uniform(), nu=0.5),
      bad={"b": lambda b: array(b["b"]), "nu": real_pos()})
entry("phase_transition.branch_curvature", _pt.branch_curvature, lambda: dict(pde=AXI(), eps=0.01),
      bad={"eps": real_pos()})
entry("phase_transition.classify_transition", _pt.classify_transition,
      lambda: dict(pde=_pt.phase_transition_model(3, 4.0, lmax=24), r_max=0.9, n_steps=8), bad={"r_max": real_pos(1.5), "n_steps": int_pos(1)},
      huge={"n_steps": [HUGE]}, finite=False)
entry("phase_transition.beta_star_bessel", _pt.beta_star_bessel, lambda: dict(d=3), bad={"d": int_pos(2)})
entry("phase_transition.beta_star_continuation", _pt.beta_star_continuation, lambda: dict(d=3, lmax=16),
      bad={"d": int_pos(2), "normalization": choice(), "lmax": int_pos(1), "beta_max": real_pos()},
      huge={"lmax": [HUGE]})
entry("phase_transition.phase_transition_model", _pt.phase_transition_model, lambda: dict(d=3, beta=2.0, lmax=16),
      bad={"d": int_pos(2), "beta": real_pos(), "normalization": choice(), "lmax": int_pos(1)},
      huge={"lmax": [HUGE]})
entry("phase_transition.phase_transition", _pt.phase_transition, lambda: dict(d=3, beta=2.0, lmax=16),
      bad={"d": int_pos(2), "beta": real_pos(), "normalization": choice(), "lmax": int_pos(1), "rtol": real_pos()},
      huge={"lmax": [HUGE]}, finite=False, traced=False)     # its Newton loops run 10x slower traced

# --------------------------------------------------------------------------------- workflow: extend, phase diagram
from meanfield.workflow import extend as _ext, phase_diagram as _pd  # noqa: E402


@functools.cache
def RUN_DS():
    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.run import run

    cfg = RunConfig.from_dict({"pde": {"lmax": 11}, "particles": {"n": 40}, "initial": {"kappas": [1.0]}, "seed": 3,
                               "integrator": {"t_final": 0.1, "n_frames": 2},
                               "outputs": {"figures": False, "animation": False}})
    return run(cfg, progress=False)


entry("extend.extend", _ext.extend, lambda: dict(ds=RUN_DS(), t_final=0.2, progress=False),
      bad={"t_final": real_finite(0.05, 0.0), "progress": flag(), "ds": [None, "ds"]},
      huge={"t_final": [1e9]})
entry("extend.extended_name", _ext.extended_name, lambda: dict(dataset="result.nc", t_final=2.0),
      bad={"dataset": [None, 3], "t_final": real_finite()})
_PD_SMALL = dict(betas=(1.0, 4.0), t_final=0.4, dt=0.1, record_every=2, n=6, batch=3, d=2, seed=0)
entry("phase_diagram.PhaseDiagramConfig", _pd.PhaseDiagramConfig, lambda: dict(_PD_SMALL),
      bad={"betas": [None, "b", (), (NAN,), (-1.0,), (1j,)], "t_final": real_pos(), "dt": real_pos(),
           "record_every": int_pos(1), "n": int_pos(2), "d": int_pos(2), "batch": int_pos(1), "rule": choice(),
           "score": choice(), "normalization": choice(), "causal": flag(), "seed": seed()},
      huge={"n": [HUGE], "batch": [HUGE], "t_final": [1e12]})
entry("phase_diagram.phase_diagram", _pd.phase_diagram,
      lambda: dict(config=_pd.PhaseDiagramConfig(**_PD_SMALL), progress=False),
      bad={"config": ["cfg", {"betas": "x"}], "scheduler": choice(), "progress": flag()})
entry("phase_diagram.equiangular_curve", _pd.equiangular_curve,
      lambda: dict(config=_pd.PhaseDiagramConfig(**_PD_SMALL)), bad={"config": [None, "cfg"]}, finite=False)


def _toml_file(text):
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    f.write(text)
    f.close()
    return f.name


entry("phase_diagram.load_phase_config", lambda text: _pd.load_phase_config(_toml_file(text)),
      lambda: dict(text="betas = [1.0, 2.0]\nn = 6\nbatch = 3\nt_final = 0.4\n"),
      bad={"text": ["betas = 'x'\n", "beta_range = 5\n", "betas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n",
                    "n = -1\n", "bogus = 1\n", "t_final = nan\n", "= =\n"]},
      names={"text": ("betas", "beta_range", "n", "bogus", "t_final", "TOML", "toml")})
entry("phase_diagram.run_phase_diagram", lambda text, out: _pd.run_phase_diagram(_toml_file(text), out),
      lambda: dict(text="betas = [1.0]\nn = 4\nbatch = 2\nt_final = 0.2\nrecord_every = 1\n",
                   out=__import__("tempfile").mkdtemp()),
      bad={"text": ["beta_range = 5\n", "betas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n"]},
      names={"text": ("betas", "beta_range")}, traced=False)


# --------------------------------------------------------------------------------- the command line
def cli(argv_of):
    """A CLI call as a keyword function: exit 2 with an 'error' line and no traceback becomes a ValueError
    carrying stderr (a clear refusal); a traceback or another exit code is returned (and fails)."""
    def run(**kw):
        import contextlib
        import io

        from meanfield.workflow.cli import main

        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv_of(**kw))
        text = err.getvalue()
        if rc == 2 and "Traceback" not in text and text.strip():
            raise ValueError(text)
        return {"rc": rc, "stderr": text[-400:]}
    return run


def _npy(a):
    import tempfile

    f = tempfile.NamedTemporaryFile(suffix=".npy", delete=False)
    np.save(f, a)
    f.close()
    return f.name


_RUN_TOML = ('[pde]\nlmax = 11\n[initial]\nkappas = [1.0]\n[particles]\nn = 12\n[integrator]\nt_final = 0.1\nn_frames = 2\n'
             '[outputs]\nfigures = false\nanimation = false\n')
entry("cli.config_check", cli(lambda text: ["config", "check", _toml_file(text)]),
      lambda: dict(text=_RUN_TOML),
      bad={"text": lambda b: [b["text"] + "[bogus]\nx = 1\n", b["text"].replace("lmax = 11", "lmax = -7"),
                              b["text"].replace("n = 12", f'n = 12\npositions = "{_npy(X3()[:, :2] + 0j)}"'),
                              b["text"].replace("n = 12", f'n = 8\npositions = "{_npy(X3().astype(complex))}"')]},
      names={"text": ("bogus", "lmax", "positions")})
entry("cli.phase_diagram", cli(lambda text, out: ["phase-diagram", _toml_file(text), "--out", out]),
      lambda: dict(text="betas = [1.0]\nn = 4\nbatch = 2\nt_final = 0.2\nrecord_every = 1\n",
                   out=__import__("tempfile").mkdtemp()),
      bad={"text": ["beta_range = 5\n", "betas = [1.0]\nbeta_range = [1.0, 2.0, 3]\n", "n = 'x'\n"]},
      names={"text": ("betas", "beta_range", "n")}, traced=False)


# --------------------------------------------------------------------------------- the surface to cover
PUBLIC_MODULES = ("meanfield.core.densities", "meanfield.core.initial", "meanfield.analysis.diagnostics",
                  "meanfield.analysis.field_diagnostics", "meanfield.analysis.theory")
ISSUE_MODULES = ("meanfield.models.step_rules", "meanfield.core.schedules", "meanfield.core.random_heads",
                 "meanfield.analysis.transport", "meanfield.analysis.semidiscrete", "meanfield.analysis.mmd",
                 "meanfield.analysis.ensembles", "meanfield.analysis.axisymmetric", "meanfield.analysis.clustering",
                 "meanfield.workflow.extend", "meanfield.workflow.phase_diagram", "meanfield.analysis.equilibria",
                 "meanfield.analysis.phase_transition")
PROTOCOL_MODELS = {"ParticleSystem": ("velocity", "rhs", "energy"), "BatchedSystem": ("velocity", "rhs", "field"),
                   "ContinuumPDE": ("velocity", "rhs", "energies"), "CirclePDE": ("velocity", "rhs", "energies"),
                   "AxisymmetricPDE": ("velocity", "rhs", "energies")}
SHORT = {"meanfield.models.step_rules": "step_rules", "meanfield.core.schedules": "schedules",
         "meanfield.core.random_heads": "random_heads"}

NO_BAD = {
    "densities.uniform_density": "its only input is a grid object (objects are fuzzed through their values)",
    "axisymmetric.observer": "its only input is a model object",
    "equilibria.has_free_energy": "its only input is a model object",
    "equilibria.noise_problem": "its only input is a model object",
    "semidiscrete.geodesic_bracket": "its only input is a LaguerreSolution returned by solve_semidiscrete",
    "semidiscrete.grid_of_nodes": "documented to return None for anything that is not a grid's nodes",
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
    "equilibria.StationaryState": "a result object returned by the stationary solvers, not built by users",
}


def surface():
    """Every public name that needs a registry entry (or an exemption): see the module docstring."""
    names = list(mf.__all__)
    for mod in PUBLIC_MODULES + ISSUE_MODULES:
        m = importlib.import_module(mod)
        short = SHORT.get(mod, mod.rsplit(".", 1)[1])
        for n in m.__all__:
            if callable(getattr(m, n)):          # constants (tuples, floats) take no input
                names.append(f"{short}.{n}")
    for model, methods in PROTOCOL_MODELS.items():
        names += [model] + [f"{model}.{m}" for m in methods]
    return list(dict.fromkeys(names))
