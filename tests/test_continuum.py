"""Continuum PDE on S^2: energy along runs, spectral and temporal convergence, resolution, input checks.

Growth rates, mass, tangency, energy identities, axisymmetry, rotation equivariance and quadrature
consistency with particles are cases of the closed-form table, tests/closed_forms.py.
"""

import subprocess
import sys
import warnings

import numpy as np
import pytest
from _helpers import smooth_density

import meanfield as mf
from meanfield import field_diagnostics as fd
from meanfield.analysis import stability
from meanfield.core.densities import uniform_density, vmf_density, vmf_mixture_density
from meanfield.core.funk_hecke import funk_hecke_multipliers
from meanfield.core.heads import Head, scalar_heads
from meanfield.core.options import SaveAt, StepControl
from meanfield.models.continuum import ContinuumPDE, KernelResolutionWarning
from meanfield.workflow.simulate import solve_continuum


def test_energy_monotone_along_run():
    pde = ContinuumPDE(scalar_heads([1.0, 0.5], 3, beta=2.0), lmax=24)
    rho0 = vmf_mixture_density(pde.grid, [[0, 0, 1.0], [0, 1.0, 0]], [4.0, 4.0], floor=0.2)
    t = np.linspace(0, 0.2, 41)   # resolved until t ~ 0.25 at lmax 24 (the monitor would stop it)
    tr = solve_continuum(pde, rho0, 0.2, step=StepControl(rtol=1e-10, atol=1e-14), save=SaveAt(t_eval=t))
    assert tr.status == 0
    E, D = tr.observables["energy"], tr.observables["dissipation"]
    assert np.all(np.diff(E) > 0)
    # centered differences of E(t) on a grid of 0.005: O(dt^2 E''' / 6) ~ 1e-5 relative, well
    # above the integrator's 1e-10
    dEdt = (E[2:] - E[:-2]) / (t[2:] - t[:-2])
    np.testing.assert_allclose(dEdt, D[1:-1], rtol=1e-4)


def test_spectral_convergence_in_lmax():
    """Self-convergence at fixed time: the error decays exponentially in lmax (measured slope)."""
    heads = scalar_heads([1.0, 0.5], 3, beta=2.0)
    T = 0.3
    ref_pde = ContinuumPDE(heads, lmax=48)
    pts = ref_pde.grid.nodes.reshape(-1, 3)[::7]

    def run(lmax):
        pde = ContinuumPDE(heads, lmax=lmax, kernel_tol=1.0)
        rho0 = vmf_mixture_density(pde.grid, [[0, 0, 1.0], [1.0, 0, 0]], [6.0, 4.0], floor=0.2)
        tr = solve_continuum(pde, rho0, T, step=StepControl(rtol=1e-12, atol=1e-15), save=SaveAt(observe=False),
                             monitor=False)
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
    final = lambda dt: solve_continuum(pde, rho0, T, method="rk4", step=StepControl(dt=dt),
                                       save=SaveAt(observe=False), monitor=False).y_final
    ref = solve_continuum(pde, rho0, T, method="dopri5", step=StepControl(rtol=1e-13, atol=1e-16),
                          save=SaveAt(observe=False), monitor=False).y_final
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
    with pytest.raises(ValueError, match="summation must be one of"):
        ContinuumPDE(scalar_heads([1.0], 3), lmax=8, summation="fast")
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
    """Funk-Hecke multipliers of relu(lambda t)^2 / 2 against stability.funk_hecke_relu(power=2)."""
    ours = funk_hecke_multipliers(12, g=lambda t: 0.5 * np.maximum(1.3 * t, 0) ** 2)
    ref = 0.5 * np.array([stability.funk_hecke_relu(ell, 1.3, power=2) for ell in range(13)])  # theory: relu^2
    # both are Gauss-Legendre quadratures exact for these piecewise polynomials: round-off
    np.testing.assert_allclose(ours, ref, atol=1e-14 * np.abs(ref).max())


