"""Hostile input, property-based (hypothesis): every public entry point either works or raises a
ValueError that names the argument; nothing else escapes, nothing non-finite is returned silently.

``OUTCOMES`` tallies what happened per entry point (``python -m pytest tests/test_hostile.py -s``
prints the table at the end of the module).
"""

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import meanfield as mf
from meanfield import densities, diagnostics, initial, theory
from meanfield.analysis import stability
from meanfield.core.integrate import integrate
from meanfield.core.options import StepControl

OUTCOMES = Counter()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=True, database=None)

floats_any = st.floats(allow_nan=True, allow_infinity=True, width=64)
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


def attempt(name, fn, *args, names=(), **kw):
    """Run ``fn``; a ValueError must mention one of ``names``; any other exception fails the test."""
    try:
        out = fn(*args, **kw)
    except ValueError as err:
        msg = str(err)
        assert msg and any(w in msg for w in ("received", "must", "allowed", "invalid TOML")), msg
        if names:
            assert any(n in msg for n in names), (names, msg)
        OUTCOMES[(name, "ValueError")] += 1
        return None
    OUTCOMES[(name, "ok")] += 1
    return out


@SETTINGS
@given(M=hnp.arrays(np.float64, shapes, elements=floats_any), beta=floats_any,
       kernel=st.sampled_from(["exp", "relu", "gauss", ""]), normalization=st.sampled_from(["mean", "softmax", "sum"]))
def test_head_construction(M, beta, kernel, normalization):
    h = attempt("Head", mf.Head, M, M, beta, kernel, normalization,
                names=("M", "V", "beta", "kernel", "normalization"))
    if h is not None:
        assert np.all(np.isfinite(h.M)) and h.beta > 0 and np.isfinite(h.beta)


@SETTINGS
@given(X=st.one_of(hnp.arrays(np.float64, shapes, elements=floats_any),
                   hnp.arrays(np.float64, st.tuples(st.integers(0, 6), st.integers(2, 4)),
                              elements=st.floats(-10, 10))),
       beta=st.floats(1e-8, 50.0), geometry=st.sampled_from(["sphere", "flat"]), unit=st.booleans())
def test_particle_velocity_on_arbitrary_arrays(X, beta, geometry, unit):
    system = mf.ParticleSystem(mf.scalar_heads([1.0, -0.5], 3, beta=beta), geometry)
    if unit and X.ndim == 2 and X.size:          # half the cases: rows pushed onto the sphere where possible
        with np.errstate(all="ignore"):
            X = X / np.linalg.norm(X, axis=1, keepdims=True)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v = attempt("ParticleSystem.velocity", system.velocity, X, names=("X",))
    if v is not None:
        assert v.shape == X.shape
        if not np.all(np.isfinite(v)):
            # only flat tokens far off the sphere can overflow exp(beta s); numpy says so: not silent
            assert geometry == "flat" and any("overflow" in str(w.message) for w in caught)
            OUTCOMES[("ParticleSystem.velocity", "overflow warned")] += 1


@SETTINGS
@given(n=st.integers(2, 12), d=st.integers(2, 5), beta=st.floats(1e-6, 300.0),
       normalization=st.sampled_from(["mean", "softmax"]), seed=st.integers(0, 2**16))
def test_extreme_beta_softmax_is_finite(n, d, beta, normalization, seed):
    """Huge or tiny beta: softmax never overflows (row max shift); mean may overflow only past
    exp(709), in which case the result is inf, never NaN hidden in a finite-looking answer."""
    system = mf.ParticleSystem(mf.scalar_heads([1.0], d, beta=beta, normalization=normalization))
    X = initial.uniform_sphere(n, d, seed=seed)
    with np.errstate(over="ignore", invalid="ignore"):
        v = attempt("velocity(extreme beta)", system.velocity, X)
    if normalization == "softmax":
        assert np.all(np.isfinite(v))
    H = diagnostics.attention_entropy(system, X)
    assert np.all(np.isfinite(H)) and np.all(H >= -1e-12) and np.all(H <= np.log(n) + 1e-12)


@SETTINGS
@given(d=st.integers(2, 5), rank=st.integers(0, 2), n=st.integers(2, 10), seed=st.integers(0, 2**16),
       kernel=st.sampled_from(["exp", "relu"]), normalization=st.sampled_from(["mean", "softmax"]))
def test_degenerate_heads(d, rank, n, seed, kernel, normalization):
    """Zero or low-rank heads: velocities finite (ReLU softmax rows with no mass give 0)."""
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((d, rank))
    M = B @ B.T
    system = mf.ParticleSystem((mf.Head(M, M, 1.0, kernel, normalization),))
    v = attempt("velocity(degenerate heads)", system.velocity, initial.uniform_sphere(n, d, seed=seed))
    assert v is not None and np.all(np.isfinite(v))
    if rank == 0:
        assert np.all(v == 0) or normalization == "softmax"


@SETTINGS
@given(y0=hnp.arrays(np.float64, hnp.array_shapes(max_dims=2, max_side=4), elements=floats_any),
       t1=floats_any, dt=floats_any, method=st.sampled_from(["rk4", "dopri5", "euler", "rk45", 3]))
def test_integrate_arguments(y0, t1, dt, method):
    def run(*args, **kw):          # StepControl refuses a bad dt when built: inside the attempt
        return integrate(*args, step=StepControl(dt=dt), **kw)

    tr = attempt("integrate", run, lambda t, y: -y, y0, (0.0, t1), method=method,
                 names=("y0", "t_span", "dt", "method", "t_eval"))
    if tr is not None:
        assert tr.status in (0, -1) and np.all(np.isfinite(tr.y_final))


