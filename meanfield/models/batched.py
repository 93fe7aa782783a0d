r"""Many small particle systems at once: a leading batch axis (MODEL.md section 1, B copies).

State ``X`` of shape (B, n, d): B independent systems of n tokens each (uniform weights ``1/n``).
Every system sees the same heads (``heads`` a sequence of :class:`~meanfield.core.heads.Head`) or
its own heads (``heads`` a sequence of B such sequences, one per system; head ``h`` of every system
must then share ``beta``, kernel, normalization and kernel parameters, only ``M`` and ``V`` vary).
For system ``b`` and head ``h``

.. math::

    u_{b,i}^h = \frac{\tfrac1n\sum_{j} k_h(\langle x_{b,i}, M_{b,h} x_{b,j}\rangle) V_{b,h} x_{b,j}}{N_{b,i}^h},
    \qquad \frac{dx_{b,i}}{dt} = P_{x_{b,i}} \sum_h u_{b,i}^h \ (\text{sphere}),

exactly the sums of :class:`~meanfield.models.particles.ParticleSystem`, vectorized over ``b`` with
batched matrix products (chunks of systems of about ``chunk_bytes`` of scores).  Kernels and
normalizations come from the registries of :mod:`meanfield.core.kernels` (a softmax row is shifted
by its largest ``log k`` where the kernel could overflow, as in :mod:`meanfield.core.sums`).

Sinkhorn heads (``normalization="sinkhorn"``) solve their scalings for every system at once (one solve over
the (B, n) scalings: the systems are independent, the error is the largest over them) through
:meth:`~meanfield.core.kernels.Normalization.force`, like every normalization.  They refuse ``causal=True``: a
lower-triangular kernel has no doubly stochastic positive scaling (only the diagonal limit).

``causal=True`` masks the sums: token ``i`` attends to ``j <= i`` only (the decoder's mask; the
softmax normalizer sums over the same ``j`` and the mean divides by their number ``i + 1``, so token
``i`` moves exactly as in the system of the prefix ``x_0..x_i``).  The spectral (Funk-Hecke) path of
:mod:`meanfield.models.fastsum` serves shared zonal heads on S^2 (``summation="spectral"``, one spectral sum per system); it sums
over all tokens and cannot apply a mask, so ``causal=True`` with it is refused by name.

:meth:`BatchedSystem.rhs` and :attr:`BatchedSystem.retraction` plug into the one driver
:func:`meanfield.core.integrate.integrate` unchanged; :mod:`meanfield.models.step_rules` iterates the
transformer's own discrete maps (post-LN, pre-LN, peri-LN, nGPT) on the same sums.

Factored heads (:meth:`Head.from_factors <meanfield.core.heads.Head.from_factors>`, ``M = A B^T``, ``V = C D^T``,
inner sizes ``r, p < d``) are summed through their factors, as in :mod:`meanfield.core.sums`: the scores of a chunk
as ``(X A)(X B)^T`` (batched products with the stacked factors), the values as the p-vectors ``X D``, lifted by
``C^T`` after the sum: ``O(n^2 r)`` per system and head.  A head index takes a side factored when that side of
every system's head is factored with one inner size (per-system heads of mixed ranks, or mixed with dense ones:
the dense ``M`` and ``V``, the same numbers to rounding).

The direct sums run on the backend of the fields ``backend``, ``device`` and ``dtype`` (numpy by default; torch on the
CPU or CUDA, :mod:`meanfield.core.backends`): the stacked head matrices are converted once, the tokens at each call,
the forces back to float64 numpy (the state stays numpy at the driver); a Sinkhorn solve's vectors stay numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import backends, cost, validate
from ..core.choices import GEOMETRIES
from ..core.heads import Head, check_exp_range, check_heads
from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL
from ..core.sums import CHUNK_BYTES, factored_sides
from .fastsum import spectral_sum, spectral_supported
from .particles import UNIT_NORM_TOL, check_stage

__all__ = ["BATCHED_SUMMATIONS", "BatchedSystem", "project_tangent_batched", "retract_batched", "check_batch"]

BATCHED_SUMMATIONS = ("direct", "spectral")
"""``BatchedSystem(summation=...)``: pairwise sums (any heads, masks) or per-system spectral sums."""


def project_tangent_batched(X, U):
    """``P_x u = u - <u, x> x`` along the last axis; any leading shape.

    Parameters
    ----------
    X : ndarray, shape (..., d)
        The points (unit rows: the tangent spaces of the sphere); not checked.
    U : ndarray, shape (..., d)
        Vectors at those points (the shape of ``X``).

    Returns
    -------
    ndarray, shape (..., d)
        ``U`` less its component along each row of ``X``.
    """
    return U - np.sum(U * X, axis=-1, keepdims=True) * X


def retract_batched(X):
    """Retraction onto the unit sphere along the last axis (any leading shape).

    Parameters
    ----------
    X : ndarray, shape (..., d)
        Nonzero rows (not checked: a zero row gives NaN).

    Returns
    -------
    ndarray, shape (..., d)
        ``X / |X|`` along the last axis.
    """
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def check_batch(name, X, d=None, n=None, B=None, geometry="sphere"):
    """Validate a batch of token sets: shape (B, n, d), finite, unit rows on the sphere (never renormalized).

    Parameters
    ----------
    name : str
        The argument's name in the messages.
    X : array_like, shape (B, n, d)
        The token sets.
    d, n, B : int, optional
        Required sizes along the axes (None: any ``d >= 2``, ``n >= 1``, ``B >= 1``).
    geometry : {"sphere", "flat"}
        ``"sphere"`` checks ``| |x| - 1 | <= UNIT_NORM_TOL`` for every row; any other value checks nothing more.

    Returns
    -------
    ndarray, shape (B, n, d)
        ``X`` as a float64 array (not renormalized).

    Raises
    ------
    ValueError
        ``X`` not a finite real array of three dimensions; a size other than the required ``d``, ``n`` or ``B``;
        ``B < 1``, ``n < 1`` or ``d < 2``; (sphere) a row whose norm is off 1 by more than ``UNIT_NORM_TOL``.
    """
    X = validate.real_array(name, X, ("B", "n", "d"))
    for axis, (label, want) in enumerate((("B", B), ("n", n), ("d", d))):
        if want is not None and X.shape[axis] != want:
            raise ValueError(f"{name} must have {label} = {want} along axis {axis} (shape (B, n, d) = "
                             f"({B or 'B'}, {n or 'n'}, {d or 'd'})); received shape {X.shape}")
    if X.shape[0] < 1 or X.shape[1] < 1 or X.shape[2] < 2:
        raise ValueError(f"{name} must have shape (B, n, d) with B >= 1, n >= 1, d >= 2; received shape {X.shape}")
    if geometry == "sphere":
        dev = np.abs(np.linalg.norm(X, axis=-1) - 1.0).max()
        if dev > UNIT_NORM_TOL:
            raise ValueError(f"{name} rows must be unit vectors for spherical dynamics (tolerance {UNIT_NORM_TOL}); "
                             f"received max | |x| - 1 | = {dev:.3e}")
    return X


BATCHED_CAUSAL_FACTOR = 3.0
"""Factor on the cost guard's direct-sum rate :data:`meanfield.core.cost.SECONDS_PER_PAIR` for causal masks (one
batched evaluation measured 0.9e-8 to 1.3e-8 s per head-pair for mean and softmax heads at n = 2000; causal masks
about 3x, Sinkhorn solves 5-7x: :data:`BATCHED_SOLVE_FACTOR`)."""
BATCHED_SOLVE_FACTOR = 10.0


def estimate_batched(B, n, d, n_heads, *, causal=False, solved=0, chunk_bytes=CHUNK_BYTES) -> cost.Cost:
    """Estimated peak memory and time of one direct evaluation of a :class:`BatchedSystem` on (B, n, d).

    Memory: the (b, n, n) float64 score blocks of one chunk of ``b = max(1, chunk_bytes // 8 n^2)`` systems
    (twice for a Sinkhorn head: kernel and scores), plus, with a causal mask, the (n, n) boolean mask and
    the index arrays numpy forms to apply it (measured 2.13 x 8 n^2 with the mask, 1.01 without, 2.00 for
    Sinkhorn; tracemalloc, n = 2000), plus the (B, H, n, d) results.
    """
    per = max(1, int(chunk_bytes // (8.0 * n * n)))
    block = 8.0 * min(per, B) * n * n
    mem = block * (2.0 if solved else 1.0) + (9.0 * n * n if causal else 0.0) + 8.0 * B * n_heads * n * d * 2
    weight = (n_heads - solved) + BATCHED_SOLVE_FACTOR * solved
    # width d: the dense score and value products (cost.pair_seconds; a factored head's rank is narrower, and the
    # estimate stays an upper bound for it)
    secs = float(B) * weight * n * n * cost.pair_seconds(d) * (BATCHED_CAUSAL_FACTOR if causal else 1.0)
    mask = ", causal mask" if causal else ""
    return cost.Cost(f"BatchedSystem direct sums over X of shape ({B}, {n}, {d})", mem, secs,
                     f"{n_heads} head(s), (b, n, n) float64 score blocks of b = {min(per, B)} system(s){mask}")


def _per_system(heads):
    """``(reference heads, M (B|1, H, d, d), V (B|1, H, d, d), shared)`` from shared or per-system heads."""
    if isinstance(heads, Head) or not isinstance(heads, (tuple, list)) or len(heads) == 0 \
            or isinstance(heads[0], Head):           # shared heads (check_heads refuses None, str, numbers)
        ref = check_heads(heads)
        M = np.stack([h.M for h in ref])[None]
        V = np.stack([h.V for h in ref])[None]
        return ref, M, V, True
    systems = [check_heads(hs) for hs in heads]
    ref = systems[0]
    for b, hs in enumerate(systems):
        if len(hs) != len(ref) or hs[0].dim != ref[0].dim:
            raise ValueError(f"heads[{b}] must have {len(ref)} heads of dimension {ref[0].dim} like heads[0] "
                             f"(per-system heads share their shapes); received {len(hs)} heads of dimension "
                             f"{hs[0].dim}")
        for h, (a, r) in enumerate(zip(hs, ref)):
            if (a.beta, a.kernel, a.normalization, dict(a.kernel_params)) != \
                    (r.beta, r.kernel, r.normalization, dict(r.kernel_params)):
                raise ValueError(f"heads[{b}][{h}] must share beta, kernel, normalization and kernel_params with "
                                 f"heads[0][{h}] (only M and V vary per system); received beta={a.beta}, "
                                 f"kernel={a.kernel!r}, normalization={a.normalization!r}")
    M = np.stack([np.stack([h.M for h in hs]) for hs in systems])
    V = np.stack([np.stack([h.V for h in hs]) for hs in systems])
    return ref, M, V, False


def _factor_stacks(systems, side):
    """Per head index, the stacked factors of one side (``side`` 0: ``(A, B)`` of ``M``; 1: ``(C, D)`` of ``V``), each
    of shape (B|1, d, k), when every system's head takes that side factored (:func:`~meanfield.core.sums.factored_sides`)
    with one inner size ``k``; otherwise None (that side summed with the dense matrices)."""
    out = []
    for h in range(len(systems[0])):
        hs = [s[h] for s in systems]
        if not all(factored_sides(x)[side] for x in hs) or len({x.factors[2 * side].shape for x in hs}) != 1:
            out.append(None)
            continue
        stacks = tuple(np.stack([x.factors[2 * side + k] for x in hs]) for k in (0, 1))
        for F in stacks:
            F.setflags(write=False)
        out.append(stacks)
    return tuple(out)


@validate.renamed(tolerance="kernel_tol")
@dataclass(frozen=True, eq=False)
class BatchedSystem:
    """B systems of n tokens, integrated together.

    Parameters
    ----------
    heads : sequence of Head, or sequence of B sequences of Head
        Shared heads, or one tuple of heads per system (same count, dimension, beta, kernel,
        normalization and kernel parameters per head index; ``M`` and ``V`` vary).
    geometry : {"sphere", "flat"}
    causal : bool
        Token ``i`` attends to tokens ``j <= i`` only (direct sums only).
    summation : {"direct", "spectral"}
        Pairwise sums, or one spectral sum for every system (:func:`meanfield.models.fastsum.spectral_sum`: shared
        heads on S^2, zonal or general, no mask).
    chunk_bytes : int
        Work space of one block of scores (whole systems per block).
    kernel_tol : float
        Accuracy of the spectral sums (relative truncation accuracy of the kernels' expansion, as for
        :class:`~meanfield.models.particles.ParticleSystem`).
    sinkhorn_tol, sinkhorn_maxiter :
        Marginal tolerance and iteration cap of the scalings of Sinkhorn heads (as for
        :class:`~meanfield.models.particles.ParticleSystem`; cold start at every call).
    backend, device, dtype :
        Where the direct sums run (as for :class:`~meanfield.models.particles.ParticleSystem`: ``"numpy"`` or
        ``"torch"``, None / ``"cpu"`` / ``"cuda"``, ``"float64"`` or ``"float32"``); results are float64 numpy arrays.

    Raises
    ------
    ValueError
        A field out of its domain (named, with the allowed values); ``BackendError`` when torch or the GPU is missing.
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).
    """

    heads: tuple
    geometry: str = "sphere"
    causal: bool = False
    summation: str = "direct"
    chunk_bytes: int = CHUNK_BYTES
    kernel_tol: float = 1e-10
    sinkhorn_tol: float = SINKHORN_TOL
    sinkhorn_maxiter: int = SINKHORN_MAXITER
    backend: str = "numpy"
    device: str | None = None
    dtype: str = "float64"

    def __post_init__(self):
        ref, M, V, shared = _per_system(self.heads)
        on = backends.get_backend(self.backend, self.device, self.dtype)
        validate.choice("geometry", self.geometry, GEOMETRIES)
        validate.boolean("causal", self.causal)
        validate.choice("summation", self.summation, BATCHED_SUMMATIONS)
        validate.integer("chunk_bytes", self.chunk_bytes, 1, what="a positive integer")
        validate.real("kernel_tol", self.kernel_tol, 1e-14, 1, hi_open=True, what="a number in [1e-14, 1)")
        object.__setattr__(self, "sinkhorn_tol", validate.real("sinkhorn_tol", self.sinkhorn_tol, 0, 1, lo_open=True,
                                                               hi_open=True, what="a number in (0, 1)"))
        object.__setattr__(self, "sinkhorn_maxiter", validate.integer("sinkhorn_maxiter", self.sinkhorn_maxiter, 1))
        solved = [h for h, head in enumerate(ref) if not NORMALIZATIONS[head.normalization].row_local]
        backends.check_sinkhorn_tol(on, self.sinkhorn_tol, bool(solved))
        if self.causal and solved:
            raise ValueError(f"causal must be False with heads of normalization 'sinkhorn' (heads[{solved[0]}]): a "
                             f"doubly stochastic scaling of a causal (lower-triangular) kernel has no positive "
                             f"solution, only the diagonal limit; received causal=True")
        if self.geometry == "sphere":
            check_exp_range(ref)
            if not shared:
                for hs in self.heads:
                    check_exp_range(check_heads(hs))
        spectral = None
        if self.summation == "spectral":
            if self.causal:
                raise ValueError("causal must be False with summation='spectral' (allowed: causal=False, or "
                                 "summation='direct' for a causal mask); received causal=True: a spectral sum "
                                 "is over all tokens and cannot apply a mask")
            if not shared:
                raise ValueError("summation='spectral' needs heads shared by every system (allowed: 'direct' "
                                 "for per-system heads); received per-system heads")
            why = spectral_supported(ref, self.geometry)
            if why is not None:
                raise ValueError(f"summation 'spectral' is not available: {why}")
            spectral = spectral_sum(ref, self.kernel_tol, sinkhorn_tol=self.sinkhorn_tol,
                                    sinkhorn_maxiter=self.sinkhorn_maxiter)
        M.setflags(write=False)
        V.setflags(write=False)
        systems = [ref] if shared else [check_heads(hs) for hs in self.heads]
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_factors", (_factor_stacks(systems, 0), _factor_stacks(systems, 1)))
        object.__setattr__(self, "_M", M)
        object.__setattr__(self, "_V", V)
        object.__setattr__(self, "_shared", shared)
        object.__setattr__(self, "_spectral", spectral)
        object.__setattr__(self, "_masks", {})
        object.__setattr__(self, "_solved", tuple(solved))
        object.__setattr__(self, "_backend", on)
        factors = tuple(tuple(None if F is None else tuple(on.asarray(G) for G in F) for F in side)
                        for side in self._factors)           # the stacks on the backend, converted once
        object.__setattr__(self, "_on", (on.asarray(M), on.asarray(V), factors))

    # ------------------------------------------------------------------ shapes
    @property
    def d(self) -> int:
        return self._ref[0].dim

    @property
    def n_heads(self) -> int:
        return len(self._ref)

    @property
    def batch(self):
        """Number of systems fixed by per-system heads, or None (shared heads: any B)."""
        return None if self._shared else self._M.shape[0]

    @property
    def retraction(self):
        """Row normalization on the sphere (any batch shape), None when flat."""
        return retract_batched if self.geometry == "sphere" else None

    def check(self, X, name="X"):
        """Validated batch of tokens (B, n, d); B must match per-system heads.

        Parameters
        ----------
        X : array_like, shape (B, n, d)
            Token sets (unit rows for the sphere geometry), ``d`` the heads' dimension.
        name : str
            The argument's name in the messages.

        Returns
        -------
        ndarray, shape (B, n, d)
            ``X`` as a float64 array (not renormalized).

        Raises
        ------
        ValueError
            What :func:`check_batch` refuses (``B`` must equal :attr:`batch` for per-system heads).
        """
        return check_batch(name, X, self.d, None, self.batch, self.geometry)

    def _mask(self, n, ref=None):
        """The causal mask (n, n), True where ``j > i`` (masked out); on the backend of ``ref`` when given."""
        if n not in self._masks:
            self._masks[n] = np.triu(np.ones((n, n), dtype=bool), 1)     # True where j > i: masked out
        if ref is None or isinstance(ref, np.ndarray):
            return self._masks[n]
        if (n, "on") not in self._masks:
            self._masks[n, "on"] = backends.namespace(ref).asarray(self._masks[n], device=ref.device)
        return self._masks[n, "on"]

    # ------------------------------------------------------------------ sums
    def forces(self, X, *, checked=False):
        """Per-head aggregates ``u`` before projection, shape (B, H, n, d) (direct sums).

        Parameters
        ----------
        X : array_like, shape (B, n, d)
            Token sets, uniform weights ``1/n`` in each system.
        checked : bool
            ``X`` is already a validated float64 array (skips :meth:`check`).

        Returns
        -------
        ndarray, shape (B, H, n, d)
            The aggregates of each system and head (causal mask applied when ``causal``); NaN everywhere for a
            non-finite ``X`` when a head is a Sinkhorn head.

        Raises
        ------
        ValueError
            What :meth:`check` refuses; ``B`` other than :attr:`batch`; an evaluation above the memory or time limit
            (:func:`estimate_batched`, :mod:`meanfield.core.cost`); ``SinkhornError`` (a ``ValueError``) when a
            Sinkhorn solve does not converge.
        """
        if not checked:
            X = self.check(X)
        B, n, d = X.shape
        if self.batch is not None and B != self.batch:
            raise ValueError(f"X must hold B = {self.batch} systems (one per set of per-system heads); "
                             f"received shape {X.shape}")
        estimate_batched(B, n, d, self.n_heads, causal=self.causal, solved=len(self._solved),
                         chunk_bytes=self.chunk_bytes).check(
            "fewer tokens n (the score blocks grow as n^2), or summation='spectral' (zonal heads on S^2, no "
            "causal mask)")
        out = np.empty((B, self.n_heads, n, d))
        if self._solved and not np.all(np.isfinite(X)):      # a blown-up stage: NaN, not a solve error
            out.fill(np.nan)
            return out
        per = max(1, int(self.chunk_bytes // (8 * n * n)))
        Xb = self._backend.asarray(X)
        mask = self._mask(n, Xb) if self.causal else None
        Mon, Von, factors = self._on

        def pick(A, sl, h):
            return A[:, h] if self._shared else A[sl, h]

        with self._backend.guard("BatchedSystem.forces (direct sums)"):
            for start in range(0, B, per):
                sl = slice(start, min(start + per, B))
                for h, head in enumerate(self._ref):
                    AB, CD = (None if F[h] is None else tuple(G if self._shared else G[sl] for G in F[h])
                              for F in factors)
                    host = None
                    if not self._backend.reference:      # norms and symmetry from the numpy stacks
                        hAB = self._factors[0][h]
                        host = (pick(self._M, sl, h), None if hAB is None else
                                tuple(G if self._shared else G[sl] for G in hAB))
                    sums = _BatchSums(head, Xb[sl], pick(Mon, sl, h), pick(Von, sl, h), mask, AB, CD, host)
                    out[sl, h] = backends.to_numpy(NORMALIZATIONS[head.normalization].force(
                        sums, tol=self.sinkhorn_tol, maxiter=self.sinkhorn_maxiter, where=f"heads[{h}]")[0])
        return out

    def velocity(self, X):
        """Token velocities ``dx/dt``, shape (B, n, d).

        Parameters
        ----------
        X : array_like, shape (B, n, d)
            Token sets (unit rows for the sphere geometry), uniform weights ``1/n`` in each system.

        Returns
        -------
        ndarray, shape (B, n, d)
            ``sum_h u^h`` of each system, projected onto the tangent spaces on the sphere (spectral sums: per system).

        Raises
        ------
        ValueError
            What :meth:`check` or :meth:`forces` refuses.
        """
        return self._velocity(self.check(X))

    def _velocity(self, X):
        if self._spectral is not None:
            w = np.full(X.shape[1], 1.0 / X.shape[1])
            return np.stack([self._spectral.velocity(Xb, w) for Xb in X])
        v = self.forces(X, checked=True).sum(axis=1)
        return project_tangent_batched(X, v) if self.geometry == "sphere" else v

    def field(self, X, *, checked=False):
        """The unprojected sum ``sum_h u^h`` (B, n, d): what the discrete step rules add to the tokens.

        ``X`` is validated as by :meth:`velocity` (unit rows on the sphere, never renormalized), unless ``checked``
        (the continuous-time limit's ``rhs``: retracted stages, where a non-finite stage must propagate to the
        driver, which rejects the step, as :meth:`rhs` does).

        Parameters
        ----------
        X : array_like, shape (B, n, d)
            Token sets, uniform weights ``1/n`` in each system.
        checked : bool
            Skip the validation of ``X`` (a float64 array of shape (B, n, d) is then expected).

        Returns
        -------
        ndarray, shape (B, n, d)
            ``sum_h u^h`` of each system, not projected.

        Raises
        ------
        ValueError
            What :meth:`check` (unless ``checked``) or :meth:`forces` refuses.
        """
        if not checked:
            X = self.check(X)
        if self._spectral is not None:
            w = np.full(X.shape[1], 1.0 / X.shape[1])
            return np.stack([self._spectral.forces(Xb, w)[0].sum(axis=0) for Xb in X])
        return self.forces(X, checked=True).sum(axis=1)

    def rhs(self, t, y):
        """Right-hand side for :func:`meanfield.core.integrate.integrate`; ``y`` of shape (B, n, d).

        The unit-norm check is skipped (Runge-Kutta stages leave the sphere by O(dt^2)); the formula
        is a smooth extension of the field off the sphere, as for ``ParticleSystem.rhs``; NaN and inf are
        passed on to the driver (which rejects the step), type and shape checked.

        Parameters
        ----------
        t : float
            Time (unused: the systems are autonomous).
        y : array_like, shape (B, n, d)
            A stage of the token sets.

        Returns
        -------
        ndarray, shape (B, n, d)
            The velocities at ``y`` (:meth:`velocity` without the unit-norm check).

        Raises
        ------
        ValueError
            ``y`` not a real array of shape ``(B, n, d)`` (``B`` = :attr:`batch` for per-system heads); what
            :meth:`forces` refuses.
        """
        y = check_stage(y, self.d, ("B" if self.batch is None else self.batch, "n"))
        if self.batch is not None and y.shape[0] != self.batch:
            raise ValueError(f"y must have B = {self.batch} systems along axis 0 (one per set of heads); received "
                             f"shape {y.shape}")
        return self._velocity(y)


def _mT(A):
    """The matrix transpose over the last two axes (a view): ``np.swapaxes`` for numpy, ``.mT`` for the others."""
    return np.swapaxes(A, -1, -2) if isinstance(A, np.ndarray) else A.mT


class _BatchSums:
    """One head's sums over a chunk of systems (b, n, d), uniform weights ``1/n``: the ``sums`` object of
    :meth:`~meanfield.core.kernels.Normalization.force` (``fused``: the one-pass mean/softmax sums;
    ``apply``/``apply_t``/``aggregate`` on (b, n) fields for a solve).  ``AB`` = ``(A, B)`` and ``CD`` = ``(C, D)``,
    stacked factors of shape (b|1, d, k), or None: the scores, the values summed through the factors.  Arrays of any
    backend (one namespace); ``host`` = ``(M, AB)`` as numpy arrays for the norm and symmetry checks of another backend
    (None: ``M`` and ``AB`` are numpy)."""

    axis = -1

    def __init__(self, head, X, M, V, mask, AB=None, CD=None, host=None):
        self.head, self.X, self.M, self.V, self.mask, self.AB, self.CD = head, X, M, V, mask, AB, CD
        self.host = (M, AB) if host is None else host
        self.xp = backends.namespace(X)
        self.shape = X.shape[:2]
        self._K = None

    @property
    def apply_t(self):
        """The transposed application, or None when every ``M`` is exactly symmetric (decided on first use: only
        a solve reads it)."""
        if not hasattr(self, "_symmetric"):
            M = self.host[0]
            self._symmetric = np.array_equal(M, np.swapaxes(M, -1, -2))
        return None if self._symmetric else self._apply_t

    def _scores(self, rate):
        """Scaled scores ``rate <x_i, M x_j>``, shape (b, n, n): dense ``X (X rate M^T)^T``, factored ``(X A)(X rate B)^T``."""
        X = self.X
        if self.AB is None:
            Y = X @ (rate * _mT(self.M))           # rows rate * (M x_j)^T
            return X @ _mT(Y)
        A, B = self.AB
        return (X @ A) @ _mT(X @ (rate * B))

    def _values(self):
        """``(W, C)``: value coordinates of the tokens (dense rows ``(V x_j)^T``; factored ``(D^T x_j)^T``) and the
        lift of their aggregates (factored: ``@ C^T``; None: none)."""
        if self.CD is None:
            return self.X @ _mT(self.V), None
        C, D = self.CD
        return self.X @ D, C

    @staticmethod
    def _lift(U, C):
        return U if C is None else U @ _mT(C)

    def _score_norm(self):
        """Largest ``|M|_2`` of the chunk: dense an SVD per matrix; factored ``|R_A R_B^T|_2`` (QR of the factors)."""
        M, AB = self.host
        if AB is None:
            return np.linalg.norm(M, 2, axis=(-2, -1)).max()
        RA, RB = (np.linalg.qr(F, mode="r") for F in AB)
        return np.linalg.norm(RA @ np.swapaxes(RB, -1, -2), 2, axis=(-2, -1)).max()

    def _kernel(self):
        if self._K is None:                                       # unshifted k (range-checked heads)
            kern, head = KERNELS[self.head.kernel], self.head
            self._K = kern.scaled(head, self._scores(kern.rate(head)))
        return self._K

    def _w(self, f):
        """Sources ``f / n`` (``f = None``: 1), shape (b, n, 1)."""
        if self.xp is np:
            return (np.ones(self.shape) if f is None else f)[..., None] / self.shape[1]
        f = self.xp.ones(self.shape, dtype=self.X.dtype, device=self.X.device) if f is None else backends.like(f, self.X)
        return f[..., None] / self.shape[1]

    def apply(self, f):
        return (self._kernel() @ self._w(f))[..., 0]

    def _apply_t(self, f):
        return (_mT(self._kernel()) @ self._w(f))[..., 0]

    def aggregate(self, f):
        XV, C = self._values()
        return self._lift(self._kernel() @ (self._w(f) * XV), C)

    def fused(self, norm):
        head, X, mask, xp = self.head, self.X, self.mask, self.xp
        kern = KERNELS[head.kernel]
        n = X.shape[1]
        XV, C = self._values()                                    # rows (V x_j)^T (factored: (D^T x_j)^T)
        S = self._scores(kern.rate(head))                         # (b, n, n) scaled scores
        normalized = norm.uses_normalizer
        sq = np.einsum("bnd,bnd->bn", X, X) if xp is np else xp.sum(X * X, axis=-1)
        smax = self._score_norm() * float(xp.max(sq))
        if normalized and kern.needs_shift(head, smax):               # |s| <= |M|_2 max|x|^2
            S = kern.log_scaled(head, S, out=S)
            if mask is not None:
                S[:, mask] = -np.inf
            S -= xp.max(S, axis=-1, keepdims=True)
            S = np.exp(S, out=S) if xp is np else xp.exp(S)
        else:
            S = kern.scaled(head, S, out=S)
            if mask is not None:
                S[:, mask] = 0.0
        U = S @ XV
        if normalized:
            Z = xp.sum(S, axis=-1)
            U = norm.combine(U, Z)
        elif mask is not None:
            U /= (np.arange(1, n + 1) if xp is np else xp.arange(1, n + 1, dtype=U.dtype, device=U.device))[:, None]
        else:
            U /= n
        return self._lift(U, C), None             # no normalizer reported (batched forces are u only)

