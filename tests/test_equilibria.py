"""Stationary states of the noisy axisymmetric PDE and the classification of its phase transition (MODEL.md 7)."""

import re
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import gamma, iv

from meanfield.analysis import equilibria as eq
from meanfield.analysis import phase_transition as pt
from meanfield.analysis.stability import growth_rate
from meanfield.models.axisymmetric import AxisymmetricResolutionWarning

DIMS = (2, 3, 4, 8, 64)


@pytest.mark.parametrize("d", DIMS)
def test_nu_sharp_is_the_closed_form(d):
    # MODEL.md 7: nu_# = 2^(d/2-1) Gamma(d/2) I_(d/2)(beta) / beta^(d/2); the model's multipliers are computed in
    # logarithms by another route (funk_hecke_normalized), so agreement is to round-off (1e-13 relative)
    beta = 1.7
    exact = 2 ** (d / 2 - 1) * gamma(d / 2) * iv(d / 2, beta) / beta ** (d / 2)
    assert eq.nu_sharp(pt.phase_transition_model(d, beta)) == pytest.approx(exact, rel=1e-13)


@pytest.mark.parametrize("d", DIMS)
def test_beta_star_from_the_branch_matches_the_bessel_root(d):
    # the target is 1e-6 relative; measured <= 4e-8 (the branch curvature's Richardson remainder and the
    # round-off of nu / eps^2 set the floor), so 1e-7 leaves room and still fails on any real discrepancy
    bessel = pt.beta_star_bessel(d)
    assert iv(d / 2 + 1, bessel) / iv(d / 2, bessel) == pytest.approx(1 / d, rel=1e-12)   # it is the root
    assert pt.beta_star_continuation(d) == pytest.approx(bessel, rel=1e-7)


def test_beta_star_tends_to_one_in_high_dimension():
    # MODEL.md 7: beta_*^(d) -> 1 as d -> infinity (a consistency check of the root finder, not of the branch)
    values = [pt.beta_star_bessel(d) for d in (8, 64, 512)]
    # decreasing to 1: at d = 512 the root is 1.0039 (the series beta_* - 1 ~ 2/d), so within 0.01 of 1
    assert values[0] > values[1] > values[2] > 1 and values[2] - 1 < 0.01


@pytest.mark.parametrize("factor, kind", [(0.5, "continuous"), (0.95, "continuous"), (1.05, "discontinuous"),
                                          (2.0, "discontinuous")])
@pytest.mark.parametrize("d", (2, 3, 8))
def test_dichotomy_at_beta_star(d, factor, kind):
    out = pt.phase_transition(d, factor * pt.beta_star_bessel(d))
    assert out.transition == kind
    if kind == "discontinuous":
        # nu_# < nu_global < nu_fold (MODEL.md 7): the window of hysteresis and metastability
        assert out.nu_sharp < out.nu_global < out.nu_fold
    else:
        # supercritical: the branch's states lie below nu_# and beat uniform (G larger) all the way out
        pde = pt.phase_transition_model(d, factor * pt.beta_star_bessel(d))
        for s in eq.branch_states(pde, np.sqrt(d) * np.array([0.05, 0.3, 0.6])):
            assert s.success and s.nu < out.nu_sharp and eq.free_energy_gap(pde, s) > 0


