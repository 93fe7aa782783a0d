r"""The phase transition of the noisy model from its degree-1 branch (MODEL.md section 7).

For one or more zonal heads on ``S^{d-1}`` (:class:`meanfield.AxisymmetricPDE`, ``d = 2``: even densities on
the circle), the branch of clustered states that leaves the uniform state at ``nu_#`` is followed in its
amplitude ``b_1`` (:func:`meanfield.analysis.equilibria.branch_state`): ``nu`` is a single-valued function of
``b_1`` along it, so the fold of the branch in ``nu`` is the maximum of ``nu(b_1)`` and needs no arclength.

* :func:`branch_curvature` -- ``nu_2`` in ``nu = nu_# + nu_2 b_1^2 + O(b_1^4)``: ``> 0`` subcritical
  (discontinuous transition), ``< 0`` supercritical (continuous);
* :func:`classify_transition` -- the type, ``nu_#``, ``nu_fold``, the Maxwell point ``nu_global``;
* :func:`beta_star_continuation` -- the ``beta`` where ``nu_2`` changes sign, against the Bessel root
  :func:`beta_star_bessel` (Mun and Rosenzweig: ``I_{d/2+1}(beta) / I_{d/2}(beta) = 1/d``);
* :func:`phase_transition` -- the classification of one zonal exp head of strength 1 with its
  discretization checked (``meanfield theory phase-transition``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np
from scipy import optimize

from ..core import cost, validate
from ..core.heads import scalar_heads
from ..core.kernels import NORMALIZATIONS
from ..models.axisymmetric import AxisymmetricPDE
from .equilibria import _check_model, branch_states, degree_one_state, free_energy_gap, has_free_energy, nu_sharp

__all__ = ["Transition", "branch_curvature", "classify_transition", "beta_star_bessel", "beta_star_continuation",
           "phase_transition_model", "phase_transition", "LMAX_LADDER", "CURVATURE_EPS_MIN",
           "MARCH_NU_TOL"]


@dataclass(frozen=True)
class Transition:
    """The classification of the degree-1 transition of a model (:func:`classify_transition`,
    :func:`phase_transition`).  ``to_dict()`` gives the plain record for datasets and JSON (the fields that were
    not determined left out).

    Parameters
    ----------
    transition : {"continuous", "discontinuous"}
    nu_sharp, nu_2, nu_fold, nu_global, b1_fold, r_checked, branch_nu_max : float
        As the attributes below.
    b1_global : float
        NaN where there is no Maxwell point.
    march_message : str
        Empty when the march reached ``r_max``.
    lmax : int, optional
        The checked degree.
    discretization_change : float, optional
        The change from the previous degree of the ladder.
    """

    transition: str
    """``"continuous"`` or ``"discontinuous"``."""
    nu_sharp: float
    """``nu_#``: where ``sigma_1`` of the uniform state vanishes and the degree-1 branch leaves it."""
    nu_2: float
    """The branch curvature in ``nu = nu_# + nu_2 b_1^2 + O(b_1^4)`` (:func:`branch_curvature`)."""
    nu_fold: float
    """The largest ``nu`` along the branch (its fold; ``nu_#`` for a continuous transition)."""
    nu_global: float
    """The Maxwell point: ``G`` of the stable clustered branch equals ``G`` of uniform (``nu_#`` for a continuous
    transition; NaN without a free energy, softmax)."""
    b1_fold: float
    """The amplitude ``b_1`` at the fold (0 for a continuous transition)."""
    r_checked: float
    """How far the branch was marched, in the order parameter ``r = b_1 / sqrt(d)``."""
    branch_nu_max: float
    """The largest ``nu`` of the marched states."""
    b1_global: float = math.nan
    """The amplitude ``b_1`` at the Maxwell point (NaN where there is none: continuous, or no free energy)."""
    march_message: str = ""
    """Why the march stopped before ``r_max`` (empty when it did not)."""
    lmax: int | None = None
    """The degree of the result, when its discretization was checked (:func:`phase_transition`)."""
    discretization_change: float | None = None
    """The relative change of ``nu_#``, ``nu_fold``, ``nu_global`` from the previous degree of the ladder
    (:func:`phase_transition`)."""

    def to_dict(self) -> dict:
        """The classification as a dict of plain numbers and strings (for a dataset's attributes, a JSON file).

        Returns
        -------
        dict
            Every field, but ``b1_global`` when NaN, ``march_message`` when empty and ``lmax`` /
            ``discretization_change`` when None (fields that do not apply are left out).
        """
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or (f.name == "march_message" and not v) or (f.name == "b1_global" and math.isnan(v)):
                continue
            out[f.name] = v
        return out

    def __repr__(self) -> str:
        more = (f", nu_global={self.nu_global:.10g}" + (f", lmax={self.lmax}" if self.lmax is not None else "")
                + (f", march_message={self.march_message!r}" if self.march_message else ""))
        return (f"Transition({self.transition}, nu_sharp={self.nu_sharp:.10g}, nu_fold={self.nu_fold:.10g}"
                f"{more}, nu_2={self.nu_2:.6g})")


