"""Input checks shared by every public function: each raises a named ``ValueError``.

Every validator takes the argument's ``name`` first and the value second, returns the value in
its canonical type (``int``, ``float``, a float64 array, a ``numpy.random.Generator``) and raises
``ValueError`` with a message that names the argument, says what is allowed and echoes what was
received::

    >>> integer("n", 1, lo=2)
    Traceback (most recent call last):
        ...
    ValueError: n must be an integer >= 2; received 1

``bool`` is never accepted as a number (``True`` is not ``1`` here), NaN is never a real number,
and nothing is fixed quietly (no clipping, rounding or renormalization).

Validators
----------
:func:`integer`, :func:`integer_array`, :func:`real`, :func:`choice`, :func:`boolean`, :func:`real_array`,
:func:`complex_array`, :func:`unit_vector`, :func:`unit_vectors`, :func:`probability_weights`, :func:`signed_weights`,
:func:`unit_mass`, :func:`rng`.  "Sums to 1" / "has mass 1" is checked to one tolerance,
:data:`MASS_TOL`, everywhere.  The allowed values of the package's string choices are in
:mod:`meanfield.core.choices`.  :func:`renamed` refuses a renamed keyword argument with a message naming the new one.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping

import numpy as np

__all__ = ["integer", "integer_array", "real", "choice", "boolean", "real_array", "complex_array", "unit_vector",
           "unit_vectors", "points3", "real_vector", "probability_weights", "signed_weights", "unit_mass", "MASS_TOL",
           "WEIGHTS_TOL", "rng", "renamed", "moved"]

MASS_TOL = 1e-10
"""Allowed ``| total - 1 |`` of everything that must have mass 1: token and mixture weights, the
quadrature weights ``rho(x_g) w_g`` of a density, a density's ``rho_00 sqrt(4 pi)``.

The check is there to catch an unnormalized or mistyped input, never to judge round-off, so the
tolerance sits above every round-off source of a correctly normalized input and far below any
normalization error that matters:

* ``w / w.sum()`` or ``np.full(n, 1 / n)``, re-summed by numpy's pairwise summation: error
  ``~ eps log2 n``, below ``1e-14`` for any n that fits in memory; summed naively (Python's
  ``sum`` over a config list, a cumulative sum) ``<= n eps``, ``1e-11`` at ``n = 10^5``;
* weights read from text with 12 significant digits: ``<= 5e-13`` in total;
* a density synthesized, evaluated or analysed by ducc0 at ``epsilon = 1e-13`` on an exact
  quadrature grid (the W2 node weights of a PDE state): ``~ 1e-12``; the PDE itself conserves the
  mass to round-off per step (its right-hand side has no degree-0 part).

