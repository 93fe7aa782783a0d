"""Pseudo-arclength continuation (analysis/continuation.py): textbook folds and pitchforks with exact answers,
then the noisy model's branches against the amplitude-parametrized solver and the closed forms."""

import numpy as np
import pytest

from meanfield.analysis import continuation as ct
from meanfield.analysis import equilibria as eq
from meanfield.analysis import phase_transition as pt


def _cubic():
    F = lambda u, p: u ** 3 - u + p                                     # noqa: E731
    J = lambda u, p: (np.array([[3 * u[0] ** 2 - 1]]), np.array([1.0]))  # noqa: E731
    return lambda u, p: np.array([F(u[0], p)]), J


def test_folds_of_the_cubic_are_located_exactly():
    # u^3 - u + p = 0 turns at p = +-2 / (3 sqrt 3), u = -+1 / sqrt 3; Brent on t_p to tol_s = 1e-12 in arclength
    # puts the fold's p within ~(1e-12)^2 of the exact one (t_p vanishes linearly, p quadratically): 1e-12 is loose
    F, J = _cubic()
    u0 = np.array([-1.3247179572447460])                  # the real root at p = 1 (plastic number), to 1e-16
    br = ct.continue_branch(F, J, u0, 1.0, ds=0.05, ds_max=0.1, p_range=(-1.0, 1.0), max_steps=400, tol_s=1e-12,
                            direction=-1)
    folds = br.folds
    assert len(folds) == 2 and all(f.located for f in folds)
    p_fold = 2 / (3 * np.sqrt(3))
    assert sorted(f.p for f in folds) == pytest.approx([-p_fold, p_fold], abs=1e-12)
    assert sorted(f.u[0] for f in folds) == pytest.approx([-1 / np.sqrt(3), 1 / np.sqrt(3)], abs=1e-6)
    assert br.status == 0 and "left the range" in br.message
    assert np.abs([F(u, p)[0] for u, p in zip(br.u, br.p)]).max() <= 1e-12   # every point is a solution


def test_pitchfork_branch_point_and_switching():
    # u (u^2 - p) = 0 (2 unknowns, the second decoupled: v - p = 0): the trivial branch u = 0 meets u^2 = p at p = 0
    def F(x, p):
        return np.array([x[0] * (x[0] ** 2 - p), x[1] - p])

    def J(x, p):
        return np.array([[3 * x[0] ** 2 - p, 0.0], [0.0, 1.0]]), np.array([-x[0], -1.0])

    br = ct.continue_branch(F, J, np.array([0.0, -1.0]), -1.0, ds=0.07, ds_max=0.1, p_range=(-1, 1), max_steps=100)
    (bp,) = br.branch_points
    assert bp.p == pytest.approx(0.0, abs=1e-10) and abs(bp.phi[0]) == pytest.approx(1.0, abs=1e-10)
    other = ct.switch_branch(F, J, bp, side=np.sign(bp.phi[0]), ds=0.05, p_range=(-1, 1), max_steps=60)
    u, p = other.u[1:, 0], other.p[1:]
    assert np.all(u > 0) and np.abs(u - np.sqrt(p)).max() <= 1e-10                # the new branch is u = sqrt(p)
    with pytest.raises(ValueError, match="kind 'branch_point'"):
        ct.switch_branch(F, J, other, side=1)


def test_failed_corrector_returns_a_status():
    # a branch that ends (no real solution for p > 0.5): the corrector fails at ds_min -> status 1
    F = lambda u, p: np.array([u[0] - p if p <= 0.5 else u[0] ** 2 + 1.0])    # noqa: E731
    J = lambda u, p: (np.array([[1.0 if p <= 0.5 else 2 * u[0]]]), np.array([-1.0 if p <= 0.5 else 0.0]))  # noqa: E731
    br = ct.continue_branch(F, J, np.array([0.0]), 0.0, ds=0.1, p_range=(-1, 2), max_steps=100)
    assert br.status == 1 and "corrector failed at the smallest step" in br.message and br.p[-1] <= 0.5
    with pytest.raises(ValueError, match=r"\(u0, p0\) must solve F = 0"):
        ct.continue_branch(F, J, np.array([1.0]), 0.0)
    with pytest.raises(ValueError, match="direction must be"):
        ct.continue_branch(F, J, np.array([0.0]), 0.0, direction=2)


@pytest.fixture(scope="module")
def model():
    return pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=24)