CURVATURE_EPS_MIN = 1e-3
"""Smallest amplitude of :func:`branch_curvature`: the solved ``nu`` carries round-off of about 1e-14, which the
Richardson formula divides by ``eps^2`` (measured at beta = 2, 3.63, 6: 1e-8 relative at ``eps = 1e-3``, 1e-3 at
``1e-4``, the sign lost at ``1e-7``)."""


def branch_curvature(pde, eps=1e-2) -> float:
    """``nu_2`` in ``nu(b_1) = nu_# + nu_2 b_1^2 + O(b_1^4)`` along the degree-1 branch, from the solved
    states at ``b_1 = eps, 2 eps`` (Richardson: the ``b_1^4`` term cancels; at ``eps = 1e-2`` the ``b_1^6``
    term and the round-off of ``nu`` divided by ``eps^2`` are both about 1e-10).  ``nu_2 > 0``: subcritical
    (discontinuous transition); ``< 0``: supercritical (continuous).  ``0 < eps < Q_1(1) / 2`` (``sqrt(d) / 2``:
    both amplitudes below a point mass's).

    Parameters
    ----------
    pde : AxisymmetricPDE
        One zonal head (e.g. :func:`phase_transition_model`).
    eps : float
        The amplitude, in ``[CURVATURE_EPS_MIN, Q_1(1) / 2)``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``pde`` not an :class:`~meanfield.models.axisymmetric.AxisymmetricPDE`, or ``eps`` out of range.
    RuntimeError
        A degree-1 state that Newton does not solve.
    """
    pde = _check_model(pde)
    top = float(pde.basis(np.array([1.0]))[1, 0])
    eps = validate.real("eps", eps, CURVATURE_EPS_MIN, top / 2, hi_open=True,
                        what=f"a finite number in [{CURVATURE_EPS_MIN:g}, {top / 2:.6g}) (below, the round-off of nu, "
                             f"about 1e-14, divided by eps^2 exceeds 1e-8; 2 eps = b_1 below Q_1(1) = {top:.6g}, a "
                             f"point mass)")
    n0 = nu_sharp(pde)
    s1 = degree_one_state(pde, eps)
    s2 = degree_one_state(pde, 2 * eps, start=s1)
    for s in (s1, s2):
        if not s.success:
            raise RuntimeError(f"branch_curvature: {s.message}")
    return float((16 * (s1.nu - n0) - (s2.nu - n0)) / (12 * eps ** 2))


def phase_transition_model(d, beta, normalization="mean", lmax=48) -> AxisymmetricPDE:
    """One zonal exp head of strength 1 on ``S^{d-1}`` as an :class:`AxisymmetricPDE` (``d = 2``: the circle).

    Parameters
    ----------
    d : int
        Dimension, ``>= 2``.
    beta : float
        Inverse temperature, ``> 0``.
    normalization : str
        The head's normalization.
    lmax : int
        Gegenbauer degree of the model.

    Returns
    -------
    AxisymmetricPDE

    Raises
    ------
    ValueError
        ``d`` below 2, ``beta`` not positive and finite, or what the head or the model refuses.
    """
    d = validate.integer("d", d, 2)
    beta = validate.real("beta", beta, positive=True)
    return AxisymmetricPDE(scalar_heads([1.0], d, beta, normalization=normalization), d, lmax)


