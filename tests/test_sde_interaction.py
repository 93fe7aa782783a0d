"""Weak and strong orders of the noisy particle schemes WITH interaction (two heads).

Weak order.  Two tokens on S^2 under two isotropic heads (``M = lambda I``, ``V = mu I``, softmax, one
attractive and one repulsive) and noise ``nu``: by rotation invariance ``u = <x_1, x_2>`` is a diffusion
on [-1, 1] of generator

.. math:: G \\varphi = B(u) \\varphi' + 2 \\nu (1 - u^2) \\varphi'',\\qquad
          B(u) = \\langle v_1, x_2\\rangle + \\langle v_2, x_1\\rangle - 2 \\nu (d - 1) u,

with the drifts ``v_i`` of the library (:class:`BatchedSystem`) at the nodes.  The exact ``E f(u(T))`` comes from
the backward equation ``phi_t + G phi = 0`` solved by Chebyshev collocation and a matrix exponential (checked
below against the heat kernel's closed form and in the number of nodes), so the reference has no sampling error.

The Monte Carlo mean of ``f(u_T)`` over the scheme's paths is taken with a control variate of exactly zero
mean, built per step from ``phi`` (at ``t_{k+1}``): the odd part in the Brownian increments of the step
(``[phi(u^+) - phi(u^-)] / 2`` with the step repeated on ``-dW``: odd, so of zero conditional mean) and the
centred second-order Ito-Taylor terms ``phi' (eta - E eta) + phi'' (xi^2 - E xi^2) / 2`` (Gaussian
quadratics of known mean).  It leaves the scheme's mean unchanged and cuts the per-path standard deviation
from O(1) to O(dt^{3/2}), so the weak error (O(dt^2)) is resolved at 4 standard errors or more on every level.
"""

import numpy as np
import pytest
from _helpers import sde_ends_on_one_path
from numpy.polynomial import chebyshev as C
from scipy.linalg import expm

import meanfield as mf
from meanfield.core.methods import METHODS, method_names
from meanfield.core.sde import sde_step
from meanfield.models.batched import BatchedSystem

D = 3
HEADS = [(1.0, 1.0, 4.0), (0.5, -1.0, 2.0)]          # (lambda, mu, beta): attractive, repulsive; softmax
SYSTEM = BatchedSystem(tuple(mf.Head(lam * np.eye(D), mu * np.eye(D), beta, "exp", "softmax")
                             for lam, mu, beta in HEADS))
X0 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])     # u(0) = 0


def _dot(a, b):
    return np.einsum("...d,...d->...", a, b)


def _proj(X, W):
    return W - _dot(W, X)[..., None] * X


def two_token_drift(t, X):
    """The drift of SYSTEM for two tokens, (..., 2, d), in closed form (a softmax over two scores per head);
    equal to ``SYSTEM.rhs`` on and off the sphere (tested), and ~10x faster on 10^5 systems."""
    x1, x2 = X[..., 0, :], X[..., 1, :]
    n1, n2, g = _dot(x1, x1), _dot(x2, x2), _dot(x1, x2)
    c = np.zeros((4,) + g.shape)
    for lam, mu, beta in HEADS:
        w12 = 1.0 / (1.0 + np.exp(beta * lam * (n1 - g)))         # weight of x2 in token 1's softmax
        w21 = 1.0 / (1.0 + np.exp(beta * lam * (n2 - g)))
        c += mu * np.array([1.0 - w12, w12, w21, 1.0 - w21])
    U = np.empty_like(X)
    U[..., 0, :] = c[0, ..., None] * x1 + c[1, ..., None] * x2
    U[..., 1, :] = c[2, ..., None] * x1 + c[3, ..., None] * x2
    return U - _dot(U, X)[..., None] * X


class Kolmogorov:
    """``phi(t, u) = E[f(u(T)) | u(t) = u]`` by Chebyshev collocation on N + 1 Lobatto nodes (no boundary
    conditions: the diffusion degenerates at u = +-1 and the drift points inward there)."""

    def __init__(self, B, nu, f, T, N=40):
        x = np.cos(np.pi * np.arange(N + 1) / N)
        self.to_coef = np.linalg.inv(C.chebvander(x, N))
        D1 = np.stack([C.chebval(x, C.chebder(self.to_coef[:, j])) for j in range(N + 1)], 1)
        D2 = np.stack([C.chebval(x, C.chebder(self.to_coef[:, j], 2)) for j in range(N + 1)], 1)
        self.G = B(x)[:, None] * D1 + (2 * nu * (1 - x**2))[:, None] * D2
        self.fx, self.T = f(x), T

    def coef(self, t):
        """Chebyshev coefficients of ``phi(t, .)``."""
        return self.to_coef @ (expm((self.T - t) * self.G) @ self.fx)

    def mean(self, u0):
        return float(C.chebval(u0, self.coef(0.0)))