def test_noise_continuation_through_the_fold_matches_the_amplitude_solver(model):
    # the same fold by two parametrizations: Brent on nu(b_1) and Brent on t_p(s); both to round-off (1e-12)
    F, J = eq.noise_problem(model)
    s = eq.degree_one_state(model, 0.05)
    br = ct.continue_branch(F, J, s.b[1:], s.nu, ds=0.02, ds_max=0.05, p_range=(0.5, 2.0), max_steps=300)
    (fold,) = br.folds
    ref = pt.classify_transition(model)
    assert fold.p == pytest.approx(ref.nu_fold, rel=1e-12)
    assert fold.u[0] == pytest.approx(ref.b1_fold, rel=1e-5)        # b_1 is flat in nu at the fold: sqrt(tol)
    # points of the arclength branch are states of the amplitude-parametrized one
    for k in (5, len(br.p) // 2, len(br.p) - 1):
        again = eq.degree_one_state(model, br.u[k][0])
        # both solves stop at residuals ~1e-13 of O(1) coefficients; nu is first order in them: 1e-11 relative
        assert again.nu == pytest.approx(br.p[k], rel=1e-11)


def test_uniform_branch_points_are_the_zeros_of_sigma_l_and_switching_finds_the_cluster(model):
    # along the uniform state in nu the branch points are nu_l = m_l / beta (sigma_l = 0), l = 1, 2, 3;
    # ds_max = 0.05 stays below their spacing; Brent on the signed smallest singular value: 1e-8 relative
    F, J = eq.noise_problem(model)
    br = ct.continue_branch(F, J, np.zeros(model.lmax), 2.0, ds=0.05, ds_max=0.05, p_range=(0.2, 3.0),
                            max_steps=400, direction=-1)
    found = [bp.p for bp in br.branch_points]
    assert all(bp.located for bp in br.branch_points)
    assert found == pytest.approx([eq.nu_sharp(model, ell) for ell in (1, 2, 3)], rel=1e-8)
    assert not br.folds
    first = br.branch_points[0]
    assert abs(first.phi[0]) == pytest.approx(1.0, abs=1e-8)            # the critical mode is Q_1
    clustered = ct.switch_branch(F, J, first, side=np.sign(first.phi[0]), ds=0.02, ds_max=0.05,
                                 p_range=(0.3, 2.0), max_steps=300,
                                 stop=lambda u, p: "point mass" if u[0] > 0.98 * np.sqrt(3) else None)
    assert clustered.status == 2
    assert [f.p for f in clustered.folds] == pytest.approx([pt.classify_transition(model).nu_fold], rel=1e-12)


def test_beta_continuation_at_fixed_noise():
    # at fixed nu the degree-1 branch has a fold in beta: there nu is the branch's nu_fold at that beta
    # (lmax 32: the branch reaches beta ~ 4.6, where 24 degrees truncate the kernel at 4e-9)
    model = pt.phase_transition_model(3, 2 * pt.beta_star_bessel(3), lmax=32)
    nu = 1.1
    Fb, Jb = eq.beta_problem(eq.at_noise(model, nu))
    # start: at beta = 2 beta_* the state with this nu lies on the upper branch (nu_global < 1.1 < nu_fold)
    amp = [a for a in np.linspace(1.25, 1.7, 50) if eq.degree_one_state(model, a).nu > nu][-1]
    from scipy.optimize import brentq
    a0 = brentq(lambda a: eq.degree_one_state(model, a).nu - nu, amp, 1.72, xtol=1e-14)
    s = eq.degree_one_state(model, a0)
    beta0 = model.heads[0].beta
    assert np.abs(Fb(s.b[1:], beta0)).max() <= 1e-11
    br = ct.continue_branch(Fb, Jb, s.b[1:], beta0, ds=0.02, ds_max=0.05, p_range=(1.0, 8.0), max_steps=300,
                            direction=-1)
    # the branch turns at the fold, comes down the unstable branch to uniform (a branch point, where b_1 passes 0
    # and the pitchfork's vertex is a fold in beta too) and climbs the mirror branch b_1 < 0 to the mirror fold
    fold = br.folds[0]
    assert fold.u[0] > 0 and br.folds[-1].p == pytest.approx(fold.p, rel=1e-10)
    # F_beta by central differences (step 1e-6 beta): the fold's beta to ~1e-9; nu_fold(beta) recomputed
    ref = pt.classify_transition(pt.phase_transition_model(3, fold.p, lmax=32))
    assert ref.nu_fold == pytest.approx(nu, rel=1e-8)
    (bp,) = br.branch_points                   # where sigma_1 of uniform vanishes at this nu: nu_#(beta) = nu
    assert abs(bp.u[0]) < 1e-4 and eq.nu_sharp(pt.phase_transition_model(3, bp.p, lmax=32)) == pytest.approx(nu, rel=1e-7)


def test_bad_step_and_range_arguments_are_refused():
    F, J = _cubic()
    u0 = np.array([-1.3247179572447460])
    for kw, msg in ((dict(ds=1.0, ds_max=0.5), r"ds must lie in \[ds_min, ds_max\]"),
                    (dict(p_range=(1.0, -1.0)), "p_range must be"),
                    (dict(tol=-1.0), "tol must be"),
                    (dict(t0=[1.0, 0.0], direction=-1), "direction must be left at \\+1 with t0")):
        with pytest.raises(ValueError, match=msg):
            ct.continue_branch(F, J, u0, 1.0, **kw)


# ------------------------------------------------------------------------------- cost guard and extreme steps
def test_max_steps_memory_is_estimated_before_the_march():
    # max_steps bounds the points kept: 10^9 points of n + 2 = 3 floats (twice: lists, then the Branch's arrays)
    # are refused by name from the sizes, before F is called once
    calls = []

    def F(u, p):
        calls.append(p)
        return np.array([u[0] - p])

    J = lambda u, p: (np.array([[1.0]]), np.array([-1.0]))               # noqa: E731
    with pytest.raises(ValueError, match=r"continue_branch\(max_steps=1000000000\) with n = 1 unknowns would need "
                                         r"about .* of memory.*MEMORY_LIMIT_BYTES.*use a smaller max_steps"):
        ct.continue_branch(F, J, np.array([0.0]), 0.0, max_steps=10**9)
    assert calls == []
    # the estimate is at least max_steps (n + 1) 8 bytes: refused as soon as that exceeds the limit
    from meanfield.core import cost

    with cost.limits(bytes=(1 + 1) * 8 * 1000):
        with pytest.raises(ValueError, match="max_steps"):
            ct.continue_branch(F, J, np.array([0.0]), 0.0, max_steps=1001)
    per_point = 2 * 8 * (1 + 2) + ct.POINT_OVERHEAD_BYTES
    with cost.limits(bytes=per_point * 50):
        br = ct.continue_branch(F, J, np.array([0.0]), 0.0, max_steps=50)
    assert br.status == 0 and br.p.size == 50


def _pitchfork():
    def F(x, p):
        return np.array([x[0] * (x[0] ** 2 - p), x[1] - p])

    def J(x, p):
        return np.array([[3 * x[0] ** 2 - p, 0.0], [0.0, 1.0]]), np.array([-x[0], -1.0])
    return F, J


def test_a_huge_arclength_step_locates_the_branch_point_without_a_traceback():
    # ds = ds_max = 1e300 along the trivial branch u = 0, v = p (exact: every predictor is a solution) crosses
    # the branch point p = 0 in the first segment [0, 1e300]: Brent's method needs ~log2(1e310) = 1030 bisections
    # there, beyond its default 100 (a RuntimeError before); it is located to tol_s = 1e-10 in arclength
    F, J = _pitchfork()
    br = ct.continue_branch(F, J, np.array([0.0, -1.0]), -1.0, ds=1e300, ds_max=1e300, max_steps=4)
    (bp,) = br.branch_points
    assert bp.located and abs(bp.p) <= 1e-9 and abs(bp.phi[0]) == pytest.approx(1.0, abs=1e-10)
    assert br.status == 0 and br.p.size == 4


def test_a_huge_step_on_a_bounded_branch_is_halved_to_a_solution():
    # on the circle u^2 + p^2 = 1 a step of 1e300 overflows F (inf): the step fails and is halved until the
    # corrector converges; every point kept is on the circle
    F = lambda u, p: np.array([u[0] ** 2 + p ** 2 - 1.0])                     # noqa: E731
    J = lambda u, p: (np.array([[2 * u[0]]]), np.array([2 * p]))                # noqa: E731
    br = ct.continue_branch(F, J, np.array([1.0]), 0.0, ds=1e300, ds_max=1e300, max_steps=20)
    assert br.status == 0 and br.p.size == 20
    assert np.abs(br.u[:, 0] ** 2 + br.p ** 2 - 1).max() <= 1e-10


def _failing_above(kind, limit=5.0):
    """u - p = 0, whose F or Jacobian fails for p > limit (a solver inside them giving up)."""
    from scipy.sparse.linalg import ArpackNoConvergence

    def F(u, p):
        if p > limit and kind == "linalg":
            raise np.linalg.LinAlgError("Singular matrix")
        return np.array([u[0] - p])

    def J(u, p):
        if p > limit and kind == "arpack":
            raise ArpackNoConvergence("ARPACK error -1: No convergence", np.array([]), np.array([]))
        return np.array([[1.0]]), np.array([np.inf if p > limit and kind == "inf" else -1.0])
    return F, J


@pytest.mark.parametrize("kind, why", [("linalg", "LinAlgError: Singular matrix"),
                                       ("arpack", "ArpackNoConvergence"), ("inf", "non-finite Jacobian")])
def test_linear_algebra_failures_inside_a_step_end_as_a_status(kind, why):
    # huge steps cross p = 5, where F or J fails: the step is halved; at ds_min the branch ends with status 1 and
    # the failure in its message (a traceback before); every point kept is below the failure
    F, J = _failing_above(kind)
    br = ct.continue_branch(F, J, np.array([0.0]), 0.0, ds=1e300, ds_max=1e300, ds_min=1e-3, max_steps=200)
    assert br.status == 1 and "corrector failed at the smallest step" in br.message and why in br.message
    assert np.all(br.p <= 5.0) and br.p[-1] > 4.9
