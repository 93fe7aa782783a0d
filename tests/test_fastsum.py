"""Spectral (Funk-Hecke) particle sums against the direct sums, and the summation switch of ParticleSystem."""

import numpy as np
import pytest
from _helpers import assert_spectral_sums_match, clustered

import meanfield as mf
from meanfield.analysis import stability
from meanfield.core.densities import vmf_mixture_density
from meanfield.core.funk_hecke import funk_hecke_multipliers
from meanfield.core.heads import Head, scalar_heads
from meanfield.core.initial import uniform_sphere
from meanfield.core.zonal import required_lmax, zonal_multipliers
from meanfield.models.continuum import ContinuumPDE
from meanfield.models.fastsum import SpectralSum, spectral_supported
from meanfield.models.particles import SPECTRAL_MIN_N, ParticleSystem, project_tangent


def rel_err(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("beta", [1.0, 5.0, 10.0])
def test_velocity_matches_direct_sum_n1e4(beta):
    """n = 10^4, two zonal mean heads: spectral velocity = direct velocity to the tolerance 1e-10."""
    heads = scalar_heads([1.0, -0.5], 3, beta=beta)
    fast = ParticleSystem(heads, summation="spectral", kernel_tol=1e-10)
    direct = ParticleSystem(heads, summation="direct")
    for X in (uniform_sphere(10_000, 3, seed=1), clustered(10_000, seed=2)):
        U, _ = direct.forces(X)                 # one direct pass (~0.2 s per head on an idle core)
        v_direct = project_tangent(X, U.sum(axis=0))
        # tolerance is relative to the size of the aggregates |u| (the sums, before the projection
        # cancels most of them for uniform tokens); measured errors are 1e-12..3e-11 of max |u|.
        assert np.abs(fast.velocity(X) - v_direct).max() <= 1e-10 * np.abs(U).max()


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_forces_normalizers_energies_weighted(rng, normalization):
    """Unprojected aggregates (normal part and self-interaction included), normalizers and energies
    with non-uniform weights, mixed heads, agree with the direct sums to the tolerance."""
    heads = scalar_heads([1.0, -0.7], 3, beta=4.0, normalization=normalization) + \
        scalar_heads([0.5], 3, beta=7.0, normalization="mean")
    X = clustered(1500, seed=3)
    w = rng.random(1500)
    w /= w.sum()
    fast = SpectralSum(heads, kernel_tol=1e-10)
    direct = ParticleSystem(heads, summation="direct")
    assert_spectral_sums_match(fast, direct, X, w, tol=1e-10)   # the requested tolerance (see the helper)


def test_self_interaction_included():
    """Two tokens: the aggregate of token 0 contains w_0 k(lambda) lambda x_0 (the j = i term)."""
    head = scalar_heads([1.3], 3, beta=2.0)
    X = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    w = np.array([0.25, 0.75])
    U, _ = SpectralSum(head, kernel_tol=1e-12).forces(X, w)
    lam, beta = 1.3, 2.0
    exact0 = 0.25 * np.exp(beta * lam) * lam * X[0] + 0.75 * 1.0 * lam * X[1]    # <x0, x1> = 0
    # closed form; the transforms run at 1e-14 relative accuracy, so 1e-12 is a safe margin
    np.testing.assert_allclose(U[0, 0], exact0, rtol=0, atol=1e-12 * np.abs(exact0).max())


@pytest.mark.parametrize("lam", [1.0, -0.6])
@pytest.mark.parametrize("kernel", ["exp", "relu"])
def test_multipliers_match_quadrature(lam, kernel):
    """Multipliers of meanfield.core.funk_hecke equal a quadrature of the profiles
    and the independent closed forms of meanfield.analysis.stability."""
    head = scalar_heads([lam], 3, beta=3.0, kernel=kernel)[0]
    m = zonal_multipliers(head, 30)
    k = (lambda t: np.exp(3.0 * lam * t)) if kernel == "exp" else (lambda t: np.maximum(lam * t, 0.0))
    K = (lambda t: np.exp(3.0 * lam * t) / 3.0) if kernel == "exp" else (lambda t: 0.5 * np.maximum(lam * t, 0) ** 2)
    # Gauss-Legendre with 38 nodes per half on smooth integrands: exact to round-off (~1e-15)
    for key, g in (("potential", K), ("normalizer", k), ("normal", lambda t: k(t) * lam * t)):
        ref = funk_hecke_multipliers(30, g=g)
        np.testing.assert_allclose(m[key], ref, rtol=0, atol=1e-13 * np.abs(ref).max(), err_msg=key)
    # independent closed forms of meanfield.analysis.stability (ive for exp; quadrature in theta for ReLU)
    ell = np.arange(31)
    if kernel == "exp":
        ref = {"normalizer": stability.funk_hecke_exp(ell, 3.0 * lam)}
        ref["potential"] = ref["normalizer"] / 3.0
    else:
        ref = {"normalizer": stability.funk_hecke_relu(ell, lam, power=1),
               "potential": 0.5 * stability.funk_hecke_relu(ell, lam, power=2)}
    for key, r in ref.items():
        # two exact evaluations (Bessel functions, or quadratures exact for these piecewise
        # polynomials) of the same numbers: round-off, 1e-13 of the largest
        np.testing.assert_allclose(m[key], r, rtol=0, atol=1e-13 * np.abs(r).max(), err_msg=key)


def test_required_lmax_controls_the_error():
    """A looser tolerance gives a smaller lmax and a larger, but still bounded, error."""
    heads = scalar_heads([1.0], 3, beta=10.0)
    assert required_lmax(heads, 1e-4) < required_lmax(heads, 1e-10) < required_lmax(heads, 1e-13)
    X = clustered(1500, seed=7)
    U, _ = ParticleSystem(heads, summation="direct").forces(X)
    v = ParticleSystem(heads, summation="direct").velocity(X)
    err = np.abs(SpectralSum(heads, kernel_tol=1e-4).velocity(X, np.full(1500, 1 / 1500)) - v).max() / np.abs(U).max()
    # the bound holds, and truncation is really active: the error is far above round-off (1e-13)
    assert 1e-9 < err <= 1e-4


def test_relu_converges_algebraically():
    """ReLU multipliers decay like l^-3: the error falls with lmax but stays far from 1e-10."""
    heads = scalar_heads([1.0, -0.5], 3, kernel="relu")
    X = clustered(800, seed=8, spread=0.4)
    w = np.full(800, 1 / 800)
    v = ParticleSystem(heads, summation="direct").velocity(X, w)
    errs = [rel_err(SpectralSum(heads, lmax=L).velocity(X, w), v) for L in (16, 64)]
    # measured 6e-4 and 8e-5 (n = 2000): ~L^-1.5; assert a factor-3 gain and the 1e-3 level
    assert errs[1] < errs[0] / 3 and errs[1] < 1e-3 and errs[1] > 1e-8
    with pytest.raises(ValueError, match="no lmax rule"):
        SpectralSum(heads)


def test_summation_switch():
    """auto: spectral for exp heads on S^2 (zonal: Funk-Hecke; general: bi-spherical operators) at n >= SPECTRAL_MIN_N
    only; direct otherwise."""
    exp_heads = scalar_heads([1.0], 3, beta=2.0)
    auto = ParticleSystem(exp_heads)
    assert auto.uses_spectral(SPECTRAL_MIN_N) and not auto.uses_spectral(SPECTRAL_MIN_N - 1)
    assert ParticleSystem(exp_heads, summation="spectral").uses_spectral(10)
    assert not ParticleSystem(exp_heads, summation="direct").uses_spectral(10**6)
    assert not ParticleSystem(scalar_heads([1.0], 3, kernel="relu")).uses_spectral(10**6)
    assert not ParticleSystem(exp_heads, geometry="flat").uses_spectral(10**6)
    assert not ParticleSystem(scalar_heads([1.0], 4)).uses_spectral(10**6)
    assert ParticleSystem((Head(np.diag([1.0, 2.0, 3.0]), np.eye(3)),)).uses_spectral(10**6)   # general heads too
    # i_l(1e4) overflows: softmax heads at beta = 1e4 stay direct (mean ones are refused outright)
    assert not ParticleSystem(scalar_heads([1.0], 3, beta=1e4, normalization="softmax")).uses_spectral(10**6)
    with pytest.raises(ValueError, match=r"beta \* \|M\|_2 must be <= 700"):
        ParticleSystem(scalar_heads([1.0], 3, beta=1e4))


def test_spectral_rhs_off_sphere_is_tangent():
    """Runge-Kutta stages off the sphere: the spectral field is evaluated at y/|y|, tangent to y."""
    system = ParticleSystem(scalar_heads([1.0, -0.5], 3, beta=3.0), summation="spectral")
    X = clustered(500, seed=9)
    v = system.rhs(0.0, X)
    v_off = system.rhs(0.0, X * (1 + 1e-3))
    np.testing.assert_allclose(v_off, v, rtol=0, atol=1e-12 * np.abs(v).max())  # same points after y/|y|
    # tangency to round-off of an O(|v|) vector
    assert np.abs(np.einsum("nd,nd->n", v_off, X)).max() <= 1e-13 * np.abs(v).max()


@pytest.mark.parametrize("bad", [
    dict(summation="fast"), dict(kernel_tol=0.0), dict(kernel_tol=1.5), dict(kernel_tol="1e-10"),
])
def test_bad_summation_arguments(bad):
    with pytest.raises(ValueError, match="summation|kernel_tol"):
        ParticleSystem(scalar_heads([1.0], 3), **bad)


@pytest.mark.parametrize("kw, match", [
    (dict(heads=scalar_heads([1.0], 4)), "d = 3"),
    (dict(heads=scalar_heads([1.0], 3), geometry="flat"), "sphere"),
    (dict(heads=(Head(np.diag([1.0, 2.0, 3.0]), np.eye(3), kernel="relu"),)), "no lmax rule"),
    (dict(heads=scalar_heads([1.0], 3, kernel="relu")), "no lmax rule"),
])
def test_spectral_unavailable_raises(kw, match):
    with pytest.raises(ValueError, match=match):
        ParticleSystem(summation="spectral", **kw)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_pde_tendency_equals_fields_formula(normalization):
    """The allocation-free zonal tendency equals -div(rho X) built from ContinuumPDE.fields()."""
    heads = scalar_heads([1.0, 0.5, -0.7], 3, beta=3.0, normalization=normalization) + \
        scalar_heads([0.8], 3, beta=2.0)
    pde = ContinuumPDE(heads, lmax=20, nu=0.1)
    g = pde.grid
    rho_lm = vmf_mixture_density(g, np.eye(3)[:2], 4.0)
    f = pde.fields(rho_lm)
    ref = -g.divergence(f["rho"] * f["X"]) + 0.1 * g.laplacian(rho_lm)
    out = pde.tendency(rho_lm)
    # same transforms, mean heads summed before one gradient: round-off only (~1e-15 relative)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    out2 = pde.tendency(rho_lm)       # work arrays are reused: a second call gives the same numbers
    assert np.array_equal(out, out2) and out is not out2


@pytest.mark.parametrize("beta", [2.0, 325.0])
def test_direct_softmax_with_and_without_shift(rng, beta):
    """kernels.aggregate skips the max-shift only when beta |s| <= 600 cannot overflow; both
    branches equal the textbook softmax computed with logsumexp (beta 325 with |M| = 2: shifted)."""
    from meanfield.core.sums import aggregate

    head = scalar_heads([2.0], 3, beta=beta, normalization="softmax")[0]
    X = uniform_sphere(60, 3, seed=11)
    w = rng.random(60)
    w /= w.sum()
    U, N = aggregate(head, X, X, w, 8 * 60 * 7)              # 7 rows per chunk
    L = beta * 2.0 * (X @ X.T) + np.log(w)
    Lmax = L.max(axis=1, keepdims=True)
    P = np.exp(L - Lmax)
    logZ = Lmax[:, 0] + np.log(P.sum(axis=1))
    U_ref = (P / P.sum(axis=1, keepdims=True)) @ (2.0 * X)
    # round-off of sums of 60 positive terms: ~1e-15 relative; log Z compared in log space
    np.testing.assert_allclose(U, U_ref, rtol=0, atol=1e-13 * np.abs(U_ref).max())
    np.testing.assert_allclose(np.log(N), logZ, rtol=1e-13)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_entropies_match_direct_relative_entropy(rng, normalization):
    """SpectralSum.entropies = diagnostics.attention_entropy(relative=True) (H_i^h - log n for
    uniform weights), non-uniform weights and mixed heads; ReLU heads give NaN rows."""
    from meanfield.analysis.diagnostics import attention_entropy

    heads = scalar_heads([1.0, -0.7], 3, beta=4.0, normalization=normalization) + scalar_heads([0.5], 3, beta=7.0)
    X = clustered(1500, seed=3)
    w = rng.random(1500)
    w /= w.sum()
    H_direct = attention_entropy(ParticleSystem(heads, summation="direct"), X, w, relative=True)
    H_fast = SpectralSum(heads, kernel_tol=1e-10).entropies(X, w)
    assert H_fast.shape == (3, 1500)
    # log Z - Q / Z from sums accurate to 1e-10 relative: errors ~ 1e-10 * (1 + |Q / Z|) (measured ~1e-12)
    np.testing.assert_allclose(H_fast, H_direct, rtol=0, atol=1e-9)
    n = 1500
    H_uniform = SpectralSum(heads, kernel_tol=1e-10).entropies(X, np.full(n, 1 / n))
    shannon = attention_entropy(ParticleSystem(heads, summation="direct"), X)
    np.testing.assert_allclose(H_uniform, shannon - np.log(n), rtol=0, atol=1e-9)   # the same, Shannon form
    relu = SpectralSum(scalar_heads([1.0], 3, kernel="relu"), lmax=16).entropies(X, w)
    assert relu.shape == (1, 1500) and np.all(np.isnan(relu))


def test_spectral_supported_never_raises_for_kernels_without_a_rule():
    """ReLU has no lmax rule: a reason (so ParticleSystem's auto rule stays direct), unless lmax is given."""
    heads = scalar_heads([1.0], 3, kernel="relu")
    assert "no lmax rule" in spectral_supported(heads)
    assert spectral_supported(heads, lmax=16) is None
    assert spectral_supported(scalar_heads([1.0], 3, kernel="sigmoid")) is None


# ----------------------------------------------------------------------------- fused point glue (issue 12)
def _old_polar(x):
    """The angle/frame formulas of 0.1 (np.hypot, arctan2 of cos/sin phi), the reference of the fused glue."""
    r = np.hypot(x[:, 0], x[:, 1])
    on = r == 0
    inv = 1 / np.where(on, 1, r)
    cp, sp = np.where(on, 1.0, x[:, 0] * inv), x[:, 1] * inv
    phi = np.arctan2(sp, cp)
    return np.stack([np.arctan2(r, x[:, 2]), np.where(phi < 0, phi + 2 * np.pi, phi)], axis=1), r, x[:, 2], cp, sp


def _test_points(rng):
    X = rng.standard_normal((3000, 3))
    X[:5] = [[0, 0, 1], [0, 0, -1], [1, -0.0, 0], [-0.0, 0.0, 2.0], [1e-9, -1e-9, 1]]   # axis, -0.0, near-pole
    X[5:1000] = [0, 0, 1] + 1e-6 * X[5:1000]                                               # a tight polar cluster
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_fused_polar_equals_the_old_formulas(rng):
    from meanfield.core.sphere import _polar
    X = _test_points(rng)
    X0 = X.copy()
    new, old = _polar(X)[:5], _old_polar(X)
    assert np.array_equal(X, X0)           # the coordinates are copied, never modified in place
    for a, b in zip(new, old):
        # same formulas up to np.hypot vs sqrt(x^2 + y^2): a few ulps of angles in [0, 2 pi]
        np.testing.assert_allclose(a, b, rtol=0, atol=4e-15)
    one = X[:1].copy()                     # a single row: x.T is contiguous, the copy must still be made
    _polar(one)
    assert np.array_equal(one, X[:1])


def test_directions_fold_the_radial_projection(rng):
    from meanfield.core.sphere import PointSet, SphereGrid
    g = SphereGrid(19)
    U = _test_points(rng)
    X = U * rng.uniform(0.5, 2.0, (U.shape[0], 1))
    a, b = g.prepare_points(U, 1e-13), PointSet.directions(g, X, 1e-13)
    # angles are scale-free: equal up to the rounding of U = X / |X| (a few ulps)
    np.testing.assert_allclose(b.loc, a.loc, rtol=0, atol=4e-15)
    np.testing.assert_allclose(b.points, U, rtol=0, atol=1e-15)   # formed on demand, same rounding as U
    f = g.adjoint_at(U[:50], np.ones(50))
    # transforms at epsilon 1e-13 of identical-up-to-ulps points: agree far below epsilon * |f|
    np.testing.assert_allclose(b.gradient(f), a.gradient(f), rtol=0, atol=1e-11 * np.abs(f).sum())
    np.testing.assert_allclose(b.evaluate(f), a.evaluate(f), rtol=0, atol=1e-11 * np.abs(f).sum())
    with pytest.raises(ValueError, match="finite nonzero rows"):
        PointSet.directions(g, np.vstack([X, [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        PointSet.directions(g, X[:, :2])


def test_spectral_velocity_off_sphere_equals_projected(rng):
    heads = scalar_heads([1.0, -0.5], 3, beta=5.0)
    s = SpectralSum(heads, 1e-10)
    U = _test_points(rng)
    X = U * rng.uniform(0.9, 1.1, (U.shape[0], 1))
    w = np.full(U.shape[0], 1 / U.shape[0])
    v, v0 = s.velocity(X, w), s.velocity(U, w)
    # the field is evaluated at x / |x|: equal up to ulps of the angles through transforms at 1e-13
    np.testing.assert_allclose(v, v0, rtol=0, atol=1e-12 * np.abs(v0).max())
    bad = X.copy()
    bad[3] = np.nan
    assert np.isnan(s.velocity(bad, w)).all()  # a blown-up stage gives NaN (integrate reports it)


def test_public_velocity_fused_check_same_result_and_same_errors():
    """ParticleSystem.velocity checks spectral tokens from the norms its transform computes anyway
    (one pass less at large n): the result is bit-identical to the separate check + sum (same
    arithmetic, exact equality), and every input the separate check refuses is still refused with
    its message, while rows within the unit tolerance but outside the fused criterion are accepted."""
    system = ParticleSystem(scalar_heads([1.0, -0.5], 3, beta=3.0), summation="spectral")
    X = uniform_sphere(3000, 3, seed=5)
    w = np.random.default_rng(6).random(2 * 3000)[::2]          # non-contiguous weights
    w /= w.sum()
    for ww in (None, w):
        np.testing.assert_array_equal(system.velocity(X, ww), system._velocity(*system.check(X, ww)))
    # |x| - 1 = 0.99e-8 is within UNIT_NORM_TOL = 1e-8, but |x|^2 - 1 ~ 1.98e-8 > 1.9e-8: the fused
    # criterion passes it on to check_tokens, which accepts it (same result as the separate path)
    Y = X.copy()
    Y[7] *= 1 + 0.99e-8
    np.testing.assert_array_equal(system.velocity(Y), system._velocity(*system.check(Y, None)))
    for bad, msg in ((1 + 1e-6, "rows must be unit vectors"), (np.nan, "must be a finite real array"),
                     (np.inf, "must be a finite real array"), (0.0, "rows must be unit vectors")):
        Z = X.copy()
        Z[11] *= bad
        with pytest.raises(ValueError, match=msg):
            system.velocity(Z)
    with pytest.raises(ValueError, match="w must be 3000 finite weights"):
        system.velocity(X, np.full(3000, 1.0))


def test_velocity_scratch_buffers_reused_safely_across_calls_and_threads():
    """SpectralSum.velocity keeps its transient point set in per-thread reused buffers (no page faults of
    fresh arrays): successive calls at the same n, a call at another n in between, and calls from two
    threads at once all give exactly (bit for bit) the velocities of fresh buffers."""
    import threading

    from meanfield.core.sphere import PointSet

    fast = SpectralSum(scalar_heads([1.0, -0.5], 3, beta=3.0), 1e-10)
    rng = np.random.default_rng(12)
    Xs = [rng.standard_normal((4000, 3)) for _ in range(3)] + [rng.standard_normal((2500, 3))]

    def fresh(X):            # the same sum over a point set in fresh arrays
        pts = PointSet._directions(fast.grid, X, fast._epsilon)
        return fast.velocity_at(pts, np.full(X.shape[0], 1.0 / X.shape[0]))

    want = [fresh(X) for X in Xs]
    got = [fast.velocity(X) for X in (Xs[0], Xs[3], Xs[1], Xs[2])]
    for g, k in zip(got, (0, 3, 1, 2)):
        np.testing.assert_array_equal(g, want[k])
    out = {}

    def worker(k):
        for _ in range(5):
            out[k] = fast.velocity(Xs[k])

    threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        np.testing.assert_array_equal(out[k], want[k])


# ------------------------------------------- moved from test_api_friction.py (issue 14, item 9), unchanged
def test_spectral_sum_velocity_weights_default_to_uniform():
    heads = mf.scalar_heads([1.0], 3, beta=2.0)
    s = SpectralSum(heads, 1e-10)
    X = mf.initial.uniform_sphere(50, 3, seed=2)
    # the same call with the weights written out: identical (tolerance 0)
    np.testing.assert_array_equal(s.velocity(X), s.velocity(X, np.full(50, 1 / 50)))