def library_B(nu, system=SYSTEM):
    """``B(u)`` from the library's drift at a pair of tokens with ``<x_1, x_2> = u``."""
    def B(u):
        x1 = np.tile([0.0, 0.0, 1.0], (u.size, 1))
        x2 = np.stack([np.sqrt(1 - u**2), 0 * u, u], 1)
        v = system.rhs(0.0, np.stack([x1, x2], 1))
        return _dot(v[:, 0], x2) + _dot(v[:, 1], x1) - 2 * nu * (D - 1) * u
    return B


def weak_error(method, nu, T, m, n_paths, seed, f=lambda u: u):
    """``(E f(u_T^dt) - E f(u(T)), standard error)`` with the control variate of the module docstring."""
    kol = Kolmogorov(library_B(nu), nu, f, T)
    dt, s2 = T / m, 2 * nu
    rng = np.random.default_rng(seed)
    X = np.broadcast_to(X0, (n_paths, 2, D)).copy()
    cv = np.zeros(n_paths)
    for k in range(m):
        dW = np.sqrt(dt / 2) * rng.standard_normal((2, n_paths, 2, D))
        x1, x2 = X[:, 0], X[:, 1]
        u = _dot(x1, x2)
        p = _proj(X, dW[0] + dW[1])
        xi = np.sqrt(s2) * (_dot(p[:, 0], x2) + _dot(p[:, 1], x1))          # the martingale part of du
        eta = s2 * (_dot(p[:, 0], p[:, 1]) - 0.5 * u * (_dot(p[:, 0], p[:, 0]) + _dot(p[:, 1], p[:, 1])))
        if method == "geodesic_strang":   # second half's projection at the moved point: -s2 <b_i, x_i> <q_i, x_j>
            q = _proj(X, dW[0])
            eta -= s2 * (_dot(dW[1][:, 0], x1) * _dot(q[:, 0], x2) + _dot(dW[1][:, 1], x2) * _dot(q[:, 1], x1))
        c = kol.coef((k + 1) * dt)
        Xp = sde_step(method, two_token_drift, k * dt, X, dt, dW, nu)
        Xm = sde_step(method, two_token_drift, k * dt, X, dt, -dW, nu)
        odd = 0.5 * (C.chebval(_dot(Xp[:, 0], Xp[:, 1]), c) - C.chebval(_dot(Xm[:, 0], Xm[:, 1]), c))
        # exact conditional means: E eta = -s2 (d - 1) u dt, E xi^2 = 2 s2 (1 - u^2) dt
        even = (C.chebval(u, C.chebder(c)) * (eta + s2 * (D - 1) * u * dt)
                + 0.5 * C.chebval(u, C.chebder(c, 2)) * (xi**2 - 2 * s2 * dt * (1 - u**2)))
        cv += odd + even
        X = Xp
    y = f(_dot(X[:, 0], X[:, 1])) - cv
    return y.mean() - kol.mean(0.0), y.std(ddof=1) / np.sqrt(n_paths)


# ----------------------------------------------------------------------------- the reference itself
def test_two_token_drift_is_the_librarys():
    X = np.random.default_rng(0).standard_normal((50, 2, D))               # off the sphere too (Heun's stages)
    # the same sums in another order: round-off of O(1) terms
    assert np.abs(two_token_drift(0.0, X) - SYSTEM.rhs(0.0, X)).max() < 1e-13
    single = mf.ParticleSystem(SYSTEM.heads, summation="direct")
    Xs = X[:1] / np.linalg.norm(X[:1], axis=-1, keepdims=True)
    assert np.abs(two_token_drift(0.0, Xs)[0] - single.rhs(0.0, Xs[0])).max() < 1e-13


def test_kolmogorov_reference_against_the_heat_kernel():
    """Without interaction E P_l(u(T)) = exp(-2 nu l (l + 1) T) P_l(u(0)) on S^2 (two independent heat kernels,
    addition theorem); with it, 24 and 40 nodes agree: the reference is exact to ~1e-11."""
    nu, T, u0 = 0.1, 1.0, 0.5
    free = BatchedSystem(tuple(mf.Head(0.0 * np.eye(D), 0.0 * np.eye(D), 1.0, "exp", "softmax") for _ in range(2)))
    for l, P in ((1, lambda u: u), (2, lambda u: 1.5 * u**2 - 0.5)):
        got = Kolmogorov(library_B(nu, free), nu, P, T).mean(u0)
        # collocation is exact on polynomials here (the generator maps degree l to itself): expm's round-off on a
        # 41 x 41 matrix of norm ~1e3 (the D2 entries), measured 1.2e-13
        assert abs(got - np.exp(-2 * nu * l * (l + 1) * T) * P(u0)) < 1e-12
    a = Kolmogorov(library_B(nu), nu, lambda u: u, T, N=24).mean(0.0)
    b = Kolmogorov(library_B(nu), nu, lambda u: u, T, N=40).mean(0.0)
    assert abs(a - b) < 1e-10                  # spectral convergence (measured 1e-15 at these node counts)