``1e-10`` keeps a factor 10 or more above each of these; an input off by ``1e-10`` changes any
mean over the measure by at most ``1e-10`` relative, far below every accuracy the package reports.
(Until 0.2 the checks used 1e-8, 1e-10 and 1e-12 in different places.)  Weights a user types are checked to
:data:`WEIGHTS_TOL` instead."""

WEIGHTS_TOL = 1e-8
"""Allowed ``| sum - 1 |`` of weights a user gives (token weights, mixture weights: :func:`probability_weights`).
They carry the rounding of how they were written, not only float64 round-off: weights typed with 9 significant
digits (``0.333333333``, a config file, a paper's table) are each off by up to 5e-10, so 1e-8 accepts up to 20
such entries, and a sum that prints as ``1.0000000001`` passes; an input off by 1e-8 changes a mean over the
tokens by at most 1e-8 relative.  Quadrature weights and densities (computed, not typed) keep :data:`MASS_TOL`.
The refusal says how far off the sum is."""


def _num(x) -> str:
    """Short text of a bound or tolerance as given: ``1e-8`` (not ``1e-08``), ``0.0``, ``2``."""
    return str(x) if isinstance(x, numbers.Integral) else str(float(x)).replace("e-0", "e-").replace("e+0", "e+")


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _is_real(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def integer(name, x, lo=None, hi=None, *, what=None):
    """``x`` as an ``int``, checked to be an integer with ``lo <= x <= hi``.

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    x : object
        Python or numpy integer; ``bool``, floats (even ``3.0``) and strings are refused.
    lo, hi : int, optional
        Inclusive bounds (None: unbounded).
    what : str, optional
        Replaces the description of the allowed values in the message (default
        ``"an integer >= lo and <= hi"``), e.g. ``"an integer >= lmax + 1 = 9"``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``"{name} must be {what}; received {x!r}"``.
    """
    if not (_is_int(x) and (lo is None or x >= lo) and (hi is None or x <= hi)):
        if what is None:
            what = "an integer" + ("" if lo is None else f" >= {lo}") + \
                   ("" if hi is None else (" and" if lo is not None else "") + f" <= {hi}")
        raise ValueError(f"{name} must be {what}; received {x!r}")
    return int(x)


def integer_array(name, x, lo=None):
    """``x`` as a non-empty ``int`` array (any shape), each entry an integer value ``>= lo``.

    Integer-valued floats (``2.0``) pass, as they do as array entries of the closed forms
    (``l``, ``H``, ``n``); ``bool`` arrays, fractions, NaN, inf, strings and entries beyond
    ``2**53`` (not exact in float64) are refused.

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    x : array_like
        Integer value(s), any shape.
    lo : int, optional
        Inclusive lower bound (None: unbounded).

    Returns
    -------
    ndarray of int, shape of ``x``

    Raises
    ------
    ValueError
        ``"{name} must be integer(s) >= {lo}; received {x!r}"``.
    """
    try:
        a = None if isinstance(x, (str, bytes)) else np.asarray(x)
    except (TypeError, ValueError):
        a = None
    if a is None or a.dtype == bool or not np.issubdtype(a.dtype, np.number) or a.size == 0 \
            or np.iscomplexobj(a) or not np.all(np.isfinite(a)) or np.any(a != np.round(a)) \
            or (lo is not None and np.any(a < lo)) or np.any(np.abs(a) > 2**53):
        raise ValueError(f"{name} must be integer(s)" + ("" if lo is None else f" >= {lo}") + f"; received {x!r}")
    return a.astype(int)


def _real_text(lo, hi, lo_open, hi_open, positive, finite, nonzero):
    if positive and lo is None and hi is None and finite and not nonzero:
        return "a positive finite number"
    if positive and lo is None:
        lo, lo_open = 0, True
    text = "a finite number" if finite else "a number"
    if lo is not None:
        text += f" {'>' if lo_open else '>='} {_num(lo)}"
    if hi is not None:
        text += (" and" if lo is not None else "") + f" {'<' if hi_open else '<='} {_num(hi)}"
    if nonzero:
        text += " and != 0"
    if not finite:
        text += {(True, True): " or +-inf", (True, False): " or np.inf", (False, True): " or -np.inf"}.get(
            (hi is None, lo is None), "")
    return text


def real(name, x, lo=None, hi=None, *, positive=False, finite=True, lo_open=False, hi_open=False,
         nonzero=False, what=None):
    """``x`` as a ``float``, checked to be a real number within bounds.

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    x : object
        Python or numpy real number (integers included); ``bool``, complex numbers, strings and
        arrays (even 0-d) are refused, NaN always.
    lo, hi : float, optional
        Bounds (None: unbounded), inclusive unless ``lo_open`` / ``hi_open``.
    positive : bool
        Require ``x > 0`` (message ``"a positive finite number"`` when there are no other bounds).
    finite : bool
        Refuse ``+-inf`` (default).  With ``finite=False`` an infinity passes when the bounds allow it.
    nonzero : bool
        Refuse ``0``.
    what : str, optional
        Replaces the description of the allowed values in the message, e.g.
        ``"a number in [1e-14, 1) (ducc0's reachable accuracy)"``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``"{name} must be {what}; received {x!r}"``, e.g. ``"beta must be a finite number > 0;
        received nan"``.
    """
    ok = _is_real(x)
    if ok:
        try:
            v = float(x)
        except OverflowError:                     # an int beyond float range
            v = math.inf if x > 0 else -math.inf
        ok = (not math.isnan(v) and (math.isfinite(v) or not finite)
              and (lo is None or (v > lo if lo_open else v >= lo))
              and (hi is None or (v < hi if hi_open else v <= hi))
              and not (positive and v <= 0) and not (nonzero and v == 0))
    if not ok:
        what = what or _real_text(lo, hi, lo_open, hi_open, positive, finite, nonzero)
        raise ValueError(f"{name} must be {what}; received {x!r}")
    return v


def choice(name, x, allowed):
    """``x``, checked to be one of ``allowed`` (same type: ``1`` is not ``True``, ``"1"`` is not ``1``).

    Parameters
    ----------
    name : str
    x : object
    allowed : sequence
        The allowed values (usually a tuple of :mod:`meanfield.core.choices`); echoed as given,
        so pass a list to have ``['a', 'b']`` in the message.

    Returns
    -------
    object
        ``x`` itself.

    Raises
    ------
    ValueError
        ``"{name} must be one of {allowed}; received {x!r}"``.
    """
    if isinstance(allowed, Mapping):            # a registry (KERNELS, SCHEMES, ...) lists its names
        allowed = tuple(allowed)
    ok = any(isinstance(x, type(a)) and isinstance(x, bool) == isinstance(a, bool) and x == a for a in allowed)
    if not ok:
        raise ValueError(f"{name} must be one of {allowed}; received {x!r}")
    return x


def boolean(name, x):
    """``x`` as a ``bool``, checked to be ``True`` or ``False`` (Python or numpy; not 0/1, not strings).

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    x : object
        ``bool`` or ``numpy.bool_``.

    Returns
    -------
    bool

    Raises
    ------
    ValueError
        ``"{name} must be True or False; received {x!r}"``.
    """
    if not isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; received {x!r}")
    return bool(x)


def _shape_text(shape):
    return "(" + ", ".join("*" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def real_array(name, x, shape=None, *, finite=True):
    """``x`` as a float64 array (a copy only where a conversion needs one), checked for shape and finiteness.

    Parameters
    ----------
    name : str
    x : array_like
        Real numbers; strings, booleans, complex values and ragged or object data are refused.
    shape : tuple, optional
        Required shape; each entry an int (that size), ``None`` (any size, shown as ``*``) or a
        string (any size, shown by that name, e.g. ``("n", 3)``).
    finite : bool
        Refuse ``+-inf`` (default); NaN is always refused.

    Returns
    -------
    ndarray, float64

    Raises
    ------
    ValueError
        ``"{name} must be finite real number(s); received {x!r}"`` (no ``shape``), or
        ``"{name} must be a finite real array of shape (n, 3); received shape (4,)"``.
    """
    what = "finite " if finite else "non-NaN "
    what = (f"{what}real number(s)" if shape is None
            else f"a {what}real array of shape {_shape_text(shape)}")
    try:
        raw = None if isinstance(x, (str, bytes)) else np.asarray(x)
        if raw is not None and raw.dtype.kind == "c":      # complex: refused, never cast (the imaginary part dropped)
            raise ValueError(f"{name} must be {what}; received complex values {x!r}")
        if raw is not None and raw.dtype.kind == "b":      # True is not 1 here (as for real)
            raise ValueError(f"{name} must be {what}; received booleans {x!r}")
        a = None if raw is None else raw.astype(float, copy=False)
    except (TypeError, OverflowError):
        a = None
    except ValueError as exc:
        if "complex values" in str(exc) or "received booleans" in str(exc):
            raise
        a = None
    if a is None:
        raise ValueError(f"{name} must be {what}; received {x!r}")
    if shape is not None and (a.ndim != len(shape) or any(isinstance(s, numbers.Integral) and k != s
                                                           for k, s in zip(a.shape, shape))):
        raise ValueError(f"{name} must be {what}; received shape {a.shape}")
    if not np.all(np.isfinite(a)) if finite else np.any(np.isnan(a)):     # one pass over a
        raise ValueError(f"{name} must be {what}; received {x!r}")
    return a


def points3(name, X):
    """Rows ``X`` (n, 3) of float64 as the spectral sums take them: an (n, 3) float64 array is returned as is (an
    integrator's stages: no copy, no extra pass), anything else through :func:`real_array` with non-finite entries
    allowed (NaN stages give NaN velocities).

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    X : array_like, shape (n, 3)
        Real rows.

    Returns
    -------
    ndarray, shape (n, 3), float64

    Raises
    ------
    ValueError
        ``X`` not real numeric data of shape (n, 3) (:func:`real_array`).
    """
    if isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2 and X.shape[1] == 3:
        return X
    return real_array(name, X, ("n", 3), finite=False)


def real_vector(name, w, n):
    """``w`` as a contiguous float64 (n,) array, finite (a weight vector already normalized by the caller).

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    w : array_like, shape (n,)
        Real finite values.
    n : int
        Required length.

    Returns
    -------
    ndarray, shape (n,), float64

    Raises
    ------
    ValueError
        ``w`` not real, finite, of shape ``(n,)`` (:func:`real_array`).
    """
    return np.ascontiguousarray(real_array(name, w, (n,)))


def complex_array(name, x, shape):
    """``x`` as a complex128 array of ``shape`` (a copy only where a conversion needs one), checked finite.

    Real input is accepted (coefficients with zero imaginary parts); strings, booleans, ``None`` and
    object data are refused: ``"{name} must be a finite complex array of shape (45,); received ..."``.

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    x : array_like
        Real or complex numeric data.
    shape : tuple of int
        Required shape.

    Returns
    -------
    ndarray of complex128, shape ``shape``

    Raises
    ------
    ValueError
        ``x`` None, a string, not numeric, of another shape, or not finite.
    """
    what = f"a finite complex array of shape {_shape_text(shape)}"
    a = None
    if not isinstance(x, (str, bytes)) and x is not None:
        try:
            raw = np.asarray(x)
            if raw.dtype.kind in "iufc":
                a = raw.astype(np.complex128, copy=False)
        except (TypeError, ValueError, OverflowError):
            a = None
    if a is None:
        raise ValueError(f"{name} must be {what}; received {x!r}")
    if a.shape != tuple(shape):
        raise ValueError(f"{name} must be {what}; received shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be {what}; received non-finite values (NaN or inf)")
    return a


def _holds_bool(x) -> bool:
    """Whether a (nested) list or tuple holds a ``bool``: numpy casts ``[1, True, 0]`` to integers silently."""
    return any(isinstance(v, (bool, np.bool_)) or (isinstance(v, (list, tuple)) and _holds_bool(v)) for v in x)


def _float_or_none(x):
    """``x`` as a float64 array, or None for strings, booleans (``True`` is no coordinate), complex values
    (never cast: the imaginary part would be dropped), ragged or non-numeric data."""
    if isinstance(x, (str, bytes, bool, np.bool_)):
        return None
    try:
        raw = np.asarray(x)
        if raw.dtype.kind in "cb" or (isinstance(x, (list, tuple)) and _holds_bool(x)):
            return None
        return raw.astype(np.float64, copy=False)
    except (TypeError, ValueError, OverflowError):
        return None


def _received(x) -> str:
    """What was received, for a message: ``complex values of shape (4, 3)`` for complex data, ``booleans of
    shape (3,)`` for boolean data, else ``repr``."""
    if np.iscomplexobj(x):
        return f"complex values of shape {np.shape(x)}"
    if isinstance(x, np.ndarray) and x.dtype.kind == "b":
        return f"booleans of shape {np.shape(x)}"
    return repr(x)


def unit_vector(name, x, d=None, *, tol=1e-8):
    """``x`` as a float64 vector (d,), checked to be finite with ``| |x|^2 - 1 | <= tol`` (not renormalized).

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    x : array_like, shape (d,)
        A real vector.
    d : int, optional
        Required length (None: any non-zero length).
    tol : float
        Allowed ``| |x|^2 - 1 |``.

    Returns
    -------
    ndarray, shape (d,), float64

    Raises
    ------
    ValueError
        ``"{name} must be a finite vector of length d = 3; received ..."`` or
        ``"{name} must be a unit vector (| |x|^2 - 1 | <= 1e-8); received ... (|x|^2 = ...)"``.
    """
    a = _float_or_none(x)
    if a is None or a.ndim != 1 or a.size == 0 or (d is not None and a.size != d) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be a finite vector of length {'d' if d is None else f'd = {d}'}; "
                         f"received {_received(x)}")
    with np.errstate(over="ignore"):                # a huge entry gives |x|^2 = inf: refused below
        n2 = float(a @ a)
    if not abs(n2 - 1.0) <= tol:
        raise ValueError(f"{name} must be a unit vector (| |x|^2 - 1 | <= {_num(tol)}); received {x!r} "
                         f"(|x|^2 = {n2!r})")
    return a


def unit_vectors(name, X, d=None, *, min_rows=0, tol=1e-8):
    """``X`` as float64 rows (n, d), checked to be finite unit vectors (``| |x|^2 - 1 | <= tol``, not renormalized).

    Parameters
    ----------
    name : str
    X : array_like, shape (n, d)
    d : int, optional
        Required number of columns (None: any).
    min_rows : int
        Smallest allowed ``n`` (default 0: an empty (0, d) array passes).
    tol : float

    Returns
    -------
    ndarray, shape (n, d), float64

    Raises
    ------
    ValueError
        ``"{name} must have shape (n, 3); received shape (4,)"``,
        ``"{name} must be finite unit vectors; received 1 rows with NaN or inf"`` or
        ``"{name} must be unit vectors (| |x|^2 - 1 | <= 1e-8); received max deviation 0.01"``.
    """
    shape = f"(n, {'d' if d is None else d})" + ("" if min_rows <= 0 else f", n >= {min_rows}")
    a = _float_or_none(X)
    if a is None:
        raise ValueError(f"{name} must be an array of real unit vectors of shape {shape}; received {_received(X)}")
    if a.ndim != 2 or (d is not None and a.shape[1] != d) or a.shape[0] < min_rows:
        raise ValueError(f"{name} must have shape {shape}; received shape {a.shape}")
    if a.shape[0]:
        with np.errstate(over="ignore", invalid="ignore"):     # NaN, inf or huge rows: |x|^2 - 1 not <= tol
            dev = np.max(np.abs(np.einsum("ij,ij->i", a, a) - 1.0))
        if not dev <= tol:                                       # one pass when all is well; diagnose otherwise
            bad = ~np.isfinite(a).all(axis=1)
            if np.any(bad):
                raise ValueError(f"{name} must be finite unit vectors; received {int(np.sum(bad))} rows with "
                                 f"NaN or inf")
            raise ValueError(f"{name} must be unit vectors (| |x|^2 - 1 | <= {_num(tol)}); received max "
                             f"deviation {dev:.3g}")
    return a


def _weights(name, w, n, nonnegative, tol=MASS_TOL):
    a = _float_or_none(w)
    what = (f"{name} must be {n} finite weights" + (" >= 0" if nonnegative else "")
            + f" summing to 1 (to {_num(tol)})" + ("" if nonnegative else ", negative entries included"))
    if a is None:
        raise ValueError(f"{what}; received {_received(w)}")
    if a.shape != (n,) or not np.all(np.isfinite(a)) or (nonnegative and np.any(a < 0)) \
            or not abs(a.sum() - 1.0) <= tol:
        total = float(np.sum(a))
        off = (f" (off by {abs(total - 1.0):.2g}; normalize with w / w.sum())"
               if a.shape == (n,) and np.isfinite(total) and not abs(total - 1.0) <= tol else "")
        raise ValueError(f"{what}; received shape {a.shape}, sum {total!r}{off}, "
                         f"min {float(np.min(a)) if a.size else None!r}")
    return a


def probability_weights(name, w, n):
    """``w`` as float64 (n,), checked to be finite, ``>= 0`` and summing to 1 to :data:`WEIGHTS_TOL`;
    None gives ``1/n`` each.

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    w : array_like, shape (n,), or None
        The weights.
    n : int
        Required length.

    Returns
    -------
    ndarray, shape (n,), float64

    Raises
    ------
    ValueError
        ``"{name} must be {n} finite weights >= 0 summing to 1 (to 1e-8); received shape ..., sum ... (off by
        ...; normalize with w / w.sum()), min ..."`` (not renormalized).
    """
    if w is None:
        return np.full(n, 1.0 / n)
    return _weights(name, w, n, True, WEIGHTS_TOL)


def signed_weights(name, w, n):
    """``w`` as float64 (n,), checked to be finite and summing to 1 to :data:`MASS_TOL`, negative
    entries allowed (the quadrature weights ``rho(x_g) w_g`` of a density that dips below zero).

    Parameters
    ----------
    name : str
        The argument's name, used in the message.
    w : array_like, shape (n,)
        The weights.
    n : int
        Required length.

    Returns
    -------
    ndarray, shape (n,), float64

    Raises
    ------
    ValueError
        ``"{name} must be {n} finite weights summing to 1 (to 1e-10), negative entries included;
        received shape ..., sum ..., min ..."`` (not renormalized).
    """
    return _weights(name, w, n, False)


def unit_mass(name, mass, *, hint=""):
    """``mass`` as a float, checked to be 1 to :data:`MASS_TOL` (``hint`` is appended to the message).

    Parameters
    ----------
    name : str
        What has the mass, used in the message.
    mass : float
        The mass.
    hint : str
        Appended to the message.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``"{name} must have mass 1 (to 1e-10); received mass 0.5"`` (not renormalized).
    """
    m = float(mass)
    if not abs(m - 1.0) <= MASS_TOL:
        raise ValueError(f"{name} must have mass 1 (to {_num(MASS_TOL)}); received mass {m!r}{hint}")
    return m


def rng(seed, name="seed"):
    """A ``numpy.random.Generator``: ``seed`` itself if it is one, else ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    seed : None, int >= 0 or numpy.random.Generator
        None draws fresh entropy; an integer gives a reproducible stream (the same stream as
        ``numpy.random.default_rng(seed)``); a Generator is used as is (and advanced).
    name : str
        The argument's name in the message.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ValueError
        ``"seed must be None, an integer >= 0 or a numpy.random.Generator; received ..."``
        (``bool``, floats, strings, arrays, ``RandomState`` are refused).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng()
    if _is_int(seed) and seed >= 0:
        return np.random.default_rng(int(seed))
    raise ValueError(f"{name} must be None, an integer >= 0 or a numpy.random.Generator; received {seed!r}")


def outside_stacklevel() -> int:
    """``stacklevel`` for a ``warnings.warn`` made by the calling function: the first frame outside the
    package (and outside dataclass-generated ``__init__`` code, whose file is ``<string>``), so that a
    warning shows the user's module and line, not ``<string>``."""
    import os
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))      # .../meanfield
    frame, level = sys._getframe(1), 1
    def inside(code):
        return code.co_filename.startswith(root) or (code.co_filename == "<string>" and code.co_name == "__init__")

    while frame is not None and inside(frame.f_code):
        frame, level = frame.f_back, level + 1
    return level


