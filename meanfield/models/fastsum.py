r"""Fast particle sums on S^2 for zonal heads by spherical harmonics (Funk-Hecke), O(n + lmax^2 log lmax).

For zonal heads ``M_h = V_h = lambda_h I`` on ``S^2`` the interaction depends on ``t = <x, y>`` only,
so every sum over sources is a degree-wise multiplier applied to the coefficients of the weighted
empirical measure ``mu = sum_j w_j delta_{x_j}``:

.. math::

    b_{lm} = \sum_j w_j \overline{Y_{lm}(x_j)},\qquad
    \sum_j w_j g(\langle x, x_j\rangle) = \sum_{lm} c_l[g]\, b_{lm} Y_{lm}(x),\qquad
    c_l[g] = 2\pi \int_{-1}^{1} g(t) P_l(t)\, dt .

With the potential ``N_h(x) = sum_j w_j K_h(lambda_h <x, x_j>)`` (``K`` the kernel antiderivative)
and ``Z_h(x) = sum_j w_j k_h(lambda_h <x, x_j>)``, the tangent part of the head aggregate is
``grad_S N_h`` and its normal part is ``R_h x`` with ``R_h = sum_j w_j k_h(s) s``; so

.. math:: u_i^h = \frac{\nabla_S N_h(x_i) + R_h(x_i)\, x_i}{D_h(x_i)},\qquad D_h = 1 \text{ or } Z_h,

exactly the direct sums of :mod:`meanfield.kernels`, the self-interaction ``j = i`` included.
Multipliers (``a = beta lambda``): exp kernel ``c[K] = 4 pi i_l(a) / beta``, ``c[k] = 4 pi i_l(a)``,
``c[k s] = 4 pi lambda i_l'(a)``; ReLU kernel ``c[K] = c[relu(lambda t)^2 / 2]``,
``c[k] = c[relu(lambda t)]``, ``c[k s] = 2 c[K]`` (Gauss-Legendre on each half of [-1, 1], exact).

For exp kernels the degree ``lmax`` is the smallest ``L >= 2`` whose neglected tail, weighted by
the growth of a point-evaluated gradient, is below ``tolerance`` (:func:`truncation_degree`); the
multipliers decay super-exponentially beyond ``l ~ beta |lambda|`` (``lmax`` 11, 19, 26 for
``beta = 1, 5, 10`` at 1e-10).  ReLU multipliers decay algebraically (``c[K] ~ l^{-3}``), the
velocity converges only algebraically in ``lmax``: ReLU heads need an explicit ``lmax`` and the
accuracy reached is measured in ``benchmarks/RESULTS.md`` (never near 1e-10).
Point transforms are :class:`meanfield.sphere.PointSet` (``SphereGrid.prepare_points``): the
angles and tangent frame of the tokens are computed once per evaluation and shared by every
transform of that evaluation.  Multipliers come from :mod:`meanfield.funk_hecke`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.funk_hecke import zonal_multipliers   # also re-exported here (public API)
from ..core.heads import check_heads
from ..core.sphere import SphereGrid


LMAX_CAP = 512
"""Largest degree :func:`truncation_degree` may choose (beyond it the sum is no longer 'fast' at small n)."""

__all__ = ["LMAX_CAP", "SpectralSum", "zonal_multipliers", "truncation_degree", "spectral_supported"]


def _growth(lmax):
    """Largest pointwise size of degree-l parts of a gradient of a unit-mass measure's field:
    ``(2l+1)/(4 pi) * sqrt(l(l+1)+1)`` (addition theorem and ``|P_l'| <= l(l+1)/2``)."""
    ell = np.arange(lmax + 1)
    return (2 * ell + 1) / (4 * np.pi) * np.sqrt(ell * (ell + 1.0) + 1.0)


def truncation_degree(heads, tolerance, cap=LMAX_CAP):
    r"""Smallest degree ``L >= 2`` at which every exp head's neglected Funk-Hecke tail is below ``tolerance``.

    For each head and each multiplier sequence ``c`` (potential, normalizer), with the gradient
    growth ``G_l = (2l+1)/(4 pi) sqrt(l(l+1)+1)``, the criterion is

    .. math:: \sum_{l > L} |c_l| G_l \le \text{tolerance} \cdot \max_l |c_l| G_l .

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads with the exp kernel (ReLU multipliers decay like ``l^{-3}``, so this tail
        bound never closes for them: give ``lmax`` explicitly and see benchmarks/RESULTS.md).
    tolerance : float
        Requested relative accuracy, in (0, 1).
    cap : int
        Largest degree allowed.

    Returns
    -------
    int or None
        The degree, or ``None`` when it would exceed ``cap``.
    """
    heads = check_heads(heads)
    if any(h.kernel != "exp" for h in heads):
        raise ValueError("heads must all use the exp kernel for an automatic degree (ReLU Funk-Hecke "
                         "multipliers decay algebraically); received a 'relu' head: pass lmax explicitly")
    n_tail = cap + 64                       # exp tails decay super-exponentially past beta |lambda|
    G = _growth(n_tail)
    L = 2
    for head in heads:
        mult = zonal_multipliers(head, n_tail)
        for key in ("potential", "normalizer"):
            q = np.abs(mult[key]) * G
            if q.max() == 0:
                continue
            tail = np.cumsum(q[::-1])[::-1]          # tail[l] = sum_{l' >= l} q
            ok = np.nonzero(np.append(tail[1:], 0.0) <= tolerance * q.max())[0]
            L = max(L, int(ok[0]))
    return L if L <= cap else None


def spectral_supported(heads, geometry="sphere"):
    """Why spectral summation does not apply (a message), or ``None`` when it does: d = 3, the
    sphere, and zonal heads only."""
    heads = check_heads(heads)
    if heads[0].dim != 3:
        return f"spectral summation needs d = 3 (tokens on S^2); received d = {heads[0].dim}"
    if geometry != "sphere":
        return f"spectral summation needs geometry 'sphere'; received {geometry!r}"
    if not all(h.is_zonal for h in heads):
        return "spectral summation needs zonal heads (M = V = lambda I); received a non-zonal head"
    return None


def _check_tolerance(tolerance):
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float, np.floating)) \
            or not (1e-14 <= tolerance < 1):
        raise ValueError(f"tolerance must be a number in [1e-14, 1); received {tolerance!r}")
    return float(tolerance)


