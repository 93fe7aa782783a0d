"""Stationary states on the full sphere S^2 by Newton-Krylov (analysis/sphere_states.py), checked against the
axisymmetric solver (a different basis, quadrature and solver), the closed-form growth rates and rotations."""

import numpy as np
import pytest
from scipy import optimize
from scipy.spatial.transform import Rotation

import meanfield as mf
from meanfield.analysis import equilibria as eq
from meanfield.analysis import phase_transition as pt
from meanfield.analysis import sphere_states as ss
from meanfield.analysis.stability import growth_rate

BETA = 2 * 1.8161545254358837            # 2 beta_*^(3): a discontinuous transition


@pytest.fixture(scope="module")
def setting():
    ax = pt.phase_transition_model(3, BETA, lmax=48)
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, BETA), lmax=31)
    return ax, pde


def _rotated(ax, b, grid, axis):
    """The axisymmetric state ``b`` about ``axis``, as coefficients on ``grid`` (surface density, mass 1)."""
    t = np.clip(grid.nodes @ axis, -1, 1)
    return grid.analysis(ax.evaluate(b, t.ravel()).reshape(grid.shape) / (4 * np.pi))


def test_an_axisymmetric_state_about_any_axis_solves_the_sphere_equation(setting):
    # the 1-D state (Gegenbauer basis, Gauss-Jacobi nodes) turned to a generic axis and analysed on the S^2 grid:
    # the S^2 self-consistency residual is the two truncations' round-off, measured 8e-14
    ax, pde = setting
    s = eq.degree_one_state(ax, 1.5)
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    rho = _rotated(ax, s.b, pde.grid, axis)
    assert np.abs(rho - ss.gibbs_map(eq.at_noise(pde, s.nu), rho)).max() <= 1e-12 * np.abs(rho).max()


def test_newton_krylov_from_a_perturbed_cluster_removes_two_rotation_modes(setting):
    ax, pde = setting
    g = pde.grid
    s = eq.degree_one_state(ax, 1.5)
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    exact = _rotated(ax, s.b, g, axis)
    bump = g.analysis(0.02 * np.cos(3 * g.nodes[..., 0]) * np.sin(2 * g.nodes[..., 1]) / (4 * np.pi))
    bump[0] = 0.0
    st = ss.solve_sphere_state(eq.at_noise(pde, s.nu), exact + bump)
    assert st.success, st.message
    assert st.removed == 2                       # rotations moving the cluster's axis; the one about it is no mode
    # the target: at most 100 right-hand-side equivalents (Newton steps times Krylov iterations)
    assert st.krylov <= 100 and st.newton <= 6
    # the state is the cluster up to a rotation: the power spectrum is rotation invariant (residual 1e-10)
    np.testing.assert_allclose(g.power_spectrum(st.rho_lm), g.power_spectrum(exact), rtol=0, atol=1e-9)


def test_the_uniform_state_is_a_solution_with_no_rotation_mode(setting):
    _, pde = setting
    g = pde.grid
    uni = np.zeros(g.nalm, complex)
    uni[0] = 1 / np.sqrt(4 * np.pi)
    st = ss.solve_sphere_state(eq.at_noise(pde, 1.3), uni)
    assert st.success and st.newton == 0 and st.removed == 0