def _circle_branch_independent(beta, n=64):
    """(amplitude a, nu, G - G_uniform) along the even degree-1 branch of one exp head on the circle, from grid
    values and FFTs (no Gegenbauer basis, no Gauss-Jacobi quadrature, no meanfield code): f = 1 + 2 a cos + sum_k
    c_k cos(k theta), k >= 2; unknowns nu and c_k; equations: the cosine coefficients k >= 1 of Gibbs(f) - f;
    Newton with a central-difference Jacobian.  64 angles: the coefficients of these states fall below 1e-16
    by k ~ 25."""
    theta = 2 * np.pi * np.arange(n) / n
    K = n // 2
    cosines = np.cos(np.outer(np.arange(2, K + 1), theta))
    mult = iv(np.arange(K + 1), beta) / beta        # Phi_k = I_k(beta) / beta f_k (circle Funk-Hecke)

    def phi(f):
        return np.fft.irfft(mult * np.fft.rfft(f), n)

    def density(a, x):
        return 1 + 2 * a * np.cos(theta) + x[1:] @ cosines

    def F(x, a):
        f = density(a, x)
        p = phi(f)
        e = np.exp((p - p.max()) / x[0])
        return (np.fft.rfft(e / e.mean() - f).real / n)[1:K + 1]

    def gap(a, x):
        f = density(a, x)
        E = 0.5 * np.mean(f * phi(f)) - 0.5 * mult[0]
        return E - x[0] * np.mean(f * np.log(f))

    x = np.concatenate([[iv(1, beta) / beta], np.zeros(K - 1)])
    rows = []
    for a in np.arange(0.005, 0.85, 0.005):
        for _ in range(30):
            r = F(x, a)
            if np.abs(r).max() < 1e-14:
                break
            J = np.column_stack([(F(x + h, a) - F(x - h, a)) / 2e-7 for h in 1e-7 * np.eye(K)])
            x = x - np.linalg.solve(J, r)
        assert np.abs(F(x, a)).max() < 1e-13
        rows.append((a, x[0], gap(a, x)))
    return np.array(rows)


def test_circle_fold_and_maxwell_point_against_an_independent_grid_solver():
    # d = 2 at beta = 2 beta_*: the circle's even states.  The grid solver uses FFTs on 256 angles (spectrally
    # accurate for these smooth densities) and fsolve; it shares only the mathematics.  Its fold comes from
    # a parabola through its three largest nu (error ~ h^3 of the 0.005 amplitude grid: < 1e-7 relative) and its
    # Maxwell point from linear interpolation of the gap (error ~ h^2 curvature: ~1e-5 relative), hence the tolerances
    beta = 2 * pt.beta_star_bessel(2)
    out = pt.phase_transition(2, beta)
    rows = _circle_branch_independent(beta)
    a, nu, g = rows.T
    k = int(np.argmax(nu))
    c = np.polyfit(a[k - 1:k + 2], nu[k - 1:k + 2], 2)
    assert out.nu_fold == pytest.approx(np.polyval(c, -c[1] / (2 * c[0])), rel=1e-6)
    j = int(np.nonzero((a > a[k]) & (g > 0))[0][0])
    a_m = a[j - 1] - g[j - 1] * (a[j] - a[j - 1]) / (g[j] - g[j - 1])
    assert out.nu_global == pytest.approx(np.interp(a_m, a[j - 1:j + 1], nu[j - 1:j + 1]), rel=1e-4)
    # order parameter |<x>| = a (cos amplitude of f = 1 + 2 a cos) = b_1 / sqrt(2)
    assert out.b1_fold / np.sqrt(2) == pytest.approx(a[k], abs=0.006)


@pytest.mark.parametrize("d, normalization", [(3, "mean"), (8, "mean"), (3, "softmax"), (2, "mean"), (3, "sinkhorn"),
                                            (4, "sinkhorn")])
def test_spectrum_at_uniform_is_sigma_l(d, normalization):
    # the model's own linearized PDE (central differences of its tendency: exact up to round-off for mean heads,
    # second order with steps 1e-5 for softmax and Sinkhorn, whose scaling the model solves to 1e-12) against the
    # closed forms of MODEL.md section 3 and the Sinkhorn rates of analysis/stability (derived independently)
    beta, nu = 2.5, 0.3
    pde = pt.phase_transition_model(d, beta, normalization, lmax=24)
    ev = eq.linear_spectrum(eq.at_noise(pde, nu), pde.uniform())
    sigma = np.sort([growth_rate(ell, [1.0], beta, normalization, nu, d=d) for ell in range(1, 25)])[::-1]
    assert np.abs(ev.imag).max() <= 1e-8 * np.abs(sigma).max()
    np.testing.assert_allclose(ev.real, sigma, rtol=0, atol=1e-8 * np.abs(sigma).max())


