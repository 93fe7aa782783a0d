"""The validators of meanfield.core.validate and the shared choices of meanfield.core.choices.

Every validator is fed each class of bad input (bool for a number, NaN, inf, wrong type, out of
range, wrong shape); the ValueError must name the argument and echo what was received.  Valid
input comes back in its canonical type, unchanged in value.  (The closed-form "validation
problems" of the particle model are in ``test_particle_runs.py``.)
"""

import ast
import math
import pathlib
import re
from fractions import Fraction

import numpy as np
import pytest
from _helpers import paired_kw
from hypothesis import given, settings
from hypothesis import strategies as st

from meanfield.core import choices
from meanfield.core import validate as V
from meanfield.core.options import Checkpointing, SaveAt, StepControl

ANYTHING = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                     st.text(max_size=5), st.lists(st.floats(), max_size=3), st.complex_numbers())


def refused(fn, *args, name, echo, **kw):
    """Call a validator expecting a ValueError that names ``name`` and contains ``echo``; return the message."""
    with pytest.raises(ValueError) as info:
        fn(*args, **kw)
    msg = str(info.value)
    assert msg.startswith(f"{name} must "), msg
    assert echo in msg, (echo, msg)
    return msg


# ---------------------------------------------------------------------------------------- integer
def test_integer_accepts_python_and_numpy_integers():
    for x in (3, np.int64(3), np.uint8(3)):
        out = V.integer("n", x, 2, 3)
        assert out == 3 and type(out) is int
    assert V.integer("k", -10**30) == -10**30        # unbounded: any integer, no float rounding


@pytest.mark.parametrize("x, echo", [(True, "True"), (False, "False"), (3.0, "3.0"), (np.float64(2.0), "2.0"),
                                     ("3", "'3'"), (None, "None"), (np.nan, "nan"), (np.array(3), "array(3)"),
                                     (1, "received 1"), (9, "received 9")])
def test_integer_refuses(x, echo):
    msg = refused(V.integer, "n", x, 2, 8, name="n", echo=echo)
    assert "an integer >= 2 and <= 8" in msg


def test_integer_messages():
    assert str(_err(V.integer, "n", 1, 2)) == "n must be an integer >= 2; received 1"
    assert str(_err(V.integer, "k", 5, None, 4)) == "k must be an integer <= 4; received 5"
    assert str(_err(V.integer, "nlat", 8, 9, what="an integer >= lmax + 1 = 9")) == \
        "nlat must be an integer >= lmax + 1 = 9; received 8"


def _err(fn, *args, **kw):
    with pytest.raises(ValueError) as info:
        fn(*args, **kw)
    return info.value


# ------------------------------------------------------------------------------------------- real
def test_real_accepts_real_numbers():
    for x in (2, 2.5, np.float32(0.5), np.int64(7), Fraction(1, 4)):
        out = V.real("beta", x)
        assert type(out) is float
        # float(x) exactly: a validator never changes a value
        assert out == float(x)
    assert V.real("kappa", math.inf, 0, finite=False) == math.inf