def test_one_stationary_state_type_on_both_geometries(setting):
    """Issue 32: the axisymmetric and the S^2 solvers return one type, StationaryState, told apart by its basis;
    a state of the other geometry is refused by name, and b / rho_lm read the coefficients of their own basis."""
    ax, pde = setting
    s = eq.degree_one_state(ax, 1.5)
    uni = np.zeros(pde.grid.nalm, complex)
    uni[0] = 1 / np.sqrt(4 * np.pi)
    st = ss.solve_sphere_state(eq.at_noise(pde, 1.3), uni)
    assert type(s) is type(st) is eq.StationaryState
    assert (s.basis, st.basis) == ("gegenbauer", "spherical_harmonics") and (s.krylov, s.removed) == (0, 0)
    assert s.b is s.coefficients and st.rho_lm is st.coefficients
    with pytest.raises(AttributeError, match="^b: .* are rho_lm"):
        st.b
    with pytest.raises(AttributeError, match="^rho_lm: .* are b "):
        s.rho_lm
    with pytest.raises(ValueError, match="basis 'spherical_harmonics'.*'gegenbauer'"):
        ss.sphere_resolution_error(pde, s)
    with pytest.raises(ValueError, match="basis 'gegenbauer'.*'spherical_harmonics'"):
        eq.linear_spectrum(ax, st)
    with pytest.raises(ValueError, match="basis"):
        eq.StationaryState(s.b, 1.0, 0, "", 0.0, 0, 0.0, basis="legendre")


def test_spectrum_at_uniform_is_sigma_l_and_at_a_cluster_has_two_neutral_rotation_modes(setting):
    # ARPACK on central differences of the model's tendency (exact to round-off for mean heads): 1e-8 relative.
    # At uniform every eigenvalue found is a sigma_l (ARPACK may return fewer copies of a degenerate one).
    ax, pde = setting
    g = pde.grid
    beta, nu = 6.0, 0.5
    pde6 = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta), lmax=31)
    uni = np.zeros(g.nalm, complex)
    uni[0] = 1 / np.sqrt(4 * np.pi)
    vals, rot = ss.sphere_spectrum(eq.at_noise(pde6, nu), uni, k=8)
    sigma = np.array([growth_rate(ell, [1.0], beta, "mean", nu) for ell in range(1, 32)])
    assert np.abs(vals.imag).max() <= 1e-8 * sigma.max()
    assert all(np.abs(sigma - v).min() <= 1e-8 * sigma.max() for v in vals.real)
    assert vals.real.max() == pytest.approx(sigma.max(), rel=1e-9)     # the most unstable degree (l = 3 here)
    # upper-branch cluster: two zero eigenvalues whose eigenvectors are rotations; every other mode decays,
    # in all azimuthal orders (the axisymmetric solver sees only m = 0: its leading eigenvalue must appear)
    s = eq.degree_one_state(ax, 1.5)
    st = ss.solve_sphere_state(eq.at_noise(pde, s.nu), ax.to_sphere_coefficients(s.b, g))
    vals, rot = ss.sphere_spectrum(eq.at_noise(pde, s.nu), st.rho_lm, k=6)
    neutral = np.abs(vals) <= 1e-7
    assert neutral.sum() == 2 and np.all(rot[neutral] > 1 - 1e-6)
    assert np.all(vals.real[~neutral] < -0.5)
    lead_m0 = eq.linear_spectrum(ax, s)[0].real
    assert np.abs(vals.real - lead_m0).min() <= 1e-6 * abs(lead_m0)


def test_a_branch_on_the_sphere_matches_the_axisymmetric_branch(setting):
    # 40 warm-started amplitude-constrained solves on S^2 (rho_10 held, nu solved for) against the 1-D solver:
    # the two discretizations agree to their residuals (1e-10)
    ax, pde = setting
    s0 = eq.degree_one_state(ax, 0.05)
    amps = np.linspace(0.05, 1.6, 40)
    br = ss.sphere_branch(eq.at_noise(pde, s0.nu), amps / np.sqrt(4 * np.pi), ax.to_sphere_coefficients(s0.b, pde.grid))
    assert len(br) == 40 and all(s.success for s in br)
    for a, s in zip(amps[::7], br[::7]):
        assert s.nu == pytest.approx(eq.degree_one_state(ax, a).nu, rel=1e-9)