def test_stability_along_a_subcritical_branch():
    # d = 3, beta = 2 beta_*: the lower branch (between uniform and the fold) has one unstable axisymmetric mode,
    # the upper branch none; at the fold the leading eigenvalue crosses 0
    pde = pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=48)
    out = pt.classify_transition(pde)
    lower = eq.degree_one_state(pde, 0.5 * out.b1_fold)
    upper = eq.degree_one_state(pde, 0.5 * (out.b1_fold + out.b1_global))
    fold = eq.degree_one_state(pde, out.b1_fold)
    for s in (lower, upper, fold):
        assert s.success, s.message
    ev_lower = eq.linear_spectrum(pde, lower).real
    ev_upper = eq.linear_spectrum(pde, upper).real
    ev_fold = eq.linear_spectrum(pde, fold).real
    assert ev_lower[0] > 0.05 and ev_lower[1] < 0
    assert ev_upper[0] < -0.05
    # the fold is located to ~1e-10 in b_1 (Brent on nu(b_1)); the eigenvalue there is O(that) times |d ev / d b_1|
    assert abs(ev_fold[0]) < 1e-4 * abs(ev_fold[1])


def test_stationary_states_are_zeros_of_the_models_tendency():
    # self-consistency solutions are stationary for the PDE itself (its Galerkin tendency at that nu): the
    # residual is the truncation of f at lmax = 48, below 1e-9 of the transport term's size for these states
    from dataclasses import replace
    pde = pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=48)
    for a in (0.3, 1.0, 1.5):
        s = eq.degree_one_state(pde, a)
        assert s.success, s.message
        model = replace(pde, nu=s.nu)
        transport = np.abs(replace(pde, nu=0.0).tendency(s.b)).max()
        assert np.abs(model.tendency(s.b)).max() <= 1e-9 * transport
        again = eq.solve_stationary(eq.at_noise(pde, s.nu), s.b + 1e-3 * np.r_[0, np.ones(48) / np.arange(1, 49) ** 2])
        assert again.success and np.abs(again.b - s.b).max() <= 1e-10 * np.abs(s.b).max()


def test_free_energy_gap_vanishes_at_uniform_and_at_the_maxwell_point():
    pde = pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=48)
    assert eq.free_energy_gap(eq.at_noise(pde, 1.1), pde.uniform()) == pytest.approx(0.0, abs=1e-15)
    out = pt.classify_transition(pde)
    s = eq.degree_one_state(pde, out.b1_global)
    assert s.nu == pytest.approx(out.nu_global, rel=1e-12)
    # brentq stops at xtol 1e-13 in b_1; dG/db_1 is O(1) there
    assert abs(eq.free_energy_gap(pde, s)) < 1e-11
    small = eq.degree_one_state(pde, 0.1)          # the lower branch near uniform: uniform wins
    assert eq.free_energy_gap(pde, small) < 0


