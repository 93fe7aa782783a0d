r"""The one cost guard: estimate memory and time from sizes, refuse above the limits before allocating.

Every model and analysis with large intermediates estimates, from its sizes alone, the bytes of its
largest allocation (or peak) and the seconds it will take, and calls :func:`guard` *before* it
allocates or starts.  Above :data:`MEMORY_LIMIT_BYTES` or :data:`TIME_LIMIT_S` the guard raises a
``ValueError`` that names what is refused, the estimate, the limit and the way out (the argument to
change, or how to lift the limit)::

    >>> guard("CirclePDE(kmax=10000000000)", bytes=1.8e12, fix="a smaller kmax")
    Traceback (most recent call last):
        ...
    ValueError: CirclePDE(kmax=10000000000) would need about 1.64 TiB of memory, above MEMORY_LIMIT_BYTES = 4 GiB; use a smaller kmax, or lift the limit: with meanfield.core.cost.limits(bytes=...): ...

The default limits apply to every guarded entry point that does not pass its own and are lifted for a
block of code with :func:`limits` (``limits(bytes=float("inf"))`` switches the memory check off; ``seconds``
the time check).  The particle system's direct sums pass their own limits (``DIRECT_TIME_LIMIT_S`` per
evaluation, ``direct_limit_s`` per run of :func:`meanfield.solve_particles`), which :func:`limits` does not
lift: raise those arguments instead.  The rates below are measured constants (``benchmarks/cost_guard.py`` prints each estimate
next to the measured time and peak memory, ``benchmarks/RESULTS_cost_guard.md``): they are meant to
be right within a factor of a few, which is all a refusal at 4 GiB or 1 h needs.  A guard only
refuses; it changes no number of a run it lets through.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass

__all__ = ["Cost", "guard", "limits", "current_limits", "memory_text", "time_text", "MEMORY_LIMIT_BYTES",
           "TIME_LIMIT_S", "STEP_OVERHEAD_S", "SECONDS_PER_PAIR",
           "PAIR_WIDTH", "pair_seconds"]

MEMORY_LIMIT_BYTES = 4 * 2**30
"""Default memory limit (4 GiB) of one guarded call's estimated peak: a 24 GiB machine survives it with
room for the rest of a run; the hostile-input suite's small inputs stay far below 1 GB."""

TIME_LIMIT_S = 3600.0
"""Default time limit (1 h, as :data:`meanfield.models.particles.DIRECT_RUN_LIMIT_S`) of one guarded call."""

STEP_OVERHEAD_S = 2.5e-4
"""Seconds per fixed step of the driver beyond the model's sums (stage bookkeeping, retraction, noise,
observer and save checks).  Measured: solve_particles with 10 tokens in d = 3, one head, direct sums,
10^4 steps: 2.3e-4 s/step (rk4 and geodesic_strang with records), 2.9e-4 s/step (geodesic_strang),
on the shared 2-core development machine (``benchmarks/cost_guard.py``)."""

SECONDS_PER_PAIR = 1e-8
"""Seconds per head-pair ``(i, j)`` of one direct kernel sum, the one rate every direct-sum estimate uses
(particles, batched systems, the circle's quadrature path): the measured rate of a full direct velocity on one
core of the 2-core reference machine (benchmarks/RESULTS.md: 2.0 s for n = 10^4 with 2 heads; batched mean and
softmax heads 0.9e-8 to 1.3e-8 s at n = 2000), a conservative figure (DEPENDENCIES.md: 0.7-1.0 G head-pairs/s
for the bare kernel loop)."""

PAIR_WIDTH = 64
"""Width (the inner size of a head's score and value products: ``d`` for a dense head, the rank for a factored one)
up to which :data:`SECONDS_PER_PAIR` covers a head-pair; wider heads cost proportionally more
(:func:`pair_seconds`).  Measured (one thread, one softmax or mean head, n = 2048, shared machine): 2.4-2.8 ns a pair
at d = 3, 7-8 ns at d = 64, 13-15 ns at d = 128, 37-41 ns at d = 384: past d ~ 50 the two width-d products
dominate the kernel's exponential.  The rate 1e-8 s a pair at width 64, rising as ``width / 64``, keeps every
measured case under its estimate (d = 384: 6e-8 s against 4e-8 s measured)."""

_LIMITS = contextvars.ContextVar("meanfield_cost_limits", default=(float(MEMORY_LIMIT_BYTES), TIME_LIMIT_S))


def pair_seconds(width=3) -> float:
    """Seconds per head-pair of a direct kernel sum whose score and value products have inner size ``width``:
    ``SECONDS_PER_PAIR * max(1, width / PAIR_WIDTH)`` (:data:`PAIR_WIDTH`); the rate of every direct-sum estimate.

    Parameters
    ----------
    width : float
        ``d`` for a dense head, the mean of a factored head's score and value ranks.

    Returns
    -------
    float
        Seconds per head-pair.
    """
    return SECONDS_PER_PAIR * max(1.0, float(width) / PAIR_WIDTH)


def current_limits() -> tuple[float, float]:
    """``(bytes, seconds)`` in force (the defaults, or those of an enclosing :func:`limits` block).

    Returns
    -------
    tuple of two float
        The memory limit in bytes and the time limit in seconds (``inf``: no limit).
    """
    return _LIMITS.get()