def test_failures_and_bad_input(setting):
    ax, pde = setting
    g = pde.grid
    s = eq.degree_one_state(ax, 1.5)
    far = ax.to_sphere_coefficients(eq.degree_one_state(ax, 0.3).b, g)
    st = ss.solve_sphere_state(eq.at_noise(pde, s.nu), far, maxiter=1)
    assert st.status == 1 and "did not converge" in st.message and st.residual > 1e-6
    with pytest.raises(ValueError, match="rho_lm0 must have mass 1"):
        ss.solve_sphere_state(eq.at_noise(pde, s.nu), 2 * far)
    with pytest.raises(ValueError, match="pde must be a ContinuumPDE"):
        ss.gibbs_map(eq.at_noise(ax, 1.0), far)
    # general heads whose velocity is not a gradient (V not a multiple of a symmetric M) are refused by name; the
    # gradient ones (mean, symmetric M, V = c M) are served (tests/test_bispherical.py)
    general = mf.ContinuumPDE((mf.Head(np.diag([1.0, 0.5, 0.2]), np.diag([1.0, 0.7, 0.2]), 1.0),), lmax=8)
    with pytest.raises(ValueError, match="pde: heads \\[0\\] are general heads whose velocity is not a gradient"):
        ss.gibbs_map(eq.at_noise(general, 1.0), np.zeros(general.grid.nalm))
    quad = mf.ContinuumPDE((mf.Head(np.diag([1.0, 0.5, 0.2]), np.diag([1.0, 0.5, 0.2]), 1.0),), lmax=8,
                           summation="quadrature")
    with pytest.raises(ValueError, match="summation='quadrature' has no potential"):
        ss.gibbs_map(eq.at_noise(quad, 1.0), np.zeros(quad.grid.nalm))


def test_softmax_heads(setting):
    # softmax: Phi = (1/beta) log Z; the axisymmetric softmax state turned to S^2 solves the S^2 equation
    ax = pt.phase_transition_model(3, BETA, "softmax", lmax=48)
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, BETA, normalization="softmax"), lmax=31)
    s = eq.degree_one_state(ax, 0.8)
    rho = ax.to_sphere_coefficients(s.b, pde.grid)
    assert np.abs(rho - ss.gibbs_map(eq.at_noise(pde, s.nu), rho)).max() <= 1e-12 * np.abs(rho).max()
    st = ss.solve_sphere_state(eq.at_noise(pde, s.nu * (1 + 1e-3)), rho)   # a nearby nu: Newton moves along the branch
    assert st.success and st.removed == 2


def test_block_spectrum_by_azimuthal_order(setting):
    # a z-axisymmetric cluster: the m = 0 block is the axisymmetric model's spectrum (another basis and
    # quadrature; both central differences of quadratic tendencies: agreement to 1e-7 of the scale), the m = 1
    # block holds the one neutral rotation mode, and the blocks' leading values are ARPACK's on the whole S^2
    ax, pde = setting
    s = eq.degree_one_state(ax, 1.5)
    st = ss.solve_sphere_state(eq.at_noise(pde, s.nu), ax.to_sphere_coefficients(s.b, pde.grid))
    blocks = {m: ss.sphere_block_spectrum(eq.at_noise(pde, s.nu), st.rho_lm, m) for m in (0, 1, 2, 3)}
    lead = eq.linear_spectrum(ax, s).real[:5]
    np.testing.assert_allclose(blocks[0].real[:5], lead, rtol=0, atol=1e-7 * np.abs(lead).max())
    assert np.sum(np.abs(blocks[1]) < 1e-7) == 1 and np.all(blocks[1].real[1:] < -0.5)
    assert np.all(blocks[2].real < -0.5) and np.all(blocks[3].real < -0.5)
    full = np.sort(ss.sphere_spectrum(eq.at_noise(pde, s.nu), st.rho_lm, k=6)[0].real)[::-1]
    union = np.sort(np.concatenate([blocks[0].real, np.repeat(blocks[1].real, 2), np.repeat(blocks[2].real, 2)]))[::-1]
    np.testing.assert_allclose(full, union[:6], rtol=0, atol=1e-6)
    # at uniform each block is sigma_l, l >= max(m, 1) (every eigenvalue, no multiplicity lost)
    g = pde.grid
    uni = np.zeros(g.nalm, complex)
    uni[0] = 1 / np.sqrt(4 * np.pi)
    sigma = np.array([growth_rate(ell, [1.0], BETA, "mean", 0.7) for ell in range(1, 32)])
    for m in (0, 2):
        got = np.sort(ss.sphere_block_spectrum(eq.at_noise(pde, 0.7), uni, m).real)
        np.testing.assert_allclose(got, np.sort(sigma[max(m, 1) - 1:]), rtol=0, atol=1e-8 * np.abs(sigma).max())
    with pytest.raises(ValueError, match="must be axisymmetric about the z axis"):
        axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
        ss.sphere_block_spectrum(eq.at_noise(pde, s.nu), _rotated(ax, s.b, g, axis), 1)


