"""The closed-form cases of MODEL.md in one table (STYLE.md habit 5; jax-cfd's ``validation_problems``).

Each :class:`Case` names an exact fact of the model, the MODEL.md section it comes from, a function
computing the numerical value through the public API, the exact (closed-form or independently
computed) value, a tolerance and a one-line reason for that tolerance.  ``tests/test_closed_forms.py``
checks every case; add a case here rather than a one-off test elsewhere.

A case passes when, elementwise, ``|value - exact| <= max(atol, rtol * |exact|)`` (pytest.approx's
rule; never looser than ``numpy.testing.assert_allclose`` with the same numbers).  Where a tolerance
scales with the data (``1e-12 * max|v|``), the case returns the normalized error and compares it
with 0.

Cases marked ``moved`` came from the named test, with their numbers and tolerances unchanged (or
tightened where that test relied on ``assert_allclose``'s default ``rtol=1e-7``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np
from _helpers import FD_RTOL, fd_energy_rate, smooth_density
from scipy import optimize

import meanfield as mf
from meanfield import diagnostics
from meanfield import field_diagnostics as fd
from meanfield import theory as T
from meanfield.analysis import stability
from meanfield.core.densities import perturbed_uniform, uniform_density, vmf_mixture_density
from meanfield.core.initial import equiangular, random_rotation, uniform_sphere
from meanfield.core.options import SaveAt, StepControl
from meanfield.models.particles import retract_sphere

__all__ = ["Case", "CASES", "compare"]


@dataclass(frozen=True)
class Case:
    """One exact fact: ``compute()`` through the public API against ``exact`` within a tolerance.

    Attributes
    ----------
    name : str
        Unique, used as the pytest id.
    section : str
        Where MODEL.md states it (e.g. ``"3 linear stability"``; ``5.k`` for the checklist item).
    compute : callable () -> float or ndarray
    exact : float, ndarray, or callable () -> float or ndarray
    atol, rtol : float
        Pass when ``|value - exact| <= max(atol, rtol |exact|)`` elementwise.
    why : str
        One line: why this tolerance.
    moved : str, optional
        The test this case was moved from.
    """

    name: str
    section: str
    compute: Callable[[], Any]
    exact: Any
    atol: float = 0.0
    rtol: float = 0.0
    why: str = ""
    moved: str | None = None

    def exact_value(self):
        return np.asarray(self.exact() if callable(self.exact) else self.exact, dtype=float)


def compare(case: Case):
    """``(ok, value, exact, worst error, allowed at that element)`` for one case."""
    value = np.asarray(case.compute(), dtype=float)
    exact = case.exact_value()
    value, exact = np.broadcast_arrays(value, exact)
    err = np.abs(value - exact)
    allowed = np.maximum(case.atol, case.rtol * np.abs(exact))
    ok = bool(np.all(err <= allowed)) and bool(np.all(np.isfinite(value)))
    k = int(np.argmax(err - allowed)) if err.size else 0
    return ok, value, exact, float(err.flat[k]) if err.size else 0.0, float(allowed.flat[k]) if err.size else 0.0


CASES: list[Case] = []


def case(*args, **kw):
    CASES.append(Case(*args, **kw))


def seeded():
    """The generator of the ``rng`` fixture in conftest.py (cases moved from tests using it)."""
    return np.random.default_rng(20261129)


# ================================================================ section 2: c*, beta*, phi
GOLDEN = (1 + np.sqrt(5)) / 2

case("c*(2) = 1/golden ratio", "2 critical inverse temperature", lambda: T.c_star(2), 1 / GOLDEN,
     atol=1e-15, why="same arithmetic up to one rounding: 1e-15 is a couple of ulps of 0.618",
     moved="test_theory.py::test_c_star_golden")

for _H, _n, _ref in [(2, 8, 0.732349), (2, 32, 1.476388), (2, 128, 2.181488),
                     (3, 8, 0.185695), (3, 32, 0.929733), (4, 32, 0.570306)]:
    case(f"beta*(H={_H}, n={_n}) = {_ref}", "2 critical inverse temperature",
         lambda H=_H, n=_n: T.beta_star(H, n), _ref, atol=5e-7,
         why="MODEL.md gives six decimals: half a unit of the last digit plus round-off",
         moved="test_theory.py::test_beta_star_reference_values")


@lru_cache(maxsize=None)
def _phi_argmax(beta, n):
    lm = T.lambda_max(beta, n)
    res = optimize.minimize_scalar(lambda x: -T.phi(x, beta, n), bounds=(0, 5 * lm + 10 / beta),
                                   method="bounded", options={"xatol": 1e-10})
    return res.x


for _beta, _n in [(1.0, 2), (1.0, 8), (0.5, 64), (3.0, 1024)]:
    case(f"lambda_max = argmax phi (beta={_beta}, n={_n})", "2 early rate (Lambert W)",
         lambda beta=_beta, n=_n: _phi_argmax(beta, n), lambda beta=_beta, n=_n: T.lambda_max(beta, n),
         rtol=1e-6, why="argmax of a smooth max is located only to ~sqrt(eps) relative (flat top)",
         moved="test_theory.py::test_lambda_max_is_argmax")
    case(f"phi'(lambda_max) = 0 (beta={_beta}, n={_n})", "2 early rate (Lambert W)",
         lambda beta=_beta, n=_n: T.phi_derivative(T.lambda_max(beta, n), beta, n), 0.0, atol=1e-14,
         why="phi' is O(1/n) nearby, so 1e-14 absolute is round-off",
         moved="test_theory.py::test_lambda_max_is_argmax")
    case(f"Lambert W: (u-1) e^u = n-1 at u = beta lambda_max (beta={_beta}, n={_n})", "2 early rate (Lambert W)",
         lambda beta=_beta, n=_n: (beta * T.lambda_max(beta, n) - 1) * np.exp(beta * T.lambda_max(beta, n)),
         float(_n - 1), rtol=1e-13,
         why="W to ~1 ulp, then exp amplifies the relative error by u <= 6: a few 1e-15")


def _late_slope(lam, beta, n, normalization):
    t = np.linspace(0, 14, 281)
    eps = 1 - T.solve_equiangular(0.0, lam, beta, n, t, normalization=normalization)
    win = (eps < 1e-5) & (eps > 1e-9)
    assert win.sum() >= 10
    return np.polyfit(t[win], np.log(eps[win]), 1)[0]


for _norm in ["softmax", "mean"]:
    case(f"late rate: d log(1 - gamma)/dt = -r ({_norm})", "2 late rate",
         lambda nrm=_norm: _late_slope([1.0, 0.5], 1.0, 8, nrm),
         lambda nrm=_norm: -T.late_rate([1.0, 0.5], 1.0, normalization=nrm), rtol=1e-3,
         why="d log eps/dt = -r (1 + O(eps)) and integrator error atol/eps <= 1e-5: far below 1e-3",
         moved="test_theory.py::test_late_rate_slope")


# ===================================================== section 2: equiangular reduced ODE
def _particle_rate(gamma, lambdas, beta, n, kernel, normalization):
    """dgamma/dt from the finite-n velocity of MODEL.md section 1 on an explicit configuration."""
    G = (1 - gamma) * np.eye(n) + gamma * np.ones((n, n))
    w, U = np.linalg.eigh(G)
    X = U * np.sqrt(np.clip(w, 0, None))              # rows x_i, X X^T = G
    v = np.zeros_like(X)
    for lam in lambdas:
        S = lam * X @ X.T
        K = np.exp(beta * S) if kernel == "exp" else np.maximum(S, 0.0)
        f = K @ (lam * X)
        if normalization == "mean":
            v += f / n
        else:
            Z = K.sum(axis=1, keepdims=True)
            v += np.where(Z > 0, f / np.where(Z > 0, Z, 1), 0.0)
    dX = v - np.sum(v * X, axis=1, keepdims=True) * X
    return dX[0] @ X[1] + X[0] @ dX[1]


for _kernel in ["exp", "relu"]:
    for _norm in ["mean", "softmax"]:
        for _gamma in [-0.15, 0.3, 0.9]:
            case(f"equiangular rate = explicit particle rate ({_kernel}, {_norm}, gamma={_gamma})",
                 "2 equiangular reduced ODE",
                 lambda k=_kernel, nrm=_norm, g=_gamma: T.equiangular_rate(g, [1.3, -0.7], 1.5, 6, k, nrm),
                 lambda k=_kernel, nrm=_norm, g=_gamma: _particle_rate(g, [1.3, -0.7], 1.5, 6, k, nrm),
                 atol=1e-13, why="explicit configuration built by eigh: round-off ~1e-15 in X, O(n) sums",
                 moved="test_theory.py::test_equiangular_rate_matches_particles")


def _system_rate(gamma, lambdas, beta, n, d, kernel, normalization):
    """dgamma/dt = <dx_0, x_1> + <x_0, dx_1> from ParticleSystem.velocity on initial.equiangular tokens."""
    X = equiangular(n, d, gamma, seed=3)
    heads = mf.scalar_heads(lambdas, d, beta=beta, kernel=kernel, normalization=normalization)
    v = mf.ParticleSystem(heads).velocity(X)
    return v[0] @ X[1] + X[0] @ v[1]


for _kernel in ["exp", "relu"]:
    for _norm in ["mean", "softmax"]:
        for _gamma in [-0.1, 0.45]:
            case(f"equiangular rate = ParticleSystem rate ({_kernel}, {_norm}, gamma={_gamma})",
                 "2 equiangular reduced ODE",
                 lambda k=_kernel, nrm=_norm, g=_gamma: _system_rate(g, [0.8, 1.6], 2.0, 7, 9, k, nrm),
                 lambda k=_kernel, nrm=_norm, g=_gamma: T.equiangular_rate(g, [0.8, 1.6], 2.0, 7, k, nrm),
                 atol=1e-13, why="tokens exact to ~1e-15 (Gram entries), O(n) sums of O(1) terms: round-off")


def _radial_fraction_particles(beta, alpha, n):
    X = np.eye(n)
    r = diagnostics.radial_shadows(mf.ParticleSystem(mf.scalar_heads([alpha], n, beta=beta)), X)
    return r["a"][0] / r["norm"][0]


for _beta, _alpha, _n in [(0.7, 1.0, 8), (1.4764, 1.0, 32), (0.3, 2.0, 5)]:
    case(f"radial fraction a/|f| at orthogonal tokens (beta={_beta}, alpha={_alpha}, n={_n})",
         "2 critical inverse temperature",
         lambda b=_beta, a=_alpha, n=_n: _radial_fraction_particles(b, a, n),
         lambda b=_beta, a=_alpha, n=_n: np.full(n, T.radial_fraction(b, a, n)), rtol=1e-14,
         why="f_i = alpha (e^{beta alpha} x_i + sum_{j != i} x_j) exactly; sums of n exact terms, one sqrt")


# ===================================================================== section 1: particles
@lru_cache(maxsize=None)
def _energy_identity(geometry, d, kernel):
    heads = mf.random_symmetric_heads(d, 3, seed=d, beta=1.5, kernel=kernel)
    system = mf.ParticleSystem(heads, geometry)
    X = uniform_sphere(9, d, seed=d + 100)
    v = system.velocity(X)
    diss = np.mean(np.sum(v**2, axis=1))
    return {"diss": diss, "per_head_fd": fd_energy_rate(system, X, v), "per_head": system.energy_rates(X)}


for _geometry in ["sphere", "flat"]:
    for _d in [2, 3, 5, 8]:
        for _kernel in ["exp", "relu"]:
            _key = (_geometry, _d, _kernel)
            _tag = f"({_geometry}, d={_d}, {_kernel})"
            _moved = "test_particles.py::test_energy_identity"
            case(f"Thm 11: dE/dt (finite differences) = (1/n) sum |dx/dt|^2 {_tag}", "1 total-energy identity",
                 lambda k=_key: _energy_identity(*k)["per_head_fd"].sum(),
                 lambda k=_key: _energy_identity(*k)["diss"], rtol=FD_RTOL,
                 why="central differences at h = 1e-5: truncation ~1e-10, round-off ~1e-11 relative",
                 moved=_moved)
            case(f"Thm 11: per-head dE_h/dt exact = finite differences {_tag}", "1 per-head energies",
                 lambda k=_key: _energy_identity(*k)["per_head"] / abs(_energy_identity(*k)["diss"]),
                 lambda k=_key: _energy_identity(*k)["per_head_fd"] / abs(_energy_identity(*k)["diss"]),
                 atol=FD_RTOL, rtol=FD_RTOL,
                 why="central differences (1e-7 relative), absolute part relative to the total rate",
                 moved=_moved)
            case(f"Thm 11: sum_h dE_h/dt = (1/n) sum |dx/dt|^2 {_tag}", "1 total-energy identity",
                 lambda k=_key: _energy_identity(*k)["per_head"].sum(),
                 lambda k=_key: _energy_identity(*k)["diss"], rtol=1e-12,
                 why="same floats summed in another order", moved=_moved)


def _energy_identity_weighted():
    rng = seeded()
    system = mf.ParticleSystem(mf.random_symmetric_heads(3, 2, seed=3, beta=2.0))
    X = uniform_sphere(12, 3, seed=4)
    w = rng.random(12)
    w /= w.sum()
    v = system.velocity(X, w)
    return fd_energy_rate(system, X, v, w).sum(), w @ np.sum(v**2, axis=1)


case("Thm 11 weighted: dE/dt = sum_i w_i |dx_i/dt|^2", "1 total-energy identity",
     lambda: _energy_identity_weighted()[0], lambda: _energy_identity_weighted()[1], rtol=FD_RTOL,
     why="central differences at h = 1e-5: truncation ~1e-10, round-off ~1e-11 relative",
     moved="test_particles.py::test_energy_identity_weighted")


def _single_softmax_head():
    system = mf.ParticleSystem(mf.random_symmetric_heads(3, 1, seed=6, beta=1.2, normalization="softmax"))
    X = uniform_sphere(10, 3, seed=7)
    n = X.shape[0]
    v = system.velocity(X)
    _, N = system.forces(X)
    # our N is Z_i / n (weights 1/n in the sum); MODEL's Z_i / n^2 is N_i / n
    return fd_energy_rate(system, X, v).sum(), np.sum(N[0] / n * np.sum(v**2, axis=1))


case("one softmax head: dE/dt = sum_i Z_i/n^2 |dx_i/dt|^2", "1 total-energy identity",
     lambda: _single_softmax_head()[0], lambda: _single_softmax_head()[1], rtol=FD_RTOL,
     why="central differences at h = 1e-5: truncation ~1e-10, round-off ~1e-11 relative",
     moved="test_particles.py::test_single_softmax_head_weighted_monotonicity")


@lru_cache(maxsize=None)
def _tangency_rotation(normalization, kernel):
    rng = seeded()
    d = 5
    heads = tuple(mf.Head(rng.standard_normal((d, d)), rng.standard_normal((d, d)), 1.1, kernel, normalization)
                  for _ in range(3))
    system = mf.ParticleSystem(heads)
    X = uniform_sphere(11, d, seed=8)
    v = system.velocity(X)
    Q = random_rotation(d, seed=9)
    rot = mf.ParticleSystem(tuple(h.replace(M=Q @ h.M @ Q.T, V=Q @ h.V @ Q.T) for h in heads))
    return {"tangency": np.abs(np.sum(X * v, axis=1)).max(),
            "rotation": np.abs(rot.velocity(X @ Q.T) - v @ Q.T).max() / np.abs(v).max()}


for _norm in ["mean", "softmax"]:
    for _kernel in ["exp", "relu"]:
        _moved = "test_particles.py::test_tangency_and_rotation_equivariance"
        case(f"particle tangency <x_i, dx_i/dt> = 0 ({_norm}, {_kernel})", "5.2 tangency",
             lambda nrm=_norm, k=_kernel: _tangency_rotation(nrm, k)["tangency"], 0.0, atol=1e-13,
             why="round-off of the projection (|v| ~ 1, eps ~ 1e-16)", moved=_moved)
        case(f"particle rotation equivariance ({_norm}, {_kernel})", "5.2 rotation equivariance",
             lambda nrm=_norm, k=_kernel: _tangency_rotation(nrm, k)["rotation"], 0.0, atol=1e-12,
             why="rotated tokens and conjugated M, V: identical up to matmul round-off (relative to max|v|)",
             moved=_moved)


def _scalar_head_velocity():
    n, beta, alpha = 4, 0.8, 1.3
    X = np.eye(n)
    system = mf.ParticleSystem(mf.scalar_heads([alpha], n, beta=beta), geometry="flat")
    f = alpha * (np.exp(beta * alpha) * X + (X.sum(0) - X))
    return system.velocity(X), f / n


case("scalar head at orthogonal tokens: f_i = alpha (e^{beta alpha} x_i + sum_{j!=i} x_j)",
     "2 critical inverse temperature", lambda: _scalar_head_velocity()[0], lambda: _scalar_head_velocity()[1],
     rtol=1e-14, why="a few roundings of exact sums", moved="test_particles.py::test_scalar_head_velocity_closed_form")


@lru_cache(maxsize=None)
def _entropy_identity(normalization, weighted):
    """dH_i/dt = -beta^2 Cov_p(s, sdot) along the flow and along an arbitrary tangent motion."""
    rng = seeded()
    d, n = 4, 10
    heads = tuple(mf.Head(rng.standard_normal((d, d)), rng.standard_normal((d, d)), 1.7, "exp", normalization)
                  for _ in range(2))
    system = mf.ParticleSystem(heads)
    X = uniform_sphere(n, d, seed=1)
    w = None
    if weighted:
        w = rng.random(n)
        w /= w.sum()
    V = rng.standard_normal((n, d))
    V -= np.sum(V * X, axis=1, keepdims=True) * X           # arbitrary tangent motion
    out = []
    for motion in (system.velocity(X, w), V):
        h = 1e-4
        Hs = [diagnostics.attention_entropy(system, retract_sphere(X + k * h * motion), w, relative=True)
              for k in (-2, -1, 1, 2)]
        fd5 = (Hs[0] - 8 * Hs[1] + 8 * Hs[2] - Hs[3]) / (12 * h)
        rate = diagnostics.attention_entropy_rate(system, X, motion, w)
        scale = np.abs(fd5).max()
        out.append((rate / scale, fd5 / scale))
    return out


for _norm in ["mean", "softmax"]:
    for _weighted in [False, True]:
        for _i, _motion in enumerate(["flow", "arbitrary tangent motion"]):
            case(f"entropy identity dH/dt = -beta^2 Cov ({_norm}, {'weighted' if _weighted else 'uniform'}, "
                 f"{_motion})", "1 attention entropy",
                 lambda nrm=_norm, wt=_weighted, i=_i: _entropy_identity(nrm, wt)[i][0],
                 lambda nrm=_norm, wt=_weighted, i=_i: _entropy_identity(nrm, wt)[i][1],
                 atol=FD_RTOL, rtol=FD_RTOL,
                 why="five-point stencil at h = 1e-4: truncation ~1e-10, round-off ~1e-12 (relative to max|dH/dt|)",
                 moved="test_diagnostics.py::test_entropy_identity_finite_difference")


# ===================================================================== section 3: continuum
def general_heads(seed=7):
    rng = np.random.default_rng(seed)
    return tuple(mf.Head(0.6 * rng.standard_normal((3, 3)), 0.6 * rng.standard_normal((3, 3)), 1.5, "exp", nrm)
                 for nrm in ("mean", "softmax"))


case("sigma_1..4 = 9.34, 19.61, 23.35, 19.97 (d = 3, beta = 6, one head, mean)", "3 linear stability",
     lambda: stability.growth_rate([1, 2, 3, 4], [1.0], 6.0, "mean"), [9.34, 19.61, 23.35, 19.97], atol=0.006,
     why="MODEL.md quotes two decimals: half a unit of the last digit plus margin",
     moved="test_theory.py::test_growth_rate_model_values")


def _linearized_rates(normalization, nu, lambdas, beta):
    """d/d eps of the tendency at uniform + eps Y_lm, for l = 1..8 and m = 0, l."""
    pde = mf.ContinuumPDE(mf.scalar_heads(lambdas, 3, beta=beta, normalization=normalization), lmax=24, nu=nu)
    g = pde.grid
    rho0 = uniform_density(g)
    eps = 1e-4
    out = []
    for ell in range(1, 9):
        for m in (0, ell):
            i = g.index(ell, m)
            drho = np.zeros(g.nalm, complex)
            drho[i] = 1.0
            out.append((pde.tendency(rho0 + eps * drho)[i] - pde.tendency(rho0 - eps * drho)[i]).real / (2 * eps))
    return np.array(out)


for _norm in ["mean", "softmax"]:
    for _nu in [0.0, 0.3]:
        for _lam, _beta in [((1.0,), 6.0), ((1.0, 0.5, -0.7), 2.5)]:
            case(f"sigma_l = linearized PDE tendency ({_norm}, nu={_nu}, lambdas={list(_lam)}, beta={_beta})",
                 "3 linear stability",
                 lambda nrm=_norm, nu=_nu, lam=_lam, b=_beta: _linearized_rates(nrm, nu, list(lam), b),
                 lambda nrm=_norm, nu=_nu, lam=_lam, b=_beta: np.repeat(
                     stability.growth_rate(np.arange(1, 9), list(lam), b, nrm, nu), 2),
                 atol=1e-9, rtol=1e-6,
                 why="symmetric difference at eps = 1e-4: O(eps^2) ~ 1e-8 relative, round-off 1e-16/eps = 1e-12",
                 moved="test_continuum.py::test_linear_growth_rates")


def _growth_in_time():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=6.0), lmax=20)
    g = pde.grid
    eps = 1e-9
    rho0 = perturbed_uniform(g, {(3, 0): eps})
    t_final = 0.2
    tr = mf.solve_continuum(pde, rho0, t_final, method="dopri5", step=StepControl(rtol=1e-11, atol=1e-20),
                            save=SaveAt(observe=False), monitor=False)
    return np.log(pde.coefficients(tr.y_final)[g.index(3, 0)].real / eps) / t_final


case("eps Y_30 grows like exp(sigma_3 t) along a PDE run", "3 linear stability", _growth_in_time,
     lambda: stability.growth_rate(3, [1.0], 6.0), rtol=1e-6, atol=1e-12,
     why="nonlinear corrections ~ eps e^{sigma T} ~ 1e-7 relative, integrator error ~1e-10",
     moved="test_continuum.py::test_growth_rate_in_time")


@lru_cache(maxsize=None)
def _nodes_consistency(normalization):
    heads = mf.scalar_heads([1.2, -0.6], 3, beta=2.0, normalization=normalization)
    pde = mf.ContinuumPDE(heads, lmax=24)
    g = pde.grid
    rho_lm = smooth_density(g)
    rho = g.synthesis(rho_lm)
    W = (rho * g.weights).reshape(-1)
    assert W.min() > 0
    v_particles = mf.ParticleSystem(heads).velocity(g.nodes.reshape(-1, 3), W / W.sum())
    v_pde = pde.velocity(rho_lm).reshape(-1, 3)
    quad = mf.ContinuumPDE(heads, lmax=24, summation="quadrature")
    return {"particles": np.abs(v_pde - v_particles).max() / np.abs(v_particles).max(),
            "quadrature": np.abs(quad.velocity(rho_lm).reshape(-1, 3) - v_pde).max() / np.abs(v_pde).max(),
            "E_quad": quad.energies(rho_lm), "E_spec": pde.energies(rho_lm)}


for _norm in ["mean", "softmax"]:
    _moved = "test_continuum.py::test_velocity_equals_particle_velocity_on_nodes"
    case(f"quadrature consistency: spectral PDE velocity = particle velocity on nodes ({_norm})",
         "5.3 quadrature consistency", lambda nrm=_norm: _nodes_consistency(nrm)["particles"], 0.0, atol=1e-12,
         why="GL quadrature exact to degree 3 lmax + 1, Funk-Hecke tail below round-off; round-off ~1e-14 "
             "relative to max|v|", moved=_moved)
    case(f"quadrature consistency: quadrature PDE velocity = spectral PDE velocity ({_norm})",
         "5.3 quadrature consistency", lambda nrm=_norm: _nodes_consistency(nrm)["quadrature"], 0.0, atol=1e-12,
         why="the same exact quadrature in two codes: round-off relative to max|v|", moved=_moved)
    case(f"energies: Parseval (spectral) = double quadrature sum ({_norm})", "3 energy",
         lambda nrm=_norm: _nodes_consistency(nrm)["E_quad"], lambda nrm=_norm: _nodes_consistency(nrm)["E_spec"],
         rtol=1e-12, why="exact quadratures of band-limited products: round-off only", moved=_moved)


def _general_heads_nodes():
    heads = general_heads()
    pde = mf.ContinuumPDE(heads, lmax=10)
    g = pde.grid
    rho_lm = smooth_density(g)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    v_particles = mf.ParticleSystem(heads, summation="direct").velocity(g.nodes.reshape(-1, 3), W / W.sum())
    return np.abs(pde.velocity(rho_lm).reshape(-1, 3) - v_particles).max() / np.abs(v_particles).max()


case("quadrature consistency, general (non-zonal, non-symmetric) heads", "5.3 quadrature consistency",
     _general_heads_nodes, 0.0, atol=1e-12,
     why="the same sums in another order: round-off relative to the largest velocity",
     moved="test_continuum.py::test_general_heads_velocity_equals_particles_on_nodes")


@lru_cache(maxsize=None)
def _general_heads_run():
    rng = seeded()
    heads = tuple(mf.Head(0.5 * rng.standard_normal((3, 3)), 0.5 * rng.standard_normal((3, 3)), 1.5, "exp", nrm)
                  for nrm in ("mean", "softmax"))
    pde = mf.ContinuumPDE(heads, lmax=12)
    assert not pde.zonal
    rho_lm = smooth_density(pde.grid)
    V = pde.velocity(rho_lm)
    tr = mf.solve_continuum(pde, rho_lm, 0.5, method="rk4", step=StepControl(dt=0.05), monitor=False)
    return {"tangency": np.abs(np.sum(V * pde.grid.nodes, axis=-1)).max(),
            "mass": np.abs(tr.observables["mass"] - 1).max()}


case("PDE velocity is tangent, general heads (quadrature path)", "5.2 tangency",
     lambda: _general_heads_run()["tangency"], 0.0, atol=1e-14, why="round-off of the projection",
     moved="test_continuum.py::test_general_heads_run_conserves_mass")
case("mass conserved along a run, general heads (quadrature path)", "5.1 mass",
     lambda: _general_heads_run()["mass"], 0.0, atol=1e-13,
     why="the degree-0 coefficient of a divergence is exactly 0: mass changes by round-off only",
     moved="test_continuum.py::test_general_heads_run_conserves_mass")


@lru_cache(maxsize=None)
def _zonal_mass(normalization, nu):
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0, 0.5], 3, beta=2.0, normalization=normalization), lmax=16, nu=nu)
    rho0 = vmf_mixture_density(pde.grid, [[0, 0, 1.0], [1.0, 0, 0]], [4.0, 3.0], floor=0.2)
    tr = mf.solve_continuum(pde, rho0, 0.3, method="rk4", step=StepControl(dt=0.01), monitor=False)
    return {"tendency_00": abs(pde.tendency(rho0)[0]), "mass": np.abs(tr.observables["mass"] - 1).max()}


for _norm, _nu in [("mean", 0.0), ("softmax", 0.2)]:
    case(f"d/dt int rho = 0: degree-0 tendency vanishes, zonal heads ({_norm}, nu={_nu})", "5.1 mass",
         lambda nrm=_norm, nu=_nu: _zonal_mass(nrm, nu)["tendency_00"], 0.0, atol=1e-15,
         why="the (0, 0) coefficient of a divergence (and a Laplacian) is zero; at most one analysis' "
             "round-off (measured exactly 0)")
    case(f"mass conserved along a run, zonal heads ({_norm}, nu={_nu})", "5.1 mass",
         lambda nrm=_norm, nu=_nu: _zonal_mass(nrm, nu)["mass"], 0.0, atol=1e-13,
         why="30 fixed steps each adding round-off of |rho_00| ~ 0.3 (measured 1e-16)")


def _energy_identity_semidiscrete():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0, 0.4], 3, beta=3.0), lmax=20)
    g = pde.grid
    rho_lm = vmf_mixture_density(g, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    # E = 1/2 <rho, A rho> with A symmetric: dE = <A rho, d rho> = sum_h <N_h, d rho>
    N_total = sum(pde.fields(rho_lm)["N_lm"])
    return g.inner(N_total, pde.tendency(rho_lm)), fd.field_dissipation(pde, rho_lm)


case("continuum energy identity dE/dt = int |X|^2 rho (semi-discrete, nu = 0)", "3 energy identity",
     lambda: _energy_identity_semidiscrete()[0], lambda: _energy_identity_semidiscrete()[1], rtol=1e-12,
     atol=1e-12, why="exact quadratures on the dealiased grid: only round-off, relative 1e-12",
     moved="test_continuum.py::test_energy_identity_semidiscrete")


def _free_energy_identity():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=3.0), lmax=32, nu=0.2)
    g = pde.grid
    rho_lm = vmf_mixture_density(g, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    drho = g.synthesis(pde.tendency(rho_lm))
    rho = g.synthesis(rho_lm)
    N_total = sum(pde.fields(rho_lm)["N_lm"])
    dF = g.inner(N_total, pde.tendency(rho_lm)) - pde.nu * g.integrate((np.log(rho) + 1) * drho)
    return dF, fd.free_energy_dissipation(pde, rho_lm)


case("continuum free-energy identity d/dt (E - nu int rho log rho) = int |X - nu grad log rho|^2 rho",
     "3 energy identity", lambda: _free_energy_identity()[0], lambda: _free_energy_identity()[1], rtol=1e-9,
     atol=1e-12, why="log rho is not band-limited: spectral accuracy at lmax 32 (measured ~1e-12), margin",
     moved="test_continuum.py::test_free_energy_identity_with_noise")


def _axisymmetry():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0, -0.3], 3, beta=2.0, normalization="softmax"), lmax=20)
    g = pde.grid
    rho0 = vmf_mixture_density(g, [[0, 0, 1.0], [0, 0, -1.0]], [3.0, 6.0], weights=[0.3, 0.7], floor=0.1)
    assert np.abs(rho0[g.m_index != 0]).max() < 1e-15
    tr = mf.solve_continuum(pde, rho0, 0.5, monitor=False, save=SaveAt(observe=False))
    return np.abs(pde.coefficients(tr.y_final)[g.m_index != 0]).max()


case("axisymmetric data stay axisymmetric under zonal heads (m != 0 coefficients stay 0)", "5.7 axisymmetry",
     _axisymmetry, 0.0, atol=1e-14,
     why="zonal kernels commute with rotations about z; only transform round-off (~1e-17) excites m != 0",
     moved="test_continuum.py::test_axisymmetry_preserved")


def _rotation_equivariance_pde():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0, 0.5], 3, beta=2.0), lmax=20)
    g = pde.grid
    mu1 = np.array([0.0, 0.0, 1.0])
    mu2 = np.array([1.0, 1.0, 1.0]) / np.sqrt(3)
    Q = random_rotation(3, seed=5)
    start = lambda R: vmf_mixture_density(g, [R @ mu1, R @ mu2], [4.0, 3.0], floor=0.2)  # noqa: E731
    runs = [mf.solve_continuum(pde, start(R), 0.3, method="rk4", step=StepControl(dt=0.01),
                               save=SaveAt(observe=False), monitor=False)
            for R in (np.eye(3), Q)]
    pts = g.nodes.reshape(-1, 3)
    a = g.evaluate(pde.coefficients(runs[0].y_final), pts)
    b = g.evaluate(pde.coefficients(runs[1].y_final), pts @ Q.T)
    return np.abs(b - a).max() / np.abs(a).max()


case("rotating the initial density rotates the PDE solution", "5.2 rotation equivariance",
     _rotation_equivariance_pde, 0.0, atol=1e-10,
     why="degree truncation commutes with rotations; runs differ by transform/evaluate round-off (1e-13)",
     moved="test_continuum.py::test_rotation_equivariance")


@lru_cache(maxsize=None)
def _entropy_on_nodes():
    heads = mf.scalar_heads([1.0, 0.5], 3, beta=2.0)
    pde = mf.ContinuumPDE(heads, lmax=20)
    g = pde.grid
    rho_lm = vmf_mixture_density(g, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    W = W / W.sum()
    H = diagnostics.attention_entropy(mf.ParticleSystem(heads), g.nodes.reshape(-1, 3), W, relative=True)
    return fd.field_attention_entropy(pde, rho_lm), H @ W


case("continuum attention entropy (spectral) = particle relative entropy on the quadrature nodes",
     "3 continuum attention entropy", lambda: _entropy_on_nodes()[0], lambda: _entropy_on_nodes()[1], rtol=1e-12,
     why="log Z is not band-limited, but resolved by the dealiased grid at lmax 20 (measured 3e-16)")


def _early_rate_particles(lambdas, beta, n, d):
    X = mf.initial.orthonormal(n, d, seed=2)
    v = mf.ParticleSystem(mf.scalar_heads(lambdas, d, beta=beta, normalization="softmax")).velocity(X)
    return v[0] @ X[1] + X[0] @ v[1]


for _lam, _beta, _n in [((1.0,), 1.0, 8), ((0.3, 1.0, 4.0), 1.0, 16), ((2.0, -0.5), 0.7, 5)]:
    case(f"early rate at orthogonal tokens = sum_h phi(lambda_h) (lambdas={list(_lam)}, beta={_beta}, n={_n})",
         "2 early rate (Thm 22)", lambda lam=_lam, b=_beta, n=_n: _early_rate_particles(list(lam), b, n, n + 1),
         lambda lam=_lam, b=_beta, n=_n: T.early_rate(list(lam), b, n), atol=1e-14,
         why="rotated orthonormal tokens (round-off 1e-16), O(n) softmax sums of O(1) terms")


# ================================================================ section 6: Sinkhorn attention, growth rates
def _sinkhorn_reference(ls, lambdas, beta, nu, d):
    """sigma_l^sinkhorn from Funk-Hecke integrals by Gauss-Jacobi quadrature (independent of
    meanfield.analysis.stability): c_l / (c_0 + c_l) with c_l = int e^{a t} R_l(t) (1 - t^2)^((d-3)/2) dt
    (the factor |S^{d-2}| cancels), R_l = C_l^((d-2)/2) / C_l^((d-2)/2)(1) (Chebyshev T_l for d = 2)."""
    from scipy.special import eval_chebyt, eval_gegenbauer, roots_jacobi

    t, w = roots_jacobi(200, (d - 3) / 2, (d - 3) / 2)
    ls = np.asarray(ls)

    def R(ell):
        if d == 2:
            return eval_chebyt(ell, t)
        al = (d - 2) / 2
        return eval_gegenbauer(ell, al, t) / eval_gegenbauer(ell, al, 1.0)

    bracket = 0.0
    for lam in lambdas:
        e = w * np.exp(beta * lam * t)
        c0 = e.sum()
        cl = np.array([e @ R(ell) for ell in ls])
        bracket = bracket + cl / (c0 + cl) / beta
    return ls * (ls + d - 2) * (bracket - nu)


def _sinkhorn_rate(ls, lambdas, beta, nu, d):
    from meanfield.analysis.stability import growth_rate

    return growth_rate(ls, list(lambdas), beta, "sinkhorn", nu, d=d)


_SK_HEADS = [((1.0,), 6.0), ((1.0, -0.7), 2.5)]
"""One head, and two heads of opposite signs (the negative one: a kernel that is not positive definite)."""

for _d in [2, 3, 4, 8]:
    for _lam, _beta in _SK_HEADS:
        case(f"sigma_l^sinkhorn closed form = Gauss-Jacobi Funk-Hecke integrals (d={_d}, lambdas={list(_lam)}, "
             f"beta={_beta}, nu=0.3)", "6 Sinkhorn linear stability",
             lambda d=_d, lam=_lam, b=_beta: _sinkhorn_rate(np.arange(1, 9), lam, b, 0.3, d),
             lambda d=_d, lam=_lam, b=_beta: _sinkhorn_reference(np.arange(1, 9), lam, b, 0.3, d),
             rtol=1e-12, atol=1e-13,
             why="200-node Gauss-Jacobi is exact to round-off for these entire integrands; Bessel ratios in the "
                 "closed form: a few ulps, relative 1e-12 with margin")


def _sinkhorn_linearized(model, d, lambdas, beta, nu):
    """d/d eps of the tendency of a Sinkhorn PDE at uniform + eps (degree-l mode), l = 1..8."""
    from meanfield.models.axisymmetric import AxisymmetricPDE
    from meanfield.models.circle import CirclePDE

    heads = mf.scalar_heads(list(lambdas), d, beta=beta, normalization="sinkhorn")
    eps, out = 1e-4, []
    if model == "sphere":
        pde = mf.ContinuumPDE(heads, lmax=24, nu=nu, sinkhorn_tol=1e-14)
        g = pde.grid
        rho0 = uniform_density(g)
        for ell in range(1, 9):
            for m in (0, ell):
                i = g.index(ell, m)
                drho = np.zeros(g.nalm, complex)
                drho[i] = 1.0
                out.append((pde.tendency(rho0 + eps * drho)[i] - pde.tendency(rho0 - eps * drho)[i]).real / (2 * eps))
        return np.array(out)
    pde = (CirclePDE(heads, kmax=24, nu=nu, sinkhorn_tol=1e-14) if model == "circle"
           else AxisymmetricPDE(heads, d=d, lmax=24, nu=nu, sinkhorn_tol=1e-14))
    c0 = pde.uniform()
    for ell in range(1, 9):
        dc = np.zeros_like(c0)
        dc[ell] = 1.0
        out.append(np.real(pde.tendency(c0 + eps * dc)[ell] - pde.tendency(c0 - eps * dc)[ell]) / (2 * eps))
    return np.array(out)


for _model, _d in [("sphere", 3), ("circle", 2), ("axisymmetric", 3), ("axisymmetric", 4), ("axisymmetric", 8)]:
    for _nu in [0.0, 0.3]:
        for _lam, _beta in _SK_HEADS:
            case(f"sigma_l^sinkhorn = linearized PDE tendency ({_model}, d={_d}, nu={_nu}, lambdas={list(_lam)}, "
                 f"beta={_beta})", "6 Sinkhorn linear stability",
                 lambda mo=_model, d=_d, nu=_nu, lam=_lam, b=_beta: _sinkhorn_linearized(mo, d, lam, b, nu),
                 lambda mo=_model, d=_d, nu=_nu, lam=_lam, b=_beta: np.repeat(
                     _sinkhorn_rate(np.arange(1, 9), lam, b, nu, d), 2 if mo == "sphere" else 1),
                 atol=1e-9, rtol=1e-6,
                 why="symmetric difference at eps = 1e-4: O(eps^2) ~ 1e-8 relative (measured <= 7e-8); the "
                     "scalings solved to 1e-14 add 1e-14/eps = 1e-10")


def _sinkhorn_growth_in_time(model):
    """log(amplitude / eps) / T of a degree-3 mode along a run from uniform + eps (eps = 1e-6: the marginal
    tolerance 1e-14 is absolute, so a smaller signal would see it)."""
    from meanfield.models.axisymmetric import AxisymmetricPDE

    eps, t_final = 1e-6, 0.2
    if model == "sphere":
        pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=6.0, normalization="sinkhorn"), lmax=20,
                              sinkhorn_tol=1e-14)
        g = pde.grid
        tr = mf.solve_continuum(pde, perturbed_uniform(g, {(3, 0): eps}), t_final, method="dopri5",
                                step=StepControl(rtol=1e-11, atol=1e-20), save=SaveAt(observe=False), monitor=False)
        return np.log(pde.coefficients(tr.y_final)[g.index(3, 0)].real / eps) / t_final
    pde = AxisymmetricPDE(mf.scalar_heads([1.0, -0.7], 4, beta=2.5, normalization="sinkhorn"), d=4, lmax=20,
                          nu=0.05, sinkhorn_tol=1e-14)
    b0 = pde.uniform()
    b0[3] = eps
    from meanfield.core.integrate import integrate

    tr = integrate(pde.rhs, b0, (0.0, t_final), method="dopri5", step=StepControl(rtol=1e-11, atol=1e-20),
                   save=SaveAt(states=False))
    return np.log(tr.y_final[3] / eps) / t_final


case("eps Y_30 grows like exp(sigma_3^sinkhorn t) along a PDE run (S^2, beta = 6)", "6 Sinkhorn linear stability",
     lambda: _sinkhorn_growth_in_time("sphere"), lambda: _sinkhorn_rate(3, (1.0,), 6.0, 0.0, 3), rtol=1e-6,
     atol=1e-12, why="products of a degree-3 mode have even degrees: corrections to it are cubic, relative "
                     "eps^2 e^{2 sigma T} ~ 1e-11; scaling tolerance 1e-14 on an eps = 1e-6 signal: 1e-8")
case("degree-3 mode grows like exp(sigma_3^sinkhorn t), axisymmetric S^3, two heads, nu = 0.05",
     "6 Sinkhorn linear stability", lambda: _sinkhorn_growth_in_time("axisymmetric"),
     lambda: _sinkhorn_rate(3, (1.0, -0.7), 2.5, 0.05, 4), rtol=1e-6, atol=1e-9,
     why="products of a degree-3 mode have even degrees: corrections to it are cubic, relative eps^2 ~ 1e-12; "
         "scaling tolerance 1e-14 on an eps = 1e-6 signal: 1e-8; integrator ~1e-10")


# ============================================= one pre-LN layer at long context (arXiv 2510.05554)
def _layer_particles(rho, beta, n, alpha):
    """Mean off-diagonal cosine after one layer of the library: the attention field alone (``alpha = 0``)
    or the pre-LN step of ``dt = 1/alpha`` from unit tokens (``z <- z + dt u(z/|z|)``)."""
    from meanfield.models.batched import BatchedSystem
    from meanfield.models.step_rules import step

    X = equiangular(n, n, rho, seed=3)[None]
    system = BatchedSystem(mf.scalar_heads([1.0], n, beta, normalization="softmax"))
    Z = system.field(X) if alpha == 0 else step(system, X, 1.0 / alpha, rule="pre_ln")
    Y = Z[0] / np.linalg.norm(Z[0], axis=1, keepdims=True)
    G = Y @ Y.T
    return G[~np.eye(n, dtype=bool)]


for _rho, _beta, _n, _alpha in [(0.3, 2.0, 8, 0.0), (0.3, 2.0, 8, 1.0), (0.6, 5.0, 24, 0.5), (0.0, 1.0, 5, 2.0)]:
    case(f"one pre-LN layer on an equiangular start: rho' (rho={_rho}, beta={_beta}, n={_n}, alpha={_alpha})",
         "long context (arXiv 2510.05554)", lambda r=_rho, b=_beta, n=_n, a=_alpha: _layer_particles(r, b, n, a),
         lambda r=_rho, b=_beta, n=_n, a=_alpha: T.equiangular_layer(r, b, n, a), atol=1e-13,
         why="tokens exact to ~1e-15 (symmetric square root of the Gram matrix); n-term sums and one normalization")

for _rho in (0.1, 0.5, 0.9):
    case(f"critical limit of the attention output: 4 rho / (1 + 3 rho) (rho={_rho})", "long context (arXiv 2510.05554)",
         lambda r=_rho: T.critical_scaling_limit(r, 1.0 / (1.0 - r)), 4 * _rho / (1 + 3 * _rho), rtol=1e-14,
         why="the same rational function evaluated two ways: a few ulps")
    for _g, _lim in [(0.5, 1.0), (2.0, _rho)]:
        case(f"beta = gamma log n at n = 1e12: rho' -> {_lim:g} (gamma (1-rho) = {_g}, rho={_rho})",
             "long context (arXiv 2510.05554)",
             lambda r=_rho, g=_g: T.equiangular_layer(r, g / (1.0 - r) * np.log(1e12), 10**12),
             lambda r=_rho, g=_g: T.critical_scaling_limit(r, g / (1.0 - r)), atol=2e-6,
             why="the distance to the limit is O(n^{-|1 - gamma(1-rho)|}) up to factors 1/rho: 1e-6 at n = 1e12")

for _g, _lim in [(0.2, 1.0), (0.8, 0.0)]:
    case(f"orthogonal tokens, no residual, beta = gamma log n at n = 1e12: rho' -> {_lim:g} (gamma = {_g})",
         "long context (arXiv 2510.05554)",
         lambda g=_g: T.equiangular_layer(0.0, g * np.log(1e12), 10**12),
         lambda g=_g: T.critical_scaling_limit(0.0, g), atol=1e-6,
         why="rho = 0, alpha = 0: the limit's 0/0 case; the distance is O(n^(-|2 gamma - 1|)) = 6e-8 at n = 1e12, "
             "gamma = 0.2, 0.8 (exponent 0.6)")
case("orthogonal tokens, no residual, gamma = 1/2: rho' -> 1/2", "long context (arXiv 2510.05554)",
     lambda: T.equiangular_layer(0.0, 0.5 * np.log(1e12), 10**12), lambda: T.critical_scaling_limit(0.0, 0.5),
     atol=1e-5, why="c^2 and K both ~ 1/n: the distance is O(n^(-1/2)) = 1e-6 at n = 1e12")
