"""Sinkhorn (doubly stochastic) heads in the continuum models (MODEL.md section 6): the scaling solved on the
grid, quadrature consistency with a dense kernel matrix, the energy identity dE_S/dt = int |X|^2 rho, mass,
errors, reproducibility, runs, observers and the growth-rate command.  The growth rates themselves are cases of
tests/closed_forms.py (section "6 Sinkhorn linear stability")."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis import field_diagnostics as fd
from meanfield.analysis import stability
from meanfield.analysis.axisymmetric import reduced_observer as axi_observer
from meanfield.core.densities import uniform_density, vmf_mixture_density
from meanfield.core.integrate import integrate
from meanfield.core.kernels import NORMALIZATIONS
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.core.sinkhorn import SinkhornError, solve_scaling
from meanfield.models.axisymmetric import AxisymmetricPDE
from meanfield.models.circle import CirclePDE
from meanfield.workflow.cli import main

LAMBDAS, BETA = [1.0, -0.6], 3.0          # two heads of opposite signs


def _sphere(lmax=16, nu=0.0, **kw):
    kw.setdefault("sinkhorn_tol", 1e-14)
    return mf.ContinuumPDE(mf.scalar_heads(LAMBDAS, 3, beta=BETA, normalization="sinkhorn"), lmax=lmax, nu=nu, **kw)


def _rho(pde):
    return vmf_mixture_density(pde.grid, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)


def _circle(nu=0.0):
    pde = CirclePDE(mf.scalar_heads(LAMBDAS, 2, beta=BETA, normalization="sinkhorn"), kmax=32, nu=nu,
                    sinkhorn_tol=1e-14)
    return pde, pde.project(lambda t: 1 + 0.5 * np.cos(t) + 0.3 * np.sin(2 * t))


def _axisymmetric(d, nu=0.0):
    pde = AxisymmetricPDE(mf.scalar_heads(LAMBDAS, d, beta=BETA, normalization="sinkhorn"), d=d, lmax=32, nu=nu,
                          sinkhorn_tol=1e-14)
    return pde, pde.project_profile(lambda t: 1 + 0.5 * t + 0.3 * (t * t - 1 / d))


# ------------------------------------------------------------------------ the scaling and quadrature consistency
def test_velocity_equals_dense_quadrature_sinkhorn():
    """MODEL.md 5.3: at the grid nodes with weights w_g rho_g, the dense kernel matrix, its scaling by
    solve_scaling and v_g = P_x a_g sum_g' K a_g' w_g' rho_g' V x_g' give the PDE's velocity."""
    pde = _sphere(lmax=16)
    g = pde.grid
    rho_lm = _rho(pde)
    x = g.nodes.reshape(-1, 3)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    assert W.min() > 0
    v = np.zeros_like(x)
    for lam, res_pde in zip(LAMBDAS, pde.scalings(rho_lm)):
        K = np.exp(BETA * lam * (x @ x.T))
        res = solve_scaling(lambda f: K @ (W * f), x.shape[0], tol=1e-14)
        a_pde = res_pde.a.reshape(-1)
        # the grid's scaling has the dense marginal: a K[a rho] = 1 to the requested tolerance, up to the
        # Funk-Hecke tail beyond lmax = 16 (c_17 / c_0 ~ 1e-16 at beta |lambda| = 3) and round-off of sums
        # (measured 9e-15)
        assert np.abs(a_pde * (K @ (W * a_pde)) - 1).max() <= 1e-13
        assert res_pde.error <= 1e-14
        assert np.abs(a_pde - res.a).max() <= 1e-13 * np.abs(res.a).max()     # the same fixed point
        u = res.a[:, None] * (K @ ((W * res.a)[:, None] * (lam * x)))
        v += u - np.sum(u * x, axis=1, keepdims=True) * x                      # P_x
    v_pde = pde.velocity(rho_lm).reshape(-1, 3)
    # both solved to 1e-14; the same exact GL quadrature in two orders: round-off relative to max|v|
    # (measured 2.7e-15)
    assert np.abs(v_pde - v).max() <= 1e-12 * np.abs(v).max()


def test_velocity_is_minus_grad_log_a_over_beta():
    """Zonal heads: X = -(1/beta) grad_S log a (MODEL.md section 6), one head at a time."""
    for lam in LAMBDAS:
        pde = mf.ContinuumPDE(mf.scalar_heads([lam], 3, beta=BETA, normalization="sinkhorn"), lmax=24,
                              sinkhorn_tol=1e-14)
        g = pde.grid
        rho_lm = _rho(pde)
        a = pde.scalings(rho_lm)[0].a
        X = pde.fields(rho_lm)["X"]
        G = -g.gradient(g.analysis(np.log(a))) / BETA
        # log a is smooth but not band-limited: its degree-24 truncation (measured 1.2e-13 relative)
        assert np.abs(X - G).max() <= 1e-11 * np.abs(X).max()


def test_non_convergence_names_the_head_and_the_error():
    pde = _sphere(sinkhorn_maxiter=2)
    with pytest.raises(SinkhornError, match=r"heads\[0\]: the Sinkhorn scaling did not converge in 2 iterations: "
                                            r"marginal error [0-9.e-]+ > tol = 1e-14"):
        pde.tendency(_rho(pde))
    circle, c = _circle()
    # the positive head contracts by 1/2 per iteration and converges in 50; the negative one (an eigenvalue
    # -0.55 of P at this density: contraction ~0.78) does not
    with pytest.raises(SinkhornError, match=r"heads\[1\].*did not converge in 50 iterations"):
        CirclePDE(circle.heads, kmax=32, sinkhorn_tol=1e-14, sinkhorn_maxiter=50).rhs(0.0, circle.state(c))


def test_quadrature_path_refuses_sinkhorn_heads():
    heads = mf.scalar_heads(LAMBDAS, 3, beta=BETA, normalization="sinkhorn")
    with pytest.raises(ValueError, match=r"heads \[0, 1\] have normalization 'sinkhorn', which the quadrature path"):
        mf.ContinuumPDE(heads, lmax=8, summation="quadrature")
    with pytest.raises(ValueError, match="sinkhorn_tol must be"):
        mf.ContinuumPDE(heads, lmax=8, sinkhorn_tol=0.0)


# ------------------------------------------------------------------------ energy identity, mass
def test_energy_identity_sphere():
    """dE_S/dt = int |X|^2 rho (nu = 0) along the rhs, by a symmetric finite difference."""
    pde = _sphere(lmax=24)
    rho_lm = _rho(pde)
    y = pde.state(rho_lm)
    F, h = pde.rhs(0.0, y), 1e-5
    dE = (pde.energies(pde.coefficients(y + h * F)).sum() - pde.energies(pde.coefficients(y - h * F)).sum()) / (2 * h)
    D = fd.field_dissipation(pde, rho_lm)
    # O(h^2) ~ 1e-10 relative; round-off eps |E| / h ~ 1e-11 absolute; scalings at 1e-14: 1e-9 absolute
    # (measured 2e-10 relative)
    assert dE == pytest.approx(D, rel=1e-8, abs=1e-11)


@pytest.mark.parametrize("d", [2, 3, 4, 8])
def test_energy_identity_circle_and_axisymmetric(d):
    if d == 2:
        pde, c = _circle()
        fl = pde.fields(c)
        D = float((fl["f"] * fl["X"] ** 2).mean())
    else:
        pde, c = _axisymmetric(d)
        fl = pde.fields(c)
        D = float((pde.weights * fl["f"] * fl["u"] ** 2 * (1 - pde.nodes**2)).sum())
    y = pde.state(c)
    F, h = pde.rhs(0.0, y), 1e-5
    dE = (pde.energies(pde.coefficients(y + h * F)).sum() - pde.energies(pde.coefficients(y - h * F)).sum()) / (2 * h)
    # as on S^2; d = 8 has a small D ~ 3e-5, where the absolute round-off dominates (measured 4e-13)
    assert dE == pytest.approx(D, rel=1e-8, abs=1e-11)


def test_mass_and_energy_along_a_run():
    pde = _sphere(lmax=16)
    rho0 = _rho(pde)
    tr = mf.solve_continuum(pde, rho0, 0.3, method="rk4", step=StepControl(dt=0.01), monitor=False)
    assert abs(pde.tendency(rho0)[0]) <= 1e-15          # degree 0 of a divergence: exactly 0 (measured 0)
    assert np.abs(tr.observables["mass"] - 1).max() <= 1e-13    # 30 steps of round-off of |rho_00| ~ 0.3
    E = tr.observables["energy"]
    assert np.all(np.diff(E) > 0)                       # dE_S/dt = int |X|^2 rho > 0 away from equilibrium
    assert np.isfinite(tr.observables["min_normalizer"]).all() and tr.observables["min_normalizer"].min() > 0


def test_split_scheme_with_noise_matches_rk4():
    """The diffusion as the linear part of a split scheme (ETDRK4) against plain RK4 at a small step."""
    pde = _sphere(lmax=16, nu=0.2)
    rho0 = _rho(pde)
    a = mf.solve_continuum(pde, rho0, 0.2, method="etdrk4", step=StepControl(dt=0.01), save=SaveAt(observe=False),
                           monitor=False).y_final
    b = mf.solve_continuum(pde, rho0, 0.2, method="rk4", step=StepControl(dt=0.002), save=SaveAt(observe=False),
                           monitor=False).y_final
    # both fourth order: the ETDRK4 error at dt = 0.01 ~ (0.01)^4 C ~ 1e-8 C (measured 7e-12 of max|y|)
    assert np.abs(a - b).max() <= 1e-9 * np.abs(b).max()
    assert pde.cfl_dt(rho0) > 0


# ------------------------------------------------------------------------ reproducibility, observers
def test_rhs_bit_identical_with_and_without_cache():
    """The last-state cache never changes a result: a fresh model and one that saw other states agree bit for bit."""
    pde = _sphere(lmax=16, sinkhorn_tol=1e-12)
    rho = _rho(pde)
    y = pde.state(rho)
    fresh = _sphere(lmax=16, sinkhorn_tol=1e-12).rhs(0.0, y)
    pde.rhs(0.0, pde.state(uniform_density(pde.grid)))
    pde.energies(rho)                                 # fills the cache at y
    assert np.array_equal(pde.rhs(0.0, y), fresh)
    assert np.array_equal(pde.rhs(0.0, y), fresh)


def test_observers_record_sinkhorn_runs():
    pde = _sphere(lmax=16)
    rec = fd.field_observer(pde)(0.0, pde.state(_rho(pde)))
    assert np.all(np.isfinite(rec["energy_head"])) and rec["min_normalizer"] > 0
    assert rec["dissipation"] > 0
    for d in (2, 4):
        model, c = _circle() if d == 2 else _axisymmetric(d)
        r = axi_observer(model)(0.0, model.state(c))
        # mass conserved (exact degree-0 coefficient); E_S finite per head
        assert r["mass"] == pytest.approx(1.0, abs=1e-14) and np.all(np.isfinite(r["energy_head"]))


def test_uniform_state_scaling_and_energy():
    """At rho_0 = 1/(4 pi): a_0 = i_0(beta lambda)^(-1/2) exactly, E_S = log i_0 / (2 beta) per head."""
    from scipy.special import spherical_in

    pde = _sphere(lmax=16)
    rho0 = uniform_density(pde.grid)
    i0 = spherical_in(0, BETA * np.array(LAMBDAS))
    for res, ref in zip(pde.scalings(rho0), i0):
        assert np.abs(res.a - ref ** -0.5).max() <= 1e-14 * ref ** -0.5     # start exact; round-off only
    assert pde.energies(rho0) == pytest.approx(np.log(i0) / (2 * BETA), rel=1e-13)


# ------------------------------------------------------------------------ theory table and command
def test_growth_terms_cover_the_registry():
    """Every normalization has its growth-rate term (the one table of stability.py)."""
    assert set(stability._TERMS) == set(NORMALIZATIONS)
    heads = mf.scalar_heads([1.0], 3, beta=2.0, normalization="sinkhorn") + \
        mf.scalar_heads([0.5], 3, beta=4.0, normalization="mean")
    ls = np.arange(1, 6)
    ref = stability.growth_rate(ls, [1.0], 2.0, "sinkhorn") + stability.growth_rate(ls, [0.5], 4.0, "mean")
    assert np.allclose(stability.growth_rate_heads(ls, heads), ref, rtol=1e-14, atol=0)   # the same terms summed
    # positive heads: the largest term is l = 1, nu_c = i_1 / (beta (i_0 + i_1))
    from scipy.special import spherical_in

    nu_c = spherical_in(1, 3.0) / (3.0 * (spherical_in(0, 3.0) + spherical_in(1, 3.0)))
    assert stability.critical_noise([1.0], 3.0, "sinkhorn") == pytest.approx(nu_c, rel=1e-14)
    # bracket - nu_c of two equal numbers ~0.13 computed apart: a few ulps, times l (l + 1) = 2
    assert stability.growth_rate(1, [1.0], 3.0, "sinkhorn", nu_c) == pytest.approx(0.0, abs=1e-14)


def test_cli_prints_sinkhorn_growth_rates(capsys):
    assert main(["theory", "growth-rates", "--normalization", "sinkhorn", "--beta", "2.5", "--lambdas", "1", "-0.7",
                 "--nu", "0.1", "--lmax", "3"]) == 0
    rates = [float(line.split("=")[1]) for line in capsys.readouterr().out.splitlines()]
    # printed with 10 significant digits
    assert rates == pytest.approx(stability.growth_rate([1, 2, 3], [1.0, -0.7], 2.5, "sinkhorn", 0.1), rel=1e-9)


def test_equal_row_sums_make_sinkhorn_softmax():
    """Equiangular tokens: every kernel row has the same sum Z, so a = Z^(-1/2) and P = K / Z: the Sinkhorn
    velocity is the softmax one (why the equiangular closed forms take Sinkhorn as softmax), and the reduced
    rate d gamma/dt = 2 <x_1, v_2> of the dense Sinkhorn velocity is theory's equiangular_rate."""
    from meanfield.analysis import theory
    from meanfield.core.initial import equiangular

    n, gamma, lambdas, beta = 6, 0.3, [1.0, -0.4], 1.5
    X = equiangular(n, n, gamma, seed=3)
    v_sk, v_sm = np.zeros_like(X), np.zeros_like(X)
    for lam in lambdas:
        K = np.exp(beta * lam * X @ X.T)
        res = solve_scaling(lambda f: K @ f / n, n, tol=1e-14)
        P = res.a[:, None] * K * res.a[None, :] / n
        v_sk += P @ (lam * X)
        v_sm += (K / K.sum(axis=1, keepdims=True)) @ (lam * X)
    P_x = lambda x, v: v - np.sum(v * x, axis=1, keepdims=True) * x          # noqa: E731
    v_sk, v_sm = P_x(X, v_sk), P_x(X, v_sm)
    assert np.abs(v_sk - v_sm).max() <= 1e-13 * np.abs(v_sm).max()        # solved to 1e-14; round-off
    rate = v_sk[0] @ X[1] + X[0] @ v_sk[1]
    assert rate == pytest.approx(theory.equiangular_rate(gamma, lambdas, beta, n, "exp", "sinkhorn"), rel=1e-12)


