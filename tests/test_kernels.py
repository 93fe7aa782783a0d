"""The kernel and normalization registries (meanfield.core.kernels): contents, unknown names,
pointwise closed forms, K' = k, Funk-Hecke multipliers (closed form vs quadrature), lmax rules."""

import dataclasses

import numpy as np
import pytest

from meanfield.core.funk_hecke import funk_hecke_multipliers
from meanfield.core.heads import Head, scalar_heads
from meanfield.core.kernels import KERNELS, NORMALIZATIONS, Kernel, Normalization, get_kernel, get_normalization
from meanfield.core.sums import aggregate
from meanfield.core.zonal import required_lmax, zonal_multipliers

S = np.linspace(-1.7, 1.9, 37)          # scores of |M|_2 up to ~2 on unit tokens, 0 excluded below for ReLU


def head(kernel, beta=1.7, lam=1.0, **params):
    return Head(lam * np.eye(3), lam * np.eye(3), beta, kernel, kernel_params=params or None)


# ------------------------------------------------------------------------------ registry contents
def test_registry_contents():
    assert {"exp", "relu", "sigmoid"} <= set(KERNELS)
    assert set(NORMALIZATIONS) == {"mean", "softmax", "sinkhorn"}
    for name, k in KERNELS.items():
        assert isinstance(k, Kernel) and k.name == name
        with pytest.raises(dataclasses.FrozenInstanceError):
            k.name = "other"
    for name, n in NORMALIZATIONS.items():
        assert isinstance(n, Normalization) and n.name == name
    with pytest.raises(TypeError):            # read-only tables
        KERNELS["new"] = KERNELS["exp"]
    # kernels whose multipliers decay only algebraically have no lmax rule; the others have one
    assert not KERNELS["relu"].has_lmax_rule and KERNELS["exp"].has_lmax_rule and KERNELS["sigmoid"].has_lmax_rule


