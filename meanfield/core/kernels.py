r"""Kernel and normalization registries: what a head's ``kernel`` and ``normalization`` strings mean.

:data:`KERNELS` maps a kernel name to a small frozen :class:`Kernel` object that knows, for a head
(its ``beta`` and its ``kernel_params``):

* the profile ``k(s)`` and its antiderivative ``K`` (``K' = k``; the energy density),
* ``log k`` and whether a row of ``k`` needs a log-sum-exp shift (stable softmax and attention
  probabilities),
* the Funk-Hecke multipliers of a zonal head ``M = V = lambda I`` on S^2 (closed form where one
  exists, Gauss-Legendre quadrature otherwise) and its lmax rule (the degree needed for a
  tolerance; ``None`` when the multipliers decay only algebraically),
* which closed forms (:mod:`meanfield.analysis.theory`, :mod:`~meanfield.analysis.stability`) exist for it.

:data:`NORMALIZATIONS` maps a normalization name to a :class:`Normalization`: how an aggregate and its
normalizer ``Z`` combine (``"mean"``: ``u``; ``"softmax"``: ``u / Z``; ``"sinkhorn"``: a scaling solve,
:meth:`Normalization.field_force` for the continuum models).  Adding a kernel is adding
one class and one registry entry here; no other module compares kernel or normalization names.

.. math:: k_{\rm exp}(s) = e^{\beta s},\quad k_{\rm relu}(s) = \max(s, 0),\quad
          k_{\rm sigmoid}(s) = \frac{1}{1 + e^{-(\beta s + b)}} .

Scores are handled *scaled*: ``T = rate * s`` with ``rate = beta`` (exp, sigmoid) or 1 (relu), so
the chunked sums of :mod:`meanfield.core.sums` fold ``beta`` into the sources once.

The pointwise methods (``scaled``, ``log_scaled``, ``antiderivative_scaled``, ``value``, ``log_value``, ...) and the
normalizations' ``combine`` and ``force`` take numpy arrays (exactly the numpy operations, ``out`` honoured) or
other array API arrays (torch tensors, :mod:`meanfield.core.backends`: the same formulas in their namespace, a new
array returned, ``out`` ignored): callers use the returned array.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, NamedTuple

import numpy as np
from scipy.special import expit, log_expit, spherical_in

from . import backends, validate
from .funk_hecke import funk_hecke_multipliers, funk_hecke_normalized
from .sinkhorn import SINKHORN_MAXITER, SINKHORN_TOL, SinkhornResult, solve_scaling

__all__ = ["KernelParams", "Kernel", "ExpKernel", "ReluKernel", "SigmoidKernel", "KERNELS", "Normalization", "MeanNormalization",
           "SoftmaxNormalization", "SinkhornNormalization", "HeadForce", "NORMALIZATIONS", "get_kernel", "get_normalization", "EXP_LIMIT", "LMAX_CAP", "check_finite_multipliers",
           "kernel", "antiderivative", "score_norm"]

EXP_LIMIT = 700.0
"""Largest ``beta |M|_2`` for which ``exp(beta s)`` of unit tokens stays in float64 (e^709 overflows)."""

LMAX_CAP = 512
"""Largest degree an lmax rule may choose (beyond it a spectral sum is no longer 'fast' at small n)."""

SHIFT_LIMIT = 600.0
"""Largest ``|log k|`` over a row for which a softmax row is summed without a log-sum-exp shift."""


def check_finite_multipliers(head, multipliers, where="head"):
    """``multipliers`` (a dict of arrays) of ``head``, refused by name when any entry is not finite.

    The one check of the kernel's overflow range for every zonal model (:class:`~meanfield.CirclePDE`,
    :class:`~meanfield.AxisymmetricPDE`, the spectral sums of :class:`~meanfield.ContinuumPDE` and the
    particle systems): the multipliers grow like ``exp(beta |lambda|)``, which float64 holds only below
    about 709, whatever the normalization (a softmax head is shifted in a pairwise sum, not in its
    Funk-Hecke multipliers).  NaN or inf multipliers would otherwise pass the resolution check
    (``nan > tol`` is False) and give a NaN right-hand side.

    Parameters
    ----------
    head : Head
        The zonal head the multipliers belong to (its ``beta`` and ``scalar`` are quoted in the message).
    multipliers : dict of str to ndarray
        The multipliers by name (``"potential"``, ``"normalizer"``, ...), as :meth:`Kernel.multipliers`
        gives them.
    where : str, optional
        Names the head in the message (default ``"head"``).

    Returns
    -------
    dict
        ``multipliers`` itself (unchanged) when every entry is finite.

    Raises
    ------
    ValueError
        ``"heads[0]: beta * |lambda| = 750 overflows the potential multipliers in float64 (allowed:
        beta * |lambda| below about 700); ..."``.
    """
    for k, v in multipliers.items():
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{where}: beta * |lambda| = {head.beta * abs(head.scalar):.4g} overflows the {k} "
                             f"multipliers in float64 (allowed: beta * |lambda| below about {EXP_LIMIT:g}; "
                             f"exp overflows beyond ~709); use a smaller beta or |lambda|")
    return multipliers


def score_norm(head) -> float:
    """``|M|_2``, the largest singular value of a head's score matrix (the bound ``|s| <= |M|_2 |x| |y|``).

    Dense heads: ``numpy.linalg.norm(M, 2)`` (an SVD of the (d, d) matrix).  Factored heads ``M = A B^T`` with
    ``r < d``: from the QR factors ``A = Q_A R_A``, ``B = Q_B R_B``, ``|A B^T|_2 = |R_A R_B^T|_2`` (orthonormal
    columns keep the 2-norm), an SVD of an (r, r) matrix: ``O(d r^2)`` work instead of ``O(d^3)``, equal to the
    dense value to rounding.

    Parameters
    ----------
    head : Head

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Never for a validated :class:`~meanfield.core.heads.Head`.
    """
    cached = head.__dict__.get("_score_norm")
    if cached is not None:            # a head is immutable: its norm is computed once (an SVD of M at d = 384: 12 ms)
        return cached
    F = head.factors
    if F is None or F[0].shape[1] >= head.dim:
        value = np.linalg.norm(head.M, 2)
    else:
        RA = np.linalg.qr(F[0], mode="r")
        RB = np.linalg.qr(F[1], mode="r")
        value = np.linalg.norm(RA @ RB.T, 2)
    object.__setattr__(head, "_score_norm", value)
    return value


class KernelParams(Mapping):
    """Read-only mapping of a kernel's parameters (name -> float); picklable, compares like a dict.

    Parameters
    ----------
    data : mapping or iterable of (str, float) pairs, optional
        The parameters, copied into a new dict (not validated here: :meth:`Kernel.check_params` does).
    """

    __slots__ = ("_data",)

    def __init__(self, data=()):
        object.__setattr__(self, "_data", dict(data))

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __setattr__(self, name, value):
        raise AttributeError("KernelParams is read-only")

    def __reduce__(self):
        return (KernelParams, (self._data,))

    def __repr__(self):
        return f"KernelParams({self._data!r})"


_RULES = {}
"""Cache of :meth:`Kernel.lmax_rule` by (kernel, beta, lambda, parameters, tolerance, cap)."""


def gradient_growth(lmax):
    """Largest pointwise size of degree-l parts of a gradient of a unit-mass measure's field:
    ``(2l+1)/(4 pi) * sqrt(l(l+1)+1)`` (addition theorem and ``|P_l'| <= l(l+1)/2``)."""
    ell = np.arange(lmax + 1)
    return (2 * ell + 1) / (4 * np.pi) * np.sqrt(ell * (ell + 1.0) + 1.0)


# ---------------------------------------------------------------------------------------- kernels
@dataclass(frozen=True)
class Kernel:
    """A kernel profile ``k(s)`` of the scores ``s = <x, M y>``; subclasses fill the class attributes.

    Class attributes
    ----------------
    name : str
        Registry key (``Head.kernel``).
    params : mapping
        Parameter name -> default (``Head.kernel_params``); validated by :meth:`check_params`.
    positive : bool
        ``k > 0`` everywhere: every attention row has a distribution (entropies are defined).
    closed_forms : frozenset of str
        Names of the closed forms (theory, stability) that exist for this kernel.
    noise_floor : float
        Relative size below which computed multipliers are round-off (0 for closed forms).
    has_lmax_rule : bool
        Whether :meth:`lmax_rule` gives a degree (multipliers decaying faster than any power).
    log_linear : bool
        ``k = exp(beta s)``: ``log k`` is linear in the score, so a Sinkhorn head is an entropic transport
        plan for the cost ``-s`` at ``eps = 1 / beta`` (its energy identity and gradients, MODEL.md section 6).
    """

    name: ClassVar[str] = ""
    params: ClassVar[MappingProxyType] = MappingProxyType({})
    positive: ClassVar[bool] = True
    closed_forms: ClassVar[frozenset] = frozenset()
    noise_floor: ClassVar[float] = 0.0
    has_lmax_rule: ClassVar[bool] = True
    log_linear: ClassVar[bool] = False

    # -------------------------------------------------------------- parameters
    def check_params(self, params, name="kernel_params") -> KernelParams:
        """Validated parameters with defaults filled in, a read-only mapping of floats.

        Parameters
        ----------
        params : mapping or None
            Parameter name -> value; None means no parameters given (all defaults).  Keys must be
            among :attr:`params`.
        name : str, optional
            The argument's name in messages (default ``"kernel_params"``).

        Returns
        -------
        KernelParams
            Every parameter of :attr:`params`, the given values as floats, the others at their defaults.

        Raises
        ------
        ValueError
            ``params`` that is not a mapping, has keys this kernel does not know, or a value that is
            not a finite real number.
        """
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ValueError(f"{name} must be a dict of parameters {sorted(self.params)} for kernel {self.name!r}; "
                             f"received {params!r}")
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ValueError(f"{name} for kernel {self.name!r} allows the keys {sorted(self.params)}; received "
                             f"unknown keys {unknown}")
        out = dict(self.params)
        for key, value in params.items():
            out[key] = validate.real(f"{name}[{key!r}]", value, what="a finite real number")
        return KernelParams(out)

    # -------------------------------------------------------------- pointwise
    def rate(self, head) -> float:
        """Factor folded into the scores: ``T = rate * s``.

        Parameters
        ----------
        head : Head
            The head (its ``beta``).

        Returns
        -------
        float
            ``head.beta`` (exp, sigmoid) or 1.0 (relu).
        """
        return head.beta

    def scaled(self, head, T, out=None):
        """``k`` at scaled scores ``T`` (``out`` may be ``T``: in place).

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        T : ndarray or array API array, any shape
            Scaled scores ``rate * s`` (:meth:`rate`).
        out : ndarray, optional
            Numpy output array of ``T``'s shape (may be ``T``); ignored for other libraries' arrays.

        Returns
        -------
        array, shape of ``T``
            ``k`` at the scores, in ``T``'s namespace (``out`` when given for numpy).

        Raises
        ------
        NotImplementedError
            On the base class; every registered kernel defines it.
        """
        raise NotImplementedError

    def log_scaled(self, head, T, out=None):
        """``log k`` at scaled scores ``T`` (``-inf`` where ``k = 0``).

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        T : ndarray or array API array, any shape
            Scaled scores ``rate * s`` (:meth:`rate`).
        out : ndarray, optional
            Numpy output array of ``T``'s shape (may be ``T``); ignored for other libraries' arrays.

        Returns
        -------
        array, shape of ``T``
            ``log k`` at the scores, in ``T``'s namespace.

        Raises
        ------
        NotImplementedError
            On the base class; every registered kernel defines it.
        """
        raise NotImplementedError

    def antiderivative_scaled(self, head, T, out=None):
        """``K * antiderivative_divisor`` at scaled scores ``T``.

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        T : ndarray or array API array, any shape
            Scaled scores ``rate * s`` (:meth:`rate`).
        out : ndarray, optional
            Numpy output array of ``T``'s shape (may be ``T``); ignored for other libraries' arrays.

        Returns
        -------
        array, shape of ``T``
            ``K(s) * antiderivative_divisor(head)`` at the scores, in ``T``'s namespace.

        Raises
        ------
        NotImplementedError
            On the base class; every registered kernel defines it.
        """
        raise NotImplementedError

    def antiderivative_divisor(self, head) -> float:
        """``K(s) = antiderivative_scaled(rate s) / antiderivative_divisor``.

        Parameters
        ----------
        head : Head
            The head (its ``beta``).

        Returns
        -------
        float
            ``head.beta`` (exp, sigmoid) or 1.0 (relu).
        """
        return head.beta

    def value(self, head, s):
        """``k(s)``.

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        s : array_like or array API array, any shape
            Unscaled scores ``<x, M y>``.

        Returns
        -------
        array, shape of ``s``
            ``k(s)``: float64 numpy for numpy input, otherwise in ``s``'s namespace.
        """
        return self.scaled(head, self.rate(head) * _floats(s))

    def antiderivative(self, head, s):
        """``K(s)`` with ``K' = k`` (the energy density).

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        s : array_like or array API array, any shape
            Unscaled scores ``<x, M y>``.

        Returns
        -------
        array, shape of ``s``
            ``K(s)``: float64 numpy for numpy input, otherwise in ``s``'s namespace.
        """
        return self.antiderivative_scaled(head, self.rate(head) * _floats(s)) \
            / self.antiderivative_divisor(head)

    def log_value(self, head, s):
        """``log k(s)`` (``-inf`` where ``k = 0``).

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        s : array_like or array API array, any shape
            Unscaled scores ``<x, M y>``.

        Returns
        -------
        array, shape of ``s``
            ``log k(s)`` (no divide-by-zero warning where ``k = 0``).
        """
        with np.errstate(divide="ignore"):
            return self.log_scaled(head, self.rate(head) * _floats(s))

    def log_derivative(self, head, s):
        """``(log k)'(s) = k'(s) / k(s)`` (kernels with ``k > 0``).

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        s : array_like, any shape
            Unscaled scores ``<x, M y>``.

        Returns
        -------
        array, shape of ``s``
            ``(log k)'(s)``: ``beta`` everywhere for exp, ``beta expit(-(beta s + b))`` for sigmoid.

        Raises
        ------
        NotImplementedError
            For a kernel that vanishes somewhere (relu, the base class): no log-derivative.
        """
        raise NotImplementedError(f"kernel {self.name!r} has no log-derivative (k vanishes)")

    def needs_shift(self, head, smax) -> bool:
        """Whether ``k`` of scores ``|s| <= smax`` can overflow or underflow to 0 in float64, so that a
        softmax row must be shifted by its largest ``log k`` (log-sum-exp).

        Parameters
        ----------
        head : Head
            The head (``beta`` and ``kernel_params``).
        smax : float
            Bound on the absolute scores of the row.

        Returns
        -------
        bool
            False for relu; for exp ``beta smax > SHIFT_LIMIT``, for sigmoid
            ``beta smax + |bias| > SHIFT_LIMIT``.
        """
        return False

    def check_range(self, head, where):
        """Refuse a head whose unshifted kernel overflows float64 on the unit sphere (mean normalization).

        Parameters
        ----------
        head : Head
            The head to check.
        where : str
            Names the head in the message (``"heads[0]"``).

        Raises
        ------
        ValueError
            Exp kernel only: ``beta * |M|_2`` above :data:`EXP_LIMIT` (``exp(beta s)`` overflows).  The
            other kernels are bounded on the sphere and refuse nothing.
        """

    # -------------------------------------------------------------- Funk-Hecke
    def multipliers(self, head, lmax) -> dict:
        r"""Funk-Hecke multipliers of a zonal head ``M = V = lambda I`` on S^2, each shape (lmax+1,).

        With ``s = lambda t``: ``"potential"`` ``c[K(s)]``, ``"normalizer"`` ``c[k(s)]``, ``"normal"``
        ``c[k(s) s]`` (the radial part of the aggregate) and, for positive kernels, ``"entropy"``
        ``c[k(s) log k(s)]``.  Default: Gauss-Legendre quadrature of the profiles.

        Parameters
        ----------
        head : Head
            A zonal head (its ``scalar`` is ``lambda``).
        lmax : int
            Largest degree.

        Returns
        -------
        dict of str to ndarray, each shape (lmax+1,)
            ``"potential"``, ``"normalizer"``, ``"normal"`` and (positive kernels) ``"entropy"``.
        """
        lam = head.scalar
        n_nodes = self.quadrature_nodes(head, lmax)

        def c(g):
            return funk_hecke_multipliers(lmax, g=g, n_nodes=n_nodes)

        out = {"potential": c(lambda t: self.antiderivative(head, lam * t)),
               "normalizer": c(lambda t: self.value(head, lam * t)),
               "normal": c(lambda t: self.value(head, lam * t) * lam * t)}
        if self.positive:
            out["entropy"] = c(lambda t: self.value(head, lam * t) * self.log_value(head, lam * t))
        return out

    def normalized_multipliers(self, head, lmax, d) -> dict:
        """``"potential"`` ``m[K(lambda t)]`` and ``"normalizer"`` ``m[k(lambda t)]`` on S^{d-1} for the normalized
        measure (:func:`meanfield.core.funk_hecke.funk_hecke_normalized`); default: quadrature of the profiles.

        Parameters
        ----------
        head : Head
            A zonal head (its ``scalar`` is ``lambda``).
        lmax : int
            Largest degree.
        d : int
            Ambient dimension (the sphere S^{d-1}).

        Returns
        -------
        dict of str to ndarray, each shape (lmax+1,)
            ``"potential"`` and ``"normalizer"``.
        """
        lam = head.scalar
        return {"potential": funk_hecke_normalized(lmax, d, g=lambda t: self.antiderivative(head, lam * t)),
                "normalizer": funk_hecke_normalized(lmax, d, g=lambda t: self.value(head, lam * t))}

    def quadrature_nodes(self, head, lmax) -> int:
        """Gauss-Legendre nodes per half of [-1, 1] for :meth:`multipliers`.

        Parameters
        ----------
        head : Head
            A zonal head (sigmoid: its ``beta`` and ``scalar`` set the count).
        lmax : int
            Largest degree.

        Returns
        -------
        int
            ``lmax + 8`` by default; sigmoid: ``lmax + 40 + ceil(3 beta |lambda|)`` (poles near [-1, 1]).
        """
        return lmax + 8

    def lmax_rule(self, head, tolerance, cap=LMAX_CAP):
        r"""Smallest degree ``L >= 2`` at which the neglected Funk-Hecke tail is below ``tolerance``.

        For the potential and normalizer multipliers ``c``, with the gradient growth
        ``G_l = (2l+1)/(4 pi) sqrt(l(l+1)+1)``:

        .. math:: \sum_{l > L} |c_l| G_l \le \text{tolerance} \cdot \max_l |c_l| G_l

        (multipliers below ``noise_floor`` of the largest count as 0).  May exceed ``cap``; ``None``
        when the multipliers decay only algebraically (no rule).

        Parameters
        ----------
        head : Head
            A zonal head.
        tolerance : float
            Relative size of the neglected tail.
        cap : int, optional
            Sets the degrees examined (multipliers up to ``cap + 64``; default :data:`LMAX_CAP`); the
            result may exceed ``cap``.  Rules are cached per kernel, head parameters, tolerance and cap.

        Returns
        -------
        int or None
            The degree ``L >= 2``, or None when :attr:`has_lmax_rule` is False (relu).
        """
        if not self.has_lmax_rule:
            return None
        key = (self.name, head.beta, head.scalar, tuple(sorted(head.kernel_params.items())), float(tolerance), int(cap))
        if key not in _RULES:                  # quadrature-based rules cost ~0.1 s: computed once per head
            if len(_RULES) > 1024:
                _RULES.clear()
            _RULES[key] = self._lmax_rule(head, tolerance, cap)
        return _RULES[key]

    def _lmax_rule(self, head, tolerance, cap):
        n_tail = cap + 64                     # analytic kernels: tails decay exponentially or faster
        G = gradient_growth(n_tail)
        mult = self.multipliers(head, n_tail)
        L = 2
        for key in ("potential", "normalizer"):
            c = np.abs(mult[key])
            q = np.where(c <= self.noise_floor * c.max(), 0.0, c * G) if self.noise_floor else c * G
            if q.max() == 0:
                continue
            tail = np.cumsum(q[::-1])[::-1]          # tail[l] = sum_{l' >= l} q
            ok = np.nonzero(np.append(tail[1:], 0.0) <= tolerance * q.max())[0]
            L = max(L, int(ok[0]))
        return L


@dataclass(frozen=True)
class ExpKernel(Kernel):
    """``k(s) = exp(beta s)``, ``K(s) = exp(beta s) / beta``; multipliers ``4 pi i_l(beta lambda)``."""

    name: ClassVar[str] = "exp"
    log_linear: ClassVar[bool] = True
    closed_forms: ClassVar[frozenset] = frozenset({"equiangular_rate", "linearized_clustering_time", "late_rate",
                                                    "growth_rate"})

    def scaled(self, head, T, out=None):
        xp = backends.foreign(T)
        return np.exp(T, out=out) if xp is None else xp.exp(T)

    def log_scaled(self, head, T, out=None):
        if backends.foreign(T) is not None:
            return T if out is T else T + 0.0        # log k = T (a copy unless in place)
        if out is None:
            return np.array(T, dtype=float)
        if out is not T:
            out[...] = T
        return out

    def antiderivative_scaled(self, head, T, out=None):
        xp = backends.foreign(T)
        return np.exp(T, out=out) if xp is None else xp.exp(T)

    def log_derivative(self, head, s):
        return np.full(np.shape(s), head.beta)

    def needs_shift(self, head, smax):
        return head.beta * smax > SHIFT_LIMIT

    def check_range(self, head, where):
        top = head.beta * score_norm(head)
        if top > EXP_LIMIT:
            raise ValueError(f"{where}: beta * |M|_2 must be <= {EXP_LIMIT:g} for an exp head with mean "
                             f"normalization (exp(beta s) overflows float64 beyond ~709); received "
                             f"{top:.4g} (use softmax normalization or a smaller beta)")

    def normalized_multipliers(self, head, lmax, d):
        """Closed form ``m_l(beta lambda)`` (``/ beta`` for the potential).

        Parameters
        ----------
        head : Head
            A zonal head (its ``scalar`` is ``lambda``).
        lmax : int
            Largest degree.
        d : int
            Ambient dimension (the sphere S^{d-1}).

        Returns
        -------
        dict of str to ndarray, each shape (lmax+1,)
            ``"potential"`` and ``"normalizer"``.
        """
        m = funk_hecke_normalized(lmax, d, exp_rate=head.beta * head.scalar)
        return {"potential": m / head.beta, "normalizer": m}

    def multipliers(self, head, lmax):
        r"""Closed forms (``a = beta lambda``): ``c[K] = 4 pi i_l(a) / beta``, ``c[k] = 4 pi i_l(a)``,
        ``c[k s] = 4 pi lambda i_l'(a)``, ``c[k log k] = beta c[k s]``.

        Parameters
        ----------
        head : Head
            A zonal head (its ``scalar`` is ``lambda``).
        lmax : int
            Largest degree.

        Returns
        -------
        dict of str to ndarray, each shape (lmax+1,)
            ``"potential"``, ``"normalizer"``, ``"normal"`` and ``"entropy"``.
        """
        lam = head.scalar
        a = head.beta * lam
        z = funk_hecke_multipliers(lmax, exp_rate=a)
        r = 4 * np.pi * lam * spherical_in(np.arange(lmax + 1), a, derivative=True)
        return {"potential": z / head.beta, "normalizer": z, "normal": r, "entropy": head.beta * r}


@dataclass(frozen=True)
class ReluKernel(Kernel):
    """``k(s) = max(s, 0)``, ``K(s) = max(s, 0)^2 / 2`` (``beta`` unused); multipliers by exact
    quadrature of piecewise polynomials, decaying algebraically (``c[K] ~ l^-3``): no lmax rule."""

    name: ClassVar[str] = "relu"
    positive: ClassVar[bool] = False
    has_lmax_rule: ClassVar[bool] = False
    closed_forms: ClassVar[frozenset] = frozenset({"equiangular_rate", "linearized_clustering_time", "late_rate"})

    def rate(self, head):
        return 1.0

    def scaled(self, head, T, out=None):
        xp = backends.foreign(T)
        return np.maximum(T, 0.0, out=out) if xp is None else xp.clip(T, min=0.0)

    def log_scaled(self, head, T, out=None):
        xp = backends.foreign(T)
        if xp is not None:
            return xp.log(xp.clip(T, min=0.0))
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(T, 0.0, out=out), out=out)

    def antiderivative_scaled(self, head, T, out=None):
        xp = backends.foreign(T)
        if xp is not None:
            return xp.clip(T, min=0.0) ** 2 * 0.5
        out = np.maximum(T, 0.0, out=out)
        out **= 2
        out *= 0.5
        return out

    def antiderivative_divisor(self, head):
        return 1.0

    def value(self, head, s):
        xp = backends.foreign(s)
        return np.maximum(s, 0.0) if xp is None else xp.clip(s, min=0.0)

    def antiderivative(self, head, s):
        xp = backends.foreign(s)
        return 0.5 * (np.maximum(s, 0.0) if xp is None else xp.clip(s, min=0.0)) ** 2

    def multipliers(self, head, lmax):
        r"""``c[K] = c[relu(s)^2 / 2]``, ``c[k] = c[relu(s)]``, ``c[k s] = 2 c[K]`` (exact quadrature).

        Parameters
        ----------
        head : Head
            A zonal head (its ``scalar`` is ``lambda``).
        lmax : int
            Largest degree.

        Returns
        -------
        dict of str to ndarray, each shape (lmax+1,)
            ``"potential"``, ``"normalizer"`` and ``"normal"`` (no ``"entropy"``: relu is not positive).
        """
        lam = head.scalar
        pot = funk_hecke_multipliers(lmax, g=lambda t: 0.5 * np.maximum(lam * t, 0.0) ** 2)
        return {"potential": pot, "normalizer": funk_hecke_multipliers(lmax, g=lambda t: np.maximum(lam * t, 0.0)),
                "normal": 2.0 * pot}


