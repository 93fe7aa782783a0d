r"""Semi-discrete optimal transport on S^2: particles against a band-limited density.

Numpy, scipy and pyamg (no POT); :mod:`meanfield.analysis.transport` wraps it into a
``TransportResult``.  For the chordal cost :math:`c(x, y) = |x - y|^2` and dual weights
:math:`\psi`, the Laguerre cell of particle :math:`x_i` is

.. math:: L_i(\psi) = \{y \in S^2 : |y - x_i|^2 - \psi_i \le |y - x_j|^2 - \psi_j\ \forall j\}
          = \{y : 2\langle y, x_i\rangle + \psi_i \ge 2\langle y, x_j\rangle + \psi_j\},

the sphere's trace of a 3-D power diagram: its edges are arcs of small circles
:math:`\langle y, n_{ij}\rangle = c_{ij}`, :math:`n_{ij} = (x_j - x_i)/|x_j - x_i|`,
:math:`c_{ij} = (\psi_i - \psi_j) / (2 |x_j - x_i|)`.

Algorithm
---------
Combinatorics
    The dual (regular) triangulation starts from the spherical Delaunay triangulation
    (``scipy.spatial.ConvexHull`` of the particles, valid also for particles within a
    hemisphere) and is updated by rounds of vectorized Lawson flips: an edge ``ij`` between
    triangles ``(i, j, k)`` and ``(j, i, l)`` is flipped when ``l`` beats ``i, j, k`` at their
    common vertex.  A diagram that flips cannot repair (a vanishing vertex) is reported invalid
    and the Newton step is shortened.  Flips make the triangulation *locally* regular; the final
    diagram is checked globally (no vertex beaten by another particle, k-d tree candidates).

Limitation: when the particles are far more concentrated than the density (e.g. a cluster in a
cap against a density spread over the sphere) the flips can lock into a locally-but-not-globally
regular triangulation; the solver then raises ``RuntimeError`` (never returns such a value) and a
node-based method must be used.

Cell integrals
    With :math:`\Delta u = \rho - \bar\rho` solved spectrally (:math:`u_{lm} = -\rho_{lm}/(l(l+1))`),
    :math:`\int_{L_i} \rho = \bar\rho\, |L_i| + \oint_{\partial L_i} \partial_\nu u`; the area
    :math:`|L_i|` by Gauss-Bonnet (arc of a circle of "height" ``c`` spanning the angle
    :math:`\Delta\varphi` has :math:`\int \kappa_g = -c \Delta\varphi`), the flux by Gauss-Legendre
    along each arc (``n_quad`` points; gradients by ducc0 at all points at once).  First moments
    :math:`\int_{L_i} y \rho` (for the cost) the same way with :math:`y_k \rho` (degree ``lmax + 1``).
Newton
    :math:`\partial G_i / \partial \psi_j = -\int_{\Gamma_{ij}} \rho\, ds / (2 |x_i - x_j| \sin\alpha)
    = -\int \rho\, d\varphi / (2|x_i - x_j|)` (``j != i``), rows summing to zero; damped as in
    Kitagawa, Merigot & Thibert (2019): a step is accepted when every cell keeps mass
    ``>= eps0`` and the residual norm drops by the factor ``1 - tau/2``.  The Newton matrix is a
    weighted graph Laplacian: sparse LU up to ``_LU_MAX`` (5e4) cells, beyond it conjugate gradients
    preconditioned by smoothed-aggregation algebraic multigrid (pyamg) to relative residual 1e-6
    (~20-30 iterations at 1e5-1e6, where Jacobi-CG needed thousands; benchmarks/RESULTS_semidiscrete.md).

Accuracy: Newton stops when :math:`\max_i |G_i - b_i| \le` ``tol`` :math:`\cdot \min b`; then the
masses are recomputed with ``n_quad + 2`` points and ``n_quad`` is raised (and Newton resumed)
until both rules agree to the same tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyamg
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.spatial import ConvexHull, QhullError, cKDTree

from ..core import cost, validate
from ..core.densities import check_density
from ..core.sphere import SphereGrid

__all__ = ["LaguerreSolution", "solve_semidiscrete", "grid_of_nodes", "geodesic_bracket"]

_POWER_TOL = 1e-13   # ties of power scores (~2 in size) below this are not flips (co-circular nodes)
_CHUNK = 2_000_000   # arc quadrature points per ducc0 call (memory: ~100 bytes per point)
_LU_MAX = 50_000     # largest n for a direct sparse solve of the Newton system (AMG-CG is faster beyond:
                     # 0.9 s against LU's 1.8 s at 1e5, benchmarks/RESULTS_semidiscrete.md)
_CG_RTOL = 1e-6      # relative residual of the AMG-preconditioned CG (an inexact Newton step)
_CG_MAXITER = 500    # AMG-CG needs ~20-30 iterations for 1e-6 at 1e5-1e6; a stall shows in info


@dataclass(frozen=True)
class LaguerreSolution:
    """Converged semi-discrete transport between weighted particles and a density on S^2.

    Attributes
    ----------
    cost : float
        Chordal :math:`W_2^2 = \\sum_i \\int_{L_i} |x_i - y|^2 \\rho(y) dy`.
    psi : ndarray (n,)
        Dual weights (``psi[0] = 0`` gauge).
    masses, areas : ndarray (n,)
        :math:`\\int_{L_i} \\rho` and :math:`|L_i|` at ``psi``.
    cell_costs : ndarray (n,)
        :math:`\\int_{L_i} |x_i - y|^2 \\rho`; sums to ``cost``.
    max_angle : ndarray (n,)
        Largest geodesic distance from ``x_i`` to a point of its cell (vertices and arc nodes).
    info : dict
        ``newton_iterations``, ``residual`` (max relative mass error), ``n_quad``, ``quad_change``
        (max relative mass change from ``n_quad`` to ``n_quad + 2`` points), ``flips``, ``damping``.
    """

    cost: float
    psi: np.ndarray
    masses: np.ndarray
    areas: np.ndarray
    cell_costs: np.ndarray
    max_angle: np.ndarray
    info: dict = field(default_factory=dict)


# ---------------------------------------------------------------------- triangulation
def _delaunay(X):
    """CCW (seen from outside) Delaunay triangles of unit vectors X (n, 3) from their convex hull."""
    try:
        hull = ConvexHull(X)
    except QhullError as exc:
        raise ValueError(f"X: the particles must not all lie on one plane (qhull failed: {str(exc).splitlines()[0]})") \
            from None
    tri = hull.simplices.copy()
    if hull.vertices.size != X.shape[0]:
        raise ValueError(f"X: every particle must be a vertex of its convex hull (distinct points); received "
                         f"{X.shape[0] - hull.vertices.size} duplicate or hidden particles")
    a, b, c = X[tri[:, 0]], X[tri[:, 1]], X[tri[:, 2]]
    flip = np.einsum("ij,ij->i", np.cross(b - a, c - a), hull.equations[:, :3]) < 0
    tri[flip] = tri[flip][:, [0, 2, 1]]
    return tri


def _edges(tri, n):
    """Undirected edges ``i < j`` with their triangles ``t1 = (i, j, k)``, ``t2 = (j, i, l)``; None if
    the triangle list is not a closed oriented manifold."""
    i = tri.ravel()
    j = np.roll(tri, -1, axis=1).ravel()
    k = np.roll(tri, -2, axis=1).ravel()
    t = np.repeat(np.arange(tri.shape[0]), 3)
    lo, hi = np.minimum(i, j).astype(np.int64), np.maximum(i, j).astype(np.int64)
    order = np.argsort(lo * n + hi)                  # equal keys come in pairs: no stability needed
    if order.size % 2:
        return None
    h1, h2 = order[0::2], order[1::2]                 # an undirected edge's two half-edges, adjacent
    if np.any(lo[h1] != lo[h2]) or np.any(hi[h1] != hi[h2]) or np.any(i[h1] == i[h2]) \
            or np.any(lo[h1[1:]] * n + hi[h1[1:]] == lo[h1[:-1]] * n + hi[h1[:-1]]):
        return None                                   # not a closed oriented manifold
    swap = i[h1] > j[h1]
    h, twin_h = np.where(swap, h2, h1), np.where(swap, h1, h2)   # h runs i -> j with i < j
    return {"i": i[h], "j": j[h], "t1": t[h], "k": k[h], "t2": t[twin_h], "l": k[twin_h]}


def _vertices(X, psi, tri):
    """Power vertices y_t (T, 3) where cells tri[t] tie, on the outer side; ok[t] False if none."""
    xi, xj, xk = X[tri[:, 0]], X[tri[:, 1]], X[tri[:, 2]]
    e1, e2 = xj - xi, xk - xi
    r1 = 0.5 * (psi[tri[:, 0]] - psi[tri[:, 1]])
    r2 = 0.5 * (psi[tri[:, 0]] - psi[tri[:, 2]])
    g11, g12, g22 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
    det = g11 * g22 - g12 * g12
    det = np.where(det > 0, det, np.inf)
    c1 = (g22 * r1 - g12 * r2) / det
    c2 = (g11 * r2 - g12 * r1) / det
    p = c1[:, None] * e1 + c2[:, None] * e2
    d = np.cross(e1, e2)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    disc = 1.0 - (p * p).sum(1)
    ok = (disc > 0) & np.isfinite(det)
    # no tie point on the sphere: the point of the sphere nearest the line of ties stands in for
    # it, so the flip test can still tell which neighbour takes over there
    near = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-300)
    return np.where(ok[:, None], p + np.sqrt(np.maximum(disc, 0.0))[:, None] * d, near), ok


def _regular(X, psi, tri, max_rounds=500):
    """Lawson-flip ``tri`` into the regular triangulation for ``psi``: (tri, edges, Y, flips) or None."""
    n, flips = X.shape[0], 0
    tri = tri.copy()
    Y, ok = _vertices(X, psi, tri)            # then updated only where a flip changed a triangle
    for _ in range(max_rounds):
        E = _edges(tri, n)
        if E is None:
            return None
        y1, y2 = Y[E["t1"]], Y[E["t2"]]
        i, j = E["i"], E["j"]
        bad = (2 * (y1 * X[E["l"]]).sum(1) + psi[E["l"]] > 2 * (y1 * X[i]).sum(1) + psi[i] + _POWER_TOL) \
            | (2 * (y2 * X[E["k"]]).sum(1) + psi[E["k"]] > 2 * (y2 * X[j]).sum(1) + psi[j] + _POWER_TOL)
        if not bad.any():
            return (tri, E, Y, flips) if ok.all() else None
        v = np.flatnonzero(bad)
        # a flip is valid when neither new triangle folds over: both keep a plane normal on the
        # side of the old pair's (a convex quad of the polyhedral surface with these triangles)
        xi, xj, xk, xl = (X[E[c][v]] for c in "ijkl")
        old = np.cross(xj - xi, xk - xi) + np.cross(xi - xj, xl - xj)
        convex = ((np.cross(xj - xl, xk - xl) * old).sum(1) > 0) & ((np.cross(xi - xk, xl - xk) * old).sum(1) > 0)
        v = v[convex]
        if v.size == 0:
            return None
        claim = np.full(tri.shape[0], np.iinfo(np.int64).max)
        np.minimum.at(claim, E["t1"][v], v)
        np.minimum.at(claim, E["t2"][v], v)
        v = v[(claim[E["t1"][v]] == v) & (claim[E["t2"][v]] == v)]
        i, j, k, l = E["i"][v], E["j"][v], E["k"][v], E["l"][v]
        tri[E["t1"][v]] = np.stack([l, j, k], 1)
        tri[E["t2"][v]] = np.stack([k, i, l], 1)
        changed = np.concatenate([E["t1"][v], E["t2"][v]])
        Y[changed], ok[changed] = _vertices(X, psi, tri[changed])
        flips += v.size
    return None


def _beaten_vertices(X, psi, tri, Y):
    """Number of diagram vertices where a site outside the triangle scores higher (0 for the true
    diagram).  Lawson flips only make the triangulation *locally* regular; when the particles leave
    large parts of the sphere to a few cells that can differ from the regular one.  The best site at
    ``y`` minimizes ``|y - x_j|^2 - psi_j``, i.e. it is the nearest neighbour of ``(y, 0)`` among the
    lifted points ``(x_j, sqrt(max(psi) - psi_j))`` of R^4: one k-d tree query per vertex."""
    top = psi.max()
    tree = cKDTree(np.column_stack([X, np.sqrt(top - psi)]))
    dist, _ = tree.query(np.column_stack([Y, np.zeros(Y.shape[0])]))
    own = ((Y - X[tri[:, 0]]) ** 2).sum(1) + top - psi[tri[:, 0]]
    return int(np.sum(dist**2 < own - 1e-11))


# ---------------------------------------------------------------------- geometry of a diagram
class _Diagram:
    """Arcs, areas and quadrature nodes of the Laguerre diagram for one ``psi``."""

    def __init__(self, X, psi, tri, E, Y, n_quad):
        n = X.shape[0]
        self.n, self.E = n, E
        i, j = E["i"], E["j"]
        diff = X[j] - X[i]
        self.dist = np.linalg.norm(diff, axis=1)
        nrm = diff / self.dist[:, None]
        a, b = Y[E["t2"]], Y[E["t1"]]                 # cell i's arc runs from y_t2 to y_t1
        c = 0.5 * ((a * nrm).sum(1) + (b * nrm).sum(1))
        ap, bp = a - c[:, None] * nrm, b - c[:, None] * nrm
        rot = -nrm                                   # cell i on the left: clockwise about n
        theta = np.arctan2((np.cross(ap, bp) * rot).sum(1), (ap * bp).sum(1))
        dphi = np.where(theta >= -1e-12, np.maximum(theta, 0.0), theta + 2 * np.pi)
        self.c, self.dphi, self.nrm = c, dphi, nrm
        # Gauss-Bonnet: area_i = 2 pi - sum(int kappa_g) - sum(exterior angles)
        arcs = c * dphi
        area = 2 * np.pi + np.bincount(i, arcs, n) - np.bincount(j, arcs, n)
        T = tri.shape[0]
        for r in range(3):
            ci, cj, ck = tri[:, r], tri[:, (r + 1) % 3], tri[:, (r + 2) % 3]
            t_in = np.cross(Y, X[cj] - X[ci])
            t_out = np.cross(Y, X[ck] - X[ci])
            ext = np.arctan2((np.cross(t_in, t_out) * Y).sum(1), (t_in * t_out).sum(1))
            area -= np.bincount(ci, ext, n)
        self.area = area
        # Gauss-Legendre nodes along each arc: y(phi) = c n + cos(phi) a' + sin(phi) (rot x a')
        xi_q, w_q = np.polynomial.legendre.leggauss(n_quad)
        phi = 0.5 * dphi[:, None] * (1.0 + xi_q[None, :])
        self.wq = 0.5 * dphi[:, None] * w_q[None, :]               # (E, q), dphi-measure
        rxa = np.cross(rot, ap)
        self.points = (c[:, None, None] * nrm[:, None, :] + np.cos(phi)[..., None] * ap[:, None, :]
                       + np.sin(phi)[..., None] * rxa[:, None, :]).reshape(-1, 3)
        self.points /= np.linalg.norm(self.points, axis=1, keepdims=True)
        self.q = n_quad
        self.T = T
        self._X, self._tri, self._Y = X, tri, Y

    def max_angle(self):
        """Largest angle from x_i to its cell: vertices and arc nodes (both sides of each arc).  Only the
        final diagram needs it (for the geodesic bracket), so it is not computed for every trial step."""
        X, tri, Y, i, j = self._X, self._tri, self._Y, self.E["i"], self.E["j"]
        cmin = np.full(self.n, 1.0)
        for r in range(3):
            np.minimum.at(cmin, tri[:, r], (Y * X[tri[:, r]]).sum(1))
        P = self.points.reshape(-1, self.q, 3)
        np.minimum.at(cmin, i, np.einsum("eqk,ek->eq", P, X[i]).min(1))
        np.minimum.at(cmin, j, np.einsum("eqk,ek->eq", P, X[j]).min(1))
        return np.arccos(np.clip(cmin, -1.0, 1.0))


class _Fields:
    """Spectral data of the density on ``SphereGrid(lmax + 1)``: rho, its potential and first moments."""

    def __init__(self, grid, rho_lm, epsilon):
        L = grid.lmax
        g1 = SphereGrid(L + 1, nthreads=grid.nthreads)
        pos = g1.mstart[grid.m_index].astype(np.int64) + grid.l_index
        r1 = np.zeros(g1.nalm, np.complex128)
        r1[pos] = rho_lm
        ll1 = g1.l_index * (g1.l_index + 1.0)
        inv = np.where(ll1 > 0, -1.0 / np.where(ll1 > 0, ll1, 1.0), 0.0)
        y00 = 1.0 / np.sqrt(4 * np.pi)
        rho_grid = g1.synthesis(r1)
        self.g1, self.eps, self.rho_lm = g1, epsilon, r1
        self.rho_min_grid = float(rho_grid.min())
        self.mean = r1[0].real * y00                 # mean of rho over the sphere (= mass / 4 pi)
        self.u_lm = inv * r1
        self.mom_lm, self.mom_mean = [], []
        for k in range(3):
            f_lm = g1.analysis(rho_grid * g1.nodes[..., k])   # y_k rho: degree L + 1, exact here
            self.mom_lm.append(inv * f_lm)
            self.mom_mean.append(f_lm[0].real * y00)

    def arc_values(self, points, moments=False):
        """rho and <grad u, .> pieces at points (chunked): rho (P,), grad u (P, 3), grad u_k list."""
        P = points.shape[0]
        rho, gu = np.empty(P), np.empty((P, 3))
        gm = [np.empty((P, 3)) for _ in range(3)] if moments else []
        for s in range(0, P, _CHUNK):
            ps = self.g1.prepare_points(points[s:s + _CHUNK], self.eps)
            rho[s:s + _CHUNK] = ps.evaluate(self.rho_lm)
            gu[s:s + _CHUNK] = ps.gradient(self.u_lm)
            for k in range(len(gm)):
                gm[k][s:s + _CHUNK] = ps.gradient(self.mom_lm[k])
        return rho, gu, gm


def _masses(D, F, with_hessian=True):
    """Cell masses G (n,) and the Newton matrix entries H_ij (E,) on diagram D."""
    rho, gu, _ = F.arc_values(D.points)
    q = D.q
    flux = (np.einsum("eqk,ek->eq", gu.reshape(-1, q, 3), D.nrm) * D.wq).sum(1)
    n, i, j = D.n, D.E["i"], D.E["j"]
    G = F.mean * D.area + np.bincount(i, flux, n) - np.bincount(j, flux, n)
    H = (rho.reshape(-1, q) * D.wq).sum(1) / (2.0 * D.dist) if with_hessian else None
    return G, H


def _newton_system(D, H, G, b):
    """The Newton system of the cell masses: the weighted graph Laplacian of the Laguerre diagram (edge
    weights ``H``) without its first row and column (the weights are defined up to a constant), and
    its right-hand side ``(b - G)[1:]``; CSR, shape (n - 1, n - 1)."""
    n, i, j = D.n, D.E["i"], D.E["j"]
    A = sp.coo_matrix((np.concatenate([-H, -H, np.bincount(i, H, n) + np.bincount(j, H, n)]),
                       (np.concatenate([i, j, np.arange(n)]), np.concatenate([j, i, np.arange(n)]))),
                      shape=(n, n)).tocsr()[1:, 1:]
    return A, (b - G)[1:]


def amg_preconditioner(A):
    """One smoothed-aggregation V-cycle (pyamg) as a preconditioner for CG on the SPD matrix ``A``."""
    return pyamg.smoothed_aggregation_solver(A, symmetry="symmetric", max_coarse=500).aspreconditioner(cycle="V")


def _newton_step(D, H, G, b):
    """Newton direction and the number of CG iterations (0 for LU), with ``delta[0] = 0`` (the reduced matrix is a weighted graph Laplacian with one
    row and column removed: symmetric positive definite).  Sparse LU up to ``_LU_MAX`` cells; beyond it
    conjugate gradients preconditioned by smoothed-aggregation algebraic multigrid (pyamg) to relative
    residual ``_CG_RTOL`` (an inexact Newton step; SuperLU's fill exhausts 4 GB at 1e6).  Measured on the
    first Newton system of the benchmark density (benchmarks/RESULTS_semidiscrete.md): at n = 1e6 AMG-CG
    needs 27 iterations (setup included ~14 s) where Jacobi-CG needed > 1000 iterations for ``1e-4``."""
    n = D.n
    A, rhs = _newton_system(D, H, G, b)
    delta = np.zeros(n)
    if n <= _LU_MAX:
        delta[1:] = spla.spsolve(A.tocsc(), rhs)
        return delta, 0, True
    else:
        count = [0]
        delta[1:], status = spla.cg(A, rhs, M=amg_preconditioner(A), rtol=_CG_RTOL, maxiter=_CG_MAXITER,
                                    callback=lambda _: count.__setitem__(0, count[0] + 1))
        if status < 0:
            raise RuntimeError(f"semi-discrete Newton: AMG-preconditioned CG broke down (scipy status {status})")
    # status > 0: not at _CG_RTOL after _CG_MAXITER iterations; the inexact direction still goes to the damped
    # line search (convergence is judged on the masses), and the step is counted in info["cg_unconverged"]
    return delta, count[0], status == 0


SEMIDISCRETE_BYTES_PER_NODE = 256.0
"""Peak bytes per arc quadrature node (edges x (n_quad + 2): the diagram and its check with two more
nodes coexist); measured with tracemalloc 220-255, n = 1000 and 4000, n_quad = 4 to 200."""
SEMIDISCRETE_SECONDS_PER_NODE = 1.5e-6
"""Seconds per arc node per Newton iteration (measured 0.7e-6 to 3.4e-6, same runs); 8 iterations are counted
(5-6 measured)."""


def estimate_semidiscrete(n, n_quad) -> cost.Cost:
    """Estimated peak memory and time of :func:`solve_semidiscrete` for ``n`` particles and ``n_quad`` nodes per
    Laguerre edge (``3 n - 6`` edges of the spherical Delaunay triangulation)."""
    nodes = float(3 * n - 6) * (n_quad + 2)
    return cost.Cost(f"semi-discrete W2 of n = {n} particles with n_quad = {n_quad}", nodes * SEMIDISCRETE_BYTES_PER_NODE,
                     8 * nodes * SEMIDISCRETE_SECONDS_PER_NODE,
                     f"{3 * n - 6} Laguerre edges x (n_quad + 2) arc nodes = {nodes:.3g} nodes")


def solve_semidiscrete(X, b, grid, rho_lm, *, tol=1e-8, n_quad=4, max_iter=100, epsilon=1e-13):
    """Optimal Laguerre cells of particles ``X`` (n, 3) with masses ``b`` (n,) for the density ``rho_lm``.

    Checked as by :func:`meanfield.analysis.transport.w2_particles_field` (``ValueError`` naming the argument):
    ``n >= 4`` unit rows, ``b > 0`` summing to 1, ``rho_lm`` of mass 1 on the ``SphereGrid`` ``grid``,
    ``tol`` in ``[1e-13, 1)``, ``n_quad >= 2``, ``max_iter >= 1``.  ``RuntimeError``: no convergence in
    ``max_iter`` Newton iterations, or a diagram the damped Newton method cannot repair (module docstring).

    Parameters
    ----------
    X : array_like, shape (n, 3)
        Distinct unit vectors, ``n >= 4``, not all on one plane.
    b : array_like, shape (n,)
        Positive masses summing to 1.
    grid : SphereGrid
        The density's grid.
    rho_lm : array_like, shape (grid.nalm,)
        Density coefficients of mass 1, nonnegative on the nodes.
    tol : float
        Largest cell-mass error relative to ``min(b)``, in ``[1e-13, 1)``.
    n_quad : int
        Initial Gauss-Legendre points per Laguerre edge, ``>= 2``.
    max_iter : int
        Newton iterations, ``>= 1``.
    epsilon : float
        Accuracy of the point transforms.

    Returns
    -------
    LaguerreSolution

    Raises
    ------
    ValueError
        An argument out of the ranges above (named).
    RuntimeError
        No convergence in ``max_iter`` iterations, or a diagram the damped Newton method cannot repair.
    """
    return _solve(*_check_inputs(X, b, grid, rho_lm, tol, n_quad, max_iter), epsilon)


def _check_inputs(X, b, grid, rho_lm, tol, n_quad, max_iter, b_name="b"):
    """The checked ``X, b, grid, rho_lm, tol, n_quad, max_iter`` of a semi-discrete solve (``b_name``: the masses'
    argument name in the messages, ``a`` for :func:`meanfield.analysis.transport.w2_particles_field`)."""
    X = validate.unit_vectors("X", X, 3, min_rows=4)
    b = validate.probability_weights(b_name, b, X.shape[0])
    if b.min() <= 0:
        raise ValueError(f"{b_name} must be positive for semi-discrete OT; received min {b.min():.3e}")
    tol = validate.real("tol", tol, 1e-13, 1, hi_open=True, what="a number in [1e-13, 1)")
    return (X, b, grid, check_density(grid, rho_lm), tol, validate.integer("n_quad", n_quad, 2),
            validate.integer("max_iter", max_iter, 1))


def _solve(X, b, grid, rho_lm, tol, n_quad, max_iter, epsilon):
    """:func:`solve_semidiscrete` of checked inputs."""
    n = X.shape[0]
    estimate_semidiscrete(n, n_quad).check("a smaller n_quad (it is raised as needed) or fewer particles")
    F = _Fields(grid, rho_lm, epsilon)
    if F.rho_min_grid < 0:
        raise ValueError(f"rho_lm must be nonnegative for semi-discrete transport; its minimum on the "
                         f"{F.g1.nlat}x{F.g1.nlon} grid is {F.rho_min_grid:.3e}")
    psi = np.zeros(n)
    tri = _delaunay(X)
    reg = _regular(X, psi, tri)
    if reg is None:
        raise RuntimeError("the Delaunay triangulation of the particles failed the power-diagram check")
    tri, E, Y, flips = reg
    D = _Diagram(X, psi, tri, E, Y, n_quad)
    G, H = _masses(D, F)
    eps0 = 0.5 * min(b.min(), G.min())
    if not eps0 > 0:
        raise RuntimeError(f"a Voronoi cell of the particles carries no density mass (min {G.min():.3e}); "
                           f"the damped Newton method needs positive initial masses")
    target = tol * b.min()
    it, taus, quad_change, cg_its, cg_unconverged = 0, [], np.nan, [], 0
    # Targets b * sum(G): the computed total mass differs from 1 by round-off of the n area sums
    # (~n eps, measured 2e-11 at n = 1e5); without it that defect would pile up in the gauge cell.
    resid = lambda G_: G_ - b * G_.sum()  # noqa: E731
    while True:
        err = np.abs(resid(G)).max()
        if err <= target:
            D2 = _Diagram(X, psi, tri, E, Y, n_quad + 2)
            G2, _ = _masses(D2, F, with_hessian=False)
            quad_change = float(np.abs(G2 - G).max() / b.min())
            if quad_change <= tol:
                break
            n_quad += 2
            estimate_semidiscrete(n, n_quad).check("a larger tol (n_quad is raised until the quadrature meets it)")
            D, (G, H) = D2, _masses(D2, F)
            continue
        if it >= max_iter:
            raise RuntimeError(f"semi-discrete Newton did not converge in {max_iter} iterations: max relative "
                               f"mass error {err / b.min():.3e} > tol = {tol:g}")
        delta, n_cg, cg_ok = _newton_step(D, H, G, b * G.sum())
        cg_its.append(n_cg)
        cg_unconverged += not cg_ok
        norm0, tau = np.linalg.norm(resid(G)), 1.0
        for _ in range(40):
            D_t = G_t = H_t = None        # free a rejected trial before building the next (memory at 1e6)
            trial = psi + tau * delta
            reg = _regular(X, trial, tri)
            if reg is not None:
                D_t = _Diagram(X, trial, reg[0], reg[1], reg[2], n_quad)
                G_t, H_t = _masses(D_t, F)
                if G_t.min() >= eps0 and np.linalg.norm(resid(G_t)) <= (1 - tau / 2) * norm0:
                    break
            tau *= 0.5
        else:
            raise RuntimeError("semi-discrete Newton: no acceptable step after 40 halvings (a diagram that flips "
                               "cannot repair; seen when the particles are far more concentrated than the "
                               "density): use a node-based method (method='exact') here")
        psi, (tri, E, Y) = trial, reg[:3]
        flips += reg[3]
        D, G, H = D_t, G_t, H_t
        taus.append(tau)
        it += 1
    beaten = _beaten_vertices(X, psi, tri, Y)
    if beaten:
        raise RuntimeError(f"semi-discrete transport: the flipped triangulation is locally but not globally "
                           f"regular ({beaten} diagram vertices are beaten by another particle); this happens "
                           f"when the particles leave large parts of the density to a few cells. Use a "
                           f"node-based method (method='exact') for such configurations")
    rho, gu, gm = F.arc_values(D.points, moments=True)
    q = D.q
    mom = np.empty((n, 3))
    for k in range(3):
        fl = (np.einsum("eqk,ek->eq", gm[k].reshape(-1, q, 3), D.nrm) * D.wq).sum(1)
        mom[:, k] = F.mom_mean[k] * D.area + np.bincount(D.E["i"], fl, n) - np.bincount(D.E["j"], fl, n)
    cell_costs = 2.0 * G - 2.0 * np.einsum("ik,ik->i", X, mom)
    info = {"newton_iterations": it, "residual": float(np.abs(resid(G)).max() / b.min()),
            "total_mass_defect": float(G.sum() - 1.0), "n_quad": n_quad,
            "quad_change": quad_change, "flips": int(flips), "damping": taus, "tol": tol,
            "linear_solver": "lu" if n <= _LU_MAX else "amg-cg", "cg_iterations": cg_its,
            "cg_unconverged": cg_unconverged,
            "n_edges": int(D.E["i"].size)}
    return LaguerreSolution(float(cell_costs.sum()), psi, G, D.area, cell_costs, D.max_angle(), info)


def grid_of_nodes(nodes):
    """The :class:`SphereGrid` whose flattened ``nodes`` (``grid.nodes.reshape(-1, 3)``) these are, or None.

    The rings are counted by distinct ``z``; ``lmax = min(nlat - 1, (nlon - 1) // 2)`` (the largest
    degree such a grid holds) and the nodes must match to ``1e-12``.

    Parameters
    ----------
    nodes : array_like, shape (G, 3)
        Points.

    Returns
    -------
    SphereGrid or None
    """
    nodes = np.asarray(nodes, dtype=float)
    if nodes.ndim != 2 or nodes.shape[1] != 3 or nodes.shape[0] < 18:
        return None
    nlat = np.unique(np.round(nodes[:, 2], 12)).size
    nlon = nodes.shape[0] // nlat
    lmax = min(nlat - 1, (nlon - 1) // 2)
    if nlat * nlon != nodes.shape[0] or lmax < 2:
        return None
    grid = SphereGrid(lmax, nlat=nlat, nlon=nlon)
    if np.max(np.abs(grid.nodes.reshape(-1, 3) - nodes)) > 1e-12:
        return None
    return grid


def geodesic_bracket(sol):
    """Bounds on the squared geodesic W2 from the chordal solution (see :func:`w2_particles_field`).

    Parameters
    ----------
    sol : LaguerreSolution
        A chordal solution.

    Returns
    -------
    lower, upper : float
        Bounds on the squared geodesic distance.
    """
    wc2 = max(sol.cost, 0.0)
    lower = (2.0 * np.arcsin(min(np.sqrt(wc2) / 2.0, 1.0))) ** 2
    th = sol.max_angle
    factor = np.where(th > 1e-4, th**2 / np.maximum(2.0 - 2.0 * np.cos(th), 1e-300), 1.0 + th**2 / 12.0)
    return lower, float(np.sum(np.maximum(sol.cell_costs, 0.0) * factor))