def test_attention_entropy_of_the_doubly_stochastic_attention():
    """H(x_g) = -sum_g' P_gg' W_g' log P_gg' with P = a K a of the dense scaling on the nodes (MODEL.md 5.3),
    against the spectral -log a - a (Q[a rho] + Z[a log a rho]); mean heads keep log Z - Q / Z."""
    pde = _sphere(lmax=16)
    g = pde.grid
    rho_lm = _rho(pde)
    x = g.nodes.reshape(-1, 3)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    H = pde.attention_entropies(rho_lm).reshape(len(LAMBDAS), -1)
    for h, lam in enumerate(LAMBDAS):
        K = np.exp(BETA * lam * (x @ x.T))
        a = solve_scaling(lambda f: K @ (W * f), x.shape[0], tol=1e-14).a
        P = a[:, None] * K * a[None, :]
        H_dense = -(P * np.log(P)) @ W
        assert np.all(H_dense <= 1e-12)                                       # -KL(p | rho) <= 0
        # exact GL quadrature of band-limited sums, scalings at 1e-14: round-off (measured 1.6e-14)
        assert np.abs(H[h] - H_dense).max() <= 1e-12 * np.abs(H_dense).max()
    rec = fd.field_attention_entropy(pde, rho_lm)
    assert rec == pytest.approx([g.integrate(g.synthesis(rho_lm) * Hh.reshape(g.shape)) for Hh in H], rel=1e-14)
    mean = mf.ContinuumPDE(mf.scalar_heads(LAMBDAS, 3, beta=BETA), lmax=16)
    Z = [g.synthesis(g.multiply_degree(rho_lm, m["normalizer"])) for m in mean.operator.multipliers]
    Q = [g.synthesis(g.multiply_degree(rho_lm, m["entropy"])) for m in mean.operator.multipliers]
    assert np.array_equal(mean.attention_entropies(rho_lm), np.log(Z) - np.array(Q) / Z)   # unchanged arithmetic