@dataclass(frozen=True)
class SigmoidKernel(Kernel):
    r"""Sigmoid attention ``k(s) = 1 / (1 + exp(-(beta s + b)))``, ``K(s) = softplus(beta s + b) / beta``.

    Parameter ``bias`` (``b``, default 0).  ``0 < k < 1``: no overflow, no shift needed unless
    ``beta |s| + |b|`` is so large that ``k`` underflows.  Analytic (poles at ``beta s + b = i pi (2j+1)``),
    so the Funk-Hecke multipliers decay exponentially, at rate ``~ pi / (beta |lambda|)`` per degree,
    and the spectral paths apply; they are computed by Gauss-Legendre quadrature (accurate to about
    1e-14 of the largest; below :attr:`noise_floor`, 1e-13 of the largest, they count as round-off).
    No closed forms in :mod:`meanfield.analysis.theory` or :mod:`~meanfield.analysis.stability`.
    """

    name: ClassVar[str] = "sigmoid"
    params: ClassVar[MappingProxyType] = MappingProxyType({"bias": 0.0})
    noise_floor: ClassVar[float] = 1e-13

    def _x(self, head, T):
        return T + head.kernel_params["bias"]

    def scaled(self, head, T, out=None):
        if backends.foreign(T) is not None:
            return backends.expit(self._x(head, T))
        return expit(self._x(head, T), out=out)

    def log_scaled(self, head, T, out=None):
        if backends.foreign(T) is not None:
            return backends.log_expit(self._x(head, T))
        return log_expit(self._x(head, T), out=out)

    def antiderivative_scaled(self, head, T, out=None):
        x = self._x(head, T)                           # softplus(x) = max(x, 0) + log1p(exp(-|x|))
        xp = backends.foreign(T)
        if xp is not None:
            return xp.clip(x, min=0.0) + xp.log1p(xp.exp(-xp.abs(x)))
        return np.add(np.maximum(x, 0.0), np.log1p(np.exp(-np.abs(x))), out=out)

    def log_derivative(self, head, s):
        s = _floats(s)
        if backends.foreign(s) is not None:
            return head.beta * backends.expit(-self._x(head, head.beta * s))
        return head.beta * expit(-self._x(head, head.beta * s))

    def needs_shift(self, head, smax):
        return head.beta * smax + abs(head.kernel_params["bias"]) > SHIFT_LIMIT

    def quadrature_nodes(self, head, lmax):
        # poles at distance ~ pi / (beta |lambda|) from [-1, 1]: the Gauss-Legendre error decays like
        # (1 + pi / a)^(-2 n); 40 + 3 a extra nodes reach round-off (checked against adaptive quadrature)
        return lmax + 40 + int(np.ceil(3.0 * head.beta * abs(head.scalar)))