@pytest.mark.parametrize("x, echo", [(True, "True"), (np.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"),
                                     (1 + 0j, "(1+0j)"), ("1", "'1'"), (None, "None"), (np.array(1.0), "array(1.)"),
                                     ([1.0], "[1.0]"), pytest.param(10**400, "1000000", id="int-beyond-float")])
def test_real_refuses(x, echo):
    refused(V.real, "beta", x, name="beta", echo=echo)


def test_real_bounds_and_messages():
    cases = [  # (kwargs, bad value, full message)
        (dict(positive=True), 0.0, "beta must be a positive finite number; received 0.0"),
        (dict(lo=0, lo_open=True), 0.0, "beta must be a finite number > 0; received 0.0"),
        (dict(lo=0.0, hi=1.0), 1.5, "beta must be a finite number >= 0.0 and <= 1.0; received 1.5"),
        (dict(lo=1e-14, hi=1, hi_open=True), 1, "beta must be a finite number >= 1e-14 and < 1; received 1"),
        (dict(nonzero=True), 0, "beta must be a finite number and != 0; received 0"),
        (dict(), "x", "beta must be a finite number; received 'x'"),
        (dict(lo=0, finite=False), -math.inf, "beta must be a number >= 0 or np.inf; received -inf"),
        (dict(hi=0, finite=False), math.inf, "beta must be a number <= 0 or -np.inf; received inf"),
        (dict(finite=False), math.nan, "beta must be a number or +-inf; received nan"),
        (dict(lo=0, what="a concentration >= 0"), -1, "beta must be a concentration >= 0; received -1"),
    ]
    for kw, x, message in cases:
        assert str(_err(V.real, "beta", x, **kw)) == message
    # the edges themselves: closed bounds include them, open bounds do not
    assert V.real("x", 0, 0) == 0.0 and V.real("x", 1, 0, 1) == 1.0
    assert V.real("x", math.inf, 0, finite=False) == math.inf


# ----------------------------------------------------------------------------------------- choice
def test_choice():
    assert V.choice("method", "iid", choices.SAMPLINGS) == "iid"
    assert V.choice("method", np.str_("iid"), choices.SAMPLINGS) == "iid"     # numpy strings are strings
    assert str(_err(V.choice, "method", "sobol", choices.SAMPLINGS)) == \
        "method must be one of ('iid', 'stratified'); received 'sobol'"
    assert str(_err(V.choice, "mode", "x", ["grid", "list"])) == "mode must be one of ['grid', 'list']; received 'x'"
    refused(V.choice, "flag", True, (1, 2), name="flag", echo="True")        # True is not 1
    refused(V.choice, "k", 1, ("1", "2"), name="k", echo="received 1")        # 1 is not "1"
    refused(V.choice, "k", 1.0, (1, 2), name="k", echo="1.0")                 # nor 1.0 an integer choice
    assert V.choice("k", 2, (1, 2)) == 2
    refused(V.choice, "k", ["iid"], choices.SAMPLINGS, name="k", echo="['iid']")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                         # no elementwise-compare warning
        refused(V.choice, "k", np.array(["iid", "x"]), choices.SAMPLINGS, name="k", echo="array(")


# ---------------------------------------------------------------------------------------- boolean
def test_boolean():
    assert V.boolean("figures", True) is True and V.boolean("figures", np.bool_(False)) is False
    for x in (1, 0, "true", None, 1.0, np.array([True])):
        refused(V.boolean, "figures", x, name="figures", echo=repr(x))


# ------------------------------------------------------------------------------------- real_array
def test_real_array():
    a = V.real_array("g", [1, 2.5])
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a, [1.0, 2.5])      # exact: only a dtype conversion
    x = np.zeros((4, 3))
    assert V.real_array("X", x, ("n", 3)) is x          # float64 input is not copied
    assert V.real_array("X", np.zeros((0, 3)), (None, 3)).shape == (0, 3)
    assert np.isinf(V.real_array("t", [0.0, np.inf], finite=False)).sum() == 1
    for bad, echo in [("abc", "'abc'"), ([1, "a"], "'a'"), ([1j], "1j"), ([[1, 2], [3]], "[3]"), (None, "None"),
                      ([np.nan], "nan"), ([np.inf], "inf")]:
        msg = refused(V.real_array, "g", bad, name="g", echo=echo)
        assert "finite real number(s)" in msg
    refused(V.real_array, "t", [np.nan], finite=False, name="t", echo="nan")
    assert str(_err(V.real_array, "X", np.zeros(4), ("n", 3))) == \
        "X must be a finite real array of shape (n, 3); received shape (4,)"
    assert str(_err(V.real_array, "c", np.zeros(3), (2,))) == \
        "c must be a finite real array of shape (2,); received shape (3,)"
    refused(V.real_array, "X", [[0.0, np.nan, 1.0]], ("n", 3), name="X", echo="nan")


# ------------------------------------------------------------------------------ unit vector(s)
def test_unit_vector():
    mu = [0.0, 0.6, 0.8]
    np.testing.assert_array_equal(V.unit_vector("mu", mu, 3), mu)    # exact: never renormalized
    V.unit_vector("mu", [1.0 + 4e-9, 0.0])        # |x|^2 - 1 = 8e-9 <= 1e-8 (the default tolerance)
    assert "received [1.0, 0.0, 1.0]" in str(_err(V.unit_vector, "mu", [1.0, 0.0, 1.0]))
    assert "mu must be a unit vector (| |x|^2 - 1 | <= 1e-8)" in str(_err(V.unit_vector, "mu", [2.0, 0.0]))
    for bad, echo in [([1.0, 0.0], "[1.0, 0.0]"), ([np.nan, 0, 1], "nan"), ("abc", "'abc'"), ([], "[]"),
                      (np.eye(3), "array("), (True, "True")]:
        refused(V.unit_vector, "mu", bad, 3, name="mu", echo=echo)
    refused(V.unit_vector, "mu", [1.0, 1e-3], name="mu", echo="1.000001")    # |x|^2 is echoed