def test_pickled_model_starts_with_an_empty_cache():
    import pickle

    pde = _sphere(lmax=16)
    y = pde.state(_rho(pde))
    out = pde.rhs(0.0, y)
    copy = pickle.loads(pickle.dumps(pde))
    assert pde._scaling_cache._entry[0] is not None and copy._scaling_cache._entry == (None, {})   # nothing travels
    assert np.array_equal(copy.rhs(0.0, y), out)          # and the copy computes the same bits


def test_resume_from_checkpoint_is_bit_for_bit():
    """A run resumed from a checkpoint by a fresh model (no cached scalings) repeats the uninterrupted one exactly:
    the scaling's start and cache depend on the state alone."""
    pde = _sphere(lmax=12, nu=0.1, sinkhorn_tol=1e-12, kernel_tol=1e-8)
    y0 = pde.state(_rho(pde))
    times = np.linspace(0, 0.2, 5)
    kw = dict(method="dopri5", step=StepControl(rtol=1e-8, atol=1e-10),
              save=SaveAt(t_eval=times, observe=fd.field_observer(pde, entropy=True)))
    full = integrate(pde.rhs, y0, (0.0, 0.2), **kw)
    saved = []
    integrate(pde.rhs, y0, (0.0, 0.2), checkpointing=Checkpointing(save=saved.append, every=0.05), **kw)
    fresh = _sphere(lmax=12, nu=0.1, sinkhorn_tol=1e-12, kernel_tol=1e-8)
    kw["save"] = SaveAt(t_eval=times, observe=fd.field_observer(fresh, entropy=True))
    resumed = integrate(fresh.rhs, y0, (0.0, 0.2), checkpointing=Checkpointing(resume=saved[1]), **kw)
    # same step sequence, same arithmetic: identical floats (tolerance 0)
    np.testing.assert_array_equal(resumed.y, full.y)
    for key in ("energy", "relative_entropy", "dissipation"):
        np.testing.assert_array_equal(resumed.observables[key], full.observables[key])
    assert (resumed.nfev, resumed.n_steps) == (full.nfev, full.n_steps)