KERNELS = MappingProxyType({k.name: k for k in (ExpKernel(), ReluKernel(), SigmoidKernel())})
"""Kernel name -> :class:`Kernel` (read-only)."""


def get_kernel(name, argument="kernel") -> Kernel:
    """The registered kernel ``name``; ``ValueError`` listing the choices otherwise.

    Parameters
    ----------
    name : str
        A key of :data:`KERNELS` (``"exp"``, ``"relu"``, ``"sigmoid"``).
    argument : str, optional
        The argument's name in the message (default ``"kernel"``).

    Returns
    -------
    Kernel
        The registered kernel object.

    Raises
    ------
    ValueError
        ``name`` is not a registered kernel (the message lists the names).
    """
    return KERNELS[validate.choice(argument, name, KERNELS)]


def kernel(head, S):
    """Kernel values ``k(S)`` of a head (see :data:`KERNELS`).

    Parameters
    ----------
    head : Head
        The head (its ``kernel``, ``beta`` and ``kernel_params``).
    S : array_like or array API array, any shape
        Scores ``<x, M y>``.

    Returns
    -------
    array, shape of ``S``
        ``k(S)`` (:meth:`Kernel.value`).
    """
    return KERNELS[head.kernel].value(head, S)


def antiderivative(head, S):
    """``K(S)`` with ``K' = k`` (the energy density) of a head.

    Parameters
    ----------
    head : Head
        The head (its ``kernel``, ``beta`` and ``kernel_params``).
    S : array_like or array API array, any shape
        Scores ``<x, M y>``.

    Returns
    -------
    array, shape of ``S``
        ``K(S)`` (:meth:`Kernel.antiderivative`).
    """
    return KERNELS[head.kernel].antiderivative(head, S)