def test_unit_vectors():
    X = np.eye(3)
    assert V.unit_vectors("X", X, 3) is X                 # float64 input is not copied
    assert V.unit_vectors("X", np.zeros((0, 3)), 3).shape == (0, 3)
    assert str(_err(V.unit_vectors, "points", np.ones(4), 3)) == "points must have shape (n, 3); received shape (4,)"
    assert str(_err(V.unit_vectors, "X", np.zeros((0, 3)), 3, min_rows=1)) == \
        "X must have shape (n, 3), n >= 1; received shape (0, 3)"
    bad = np.eye(3)
    bad[1, 1] = np.nan
    assert str(_err(V.unit_vectors, "points", bad)) == \
        "points must be finite unit vectors; received 1 rows with NaN or inf"
    assert str(_err(V.unit_vectors, "X", [[1.0, 0.0], [0.0, 1.1]])) == \
        "X must be unit vectors (| |x|^2 - 1 | <= 1e-8); received max deviation 0.21"
    refused(V.unit_vectors, "X", "abc", name="X", echo="'abc'")
    refused(V.unit_vectors, "X", np.eye(2), 3, name="X", echo="(2, 2)")
    V.unit_vectors("X", [[1.0, 1e-3]], tol=1.1e-6)       # |x|^2 - 1 = 1e-6: within a looser tolerance


def test_unit_vectors_and_weights_refuse_complex_values_never_casting(recwarn):
    # numpy's cast to float drops the imaginary part with only a ComplexWarning: refused by name instead,
    # even when the imaginary part is 0 (a complex .npy of positions passed `meanfield config` before)
    X = np.eye(3).astype(complex)
    refused(V.unit_vectors, "particles.positions", X, 3, name="particles.positions",
            echo="received complex values of shape (3, 3)")
    refused(V.unit_vector, "axis", X[0], 3, name="axis", echo="received complex values of shape (3,)")
    refused(V.probability_weights, "w", np.full(3, 1 / 3 + 0j), 3, name="w", echo="received complex values")
    refused(V.signed_weights, "w", np.full(3, 1 / 3 + 0j), 3, name="w", echo="received complex values")
    assert not [w for w in recwarn if issubclass(w.category, np.exceptions.ComplexWarning)]


# -------------------------------------------------------------------------- probability weights
def test_probability_weights():
    np.testing.assert_array_equal(V.probability_weights("w", None, 4), np.full(4, 0.25))   # exact: 1/4
    w = V.probability_weights("w", [0.5, 0.5], 2)
    assert w.dtype == np.float64
    assert str(_err(V.probability_weights, "w", [0.5, 0.6], 2)) == \
        ("w must be 2 finite weights >= 0 summing to 1 (to 1e-8); received shape (2,), sum 1.1 (off by 0.1; "
         "normalize with w / w.sum()), min 0.5")
    for bad, echo in [([1.0], "shape (1,)"), ([1.5, -0.5], "min -0.5"), ([np.nan, 1.0], "sum nan"),
                      ("ab", "'ab'"), ([np.inf, 0], "sum inf")]:
        refused(V.probability_weights, "w", bad, 2, name="w", echo=echo)
    # weights a user gives carry their typing's rounding (WEIGHTS_TOL = 1e-8): a sum of 1 + 1e-10 (refused at
    # MASS_TOL's knife edge until now) and nine-digit thirds pass; 1e-7 off does not, and the message says how far
    assert V.WEIGHTS_TOL == 1e-8 and V.MASS_TOL == 1e-10
    V.probability_weights("w", [0.5, 0.5 + 1e-10], 2)
    V.probability_weights("w", [0.333333333] * 2 + [0.333333334], 3)
    refused(V.probability_weights, "w", [0.5, 0.5 + 1e-7], 2, name="w", echo="off by 1e-07")