def renamed(**old_to_new):
    """Decorator refusing keyword arguments that were renamed, by their new name.

    On a class it wraps ``__init__`` (apply it above ``@dataclass``), on a function the function itself;
    ``functools.wraps`` keeps the name, docstring and signature (``inspect.signature`` shows the new
    keywords only).  A call passing an old keyword raises ``TypeError`` (as Python does for an unknown
    keyword) whose message names the new keyword::

        >>> @renamed(tolerance="kernel_tol")
        ... def f(kernel_tol=1e-10):
        ...     return kernel_tol
        >>> f(tolerance=1e-8)
        Traceback (most recent call last):
            ...
        TypeError: f: tolerance is now kernel_tol (the same meaning); received tolerance=1e-08

    Parameters
    ----------
    **old_to_new : str
        Each old keyword and its new name.

    Returns
    -------
    callable
        The decorator; the class or function it decorates keeps its identity (a class is returned itself,
        ``__init__`` replaced; a function is wrapped).

    Raises
    ------
    TypeError
        When the decorated callable is called with an old keyword (``"{name}: {old} is now {new} (the same
        meaning); received {old}={value!r}"``).
    """
    return _refusing(old_to_new, "{where}: {old} is now {new} (the same meaning); received {old}={value!r}",
                     record="__renamed__")