@dataclass(frozen=True, eq=False)
class SpectralSum:
    """Spectral (Funk-Hecke) evaluation of the particle velocity, aggregates and energy.

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads of dimension 3.
    tolerance : float
        Requested accuracy relative to the size of the sums (see Notes), in ``[1e-14, 1)``.
    lmax : int, optional
        Degree; default :func:`truncation_degree` of the heads at ``tolerance`` (``ValueError``
        when that exceeds :data:`LMAX_CAP`, or for ReLU heads, which need it given).
    nthreads : int
        Threads of the spherical-harmonic transforms.

    Notes
    -----
    Errors are relative to the largest aggregate ``max_i |u_i^h|`` scale of the sums (the transforms
    run at ``epsilon = tolerance / 1000``, floored at 1e-14: ducc0's accuracy relative to the L2
    norm of the data; measured errors are 1e-12..3e-11 of the aggregates at tolerance 1e-10).
    Points off the unit sphere (Runge-Kutta stages) are evaluated at ``x / |x|``: a smooth extension
    of the field that agrees with the direct sum on the sphere.
    """

    heads: tuple
    tolerance: float = 1e-10
    lmax: int | None = None
    nthreads: int = 1
    grid: SphereGrid = field(init=False)

    def __post_init__(self):
        heads = check_heads(self.heads)
        why = spectral_supported(heads)
        if why is not None:
            raise ValueError(why)
        tol = _check_tolerance(self.tolerance)
        lmax = self.lmax
        if lmax is None:
            lmax = truncation_degree(heads, tol)
            if lmax is None:
                raise ValueError(f"tolerance = {tol:.1e} needs lmax > LMAX_CAP = {LMAX_CAP} for these heads "
                                 f"(beta |lambda| too large); use a larger tolerance or direct summation")
        elif isinstance(lmax, bool) or not isinstance(lmax, (int, np.integer)) or lmax < 2:
            raise ValueError(f"lmax must be an integer >= 2 or None; received {lmax!r}")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("heads", heads)
        set_("tolerance", tol)
        set_("lmax", int(lmax))
        set_("grid", SphereGrid(int(lmax), nthreads=self.nthreads))
        mult = [zonal_multipliers(h, self.lmax) for h in heads]
        set_("_mult", mult)
        mean = [m["potential"] for h, m in zip(heads, mult) if h.normalization == "mean"]
        set_("_mean_potential", np.sum(mean, axis=0) if mean else None)
        set_("_epsilon", max(tol * 1e-3, 1e-14))

    # ------------------------------------------------------------------ building blocks
    def coefficients(self, X, w):
        """Coefficients ``b_lm = sum_j w_j conj(Y_lm(x_j))`` of the weighted measure, shape (nalm,).

        ``X`` (n, 3) is projected radially onto the sphere; ``w`` (n,) real.
        """
        return self._points(X).adjoint(self._weights(w, X.shape[0]))

    def _points(self, X):
        return self.grid.prepare_points(self._unit(X), self._epsilon)

    @staticmethod
    def _weights(w, n):
        w = np.asarray(w)
        if w.shape != (n,) or np.iscomplexobj(w):
            raise ValueError(f"w must be real with shape (n,) = ({n},); received dtype {w.dtype}, shape {w.shape}")
        return np.ascontiguousarray(w, dtype=np.float64)

    @staticmethod
    def _unit(X):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != 3:
            raise ValueError(f"X must have shape (n, 3); received shape {X.shape}")
        return X / np.sqrt(np.einsum("ij,ij->i", X, X))[:, None]

    def _normalizer(self, b, mult, pts):
        return pts.evaluate(self.grid.multiply_degree(b, mult["normalizer"]))

    # ------------------------------------------------------------------ public sums
    def velocity(self, X, w):
        """Tangent velocities ``sum_h P_x u^h = sum_h grad N_h / D_h`` at the tokens, shape (n, 3).

        Parameters
        ----------
        X : ndarray, shape (n, 3)
        w : ndarray, shape (n,)
            Token weights (the same convention as :class:`meanfield.particles.ParticleSystem`).
        """
        if not np.all(np.isfinite(X)):         # a blown-up integrator stage: NaN, reported by integrate
            return np.full(np.shape(X), np.nan)
        pts, g = self._points(X), self.grid
        b = pts.adjoint(self._weights(w, pts.n))
        if self._mean_potential is not None:        # every mean head in one gradient
            v = pts.gradient(g.multiply_degree(b, self._mean_potential))
        else:
            v = np.zeros((pts.n, 3))
        for h, m in zip(self.heads, self._mult):
            if h.normalization == "softmax":
                Z = self._normalizer(b, m, pts)
                v += pts.gradient(g.multiply_degree(b, m["potential"])) / _safe(Z)[:, None]
        return v

    def forces(self, X, w):
        """Per-head aggregates ``u^h`` before projection and their normalizers.

        Returns
        -------
        U : ndarray, shape (H, n, 3)
        N : ndarray, shape (H, n)
            1 (mean) or ``Z_h`` (softmax); a softmax row with ``Z <= 0`` (ReLU only) gets ``u = 0``.
        """
        pts, g = self._points(X), self.grid
        b = pts.adjoint(self._weights(w, pts.n))
        U = np.empty((len(self.heads), pts.n, 3))
        N = np.ones((len(self.heads), pts.n))
        for i, (h, m) in enumerate(zip(self.heads, self._mult)):
            pts.gradient(g.multiply_degree(b, m["potential"]), out=U[i])
            U[i] += pts.evaluate(g.multiply_degree(b, m["normal"]))[:, None] * pts.points
            if h.normalization == "softmax":
                N[i] = self._normalizer(b, m, pts)
                U[i] /= _safe(N[i])[:, None]
        return U, N

    def energies(self, X, w):
        """Per-head energies ``E_h = 1/2 sum_ij w_i w_j K_h(s_ij)`` by Parseval, shape (H,)."""
        b = self.coefficients(X, w)
        g = self.grid
        return np.array([0.5 * g.inner(b, g.multiply_degree(b, m["potential"])) for m in self._mult])


def _safe(Z):
    """Divisor with ``u = 0`` where ``Z <= 0`` (no attention mass), as in the direct sum."""
    return np.where(Z > 0, Z, np.inf)
