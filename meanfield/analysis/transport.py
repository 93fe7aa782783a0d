"""Optimal-transport distances on the sphere: particles vs particles, particles vs a density.

The only module of :mod:`meanfield` that imports POT (``ot``).  Numpy arrays in, a frozen
:class:`TransportResult` out.  Methods (``MODEL.md`` section 4):

``"exact"``
    Network simplex ``ot.emd2`` on the dense ``(n, m)`` cost matrix.  POT's default
    ``numItermax=100000`` silently returns a non-optimal cost for ``n >= 4000``
    (``DEPENDENCIES.md``); here the limit is raised and the result code is checked, and a
    non-optimal solve raises ``RuntimeError``.
``"sinkhorn"``
    Debiased entropic OT (Sinkhorn divergence) with ``ot.sinkhorn2``, plain ``'sinkhorn'``
    iterations, falling back to ``'sinkhorn_log'`` if NaN appears.
``"sliced"``
    A *different* discrepancy, a Monte-Carlo proxy: the spherical sliced Wasserstein distance
    (Bonet et al. 2023) for the geodesic metric, the Euclidean sliced Wasserstein distance for
    the chordal one.  Used by ``"auto"`` for two point sets when the cost matrix would be too large.
``"semidiscrete"`` (particles against a density only)
    W2 between the particles and the *continuous* band-limited density (no grid floor), by
    semi-discrete OT (:mod:`meanfield.analysis.semidiscrete`, numpy/scipy only):
    :func:`w2_particles_field`, and :func:`w2_particles_density` when the nodes are a
    :class:`~meanfield.core.sphere.SphereGrid`'s.  Used by ``"auto"`` there beyond the exact range.

A node-based W2 carries the node measure's own distance to the continuous density (the "grid
floor", ``DEPENDENCIES.md``): :func:`w2_particles_density` reports it in ``info["grid_floor"]``.
The kernel distance (MMD) is :mod:`meanfield.analysis.mmd` (it needs no POT).  Inputs are checked
by :mod:`meanfield.core.validate` (unit vectors, weights summing to 1 to ``validate.WEIGHTS_TOL``) and
:func:`meanfield.core.densities.check_density`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import ot
from scipy.special import logsumexp

from ..core import validate
from ..core.choices import W2_METHODS, W2_METRICS, W2_NEGATIVE_POLICIES
from ..core.cost import guard as cost_guard
from ..core.sphere import SphereGrid
from .semidiscrete import _check_inputs as _semidiscrete_inputs
from .semidiscrete import _solve as _semidiscrete
from .semidiscrete import geodesic_bracket as _geodesic_bracket
from .semidiscrete import grid_of_nodes

GRID_FLOOR_MAX_NODES = 8192
"""Largest node count for which :func:`w2_particles_density` computes the node measure's grid floor
(2048 nodes, the main job's default at lmax 31: about 1 s; 18 240 nodes: minutes)."""

SLICED_BYTES = 170.0
"""Peak bytes of the sliced distance per projected value (``n_projections x (n + m)``): measured with tracemalloc
104-124 (chordal), 145-166 (geodesic), n + m = 16 to 4000, 200 to 20 000 projections, d = 3."""
SLICED_SECONDS = {"geodesic": 8e-6, "chordal": 6e-7}
"""Seconds per projected value (measured 3.2e-6 to 1.0e-5 geodesic, 1.3e-7 to 6.5e-7 chordal, same runs)."""

__all__ = ["TransportResult", "w2_distance", "w2_particles_density", "w2_particles_field", "cost_matrix"]


@dataclass(frozen=True)
class TransportResult:
    """Outcome of one transport computation.

    Attributes
    ----------
    distance : float
        ``sqrt(max(cost, 0))``; a negative ``cost`` (round-off, or a debiased Sinkhorn value
        below zero) is flagged in ``info["cost_clipped_at_zero"]``.
    cost : float
        Optimal cost (``W2**2``), or its entropic / sliced counterpart.
    method : str
        Method actually used: ``"exact"``, ``"sinkhorn"``, ``"sliced"``, ``"semidiscrete"`` (or
        ``"mmd"`` for :func:`mmd_particles_field`).
    metric : str
        ``"geodesic"`` or ``"chordal"`` (for an MMD, the kernel: ``"sobolev"`` or ``"exp"``).
    negative_mass : float
        Total negative mass found (and dropped) in the weights; 0 for point sets.
    info : dict
        Method details (result code, iterations, ``reg``, ``n_projections``, ``seed``,
        warnings text, the reason of an ``"auto"`` choice).
    """

    distance: float
    cost: float
    method: str
    metric: str
    negative_mass: float = 0.0
    info: dict = field(default_factory=dict)


def cost_matrix(X, Y, metric="geodesic"):
    r"""Pairwise squared distances on the sphere, in float64.

    .. math::
        C_{ij} = \arccos\big(\mathrm{clip}(\langle x_i, y_j\rangle, -1, 1)\big)^2
        \quad\text{(geodesic)}, \qquad C_{ij} = |x_i - y_j|^2 = 2 - 2\langle x_i, y_j\rangle
        \quad\text{(chordal)}.

    Near coincident points the geodesic entry has absolute error up to ~``1e-15`` (the
    ``arccos`` of an inner product within ``eps`` of 1 is ``O(sqrt(eps)) ~ 1e-8``).

    Parameters
    ----------
    X : array_like, shape (n, d)
    Y : array_like, shape (m, d)
        Unit vectors.
    metric : {"geodesic", "chordal"}

    Returns
    -------
    C : ndarray, shape (n, m)

    Raises
    ------
    ValueError
        An unknown ``metric``, or ``X`` / ``Y`` not non-empty arrays of unit vectors of one dimension.
    """
    validate.choice("metric", metric, W2_METRICS)
    X = validate.unit_vectors("X", X, min_rows=1)
    Y = validate.unit_vectors("Y", Y, X.shape[1], min_rows=1)
    G = np.clip(X @ Y.T, -1.0, 1.0)
    if metric == "geodesic":
        return np.arccos(G) ** 2
    return np.maximum(2.0 - 2.0 * G, 0.0)


def _exact(a, b, M, max_iter):
    if max_iter is None:
        # Network-simplex pivots grow with the problem: about 3e4 were needed at 1000 x 1000
        # and the POT default 1e5 failed at 4000 x 4000; 10 n m is a generous ceiling.
        max_iter = max(10**6, 10 * M.size)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cost, log = ot.emd2(a, b, M, numItermax=int(max_iter), log=True)
    info = {"result_code": int(log["result_code"]), "max_iter": int(max_iter),
            "warnings": [str(w.message) for w in caught]}
    if log["result_code"] != 1:
        raise RuntimeError(f"ot.emd2 did not reach an optimal plan (result code {log['result_code']}, "
                           f"max_iter={max_iter}, warning: {log['warning']!r}); refusing to return a "
                           f"possibly non-optimal cost {float(cost):.6g}. Increase max_iter.")
    return float(cost), info


def _sinkhorn_cost(a, b, M, reg, max_iter, stop_thr=1e-9, accept_thr=1e-6):
    """One entropic cost <P, M> (POT's sinkhorn2), plain iterations with log-domain fallback."""
    out = {}
    for method in ("sinkhorn", "sinkhorn_log"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            val, log = ot.sinkhorn2(a, b, M, reg, method=method, numItermax=max_iter, stopThr=stop_thr, log=True)
        err = float(log["err"][-1]) if len(log["err"]) else np.nan
        out = {"solver": method, "niter": int(log["niter"]), "err": err,
               "warnings": [str(w.message) for w in caught]}
        if np.isfinite(val) and np.isfinite(err):
            break
    if not np.isfinite(val):
        raise RuntimeError(f"Sinkhorn produced NaN with both 'sinkhorn' and 'sinkhorn_log' (reg={reg:g})")
    if not err <= accept_thr:
        raise RuntimeError(f"Sinkhorn did not converge: marginal error {err:.3e} > {accept_thr:g} after "
                           f"{out['niter']} iterations (reg={reg:g}); increase max_iter or reg")
    return float(val), out


def _sinkhorn_self(a, M, reg, max_iter, stop_thr=1e-9):
    r"""Symmetric entropic cost of ``(a, a)`` by the averaged log-domain fixed point.

    .. math::
        f \leftarrow \tfrac12\Big(f - \varepsilon \log \sum_j a_j e^{(f_j - C_{ij})/\varepsilon}\Big),
        \qquad P_{ij} = a_i a_j e^{(f_i + f_j - C_{ij})/\varepsilon}.

    ``ot.sinkhorn2(a, a, ...)`` alternates non-symmetric updates and needed more than
    1e5 iterations at ``n = 200, reg = 1e-3 max C``; the averaged symmetric update converges
    in about 20 (Feydy et al. 2019).
    """
    with np.errstate(divide="ignore"):
        log_a = np.log(a)
    f = np.zeros_like(a)
    for it in range(1, max_iter + 1):
        log_p = log_a[:, None] + log_a[None, :] + (f[:, None] + f[None, :] - M) / reg
        err = float(np.linalg.norm(np.exp(logsumexp(log_p, axis=1)) - a))
        if err < stop_thr:
            break
        f = 0.5 * (f - reg * logsumexp(log_a[None, :] + (f[None, :] - M) / reg, axis=1))
    if not err <= 1e-6:
        raise RuntimeError(f"symmetric Sinkhorn did not converge: marginal error {err:.3e} after {it} iterations")
    return float(np.sum(np.exp(log_p) * M)), {"solver": "symmetric log-domain", "niter": it, "err": err}


def _sinkhorn(X, Y, a, b, metric, reg, max_iter):
    M_xy = cost_matrix(X, Y, metric)
    if reg is None:
        reg = 1e-3 * float(M_xy.max())  # entropic bias ~0.5 % before debiasing (DEPENDENCIES.md)
        if reg == 0.0:
            reg = 1e-12
    reg = validate.real("reg", reg, positive=True)
    max_iter = 100000 if max_iter is None else int(max_iter)
    s_xy, i_xy = _sinkhorn_cost(a, b, M_xy, reg, max_iter)
    del M_xy
    s_xx, i_xx = _sinkhorn_self(a, cost_matrix(X, X, metric), reg, max_iter)
    s_yy, i_yy = _sinkhorn_self(b, cost_matrix(Y, Y, metric), reg, max_iter)
    info = {"reg": reg, "max_iter": max_iter, "stop_thr": 1e-9, "raw_cost": s_xy,
            "self_costs": (s_xx, s_yy), "runs": {"xy": i_xy, "xx": i_xx, "yy": i_yy}}
    return s_xy - 0.5 * (s_xx + s_yy), info


def _sliced(X, Y, a, b, metric, n_projections, seed):
    info = {"n_projections": int(n_projections), "seed": seed}
    if metric == "geodesic":
        if X.shape[1] < 3:
            raise ValueError(f"method='sliced' with metric='geodesic' needs points on S^(d-1) with d >= 3; "
                             f"received d={X.shape[1]}")
        # POT measures each great circle in turns (length 1); 2 pi converts to radians.
        dist = 2 * np.pi * float(ot.sliced_wasserstein_sphere(X, Y, a, b, n_projections=n_projections,
                                                              p=2, seed=seed))
        info["variant"] = "spherical sliced Wasserstein (ot.sliced_wasserstein_sphere), radians"
    else:
        dist = float(ot.sliced_wasserstein_distance(X, Y, a, b, n_projections=n_projections, p=2, seed=seed))
        info["variant"] = "Euclidean sliced Wasserstein in R^d (ot.sliced_wasserstein_distance)"
    return dist**2, info


def w2_distance(X, Y, a=None, b=None, *, metric="geodesic", method="auto", reg=None,
                n_projections=200, seed=None, max_exact=8000**2, max_iter=None):
    r"""2-Wasserstein distance between two weighted point sets on :math:`S^{d-1}`.

    .. math::
        W_2^2(\mu, \nu) = \min_{P \ge 0,\ P 1 = a,\ P^T 1 = b} \sum_{ij} P_{ij} C_{ij},
        \qquad \mu = \sum_i a_i \delta_{x_i},\ \nu = \sum_j b_j \delta_{y_j},

    with :math:`C` from :func:`cost_matrix`.

    Parameters
    ----------
    X : array_like, shape (n, d)
    Y : array_like, shape (m, d)
        Unit vectors (``| |x|^2 - 1 | <= 1e-8``; never renormalized here).
    a : array_like, shape (n,), optional
    b : array_like, shape (m,), optional
        Nonnegative weights summing to 1 (to ``validate.WEIGHTS_TOL``); ``None`` means uniform.
    metric : {"geodesic", "chordal"}
    method : {"auto", "exact", "sinkhorn", "sliced"}
        (``"semidiscrete"`` needs a density: see :func:`w2_particles_field`.)
        ``"auto"``: ``"exact"`` if ``n * m <= max_exact`` else ``"sliced"`` (on this CPU exact
        ``emd2`` beat Sinkhorn at ``reg = 1e-3 max C`` for every size tried).
        ``"exact"`` builds the float64 ``(n, m)`` cost matrix (``8 n m`` bytes: 512 MB at
        ``8000**2``, and ``emd2`` takes ~20 s there); requested explicitly it runs at any size.
        ``"sinkhorn"`` returns the debiased value
        :math:`S_\varepsilon(a, b) - \tfrac12 (S_\varepsilon(a, a) + S_\varepsilon(b, b))`, where
        :math:`S_\varepsilon` is ``ot.sinkhorn2`` (the transport cost of the entropic plan); it
        needs three cost matrices.  ``"sliced"``: for ``"geodesic"``, the spherical sliced
        Wasserstein distance (in radians), a Monte-Carlo proxy that is *not* a bound on
        :math:`W_2` (the projection onto a great circle is not Lipschitz); for ``"chordal"``,
        the Euclidean sliced distance, a lower bound on chordal :math:`W_2`.
    reg : float, optional
        Absolute entropic regularization; default ``1e-3 * max(C)``.
    n_projections, seed : int
        Number of random projections (``>= 1``) and their seed (``"sliced"`` only).  ``n_projections`` and
        the cost of the sliced distance with it are checked whatever the method (``"auto"`` picks
        ``"sliced"`` for larger inputs: a call's refusals do not depend on its sizes' branch).
    max_exact : int
        Largest ``n * m`` for which ``"auto"`` picks ``"exact"``.
    max_iter : int, optional
        ``"exact"``: ``numItermax`` of ``emd2``, default ``max(1e6, 10 n m)``; a solve that stops
        short raises ``RuntimeError``.  ``"sinkhorn"``: default ``1e5``, stop threshold ``1e-9``
        on the marginals; non-convergence raises ``RuntimeError``.

    Returns
    -------
    TransportResult

    Raises
    ------
    ValueError
        An unknown ``metric`` or ``method``, ``method="semidiscrete"`` (it needs a density), ``X`` / ``Y`` not
        non-empty unit vectors of one dimension, weights that are not probabilities, ``n_projections`` below
        1, a ``reg`` that is not positive, ``"sliced"`` geodesic on the circle, or sizes above the memory or
        time limit.
    RuntimeError
        An exact solve stopped short of ``max_iter``, or a Sinkhorn solve that does not converge.
    """
    validate.choice("metric", metric, W2_METRICS)
    validate.choice("method", method, W2_METHODS)
    if method == "semidiscrete":
        raise ValueError("method='semidiscrete' needs a continuous density, not a second point set: use "
                         "w2_particles_field, or w2_particles_density with SphereGrid nodes; received two point sets")
    X = validate.unit_vectors("X", X, min_rows=1)
    Y = validate.unit_vectors("Y", Y, X.shape[1], min_rows=1)
    a_arr = validate.probability_weights("a", a, X.shape[0])
    b_arr = validate.probability_weights("b", b, Y.shape[0])
    n, m = X.shape[0], Y.shape[0]
    n_projections = validate.integer("n_projections", n_projections, 1)
    points = float(n_projections) * (n + m + X.shape[1])
    cost_guard(f"w2_distance's sliced distance with n_projections = {n_projections} over n + m = {n + m} points",
               bytes=points * SLICED_BYTES, seconds=points * SLICED_SECONDS[metric], fix="a smaller n_projections",
               detail=f"n_projections x (n + m + d) = {points:.3g} projected values")
    info = {}
    if method == "auto":
        method = "exact" if n * m <= max_exact else "sliced"
        info["auto"] = f"n*m = {n * m} {'<=' if method == 'exact' else '>'} max_exact = {max_exact}"
    if method == "exact":
        cost, extra = _exact(a_arr, b_arr, cost_matrix(X, Y, metric), max_iter)
    elif method == "sinkhorn":
        cost, extra = _sinkhorn(X, Y, a_arr, b_arr, metric, reg, max_iter)
    else:
        cost, extra = _sliced(X, Y, a_arr if a is not None else None, b_arr if b is not None else None,
                              metric, n_projections, seed)
    info.update(extra)
    if cost < 0:
        info["cost_clipped_at_zero"] = cost
    return TransportResult(float(np.sqrt(max(cost, 0.0))), float(cost), method, metric, 0.0, info)


def w2_particles_field(X, rho_lm, grid, a=None, *, metric="geodesic", tol=1e-8, n_quad=4, max_iter=100,
                       epsilon=1e-13):
    r"""W2 between particles and a continuous band-limited density on :math:`S^2` (semi-discrete OT).

    No grid is involved on the density side: the Laguerre cells of the particles are integrated
    against the density itself (:mod:`meanfield.analysis.semidiscrete`), so the result has no grid
    floor.  Cost ``O(n log n)`` per Newton iteration, about 6 iterations (measured on 2 shared, busy
    cores: ``n = 10^4`` in 0.8-2.6 s, ``10^5`` in 39-136 s; ``10^6`` needs ~3 GB and ~160 s CPU per
    iteration; ``benchmarks/TRANSPORT.md``).

    The solver is exact for the *chordal* cost :math:`|x - y|^2`.  For ``metric="geodesic"`` the
    squared distance is bracketed, with :math:`g(s) = (2 \arcsin(\sqrt{s}/2))^2` (the squared
    geodesic distance as a convex function of the squared chordal one):

    .. math:: g(W_{2,c}^2) \le W_{2,g}^2 \le \sum_i \frac{\theta_i^2}{2 - 2\cos\theta_i}
              \int_{L_i} |x_i - y|^2 \rho(y)\, dy,

    (Jensen's inequality; the chordal-optimal plan, :math:`\theta_i` the largest angle from
    :math:`x_i` within its cell), and the midpoint is returned with the bracket in
    ``info["geodesic_bracket"]`` (relative width measured 1.6e-3 at n = 1000, 3e-4 at n = 10^4).

    Parameters
    ----------
    X : array_like, shape (n, 3)
        Distinct unit vectors (not all on one plane), ``n >= 4``.
    rho_lm : array_like, shape (grid.nalm,)
        Density coefficients (``SphereGrid`` conventions), mass 1 (to ``validate.MASS_TOL``), nonnegative on
        the ``SphereGrid(lmax + 1)`` nodes.
    grid : SphereGrid
    a : array_like, shape (n,), optional
        Positive particle masses summing to 1 (default uniform).
    metric : {"geodesic", "chordal"}
    tol : float
        Largest cell-mass error relative to ``min(a)``, for both the Newton solve and the arc
        quadrature (``n_quad`` is raised until ``n_quad + 2`` points change no mass by more).
    n_quad : int
        Initial Gauss-Legendre points per Laguerre edge, ``>= 2``.
    max_iter : int
        Newton iterations before ``RuntimeError``.
    epsilon : float
        ducc0 point-transform accuracy (relative to the density's norm), in ``[1e-14, tol]``: the cell masses
        are evaluated to about ``epsilon``, so a coarser transform than the tolerance asked for is refused.  The
        Newton solve is reliable for ``epsilon <= tol / 1000`` (the rule of the spectral particle sums,
        :mod:`meanfield.models.fastsum`); a solver failure above that names ``epsilon`` as the likely cause.

    Returns
    -------
    TransportResult
        ``method="semidiscrete"``; ``info`` holds the solver's (Newton iterations, ``residual``,
        ``n_quad``, ``quad_change``, flips), ``chordal_cost`` and, for the geodesic metric,
        ``geodesic_bracket`` (bounds on the distance).

    Raises
    ------
    ValueError
        An unknown ``metric``; ``X``, ``a``, ``grid`` or ``rho_lm`` refused (unit vectors of length 3,
        positive weights, a SphereGrid, finite coefficients of mass 1), particles all on one plane or not
        distinct, a density negative on the nodes, an ``epsilon`` outside ``[1e-14, tol]``, a tolerance,
        ``n_quad`` or ``max_iter`` out of range, or a solve above the memory or time limit.
    RuntimeError
        The Laguerre (Newton) solve failing: no convergence, a triangulation failing its checks, or a cell
        without density mass.
    """
    validate.choice("metric", metric, W2_METRICS)
    inputs = _semidiscrete_inputs(X, a, grid, rho_lm, tol, n_quad, max_iter, b_name="a")
    tol = inputs[4]
    epsilon = validate.real("epsilon", epsilon, 1e-14, 1, hi_open=True,
                            what="a number in [1e-14, 1) (ducc0's reachable accuracy)")
    if epsilon > tol:
        raise ValueError(f"epsilon (the transforms' accuracy) must be <= tol = {tol:g}: the cell masses are "
                         f"evaluated only to about epsilon, so the Newton solve cannot meet tol (use epsilon <= "
                         f"tol / 1000 = {tol * 1e-3:g}); received epsilon = {epsilon!r}")
    try:
        sol = _semidiscrete(*inputs, epsilon)
    except RuntimeError as err:
        if epsilon <= max(tol * 1e-3, 1e-14):
            raise
        raise RuntimeError(f"{err} [the solve ran with epsilon = {epsilon:g} (the transforms' accuracy) above "
                           f"tol / 1000 = {tol * 1e-3:g}: masses evaluated to about epsilon are the likely cause; "
                           f"use epsilon <= {max(tol * 1e-3, 1e-14):g}]") from err
    info = dict(sol.info, chordal_cost=sol.cost)
    cost = sol.cost
    if metric == "geodesic":
        lower, upper = _geodesic_bracket(sol)
        cost = 0.5 * (lower + upper)
        info["geodesic_bracket"] = (float(np.sqrt(lower)), float(np.sqrt(upper)))
    if cost < 0:
        info["cost_clipped_at_zero"] = cost
    return TransportResult(float(np.sqrt(max(cost, 0.0))), float(cost), "semidiscrete", metric, 0.0, info)


def _grid_floor(grid, rho_lm, nodes, weights, metric):
    """Semi-discrete W2 between the node measure and the density it samples, or the reason why not."""
    try:
        res = w2_particles_field(nodes, rho_lm, grid, weights, metric=metric, tol=1e-6)
    except (ValueError, RuntimeError) as exc:
        return None, f"grid floor not computed: {exc}"
    return res.distance, "W2 between the node measure and the continuous density (semi-discrete)"


def w2_particles_density(X, nodes, density_weights, a=None, *, negative="error", grid=None, grid_floor=True, **kw):
    r"""W2 between particles and a density given on quadrature nodes.

    The density side is the discrete measure
    :math:`\sum_g \rho(x_g) w_g \delta_{x_g}` (``density_weights[g] = rho(x_g) * w_g``) for the
    node-based methods, and the continuous density for ``method="semidiscrete"``.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Particles (unit vectors).
    nodes : array_like, shape (G, d)
        Quadrature nodes (unit vectors).
    density_weights : array_like, shape (G,)
        ``rho * w``; must sum to 1 to ``validate.MASS_TOL`` (negative entries included).
    a : array_like, shape (n,), optional
        Particle weights (default uniform).
    negative : {"error", "drop"}
        Negative entries: ``"error"`` raises ``ValueError`` reporting the negative mass;
        ``"drop"`` removes them, renormalizes the positive part (which sums to
        ``1 + negative_mass``) and records ``negative_mass`` in the result.
    grid : SphereGrid, optional
        The grid whose nodes (``grid.nodes.reshape(-1, 3)``) these are; inferred by
        :func:`grid_of_nodes` when omitted.  With a grid, ``rho = density_weights / grid.weights``
        is read as the band-limited density ``grid.analysis(rho)``.
    grid_floor : bool
        With a grid and a node-based method: also compute the node measure's own W2 to the
        continuous density, ``info["grid_floor"]`` (``|W2(nodes) - W2(field)| <= grid_floor`` by
        the triangle inequality).
    **kw
        Passed to :func:`w2_distance` (``metric``, ``method``, ``max_exact``, ...); ``method`` may also
        be ``"semidiscrete"`` (needs a grid; ``tol``, ``n_quad`` passed on).  ``"auto"``: ``"exact"``
        if ``n G <= max_exact``, else ``"semidiscrete"`` with a grid, else ``"sliced"``.

    Returns
    -------
    TransportResult
        With ``negative_mass`` set, ``info["n_dropped"]`` the number of dropped nodes, and
        ``info["grid_floor"]`` (None without a grid or for ``"semidiscrete"``).

    Raises
    ------
    ValueError
        An unknown ``negative`` policy or ``method``; ``nodes`` / ``X`` not unit vectors of one dimension;
        ``density_weights`` not finite or not summing to 1; negative entries with ``negative="error"``; a
        ``grid`` whose nodes are not ``nodes``; ``"semidiscrete"`` without a grid or with negative mass;
        or what :func:`w2_distance` refuses.
    RuntimeError
        A solver failing (except under ``"auto"``, which falls back to the sliced distance for the
        semi-discrete one).
    """
    validate.choice("negative", negative, W2_NEGATIVE_POLICIES)
    method = kw.pop("method", "auto")
    validate.choice("method", method, W2_METHODS)
    metric = kw.get("metric", "geodesic")
    nodes = validate.unit_vectors("nodes", nodes, min_rows=1)
    X = validate.unit_vectors("X", X, nodes.shape[1], min_rows=1)
    rw = validate.signed_weights("density_weights", density_weights, nodes.shape[0])
    if grid is None:
        grid = grid_of_nodes(nodes)
    elif not isinstance(grid, SphereGrid) or grid.nlat * grid.nlon != nodes.shape[0] \
            or np.max(np.abs(grid.nodes.reshape(-1, 3) - nodes)) > 1e-12:
        raise ValueError(f"grid must be the SphereGrid whose nodes.reshape(-1, 3) are `nodes` ({nodes.shape[0]} "
                         f"nodes); received {grid!r}")
    neg_mask = rw < 0
    neg_mass = float(-rw[neg_mask].sum())
    if neg_mass > 0 and negative == "error":
        raise ValueError(f"density_weights has {int(neg_mask.sum())} negative entries with total negative mass "
                         f"{neg_mass:.6e}; pass negative='drop' to drop them and renormalize")
    info = {}
    auto = method == "auto"
    if auto:
        n, G, max_exact = np.shape(X)[0], int(np.sum(~neg_mask)), kw.get("max_exact", 8000**2)
        method = "exact" if n * G <= max_exact else ("semidiscrete" if grid is not None else "sliced")
        info["auto"] = (f"n*G = {n * G} {'<=' if method == 'exact' else '>'} max_exact = {max_exact}"
                        + ("" if method == "exact" else f", nodes {'are' if grid else 'are not'} a SphereGrid's"))
    rho_lm = None if grid is None else grid.analysis(rw.reshape(grid.shape) / grid.weights)
    if method == "semidiscrete":
        if grid is None:
            raise ValueError("method='semidiscrete' needs the density's SphereGrid: pass grid=, or nodes equal to "
                             "grid.nodes.reshape(-1, 3); received nodes of no SphereGrid")
        try:
            if neg_mass > 0:
                raise ValueError(f"method='semidiscrete' needs a nonnegative density; received negative mass "
                                 f"{neg_mass:.6e} (negative='drop' applies to node-based methods only)")
            opts = {k: kw[k] for k in ("metric", "tol", "n_quad", "max_iter") if k in kw}
            res = w2_particles_field(X, rho_lm, grid, a, **opts)
        except (ValueError, RuntimeError) as err:
            if not auto:
                raise
            # "auto" never fails where a distance exists: concentrated (clustered) particles or a density
            # with negative mass defeat the Laguerre solver; the spherical sliced distance always applies
            info["auto"] += f"; semidiscrete failed ({err}); sliced instead"
            method = "sliced"
        else:
            info.update(res.info, n_dropped=0, grid_floor=None)
            return TransportResult(res.distance, res.cost, res.method, res.metric, 0.0, info)
    keep = ~neg_mask
    res = w2_distance(X, nodes[keep], a, rw[keep] / rw[keep].sum(), method=method, **kw)
    info.update(res.info, n_dropped=int(neg_mask.sum()), grid_floor=None)
    if grid is not None and grid_floor and nodes.shape[1] == 3 and keep.sum() > GRID_FLOOR_MAX_NODES:
        info["grid_floor"], info["grid_floor_note"] = None, (
            f"not computed: {int(keep.sum())} nodes > GRID_FLOOR_MAX_NODES = {GRID_FLOOR_MAX_NODES} (a semi-discrete "
            f"solve with the polar nodes' tiny cells took minutes at 18 240 nodes)")
    elif grid is not None and grid_floor and nodes.shape[1] == 3:
        try:
            info["grid_floor"], info["grid_floor_note"] = _grid_floor(grid, rho_lm, nodes[keep],
                                                                      rw[keep] / rw[keep].sum(), metric)
        except (ValueError, RuntimeError) as err:      # e.g. a density with negative mass: no floor, say why
            info["grid_floor"], info["grid_floor_note"] = None, f"not computed: {err}"
    return TransportResult(res.distance, res.cost, res.method, res.metric, neg_mass, info)