# ----------------------------------------------------------------------------------- normalizations
class HeadForce(NamedTuple):
    """One head's force ``u``, its normalizer ``D`` (None: 1) and its Sinkhorn scalings (None if row-local)."""

    u: np.ndarray
    D: np.ndarray | None
    scaling: SinkhornResult | None


def _floats(s):
    """``s`` as float64 numpy values, or itself when it is another library's array (a torch tensor)."""
    return np.asarray(s, dtype=float) if backends.foreign(s) is None else s


def _safe(Z):
    """Divisor with ``u = 0`` where ``Z <= 0`` (no attention mass)."""
    return (backends.foreign(Z) or np).where(Z > 0, Z, np.inf)


@dataclass(frozen=True)
class Normalization:
    """How a head's aggregate ``U = sum_j w_j k(s_ij) V y_j`` and its normalizer
    ``Z = sum_j w_j k(s_ij)`` combine into the head's force ``u``.

    Class attributes
    ----------------
    name : str
    uses_normalizer : bool
        ``u`` depends on ``Z``.  When False, ``u`` is linear in the kernel (spectral paths sum such
        heads' potentials before one gradient) and a kernel must not overflow (no shift possible).
    shifts_rows : bool
        ``u`` is invariant under scaling a row of ``k`` (softmax): rows are summed shifted by their
        largest ``log k`` and the kernel never overflows.  Otherwise exp heads are range-checked.
    row_local : bool
        ``u_i`` depends on row ``i`` of the kernel only (through ``U_i`` and ``Z_i``): :meth:`combine`
        gives it.  When False (Sinkhorn) the force needs a solve over all points, :meth:`scalings`,
        and the model sums the aggregate with the scaled sources.
    equal_rows_as : str
        The normalization this one coincides with on configurations whose kernel rows all have the same
        sum (equiangular or orthonormal tokens, the closed forms of :mod:`meanfield.analysis.theory`).
    """

    name: ClassVar[str] = ""
    uses_normalizer: ClassVar[bool] = False
    row_local: ClassVar[bool] = True
    shifts_rows: ClassVar[bool] = False
    equal_rows_as: ClassVar[str] = ""

    def combine(self, U, Z, axis=-1):
        """The force from ``U`` and ``Z`` (in place on ``U``); ``axis`` is ``U``'s vector axis.

        Parameters
        ----------
        U : ndarray or array API array, shape (..., d) (the vector axis at ``axis``)
            The head's aggregate, overwritten by the force (softmax).
        Z : ndarray or array API array, shape of ``U`` without ``axis``
            The normalizer (row sums of the kernel); unused by mean.
        axis : int, optional
            The vector axis of ``U`` (default -1).

        Returns
        -------
        array, shape of ``U``
            The force ``u``: ``U`` itself (mean) or ``U / Z``, 0 where ``Z <= 0`` (softmax).

        Raises
        ------
        NotImplementedError
            On the base class, and for Sinkhorn (not row-local: use :meth:`force` / :meth:`field_force`).
        """
        raise NotImplementedError

    def field_force(self, aggregate, apply, shape, *, axis=-1, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER,
                    where="head", known=None) -> HeadForce:
        r"""One head's force from a model's two kernel applications (the continuum models' one map).

        ``aggregate(f)`` is the head's (projected) aggregate of the sources scaled by ``f``,
        ``U[f](x) = int k(<x, M y>) P_x V y f(y) rho(y) dy`` (on a grid: the gradient of the potential
        multipliers applied to the coefficients of ``f rho``), and ``apply(f)`` the kernel applied to the
        same sources, ``Z[f](x) = int k(<x, M y>) f(y) rho(y) dy``; ``f = None`` means ``f = 1`` (the
        model's cheap path: the multipliers on the density's own coefficients).  ``shape`` is a scalar
        field's shape, ``axis`` the vector axis of ``U``.  ``tol``, ``maxiter``, ``where`` and ``known``
        (a :class:`~meanfield.core.sinkhorn.SinkhornResult` of the same sources, returned as is) concern
        solving normalizations only.

        Parameters
        ----------
        aggregate : callable
            ``aggregate(f)``, ``f`` None or an array of shape ``shape``, returns ``U[f]`` (``shape`` with
            the vector axis at ``axis``).
        apply : callable
            ``apply(f)`` returns ``Z[f]``, an array of shape ``shape``.
        shape : tuple of int
            Shape of a scalar field over the points (grid).
        axis : int, optional
            Vector axis of ``U`` (default -1).
        tol : float, optional
            Tolerance of the Sinkhorn marginals.
        maxiter : int, optional
            Iteration limit of the Sinkhorn solve.
        where : str, optional
            Names the head in errors of the solve.
        known : SinkhornResult, optional
            Scalings of the same sources; used as is, no solve.

        Returns
        -------
        HeadForce
            ``u`` (mean: ``U[1]``; softmax: ``U[1] / Z[1]``; Sinkhorn: ``a U[a]``), the normalizer ``D``
            with ``u = U[s] / D`` for the source scaling ``s`` (mean: None, i.e. 1; softmax: ``Z[1]``;
            Sinkhorn: ``1 / a``) and the Sinkhorn result (None for row-local normalizations).
        """
        if not self.uses_normalizer:
            return HeadForce(aggregate(None), None, None)
        Z = apply(None)
        return HeadForce(self.combine(aggregate(None), Z, axis), Z, None)

    def field_entropy(self, apply, apply_entropy, scaling=None):
        """Relative attention entropy ``H(x) = -int p log p rho(y) dy`` of the head's attention ``p(x, .)``
        (a probability for ``rho dy``) from ``apply`` (``Z[f]``) and ``apply_entropy`` (``Q[f]``, the sums
        of ``k log k``); row-local: ``p = k / Z``, ``H = log Z[1] - Q[1] / Z[1]``.

        Parameters
        ----------
        apply : callable
            ``apply(f)`` returns ``Z[f]`` (``f = None``: ``f = 1``), an array over the grid.
        apply_entropy : callable
            ``apply_entropy(f)`` returns ``Q[f]``, the same sums with ``k log k`` for ``k``.
        scaling : SinkhornResult, optional
            The head's Sinkhorn scalings of the same sources (Sinkhorn only; unused by row-local ones).

        Returns
        -------
        ndarray, shape of ``Z``
            ``H(x)`` at every grid point.
        """
        Z = apply(None)
        return np.log(Z) - apply_entropy(None) / Z

    def normalizer(self, Z):
        """The normalizer reported with the forces (``N`` of ``ParticleSystem.forces``).

        Parameters
        ----------
        Z : ndarray or array API array, any shape
            The kernel's row sums.

        Returns
        -------
        array, shape of ``Z``
            Ones (mean) or ``Z`` itself (softmax, Sinkhorn).

        Raises
        ------
        NotImplementedError
            On the base class; every registered normalization defines it.
        """
        raise NotImplementedError

    def force(self, sums, *, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, where="head", known=None):
        """The one map from a head's kernel sums to its force: ``(u, N, scaling)``.

        ``sums`` is the model's per-head sums object (direct: :class:`meanfield.core.sums.DirectSums`;
        spectral: :class:`meanfield.core.zonal.ZonalHeadSums`; batched systems have their own):

        * ``fused(norm)`` -> ``(u, N)``: ``U[1]`` and ``Z`` in one pass, combined by ``norm.combine`` and
          ``norm.normalizer`` (row-local normalizations; the models' fast paths),
        * ``shape`` (of a scalar field over the points), ``axis`` (the vector axis of ``U``),
          ``apply(f)`` = ``sum_j w_j k_ij f_j``, ``apply_t`` (the transpose, or None for a symmetric
          kernel) and ``aggregate(f)`` = ``U[f]_i = sum_j w_j f_j k_ij V y_j`` (non-row-local ones;
          ``f = None`` means ``f = 1``).

        Row-local normalizations return ``sums.fused(self)`` and ``scaling = None`` (the keywords are
        those of the Sinkhorn solve, unused here: ``tol``, ``maxiter``, ``where`` naming the head in
        errors, ``known`` a :class:`~meanfield.core.sinkhorn.SinkhornResult` of the same sums, used as is).

        Parameters
        ----------
        sums : object
            The head's sums object (above).
        tol : float, optional
            Tolerance of the Sinkhorn marginals.
        maxiter : int, optional
            Iteration limit of the Sinkhorn solve.
        where : str, optional
            Names the head in errors.
        known : SinkhornResult, optional
            Scalings of the same sums; used as is, no solve.

        Returns
        -------
        tuple
            ``(u, N, scaling)``: the force (shape of ``U``), the normalizer (:meth:`normalizer`, shape of
            ``Z``) and the Sinkhorn result (None for row-local normalizations).
        """
        u, N = sums.fused(self)
        return u, N, None