def test_signed_weights_and_unit_mass():
    # negative entries allowed, the total still 1 to MASS_TOL; the message says so
    np.testing.assert_array_equal(V.signed_weights("dw", [1.5, -0.5], 2), [1.5, -0.5])
    assert str(_err(V.signed_weights, "dw", [1.5, -0.4], 2)) == (
        "dw must be 2 finite weights summing to 1 (to 1e-10), negative entries included; received shape (2,), "
        "sum 1.1 (off by 0.1; normalize with w / w.sum()), min -0.4")
    refused(V.signed_weights, "dw", [1.0], 2, name="dw", echo="shape (1,)")
    assert V.unit_mass("c0", 1.0 + 1e-11) == 1.0 + 1e-11
    assert str(_err(V.unit_mass, "c0", 0.5)) == "c0 must have mass 1 (to 1e-10); received mass 0.5"


# -------------------------------------------------------------------------------------------- rng
def test_rng_streams_are_numpy_default_rng():
    g = np.random.default_rng(5)
    assert V.rng(g) is g
    for seed in (7, np.int64(7)):
        # bit-identical: the same seed gives numpy's own stream (the refactoring keeps every result)
        np.testing.assert_array_equal(V.rng(seed).standard_normal(5), np.random.default_rng(7).standard_normal(5))
    assert isinstance(V.rng(None), np.random.Generator)


@pytest.mark.parametrize("seed, echo", [(True, "True"), (-1, "-1"), (1.5, "1.5"), ("0", "'0'"), ([1, 2], "[1, 2]"),
                                        (np.random.RandomState(0), "RandomState")])
def test_rng_refuses(seed, echo):
    msg = refused(V.rng, seed, name="seed", echo=echo)
    assert "None, an integer >= 0 or a numpy.random.Generator" in msg


def test_rng_names_its_argument():
    assert str(_err(V.rng, -3, name="random_state")).startswith("random_state must be None")


# ------------------------------------------------------------------------- every validator, any input
@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(x=ANYTHING)
def test_any_input_returns_canonical_type_or_names_the_argument(x):
    calls = [(V.integer, (), int), (V.integer_array, (), np.ndarray), (V.real, (), float), (V.boolean, (), bool),
             (V.choice, (("a", "b"),), str), (V.real_array, (), np.ndarray), (V.unit_vector, (), np.ndarray),
             (V.unit_vectors, (), np.ndarray), (V.probability_weights, (2,), np.ndarray),
             (V.rng, (), np.random.Generator)]
    for fn, extra, kind in calls:
        try:
            out = fn(x, *extra, name="arg") if fn is V.rng else fn("arg", x, *extra)
        except ValueError as err:
            assert str(err).startswith("arg must ") and "received" in str(err), str(err)
            continue
        assert isinstance(out, kind), (fn.__name__, x, out)
        if kind is float:
            assert math.isfinite(out)
        if kind is np.ndarray:
            assert np.all(np.isfinite(out))


# ------------------------------------------------------------------ the closed-form modules' messages
def test_closed_form_modules_keep_their_messages():
    # analysis/theory.py and analysis/stability.py call the public validators (the private aliases
    # _int, _real, _real_array, _choice, ... are gone); their messages are unchanged
    from meanfield.analysis import stability

    for private in ("_int", "_real", "_real_array", "_choice", "_int_array", "_lambdas", "_gamma", "_common"):
        assert not hasattr(V, private), private
    assert str(_err(V.integer, "n", 1, 2)) == "n must be an integer >= 2; received 1"
    assert str(_err(V.real, "beta", 0.0, positive=True)) == "beta must be a positive finite number; received 0.0"
    assert str(_err(V.real, "t", np.nan, what="a finite real number")) == "t must be a finite real number; received nan"
    assert str(_err(V.real_array, "t", [np.inf])) == "t must be finite real number(s); received [inf]"
    assert str(_err(V.choice, "kernel", "gauss", ("exp", "relu"))) == \
        "kernel must be one of ('exp', 'relu'); received 'gauss'"
    assert str(_err(stability._lambdas, [])) == \
        "lambdas must be a non-empty 1-d sequence of finite head strengths; received []"
    lam, beta, n, kernel, norm = stability._common([1.0], 2, 5, "exp", "mean")
    assert (beta, n, kernel, norm) == (2.0, 5, "exp", "mean") and lam.tolist() == [1.0]


