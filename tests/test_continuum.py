"""Continuum PDE on S^2: growth rates, conservation, identities, symmetry, consistency with particles."""

import warnings

import numpy as np
import pytest

from meanfield import field_diagnostics as fd
from meanfield import theory
from meanfield.models.continuum import ContinuumPDE, KernelResolutionWarning, funk_hecke_multipliers
from meanfield.core.densities import perturbed_uniform, uniform_density, vmf_density, vmf_mixture_density
from meanfield.core.heads import Head, scalar_heads
from meanfield.core.initial import random_rotation
from meanfield.models.particles import ParticleSystem
from meanfield.workflow.simulate import solve_continuum


def smooth_density(grid, seed=0, amp=0.004, lmax_pert=5):
    """Uniform plus a random real perturbation of degrees 1..lmax_pert (positive for small amp)."""
    rng = np.random.default_rng(seed)
    rho_lm = uniform_density(grid).copy()
    sel = (grid.l_index >= 1) & (grid.l_index <= lmax_pert)
    rho_lm[sel] += amp * (rng.standard_normal(sel.sum()) + 1j * rng.standard_normal(sel.sum()))
    rho_lm[grid.m_index == 0] = rho_lm[grid.m_index == 0].real
    return rho_lm


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
@pytest.mark.parametrize("nu", [0.0, 0.3])
@pytest.mark.parametrize("lambdas, beta", [([1.0], 6.0), ([1.0, 0.5, -0.7], 2.5)])
def test_linear_growth_rates(normalization, nu, lambdas, beta):
    """d/d eps of the tendency at uniform + eps Y_lm equals sigma_l (MODEL.md section 3)."""
    pde = ContinuumPDE(scalar_heads(lambdas, 3, beta=beta, normalization=normalization), lmax=24, nu=nu)
    g = pde.grid
    rho0 = uniform_density(g)
    eps = 1e-4
    for ell in range(1, 9):
        for m in (0, ell):
            i = g.index(ell, m)
            drho = np.zeros(g.nalm, complex)
            drho[i] = 1.0
            # symmetric difference removes the O(eps^2) nonlinear term: error O(eps^2) ~ 1e-8
            # relative, round-off ~ 1e-16 / eps = 1e-12
            sigma = (pde.tendency(rho0 + eps * drho)[i] - pde.tendency(rho0 - eps * drho)[i]).real / (2 * eps)
            exact = theory.growth_rate(ell, lambdas, beta, normalization, nu)
            assert sigma == pytest.approx(exact, rel=1e-6, abs=1e-9), (ell, m)


def test_growth_rate_in_time():
    """A tiny l = 3 perturbation grows like exp(sigma_3 t) along an actual run."""
    pde = ContinuumPDE(scalar_heads([1.0], 3, beta=6.0), lmax=20)
    g = pde.grid
    eps = 1e-9
    rho0 = perturbed_uniform(g, {(3, 0): eps})
    T = 0.2
    tr = solve_continuum(pde, rho0, T, method="dopri5", rtol=1e-11, atol=1e-20, observe=False, monitor=False)
    measured = np.log(pde.coefficients(tr.y_final)[g.index(3, 0)].real / eps) / T
    # nonlinear corrections ~ eps * e^{sigma T} ~ 1e-7 relative, integrator error ~ 1e-10
    assert measured == pytest.approx(theory.growth_rate(3, [1.0], 6.0), rel=1e-6)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_velocity_equals_particle_velocity_on_nodes(normalization):
    """The same physics, two codes: spectral PDE velocity = particle velocity with tokens at the
    quadrature nodes and weights rho * w."""
    heads = scalar_heads([1.2, -0.6], 3, beta=2.0, normalization=normalization)
    pde = ContinuumPDE(heads, lmax=24)
    g = pde.grid
    rho_lm = smooth_density(g)
    rho = g.synthesis(rho_lm)
    W = (rho * g.weights).reshape(-1)
    assert W.min() > 0
    particles = ParticleSystem(heads)
    v_particles = particles.velocity(g.nodes.reshape(-1, 3), W / W.sum())
    v_pde = pde.velocity(rho_lm).reshape(-1, 3)
    # GL quadrature on the dealiased grid is exact to degree 3 lmax + 1; the integrand's neglected
    # Funk-Hecke tail beyond that is i_l(2.4) at l ~ 70: below round-off. Round-off ~ 1e-14.
    np.testing.assert_allclose(v_pde, v_particles, atol=1e-12 * np.abs(v_particles).max())
    quad = ContinuumPDE(heads, lmax=24, method="quadrature")
    np.testing.assert_allclose(quad.velocity(rho_lm).reshape(-1, 3), v_pde, atol=1e-12 * np.abs(v_pde).max())
    # energies: Parseval (spectral) against the double quadrature sum
    np.testing.assert_allclose(quad.energies(rho_lm), pde.energies(rho_lm), rtol=1e-12)