def test_failures_return_a_status_with_the_residual():
    pde = pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=48)
    far = pde.uniform()
    far[1] = 1.6
    s = eq.solve_stationary(eq.at_noise(pde, 1.2), far, maxiter=1)
    # one damped Newton step from b_1 = 1.6 at nu = 1.2 leaves a residual of order 1e-2 (far above any tolerance)
    assert s.status == 1 and not s.success and s.residual > 1e-6
    assert re.search(r"did not converge: residual [0-9.e+-]+ > tol = 1e-11 after 1 iterations", s.message)
    with pytest.warns(AxisymmetricResolutionWarning):
        coarse = pt.phase_transition_model(3, 8.0, lmax=10)      # a cluster that lmax = 10 cannot hold
    s = eq.degree_one_state(coarse, 0.5 * np.sqrt(3))
    assert s.status == 2 and "not resolved at lmax = 10" in s.message and s.resolution > eq.RESOLUTION_TOL
    with pytest.raises(ValueError, match=r"amplitude must lie in \(-1.73205, 1.73205\) without 0 for degree 1"):
        eq.degree_one_state(pde, 2.0)
    with pytest.raises(ValueError, match="b0 must have mass"):
        eq.solve_stationary(eq.at_noise(pde, 1.0), 2 * pde.uniform())
    with pytest.raises(ValueError, match="pde must be an AxisymmetricPDE"):
        eq.self_consistency_residual(object(), far)
    with pytest.raises(ValueError, match="softmax has no free energy"):
        sm = pt.phase_transition_model(3, 2.0, "softmax")
        eq.free_energy_gap(eq.at_noise(sm, 1.0), sm.uniform())
    with pytest.raises(ValueError, match="no two successive degrees"), pytest.warns(AxisymmetricResolutionWarning):
        pt.phase_transition(3, 8.0, lmax=10)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "meanfield_cli", "theory", "phase-transition", *args],
                          capture_output=True, text=True)


def test_cli_prints_the_classification_to_six_digits():
    beta = 2 * pt.beta_star_bessel(3)
    r = _cli("--d", "3", "--beta", repr(beta))
    assert r.returncode == 0, r.stderr
    values = dict(re.findall(r"^(\w+) = (\S+)", r.stdout, flags=re.M))
    ref = pt.phase_transition(3, beta)
    for key in ("nu_sharp", "nu_fold", "nu_global"):
        assert len(values[key].replace(".", "").lstrip("0")) >= 6           # at least 6 significant digits
        assert float(values[key]) == pytest.approx(getattr(ref, key), rel=1e-10)
    assert values["transition"] == "discontinuous"
    r = _cli("--d", "4")
    values = dict(re.findall(r"^(\w+) = (\S+)", r.stdout, flags=re.M))
    assert float(values["beta_star"]) == pytest.approx(pt.beta_star_bessel(4), rel=1e-11)
    assert float(values["beta_star_continuation"]) == pytest.approx(float(values["beta_star"]), rel=1e-7)


def test_cli_refuses_bad_input_without_a_traceback():
    r = _cli("--d", "3", "--nu", "1")
    assert r.returncode == 2 and "takes the options" in r.stderr and "Traceback" not in r.stderr
    r = _cli("--d", "3", "--beta", "30", "--lmax", "12")
    assert r.returncode == 2 and "lmax" in r.stderr and "Traceback" not in r.stderr


def test_degree_two_branch_two_antipodal_clusters():
    # the degree-2 branch from uniform: even in t (two antipodal clusters for b_2 > 0), leaving at sigma_2 = 0;
    # without the t -> -t symmetry of degree 1 it is transcritical: nu - nu_2 changes sign with b_2
    from dataclasses import replace
    pde = pt.phase_transition_model(3, 6.0, lmax=48)
    nu2 = eq.nu_sharp(pde, 2)
    assert nu2 == pytest.approx(pde.multipliers[0]["potential"][2], rel=1e-13)    # m_2 / beta
    up, down = eq.branch_state(pde, 1e-3, 2), eq.branch_state(pde, -1e-3, 2)
    assert up.success and down.success
    assert (up.nu - nu2) * (down.nu - nu2) < 0                                       # transcritical
    s = eq.branch_state(pde, 1.5, 2)
    assert s.success, s.message
    assert np.abs(s.b[1::2]).max() <= 1e-12                                           # even: antipodal clusters
    f = s.b @ pde.basis(np.array([-1.0, 0.0, 1.0]))
    assert f[0] == pytest.approx(f[2], rel=1e-10) and f[0] > 5 * f[1]
    assert np.abs(replace(pde, nu=s.nu).tendency(s.b)).max() <= 1e-9 * np.abs(replace(pde, nu=0.0).tendency(s.b)).max()