def moved(**old_to_where):
    """Decorator refusing keyword arguments that moved into an option object, saying where each one went.

    Like :func:`renamed` (on a class it wraps ``__init__``, on a function the function), for an option that is no
    longer a keyword of its own but a field of another argument::

        >>> @moved(tail_tol="a field of monitor: monitor=Monitor(tail_tol=...)")
        ... def g(monitor=True):
        ...     return monitor
        >>> g(tail_tol=1e-3)
        Traceback (most recent call last):
            ...
        TypeError: g: tail_tol is now a field of monitor: monitor=Monitor(tail_tol=...); received tail_tol=0.001

    Parameters
    ----------
    **old_to_where : str
        Each old keyword and where it is now.

    Returns
    -------
    callable
        The decorator (a class is returned itself, ``__init__`` replaced; a function is wrapped).

    Raises
    ------
    TypeError
        When the decorated callable is called with an old keyword (``"{name}: {old} is now {where}; received
        {old}={value!r}"``).
    """
    return _refusing(old_to_where, "{where}: {old} is now {new}; received {old}={value!r}", record=None)


def _refusing(table, message, record):
    def refuse(where, kwargs):
        for old, new in table.items():
            if old in kwargs:
                raise TypeError(message.format(where=where, old=old, new=new, value=kwargs[old]))

    def decorate(obj):
        if isinstance(obj, type):
            init = obj.__init__

            @functools.wraps(init)
            def __init__(self, *args, **kwargs):
                refuse(obj.__name__, kwargs)
                init(self, *args, **kwargs)

            obj.__init__ = __init__
            if record:
                setattr(obj, record, {**getattr(obj, record, {}), **table})
            return obj

        @functools.wraps(obj)
        def wrapper(*args, **kwargs):
            refuse(obj.__name__, kwargs)
            return obj(*args, **kwargs)

        if record:
            setattr(wrapper, record, dict(table))
        return wrapper

    return decorate