def test_general_heads_run_conserves_mass(rng):
    """Non-zonal, non-symmetric heads through quadrature: mass exact, velocity tangent."""
    heads = tuple(Head(0.5 * rng.standard_normal((3, 3)), 0.5 * rng.standard_normal((3, 3)), 1.5, "exp", nrm)
                  for nrm in ("mean", "softmax"))
    pde = ContinuumPDE(heads, lmax=12)
    assert not pde.zonal
    rho_lm = smooth_density(pde.grid)
    V = pde.velocity(rho_lm)
    assert np.abs(np.sum(V * pde.grid.nodes, axis=-1)).max() < 1e-14   # tangency: round-off
    tr = solve_continuum(pde, rho_lm, 0.5, method="rk4", dt=0.05, monitor=False)
    # the degree-0 coefficient of a divergence is exactly 0: mass changes by round-off only
    assert np.abs(tr.observables["mass"] - 1).max() < 1e-13


def test_energy_identity_semidiscrete():
    """dE/dt = <dE/drho, d rho/dt> equals int |X|^2 rho to round-off (mean zonal heads, nu = 0)."""
    pde = ContinuumPDE(scalar_heads([1.0, 0.4], 3, beta=3.0), lmax=20)
    g = pde.grid
    rho_lm = vmf_mixture_density(g, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    # E = 1/2 <rho, A rho> with A symmetric: dE = <A rho, d rho> = sum_h <N_h, d rho>
    N_total = sum(pde.fields(rho_lm)["N_lm"])
    dEdt = g.inner(N_total, pde.tendency(rho_lm))
    # exact quadratures on the dealiased grid: only round-off, relative 1e-12
    assert dEdt == pytest.approx(fd.dissipation(pde, rho_lm), rel=1e-12)


def test_energy_monotone_along_run():
    pde = ContinuumPDE(scalar_heads([1.0, 0.5], 3, beta=2.0), lmax=24)
    rho0 = vmf_mixture_density(pde.grid, [[0, 0, 1.0], [0, 1.0, 0]], [4.0, 4.0], floor=0.2)
    t = np.linspace(0, 0.2, 41)   # resolved until t ~ 0.25 at lmax 24 (the monitor would stop it)
    tr = solve_continuum(pde, rho0, 0.2, t_eval=t, rtol=1e-10, atol=1e-14)
    assert tr.status == 0
    E, D = tr.observables["energy"], tr.observables["dissipation"]
    assert np.all(np.diff(E) > 0)
    # centered differences of E(t) on a grid of 0.005: O(dt^2 E''' / 6) ~ 1e-5 relative, well
    # above the integrator's 1e-10
    dEdt = (E[2:] - E[:-2]) / (t[2:] - t[:-2])
    np.testing.assert_allclose(dEdt, D[1:-1], rtol=1e-4)


def test_free_energy_identity_with_noise():
    """d/dt (E - nu int rho log rho) = int |X - nu grad log rho|^2 rho (semi-discrete, nu > 0)."""
    pde = ContinuumPDE(scalar_heads([1.0], 3, beta=3.0), lmax=32, nu=0.2)
    g = pde.grid
    rho_lm = vmf_mixture_density(g, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    drho = g.synthesis(pde.tendency(rho_lm))
    rho = g.synthesis(rho_lm)
    N_total = sum(pde.fields(rho_lm)["N_lm"])
    dF = g.inner(N_total, pde.tendency(rho_lm)) - pde.nu * g.integrate((np.log(rho) + 1) * drho)
    # log rho is not band-limited: quadrature of its products is exact only to the spectral
    # accuracy of log rho at lmax = 32 (measured ~1e-12); 1e-9 keeps a margin
    assert dF == pytest.approx(fd.free_energy_dissipation(pde, rho_lm), rel=1e-9)


def test_axisymmetry_preserved():
    pde = ContinuumPDE(scalar_heads([1.0, -0.3], 3, beta=2.0, normalization="softmax"), lmax=20)
    g = pde.grid
    rho0 = vmf_mixture_density(g, [[0, 0, 1.0], [0, 0, -1.0]], [3.0, 6.0], weights=[0.3, 0.7], floor=0.1)
    assert np.abs(rho0[g.m_index != 0]).max() < 1e-15
    tr = solve_continuum(pde, rho0, 0.5, monitor=False, observe=False)
    # zonal kernels commute with rotations about z: m != 0 modes are never excited. The only source
    # is round-off of the transforms (ducc0's phi FFTs), ~1e-17 absolute here
    assert np.abs(pde.coefficients(tr.y_final)[g.m_index != 0]).max() < 1e-14


def test_rotation_equivariance():
    """Rotating the initial density rotates the solution (fixed steps: same step sequence)."""
    pde = ContinuumPDE(scalar_heads([1.0, 0.5], 3, beta=2.0), lmax=20)
    g = pde.grid
    mu1 = np.array([0.0, 0.0, 1.0])
    mu2 = np.array([1.0, 1.0, 1.0]) / np.sqrt(3)
    Q = random_rotation(3, seed=5)
    start = lambda R: vmf_mixture_density(g, [R @ mu1, R @ mu2], [4.0, 3.0], floor=0.2)  # noqa: E731
    runs = [solve_continuum(pde, start(R), 0.3, method="rk4", dt=0.01, observe=False, monitor=False)
            for R in (np.eye(3), Q)]
    pts = g.nodes.reshape(-1, 3)
    a = g.evaluate(pde.coefficients(runs[0].y_final), pts)
    b = g.evaluate(pde.coefficients(runs[1].y_final), pts @ Q.T)
    # degree truncation commutes with rotations; the two runs differ by round-off of the
    # transforms and of evaluate (epsilon 1e-13)
    np.testing.assert_allclose(b, a, atol=1e-10 * np.abs(a).max())


def test_spectral_convergence_in_lmax():
    """Self-convergence at fixed time: the error decays exponentially in lmax (measured slope)."""
    heads = scalar_heads([1.0, 0.5], 3, beta=2.0)
    T = 0.3
    ref_pde = ContinuumPDE(heads, lmax=48)
    pts = ref_pde.grid.nodes.reshape(-1, 3)[::7]

    def run(lmax):
        pde = ContinuumPDE(heads, lmax=lmax, kernel_tol=1.0)
        rho0 = vmf_mixture_density(pde.grid, [[0, 0, 1.0], [1.0, 0, 0]], [6.0, 4.0], floor=0.2)
        tr = solve_continuum(pde, rho0, T, rtol=1e-12, atol=1e-15, observe=False, monitor=False)
        return pde.grid.evaluate(pde.coefficients(tr.y_final), pts)

    ref = run(48)
    lmaxes = np.array([8, 12, 16, 20, 24])
    err = np.array([np.abs(run(L) - ref).max() for L in lmaxes])
    # spectral (super-algebraic) convergence: the local algebraic order -dlog(err)/dlog(lmax)
    # keeps growing (measured 2.7, 4.2, 5.7, 7.1); an algebraic method would have a constant one.
    # The exponential rate, the slope of log(err) vs lmax, is measured at -0.3 per degree.
    orders = -np.diff(np.log(err)) / np.diff(np.log(lmaxes))
    assert np.all(np.diff(orders) > 0.5) and orders[-1] > 6
    assert np.polyfit(lmaxes, np.log(err), 1)[0] < -0.25


def test_temporal_order_rk4():
    pde = ContinuumPDE(scalar_heads([1.0, 0.5], 3, beta=2.0), lmax=16)
    rho0 = vmf_density(pde.grid, [0, 0, 1.0], 3.0)
    T = 0.4
    final = lambda dt: solve_continuum(pde, rho0, T, method="rk4", dt=dt, observe=False,  # noqa: E731
                                       monitor=False).y_final
    ref = solve_continuum(pde, rho0, T, method="dopri5", rtol=1e-13, atol=1e-16, observe=False,
                          monitor=False).y_final
    dts = np.array([0.04, 0.02, 0.01, 0.005])
    err = [np.abs(final(dt) - ref).max() for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(err), 1)[0]
    assert abs(slope - 4) < 0.3   # declared order 4; 0.3 allows the pre-asymptotic first point


def test_vmf_mixture_two_heads_lmax63_stops_cleanly():
    """A collapsing vMF mixture at lmax 63 either finishes or stops via the resolution monitor."""
    pde = ContinuumPDE(scalar_heads([1.0, 0.5], 3, beta=4.0), lmax=63)
    rho0 = vmf_mixture_density(pde.grid, [[0, 0, 1.0], [1.0, 0, 0]], [5.0, 5.0], floor=0.2)
    tr = solve_continuum(pde, rho0, 5.0)
    assert tr.status == 1 and "no longer resolved" in tr.message
    assert 0 < tr.t_final < 5.0 and tr.t[-1] == tr.t_final
    E = tr.observables["energy"]
    assert np.all(np.diff(E) > 0) and np.all(np.isfinite(E))
    assert tr.observables["spectral_tail"][-1] > 1e-3   # the criterion that stopped it


def test_kernel_resolution_warning_and_errors():
    with pytest.warns(KernelResolutionWarning, match="truncates the exp kernel"):
        ContinuumPDE(scalar_heads([1.0], 3, beta=20.0), lmax=24)
    with pytest.raises(ValueError, match="far too small"):
        ContinuumPDE(scalar_heads([1.0], 3, beta=60.0), lmax=8)
    with pytest.raises(ValueError, match="d = 3"):
        ContinuumPDE(scalar_heads([1.0], 4), lmax=8)
    with pytest.raises(ValueError, match="lmax must be an integer >= 2; received 1"):
        ContinuumPDE(scalar_heads([1.0], 3), lmax=1)
    with pytest.raises(ValueError, match="nu must be"):
        ContinuumPDE(scalar_heads([1.0], 3), lmax=8, nu=-1.0)
    with pytest.raises(ValueError, match="method must be one of"):
        ContinuumPDE(scalar_heads([1.0], 3), lmax=8, method="fast")
    pde = ContinuumPDE(scalar_heads([1.0], 3), lmax=8, kernel_tol=1e-6)
    bad = uniform_density(pde.grid) * 2
    with pytest.raises(ValueError, match="rho_lm0"):
        solve_continuum(pde, bad, 1.0)
    tr = solve_continuum(pde, bad, 0.1, normalize=True)     # explicit request: rescaled
    assert tr.observables["mass"][0] == pytest.approx(1.0, abs=1e-14)
    nan = uniform_density(pde.grid).copy()
    nan[3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        solve_continuum(pde, nan, 1.0)


def test_relu_multipliers_match_theory():
    """Funk-Hecke multipliers of relu(lambda t)^2 / 2 against theory.funk_hecke_relu(power=2)."""
    ours = funk_hecke_multipliers(12, g=lambda t: 0.5 * np.maximum(1.3 * t, 0) ** 2)
    ref = 0.5 * np.array([theory.funk_hecke_relu(ell, 1.3, power=2) for ell in range(13)])  # theory: relu^2
    # both are Gauss-Legendre quadratures exact for these piecewise polynomials: round-off
    np.testing.assert_allclose(ours, ref, atol=1e-14 * np.abs(ref).max())


def test_attention_entropy_spectral_vs_quadrature():
    heads = scalar_heads([1.0, 0.5], 3, beta=2.0)
    spec, quad = ContinuumPDE(heads, lmax=20), ContinuumPDE(heads, lmax=20, method="quadrature")
    rho_lm = vmf_mixture_density(spec.grid, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    Hs, Hq = fd.attention_entropy(spec, rho_lm), fd.attention_entropy(quad, rho_lm)
    # log of band-limited Z on a grid exact to degree 3 lmax: spectral accuracy, ~1e-12
    np.testing.assert_allclose(Hs, Hq, rtol=1e-10)
    assert np.all(Hs < 0)
    # uniform density: H_h = log Z - beta Z_beta / Z with Z = i_0(a) ... equals theory via i_0, i_1
    a = np.array([2.0, 1.0])
    from scipy.special import spherical_in
    exact = np.log(spherical_in(0, a)) - a * spherical_in(1, a) / spherical_in(0, a)
    np.testing.assert_allclose(fd.attention_entropy(spec, uniform_density(spec.grid)), exact, rtol=1e-12)


def general_heads(seed=7):
    rng = np.random.default_rng(seed)
    return tuple(Head(0.6 * rng.standard_normal((3, 3)), 0.6 * rng.standard_normal((3, 3)), 1.5, "exp", nrm)
                 for nrm in ("mean", "softmax"))


def test_general_heads_velocity_equals_particles_on_nodes():
    """Non-zonal, non-symmetric heads: the quadrature path is the particle velocity with the nodes
    as tokens and rho * w as weights (direct sums)."""
    heads = general_heads()
    pde = ContinuumPDE(heads, lmax=10)
    g = pde.grid
    rho_lm = smooth_density(g)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    v_particles = ParticleSystem(heads, summation="direct").velocity(g.nodes.reshape(-1, 3), W / W.sum())
    # the same sums in another order: round-off relative to the largest velocity
    np.testing.assert_allclose(pde.velocity(rho_lm).reshape(-1, 3), v_particles,
                               atol=1e-12 * np.abs(v_particles).max())


def test_general_heads_quadrature_converges_spectrally():
    """The quadrature of the general-head interaction is exact to quadrature accuracy: the tendency's
    low-degree coefficients converge super-algebraically as the grid (lmax) is refined."""
    heads = general_heads()
    lmaxes = [5, 6, 7, 8]
    ref_pde = ContinuumPDE(heads, lmax=24)
    rho_ref = smooth_density(ref_pde.grid, lmax_pert=3)
    low = ref_pde.grid.l_index <= 5
    ref = ref_pde.tendency(rho_ref)[low]
    err = []
    for L in lmaxes:
        pde = ContinuumPDE(heads, lmax=L)
        rho = np.zeros(pde.grid.nalm, complex)
        for i in np.flatnonzero(ref_pde.grid.l_index <= 3):       # same density, degree <= 3
            ell, m = ref_pde.grid.l_index[i], ref_pde.grid.m_index[i]
            rho[pde.grid.index(ell, m)] = rho_ref[i]
        tend = pde.tendency(rho)
        sel = [pde.grid.index(ref_pde.grid.l_index[i], ref_pde.grid.m_index[i]) for i in np.flatnonzero(low)]
        err.append(np.abs(tend[sel] - ref).max())
    err = np.array(err) / np.abs(ref).max()
    # spectral accuracy: measured relative errors 1e-5, 1e-7, 6e-9, 6e-10 for lmax 5..8, i.e. a
    # factor >= 9 per degree (exponential; log-error slope <= -2 per degree, an algebraic method
    # of order p would gain only (1 + 1/L)^p ~ 2-3 here); round-off is reached near lmax 12
    slope = np.polyfit(lmaxes, np.log(err), 1)[0]
    assert np.all(np.diff(err) < 0) and slope < -2 and err[-1] < 1e-8, (err, slope)


def test_softmax_normalizer_guard_and_input_checks():
    """Truncated ReLU normalizers can dip below 0: u = 0 there (as for particles) and the observer
    reports the smallest normalizer; constructor arguments are checked by name."""
    heads = scalar_heads([1.0], 3, kernel="relu", normalization="softmax")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelResolutionWarning)
        pde = ContinuumPDE(heads, lmax=16)
    rho = vmf_density(pde.grid, [0, 0, 1.0], 60.0)
    f = pde.fields(rho)
    assert f["D"].min() < 0                                  # the truncated Z goes negative somewhere
    speed = np.sqrt((f["X"] ** 2).sum(axis=0))
    assert np.all(speed[f["D"][0] <= 0] == 0) and np.isfinite(speed).all()
    assert fd.observer(pde)(0.0, pde.state(rho))["min_normalizer"] == pytest.approx(f["D"].min(), rel=1e-12)
    for kw, match in [(dict(nu=True), "nu must be"), (dict(nu="0.1"), "nu must be"),
                      (dict(kernel_tol=float("nan")), "kernel_tol must be"), (dict(chunk_bytes=-5), "chunk_bytes")]:
        with pytest.raises(ValueError, match=match):
            ContinuumPDE(scalar_heads([1.0], 3), lmax=8, **kw)


def test_fixed_step_default_cfl_with_adaptive_false():
    pde = ContinuumPDE(scalar_heads([1.0], 3), lmax=8, kernel_tol=1e-6)
    tr = solve_continuum(pde, uniform_density(pde.grid), 0.1, method="dopri5", adaptive=False, observe=False)
    assert tr.status == 0 and tr.n_steps >= 1          # dt came from the CFL bound, not an error