def test_attention_entropy_spectral_vs_quadrature():
    heads = scalar_heads([1.0, 0.5], 3, beta=2.0)
    spec, quad = ContinuumPDE(heads, lmax=20), ContinuumPDE(heads, lmax=20, summation="quadrature")
    rho_lm = vmf_mixture_density(spec.grid, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    Hs, Hq = fd.field_attention_entropy(spec, rho_lm), fd.field_attention_entropy(quad, rho_lm)
    # log of band-limited Z on a grid exact to degree 3 lmax: spectral accuracy, ~1e-12
    np.testing.assert_allclose(Hs, Hq, rtol=1e-10)
    assert np.all(Hs < 0)
    # uniform density: H_h = log Z - beta Z_beta / Z with Z = i_0(a) ... equals theory via i_0, i_1
    a = np.array([2.0, 1.0])
    from scipy.special import spherical_in
    exact = np.log(spherical_in(0, a)) - a * spherical_in(1, a) / spherical_in(0, a)
    np.testing.assert_allclose(fd.field_attention_entropy(spec, uniform_density(spec.grid)), exact, rtol=1e-12)


def general_heads(seed=7):
    rng = np.random.default_rng(seed)
    return tuple(Head(0.6 * rng.standard_normal((3, 3)), 0.6 * rng.standard_normal((3, 3)), 1.5, "exp", nrm)
                 for nrm in ("mean", "softmax"))


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
    assert fd.field_observer(pde)(0.0, pde.state(rho))["min_normalizer"] == pytest.approx(f["D"].min(), rel=1e-12)
    for kw, match in [(dict(nu=True), "nu must be"), (dict(nu="0.1"), "nu must be"),
                      (dict(kernel_tol=float("nan")), "kernel_tol must be"), (dict(chunk_bytes=-5), "chunk_bytes")]:
        with pytest.raises(ValueError, match=match):
            ContinuumPDE(scalar_heads([1.0], 3), lmax=8, **kw)


def test_fixed_step_default_cfl_with_adaptive_false():
    pde = ContinuumPDE(scalar_heads([1.0], 3), lmax=8, kernel_tol=1e-6)
    tr = solve_continuum(pde, uniform_density(pde.grid), 0.1, method="dopri5", step=StepControl(adaptive=False),
                         save=SaveAt(observe=False))
    assert tr.status == 0 and tr.n_steps >= 1          # dt came from the CFL bound, not an error


# ------------------------------------------- moved from test_api_friction.py (issue 14, item 9), unchanged
def test_continuum_accessors_from_a_trajectory():
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=1.0), lmax=12, kernel_tol=1e-6)
    rho0 = mf.zonal_density(pde.grid, legendre=[1.0, 0.5])            # (1 + mu / 2) / (4 pi)
    tr = mf.solve_continuum(pde, rho0, 0.1, save=SaveAt(observe=False))
    C = pde.trajectory_coefficients(tr)
    assert C.shape == (tr.t.size, pde.grid.nalm)
    np.testing.assert_array_equal(C[0], rho0)                          # the start as recorded (tolerance 0)
    pts = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])
    # ducc0 point synthesis at epsilon 1e-13: values to 1e-12
    np.testing.assert_allclose(pde.density_at(tr.y[0], pts), np.array([1.5, 0.5, 1.0]) / (4 * np.pi), atol=1e-12)
    np.testing.assert_allclose(pde.density_at(C[-1], pts), pde.density_at(tr.y[-1], pts), rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match=r"traj must be a Trajectory of this PDE"):
        pde.trajectory_coefficients(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="points must be unit vectors"):
        pde.density_at(C[0], 2 * pts)


def test_kernel_resolution_warning_says_what_it_measures_and_where():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=3.0), lmax=8)
    (w,) = [c for c in caught if c.category is KernelResolutionWarning]
    assert "first neglected Funk-Hecke multiplier (degree lmax + 1)" in str(w.message)
    assert w.filename == __file__                       # this test's line, not <string> or the package
    code = "import meanfield as mf\nmf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=3.0), lmax=8)\n"
    err = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True,
                         timeout=120).stderr
    assert err.startswith("<string>:2: KernelResolutionWarning"), err
