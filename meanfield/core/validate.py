"""Input checks shared by the closed-form modules (:mod:`meanfield.theory`, :mod:`meanfield.stability`).

Each raises ``ValueError`` naming the argument, the allowed values and what was received.
"""

from __future__ import annotations

import numbers

import numpy as np

from .kernels import KERNELS, NORMALIZATIONS

def _int(name, x, lo):
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < lo:
        raise ValueError(f"{name} must be an integer >= {lo}; received {x!r}")
    return int(x)


def _int_array(name, x, lo):
    a = np.asarray(x)
    if a.dtype == bool or not np.issubdtype(a.dtype, np.number) or a.size == 0 \
            or not np.all(np.isfinite(a)) or np.any(a != np.round(a)) or np.any(a < lo) or np.any(a > 2**53):
        raise ValueError(f"{name} must be integer(s) >= {lo}; received {x!r}")
    return a.astype(int)


def _real(name, x, positive=False):
    ok = isinstance(x, numbers.Real) and not isinstance(x, bool) and np.isfinite(x)
    if not ok or (positive and x <= 0):
        what = "a positive finite number" if positive else "a finite real number"
        raise ValueError(f"{name} must be {what}; received {x!r}")
    return float(x)


def _real_array(name, x):
    try:
        a = None if isinstance(x, (str, bytes)) else np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        a = None
    if a is None or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite real number(s); received {x!r}")
    return a


def _lambdas(x):
    try:
        a = np.atleast_1d(np.asarray(x, dtype=float))
    except (TypeError, ValueError):
        a = None
    if a is None or a.ndim != 1 or a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"lambdas must be a non-empty 1-d sequence of finite head strengths; "
                         f"received {x!r}")
    return a


def _choice(name, x, allowed):
    allowed = tuple(allowed)          # a registry (dict) lists its names
    if not isinstance(x, str) or x not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; received {x!r}")
    return x


def _gamma(name, g, n):
    g = _real_array(name, g)
    lo = -1.0 / (n - 1)
    if np.any(g < lo) or np.any(g > 1):
        raise ValueError(f"{name} must lie in [-1/(n-1), 1] = [{lo:.6g}, 1] (an equiangular "
                         f"configuration of n = {n} unit vectors); received {np.asarray(g)!r}")
    return g


def _common(lambdas, beta, n, kernel, normalization):
    return (_lambdas(lambdas), _real("beta", beta, positive=True), _int("n", n, 2),
            _choice("kernel", kernel, KERNELS), _choice("normalization", normalization, NORMALIZATIONS))