@dataclass(frozen=True)
class MeanNormalization(Normalization):
    """``u = U`` (the weights already sum to 1: ``u = f / n`` for uniform weights); ``N = 1``."""

    name: ClassVar[str] = "mean"
    equal_rows_as: ClassVar[str] = "mean"

    def combine(self, U, Z, axis=-1):
        return U

    def normalizer(self, Z):
        return (backends.foreign(Z) or np).ones_like(Z)


@dataclass(frozen=True)
class SoftmaxNormalization(Normalization):
    """``u = U / Z`` (``u = 0`` where ``Z <= 0``: no attention mass, possible for ReLU); ``N = Z``."""

    name: ClassVar[str] = "softmax"
    equal_rows_as: ClassVar[str] = "softmax"
    uses_normalizer: ClassVar[bool] = True
    shifts_rows: ClassVar[bool] = True

    def combine(self, U, Z, axis=-1):
        with np.errstate(invalid="ignore", divide="ignore"):
            U /= (backends.foreign(U) or np).expand_dims(_safe(Z), axis=axis)
        return U

    def normalizer(self, Z):
        return Z


@dataclass(frozen=True)
class SinkhornNormalization(Normalization):
    r"""Doubly stochastic attention (MODEL.md section 6): ``u_i = a_i sum_j w_j k_ij b_j V y_j`` with the
    Sinkhorn scalings ``a, b`` of :func:`meanfield.core.sinkhorn.solve_scaling` (``a = b`` for a symmetric
    ``M``); ``N = 1 / a`` (so that ``u = U[b] / N`` as for softmax, ``U[b]`` the aggregate of the sources
    scaled by ``b``).  Not row-local: a model sums the aggregate with sources ``w b`` and multiplies by ``a``.
    The kernel is not shifted: the range check of the mean normalization applies (:meth:`Kernel.check_range`).
    """

    name: ClassVar[str] = "sinkhorn"
    equal_rows_as: ClassVar[str] = "softmax"        # equal row sums Z: a = Z^(-1/2) constant, P = K / Z
    uses_normalizer: ClassVar[bool] = True
    row_local: ClassVar[bool] = False

    def combine(self, U, Z, axis=-1):
        raise NotImplementedError("Sinkhorn normalization is not row-local: use scalings() and the aggregate "
                                  "of the scaled sources (this model does not support it)")

    def field_force(self, aggregate, apply, shape, *, axis=-1, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER,
                    where="head", known=None) -> HeadForce:
        r"""``u = a U[a]`` with ``a Z[a] = 1`` (symmetric kernels: zonal heads), see
        :meth:`Normalization.field_force`.  The solve starts from ``a = Z[1]^{-1/2}`` (a function of the
        state only, so a run is bit-reproducible; exact at the uniform state); ``known`` skips it.

        Parameters
        ----------
        aggregate, apply : callable
            ``U[f]`` and ``Z[f]`` of the head (as for :meth:`Normalization.field_force`).
        shape : tuple of int
            Shape of a scalar field over the points (grid).
        axis : int, optional
            Vector axis of ``U`` (default -1).
        tol, maxiter, where
            Passed to the solve (:meth:`field_scaling`).
        known : SinkhornResult, optional
            Scalings of the same sources; used as is, no solve.

        Returns
        -------
        HeadForce
            ``u = a U[a]``, the normalizer ``D = 1 / a`` and the Sinkhorn result.

        Raises
        ------
        SinkhornError
            The solve fails: kernel sums not finite and positive, or no convergence within ``maxiter``.
        """
        res = self.field_scaling(apply, shape, tol=tol, maxiter=maxiter, where=where, known=known)
        U = aggregate(res.b)
        U *= np.expand_dims(res.a, axis)
        return HeadForce(U, 1.0 / res.a, res)

    def normalizer(self, Z):
        return Z

    def field_entropy(self, apply, apply_entropy, scaling=None):
        """``p(x, y) = a(x) k a(y)``: ``H = -log a - a (Q[a] + Z[a log a])`` (``scaling`` of the same sources).

        Parameters
        ----------
        apply : callable
            ``apply(f)`` returns ``Z[f]``, an array over the grid.
        apply_entropy : callable
            ``apply_entropy(f)`` returns ``Q[f]``, the same sums with ``k log k`` for ``k``.
        scaling : SinkhornResult
            The head's scalings of the same sources (required here despite the default).

        Returns
        -------
        ndarray, shape of ``scaling.a``
            ``H(x)`` at every grid point.
        """
        a = scaling.a
        return -np.log(a) - a * (apply_entropy(a) + apply(a * np.log(a)))

    def field_scaling(self, apply, shape, *, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, where="head", known=None):
        """The scaling of :meth:`field_force` alone (``known`` if given), started from ``Z[1]^{-1/2}``.

        Parameters
        ----------
        apply : callable
            ``apply(f)`` returns ``Z[f]`` (``f = None``: ``f = 1``), an array of shape ``shape``.
        shape : tuple of int
            Shape of a scalar field over the points.
        tol, maxiter, where
            Passed to :meth:`scalings`.
        known : SinkhornResult, optional
            Returned as is when given.

        Returns
        -------
        SinkhornResult
            The scalings ``a = b`` (symmetric kernel), the error reached and the application count.
        """
        if known is not None:
            return known
        Z = apply(None)
        start = 1.0 / np.sqrt(Z) if np.all(np.isfinite(Z) & (Z > 0)) else None
        return self.scalings(apply, shape, tol=tol, maxiter=maxiter, where=where, start=start)

    def scalings(self, apply, n, *, apply_t=None, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, where="head",
                 start=None):
        """:func:`meanfield.core.sinkhorn.solve_scaling` (the scalings ``a, b``, error, count).

        Parameters
        ----------
        apply : callable
            ``apply(f)`` = ``sum_j w_j k_ij f_j``, arrays of shape ``n`` to that shape.
        n : int or tuple of int
            Number of points, or the shape of a scalar field over them.
        apply_t : callable, optional
            The transposed application; None for a symmetric kernel.
        tol, maxiter, where, start
            As for :func:`~meanfield.core.sinkhorn.solve_scaling`.

        Returns
        -------
        SinkhornResult
            The scalings, the marginal error reached and the number of kernel applications.
        """
        return solve_scaling(apply, n, apply_t=apply_t, tol=tol, maxiter=maxiter, where=where, start=start)

    def force(self, sums, *, tol=SINKHORN_TOL, maxiter=SINKHORN_MAXITER, where="head", known=None):
        """``u = a U[b]`` with the scalings of :meth:`scalings` (``tol``, ``maxiter``, ``where`` passed on;
        ``known``, the scalings of the same sums, skips the solve); ``N = 1 / a``; ``scaling`` the
        :class:`~meanfield.core.sinkhorn.SinkhornResult`.

        The solve runs in numpy float64 whatever the backend of ``sums`` (its vectors are of the size of the tokens;
        the kernel applications, the O(n^2) work, run on the backend; conversion at their boundary:
        :func:`~meanfield.core.backends.numpy_maps`); ``u`` is in the namespace of ``sums``, ``N`` and the scalings
        are numpy.

        Parameters
        ----------
        sums : object
            The head's sums object (``apply``, ``apply_t``, ``aggregate``, ``shape``, ``axis``; see
            :meth:`Normalization.force`).
        tol, maxiter, where
            Passed to :meth:`scalings`.
        known : SinkhornResult, optional
            Scalings of the same sums; used as is, no solve.

        Returns
        -------
        tuple
            ``(u, N, scaling)``: the force ``a U[b]`` (shape of ``U``), ``N = 1 / a`` and the
            :class:`~meanfield.core.sinkhorn.SinkhornResult`.
        """
        if known is not None:
            res = known
        else:
            apply, apply_t = backends.numpy_maps(sums.apply, sums.apply_t)
            res = self.scalings(apply, sums.shape, apply_t=apply_t, tol=tol, maxiter=maxiter, where=where)
        u = sums.aggregate(res.b)
        xp = backends.foreign(u)
        if xp is None:
            u *= np.expand_dims(res.a, sums.axis)
        else:
            u = u * xp.expand_dims(backends.like(res.a, u), axis=sums.axis)
        return u, 1.0 / res.a, res

    def energy(self, head, sums, scaling, w):
        r"""The head's energy ``E_S = -(1/(2 beta)) (sum_i w_i log a_i + sum_i w_i log b_i)`` (MODEL.md section 6;
        ``-(1/beta) sum_i w_i log a_i`` for a symmetric kernel), ``w`` the weights of the points of ``sums``.

        Evaluated as the entropic dual objective at the computed scalings, ``-(1/(2 beta)) (<w, log a> +
        <w, log b> + 1 - <w, a apply(b)>)`` (one more kernel application): equal to ``E_S`` at the exact
        scalings and stationary there, so a marginal error ``delta`` changes it by ``O(delta^2)`` only.
        ``dE_S/dt = sum_i w_i |dx_i/dt|^2`` for kernels with :attr:`Kernel.log_linear` (exp), symmetric ``M``
        and ``V = M`` (flat and spherical dynamics).

        Parameters
        ----------
        head : Head
            The head (its ``beta``).
        sums : object
            The head's sums object (its ``apply``).
        scaling : SinkhornResult
            The scalings ``a, b`` of the same sums.
        w : array_like
            Weights of the points, broadcastable with ``a``.

        Returns
        -------
        float
            The energy ``E_S``.
        """
        a, b = scaling.a, scaling.b
        total = np.sum(w * (np.log(a) + np.log(b) - a * backends.to_numpy(sums.apply(b)))) + 1.0   # any shape of w
        return -0.5 * float(total) / head.beta


NORMALIZATIONS = MappingProxyType({n.name: n for n in (MeanNormalization(), SoftmaxNormalization(),
                                                       SinkhornNormalization())})
"""Normalization name -> :class:`Normalization` (read-only)."""


def get_normalization(name, argument="normalization") -> Normalization:
    """The registered normalization ``name``; ``ValueError`` listing the choices otherwise.

    Parameters
    ----------
    name : str
        A key of :data:`NORMALIZATIONS` (``"mean"``, ``"softmax"``, ``"sinkhorn"``).
    argument : str, optional
        The argument's name in the message (default ``"normalization"``).

    Returns
    -------
    Normalization
        The registered normalization object.

    Raises
    ------
    ValueError
        ``name`` is not a registered normalization (the message lists the names).
    """
    return NORMALIZATIONS[validate.choice(argument, name, NORMALIZATIONS)]