def test_integer_array():
    out = V.integer_array("l", [0, 2.0, np.int64(3)], 0)
    assert out.dtype.kind == "i" and out.tolist() == [0, 2, 3]
    assert V.integer_array("H", 4, 1).shape == ()                     # a scalar stays 0-d
    for bad, echo in [([], "[]"), ([1.5], "[1.5]"), ([np.nan], "[nan]"), ([True], "[True]"), ("3", "'3'"),
                      ([1j], "[1j]"), ([-1], "[-1]"), ([2.0**60], "[1.152921504606847e+18]"),
                      ([[1], [2, 3]], "[[1], [2, 3]]")]:
        refused(V.integer_array, "l", bad, 0, name="l", echo=echo)
    assert str(_err(V.integer_array, "H", 0, 1)) == "H must be integer(s) >= 1; received 0"


# ------------------------------------------------------------------------------------- choices
def test_choices_defined_once_and_imported():
    from meanfield.workflow import config, sweep

    # imported under their own names (no second name such as 0.1's config.SAMPLING, sweep.MODES)
    assert config.W2_METHODS is choices.W2_METHODS and config.SAMPLINGS is choices.SAMPLINGS
    assert sweep.SWEEP_MODES is choices.SWEEP_MODES
    assert not hasattr(config, "SAMPLING") and not hasattr(sweep, "MODES")
    assert choices.W2_METHODS == ("auto",) + choices.W2_SOLVERS
    assert choices.SUMMATIONS == ("auto",) + choices.SUMMATION_PATHS
    for name in choices.__all__:
        values = getattr(choices, name)
        assert isinstance(values, tuple) and values and all(isinstance(v, str) for v in values)
        assert len(set(values)) == len(values), name


def test_modules_check_with_the_shared_choices_themselves():
    # models/, analysis/transport and workflow/paired held copies or second names (continuum.METHODS,
    # transport.METRICS / METHODS / NEGATIVE_POLICIES, paired.PARTICLE_SUMS); 0.2.0 imports the tuples
    from meanfield.analysis import transport
    from meanfield.models import circle, continuum, particles
    from meanfield.workflow import paired

    assert particles.GEOMETRIES is choices.GEOMETRIES and particles.SUMMATIONS is choices.SUMMATIONS
    assert continuum.CONTINUUM_SUMMATIONS is choices.CONTINUUM_SUMMATIONS
    assert circle.CONTINUUM_SUMMATIONS is choices.CONTINUUM_SUMMATIONS
    assert transport.W2_METRICS is choices.W2_METRICS and transport.W2_METHODS is choices.W2_METHODS
    assert transport.W2_NEGATIVE_POLICIES is choices.W2_NEGATIVE_POLICIES
    assert paired.SAMPLINGS is choices.SAMPLINGS and paired.SUMMATIONS is choices.SUMMATIONS
    for module, old in ((continuum, "METHODS"), (transport, "METRICS"), (transport, "METHODS"),
                        (transport, "NEGATIVE_POLICIES"), (paired, "PARTICLE_SUMS")):
        assert not hasattr(module, old), (module.__name__, old)