def test_velocity_equals_dense_quadrature_sigmoid_sinkhorn():
    """Any registered kernel: a sigmoid Sinkhorn head against the dense scaling on the nodes
    (u = a grad c[K](a rho), K the kernel's antiderivative)."""
    from meanfield.core.kernels import KERNELS

    heads = mf.scalar_heads([1.0], 3, beta=1.5, kernel="sigmoid", normalization="sinkhorn",
                            kernel_params={"bias": 0.5})
    pde = mf.ContinuumPDE(heads, lmax=16, sinkhorn_tol=1e-14)
    g = pde.grid
    rho_lm = _rho(pde)
    x = g.nodes.reshape(-1, 3)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    K = KERNELS["sigmoid"].value(heads[0], x @ x.T)
    a = solve_scaling(lambda f: K @ (W * f), x.shape[0], tol=1e-14).a
    u = a[:, None] * (K @ ((W * a)[:, None] * x))
    v = u - np.sum(u * x, axis=1, keepdims=True) * x
    # the sigmoid multipliers are quadratures accurate to ~1e-14 of the largest (kernels.py), the tail beyond
    # lmax = 16 decays like exp(-2 l) (poles at pi / beta from [-1, 1]): 1e-12 relative with margin (measured 1.8e-14)
    assert np.abs(pde.velocity(rho_lm).reshape(-1, 3) - v).max() <= 1e-12 * np.abs(v).max()