def test_sinkhorn_heads_on_the_sphere():
    # Phi = -(1/beta) log a with the scaling solved on the S^2 grid: the axisymmetric Sinkhorn state (its own dense
    # scaling on Gauss-Jacobi nodes) solves the S^2 equation (measured 4e-14), Newton-Krylov (GMRES inside for the
    # scaling's linearization) returns to it from a perturbation, and the model's own Sinkhorn velocity
    # (core/field_forces, solved separately) has no flux there: tendency / transport scale measured 7e-13
    from dataclasses import replace
    beta = 6.0
    ax = pt.phase_transition_model(3, beta, "sinkhorn", lmax=48)
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta, normalization="sinkhorn"), lmax=31)
    g = pde.grid
    s = eq.degree_one_state(ax, 0.8)
    rho = ax.to_sphere_coefficients(s.b, g)
    assert np.abs(rho - ss.gibbs_map(eq.at_noise(pde, s.nu), rho)).max() <= 1e-12 * np.abs(rho).max()
    bump = g.analysis(0.01 * np.cos(3 * g.nodes[..., 0]) * np.sin(2 * g.nodes[..., 1]) / (4 * np.pi))
    bump[0] = 0.0
    st = ss.solve_sphere_state(eq.at_noise(pde, s.nu), rho + bump)
    assert st.success and st.removed == 2, st.message
    scale = np.abs(replace(pde, nu=0.0).tendency(st.rho_lm)).max()
    assert np.abs(replace(pde, nu=s.nu).tendency(st.rho_lm)).max() <= 1e-10 * scale