@SETTINGS
@given(H=st.one_of(st.integers(-3, 12), floats_any), n=st.one_of(st.integers(-3, 200), floats_any),
       beta=floats_any)
def test_theory_closed_forms(H, n, beta):
    for name, fn, args, names in [("theory.beta_star", theory.beta_star, (H, n), ("H", "n", "alpha")),
                                  ("theory.lambda_max", theory.lambda_max, (beta, n), ("beta", "n")),
                                  ("stability.growth_rate", stability.growth_rate, (2, [1.0], beta), ("beta", "l"))]:
        out = attempt(name, fn, *args, names=names)
        if out is not None and name != "theory.beta_star":     # beta* may be -inf/inf by its formula
            assert np.all(np.isfinite(out)), (name, args, out)


@SETTINGS
@given(n=st.integers(-2, 6), d=st.integers(-1, 6), gamma=floats_any, kappa=floats_any)
def test_initial_conditions(n, d, gamma, kappa):
    X = attempt("initial.equiangular", initial.equiangular, n, d, gamma, names=("n", "d", "gamma"))
    if X is not None:
        assert np.all(np.isfinite(X))
    mu = np.eye(max(d, 2))[0]
    Y = attempt("initial.von_mises_fisher", initial.von_mises_fisher, n, mu, kappa, names=("n", "d", "kappa"))
    if Y is not None:
        assert np.all(np.isfinite(Y))


@SETTINGS
@given(coeffs=hnp.arrays(np.complex128, st.integers(0, 30), elements=st.complex_numbers(allow_nan=True,
                                                                                        allow_infinity=True)),
       n=st.integers(-1, 20))
def test_densities_and_sampling(coeffs, n):
    grid = mf.SphereGrid(5)
    attempt("densities.check_density", densities.check_density, grid, coeffs, names=("rho_lm",))
    rho = densities.vmf_density(grid, [0, 0, 1.0], 2.0)
    X = attempt("densities.sample_particles", densities.sample_particles, grid, rho, n, seed=0, names=("n",))
    if X is not None:
        assert X.shape == (n, 3)


def test_continuum_hostile_start():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3), lmax=8, kernel_tol=1e-6)
    bad = densities.uniform_density(pde.grid).copy()
    for value, match in [(np.inf, "finite"), (np.nan, "finite")]:
        b = bad.copy()
        b[4] = value
        with pytest.raises(ValueError, match=match):
            mf.solve_continuum(pde, b, 1.0)
    with pytest.raises(ValueError, match="shape"):
        mf.solve_continuum(pde, bad[:-1], 1.0)
    with pytest.raises(ValueError, match="t_final"):
        mf.solve_continuum(pde, bad, -1.0)
    OUTCOMES[("solve_continuum(hostile start)", "ValueError")] += 4


# ---------------------------------------------------------------- config loader and output files
toml_scalars = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=True),
                         st.text(max_size=8), st.booleans(), st.lists(st.floats(-5, 5), max_size=4))
config_dicts = st.dictionaries(
    st.sampled_from(["seed", "heads", "pde", "particles", "integrator", "outputs", "initial", "bogus"]),
    st.one_of(toml_scalars, st.dictionaries(st.sampled_from(["lmax", "n", "t_final", "beta", "lam", "kappas",
                                                             "method", "dt", "floor", "dpi", "x"]),
                                            toml_scalars, max_size=3),
              st.lists(st.dictionaries(st.sampled_from(["lam", "beta", "kernel", "normalization", "y"]),
                                       toml_scalars, max_size=3), max_size=3)),
    max_size=4)


@SETTINGS
@given(data=config_dicts)
def test_config_loader_random_tables(data):
    from meanfield.workflow.config import RunConfig

    cfg = attempt("RunConfig.from_dict", RunConfig.from_dict, data)
    if cfg is not None:
        assert RunConfig.from_dict(cfg.to_dict()) == cfg          # a valid config round-trips


@SETTINGS
@given(text=st.text(max_size=80))
def test_config_loader_malformed_toml(text):
    from meanfield.workflow.config import RunConfig

    attempt("RunConfig.from_toml", RunConfig.from_toml, text)


def test_unwritable_output_and_disk_full(tmp_path, monkeypatch, capsys):
    """Output into a path under a file, and a write failing midway (disk full): a clear error,
    exit code 2, and no partial file that looks like a finished result."""
    import errno

    import xarray as xr

    from meanfield.workflow.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", "--out", str(blocker / "sub"), "--no-progress"]) == 2
    assert "error" in capsys.readouterr().err
    OUTCOMES[("meanfield run (unwritable out)", "exit 2")] += 1

    cfg = tmp_path / "c.toml"
    cfg.write_text('[pde]\nlmax = 11\n[particles]\nn = 40\n[integrator]\nt_final = 0.2\nn_frames = 2\n'
                   '[outputs]\nfigures = false\nanimation = false\n')

    def disk_full(self, path, *a, **k):
        with open(path, "wb") as f:
            f.write(b"CDF partial")
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(xr.Dataset, "to_netcdf", disk_full)
    out = tmp_path / "o"
    assert main(["run", str(cfg), "--out", str(out), "--no-progress"]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert not (out / "result.nc").exists()
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())   # the temporary file is removed
    OUTCOMES[("meanfield run (disk full)", "exit 2")] += 1


@pytest.fixture(scope="module", autouse=True)
def print_outcomes():
    """After the module: print the tally of hostile cases and their outcomes (``-s`` shows it)."""
    yield
    print("\nhostile-input outcomes:")
    for (name, outcome), count in sorted(OUTCOMES.items()):
        print(f"  {name:40s} {outcome:10s} {count}")