@pytest.mark.parametrize("d", (2, 3, 8))
def test_sinkhorn_nu_sharp_is_the_zero_of_its_growth_rate(d):
    # two derivations meet: the solver's linearized Gibbs map (through the scaling's linearization on the nodes)
    # and the closed form sigma_1 = d - 1 [(1/beta) c_1 / (c_0 + c_1) - nu] of analysis/stability; sigma_1(nu_#)
    # is then round-off of the rate's size (1e-14 relative)
    pde = pt.phase_transition_model(d, 4.0, "sinkhorn", lmax=32)
    n0 = eq.nu_sharp(pde)
    assert abs(growth_rate(1, [1.0], 4.0, "sinkhorn", n0, d=d)) <= 1e-14 * growth_rate(1, [1.0], 4.0, "sinkhorn", 0, d=d)


def test_sinkhorn_states_are_zeros_of_the_models_sinkhorn_tendency():
    # the solver's Phi = -(1/beta) log a (its own dense scaling on the nodes) against the model's Sinkhorn velocity
    # (core/field_forces, solved separately): the stationary state has no flux, to the truncation (1e-9)
    from dataclasses import replace
    pde = pt.phase_transition_model(3, 6.0, "sinkhorn", lmax=48)
    for a in (0.4, 1.0):
        s = eq.degree_one_state(pde, a)
        assert s.success, s.message
        scale = np.abs(replace(pde, nu=0.0).tendency(s.b)).max()
        assert np.abs(replace(pde, nu=s.nu).tendency(s.b)).max() <= 1e-9 * scale
    # Jacobian of the Sinkhorn potential against central differences (step 1e-6: error ~1e-11)
    b = eq.degree_one_state(pde, 0.8).b
    phi, dphi = eq.potential(pde, b)
    for j in (1, 2, 5):
        e = np.zeros_like(b)
        e[j] = 1e-6
        fd = (eq.potential(pde, b + e)[0] - eq.potential(pde, b - e)[0]) / 2e-6
        np.testing.assert_allclose(dphi[:, j], fd, rtol=0, atol=1e-7 * np.abs(fd).max())
    # sharper states: the degree-48 expansion of the density turns negative at the antipode, where a Sinkhorn
    # scaling is not defined: the march stops with status 2 and says why (b_1 ~ 1.13 here)
    last = eq.branch_states(pde, np.linspace(0.05, 1.6, 32))[-1]
    assert last.status == 2 and "needs a positive density" in last.message and 1.0 < last.b[1] < 1.6


def test_sinkhorn_transition_is_continuous_where_mean_is_discontinuous():
    # beta = 2 beta_*^(3): the mean head's transition is discontinuous; under Sinkhorn attention the branch
    # curvature is negative (supercritical) and the clustered branch below nu_# beats uniform (G has a maximum there)
    beta = 2 * pt.beta_star_bessel(3)
    assert pt.phase_transition(3, beta).transition == "discontinuous"
    out = pt.phase_transition(3, beta, "sinkhorn")
    assert out.transition == "continuous" and out.nu_2 < 0
    pde = pt.phase_transition_model(3, beta, "sinkhorn", lmax=48)
    s = eq.degree_one_state(pde, 0.5)
    assert s.nu < out.nu_sharp and eq.free_energy_gap(pde, s) > 0


def test_a_sinkhorn_scaling_that_does_not_converge_is_a_newton_failure():
    # sinkhorn_maxiter = 1: the scaling cannot reach round-off; the solve reports status 1 with the scaling's
    # own message (naming the head), not a resolution problem and not a traceback
    from dataclasses import replace
    pde = replace(pt.phase_transition_model(3, 6.0, "sinkhorn", lmax=24), sinkhorn_maxiter=1)
    b = pde.uniform()
    b[1] = 0.3
    s = eq.solve_stationary(eq.at_noise(pde, 0.07), b)
    assert s.status == 1 and "Sinkhorn head" in s.message and "did not converge" in s.message