def test_branch_switching_at_degree_three_gives_the_tetrahedral_four_cluster_branch(setting):
    # issue 23: branch switching beyond degree 1 on the full S^2.  At nu_3 (sigma_3 = 0, MODEL.md section 3) the
    # uniform state bifurcates in the 7-dimensional degree-3 kernel; the xyz pattern (Im rho_32) is the direction of
    # the tetrahedral branch (an axial subgroup of O(3) acting on degree 3).  Held Im rho_32 = a, nu solved for.
    _, pde = setting
    g = pde.grid
    nu3 = optimize.brentq(lambda nu: growth_rate(3, [1.0], BETA, nu=nu), 1e-3, 5.0)
    uniform = mf.densities.uniform_density(g)
    amps = np.linspace(0.004, 0.2, 50)
    br = ss.sphere_branch(eq.at_noise(pde, nu3), amps, uniform + 0.004j * (np.arange(g.nalm) == g.index(3, 2)),
                          mode=(3, 2, "im"))
    assert len(br) == 50 and all(s.success for s in br)
    # a pitchfork (odd degree: no quadratic term), nu - nu_3 ~ a^2: slope of log |nu - nu_3| over the first solves
    slope = np.polyfit(np.log(amps[:4]), np.log([abs(s.nu - nu3) for s in br[:4]]), 1)[0]
    assert abs(slope - 2.0) < 0.05                 # O(a^4) corrections at a <= 0.016: measured 2.00
    assert all(s.removed == 3 for s in br)         # not axisymmetric: three rotation modes fixed
    # the end state has the tetrahedral symmetry (generators of T_d) to its residual, and four clusters
    s = br[-1]
    P = mf.initial.uniform_sphere(400, 3, seed=1)
    f0 = pde.density_at(s.rho_lm, P)
    turn = lambda axis, angle: Rotation.from_rotvec(angle * np.asarray(axis) / np.linalg.norm(axis)).as_matrix()  # noqa: E731
    for R in (turn([1, 1, 1], 2 * np.pi / 3), turn([1, 0, 0], np.pi), turn([0, 0, 1], np.pi / 2) @ np.diag([1.0, 1.0, -1.0])):
        assert np.abs(pde.density_at(s.rho_lm, P @ R.T) - f0).max() <= 1e-10 * f0.max()   # measured 5e-13
    V = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) / np.sqrt(3)
    at_clusters, between = pde.density_at(s.rho_lm, -V), pde.density_at(s.rho_lm, V)
    assert np.ptp(at_clusters) <= 1e-10                       # the four clusters are equal (symmetry)
    # peaks above 5x uniform and 40x the density at the opposite vertices (measured: 5.8x and 57x)
    assert at_clusters.min() > 5 / (4 * np.pi) and at_clusters.min() > 40 * between.max()
    # the branch turns back in nu (a fold at amplitude ~ 0.1) and is unstable (nu < nu_1: uniform is too)
    nus = np.array([x.nu for x in br])
    assert 0 < np.argmax(nus) < len(nus) - 1
    vals, _ = ss.sphere_spectrum(eq.at_noise(pde, s.nu), s.rho_lm, k=4)
    assert vals.real.max() > 0.5


def test_held_coefficient_is_validated(setting):
    ax, pde = setting
    rho = ax.to_sphere_coefficients(eq.degree_one_state(ax, 0.5).b, pde.grid)
    for mode, match in (((3, 0, "im"), "imaginary part of an m = 0"), ("z", "mode must be a tuple"),
                        ((40, 0, "re"), r"mode\[0\]"), ((3, 4, "re"), r"mode\[1\]"), ((3, 2, "x"), r"mode\[2\]")):
        with pytest.raises(ValueError, match=match):
            ss.solve_sphere_state(eq.at_noise(pde, 1.0), rho, amplitude=0.1, mode=mode)


def test_the_uniform_state_is_resolved_on_the_sphere():
    """The uniform density solved on S^2 was reported "not resolved" (its l >= 1 potential is round-off): now
    status 0 with resolution error 0, and the error of round-off-sized perturbations is 0 too."""
    import meanfield as mf

    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, 2.0), lmax=16)
    u = pde.grid.analysis(np.full(pde.grid.shape, 1 / (4 * np.pi)))
    st = ss.solve_sphere_state(eq.at_noise(pde, 2.0), u)
    assert st.status == 0 and st.resolution == 0.0, st.message
    noisy = u + 1e-17 * (pde.grid.l_index > 0)
    assert ss.sphere_resolution_error(eq.at_noise(pde, 2.0), noisy) == 0.0


def test_an_amplitude_no_state_holds_is_a_failed_solve_not_a_bad_nu():
    """Holding rho_10 beyond what any density has (0.6 > sqrt(3 / 4 pi) = 0.4886, or -0.7) drove nu below 0 and
    the solve then refused "nu must be positive", a value the caller never passed: now status 1 naming the held
    coefficient and the bound."""
    import meanfield as mf

    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, 2.0), lmax=12)
    u = pde.grid.analysis(np.full(pde.grid.shape, 1 / (4 * np.pi)))
    for a in (0.6, -0.7):
        st = ss.solve_sphere_state(eq.at_noise(pde, 0.5), u, amplitude=a)
        assert st.status == 1 and "drove nu to" in st.message and "at most 0.4886" in st.message, st.message