def test_validate_and_choices_import_nothing_from_meanfield_at_load():
    # so that any core module (heads, kernels, integrate) can import them without an import cycle
    root = pathlib.Path(V.__file__).parent
    for name in ("validate.py", "choices.py"):
        tree = ast.parse((root / name).read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not [n for n in top if isinstance(n, ast.ImportFrom) and (n.level or "meanfield" in (n.module or ""))]


# --------------------------------------------------------------------- the modules that use them
def test_modules_refuse_bad_arguments_by_name(tmp_path):
    from meanfield.core import densities, initial
    from meanfield.core.sphere import SphereGrid
    from meanfield.workflow import plotting
    from meanfield.workflow.sweep import SweepSpec, run_sweep

    refused(initial.uniform_sphere, 4, 3, seed=1.5, name="seed", echo="1.5")
    refused(initial.random_rotation, 1, name="d", echo="received 1")
    refused(initial.vmf_mixture, 0, np.eye(3)[:1], 1.0, name="n", echo="received 0")
    refused(initial.vmf_mixture, 5, np.eye(3)[:2], 1.0, [0.5, np.nan], name="weights", echo="sum nan")
    refused(initial.vmf_mixture, 5, np.eye(3)[:2], [1.0, 2.0, 3.0], name="kappas", echo="shape (3,)")
    refused(initial.vmf_mixture, 5, np.zeros((0, 3)), 1.0, name="mus", echo="shape (0, 3)")
    refused(initial.vmf_mixture, 5, "abc", 1.0, name="mus", echo="'abc'")
    refused(initial.equiangular, 3, 3, "0.1", name="gamma", echo="'0.1'")
    refused(initial.von_mises_fisher, 3, [0, 0, 1.0], True, name="kappa", echo="True")
    grid = SphereGrid(4)
    rho = densities.uniform_density(grid)
    refused(densities.sample_particles, grid, rho, 3, seed="x", name="seed", echo="'x'")
    refused(densities.vmf_mixture_density, grid, [[0, 0, 1.0]], 1.0, floor=np.nan, name="floor", echo="nan")
    refused(densities.vmf_density, grid, [0, 0, 1.0], np.inf, name="kappa", echo="inf")
    refused(SphereGrid, 8, nthreads=True, name="nthreads", echo="True")
    spec = SweepSpec({"pde": {"lmax": 3}}, {"seed": [1]})
    refused(run_sweep, spec, tmp_path / "s", n_workers=0, name="n_workers", echo="received 0")
    refused(run_sweep, spec, tmp_path / "s", retries=-1, name="retries", echo="-1")
    assert not (tmp_path / "s").exists()              # refused before anything was created
    refused(plotting.save_figures, None, tmp_path / "f", dpi=0, name="dpi", echo="received 0")
    refused(plotting.save_figures, None, tmp_path / "f", animation="no", name="animation", echo="'no'")
    refused(plotting.save_animation, None, tmp_path / "a.gif", fps=np.nan, name="fps", echo="nan")
    refused(plotting.orthographic_views, None, center=(1.0,), name="center", echo="(1,)")


def test_cli_argument_types_use_the_validators():
    import argparse

    from meanfield.workflow import cli

    assert cli._positive_float("2.5") == 2.5 and cli._positive_int("3") == 3
    for parse, text in [(cli._positive_float, "nan"), (cli._positive_float, "-1"), (cli._positive_int, "1"),
                        (cli._positive_int, "2.0"), (cli._positive_int_1, "x")]:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"received {text}")):
            parse(text)


# ------------------------------------------- arguments that were unchecked (or crashed) before issue 11 item 6
def test_core_refuses_previously_unchecked_arguments():
    from meanfield.core import funk_hecke, kernels, zonal
    from meanfield.core import heads as H

    h = H.scalar_heads([1.0], 3)
    refused(funk_hecke.funk_hecke_multipliers, 4, exp_rate="1.0", name="exp_rate", echo="'1.0'")
    refused(funk_hecke.funk_hecke_multipliers, 4, exp_rate=np.nan, name="exp_rate", echo="nan")
    refused(funk_hecke.funk_hecke_multipliers, 4, g=3.0, name="g", echo="3.0")
    refused(funk_hecke.funk_hecke_multipliers, 4, g=np.exp, n_nodes=True, name="n_nodes", echo="True")
    refused(zonal.zonal_multipliers, h[0], 2.0, name="lmax", echo="2.0")
    refused(zonal.zonal_multipliers, h[0], -1, name="lmax", echo="-1")
    refused(zonal.required_lmax, h, 0.0, name="tolerance", echo="0.0")
    refused(zonal.required_lmax, h, 1.5, name="tolerance", echo="1.5")
    refused(zonal.required_lmax, h, "1e-10", name="tolerance", echo="'1e-10'")
    refused(zonal.required_lmax, h, 1e-10, cap=True, name="cap", echo="True")
    refused(zonal.ZonalOperator, h, np.int64(-1), name="lmax", echo="-1")
    refused(kernels.get_kernel, ["exp"], name="kernel", echo="['exp']")
    refused(kernels.get_normalization, 1, argument="norm", name="norm", echo="received 1")
    refused(H.Head, np.eye(3), np.eye(3), kernel="sigmoid", kernel_params={"bias": np.bool_(True)},
            name="kernel_params['bias']", echo="True")


