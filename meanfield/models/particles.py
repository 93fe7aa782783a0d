r"""Finite-n multi-head attention dynamics in any dimension (MODEL.md section 1). numpy only.

Tokens ``X`` (n, d) carry weights ``w`` (n,) summing to 1 (uniform ``1/n`` by default; the
quadrature weights ``rho * w_g`` of a density on the nodes make the same code evaluate the
continuum velocity).  For head ``h`` with kernel ``k_h``

.. math::

    u_i^h = \frac{\sum_j w_j k_h(\langle x_i, M_h x_j\rangle) V_h x_j}{N_i^h},\qquad
    N_i^h = 1 \ (\text{mean}),\quad N_i^h = \sum_j w_j k_h(s_{ij}^h) \ (\text{softmax}),

and ``dx_i/dt = P_{x_i} sum_h u_i^h`` (sphere) or ``sum_h u_i^h`` (flat).  With uniform
weights ``u_i^h = f_i^h / n`` (mean) or ``f_i^h / Z_i^h`` (softmax) in MODEL.md's notation.
The energy is ``E_h = 1/2 sum_ij w_i w_j K_h(s_ij)`` with ``K`` the antiderivative of the kernel
(:data:`meanfield.core.kernels.KERNELS`: ``exp(beta s)/beta`` (exp), ``relu(s)^2 / 2`` (relu),
``softplus(beta s + b) / beta`` (sigmoid)).

Sinkhorn heads (``normalization="sinkhorn"``, MODEL.md section 6) move with the doubly stochastic
``P_ij = a_i k_ij b_j``: ``u_i^h = sum_j P_ij w_j V_h x_j``, the scalings solved to ``sinkhorn_tol``
(:meth:`ParticleSystem.sinkhorn_scalings` reports them and the marginal error reached) from a cold start
at every new state, and the energy is ``E_S = -(1/(2 beta)) sum_i w_i (log a_i + log b_i)`` (``-(1/beta)
sum_i w_i log a_i`` for symmetric ``M``, where ``a = b``).  The map from kernel sums to forces is
:meth:`meanfield.core.kernels.Normalization.force` for every normalization.

Memory is bounded by processing rows of the n x n score matrix in chunks of about
``chunk_bytes`` bytes, so n = 20 000 with 4 heads needs a few MiB of work space.  Factored heads
(:meth:`Head.from_factors <meanfield.core.heads.Head.from_factors>`, ``M = A B^T``, ``V = C D^T`` of inner sizes
``r, p < d``) are summed through their factors (:func:`meanfield.core.sums.score_sides`): ``O(n^2 r)`` per head
instead of ``O(n^2 d)``, velocities, energies and their gradients alike.  For zonal
heads on S^2 the sums can instead be evaluated spectrally in O(n + lmax^2 log lmax)
(:mod:`meanfield.models.fastsum`, field ``summation``), with the same semantics to ``kernel_tol``.

The direct sums run on the backend of the fields ``backend``, ``device`` and ``dtype`` (numpy by default; torch on the
CPU or a CUDA device: :mod:`meanfield.core.backends`).  The state stays a float64 numpy array at the driver and in
every result: tokens are converted to the backend at the model's boundary and the forces, velocities and energies
back (measured in ``benchmarks/RESULTS_gpu.md``: the conversion costs nothing on the CPU).  The spectral paths and
:meth:`ParticleSystem.energy_gradients` stay numpy float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import backends, validate
from ..core.bispherical import ACCURACY_LOSS
from ..core.choices import GEOMETRIES, SUMMATIONS
from ..core.cost import SECONDS_PER_PAIR, STEP_OVERHEAD_S, guard, pair_seconds
from ..core.heads import check_exp_range, check_heads
from ..core.kernels import KERNELS, NORMALIZATIONS, kernel
from ..core.sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL, SinkhornResult
from ..core.sums import DirectSums, LastScalings, aggregate, lift_values, pair_sum, row_chunks, score_sides
from .fastsum import spectral_sum, spectral_supported
from .generalsum import GeneralSpectralSum
from .plans import check_particle_run, particle_plan

SPECTRAL_MIN_N = 2000
"""Smallest n for which ``summation="auto"`` uses the spectral sum.  Measured (benchmarks/RESULTS.md):
spectral is already faster from n ~ 250-500 at beta = 10; 2000 leaves a margin for larger
``lmax`` (``beta |lambda|`` up to ~40) and keeps small systems on the exact pairwise sums."""
UNIT_NORM_TOL = 1e-8
DIRECT_PAIR_RATE = 1.0 / SECONDS_PER_PAIR
"""Head-pairs per second assumed for the time estimate of a direct (pairwise) sum: the inverse of the one
rate of the cost guard, :data:`meanfield.core.cost.SECONDS_PER_PAIR` (1e8 head-pairs/s)."""
DIRECT_TIME_LIMIT_S = 600.0
"""A direct O(n^2) evaluation estimated (at :data:`DIRECT_PAIR_RATE`) to take longer than this is
refused up front (:meth:`ParticleSystem.check_direct`): never a silent O(n^2) at n = 10^6."""

SOLVE_PASSES = 45
"""Direct passes counted for a head whose normalization solves over the tokens (Sinkhorn) in the cost
estimates of :meth:`ParticleSystem.direct_cost`: a cold symmetric solve to 1e-12 halves the error per
kernel application (about log2(1e12) + a few)."""

SPECTRAL_SECONDS_PER_TOKEN = 5e-7
"""Seconds per token and right-hand-side evaluation of a run whose sums are spectral (O(n)), in the run estimates
of :meth:`ParticleSystem.check_direct_run`: the spectral sums plus the driver's stage arithmetic, retraction and
noise per token.  Measured (one thread, n = 10^4 and 10^5, one zonal or two general heads, rk4 or noisy
geodesic_strang): 210-330 ns; 5e-7 keeps the estimate above the measurement (issue 33: a spectral run estimated
by its step overhead alone started although its steps over 10^5 tokens took hours)."""

DIRECT_RUN_LIMIT_S = 3600.0
"""A whole run (:func:`meanfield.solve_particles`) whose direct O(n^2) sums, right-hand sides plus observer
records, are estimated (:meth:`ParticleSystem.check_direct_run`, at :data:`DIRECT_PAIR_RATE`) to take
longer than this is refused up front, before its first evaluation: :data:`DIRECT_TIME_LIMIT_S` bounds one
evaluation, this bounds their number times their cost.  ``solve_particles(direct_limit_s=...)`` moves it."""

__all__ = ["SPECTRAL_MIN_N", "DIRECT_PAIR_RATE", "DIRECT_TIME_LIMIT_S", "SPECTRAL_SECONDS_PER_TOKEN",
           "DIRECT_RUN_LIMIT_S", "ParticleSystem", "check_tokens", "check_weights", "project_tangent", "retract_sphere"]


def _width(head):
    """The inner size of a head's score and value products in the direct sums: d, or a factored head's ranks."""
    r = head.rank
    return float(head.dim) if r is None else 0.5 * (min(r[0], head.dim) + min(r[1], head.dim))


def project_tangent(X, V):
    """Tangent projection ``P_x v = v - <v, x> x`` row by row.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        The points (unit rows: the tangent spaces of the sphere); not checked.
    V : ndarray, shape (n, d)
        Vectors at those points.

    Returns
    -------
    ndarray, shape (n, d)
        ``V`` less its component along each row of ``X``.
    """
    return V - np.einsum("nd,nd->n", V, X)[:, None] * X


def retract_sphere(X):
    """Retraction onto the unit sphere: each row divided by its norm.

    Parameters
    ----------
    X : ndarray, shape (..., d)
        Nonzero rows (not checked: a zero row gives NaN).

    Returns
    -------
    ndarray, shape (..., d)
        ``X / |X|`` row by row.
    """
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def check_tokens(X, d=None, geometry="sphere", name="X"):
    """Validate tokens: shape (n, d) with n >= 2, finite, and unit rows on the sphere.

    Nothing is renormalized: rows off the sphere by more than ``UNIT_NORM_TOL`` raise.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The tokens.
    d : int, optional
        The dimension the heads need (None: any ``d >= 2``).
    geometry : {"sphere", "flat"}
        ``"sphere"`` checks ``| |x_i| - 1 | <= UNIT_NORM_TOL`` for every row; any other value checks nothing more.
    name : str
        The argument's name in the messages.

    Returns
    -------
    ndarray, shape (n, d)
        ``X`` as a float64 array (not renormalized).

    Raises
    ------
    ValueError
        ``X`` not a finite real array of two dimensions, fewer than 2 rows or columns, ``d`` columns expected and
        another number received, or (sphere) a row whose norm is off 1 by more than ``UNIT_NORM_TOL``.
    """
    X = validate.real_array(name, X, ("n", "d"))
    if X.shape[0] < 2 or X.shape[1] < 2:
        raise ValueError(f"{name} must have shape (n, d) with n >= 2 tokens and d >= 2; received shape {X.shape}")
    if d is not None and X.shape[1] != d:
        raise ValueError(f"{name} must have d = {d} columns to match the heads; received shape {X.shape}")
    if geometry == "sphere":                      # one pass: | |x|^2 - 1 | <= 1.9 tol implies | |x| - 1 | < tol
        dev2 = np.abs(np.einsum("nd,nd->n", X, X) - 1.0).max()
        dev = 0.0 if dev2 <= 1.9 * UNIT_NORM_TOL else np.abs(np.linalg.norm(X, axis=1) - 1).max()
        if dev > UNIT_NORM_TOL:
            raise ValueError(f"{name} rows must be unit vectors for spherical dynamics (tolerance {UNIT_NORM_TOL}); "
                             f"received max | |x_i| - 1 | = {dev:.3e} (tokens are never renormalized silently)")
    return X


def check_stage(y, d, lead=("n",), name="y"):
    """A Runge-Kutta stage ``y`` of shape ``(*lead, d)`` for ``rhs(t, y)``: a real array (no copy), checked for
    type and shape only, in O(1): stages leave the sphere by O(dt^2) and NaN or inf are passed on to the driver,
    which rejects the step."""
    a = None if isinstance(y, (str, bytes)) or y is None else np.asarray(y)
    want = "(" + ", ".join(map(str, lead)) + f", {d})"
    if a is None or a.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be a real array of shape {want} (the tokens X of this system); received "
                         f"{type(y).__name__}" + ("" if a is None else f" of dtype {a.dtype}"))
    if a.ndim != len(lead) + 1 or a.shape[-1] != d or 0 in a.shape:
        raise ValueError(f"{name} must be a real array of shape {want} (the tokens X of this system); received "
                         f"shape {a.shape}")
    return a


def check_weights(w, n, name="w"):
    """Validate token weights: shape (n,), finite, nonnegative, summing to 1. None -> uniform.

    Parameters
    ----------
    w : array_like, shape (n,), or None
        The weights (None: ``1/n`` each).
    n : int
        The number of tokens.
    name : str
        The argument's name in the messages.

    Returns
    -------
    ndarray, shape (n,)
        The weights as float64 (not renormalized).

    Raises
    ------
    ValueError
        Not ``n`` finite weights ``>= 0`` summing to 1 to :data:`meanfield.core.validate.WEIGHTS_TOL`
        (:func:`meanfield.core.validate.probability_weights`).
    """
    return validate.probability_weights(name, w, n)


@validate.renamed(tolerance="kernel_tol")
@dataclass(frozen=True, eq=False)
class ParticleSystem:
    """The n-token system for a set of heads.

    Parameters
    ----------
    heads : sequence of Head
        Heads sharing the dimension ``d``.
    geometry : {"sphere", "flat"}
        Spherical dynamics (tangent projection, tokens on ``S^{d-1}``) or flat (``R^d``).
    chunk_bytes : int
        Work-space budget for one block of score-matrix rows.
    summation : {"auto", "direct", "spectral"}
        How velocities, aggregates and energies are summed: ``"direct"`` (pairwise, any heads),
        ``"spectral"`` (d = 3, sphere, any heads whose kernels have an lmax rule, e.g. exp and sigmoid, or an
        explicit ``lmax``; ``ValueError`` otherwise: :class:`meanfield.models.fastsum.SpectralSum` for zonal
        heads, :class:`meanfield.models.generalsum.GeneralSpectralSum`, bi-spherical operators, for any other
        ``M_h``, ``V_h``) or ``"auto"``: spectral when it applies, ``kernel_tol`` is reachable and
        ``n >= SPECTRAL_MIN_N`` (general softmax heads: also ``GeneralSpectralSum.conditioning() <=
        meanfield.core.bispherical.ACCURACY_LOSS``, i.e. ``beta |M|_2 <= 2.30`` for exp kernels).
        :meth:`energy_gradients` and :meth:`energy_rates` are always direct.  Every direct path is
        refused up front (:meth:`check_direct`) when estimated to exceed :data:`DIRECT_TIME_LIMIT_S`.
    kernel_tol : float
        Accuracy of the spectral sums relative to the size of the aggregates (the relative truncation accuracy
        of the kernels' expansion), in ``[1e-14, 1)``.
    nthreads : int
        Threads of the spherical-harmonic transforms of the spectral sums (ducc0; the numpy glue around
        them is single-threaded).  2 threads cut a velocity call at n = 10^6 by about a third on the
        2-core reference machine (benchmarks/RESULTS.md, "Scale").
    nu : float
        Token noise ``nu >= 0``: each token also follows Brownian motion of generator
        ``nu Lap_S`` on ``S^{d-1}`` (plain Brownian motion ``sqrt(2 nu) W`` when flat), the
        particle side of ``ContinuumPDE(nu=...)`` (MODEL.md section 3).  :meth:`rhs` stays the
        noiseless drift; :func:`meanfield.solve_particles` integrates the SDE
        (:mod:`meanfield.core.sde`) when ``nu > 0``.
    lmax : int, optional
        Degree of the spectral sums (None: :func:`meanfield.required_lmax` of zonal heads at
        ``kernel_tol``, :func:`meanfield.models.generalsum.general_degree` of general ones).  Kernels without an lmax rule (ReLU) need it for ``summation="spectral"``;
        the degree in use is :attr:`spectral_lmax`.
    sinkhorn_tol : float
        Marginal tolerance of the Sinkhorn scalings of ``normalization="sinkhorn"`` heads
        (``max_i |a_i sum_j k_ij b_j w_j - 1|``, :func:`meanfield.core.sinkhorn.solve_scaling`), in (0, 1).
    sinkhorn_maxiter : int
        Iteration cap of that solve; beyond it ``SinkhornError`` names the head and the error reached.
    backend : {"numpy", "torch"}
        Array library of the direct sums (:mod:`meanfield.core.backends`; torch is imported only when asked for).
        Inputs and results are numpy float64 arrays whatever the backend.
    device : {None, "cpu", "cuda"}
        Device of the direct sums (None: the CPU; ``"cuda"`` needs ``backend="torch"`` and a GPU).
    dtype : {"float64", "float32"}
        Precision of the direct sums (float32 only on request: about 1e-6 relative error on velocities,
        ``benchmarks/RESULTS_gpu.md``); the Sinkhorn solve's vectors stay float64.

    Raises
    ------
    ValueError
        A field out of its domain (named, with the allowed values); ``BackendError`` (a ``ValueError``) when torch is
        not installed or ``device="cuda"`` finds no GPU.
    TypeError
        The keyword ``tolerance`` of 0.2 (now ``kernel_tol``).

    Notes
    -----
    The Sinkhorn solve starts from ``a = 1`` at every new state (no warm start from the previous call): a
    system is a frozen value whose results depend on its arguments only, so a run resumed from a
    checkpoint, a Runge-Kutta stage and a diagnostic all see the same scalings to the last bit.  The
    scalings of the last state are kept (:class:`~meanfield.core.sums.LastScalings`, keyed by the bytes of
    the tokens and weights): the velocity, energies, entropies and forces at one state share one solve.
    """

    heads: tuple
    geometry: str = "sphere"
    chunk_bytes: int = 1 * 2**20        # not CHUNK_BYTES (8 MiB): see its docstring (the bits of the direct sums)
    summation: str = "auto"
    kernel_tol: float = 1e-10
    nthreads: int = 1
    nu: float = 0.0
    lmax: int | None = None
    sinkhorn_tol: float = SINKHORN_TOL
    sinkhorn_maxiter: int = SINKHORN_MAXITER
    backend: str = "numpy"
    device: str | None = None
    dtype: str = "float64"

    def __post_init__(self):
        object.__setattr__(self, "heads", check_heads(self.heads))
        object.__setattr__(self, "_backend", backends.get_backend(self.backend, self.device, self.dtype))
        object.__setattr__(self, "nu", validate.real("nu", self.nu, 0.0))
        validate.choice("geometry", self.geometry, GEOMETRIES)
        validate.integer("chunk_bytes", self.chunk_bytes, 1, what="a positive integer")
        if self.geometry == "sphere":
            check_exp_range(self.heads)
        validate.choice("summation", self.summation, SUMMATIONS)
        tol = self.kernel_tol
        validate.real("kernel_tol", tol, 1e-14, 1, hi_open=True, what="a number in [1e-14, 1)")
        object.__setattr__(self, "nthreads", validate.integer("nthreads", self.nthreads, 1))
        object.__setattr__(self, "sinkhorn_tol", validate.real("sinkhorn_tol", self.sinkhorn_tol, 0, 1, lo_open=True,
                                                               hi_open=True, what="a number in (0, 1)"))
        object.__setattr__(self, "sinkhorn_maxiter", validate.integer("sinkhorn_maxiter", self.sinkhorn_maxiter, 1))
        backends.check_sinkhorn_tol(self._backend, self.sinkhorn_tol,
                                    not all(NORMALIZATIONS[h.normalization].row_local for h in self.heads))
        solve = {"sinkhorn_tol": self.sinkhorn_tol, "sinkhorn_maxiter": self.sinkhorn_maxiter}
        spectral = None
        if self.lmax is not None:
            object.__setattr__(self, "lmax", validate.integer("lmax", self.lmax, 2, what="an integer >= 2 or None"))
        if self.summation == "spectral":
            why = spectral_supported(self.heads, self.geometry, lmax=self.lmax)
            if why is not None:
                raise ValueError(f"summation 'spectral' is not available: {why}")
            spectral = spectral_sum(self.heads, tol, lmax=self.lmax, nthreads=self.nthreads, **solve)
        elif self.summation == "auto" and spectral_supported(self.heads, self.geometry, lmax=self.lmax) is None:
            try:                 # beta |lambda| beyond float64 range, a degree beyond the cap: stay direct
                spectral = spectral_sum(self.heads, tol, lmax=self.lmax, nthreads=self.nthreads, **solve)
            except ValueError:
                spectral = None
            if isinstance(spectral, GeneralSpectralSum) and spectral.conditioning() > ACCURACY_LOSS:
                spectral = None  # softmax rows that may fall below the spectral accuracy: the direct sums
        object.__setattr__(self, "_spectral", spectral)
        object.__setattr__(self, "_last", LastScalings())

    @property
    def d(self) -> int:
        return self.heads[0].dim

    @property
    def spectral_lmax(self) -> int | None:
        """Degree of the spectral sums this system can use (None: it sums directly only)."""
        return None if self._spectral is None else self._spectral.lmax

    @property
    def n_heads(self) -> int:
        return len(self.heads)

    @property
    def retraction(self):
        """Retraction for integrators: row normalization on the sphere, None when flat."""
        return retract_sphere if self.geometry == "sphere" else None

    # ------------------------------------------------------------------ validation
    def check(self, X, w=None, *, name="X", w_name="w"):
        """Validated ``(X, w)``; see :func:`check_tokens` and :func:`check_weights`.

        ``name`` and ``w_name`` are the argument names the errors use (``solve_particles`` passes ``"X0"``).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens (unit rows for the sphere geometry), ``d`` the heads' dimension.
        w : array_like, shape (n,), optional
            Token weights (None: uniform).
        name, w_name : str
            The argument names of the messages.

        Returns
        -------
        X : ndarray, shape (n, d)
        w : ndarray, shape (n,)
            Float64 arrays, not renormalized.

        Raises
        ------
        ValueError
            What :func:`check_tokens` or :func:`check_weights` refuses.
        """
        X = check_tokens(X, self.d, self.geometry, name)
        return X, check_weights(w, X.shape[0], w_name)

    @property
    def spectral(self):
        """The :class:`~meanfield.models.fastsum.SpectralSum` this system sums with at large n, or None
        (``summation="direct"``, or heads the spectral path does not serve)."""
        return self._spectral

    def uses_spectral(self, n) -> bool:
        """Whether sums over ``n`` tokens are evaluated spectrally (see ``summation``).

        Parameters
        ----------
        n : int
            The number of tokens.

        Returns
        -------
        bool
            True when the system has a spectral sum and either ``summation="spectral"`` or ``n >= SPECTRAL_MIN_N``.
        """
        if self._spectral is None:
            return False
        return self.summation == "spectral" or n >= SPECTRAL_MIN_N

    def direct_cost(self, n, passes=1):
        """Estimated cost of ``passes`` direct sums over all ``n x n`` pairs for every head.

        A head whose normalization solves over the tokens (Sinkhorn) counts :data:`SOLVE_PASSES` passes.

        Parameters
        ----------
        n : int
            The number of tokens, ``>= 0``.
        passes : int or float
            Direct passes over all pairs (per row-local head).

        Raises
        ------
        ValueError
            ``n`` not an integer ``>= 0``.

        Returns
        -------
        dict
            ``pairs`` (head-pairs), ``seconds`` (at :data:`DIRECT_PAIR_RATE`), ``bytes`` (work space:
            four blocks of ``chunk_bytes`` plus the (H, n, d) results; the score matrix is never formed).
        """
        n = validate.integer("n", n, 0)
        counts = [1 if NORMALIZATIONS[h.normalization].row_local else SOLVE_PASSES for h in self.heads]
        pairs = float(passes) * sum(counts) * float(n) ** 2
        # a head-pair costs more past PAIR_WIDTH (the score and value products of inner size d, or a factored
        # head's ranks): cost.pair_seconds; at d <= 64 this is pairs / DIRECT_PAIR_RATE exactly
        seconds = float(passes) * float(n) ** 2 * sum(c * pair_seconds(_width(h)) for c, h in zip(counts, self.heads))
        return {"pairs": pairs, "seconds": seconds,
                "bytes": 4 * self.chunk_bytes + 8 * self.n_heads * n * self.d}

    def check_direct(self, n, what, passes=1, argument="summation='spectral' (or 'auto')"):
        """Refuse up front a direct O(n^2) evaluation estimated to exceed :data:`DIRECT_TIME_LIMIT_S`.

        Parameters
        ----------
        n : int
            The number of tokens.
        what : str
            What is evaluated, for the message.
        passes : int
            Direct passes over all pairs (:meth:`direct_cost`).
        argument : str
            The argument to change, for the message (the spectral path when these heads have one).

        Raises
        ------
        ValueError
            Naming ``what``, the estimate (pairs, time, memory), the limit and the argument to change
            (``argument``, or fewer tokens), when the estimate exceeds :data:`DIRECT_TIME_LIMIT_S`
            (:func:`meanfield.core.cost.guard`); ``n`` not an integer ``>= 0``.
        """
        cost = self.direct_cost(n, passes)
        if cost["seconds"] > DIRECT_TIME_LIMIT_S:
            spectral = self.spectral is not None or spectral_supported(self.heads, self.geometry) is None
            fix = f"{argument}, or fewer tokens" if spectral else "fewer tokens (no spectral path for these heads)"
            guard(f"{what} is a direct O(n^2) sum: n = {n} tokens, {self.n_heads} heads, {passes} pass(es) "
                  f"= {cost['pairs']:.2e} head-pairs at {DIRECT_PAIR_RATE:.0e} head-pairs/s and", seconds=cost["seconds"],
                  detail=f"work space {cost['bytes'] / 2**20:.0f} MiB", limit_s=DIRECT_TIME_LIMIT_S,
                  limit_bytes=float("inf"), limit_name_s="DIRECT_TIME_LIMIT_S", fix=fix,
                  lift="raise meanfield.models.particles.DIRECT_TIME_LIMIT_S (read at each call)")

    def check_direct_run(self, n, evaluations, records=0, record_passes=0, *, lower_bound=False,
                         limit_s=DIRECT_RUN_LIMIT_S, what="solve_particles", how="", steps=0):
        """Refuse up front a whole run whose direct O(n^2) sums and fixed steps are estimated to exceed ``limit_s``.

        Parameters
        ----------
        n : int
            Tokens.
        evaluations : int
            Right-hand-side (velocity) evaluations of the run; direct only where
            ``not self.uses_spectral(n)``.
        records, record_passes : int
            Observer records and the direct passes each makes (e.g. 3 for
            :func:`meanfield.analysis.diagnostics.observer`: energies, entropies, dissipation).
        lower_bound : bool
            ``evaluations`` is a lower bound (adaptive steps: at least one step per output interval);
            the message says "at least".
        limit_s : float
            Seconds allowed (``inf``: no limit).
        what, how : str
            The run's name and how ``evaluations`` was counted, for the message.
        steps : int
            Steps of the driver, each counted :data:`meanfield.core.cost.STEP_OVERHEAD_S` beyond the sums
            (what a tiny dt costs even with few tokens).

        Returns
        -------
        dict
            :meth:`direct_cost` of the run (``passes`` added), zero when nothing is direct; ``seconds``
            includes ``overhead_s``, the steps' overhead.

        Raises
        ------
        ValueError
            With the estimate, the limit and what to change, when the estimate exceeds ``limit_s`` (through
            :func:`meanfield.core.cost.guard`); ``limit_s`` not a positive number (named ``direct_limit_s``).
        """
        limit_s = validate.real("direct_limit_s", limit_s, positive=True, finite=False)
        spectral_n = self.uses_spectral(n)
        passes = (0 if spectral_n else int(evaluations)) + int(records) * int(record_passes)
        cost = dict(self.direct_cost(n, passes), passes=passes)
        overhead = int(steps) * STEP_OVERHEAD_S
        # the spectral sums are O(n) per evaluation, not free: SPECTRAL_SECONDS_PER_TOKEN a token and evaluation
        spectral_s = float(evaluations) * n * SPECTRAL_SECONDS_PER_TOKEN if spectral_n else 0.0
        cost.update(overhead_s=overhead, spectral_s=spectral_s, seconds=cost["seconds"] + overhead + spectral_s)
        if cost["seconds"] > limit_s:
            spectral = self.spectral is not None or spectral_supported(self.heads, self.geometry) is None
            fix = ("fewer tokens" if spectral_n else
                   "summation='spectral' (or 'auto', the spectral sums from n = SPECTRAL_MIN_N on), fewer tokens"
                   if spectral else "fewer tokens (these heads have no spectral path: d = 3 on the sphere only)")
            at_least = "at least " if lower_bound else ""
            steps_text = (f" + {int(steps)} steps x {STEP_OVERHEAD_S:.2g} s of per-step overhead (STEP_OVERHEAD_S)"
                          if steps else "")
            width = max(_width(h) for h in self.heads)
            rate = (f"{DIRECT_PAIR_RATE:.0e} head-pairs/s" if pair_seconds(width) == SECONDS_PER_PAIR else
                    f"{1 / pair_seconds(width):.1e} head-pairs/s for the widest head (products of width {width:g}; "
                    f"each head at its own width: cost.pair_seconds)")
            spectral_text = (f" + {int(evaluations)} spectral right-hand sides x {n} tokens x "
                             f"{SPECTRAL_SECONDS_PER_TOKEN:.0e} s (SPECTRAL_SECONDS_PER_TOKEN)" if spectral_s else "")
            guard(f"{what} ({at_least}{passes} direct O(n^2) passes over n = {n} tokens and {self.n_heads} heads "
                  f"({int(evaluations) if not spectral_n else 0} right-hand sides{how} + {int(records)} "
                  f"observer records x {int(record_passes)} passes) = {cost['pairs']:.2e} head-pairs at "
                  f"{rate}{spectral_text}{steps_text})", seconds=cost["seconds"], limit_s=limit_s,
                  limit_bytes=float("inf"), limit_name_s="direct_limit_s",
                  detail=f"{at_least}{cost['seconds'] - overhead - spectral_s:.0f} s of direct sums + "
                         f"{spectral_s:.0f} s of spectral sums + {overhead:.0f} s of steps",
                  fix=(f"a larger dt (fewer steps), {fix}, fewer records (observe=False)" if 2 * overhead > cost["seconds"]
                       else f"{fix}, a larger dt or fewer steps, fewer records (observe=False)"),
                  lift="pass direct_limit_s=<seconds> (default DIRECT_RUN_LIMIT_S; inf: no limit) to run it anyway")
        return cost

    def check_run(self, n, t_final, *, t_eval=None, method=None, dt=None, record_passes=0,
                  direct_limit_s=DIRECT_RUN_LIMIT_S, adaptive=None):
        """The up-front checks of a run of ``n`` tokens to ``t_final``, without running it; returns the method.

        :func:`meanfield.models.plans.check_particle_run`: the method resolved (``"dopri5"``, or
        ``"geodesic_strang"`` with noise, which needs ``dt``), the memory guard and the whole-run time estimate
        (:meth:`check_direct_run`) against ``direct_limit_s``.

        Parameters
        ----------
        n : int
            Tokens.
        t_final : float
            End time.
        t_eval : array_like, optional
            Output times (None: 11 equispaced).
        method : str, Tableau or Stepper, optional
            The scheme (None: the default above).
        dt : float, optional
            Fixed step.
        record_passes : int
            Direct passes of one observer record.
        direct_limit_s : float
            Seconds allowed (default :data:`DIRECT_RUN_LIMIT_S`; ``inf``: no limit).
        adaptive : bool, optional
            ``StepControl.adaptive`` of the run.

        Returns
        -------
        str, Tableau or Stepper
            The resolved method.

        Raises
        ------
        ValueError
            What :func:`~meanfield.models.plans.check_particle_run` refuses (named, with what to change).
        """
        return check_particle_run(self, n, t_final, t_eval=t_eval, method=method, dt=dt, record_passes=record_passes,
                                  direct_limit_s=direct_limit_s, adaptive=adaptive)

    def plan(self, start, t_final, *, method=None, step=None, t_eval=None, w=None, seed=None, record_passes=0,
             direct_limit_s=DIRECT_RUN_LIMIT_S):
        """The driver's arguments for a run from tokens ``start`` (:class:`~meanfield.core.model.SolvableModel`).

        :func:`meanfield.models.plans.particle_plan`: tokens and weights checked, the method resolved
        (``"dopri5"``, or ``"geodesic_strang"`` with noise), tolerances ``rtol = 1e-8``, ``atol = 1e-10`` unless
        given, the noise of ``seed`` for a stochastic scheme (the retraction otherwise), and the run checked by
        :meth:`check_run`.

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
        w : array_like, optional
            Token weights.
        seed : int or numpy.random.Generator, optional
            Brownian increments of a noisy run (do not reuse the integer that drew ``start``).
        record_passes : int or callable
            Direct passes of one observer record, or ``record_passes(n, w) -> int``.
        direct_limit_s : float
            Time limit of the run's estimate.

        Returns
        -------
        RunPlan

        Raises
        ------
        ValueError
            Bad tokens or weights, or what :meth:`check_run` refuses.
        """
        return particle_plan(self, start, t_final, method=method, step=step, t_eval=t_eval, w=w, seed=seed,
                             record_passes=record_passes, direct_limit_s=direct_limit_s)

    def chunks(self, n):
        """Row slices of at most ``chunk_bytes`` of float64 score rows (n x n scores).

        Parameters
        ----------
        n : int
            The number of tokens (rows and columns of the scores).

        Returns
        -------
        list of slice
            Consecutive slices covering ``range(n)`` (:func:`meanfield.core.sums.row_chunks`).
        """
        return row_chunks(n, n, self.chunk_bytes)

    # ------------------------------------------------------------------ dynamics
    def forces(self, X, w=None, *, checked=False):
        """Per-head aggregates ``u_i^h`` before projection, and their normalizers.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens (unit rows for the sphere geometry).
        w : array_like, shape (n,), optional
            Token weights (None: uniform).
        checked : bool
            ``X`` and ``w`` are already validated float64 arrays (skips :meth:`check`).

        Raises
        ------
        ValueError
            What :meth:`check` refuses; a direct evaluation above :data:`DIRECT_TIME_LIMIT_S`
            (:meth:`check_direct`).  ``SinkhornError`` (a ``ValueError``) when a Sinkhorn head's solve does not reach
            ``sinkhorn_tol`` within ``sinkhorn_maxiter``.

        Returns
        -------
        U : ndarray, shape (H, n, d)
        N : ndarray, shape (H, n)
            Normalizer: 1 (mean), ``Z_i^h = sum_j w_j k_h(s_ij)`` (softmax) or ``1 / a_i`` (Sinkhorn).
            A softmax row with ``Z = 0`` (possible only for ReLU kernels) has no attention mass: its ``u`` is 0.
        """
        U, N, _ = self._forces(X, w, checked)
        return U, N

    def _solve(self, i):
        """Keywords of :meth:`Normalization.force` for head ``i``."""
        return {"tol": self.sinkhorn_tol, "maxiter": self.sinkhorn_maxiter, "where": f"heads[{i}]"}

    def _forces(self, X, w, checked=False):
        if not checked:
            X, w = self.check(X, w)
        if self.uses_spectral(X.shape[0]):
            return self._spectral.forces(X, w, scalings=True)
        out = self._direct_forces(X, w)
        to_numpy = backends.to_numpy
        return np.stack([to_numpy(o[0]) for o in out]), np.stack([to_numpy(o[1]) for o in out]), [o[2] for o in out]

    def _direct_forces(self, X, w):
        """Per head ``(u, N, scaling)`` of the direct sums, ``u`` and ``N`` on the backend."""
        self.check_direct(X.shape[0], "ParticleSystem.forces / velocity (summation='direct' here)")
        with self._backend.guard("ParticleSystem.forces (direct sums)"):
            sums, known = self._direct(X, w)
            return [NORMALIZATIONS[head.normalization].force(s, known=r, **self._solve(i))
                    for i, (head, s, r) in enumerate(zip(self.heads, sums, known))]

    def on_backend(self, X, w):
        """``(X, w)`` (validated numpy arrays) converted to the system's backend: themselves for numpy float64.

        Parameters
        ----------
        X : ndarray, shape (n, d)
        w : ndarray, shape (n,)

        Returns
        -------
        tuple of two arrays of the backend
        """
        return self._backend.asarray(X), self._backend.asarray(w)

    def _direct(self, X, w):
        """Per head the :class:`~meanfield.core.sums.DirectSums` of validated ``(X, w)`` and its Sinkhorn scaling
        (None for row-local heads), from the last-state cache or solved (and kept)."""
        Xb, wb = self.on_backend(X, w)
        sums = [DirectSums(head, Xb, Xb, wb, self.chunk_bytes) for head in self.heads]
        norms = [NORMALIZATIONS[head.normalization] for head in self.heads]
        if all(norm.row_local for norm in norms):
            return sums, [None] * self.n_heads
        if not np.all(np.isfinite(X)):               # a blown-up stage: NaN (as every sum gives), not an error
            nan = SinkhornResult(np.full(X.shape[0], np.nan), np.full(X.shape[0], np.nan), np.nan, 0)
            return sums, [None if norm.row_local else nan for norm in norms]
        key = ("direct", X.shape, X.tobytes(), w.tobytes())
        known = self._last.get(key)
        if known is None:
            known = [None if norm.row_local else self._scalings(i, norm, s) for i, (norm, s) in enumerate(zip(norms, sums))]
            for res in known:
                if res is not None:                          # shared by every call at this state
                    res.a.setflags(write=False)
                    res.b.setflags(write=False)
            self._last.put(key, known)
        return sums, known

    def _scalings(self, i, norm, sums):
        """The Sinkhorn solve of head ``i`` (numpy float64 vectors; the kernel applications on the backend)."""
        apply, apply_t = backends.numpy_maps(sums.apply, sums.apply_t)
        return norm.scalings(apply, sums.shape, apply_t=apply_t, **self._solve(i))

    def sinkhorn_scalings(self, X, w=None, *, direct=False):
        """The Sinkhorn scalings of each head at these tokens: a list over heads of
        :class:`~meanfield.core.sinkhorn.SinkhornResult` (``a``, ``b``, the marginal ``error`` reached,
        ``n_apply``) for heads with ``normalization="sinkhorn"``, None for the others (row-local).
        Summed as the velocity is (``summation``), or directly with ``direct=True`` (for direct diagnostics).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens.
        w : array_like, shape (n,), optional
            Token weights (None: uniform).
        direct : bool
            Solve with the direct sums whatever ``summation`` chooses.

        Returns
        -------
        list of SinkhornResult or None
            One entry per head; all None when no head is a Sinkhorn head.

        Raises
        ------
        ValueError
            What :meth:`check` refuses; a direct solve above :data:`DIRECT_TIME_LIMIT_S` (:meth:`check_direct`);
            ``SinkhornError`` (a ``ValueError``) when a solve does not converge.
        """
        X, w = self.check(X, w)
        if all(NORMALIZATIONS[h.normalization].row_local for h in self.heads):
            return [None] * self.n_heads
        if not direct and self.uses_spectral(X.shape[0]):
            return self._spectral.scalings(X, w)
        self.check_direct(X.shape[0], "ParticleSystem.sinkhorn_scalings (summation='direct' here)")
        return list(self._direct(X, w)[1])

    def velocity(self, X, w=None):
        """Token velocities ``dx_i/dt``, shape (n, d).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens (unit rows for the sphere geometry).
        w : array_like, shape (n,), optional
            Token weights (None: uniform).

        Returns
        -------
        ndarray, shape (n, d)
            ``sum_h u_i^h``, projected onto the tangent spaces on the sphere (the spectral sums return it tangent).

        Raises
        ------
        ValueError
            What :meth:`check` refuses; a direct evaluation above :data:`DIRECT_TIME_LIMIT_S`; a Sinkhorn solve that
            does not converge (``SinkhornError``).
        """
        v = self._spectral_velocity_checked(X, w)
        if v is not None:
            return v
        X, w = self.check(X, w)
        return self._velocity(X, w)

    def _spectral_velocity_checked(self, X, w):
        """The spectral velocity of float64 (n, 3) tokens with the unit-row check fused into the
        transform's own pass over the points (:meth:`SpectralSum.directions` computes ``|x_i|^2``
        there, NaN and inf included), so the input check costs no pass of its own over ``X``
        (at n = 10^6: ~6 ms of a ~120 ms call).  None wherever :func:`check_tokens` must decide
        (any other input, or rows off the sphere by more than ``1.9 UNIT_NORM_TOL`` in ``|x|^2``):
        the full check then raises or accepts exactly as before.
        """
        if not (self._spectral is not None and self.geometry == "sphere" and isinstance(X, np.ndarray)
                and X.dtype == np.float64 and X.ndim == 2 and X.shape[1] == 3 and X.shape[0] >= 2
                and self.uses_spectral(X.shape[0])):
            return None
        pts = self._spectral.directions(X, scratch=True)     # None for a non-finite or zero row
        # | |x|^2 - 1 | <= 1.9 tol implies | |x| - 1 | < tol (check_tokens' own one-pass criterion);
        # two reductions, no temporary array
        if pts is None or not (pts.norms2.max() - 1.0 <= 1.9 * UNIT_NORM_TOL
                               and 1.0 - pts.norms2.min() <= 1.9 * UNIT_NORM_TOL):
            return None
        return self._spectral.velocity_at(pts, np.ascontiguousarray(check_weights(w, X.shape[0])))

    def _velocity(self, X, w):
        if self.uses_spectral(X.shape[0]):
            return self._spectral.velocity(X, w)       # already tangent (evaluated at x / |x|)
        if self._backend.reference and self._lift_once:
            v = self._summed_factored(X, w)
        elif self._backend.reference:
            U, _ = self.forces(X, w, checked=True)
            v = U.sum(axis=0)
        else:                                          # heads summed on the device: one (n, d) array comes back
            u = [o[0] for o in self._direct_forces(X, w)]
            v = u[0]
            for x in u[1:]:                            # in place: no (H, n, d) stack on the device
                v += x
            v = backends.to_numpy(v)
        return project_tangent(X, v) if self.geometry == "sphere" else v

    @property
    def _lift_once(self):
        """Whether the velocity sums every head in value coordinates and lifts them once: every head factored on its
        value side (rank below d) with a row-local normalization, direct sums (decided per call by the caller)."""
        return all(h.factors is not None and h.rank[1] < h.dim and NORMALIZATIONS[h.normalization].row_local
                   for h in self.heads)

    def _summed_factored(self, X, w):
        """``sum_h u_h`` of factored row-local heads: each head's normalized aggregate in its value coordinates
        (``aggregate(..., lift=False)``), concatenated, lifted by the concatenated ``C_h`` in one product (12 heads of
        rank 32 at d = 384: one product of inner size 384 instead of 12 of inner size 32, and no (H, n, d) stack).
        Equal to the sum of the lifted forces up to rounding."""
        self.check_direct(X.shape[0], "ParticleSystem.velocity (summation='direct' here)")
        if "_C_all" not in self.__dict__:
            object.__setattr__(self, "_C_all", np.ascontiguousarray(np.concatenate([h.factors[2] for h in self.heads],
                                                                                   axis=1)))
        U = np.concatenate([aggregate(h, X, X, w, self.chunk_bytes, lift=False)[0] for h in self.heads], axis=1)
        return U @ self._C_all.T

    def rhs(self, t, y):
        """Right-hand side ``rhs(t, y)`` for the integrators (uniform weights); y shape (n, d).

        Runge-Kutta stages leave the sphere by O(dt^2) before the retraction, so the unit-norm
        check is skipped here: the formula is a smooth extension of the field off the sphere
        (the spectral sum evaluates the field at ``y / |y|``, another smooth extension).

        Parameters
        ----------
        t : float
            Time (unused: the system is autonomous).
        y : array_like, shape (n, d)
            A stage of the tokens (type and shape checked only; NaN and inf are passed on to the driver).

        Returns
        -------
        ndarray, shape (n, d)
            The velocity at ``y`` with weights ``1/n``.

        Raises
        ------
        ValueError
            ``y`` not a real array of shape ``(n, d)``; a direct evaluation above :data:`DIRECT_TIME_LIMIT_S`.
        """
        y = check_stage(y, self.d)
        return self._velocity(y, np.full(y.shape[0], 1.0 / y.shape[0]))

    def weighted_rhs(self, w):
        """Right-hand side for fixed token weights ``w`` (validated once here).

        Parameters
        ----------
        w : array_like, shape (n,)
            Token weights (finite, ``>= 0``, summing to 1).

        Returns
        -------
        callable
            ``rhs(t, y)`` with ``y`` of shape ``(n, d)``: the velocity at ``y`` with weights ``w``; it raises
            ``ValueError`` when ``y`` is not a real array of ``n`` rows and ``d`` columns.

        Raises
        ------
        ValueError
            Weights :func:`check_weights` refuses.
        """
        w = check_weights(w, len(w))

        def rhs(t, y):
            y = check_stage(y, self.d)
            if y.shape[0] != w.shape[0]:
                raise ValueError(f"y must have {w.shape[0]} rows (one per weight); received shape {y.shape}")
            return self._velocity(y, w)

        return rhs

    # ------------------------------------------------------------------ energy
    def energies(self, X, w=None):
        """Per-head energies, shape (H,): ``E_h = 1/2 sum_ij w_i w_j K_h(s_ij)`` (row-local normalizations)
        or, for Sinkhorn heads, ``E_S = -(1/(2 beta)) sum_i w_i (log a_i + log b_i)``
        (:meth:`meanfield.core.kernels.SinkhornNormalization.energy`; ``dE/dt = sum_i w_i |dx_i/dt|^2``
        for exp kernels, symmetric ``M`` and ``V = M``).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens.
        w : array_like, shape (n,), optional
            Token weights (None: uniform).

        Returns
        -------
        ndarray, shape (H,)
            ``E_h`` of each head (spectral sums at ``n >= SPECTRAL_MIN_N`` when the system has them).

        Raises
        ------
        ValueError
            What :meth:`check` refuses; a direct evaluation above :data:`DIRECT_TIME_LIMIT_S`; a Sinkhorn solve that
            does not converge (``SinkhornError``).
        """
        X, w = self.check(X, w)
        if self.uses_spectral(X.shape[0]):
            return self._spectral.energies(X, w)
        self.check_direct(X.shape[0], "ParticleSystem.energies (summation='direct' here)")
        out = np.empty(self.n_heads)
        with self._backend.guard("ParticleSystem.energies (direct sums)"):
            sums, known = self._direct(X, w)
            Xb, wb = sums[0].sources, sums[0].w                  # the tokens on the backend
            for i, head in enumerate(self.heads):
                if known[i] is None:
                    out[i] = pair_sum(head, Xb, wb, self.chunk_bytes)
                else:
                    out[i] = NORMALIZATIONS[head.normalization].energy(head, sums[i], known[i], w)
        return out

    def energy(self, X, w=None):
        """Total energy ``E_multi = sum_h E_h``.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens.
        w : array_like, shape (n,), optional
            Token weights (None: uniform).

        Returns
        -------
        float
            The sum of :meth:`energies`.

        Raises
        ------
        ValueError
            As :meth:`energies`.
        """
        return float(self.energies(X, w).sum())

    def energy_gradients(self, X, w=None):
        """Euclidean gradients ``dE_h/dx_i`` for general (non-symmetric) ``M_h``, shape (H, n, d).

        .. math:: \\partial_{x_i} E_h = \\tfrac{w_i}{2} \\sum_j w_j
                  \\big(k(s_{ij}) M x_j + k(s_{ji}) M^T x_j\\big)

        For Sinkhorn heads (exp kernels; envelope theorem for ``E_S = -OT_eps(mu, mu) / 2``), ``k(s_ij)``
        becomes ``P_ij = a_i k(s_ij) b_j`` and ``k(s_ji)`` becomes ``P_ji``.

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens.
        w : array_like, shape (n,), optional
            Token weights (None: uniform).

        Returns
        -------
        ndarray, shape (H, n, d)
            ``dE_h/dx_i`` (always the direct sums).

        Raises
        ------
        ValueError
            What :meth:`check` refuses; two direct passes above :data:`DIRECT_TIME_LIMIT_S`; a Sinkhorn head whose
            kernel is not ``exp(beta s)`` (not ``log_linear``); a Sinkhorn solve that does not converge.
        """
        X, w = self.check(X, w)
        n, d = X.shape
        self.check_direct(n, "ParticleSystem.energy_gradients (always direct)", passes=2,
                          argument="energies() / diagnostics.dissipation (spectral at large n)")
        G = np.empty((self.n_heads, n, d))
        scalings = self.sinkhorn_scalings(X, w, direct=True)
        for h, head in enumerate(self.heads):
            res = scalings[h]
            if res is not None and not KERNELS[head.kernel].log_linear:
                raise ValueError(f"energy_gradients of heads[{h}] (normalization 'sinkhorn') needs a kernel with "
                                 f"k = exp(beta s) (one of {[k for k, v in KERNELS.items() if v.log_linear]}: E_S is "
                                 f"an entropic transport cost); received kernel {head.kernel!r}")
            ra, rb = (np.ones(n), np.ones(n)) if res is None else (res.a, res.b)
            # s_ij = <T_i, Y_j> and s_ji = <TT_i, YT_j>; dense: T = TT = X, rows of Y, YT (M x_j)^T, (M^T x_j)^T;
            # factored (M = A B^T): T, Y = X A, X B and TT, YT = X B, X A, the sums over j of k Y_j (k YT_j) lifted to
            # R^d by A (by B) once (L, LT; None: dense, no lift)
            T, Y, L = score_sides(head, X, X)
            TT, YT, LT = score_sides(head, X, X, transpose=True)
            for sl in self.chunks(n):
                K1 = kernel(head, T[sl] @ Y.T) * (w * rb)      # k(s_ij) (times b_j)
                K2 = kernel(head, TT[sl] @ YT.T) * (w * ra)    # k(s_ji) (times a_j)
                G[h, sl] = 0.5 * w[sl, None] * (ra[sl, None] * lift_values(K1 @ Y, L)
                                                + rb[sl, None] * lift_values(K2 @ YT, LT))
        return G

    def energy_rates(self, X, Xdot=None, w=None):
        """Exact per-head ``dE_h/dt = sum_i <dE_h/dx_i, dx_i/dt>`` along ``Xdot`` (default: the flow).

        Parameters
        ----------
        X : array_like, shape (n, d)
            Tokens.
        Xdot : array_like, shape (n, d), optional
            Token velocities (None: :meth:`velocity`).
        w : array_like, shape (n,), optional
            Token weights (None: uniform).

        Returns
        -------
        ndarray, shape (H,)
            ``dE_h/dt`` from :meth:`energy_gradients` (direct sums).

        Raises
        ------
        ValueError
            What :meth:`check` or :meth:`energy_gradients` refuses; ``Xdot`` not a finite real array of the shape of
            ``X``.
        """
        X, w = self.check(X, w)
        self.check_direct(X.shape[0], "ParticleSystem.energy_rates (always direct)", passes=2,
                          argument="diagnostics.dissipation (spectral at large n; = dE/dt for symmetric mean heads)")
        Xdot = self.velocity(X, w) if Xdot is None else validate.real_array("Xdot", Xdot, X.shape)
        return np.einsum("hnd,nd->h", self.energy_gradients(X, w), Xdot)