# ----------------------------------------------------------------------------- weak order
def _weak_slope(method, levels, n_paths, seed):
    nu, T = 0.1, 1.0
    dts, errs = [], []
    for m in levels:
        err, se = weak_error(method, nu, T, m, n_paths, seed + m)
        # resolved: the bias is at least 4 standard errors on every level, so the slope measures the scheme
        assert abs(err) > 4 * se, (method, m, err, se)
        dts.append(T / m)
        errs.append(abs(err))
    return np.polyfit(np.log(dts), np.log(errs), 1)[0], errs


# steps in each scheme's asymptotic range (Euler-Maruyama's drift and noise errors nearly cancel at dt >= 1/16:
# 5.9e-4, 4.7e-4, 3.5e-4 at dt = 1/4, 1/8, 1/16), and paths for >= 4 standard errors on every level
WEAK = {"geodesic_strang": ([4, 8, 16], 40_000), "euler_maruyama": ([16, 32, 64], 25_000)}


@pytest.mark.parametrize("method", method_names(stochastic=True))
def test_weak_order_with_interaction(method):
    """Weak error of E <x_1(T), x_2(T)> (two heads, nu = 0.1, T = 1) against the Kolmogorov reference: slope 2
    for geodesic_strang at dt = 1/4, 1/8, 1/16 (measured 2.09; errors 1.8e-3, 3.5e-4, 1.0e-4, standard errors
    1/7 of them or less) and 1 for euler_maruyama at dt = 1/16, 1/32, 1/64 (measured 0.88; errors 3.6e-4,
    1.9e-4, 1.1e-4, standard errors 1/14 of them or less).  A Lie splitting noise(dt) . Heun(dt) measured 0.83
    at the first set of steps, so the test sees the coupling of noise and interaction, not only the drift's
    own order."""
    levels, n_paths = WEAK[method]
    slope, errs = _weak_slope(method, levels, n_paths, 100)
    # 0.3: the slope of three levels, each with <= 1/4 relative sampling error at worst, plus Euler-Maruyama's
    # pre-asymptotic 0.15
    assert abs(slope - METHODS[method].weak_order) < 0.3, (method, slope, errs)


@pytest.mark.slow
@pytest.mark.parametrize("method", method_names(stochastic=True))
def test_weak_order_with_interaction_precise(method):
    """The same at 10x the paths and one more level (half the smallest step); 5-6 minutes on the busy machine."""
    levels, n_paths = WEAK[method]
    slope, errs = _weak_slope(method, levels + [2 * levels[-1]], 10 * n_paths, 200)
    # the fit over four levels, measured: 1.98 (geodesic_strang: 1.6e-3, 4.0e-4, 1.1e-4, 2.6e-5) and 0.89
    # (euler_maruyama: 3.5e-4, 2.0e-4, 1.1e-4, 5.5e-5; local slopes 0.85, 0.88, 0.96 approach 1)
    assert abs(slope - METHODS[method].weak_order) < 0.2, (method, slope, errs)


# ----------------------------------------------------------------------------- strong order
@pytest.mark.parametrize("method", method_names(stochastic=True))
def test_strong_order_with_two_heads(method):
    """Strong error against a fine solution (dt = T / 256) on the same Brownian path, 300 systems of four tokens
    under the two heads at once: RMS error falls like dt^(1/2) (non-commuting noise fields, no Levy areas);
    measured 0.555 (euler_maruyama), 0.526 (geodesic_strang)."""
    nu, T, n, paths = 0.3, 0.5, 4, 300
    system = BatchedSystem(SYSTEM.heads)
    X0 = np.random.default_rng(8).standard_normal((paths, n, D))
    X0 /= np.linalg.norm(X0, axis=-1, keepdims=True)
    levels, fine = [2, 3, 4, 5], 8
    dW = np.sqrt(T / 2 ** (fine + 1)) * np.random.default_rng(9).standard_normal((2 ** (fine + 1), paths, n, D))
    ends = sde_ends_on_one_path(method, system.rhs, X0, T, dW, levels, fine, nu)
    rms = np.array([np.sqrt(np.mean(np.sum((ends[L] - ends[fine]) ** 2, axis=-1))) for L in levels])
    slope = np.polyfit(np.log(T / 2.0 ** np.array(levels)), np.log(rms), 1)[0]
    # declared strong order 1/2; 300 paths x 4 tokens: ~3 % sampling error per level, so 0.15 is ample
    assert abs(slope - METHODS[method].strong_order) < 0.15, (method, slope, rms)
    print(f"{method}: strong slope {slope:.3f}")