def test_beta_star_continuation_reports_a_transition_that_stays_continuous():
    # softmax on S^2 stays continuous (nu_2 < 0) up to beta = 16 at least: no sign change, said with the range
    with pytest.raises(ValueError, match=r"no sign change of the branch curvature nu_2 up to beta = 16 \(d = 3, softmax\)"):
        pt.beta_star_continuation(3, "softmax", beta_max=16.0)
    with pytest.raises(ValueError, match="bracket must be"):
        pt.beta_star_continuation(3, bracket=(2.0, 1.0))


def test_branch_states_refuses_a_grid_that_is_not_one_signed_and_increasing():
    pde = pt.phase_transition_model(3, 3.0, lmax=24)
    for grid in ([0.2, 0.1], [-0.1, 0.2], []):
        with pytest.raises(ValueError, match="grid must be amplitudes of one sign, increasing in size"):
            eq.branch_states(pde, grid)


@pytest.mark.parametrize("lmax", [12, 24, 48])
def test_the_uniform_state_is_resolved_at_any_lmax(lmax):
    """The uniform state's l >= 1 potential is round-off: it was reported "not resolved, use a larger lmax" (its
    tail measured against a round-off-sized top).  Now resolved (status 0, error 0) at every lmax, also with
    round-off added (1e-17); a state the grid cannot resolve (a cluster b_l = Q_l(1) 0.9^l at lmax 12) still is not."""
    from meanfield import AxisymmetricPDE, scalar_heads

    pde = AxisymmetricPDE(scalar_heads([1.0], 3, 2.0), 3, lmax)
    s = eq.solve_stationary(eq.at_noise(pde, 2.0), pde.uniform())
    assert s.status == 0, s.message
    noisy = pde.uniform() + np.r_[0.0, np.full(lmax, 1e-17)]
    assert eq.resolution_error(eq.at_noise(pde, 2.0), noisy) == 0.0
    sharp = AxisymmetricPDE(scalar_heads([1.0], 3, 2.0), 3, 12)
    b = sharp.basis(np.array([1.0]))[:, 0] * 0.9 ** np.arange(13)       # a cluster, b_l = Q_l(1) 0.9^l
    assert eq.resolution_error(eq.at_noise(sharp, 0.1), b / b[0]) > 1e3 * eq.RESOLUTION_TOL


def test_branch_curvature_refuses_amplitudes_below_its_roundoff():
    from meanfield.analysis import phase_transition as pt

    pde = pt.phase_transition_model(3, 2.0)
    with pytest.raises(ValueError, match=r"eps must be a finite number in \[0.001, .*round-off of nu"):
        pt.branch_curvature(pde, eps=1e-7)
    # at the smallest allowed amplitude the Richardson value agrees with the default's to 1e-6 (measured 1e-8)
    assert abs(pt.branch_curvature(pde, eps=pt.CURVATURE_EPS_MIN) - pt.branch_curvature(pde)) < 1e-6


def test_classification_follows_the_branch_not_the_curvature_alone(monkeypatch):
    """A continuous verdict needs the march: no degree-1 state above nu_# up to r_checked.  With the curvature
    forced negative on a discontinuous model (beta = 2 beta_*), the march still finds the states above nu_# and
    the fold (1.2482521831, as unforced); a genuinely continuous model (beta = 1) reports how far it looked."""
    cont = pt.classify_transition(pt.phase_transition_model(3, 1.0, lmax=32))
    assert cont.transition == "continuous" and cont.r_checked > 0.99
    assert cont.branch_nu_max <= cont.nu_sharp and cont.nu_fold == cont.nu_sharp
    model = pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=32)
    honest = pt.classify_transition(model)
    monkeypatch.setattr(pt, "branch_curvature", lambda pde, eps=1e-2: -1.0)
    forced = pt.classify_transition(model)
    assert forced.transition == "discontinuous" and forced.branch_nu_max > forced.nu_sharp
    assert abs(forced.nu_fold - honest.nu_fold) < 1e-9