@contextlib.contextmanager
def limits(bytes=None, seconds=None):
    """Lift (or lower) the guard's limits inside a ``with`` block; None keeps the limit in force.

    >>> with limits(bytes=32 * 2**30, seconds=float("inf")):   # doctest: +SKIP
    ...     pde = CirclePDE(heads, kmax=10**8)

    The limits are context-local (``contextvars``): a thread started inside the block sees the defaults.

    Parameters
    ----------
    bytes : float, optional
        Memory limit in bytes, ``> 0`` (``inf``: no limit); None keeps the one in force.
    seconds : float, optional
        Time limit in seconds, ``> 0`` (``inf``: no limit); None keeps the one in force.

    Yields
    ------
    None
        Inside the block the limits apply; the previous ones are restored on exit (errors included).

    Raises
    ------
    ValueError
        A limit that is not a number > 0 (``bool`` and NaN refused), when the block is entered.
    """
    old_b, old_s = _LIMITS.get()
    b = old_b if bytes is None else _positive("bytes", bytes)
    s = old_s if seconds is None else _positive("seconds", seconds)
    token = _LIMITS.set((b, s))
    try:
        yield
    finally:
        _LIMITS.reset(token)


def _positive(name, x):
    if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(x) or not x > 0:
        raise ValueError(f"{name} must be a number > 0 (inf: no limit); received {x!r}")
    return float(x)


def memory_text(b) -> str:
    """``b`` bytes in binary units (``"1.5 GiB"``).

    Parameters
    ----------
    b : float
        A number of bytes.

    Returns
    -------
    str
        Three significant digits (no decimals from 100 units up) in the largest unit up to TiB that
        ``b`` reaches, or whole bytes (``"512 B"``).
    """
    b = float(b)
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            v = b / size
            return f"{v:.0f} {unit}" if 100 <= v < 1e6 else f"{v:.3g} {unit}"
    return f"{b:.0f} B"


def time_text(s) -> str:
    """``s`` seconds (``"4750 s (1.3 h)"``).

    Parameters
    ----------
    s : float
        A number of seconds.

    Returns
    -------
    str
        Whole seconds from 10 s to 1e7 s, three significant digits otherwise, with the hours appended
        from one hour up.
    """
    s = float(s)
    text = f"{s:.3g} s" if s >= 1e7 or s < 10 else f"{s:.0f} s"
    return text + (f" ({s / 3600:.1f} h)" if s >= 3600 else "")


@dataclass(frozen=True)
class Cost:
    """An estimate: peak ``bytes`` and ``seconds`` of ``what``, with ``detail`` (how it was counted).

    Parameters
    ----------
    what : str
        What is estimated, with the sizes that decide it.
    bytes : float, optional
        Estimated peak memory (default 0).
    seconds : float, optional
        Estimated time (default 0).
    detail : str, optional
        How the estimate was counted.
    """

    what: str
    bytes: float = 0.0
    seconds: float = 0.0
    detail: str = ""

    def check(self, fix, **kw) -> "Cost":
        """:func:`guard` of this estimate (keywords as for :func:`guard`); returns it when allowed.

        Parameters
        ----------
        fix : str
            The way out named in the refusal (``"a smaller n"``).
        **kw
            ``limit_bytes``, ``limit_s``, ``limit_name_bytes``, ``limit_name_s``, ``lift`` of :func:`guard`.

        Returns
        -------
        Cost
            A :class:`Cost` equal to this one (``bytes`` and ``seconds`` as floats) when it is within the limits.

        Raises
        ------
        ValueError
            The estimate is above a limit (:func:`guard`).
        """
        return guard(self.what, bytes=self.bytes, seconds=self.seconds, detail=self.detail, fix=fix, **kw)


def guard(what, *, bytes=0.0, seconds=0.0, fix, detail="", limit_bytes=None, limit_s=None,
          limit_name_bytes="MEMORY_LIMIT_BYTES", limit_name_s="TIME_LIMIT_S", lift=None) -> Cost:
    """Refuse ``what`` if its estimate is above a limit; return the :class:`Cost` otherwise.

    Parameters
    ----------
    what : str
        What is refused, with the sizes that decide it (``"CirclePDE(kmax=10000000000)"``).
    bytes, seconds : float
        Estimated peak memory and time, from sizes only (nothing allocated yet).
    fix : str
        The way out: which argument to change (``"a smaller kmax"``).
    detail : str
        How the estimate was counted (shown in parentheses).
    limit_bytes, limit_s : float, optional
        Limits (default: :func:`current_limits`, i.e. :data:`MEMORY_LIMIT_BYTES` and :data:`TIME_LIMIT_S`
        unless lifted by :func:`limits`); ``limit_name_*`` name them in the message.
    lift : str, optional
        How to lift the limit (default: the :func:`limits` block).

    Returns
    -------
    Cost
        The estimate (``bytes`` and ``seconds`` as floats) when it is within the limits.

    Raises
    ------
    ValueError
        Naming ``what``, the estimate, the limit and ``fix``.
    """
    lim_b, lim_s = current_limits()
    lim_b = lim_b if limit_bytes is None else float(limit_bytes)
    lim_s = lim_s if limit_s is None else float(limit_s)
    cost = Cost(what, float(bytes), float(seconds), detail)
    over = []
    if cost.bytes > lim_b:
        over.append(("bytes", f"would need about {memory_text(cost.bytes)} of memory",
                     f"{limit_name_bytes} = {memory_text(lim_b)}"))
    if cost.seconds > lim_s:
        over.append(("seconds", f"would take an estimated {time_text(cost.seconds)}",
                     f"{limit_name_s} = {time_text(lim_s)}"))
    if over:
        if lift is None:
            keys = ", ".join(f"{k}=..." for k, _, _ in over)
            lift = f"lift the limit: with meanfield.core.cost.limits({keys}): ..."
        estimate = " and ".join(e for _, e, _ in over)
        limit = " and ".join(lim for _, _, lim in over)
        why = f" ({detail})" if detail else ""
        raise ValueError(f"{what} {estimate}{why}, above {limit}; use {fix}, or {lift}")
    return cost