def test_integrate_refuses_previously_unchecked_arguments():
    from meanfield.core.integrate import integrate

    def run(**kw):
        step = {"dt": 0.1, **{k: kw.pop(k) for k in ("dt", "max_steps", "adaptive", "rtol", "atol", "dt_max")
                              if k in kw}}
        save = {k: kw.pop(k) for k in ("t_eval",) if k in kw}
        ck = {new: kw.pop(old) for old, new in (("checkpoint", "save"), ("checkpoint_every", "every")) if old in kw}
        args = dict(rhs=lambda t, y: -y, y0=[1.0], t_span=(0.0, 1.0))
        args.update(kw)
        return integrate(args.pop("rhs"), args.pop("y0"), args.pop("t_span"), step=StepControl(**step),
                         save=SaveAt(**save), checkpointing=Checkpointing(**ck), **args)

    refused(run, max_steps=True, name="max_steps", echo="True")                   # was accepted as 1
    refused(run, max_steps=10.0, name="max_steps", echo="10.0")
    refused(run, method="dopri5", adaptive=1, name="adaptive", echo="1 with method 'dopri5'")   # was accepted
    refused(run, method="dopri5", adaptive="yes", name="adaptive", echo="'yes'")
    refused(run, t_eval=[0.0, np.nan], name="t_eval", echo="nan")                  # NaN passed the order check
    refused(run, t_span="ab", name="t_span", echo="'ab'")
    refused(run, t_span=(0.0, np.inf), name="t_span", echo="inf")
    refused(run, dt=True, name="dt", echo="True")
    refused(run, method="dopri5", atol="0", name="atol", echo="'0'")
    refused(run, method="dopri5", dt_max=np.nan, name="dt_max", echo="nan")
    refused(run, checkpoint=lambda s: None, checkpoint_every=np.bool_(True), name="every", echo="True")
    # the adaptive default still runs with dt_max = inf allowed (tolerance of dopri5 at rtol 1e-8: 1e-6 is loose)
    tr = run(method="dopri5", dt=None, dt_max=np.inf, rtol=1e-8, atol=0)
    assert tr.success and abs(tr.y_final[0] - np.exp(-1.0)) <= 1e-6


def test_particles_refuse_previously_unchecked_arguments():
    import meanfield as mf
    from meanfield.core import initial
    from meanfield.models import particles

    heads = mf.scalar_heads([1.0], 3)
    refused(mf.ParticleSystem, heads, chunk_bytes=True, name="chunk_bytes", echo="True")   # was accepted as 1 byte
    refused(mf.ParticleSystem, heads, chunk_bytes=2.0**20, name="chunk_bytes", echo="1048576.0")
    refused(mf.ParticleSystem, heads, kernel_tol=np.bool_(True), name="kernel_tol", echo="True")
    refused(mf.ParticleSystem, heads, geometry=np.array(["sphere"]), name="geometry", echo="array(['sphere']")
    refused(mf.ParticleSystem, heads, summation=None, name="summation", echo="None")
    refused(particles.check_tokens, "abc", name="X", echo="'abc'")
    refused(particles.check_tokens, [[1 + 1j, 0, 0]] * 2, name="X", echo="(1+1j)")
    refused(particles.check_weights, ["a", "b"], 2, name="w", echo="['a', 'b']")
    refused(particles.check_weights, [np.nan, 1.0], 2, name="w", echo="sum nan")
    system = mf.ParticleSystem(heads)
    X = initial.uniform_sphere(4, 3, seed=0)
    refused(system.check, X, [0.5, 0.5, 0.5, -0.5], w_name="weights", name="weights", echo="min -0.5")
    with pytest.raises(ValueError, match=r"^X0 rows must be unit vectors .*never renormalized"):
        system.check(2 * X, name="X0")