def _amplitudes(d, r_max, n_steps):
    """Branch amplitudes ``b_1 = sqrt(d) r``: ``2 n_steps / 3`` even steps of the order parameter ``r`` up to
    0.9, then ``n_steps / 3`` steps closing in geometrically on ``r_max`` (clusters sharpen fast there)."""
    n1 = max(3, 2 * n_steps // 3)
    r = np.linspace(0.9 / n1, 0.9, n1)
    if r_max > 0.9:
        r = np.append(r, 1 - (1 - 0.9) * ((1 - r_max) / 0.1) ** np.linspace(0, 1, n_steps - n1 + 1)[1:])
    else:
        r = np.linspace(r_max / n_steps, r_max, n_steps)
    return np.sqrt(d) * r


MARCH_NU_TOL = 1e-12
"""A state of the marched branch counts as above ``nu_#`` when its ``nu`` exceeds ``nu_# (1 + MARCH_NU_TOL)``: the
Newton solves' round-off on ``nu`` is about 1e-14 relative."""
MARCH_SECONDS_PER_STATE = 1e-3
"""Seconds of one warm-started branch solve beyond its ``(lmax + 1)^3`` dense algebra (measured 1.2e-3 s per state
at lmax = 24, 1.1e-3 to 1.7e-3 s at 48)."""
MARCH_SECONDS_PER_CUBE = 1e-8
"""Seconds per ``(lmax + 1)^3`` of one branch solve (measured 6e-3 to 1e-2 s per state at lmax = 96)."""


def estimate_march(lmax, n_steps) -> cost.Cost:
    """Estimated memory (the amplitudes and the states kept: ``8 (lmax + 1) + 400`` bytes each) and time of the
    ``n_steps`` warm-started solves of :func:`classify_transition`'s march at ``lmax``."""
    per_state = MARCH_SECONDS_PER_STATE + MARCH_SECONDS_PER_CUBE * float(lmax + 1) ** 3
    return cost.Cost(f"classify_transition(n_steps={n_steps}) at lmax = {lmax}",
                     float(n_steps) * (8.0 * (lmax + 1) + 400.0), float(n_steps) * per_state,
                     f"{n_steps} branch solves x {per_state:.2g} s")


def classify_transition(pde, *, r_max=0.999, n_steps=90) -> Transition:
    """Transition type and critical noises of the degree-1 branch of ``pde`` (one or more zonal heads).

    For a discontinuous transition ``nu_fold`` is the largest ``nu`` along the branch (Brent's method on
    ``nu(b_1)``) and, with a free energy, ``nu_global`` the ``nu`` where ``G`` of the stable branch
    (``b_1 > b1_fold``) equals ``G`` of uniform.

    The decision follows the branch, not the curvature alone: the degree-1 branch is always marched in the order
    parameter ``r = b_1 / sqrt(d)`` up to ``r_max`` in ``n_steps`` warm-started solves (:func:`_amplitudes`; their
    cost is guarded up front, :func:`estimate_march`).  ``"continuous"`` when ``nu_2 < 0`` and no state of the
    march lies above ``nu_#`` (:data:`MARCH_NU_TOL`): then ``nu_fold = nu_global = nu_sharp`` (no fold; no
    degree-1 state coexists with uniform above ``nu_#`` up to ``r_checked``, the claim the march tests; the
    global one, over every state, is the theorem's for one head (MODEL.md section 7)); a march that stopped early
    says so in ``march_message``.  Otherwise ``"discontinuous"``, with the fold located.  Without a free energy
    (softmax) ``nu_global`` is NaN.  A march that stops (not resolved or not converged) before the fold or the
    Maxwell point is bracketed raises ``RuntimeError`` with the solver's message.

    Parameters
    ----------
    pde : AxisymmetricPDE
        The model (its ``nu`` is not used: every state's noise is solved for).
    r_max : float
        How far to march, in ``r``, ``0 < r_max < 1``.
    n_steps : int
        Warm-started solves of the march (at least 6).

    Returns
    -------
    Transition
        The classification.

    Raises
    ------
    ValueError
        If ``pde`` is not an :class:`AxisymmetricPDE`, ``r_max`` or ``n_steps`` is out of range, or the march
        costs too much.
    RuntimeError
        When the march stops before the fold or the Maxwell point is bracketed.
    """
    pde = _check_model(pde)
    r_max = validate.real("r_max", r_max, 0.0, 1.0, lo_open=True, hi_open=True)
    n_steps = validate.integer("n_steps", n_steps, 6)
    estimate_march(pde.lmax, n_steps).check("a smaller n_steps (the default 90 brackets the fold, which Brent's "
                                            "method then refines)")
    d = pde.d
    n0 = nu_sharp(pde)
    nu2 = branch_curvature(pde)
    out = {"nu_sharp": n0, "nu_2": nu2}
    has_G = has_free_energy(pde)
    grid = _amplitudes(d, r_max, n_steps)
    states = branch_states(pde, grid)
    nus = np.array([s.nu for s in states if s.success])
    out["r_checked"] = float(grid[nus.size - 1] / np.sqrt(d)) if nus.size else 0.0
    if nu2 < 0 and nus.size and nus.max() <= n0 + MARCH_NU_TOL * n0:
        # continuous: the branch leaves nu_# downwards and no state of it lies above nu_# up to r_checked (the
        # march, not the curvature alone); above nu_# uniform is then the only degree-1 state found
        out.update(transition="continuous", nu_fold=n0, nu_global=n0 if has_G else float("nan"), b1_fold=0.0,
                   branch_nu_max=float(nus.max()))
        if nus.size < len(grid):
            out["march_message"] = f"the march stopped at r = {out['r_checked']:.4g}: {states[-1].message}"
        return Transition(**out)
    if nu2 < 0 and nus.size == 0:
        raise RuntimeError(f"classify_transition: the degree-1 branch is supercritical at nu_# (nu_2 = {nu2:.3g}) but "
                           f"its march failed at the first state, so no state above nu_# could be ruled out: "
                           f"{states[0].message if states else 'no state'}")
    # else a fold: subcritical at nu_# (nu_2 > 0), or supercritical there but rising above nu_# further out
    if nus.size < 3 or int(np.argmax(nus)) in (0, nus.size - 1):
        last = states[-1]
        raise RuntimeError(f"classify_transition: the fold of the degree-1 branch was not bracketed up to "
                           f"b_1 = {last.b[1]:.4g} ({last.message})")
    k = int(np.argmax(nus))
    cache = {}

    def state_at(a):
        if a not in cache:
            j = int(np.argmin(np.abs(grid[:nus.size] - a)))
            s = degree_one_state(pde, a, start=states[j])
            if not s.success:
                raise RuntimeError(f"classify_transition: {s.message}")
            cache[a] = s
        return cache[a]

    opt = optimize.minimize_scalar(lambda a: -state_at(a).nu, bracket=(grid[k - 1], grid[k], grid[k + 1]),
                                   method="brent", tol=1e-10)
    out.update(transition="discontinuous", nu_fold=float(-opt.fun), b1_fold=float(opt.x), branch_nu_max=float(nus.max()))
    if has_G:
        gaps = np.array([free_energy_gap(pde, s) for s in states[:nus.size]])
        upper = np.nonzero((grid[:nus.size] > opt.x) & (gaps > 0))[0]
        if upper.size == 0:
            raise RuntimeError(f"classify_transition: G of the clustered branch stays below G of uniform up to "
                               f"b_1 = {grid[nus.size - 1]:.4g}: the Maxwell point was not bracketed")
        j = int(upper[0])
        lo = max(float(opt.x), grid[j - 1])
        a = optimize.brentq(lambda a: free_energy_gap(pde, state_at(a)), lo, grid[j], xtol=1e-13, rtol=1e-13)
        out.update(nu_global=float(state_at(a).nu), b1_global=float(a))
    else:
        out.update(nu_global=float("nan"))
    return Transition(**out)


def _bessel_ratio(order, x, terms=400):
    """``I_{order+1}(x) / I_order(x)`` by its continued fraction (Gauss), evaluated backwards: no overflow or
    underflow for any order (``ive`` underflows at orders of a few hundred); 400 terms are exact to round-off
    for ``x <= 50``."""
    r = 0.0
    for k in range(terms, 0, -1):
        r = 1.0 / (2.0 * (order + k) / x + r)
    return r


def beta_star_bessel(d) -> float:
    """The root of ``I_{d/2+1}(beta) / I_{d/2}(beta) = 1/d`` (MODEL.md section 7), by Brent's method.

    The ratio rises from ``beta / (d + 2)`` at 0 to 1, so the root lies in ``(0, 4)`` (at ``beta = 4`` the ratio
    exceeds ``1/d`` for every ``d >= 2``; ``d = 2``: root 2.4469).

    Parameters
    ----------
    d : int
        Dimension, ``>= 2``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``d`` not an integer ``>= 2``.
    """
    d = validate.integer("d", d, 2)
    return float(optimize.brentq(lambda b: _bessel_ratio(d / 2, b) - 1.0 / d, 1e-3, 4.0, xtol=1e-15, rtol=1e-15))


def beta_star_continuation(d, normalization="mean", lmax=48, bracket=None, beta_max=64.0) -> float:
    """The ``beta`` where the degree-1 branch's curvature ``nu_2`` (:func:`branch_curvature`) changes sign,
    by Brent's method on the solved branch (no Bessel root used).

    ``bracket``: ``(lo, hi)`` with ``nu_2(lo) < 0``; default ``(0.25, 1)``, ``hi`` doubled until ``nu_2(hi) > 0``
    up to ``beta_max``; a ``ValueError`` says so when no sign change is found there (a transition that stays
    continuous, as for softmax heads).

    Parameters
    ----------
    d : int
        Dimension, ``>= 2``.
    normalization : str
        The head's normalization.
    lmax : int
        Gegenbauer degree of the models.
    bracket : (float, float), optional
        ``0 < lo < hi``.
    beta_max : float
        Largest ``beta`` searched, ``> 0``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``d`` below 2, a bad ``beta_max`` or ``bracket``, a curvature not negative at ``lo``, or no sign change up
        to ``beta_max``.
    RuntimeError
        A degree-1 state that Newton does not solve (:func:`branch_curvature`).
    """
    d = validate.integer("d", d, 2)
    beta_max = validate.real("beta_max", beta_max, positive=True)
    f = lambda beta: branch_curvature(phase_transition_model(d, beta, normalization, lmax))   # noqa: E731
    if bracket is None:
        lo, hi = 0.25, 1.0
    else:
        lo, hi = (validate.real(f"bracket[{i}]", x, positive=True) for i, x in enumerate(bracket))
        if not lo < hi:
            raise ValueError(f"bracket must be (lo, hi) with 0 < lo < hi; received {tuple(bracket)!r}")
    if f(lo) >= 0:
        raise ValueError(f"bracket: the branch curvature must be negative (continuous) at lo = {lo:g}; received "
                         f"nu_2 = {f(lo):.3g}")
    while f(hi) < 0:
        if 2 * hi > beta_max:
            raise ValueError(f"no sign change of the branch curvature nu_2 up to beta = {hi:g} (d = {d}, "
                             f"{normalization}): the transition stays continuous there (raise beta_max to look "
                             f"further)")
        lo, hi = hi, 2 * hi
    return float(optimize.brentq(f, lo, hi, xtol=1e-12, rtol=1e-12))


LMAX_LADDER = (48, 64, 96, 128, 192)
"""Degrees tried by :func:`phase_transition` until two successive ones agree (the discretization check)."""


def phase_transition(d, beta, normalization="mean", lmax=None, rtol=1e-9) -> Transition:
    """:func:`classify_transition` of one zonal exp head of strength 1 on ``S^{d-1}`` at ``beta``, with its
    discretization checked: with ``lmax`` None, successive degrees of :data:`LMAX_LADDER` until ``nu_#``,
    ``nu_fold`` and ``nu_global`` of two successive ones agree to ``rtol``; with ``lmax`` given, that degree and
    the next of the ladder above it.

    Parameters
    ----------
    d : int
        Dimension of the ambient space (``S^{d-1}``), ``d >= 2``.
    beta : float
        The head's ``beta > 0``.
    normalization : str
        A name of :data:`meanfield.core.kernels.NORMALIZATIONS`.
    lmax : int, optional
        The first degree (at least 8); None: the ladder from its start.
    rtol : float
        Agreement of two successive degrees.

    Returns
    -------
    Transition
        The result of the larger of the two agreeing degrees, with its ``lmax`` and the
        ``discretization_change`` from the previous one.

    Raises
    ------
    ValueError
        If an argument is out of range, or no two successive degrees of the ladder agree.
    """
    d = validate.integer("d", d, 2)
    beta = validate.real("beta", beta, positive=True)
    validate.choice("normalization", normalization, NORMALIZATIONS)
    rtol = validate.real("rtol", rtol, positive=True)
    if lmax is None:
        ladder = LMAX_LADDER
    else:
        lmax = validate.integer("lmax", lmax, 8)
        ladder = (lmax,) + (tuple(L for L in LMAX_LADDER if L > lmax)[:1] or (lmax + 16,))
    keys = ("nu_sharp", "nu_fold", "nu_global")
    value = getattr
    prev, errors = None, []
    for L in ladder:
        try:
            res = classify_transition(phase_transition_model(d, beta, normalization, L))
        except RuntimeError as exc:
            errors.append(f"lmax = {L}: {exc}")
            prev = None
            continue
        if prev is not None:
            change = max(abs(value(res, k) - value(prev, k)) / abs(value(res, k)) for k in keys
                         if np.isfinite(value(res, k)))
            if change <= rtol:
                return replace(res, lmax=L, discretization_change=change)
        prev = res
    raise ValueError(f"phase_transition(d = {d}, beta = {beta:g}): no two successive degrees of {ladder} agree "
                     f"to rtol = {rtol:g}; " + ("; ".join(errors) if errors else "the values still change"))
