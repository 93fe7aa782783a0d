r"""Compiled causal prefix sums of zonal feature expansions on S^1 and S^2 (numba): the inner loop of
:class:`meanfield.models.causal.CausalSystem`'s spectral summation.

A zonal kernel expands in real orthonormal features, ``k(<x, y>) = sum_a c_{l(a)} F_a(x) F_a(y)`` (real spherical
harmonics of degree ``l <= L`` on S^2, ``D = (L + 1)^2`` of them; Fourier modes ``1, sqrt2 cos k theta,
sqrt2 sin k theta`` with ``k <= K`` on S^1, ``D = 2 K + 1``), so the sum over every token before a block is
``sum_a c_{l(a)} F_a(x_i) B_a`` with the carried coefficients ``B_a = sum_{j before} F_a(x_j) s_j``.
:func:`causal_far_sums` walks the tokens block by block: it evaluates each block's features once, by the same
three-term recurrences as :func:`meanfield.models.causal.sphere_features` (S^2) or by rotations (S^1), takes the
block's far sums against the carried coefficients, then adds the block's own coefficients to them.  The features
never leave the cache (a block's ``D x block`` numbers are made, used twice and dropped).  Measured at lmax 22 and
10^5 tokens on one thread: 0.046 s for the harmonics and both sums, where the numpy recurrences took 0.19 s for the
harmonics alone; the whole causal velocity went from 0.21-0.30 s to 0.09 s (``benchmarks/RESULTS_causal.md``).

numba is imported here and nowhere else.  The kernels are compiled on first use (a few seconds) and cached on disk
(``cache=True``: next to this file, or in ``NUMBA_CACHE_DIR``; where no cache folder is writable they are compiled
in every process instead).  They run on one thread; ``fastmath`` allows only reassociation and fused multiply-adds
(the block reductions over tokens vectorize), so a result is the same, bit for bit, from run to run on one machine,
and within about 1e-14 of the largest sum of the plain loops' result (a CPU with other vector widths reassociates
differently).  Rows are normalized here (for direct callers: a zero row counts as the north pole on S^2, as ``theta = 0`` on S^1;
:class:`~meanfield.models.causal.CausalSystem` refuses such rows before).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from . import validate

_FASTMATH = {"reassoc", "contract"}


def _compiled(fn):
    """``fn`` compiled by numba on first call, cached on disk where a cache folder is writable."""
    try:
        return numba.njit(cache=True, fastmath=_FASTMATH)(fn)
    except RuntimeError:                         # "cannot cache function ...: no locator available" (read-only)
        return numba.njit(cache=False, fastmath=_FASTMATH)(fn)


@_compiled
def _cos_sin(x, y):                              # pragma: no cover - compiled
    """``(cos phi, sin phi)`` of the direction of ``(x, y)``; ``(1, 0)`` at the origin (the pole, ``arctan2(0, 0)``)."""
    r = math.sqrt(x * x + y * y)
    return (x / r, y / r) if r > 0 else (1.0, 0.0)


@_compiled
def _pair(acc, own, carry, c, ic, js, fc, fs, St):   # pragma: no cover - compiled
    """One cos/sin pair of features ``fc``, ``fs`` (columns ``ic``, ``js``) of a block: its far sums against the
    carried coefficients (times each head's multiplier ``c[h]``) into ``acc``, its own coefficients into ``own``."""
    H, ncol, B = acc.shape
    for h in range(H):
        for k in range(ncol):
            gc, gs = c[h] * carry[ic, k], c[h] * carry[js, k]
            for t in range(B):
                acc[h, k, t] += gc * fc[t] + gs * fs[t]
    for k in range(ncol):
        sc, ss = 0.0, 0.0
        for t in range(B):
            sc += fc[t] * St[k, t]
            ss += fs[t] * St[k, t]
        own[ic, k] += sc
        own[js, k] += ss


@_compiled
def _flush(far, acc, own, carry, a):             # pragma: no cover - compiled
    """End of a block starting at row ``a``: its far sums out, its own coefficients into the carry."""
    H, ncol, B = acc.shape
    for h in range(H):
        for k in range(ncol):
            for t in range(B):
                far[h, k, a + t] = acc[h, k, t]
    for i in range(own.shape[0]):
        for k in range(ncol):
            carry[i, k] += own[i, k]
            own[i, k] = 0.0


@_compiled
def _sphere_far(P, S, cdeg, carry, B):           # pragma: no cover - compiled (checked against numpy in tests)
    m, ncol = P.shape[0], S.shape[1]
    H, L = cdeg.shape[0], cdeg.shape[1] - 1
    D = (L + 1) * (L + 1)
    far = np.zeros((H, ncol, m))
    A = np.zeros((L + 1, L + 1))
    Bc = np.zeros((L + 1, L + 1))
    for mm in range(L + 1):
        for l in range(mm + 2, L + 1):
            A[l, mm] = math.sqrt((4.0 * l * l - 1.0) / (l * l - mm * mm))
            Bc[l, mm] = math.sqrt(((l - 1.0) ** 2 - mm * mm) / (4.0 * (l - 1.0) ** 2 - 1.0))
    r2 = math.sqrt(2.0)
    z, st, cp, sp = np.empty(B), np.empty(B), np.empty(B), np.empty(B)
    pmm, cm, sm = np.empty(B), np.empty(B), np.empty(B)
    p0, p1, p2 = np.empty(B), np.empty(B), np.empty(B)
    fc, fs = np.empty(B), np.empty(B)
    St = np.empty((ncol, B))
    own = np.zeros((D, ncol))
    acc = np.empty((H, ncol, B))
    for a in range(0, m, B):
        for t in range(B):
            x, y, zz = P[a + t, 0], P[a + t, 1], P[a + t, 2]
            r = math.sqrt(x * x + y * y + zz * zz)
            if r > 0:
                x, y, zz = x / r, y / r, zz / r
            else:
                zz = 1.0
            z[t] = min(1.0, max(-1.0, zz))
            st[t] = math.sqrt(x * x + y * y)
            cp[t], sp[t] = _cos_sin(x, y)
            pmm[t] = math.sqrt(1.0 / (4.0 * math.pi))
            cm[t] = 1.0
            sm[t] = 0.0
            for k in range(ncol):
                St[k, t] = S[a + t, k]
        acc[:] = 0.0
        col = 0
        for mm in range(L + 1):
            if mm > 0:
                f = math.sqrt((2 * mm + 1) / (2.0 * mm))
                for t in range(B):
                    pmm[t] = f * st[t] * pmm[t]
                    c, s = cm[t], sm[t]
                    cm[t] = c * cp[t] - s * sp[t]
                    sm[t] = s * cp[t] + c * sp[t]
            width = L + 1 - mm
            for j in range(width):
                l = mm + j
                if j == 0:
                    for t in range(B):
                        p0[t] = pmm[t]
                elif j == 1:
                    f = math.sqrt(2 * mm + 3.0)
                    for t in range(B):
                        p1[t] = p0[t]
                        p0[t] = f * z[t] * p1[t]
                else:
                    aa, bb = A[l, mm], Bc[l, mm]
                    for t in range(B):
                        p2[t] = p1[t]
                        p1[t] = p0[t]
                        p0[t] = aa * (z[t] * p1[t] - bb * p2[t])
                if mm == 0:
                    ic = col + j
                    for h in range(H):
                        for k in range(ncol):
                            g = cdeg[h, l] * carry[ic, k]
                            for t in range(B):
                                acc[h, k, t] += g * p0[t]
                    for k in range(ncol):
                        sc = 0.0
                        for t in range(B):
                            sc += p0[t] * St[k, t]
                        own[ic, k] += sc
                else:
                    ic, js = col + j, col + width + j
                    for t in range(B):
                        fc[t] = r2 * p0[t] * cm[t]
                        fs[t] = r2 * p0[t] * sm[t]
                    _pair(acc, own, carry, cdeg[:, l], ic, js, fc, fs, St)
            col += width if mm == 0 else 2 * width
        _flush(far, acc, own, carry, a)
    return far


@_compiled
def _circle_far(P, S, cdeg, carry, B):           # pragma: no cover - compiled (checked against numpy in tests)
    m, ncol = P.shape[0], S.shape[1]
    H, K = cdeg.shape[0], cdeg.shape[1] - 1
    D = 2 * K + 1
    far = np.zeros((H, ncol, m))
    r2 = math.sqrt(2.0)
    c1, s1, ck, sk = np.empty(B), np.empty(B), np.empty(B), np.empty(B)
    fc, fs = np.empty(B), np.empty(B)
    St = np.empty((ncol, B))
    own = np.zeros((D, ncol))
    acc = np.empty((H, ncol, B))
    for a in range(0, m, B):
        for t in range(B):
            c1[t], s1[t] = _cos_sin(P[a + t, 0], P[a + t, 1])
            ck[t] = 1.0
            sk[t] = 0.0
            for k in range(ncol):
                St[k, t] = S[a + t, k]
        for h in range(H):                       # degree 0: the feature 1
            for k in range(ncol):
                g = cdeg[h, 0] * carry[0, k]
                for t in range(B):
                    acc[h, k, t] = g
        for k in range(ncol):
            sc = 0.0
            for t in range(B):
                sc += St[k, t]
            own[0, k] += sc
        for q in range(1, K + 1):
            for t in range(B):
                c, s = ck[t], sk[t]
                ck[t] = c * c1[t] - s * s1[t]
                sk[t] = s * c1[t] + c * s1[t]
                fc[t] = r2 * ck[t]
                fs[t] = r2 * sk[t]
            _pair(acc, own, carry, cdeg[:, q], q, K + q, fc, fs, St)
        _flush(far, acc, own, carry, a)
    return far


def causal_far_sums(P, S, cdeg, carry, block):
    """Far sums of the causal spectral prefix sums over one chunk of tokens, block by block; ``carry`` is updated.

    For token ``i`` of block ``b`` (blocks of ``block`` consecutive rows), head ``h`` and source column ``k``:
    ``far[h, k, i] = sum_a cdeg[h, l(a)] F_a(P_i) (carry_a + sum_{j in blocks before b} F_a(P_j) S_jk)``, the
    kernel sum of row ``i`` over every token before its block (the tokens of earlier chunks through ``carry``).  On
    return ``carry`` holds the coefficients of every token up to the chunk's end.  Features and their order are
    those of :func:`meanfield.models.causal.sphere_features` (``d = 3``) and
    :func:`meanfield.models.causal.circle_features` (``d = 2``).

    Parameters
    ----------
    P : ndarray, shape (m, d)
        Points (their directions are used), ``d`` in {2, 3}; ``m`` a multiple of ``block``.
    S : ndarray, shape (m, c)
        The tokens' sources (e.g. ``w_j (1, x_j)``).
    cdeg : ndarray, shape (H, L + 1)
        Each head's multiplier per degree (``L >= 1``).
    carry : ndarray, shape (D, c)
        The coefficients of the tokens before the chunk, ``D = (L + 1)^2`` (``d = 3``) or ``2 L + 1`` (``d = 2``);
        updated in place.
    block : int
        Rows per block (``>= 1``).

    Returns
    -------
    ndarray, shape (H, c, m)

    Raises
    ------
    ValueError
        Shapes that do not fit together, or ``m`` not a multiple of ``block`` (named).
    """
    block = validate.integer("block", block, 1, None, what="an integer >= 1")
    P, S, cdeg = (np.ascontiguousarray(a, dtype=float) for a in (P, S, cdeg))
    if P.ndim != 2 or P.shape[1] not in (2, 3):
        raise ValueError(f"P must have shape (m, 2) or (m, 3); received shape {P.shape}")
    m, d = P.shape
    if m % block:
        raise ValueError(f"P must have a multiple of block = {block} rows; received {m}")
    if S.ndim != 2 or S.shape[0] != m:
        raise ValueError(f"S must have shape ({m}, c); received shape {S.shape}")
    if cdeg.ndim != 2 or cdeg.shape[1] < 2:
        raise ValueError(f"cdeg must have shape (H, L + 1) with L >= 1; received shape {cdeg.shape}")
    L = cdeg.shape[1] - 1
    D = (L + 1) ** 2 if d == 3 else 2 * L + 1
    if not (isinstance(carry, np.ndarray) and carry.dtype == np.float64 and carry.shape == (D, S.shape[1])
            and carry.flags.c_contiguous and carry.flags.writeable):
        raise ValueError(f"carry must be a writeable C-contiguous float64 array of shape ({D}, {S.shape[1]}); received "
                         f"{getattr(carry, 'shape', type(carry).__name__)}")
    return (_sphere_far if d == 3 else _circle_far)(P, S, cdeg, carry, block)