def test_fastsum_refuses_previously_unchecked_arguments():
    import meanfield as mf
    from meanfield.core import initial
    from meanfield.models.fastsum import SpectralSum

    heads = mf.scalar_heads([1.0], 3)
    refused(SpectralSum, heads, lmax=True, name="lmax", echo="True")
    refused(SpectralSum, heads, lmax=8.0, name="lmax", echo="8.0")
    refused(SpectralSum, heads, kernel_tol=np.bool_(False), name="kernel_tol", echo="False")
    fast = SpectralSum(heads, lmax=8)
    X = initial.uniform_sphere(5, 3, seed=0)
    refused(fast.coefficients, X, [0.2, 0.2, np.nan, 0.2, 0.2], name="w", echo="nan")    # NaN weights went to ducc0
    refused(fast.coefficients, X, np.full(4, 0.25), name="w", echo="shape (4,)")
    refused(fast.energies, [[0.0, 0.0, np.nan]] * 5, np.full(5, 0.2), name="X", echo="nan")
    refused(fast.forces, "abc", np.full(5, 0.2), name="X", echo="'abc'")


def test_workflow_and_diagnostics_refuse_previously_unchecked_arguments(tmp_path):
    import meanfield as mf
    from meanfield.analysis import field_diagnostics
    from meanfield.core.densities import uniform_density
    from meanfield.core.integrate import integrate
    from meanfield.workflow import paired, run

    heads = mf.scalar_heads([1.0], 3)
    args = dict(heads=heads, rho_lm0=uniform_density, n_particles=10, t_final=0.2, lmax=14)

    def pair(**kw):
        return paired.paired_run(**paired_kw(**{**args, **kw}))

    refused(pair, n_particles=True, name="n_particles", echo="True")
    refused(pair, n_particles=10.0, name="n_particles", echo="10.0")
    refused(pair, t_final="1", name="t_final", echo="'1'")
    refused(pair, t_eval=[0.0, np.nan], name="t_eval", echo="nan")          # NaN passed the order check
    refused(pair, sampling=np.array(["iid"]), name="particles.sampling", echo="array(['iid']")
    refused(pair, progress="yes", name="progress", echo="'yes'")
    refused(paired.transport_grid, 8.0, name="nlat", echo="8.0")
    refused(paired.transport_grid, 8, np.bool_(True), name="nlon", echo="True")
    refused(run.run, run.RunConfig(), progress=1, name="progress", echo="received 1")
    refused(integrate, lambda t, y: -y, [1.0], (0.0, 1.0), step=StepControl(dt=0.1), progress="no", name="progress", echo="'no'")
    from meanfield.core.steppers import phi_functions
    refused(phi_functions, [0.5], 2.0, name="n", echo="2.0")                  # range(2.0 + 1): TypeError before
    refused(phi_functions, [0.5], -1, name="n", echo="-1")                    # an empty list before
    pde = mf.ContinuumPDE(heads, 14)
    rho = uniform_density(pde.grid)
    refused(field_diagnostics.field_spectral_tail, pde, rho, fraction=1.5, name="fraction", echo="1.5")
    refused(field_diagnostics.field_resolution_monitor, pde, tail_tol=np.nan, name="tail_tol", echo="nan")
    refused(field_diagnostics.field_resolution_monitor, pde, negative_tol="0", name="negative_tol", echo="'0'")
    refused(field_diagnostics.field_observer, pde, entropy="no", name="entropy", echo="'no'")
    # an infinite tolerance is allowed (never stop on that criterion): the uniform density is resolved
    assert field_diagnostics.field_resolution_monitor(pde, np.inf, np.inf)(0.0, pde.state(rho)) is None


def test_complex_arrays_are_refused_not_cast():
    # numpy would cast complex -> float with only a ComplexWarning, dropping the imaginary part silently (issue 26):
    # refused by name, for every entry point that reads arrays through real_array (tokens, heads, coefficients)
    import warnings

    import meanfield as mf
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no ComplexWarning either: the cast never happens
        for x in (np.array([1 + 2j, 3.0]), [1j, 0.0], np.ones(3, complex)):
            with pytest.raises(ValueError, match=r"x must be .*received complex values"):
                V.real_array("x", x)
        with pytest.raises(ValueError, match=r"X must be .*received complex values"):
            mf.ParticleSystem(mf.scalar_heads([1.0], 3)).check(np.ones((4, 3), complex) / np.sqrt(3))
        with pytest.raises(ValueError, match=r"M must be .*received complex values"):
            mf.Head(np.eye(3) * (1 + 0j), np.eye(3), 1.0)
