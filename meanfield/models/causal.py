r"""Causal (masked) attention: token ``i`` attends to tokens ``j <= i`` only, at any scale.

Tokens ``x_0, ..., x_{n-1}`` in order, positive token weights ``w_j`` (default uniform).  For head ``h``

.. math::

    \text{softmax: } u_i^h = \frac{\sum_{j \le i} w_j k_h(\langle x_i, M_h x_j\rangle) V_h x_j}
                               {\sum_{j \le i} w_j k_h(\langle x_i, M_h x_j\rangle)},\qquad
    \text{mean: } u_i^h = \frac{\sum_{j \le i} w_j k_h(\langle x_i, M_h x_j\rangle) V_h x_j}{\sum_{j \le i} w_j},

    \frac{dx_i}{dt} = P_{x_i} \sum_h u_i^h \ (\text{sphere}),\qquad \frac{dx_i}{dt} = \sum_h u_i^h \ (\text{flat}):

token ``i`` moves exactly as in the (non-causal) system of its prefix ``x_0..x_i`` with the weights of that prefix:
for uniform weights the mask of :class:`meanfield.models.batched.BatchedSystem` (``causal=True``, the mean divides by
``i + 1``), the decoder's mask of Karagodin, Polyanskiy and Rigollet (arXiv 2411.04990).  Token 0 attends only to
itself: with ``V = I`` on the sphere its velocity is ``P_{x_0} x_0 = 0``.  Sinkhorn heads are refused by name: a
doubly stochastic scaling of a lower-triangular kernel has no positive solution.

Two summations, the same semantics:

* ``"direct"`` (any d, any non-Sinkhorn heads, sphere or flat): row blocks of the lower-triangular score matrix
  (``O(n^2 d / 2)`` work, one block of ``chunk_bytes`` at a time); softmax rows are shifted by their largest
  ``log k`` (log-sum-exp), so nothing overflows.
* ``"spectral"`` (zonal heads ``M = V = lambda I`` on S^1, ``d = 2``, or S^2, ``d = 3``): the kernel is expanded
  in real orthonormal features, ``k(lambda <x, y>) = sum_a c_a F_a(x) F_a(y)`` (Fourier modes on S^1 with the
  multipliers of :func:`meanfield.models.circle.circle_multipliers`; real spherical harmonics on S^2 with the
  Funk-Hecke multipliers of :func:`meanfield.core.zonal.zonal_multipliers`), so the causal sums are prefix sums
  of the sources' coefficients ``B_a = sum_{j < start} w_j F_a(x_j) (1, x_j)``.  Tokens are processed in blocks
  of ``block``: each block is evaluated against the coefficients of every earlier block plus the direct masked
  sums inside the block, then adds its own coefficients (the features of a block are made, used and dropped by
  compiled code, :func:`meanfield.core.prefix.causal_far_sums`).  Work ``O(n D (d + 1) + n block)`` with ``D =
  (lmax + 1)^2`` on S^2 (``2 kmax + 1`` on S^1), memory ``O(D + chunk)``.  The
  degree is the smallest one whose neglected multipliers are below ``kernel_tol`` relative to the kernel's
  largest value (S^2: :func:`sphere_lmax`; S^1: :func:`circle_kmax`); the error of a prefix sum is then at most
  about ``kernel_tol`` times its total weight times the kernel's largest value, so a softmax velocity is accurate
  to about ``kernel_tol (sum_{j<=i} w_j) / w_i`` relative (the self term bounds ``Z_i`` below).  Measured against
  the direct sums at kernel_tol 1e-10: 1e-13 to 7e-11 (``tests/test_causal.py``, n = 150-200), 9e-13 and 5e-12 on
  the first 4000 of 10^5 tokens (``benchmarks/RESULTS_causal.md``, lmax 13 and 22).  Time at n = 10^5 on S^2
  against the non-causal spectral velocity: 2.7x at lmax 13, 4.2x at lmax 22, 6.1x at lmax 29 and 9.3x at lmax
  40 (the work per token grows as lmax^2, with a constant part, the in-block sums; the non-causal point transforms'
  hardly at all).

``"auto"`` (the default) is the spectral sums from :data:`CAUSAL_SPECTRAL_MIN_N` tokens on where they apply, the direct
sums otherwise; :meth:`CausalSystem.check_run` estimates a whole trajectory's time and refuses a too-long one;
:meth:`CausalSystem.attention_received` is the attention each token receives (the "lost in the middle" profile).

Every sum of this module runs with BLAS on one thread (:func:`one_blas_thread`): the results are the same, bit for
bit, whatever OMP_NUM_THREADS.

The energies of the non-causal model are not monotone here (the causal flow is not a gradient flow,
arXiv 2411.04990): :meth:`CausalSystem.observer` reports clustering quantities instead, listed in
:data:`OBSERVER_KEYS`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core import cost, validate
from ..core.choices import GEOMETRIES
from ..core.heads import check_exp_range, check_heads
from ..core.kernels import KERNELS, LMAX_CAP, NORMALIZATIONS, score_norm
from ..core.sums import CHUNK_BYTES, lift_values, score_sides, value_sides
from ..core.zonal import zonal_multipliers
from .circle import circle_multipliers
from .plans import token_plan

__all__ = ["CausalSystem", "CAUSAL_SUMMATIONS", "CAUSAL_SPECTRAL_MIN_N", "CAUSAL_RUN_LIMIT_S", "OBSERVER_KEYS",
           "causal_direct_sums", "causal_attention_received", "circle_kmax", "sphere_features", "circle_features",
           "sphere_lmax", "one_blas_thread"]

CAUSAL_SUMMATIONS = ("auto", "direct", "spectral")
"""``CausalSystem(summation=...)``: ``"auto"`` (spectral where it applies from :data:`CAUSAL_SPECTRAL_MIN_N` tokens
on, direct otherwise), masked pairwise sums (any heads) or prefix sums of spectral coefficients."""

CAUSAL_SPECTRAL_MIN_N = 2000
"""Smallest n for which ``summation="auto"`` uses the spectral prefix sums (zonal heads on S^1 / S^2).  Measured
(``benchmarks/RESULTS_causal.md``, "auto", compiled prefix sums): the spectral sums are faster than the masked direct
sums from n = 250 on in every row but S^2 at beta 32 (lmax 40, 0.86x at 250, 1.65x at 500), and 4.5-29x at n =
2000-4000; 2000 keeps small systems on the exact pairwise sums, as :data:`meanfield.models.particles.SPECTRAL_MIN_N`
does for the non-causal system."""

CAUSAL_RUN_LIMIT_S = 3600.0
"""A whole run estimated by :meth:`CausalSystem.check_run` to take longer than this is refused up front."""

KMAX_CAP = 4096
"""Largest Fourier mode the S^1 spectral sums pick by themselves (beyond: refused, use the direct sums)."""

CAUSAL_SPECTRAL_SECONDS = {"token": 5e-7, "feature": 1e-9, "block_pair": 7e-9, "block_feature": 3e-8,
                           "block_head_feature": 8e-9}
"""The cost guard's model of one causal spectral velocity over ``n`` tokens, ``H`` heads, ``D`` features and blocks
of ``B`` tokens: ``n (token + H (D feature + B block_pair)) + (n / B) D (block_feature + H block_head_feature)``
seconds (per token: the normalizations; per token, head and feature: the far sums; the in-block sums, ``B`` scores
a token and head; per block and feature: the carried coefficients' update, and each head's multipliers).  Fitted
by ``benchmarks/causal_cost.py`` on 35 cases (S^1 kmax 10 and 53, S^2 lmax 13 and 22, one, three and eight heads,
blocks 1 to 256, n = 2 10^4, one thread of a 2-core machine: 2.4e-7, 4.8e-10, 3.5e-9, 1.3e-8, 4e-9, within
0.71-1.17 of every measurement) and doubled, rounded up: the estimate is 1.4-2.6x the measured time (a second run of
the benchmark)."""

CAUSAL_PAIR_FACTOR = 1.5
"""Cost of one head-pair of the masked direct sums in units of :func:`meanfield.core.cost.pair_seconds` (measured
about 1.5e-8 s per summed pair at d <= 64: the mask and the log-sum-exp shift cost about half a plain pair more;
about half the pairs are summed)."""


def _causal_pair_seconds(d):
    return CAUSAL_PAIR_FACTOR * cost.pair_seconds(d)

OBSERVER_KEYS = {
    "max_angle_to_first": "largest geodesic angle (radians) from token 0 (token 0 stays fixed with V = I: the "
                          "causal flow's one-cluster limit is x_0; 0 at convergence); flat: largest distance",
    "diameter_proxy": "largest geodesic angle (radians) from the mean direction (flat: from the mean)",
    "order_parameter": "|sum_i w_i x_i| / sum_i w_i (1 for one cluster on the sphere)",
    "speed_rms": "weighted RMS of |dx_i/dt|",
    "speed_max": "largest |dx_i/dt|",
    "unit_drift": "largest | |x_i| - 1 | on the sphere (0 when flat)",
}
"""What :meth:`CausalSystem.observer` reports.  No energy: the causal flow is not a gradient flow, no interaction
energy is monotone along it (Karagodin, Polyanskiy, Rigollet, arXiv 2411.04990), so none is offered as a check."""


# ---------------------------------------------------------------------------------------------------------------
# direct masked sums (any d)
# ---------------------------------------------------------------------------------------------------------------
_CONTROLLER = []


def one_blas_thread():
    """A context in which BLAS runs on one thread (:mod:`threadpoolctl`).

    The sums of this module run inside it: OpenBLAS splits skinny products such as ``(rows, prefix) x (prefix, 4)``
    and even ``(rows, 3) x (3, prefix)`` differently on 1 and 2 threads, so their last bits depended on
    OMP_NUM_THREADS (measured: 2e-16 differences in the velocities); on one thread the results are the same whatever
    the thread setting.  Entering it costs about 3 us.

    Returns
    -------
    context manager
    """
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def causal_direct_sums(head, X, w, chunk_bytes=CHUNK_BYTES):
    """Masked per-head aggregates ``u_i = sum_{j<=i} w_j k(<x_i, M x_j>) V x_j / N_i`` of one head.

    Parameters
    ----------
    head : Head
        A head whose normalization is row-local (mean or softmax).
    X : ndarray, shape (n, d)
        Tokens in order.
    w : ndarray, shape (n,)
        Positive token weights.
    chunk_bytes : int
        Work space of one block of score rows (rows ``a..b`` against sources ``0..b``).

    Returns
    -------
    ndarray, shape (n, d)
        The aggregates ``u``, with ``N_i = sum_{j<=i} w_j k_ij`` (softmax; a row with ``N_i <= 0``, ReLU only, gets
        ``u_i = 0``) or ``N_i = sum_{j<=i} w_j`` (mean).

    Raises
    ------
    ValueError
        A Sinkhorn head (no causal scaling exists).
    """
    norm = NORMALIZATIONS[head.normalization]
    if not norm.row_local:
        raise ValueError(f"head.normalization must be 'mean' or 'softmax' for causal sums (a doubly stochastic "
                         f"scaling of a causal, lower-triangular kernel has no positive solution); received "
                         f"{head.normalization!r}")
    with one_blas_thread():
        return _direct(head, norm, X, w, chunk_bytes)


def _direct(head, norm, X, w, chunk_bytes):
    kern = KERNELS[head.kernel]
    n = X.shape[0]
    T, S, _ = score_sides(head, X, X)
    Y = kern.rate(head) * S
    YV, C = value_sides(head, X)
    wYV = w[:, None] * YV
    wYV1 = np.concatenate([wYV, w[:, None]], axis=1)                     # last column: the normalizer's sources
    prefix = np.cumsum(w)
    out = np.empty((n, YV.shape[1]))
    step = max(1, int(chunk_bytes // (8 * n)))
    for a in range(0, n, step):
        b = min(a + step, n)
        K = T[a:b] @ Y[:b].T
        mask = np.arange(b)[None, :] > np.arange(a, b)[:, None]          # j > i: masked out
        if norm.uses_normalizer:                                          # softmax: log-sum-exp rows
            with np.errstate(divide="ignore"):
                K = kern.log_scaled(head, K, out=K)
            K[mask] = -np.inf
            top = K.max(axis=1, keepdims=True)
            top[~np.isfinite(top)] = 0.0                                  # a row without mass (ReLU): all zero
            K = np.exp(K - top)
            UZ = K @ wYV1[:b]
            out[a:b] = norm.combine(UZ[:, :-1], UZ[:, -1])
        else:
            K = kern.scaled(head, K, out=K)
            K[mask] = 0.0
            out[a:b] = (K @ wYV[:b]) / prefix[a:b, None]
    return lift_values(out, C)


def causal_attention_received(head, X, w, chunk_bytes=CHUNK_BYTES):
    r"""Attention received by each token from the tokens after it, ``R_j = sum_{i >= j} a_ij``, of one head.

    .. math::

        a_{ij} = \frac{w_j k(\langle x_i, M x_j\rangle)}{N_i}\ (j \le i),\qquad
        N_i = \sum_{l \le i} w_l k(\langle x_i, M x_l\rangle)\ (\text{softmax}),\quad
        N_i = \sum_{l \le i} w_l\ (\text{mean}),

    the weights with which token ``i`` averages the values of its prefix.  Softmax rows sum to 1, so with uniform
    weights ``sum_j R_j = n``: ``R_j`` is the discrete counterpart of the continuum's received density ``r(s)`` at
    ``s = (j + 1/2) / n`` (:meth:`meanfield.models.causal_continuum.CausalCirclePDE.attention_received`, which
    integrates to 1 over ``[0, 1]``).  With all scores equal (``k`` constant) ``a_ij = 1 / (i + 1)`` and ``R_j``
    is the harmonic tail ``sum_{i=j}^{n-1} 1 / (i + 1)``.

    Parameters
    ----------
    head : Head
        A head whose normalization is row-local (mean or softmax).
    X : ndarray, shape (n, d)
        Tokens in order.
    w : ndarray, shape (n,)
        Positive token weights.
    chunk_bytes : int
        Work space of one block of score rows.

    Returns
    -------
    ndarray, shape (n,)
        ``R_j``; a softmax row without attention mass (ReLU only) gives nothing.

    Raises
    ------
    ValueError
        A Sinkhorn head (no causal scaling exists).
    """
    norm = NORMALIZATIONS[head.normalization]
    if not norm.row_local:
        raise ValueError(f"head.normalization must be 'mean' or 'softmax' for causal sums; received "
                         f"{head.normalization!r}")
    kern = KERNELS[head.kernel]
    n = X.shape[0]
    with one_blas_thread():
        T, S, _ = score_sides(head, X, X)
        Y = kern.rate(head) * S
        prefix = np.cumsum(w)
        out = np.zeros(n)
        step = max(1, int(chunk_bytes // (8 * n)))
        for a in range(0, n, step):
            b = min(a + step, n)
            K = T[a:b] @ Y[:b].T
            mask = np.arange(b)[None, :] > np.arange(a, b)[:, None]
            if norm.uses_normalizer:
                with np.errstate(divide="ignore"):
                    K = kern.log_scaled(head, K, out=K)
                K[mask] = -np.inf
                top = K.max(axis=1, keepdims=True)
                top[~np.isfinite(top)] = 0.0
                K = np.exp(K - top) * w[None, :b]
                Z = K.sum(axis=1, keepdims=True)
                with np.errstate(invalid="ignore", divide="ignore"):
                    K = np.where(Z > 0, K / Z, 0.0)
            else:
                K = kern.scaled(head, K, out=K)
                K[mask] = 0.0
                K *= w[None, :b] / prefix[a:b, None]
            out[:b] += K.sum(axis=0)
    return out


# ---------------------------------------------------------------------------------------------------------------
# spectral features
# ---------------------------------------------------------------------------------------------------------------
def circle_features(X, kmax):
    """Real Fourier features on S^1: ``(1, sqrt2 cos k theta, sqrt2 sin k theta)_{k=1..kmax}``, shape (n, 2 kmax + 1).

    ``sum_a F_a(x) F_a(y) m_{k(a)} = sum_k m_k e^{ik(theta_x - theta_y)}`` for symmetric multipliers ``m``.

    Parameters
    ----------
    X : ndarray, shape (n, 2)
        Points (their directions are used).
    kmax : int

    Returns
    -------
    ndarray, shape (n, 2 kmax + 1)
    """
    theta = np.arctan2(X[:, 1], X[:, 0])
    k = np.arange(1, kmax + 1)
    ang = theta[:, None] * k[None, :]
    r2 = math.sqrt(2.0)
    return np.concatenate([np.ones((X.shape[0], 1)), r2 * np.cos(ang), r2 * np.sin(ang)], axis=1)


def _circle_degrees(kmax):
    k = np.arange(1, kmax + 1)
    return np.concatenate([[0], k, k])


def sphere_features(X, lmax):
    """Real orthonormal spherical harmonics at the directions of ``X`` (n, 3), shape (n, (lmax + 1)^2).

    Order: ``m = 0`` (``l = 0..lmax``), then for each ``m >= 1`` the ``cos m phi`` block and the ``sin m phi``
    block (``l = m..lmax`` each), scaled so that ``sum_m F_lm(x) F_lm(y) = (2l+1)/(4 pi) P_l(<x, y>)`` (the addition
    theorem); the normalized associated Legendre functions by the standard three-term recurrences (no
    Condon-Shortley phase: it cancels in every product).

    Parameters
    ----------
    X : ndarray, shape (n, 3)
    lmax : int

    Returns
    -------
    ndarray, shape (n, (lmax + 1)^2)
    """
    r = np.linalg.norm(X, axis=1)
    z = np.clip(X[:, 2] / r, -1.0, 1.0)
    rho = np.hypot(X[:, 0], X[:, 1])
    st = rho / r
    with np.errstate(invalid="ignore", divide="ignore"):
        cp = np.where(rho > 0, X[:, 0] / rho, 1.0)
        sp = np.where(rho > 0, X[:, 1] / rho, 0.0)
    n = X.shape[0]
    out = np.empty(((lmax + 1) ** 2, n))                      # features first: contiguous rows for the recurrences
    pmm = np.full(n, math.sqrt(1.0 / (4.0 * math.pi)))
    cm, sm = np.ones(n), np.zeros(n)                        # cos m phi, sin m phi
    col = 0
    r2 = math.sqrt(2.0)
    for m in range(lmax + 1):
        if m > 0:
            pmm = math.sqrt((2 * m + 1) / (2.0 * m)) * st * pmm
            cm, sm = cm * cp - sm * sp, sm * cp + cm * sp
        width = lmax + 1 - m
        cols = out[col:col + width]
        cols[0] = pmm
        if m < lmax:
            np.multiply(z, pmm, out=cols[1])
            cols[1] *= math.sqrt(2 * m + 3.0)
        for j, l in enumerate(range(m + 2, lmax + 1), start=2):
            a = math.sqrt((4.0 * l * l - 1.0) / (l * l - m * m))
            b = math.sqrt(((l - 1.0) ** 2 - m * m) / (4.0 * (l - 1.0) ** 2 - 1.0))
            row = cols[j]
            np.multiply(z, cols[j - 1], out=row)
            row -= b * cols[j - 2]
            row *= a
        if m == 0:
            col += width
        else:
            out[col + width:col + 2 * width] = cols * (r2 * sm)
            cols *= r2 * cm
            col += 2 * width
    return out.T


def _sphere_degrees(lmax):
    parts = [np.arange(lmax + 1)]
    for m in range(1, lmax + 1):
        parts += [np.arange(m, lmax + 1)] * 2
    return np.concatenate(parts)


@validate.renamed(tolerance="kernel_tol")
def circle_kmax(heads, kernel_tol, cap=KMAX_CAP):
    """Smallest Fourier degree ``K >= 2`` with ``2 sum_{k > K} |m_k| <= kernel_tol (|m_0| + 2 sum_k |m_k|)`` for
    every head (``m`` the normalizer multipliers of :func:`meanfield.models.circle.circle_multipliers`).

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads of dimension 2.
    kernel_tol : float
        In (0, 1).
    cap : int
        Largest degree tried.

    Returns
    -------
    int or None
        The degree, or None above ``cap``.

    Raises
    ------
    ValueError
        Multipliers that overflow float64 (:func:`meanfield.models.circle.circle_multipliers`, naming the head).
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).
    """
    best = 2
    for i, h in enumerate(heads):
        m = np.abs(circle_multipliers(h, cap + 1, where=f"heads[{i}]")["normalizer"])
        tail = 2.0 * np.cumsum(m[::-1])[::-1]                  # tail[K] = 2 sum_{k >= K} |m_k|
        total = m[0] + 2.0 * m[1:].sum()
        ok = np.nonzero(tail[1:] <= kernel_tol * total)[0]     # tail[K + 1] <= tol total
        if ok.size == 0:
            return None
        best = max(best, int(ok[0]))
    return best


@validate.renamed(tolerance="kernel_tol")
def sphere_lmax(heads, kernel_tol, cap=LMAX_CAP):
    """Smallest degree ``L >= 2`` with ``sum_{l > L} |c_l| (2l+1)/(4 pi) <= kernel_tol sum_l |c_l| (2l+1)/(4 pi)``
    for every head (``c`` the normalizer multipliers of :func:`meanfield.core.zonal.zonal_multipliers`): the
    neglected part of the kernel's addition-theorem series, relative to its largest value.

    Parameters
    ----------
    heads : sequence of Head
        Zonal heads of dimension 3.
    kernel_tol : float
        In (0, 1).
    cap : int
        Largest degree tried.

    Returns
    -------
    int or None
        The degree, or None above ``cap``.

    Raises
    ------
    ValueError
        A head that is not zonal, or multipliers that overflow float64 (:func:`meanfield.core.zonal.zonal_multipliers`,
        naming the head).
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).
    """
    best = 2
    for i, h in enumerate(heads):
        c = np.abs(zonal_multipliers(h, cap + 1, where=f"heads[{i}]")["normalizer"])
        c = c * (2.0 * np.arange(cap + 2) + 1.0) / (4.0 * math.pi)
        tail = np.cumsum(c[::-1])[::-1]                        # tail[L] = sum_{l >= L}
        ok = np.nonzero(tail[1:] <= kernel_tol * c.sum())[0]
        if ok.size == 0:
            return None
        best = max(best, int(ok[0]))
    return best


# ---------------------------------------------------------------------------------------------------------------
# the system
# ---------------------------------------------------------------------------------------------------------------
@validate.renamed(tolerance="kernel_tol")
@dataclass(frozen=True, eq=False)
class CausalSystem:
    """n tokens in order under causally masked attention (token ``i`` attends to ``j <= i``).

    Parameters
    ----------
    heads : sequence of Head
        Heads sharing the dimension ``d``; normalization ``"mean"`` or ``"softmax"`` (``"sinkhorn"`` refused).
    geometry : {"sphere", "flat"}
    summation : {"auto", "direct", "spectral"}
        ``"spectral"``: zonal heads on S^1 (``d = 2``) or S^2 (``d = 3``), sphere only, kernels with
        finite multipliers (see the module docstring); refused otherwise.  ``"auto"`` (the default): the spectral
        sums for ``n >= CAUSAL_SPECTRAL_MIN_N`` tokens when they apply and ``kernel_tol`` is reachable within the
        degree caps, the direct sums otherwise (the same numbers to ``kernel_tol``; :meth:`uses_spectral`).
    weights : array_like, shape (n,), optional
        Positive token weights used by :meth:`rhs` (and by :meth:`velocity` when ``w`` is not given); None:
        uniform.  Only ratios matter (each token normalizes over its prefix).
    kernel_tol : float
        Accuracy of the spectral sums (relative truncation accuracy of the kernels' expansion), in ``[1e-14, 1e-2]``.
    degree : int, optional
        Spectral degree (``lmax`` on S^2, ``kmax`` on S^1); default from ``kernel_tol``.
    block : int
        Tokens per block of the spectral prefix sums (``>= 1``).
    chunk_bytes : int
        Work space of one block of score rows of the direct sums.

    Raises
    ------
    ValueError
        A field out of its domain, named with the allowed values and what was received: a Sinkhorn head, an
        unknown summation or geometry, ``summation="spectral"`` with non-zonal heads or ``d`` not 2 or 3 or a
        flat geometry, a degree beyond the caps.
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).
    """

    heads: tuple
    geometry: str = "sphere"
    summation: str = "auto"
    weights: object = None
    kernel_tol: float = 1e-10
    degree: int | None = None
    block: int = 64
    chunk_bytes: int = CHUNK_BYTES

    def __post_init__(self):
        heads = check_heads(self.heads)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("heads", heads)
        validate.choice("geometry", self.geometry, GEOMETRIES)
        validate.choice("summation", self.summation, CAUSAL_SUMMATIONS)
        for i, h in enumerate(heads):
            if not NORMALIZATIONS[h.normalization].row_local:
                raise ValueError(f"heads[{i}].normalization must be one of ['mean', 'softmax'] under a causal mask "
                                 f"(a doubly stochastic scaling of a lower-triangular kernel has no positive "
                                 f"solution, only the diagonal limit); received {h.normalization!r}")
        if self.geometry == "sphere":
            check_exp_range(heads)
        set_("kernel_tol", validate.real("kernel_tol", self.kernel_tol, 1e-14, 1e-2, what="a number in [1e-14, 1e-2]"))
        set_("block", validate.integer("block", self.block, 1, what="an integer >= 1"))
        set_("chunk_bytes", validate.integer("chunk_bytes", self.chunk_bytes, 1, what="a positive integer"))
        if self.weights is not None:
            set_("weights", _positive_weights("weights", self.weights, None))
        d = heads[0].dim
        spectral = None
        why = None
        if self.geometry != "sphere":
            why = f"geometry 'sphere' (tokens on S^1 or S^2); received geometry {self.geometry!r}"
        elif d not in (2, 3):
            why = f"d = 2 (S^1) or d = 3 (S^2); received d = {d} (the direct sums serve any d)"
        elif not all(h.is_zonal for h in heads):
            bad = next(i for i, h in enumerate(heads) if not h.is_zonal)
            why = f"zonal heads (M = V = lambda I); received a non-zonal heads[{bad}] (use summation='direct')"
        if self.summation == "spectral":
            if why is not None:
                raise ValueError(f"summation='spectral' needs {why}")
            spectral = self._spectral_setup(heads, d)
        elif self.summation == "auto" and why is None:
            try:                          # a kernel_tol beyond the degree caps (beta |lambda| large): stay direct
                spectral = self._spectral_setup(heads, d)
            except ValueError:
                if self.degree is not None:           # an explicit degree out of range is refused, never ignored
                    raise
        set_("_spectral", spectral)

    # ------------------------------------------------------------------ set-up
    def _spectral_setup(self, heads, d):
        if d == 3:
            if self.degree is None:
                L = sphere_lmax(heads, self.kernel_tol)
                if L is None:
                    raise ValueError(f"kernel_tol = {self.kernel_tol:.1e} needs lmax beyond the cap for these heads "
                                     f"(beta |lambda| too large); use a larger kernel_tol or summation='direct'")
            else:
                L = validate.integer("degree", self.degree, 2, 512, what="an integer in [2, 512] or None")
            mults = [zonal_multipliers(h, L, where=f"heads[{i}]")["normalizer"] for i, h in enumerate(heads)]
            D = (L + 1) ** 2                                   # real harmonics (sphere_features)
        else:
            if self.degree is None:
                L = circle_kmax(heads, self.kernel_tol)
                if L is None:
                    raise ValueError(f"kernel_tol = {self.kernel_tol:.1e} needs kmax > {KMAX_CAP} for these heads "
                                     f"(beta |lambda| too large); use a larger kernel_tol or summation='direct'")
            else:
                L = validate.integer("degree", self.degree, 2, KMAX_CAP, what=f"an integer in [2, {KMAX_CAP}] or None")
            mults = [circle_multipliers(h, L, where=f"heads[{i}]")["normalizer"] for i, h in enumerate(heads)]
            D = 2 * L + 1                                      # Fourier modes (circle_features)
        logscale, cdeg = [], []
        for h, m in zip(heads, mults):
            lam = float(h.scalar)
            ls = float(max(KERNELS[h.kernel].log_value(h, lam), KERNELS[h.kernel].log_value(h, -lam)))
            logscale.append(ls)
            cdeg.append(m[:L + 1] * math.exp(-ls))           # multipliers of k / max k, per degree 0..L
        return {"L": int(L), "D": D, "cdeg": np.array(cdeg), "logscale": np.array(logscale), "d": d}

    # ------------------------------------------------------------------ shapes
    @property
    def d(self) -> int:
        """Dimension of the tokens."""
        return self.heads[0].dim

    @property
    def spectral_degree(self):
        """The spectral degree of the prefix sums (``lmax`` on S^2, ``kmax`` on S^1; with ``summation="auto"``
        used from :data:`CAUSAL_SPECTRAL_MIN_N` tokens on), or None when this system sums directly only."""
        return None if self._spectral is None else self._spectral["L"]

    def uses_spectral(self, n) -> bool:
        """Whether sums over ``n`` tokens are the spectral prefix sums (see ``summation``).

        Parameters
        ----------
        n : int
            Number of tokens.

        Returns
        -------
        bool
            ``summation="spectral"``, or ``"auto"`` where the spectral sums apply and ``n >=``
            :data:`CAUSAL_SPECTRAL_MIN_N`.
        """
        if self._spectral is None:
            return False
        return self.summation == "spectral" or int(n) >= CAUSAL_SPECTRAL_MIN_N

    def evaluation_seconds(self, n) -> float:
        """Estimated seconds of one velocity evaluation over ``n`` tokens (the summation :meth:`uses_spectral` picks).

        Direct: ``n^2 / 2`` head-pairs at ``CAUSAL_PAIR_FACTOR * cost.pair_seconds(d)``; spectral: ``n`` tokens x
        the model of :data:`CAUSAL_SPECTRAL_SECONDS`.

        Parameters
        ----------
        n : int
            Number of tokens (``>= 1``).

        Returns
        -------
        float

        Raises
        ------
        ValueError
            ``n`` not an integer ``>= 1``.
        """
        n = validate.integer("n", n, 1, what="an integer >= 1 (tokens)")
        if self.uses_spectral(n):
            return self._spectral_seconds(n)
        return 0.5 * float(n) ** 2 * len(self.heads) * _causal_pair_seconds(self.d)

    def _spectral_seconds(self, n):
        c, D, B, H = CAUSAL_SPECTRAL_SECONDS, self._spectral["D"], self.block, len(self.heads)
        per_token = c["token"] + H * (D * c["feature"] + B * c["block_pair"])
        return float(n) * per_token + float(n) / B * D * (c["block_feature"] + H * c["block_head_feature"])

    def check_run(self, n, nfev, records=0, *, steps=0, limit_s=CAUSAL_RUN_LIMIT_S, what="CausalSystem run"):
        """Refuse up front a whole trajectory estimated to take longer than ``limit_s``; the estimate otherwise.

        ``seconds = (nfev + records) * evaluation_seconds(n) + steps * cost.STEP_OVERHEAD_S`` (each observer record of
        :meth:`observer` evaluates the velocity once), checked by :func:`meanfield.core.cost.guard`.

        Parameters
        ----------
        n : int
            Number of tokens (``>= 1``).
        nfev : int
            Right-hand-side evaluations of the run (``>= 0``; e.g. steps x stages of a fixed-step scheme).
        records : int
            Observer records (``>= 0``).
        steps : int
            Steps of the driver (``>= 0``), each counted :data:`meanfield.core.cost.STEP_OVERHEAD_S`.
        limit_s : float
            Seconds allowed (``> 0``; ``inf``: no limit).
        what : str
            The run's name in the message.

        Returns
        -------
        meanfield.core.cost.Cost
            The estimate (``seconds``, ``bytes``: the tokens, velocities and one work block).

        Raises
        ------
        ValueError
            A bad argument (named), or the run estimated above ``limit_s``: the message says the estimate, how it
            was counted, the limit and what to change.
        """
        n = validate.integer("n", n, 1, what="an integer >= 1 (tokens)")
        nfev = validate.integer("nfev", nfev, 0, what="an integer >= 0 (right-hand-side evaluations)")
        records = validate.integer("records", records, 0, what="an integer >= 0 (observer records)")
        steps = validate.integer("steps", steps, 0, what="an integer >= 0 (driver steps)")
        limit_s = validate.real("limit_s", limit_s, positive=True, finite=False)
        each = self.evaluation_seconds(n)
        spectral = self.uses_spectral(n)
        how = (f"spectral prefix sums, degree {self._spectral['L']}" if spectral else
               f"direct masked sums, {0.5 * n * n * len(self.heads):.3g} head-pairs each")
        seconds = (nfev + records) * each + steps * cost.STEP_OVERHEAD_S
        if spectral:
            fix = "fewer tokens, fewer evaluations (a larger dt or tolerance), a larger kernel_tol"
        elif self._spectral is not None or (self.geometry == "sphere" and self.d in (2, 3)
                                            and all(h.is_zonal for h in self.heads)):
            fix = "summation='spectral' (or 'auto' from n = CAUSAL_SPECTRAL_MIN_N on), fewer tokens or evaluations"
        else:
            fix = "fewer tokens or evaluations (no spectral path: zonal heads on S^1 / S^2 only)"
        return cost.guard(f"{what} ({nfev} right-hand sides + {records} observer records over n = {n} tokens, "
                          f"{len(self.heads)} head(s), {how}, {each:.3g} s each; {steps} steps)",
                          seconds=seconds, bytes=8.0 * n * self.d * 8 + 4.0 * self.chunk_bytes, fix=fix,
                          limit_s=limit_s, limit_name_s="limit_s", limit_bytes=float("inf"),
                          detail=f"({nfev} + {records}) x {each:.3g} s + {steps} x {cost.STEP_OVERHEAD_S:.2g} s",
                          lift="pass limit_s=<seconds> (solve(..., direct_limit_s=<seconds>); default "
                               "CAUSAL_RUN_LIMIT_S; inf: no limit) to run it anyway")

    def plan(self, start, t_final, *, method=None, step=None, t_eval=None, record_passes=0,
             direct_limit_s=CAUSAL_RUN_LIMIT_S):
        """The driver's arguments for a run from tokens ``start`` (:class:`~meanfield.core.model.SolvableModel`).

        :func:`meanfield.models.plans.token_plan`: tokens checked, ``"dopri5"`` by default (split and stochastic
        schemes refused), tolerances ``rtol = 1e-8``, ``atol = 1e-10`` unless given, the retraction, and the whole
        run estimated and refused above ``direct_limit_s`` by :meth:`check_run` before anything runs.

        Parameters
        ----------
        start : array_like, shape (n, d)
            Start tokens (named ``X0`` in errors).
        t_final : float
            End time.
        method : str, Tableau or Stepper, optional
            The scheme.
        step : StepControl, optional
            Step settings.
        t_eval : array_like, optional
            Output times.
        record_passes : int
            Velocity evaluations of one observer record (:meth:`observer`: 1), counted per output time.
        direct_limit_s : float
            Seconds allowed (default :data:`CAUSAL_RUN_LIMIT_S`; ``inf``: no limit): the name the particle
            system's runs use for their whole-run limit, so that one ``solve(..., direct_limit_s=...)`` moves both.

        Returns
        -------
        RunPlan

        Raises
        ------
        ValueError
            Bad tokens or arguments, a split or stochastic scheme, or a run above ``direct_limit_s``.
        """
        return token_plan(self, start, t_final, method=method, step=step, t_eval=t_eval, record_passes=record_passes,
                          limit_s=direct_limit_s, label="causal")

    @property
    def retraction(self):
        """Row normalization onto the unit sphere (for the driver), None when flat."""
        return _retract if self.geometry == "sphere" else None

    def check(self, X, name="X"):
        """Validated tokens (n, d): finite, unit rows on the sphere (never renormalized).

        Parameters
        ----------
        X : array_like, shape (n, d)
        name : str

        Returns
        -------
        ndarray, shape (n, d)

        Raises
        ------
        ValueError
            Wrong shape, non-finite entries, rows off the unit sphere.
        """
        X = validate.real_array(name, X, ("n", self.d))
        if X.shape[0] < 1:
            raise ValueError(f"{name} must hold at least one token (shape (n, {self.d}), n >= 1); received shape "
                             f"{X.shape}")
        if self.geometry == "sphere":
            dev = float(np.abs(np.linalg.norm(X, axis=1) - 1.0).max())
            if dev > 1e-8:
                raise ValueError(f"{name} rows must be unit vectors on the sphere (tolerance 1e-8); received "
                                 f"max | |x| - 1 | = {dev:.3e}")
        return X

    def _weights(self, w, n):
        if w is None:
            w = self.weights
        if w is None:
            return np.full(n, 1.0 / n)
        return _positive_weights("w", w, n)

    # ------------------------------------------------------------------ sums
    def forces(self, X, w=None):
        """Per-head aggregates ``u^h`` before projection, shape (H, n, d).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens in order (validated as by :meth:`check`).
        w : array_like, shape (n,), optional
            Positive weights (default :attr:`weights`, else uniform).

        Returns
        -------
        ndarray, shape (H, n, d)

        Raises
        ------
        ValueError
            Bad tokens or weights (named).
        """
        X = self.check(X)
        return self._forces(X, self._weights(w, X.shape[0]))

    def _forces(self, X, w):
        with one_blas_thread():                               # identical results on any thread count
            return self._forces_on_one_thread(X, w)

    def _forces_on_one_thread(self, X, w):
        if self.uses_spectral(X.shape[0]):
            return self._spectral_forces(X, w)
        n = X.shape[0]
        pairs = 0.5 * n * n * len(self.heads)
        cost.guard(f"CausalSystem direct sums over n = {n} tokens", bytes=8.0 * n * self.d * (len(self.heads) + 4),
                   seconds=pairs * _causal_pair_seconds(self.d),
                   fix="fewer tokens, or summation='spectral' (zonal heads on S^1 or S^2)",
                   detail=f"{pairs:.3g} head-pairs of masked scores")
        return np.stack([causal_direct_sums(h, X, w, self.chunk_bytes) for h in self.heads])

    def _spectral_forces(self, X, w):
        from ..core.prefix import causal_far_sums  # numba: compiled on first use, only on this path

        sp = self._spectral
        n, d = X.shape
        cdeg, logscale = sp["cdeg"], sp["logscale"]
        D, H, B = sp["D"], len(self.heads), self.block
        row = 8 * (2 * B + (d + 1) * (H + 2) + d)                    # bytes per token of a chunk's work space
        cost.guard(f"CausalSystem spectral prefix sums over n = {n} tokens (degree {sp['L']}, {D} features)",
                   bytes=4.0 * max(self.chunk_bytes, row * B) + 8.0 * D * (d + 1) + 8.0 * n * (3 * d + 4),
                   seconds=self._spectral_seconds(n),
                   fix="fewer tokens, a larger kernel_tol (a smaller degree) or a smaller beta",
                   detail=f"{n} tokens x {D} features x {H} head(s)")
        P = X / np.linalg.norm(X, axis=1, keepdims=True)              # directions (RK stages leave the sphere)
        src = np.concatenate([np.ones((n, 1)), P], axis=1) * w[:, None]   # sources (1, x_j) w_j
        prefix = np.cumsum(w)
        carry = np.zeros((D, d + 1))
        out = np.empty((H, n, d))
        per = max(1, int(self.chunk_bytes // (row * B))) * B          # tokens per chunk, whole blocks
        tri = np.tril(np.ones((B, B), dtype=bool))
        for a in range(0, n, per):
            b = min(a + per, n)
            m = -(-(b - a) // B) * B                                  # padded to whole blocks (weight 0)
            Pc = np.empty((m, d))
            Pc[:b - a], Pc[b - a:] = P[a:b], P[b - 1]
            Sc = np.zeros((m, d + 1))
            Sc[:b - a] = src[a:b]
            nb = m // B
            far_all = causal_far_sums(Pc, Sc, cdeg, carry, B)         # (H, 1 + d, m): every earlier block's sums
            Pb, Sb = Pc.reshape(nb, B, d), Sc.reshape(nb, B, d + 1)
            G = Pb @ Pb.transpose(0, 2, 1)                            # (nb, B, B) Gram matrices of the blocks
            K = np.empty_like(G)
            for h, head in enumerate(self.heads):
                kern = KERNELS[head.kernel]
                np.multiply(G, kern.rate(head) * float(head.scalar), out=K)          # rate * scores
                with np.errstate(divide="ignore"):
                    K = kern.log_scaled(head, K, out=K)                # log k (in place)
                K -= logscale[h]
                np.exp(K, out=K)
                K *= tri
                tot = (far_all[h].T + (K @ Sb).reshape(m, d + 1))[:b - a]
                lam = float(head.scalar)
                if NORMALIZATIONS[head.normalization].uses_normalizer:
                    Z = tot[:, :1]
                    with np.errstate(invalid="ignore", divide="ignore"):
                        out[h, a:b] = np.where(Z > 0, lam * tot[:, 1:] / Z, 0.0)
                else:
                    out[h, a:b] = lam * math.exp(logscale[h]) * tot[:, 1:] / prefix[a:b, None]
        return out

    def velocity(self, X, w=None):
        """Token velocities ``dx/dt``, shape (n, d).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens in order (unit rows on the sphere).
        w : array_like, shape (n,), optional
            Positive weights (default :attr:`weights`, else uniform).

        Returns
        -------
        ndarray, shape (n, d)

        Raises
        ------
        ValueError
            Bad tokens or weights (named).
        """
        X = self.check(X)
        return self._velocity(X, self._weights(w, X.shape[0]))

    def attention_received(self, X, w=None):
        """Attention received by each token from itself and the tokens after it, per head, shape (H, n).

        ``R_j^h = sum_{i >= j} a_ij^h`` with ``a_ij^h`` the weight of token ``j`` in token ``i``'s average
        (:func:`causal_attention_received`; softmax rows sum to 1, so with uniform weights ``sum_j R_j^h = n``).  The
        particle counterpart of the "lost in the middle" profile: for tokens at ``s_j = (j + 1/2) / n`` it tends to
        the continuum's :meth:`meanfield.models.causal_continuum.CausalCirclePDE.attention_received`.  Always the
        direct masked sums (``O(n^2 / 2)`` pairs per head, refused up front by the cost guard when too long),
        whatever ``summation``.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens in order (validated as by :meth:`check`).
        w : array_like, shape (n,), optional
            Positive weights (default :attr:`weights`, else uniform).

        Returns
        -------
        ndarray, shape (H, n)

        Raises
        ------
        ValueError
            Bad tokens or weights (named), or a sum estimated above the cost guard's limits.
        """
        X = self.check(X)
        w = self._weights(w, X.shape[0])
        n = X.shape[0]
        pairs = 0.5 * n * n * len(self.heads)
        cost.guard(f"CausalSystem.attention_received over n = {n} tokens", bytes=4.0 * self.chunk_bytes + 8.0 * n * 8,
                   seconds=pairs * _causal_pair_seconds(self.d), fix="fewer tokens",
                   detail=f"{pairs:.3g} head-pairs of masked scores")
        return np.stack([causal_attention_received(h, X, w, self.chunk_bytes) for h in self.heads])

    def _velocity(self, X, w):
        v = self._forces(X, w).sum(axis=0)
        if self.geometry == "sphere":
            v = v - np.sum(v * X, axis=1, keepdims=True) * X
        return v

    def rhs(self, t, y):
        """Right-hand side for :func:`meanfield.core.integrate.integrate`; ``y`` of shape (n, d).

        The unit-norm check is skipped (Runge-Kutta stages leave the sphere by O(dt^2)); non-finite stages
        give NaN velocities, which the driver rejects.

        Parameters
        ----------
        t : float
        y : ndarray, shape (n, d)

        Returns
        -------
        ndarray, shape (n, d)

        Raises
        ------
        ValueError
            ``y`` not a real array of shape (n, d), or not matching the length of :attr:`weights`.
        """
        a = None if isinstance(y, (str, bytes)) or y is None else np.asarray(y)
        if a is None or a.dtype.kind not in "fiu" or a.ndim != 2 or a.shape[1] != self.d or a.shape[0] < 1:
            raise ValueError(f"y must be a real array of shape (n, {self.d}) (the tokens); received "
                             f"{type(y).__name__}" + ("" if a is None else f" of shape {a.shape}"))
        a = a.astype(float, copy=False)
        if not np.all(np.isfinite(a)):
            return np.full(a.shape, np.nan)
        return self._velocity(a, self._weights(None, a.shape[0]))

    def observer(self, w=None):
        """An ``observe(t, y) -> dict`` hook for :func:`meanfield.core.integrate.integrate`.

        The keys are :data:`OBSERVER_KEYS` (what each reports is said there): clustering quantities only; no
        energy, since none is monotone along the causal flow (it is not a gradient flow).

        Parameters
        ----------
        w : array_like, shape (n,), optional
            Weights of the order parameter and of the RMS speed (default :attr:`weights`, else uniform).

        Returns
        -------
        callable
        """
        def observe(t, y):
            X = np.asarray(y, dtype=float)
            ww = self._weights(w, X.shape[0])
            v = self._velocity(X, ww)
            speed = np.linalg.norm(v, axis=1)
            m = (ww[:, None] * X).sum(axis=0) / ww.sum()
            if self.geometry == "sphere":
                U = X / np.linalg.norm(X, axis=1, keepdims=True)
                first = np.arccos(np.clip(U @ U[0], -1.0, 1.0)).max()
                mu = m / max(np.linalg.norm(m), 1e-300)
                diam = np.arccos(np.clip(U @ mu, -1.0, 1.0)).max()
                drift = float(np.abs(np.linalg.norm(X, axis=1) - 1.0).max())
            else:
                first = np.linalg.norm(X - X[0], axis=1).max()
                diam = np.linalg.norm(X - m, axis=1).max()
                drift = 0.0
            return {"max_angle_to_first": float(first), "diameter_proxy": float(diam),
                    "order_parameter": float(np.linalg.norm(m)),
                    "speed_rms": float(np.sqrt(np.sum(ww * speed ** 2) / ww.sum())),
                    "speed_max": float(speed.max()), "unit_drift": drift}
        return observe

    def score_bound(self) -> float:
        """Largest ``|M_h|_2`` over the heads (scores ``|<x, M y>|`` on the sphere are at most this).

        Returns
        -------
        float
        """
        return float(max(score_norm(h) for h in self.heads))


def _retract(X):
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _positive_weights(name, w, n):
    if isinstance(w, (str, bytes)):
        raise ValueError(f"{name} must be a 1-d array of positive finite weights; received {type(w).__name__}")
    a = validate.real_array(name, w, ("n",) if n is None else (n,))
    if a.size < 1 or not np.all(a > 0):
        bad = a[a <= 0]
        raise ValueError(f"{name} must hold positive weights (each token normalizes over its prefix; a weightless "
                         f"token 0 would have no attention mass); received {a.size} weights"
                         + (f", smallest {bad.min():.3g}" if bad.size else ""))
    if n is not None and a.size != n:
        raise ValueError(f"{name} must have shape ({n},) (one weight per token); received shape {a.shape}")
    return a