@pytest.mark.parametrize("call, match", [
    (lambda: get_kernel("gauss"), r"kernel must be one of \('exp', 'relu', 'sigmoid'.*received 'gauss'"),
    (lambda: get_normalization("sum"), r"normalization must be one of \('mean', 'softmax', 'sinkhorn'\); received 'sum'"),
    (lambda: Head(np.eye(3), np.eye(3), 1.0, "gauss"), r"kernel must be one of .*'gauss'"),
    (lambda: Head(np.eye(3), np.eye(3), 1.0, "exp", "sum"), r"normalization must be one of .*'sum'"),
    (lambda: Head(np.eye(3), np.eye(3), 1.0, ["exp"]), r"kernel must be one of .*\['exp'\]"),
    (lambda: head("sigmoid", slope=2.0), r"kernel_params for kernel 'sigmoid' allows the keys \['bias'\]"),
    (lambda: head("exp", bias=1.0), r"kernel_params for kernel 'exp' allows the keys \[\]"),
    (lambda: head("sigmoid", bias="1"), r"kernel_params\['bias'\] must be a finite real number; received '1'"),
    (lambda: head("sigmoid", bias=np.nan), r"kernel_params\['bias'\] must be a finite real number"),
    (lambda: Head(np.eye(3), np.eye(3), 1.0, "sigmoid", kernel_params=[1.0]), "kernel_params must be a dict"),
])
def test_unknown_names_and_bad_parameters(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_kernel_params_round_trip():
    h = head("sigmoid", bias=-1.0)
    assert dict(h.kernel_params) == {"bias": -1.0}
    assert Head.from_dict(h.to_dict()).kernel_params == h.kernel_params
    assert dict(head("sigmoid").kernel_params) == {"bias": 0.0}           # defaults filled in
    assert "kernel_params" not in head("exp").to_dict()                    # 0.1 dicts unchanged
    assert h.replace(beta=2.0).kernel_params == h.kernel_params
    assert h.replace(kernel="exp").kernel_params == {}                     # parameters of the old kernel dropped
    with pytest.raises(TypeError):
        h.kernel_params["bias"] = 3.0                                      # read-only
    import copy
    import pickle
    for clone in (pickle.loads(pickle.dumps(h)), copy.deepcopy(h)):       # heads travel to workers, checkpoints
        assert clone.kernel_params == {"bias": -1.0} and np.array_equal(clone.M, h.M)


# ------------------------------------------------------------------------------ pointwise closed forms
CLOSED = {
    "exp": (lambda s, beta, b: np.exp(beta * s), lambda s, beta, b: np.exp(beta * s) / beta,
            lambda s, beta, b: beta * s),
    "relu": (lambda s, beta, b: np.maximum(s, 0.0), lambda s, beta, b: 0.5 * np.maximum(s, 0.0) ** 2,
             lambda s, beta, b: np.log(np.maximum(s, 0.0))),
    "sigmoid": (lambda s, beta, b: 1.0 / (1.0 + np.exp(-(beta * s + b))),
                lambda s, beta, b: np.log1p(np.exp(beta * s + b)) / beta,
                lambda s, beta, b: -np.log1p(np.exp(-(beta * s + b)))),
}


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_kernel_antiderivative_log_vs_closed_forms(name):
    params = {"bias": -0.4} if name == "sigmoid" else {}
    h = head(name, **params)
    k, K, logk = CLOSED[name]
    kern, b = KERNELS[name], params.get("bias", 0.0)
    with np.errstate(divide="ignore"):
        ref_log = logk(S, h.beta, b)
    # the same functions written differently (expit, log1p of exp(-|x|), ...): a few ulps
    np.testing.assert_allclose(kern.value(h, S), k(S, h.beta, b), rtol=1e-14, atol=0)
    np.testing.assert_allclose(kern.antiderivative(h, S), K(S, h.beta, b), rtol=1e-14, atol=0)
    finite = np.isfinite(ref_log)
    np.testing.assert_allclose(kern.log_value(h, S)[finite], ref_log[finite], rtol=1e-13, atol=1e-15)
    assert np.array_equal(np.isfinite(kern.log_value(h, S)), finite)       # -inf exactly where k = 0


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_antiderivative_derivative_is_the_kernel(name):
    """K' = k (what makes dE/dx_i = f_i / n^2 for any kernel), by central differences."""
    h = head(name, **({"bias": 0.8} if name == "sigmoid" else {}))
    kern = KERNELS[name]
    s = S[np.abs(S) > 0.01]                    # away from ReLU's kink at 0
    step = 1e-5
    fd = (kern.antiderivative(h, s + step) - kern.antiderivative(h, s - step)) / (2 * step)
    # truncation step^2 |K'''| / 6 ~ 1e-10 (|K'''| <= beta^2 e^{beta |s|} ~ 1e2 here) plus round-off
    # eps |K| / step ~ 1e-10: 1e-8 relative to max |k| leaves a factor 100
    np.testing.assert_allclose(fd, kern.value(h, s), rtol=0, atol=1e-8 * np.abs(kern.value(h, s)).max())


@pytest.mark.parametrize("name", [k for k, v in KERNELS.items() if v.positive])
def test_log_derivative(name):
    h = head(name, **({"bias": 0.3} if name == "sigmoid" else {}))
    kern, step = KERNELS[name], 1e-5
    fd = (kern.log_value(h, S + step) - kern.log_value(h, S - step)) / (2 * step)
    # as above: O(step^2) truncation and eps / step round-off, both below 1e-9
    np.testing.assert_allclose(kern.log_derivative(h, S), fd, rtol=0, atol=1e-8)


def test_normalizations_combine():
    U = np.arange(12.0).reshape(4, 3)
    Z = np.array([2.0, 0.0, -1.0, 4.0])
    assert NORMALIZATIONS["mean"].combine(U.copy(), Z) is not None
    np.testing.assert_array_equal(NORMALIZATIONS["mean"].combine(U.copy(), Z), U)
    np.testing.assert_array_equal(NORMALIZATIONS["mean"].normalizer(Z), np.ones(4))
    out = NORMALIZATIONS["softmax"].combine(U.copy(), Z)
    # exact divisions; rows without attention mass (Z <= 0) get u = 0
    np.testing.assert_array_equal(out, np.vstack([U[0] / 2, 0 * U[1], 0 * U[2], U[3] / 4]))
    grid_like = NORMALIZATIONS["softmax"].combine(np.ones((2, 4)), Z, axis=0)     # vectors first (grids)
    np.testing.assert_array_equal(grid_like, np.array([[0.5, 0, 0, 0.25]] * 2))


@pytest.mark.parametrize("name, beta", [("exp", 700.0), ("sigmoid", 700.0)])
def test_shifted_softmax_rows_match_logsumexp(rng, name, beta):
    """Softmax rows of kernels that can overflow or underflow are shifted by their largest log k:
    they equal the textbook log-sum-exp softmax (sigmoid at beta 700 underflows to 0 unshifted)."""
    h = Head(np.eye(3), np.eye(3), beta, name, "softmax")
    assert KERNELS[name].needs_shift(h, 1.0)
    X = rng.standard_normal((40, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = rng.random(40)
    w /= w.sum()
    U, N = aggregate(h, X, X, w, 8 * 40 * 6)
    L = KERNELS[name].log_value(h, X @ X.T) + np.log(w)
    P = np.exp(L - L.max(axis=1, keepdims=True))
    U_ref = (P / P.sum(axis=1, keepdims=True)) @ X
    # sums of 40 positive terms: round-off ~1e-15 relative; log Z compared in log space
    np.testing.assert_allclose(U, U_ref, rtol=0, atol=1e-13)
    logZ = L.max(axis=1) + np.log(P.sum(axis=1))
    finite = np.isfinite(np.log(N))
    np.testing.assert_allclose(np.log(N[finite]), logZ[finite], rtol=1e-12)


# ------------------------------------------------------------------------------ Funk-Hecke multipliers
@pytest.mark.parametrize("lam", [1.0, -0.6])
@pytest.mark.parametrize("name, params", [("exp", {}), ("relu", {}), ("sigmoid", {"bias": -0.7}),
                                          ("sigmoid", {"bias": 0.5})])
def test_multipliers_closed_form_vs_quadrature(name, params, lam):
    """Every key of each kernel's multipliers equals a Gauss-Legendre quadrature of its profile."""
    h = head(name, beta=3.0, lam=lam, **params)
    kern = KERNELS[name]
    m = zonal_multipliers(h, 30)
    k = lambda t: kern.value(h, lam * t)                          # noqa: E731
    profiles = {"potential": lambda t: kern.antiderivative(h, lam * t), "normalizer": k,
                "normal": lambda t: k(t) * lam * t}
    if kern.positive:
        profiles["entropy"] = lambda t: k(t) * kern.log_value(h, lam * t)
    assert set(m) == set(profiles)
    for key, g in profiles.items():
        ref = funk_hecke_multipliers(30, g=g, n_nodes=160)
        # 160 nodes per half: the quadrature of these analytic (or piecewise polynomial) profiles is
        # at round-off (checked against scipy.integrate.quad: 1e-14); 1e-13 of the largest
        np.testing.assert_allclose(m[key], ref, rtol=0, atol=1e-13 * np.abs(ref).max(), err_msg=key)


def test_lmax_rules():
    # exp: the degrees of the 0.1 rule, unchanged
    assert [required_lmax(scalar_heads([1.0], 3, beta=b), 1e-10) for b in (1.0, 5.0, 10.0)] == [11, 19, 26]
    with pytest.raises(ValueError, match="no lmax rule"):
        required_lmax(scalar_heads([1.0], 3, kernel="relu"), 1e-10)
    assert KERNELS["relu"].lmax_rule(head("relu"), 1e-10) is None
    # sigmoid: exponential decay at rate ~ pi / (beta |lambda|): lmax grows about linearly in beta
    deg = [required_lmax(scalar_heads([1.0], 3, beta=b, kernel="sigmoid"), 1e-10) for b in (1.0, 5.0, 10.0)]
    assert deg[0] < deg[1] < deg[2] <= 2.5 * deg[1], deg
    assert required_lmax(scalar_heads([1.0], 3, beta=200.0, kernel="sigmoid"), 1e-10) is None   # beyond the cap


# ------------------------------------------------------------------------------ closed forms of theory
THEORY_CALLS = {
    "equiangular_rate": lambda T, k, nz: T.equiangular_rate(0.1, [1.0, 0.5], 1.0, 8, k, nz),
    "linearized_clustering_time": lambda T, k, nz: T.linearized_clustering_time(0.01, 0.5, [1.0], 1.0, 8, k, nz),
    "late_rate": lambda T, k, nz: T.late_rate([1.0, 0.5], 1.0, k, nz),
}


@pytest.mark.parametrize("normalization", sorted(NORMALIZATIONS))
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_theory_closed_forms_follow_the_registry(name, normalization):
    """A closed form listed by a kernel is computed; one it lacks raises NotImplementedError naming
    the kernel and the closed form (never a silent fallback to another kernel)."""
    from meanfield.analysis import theory as T

    for form, call in THEORY_CALLS.items():
        if form in KERNELS[name].closed_forms:
            assert np.all(np.isfinite(call(T, name, normalization)))
        else:
            with pytest.raises(NotImplementedError, match=f"{form}.*{name}"):
                call(T, name, normalization)
