r"""The one method table: every scheme the driver :func:`meanfield.core.integrate.integrate` runs, by name.

:data:`METHODS` maps each name to its :class:`~meanfield.core.steppers.Stepper`, and every entry
declares its capabilities as flags (:data:`FLAGS`):

* ``explicit``: an explicit scheme of ``y' = rhs(t, y)`` (the Runge-Kutta tableaux of
  :data:`meanfield.core.tableaux.SCHEMES`);
* ``split``: a scheme of ``y' = L y + rhs(t, y)`` with a diagonal linear part (IMEX Euler, the ARS
  pairs, ETDRK2/4, the Lawson forms);
* ``exponential``: ``L`` integrated exactly (ETDRK2/4 and the Lawson forms);
* ``stochastic``: a scheme of the noisy token dynamics, driven by Brownian increments the driver
  draws (Euler-Maruyama, geodesic Strang; :mod:`meanfield.core.sde`);
* ``adaptive``: an embedded error estimate (error control); ``fsal``: first-same-as-last;
* ``order`` (the strong order for a stochastic scheme).

:func:`method_names` selects names by flags (``method_names(split=True)``), :func:`capabilities`
gives one entry's flags, :func:`as_stepper` resolves a name (or a Tableau or a Stepper) and names the
allowed ones when it cannot, and :func:`stable_step` is the step-size rule from the stability reaches.

Numpy and its siblings (:mod:`~meanfield.core.tableaux`, :mod:`~meanfield.core.steppers`,
:mod:`~meanfield.core.sde`); nothing else of ``meanfield``.
"""

from __future__ import annotations

from . import validate
from .sde import STOCHASTIC_STEPPERS
from .steppers import ETDRK2, ETDRK4, IMEXRK, ExplicitRK, IMEXEuler, LawsonRK, Stepper
from .tableaux import IMEX_TABLEAUX, SCHEMES, Tableau

__all__ = ["METHODS", "FLAGS", "method_names", "capabilities", "as_stepper", "stable_step"]


def _table() -> dict[str, Stepper]:
    steppers = [ExplicitRK(tab) for _, tab in sorted(SCHEMES.items())]
    steppers += [LawsonRK(SCHEMES["dopri5"]), LawsonRK(SCHEMES["rk4"])]
    steppers += sorted([IMEXEuler(), ETDRK2(), ETDRK4(), *(IMEXRK(tab) for tab in IMEX_TABLEAUX.values())],
                       key=lambda s: s.name)
    steppers += sorted(STOCHASTIC_STEPPERS, key=lambda s: s.name)
    return {s.name: s for s in steppers}


METHODS: dict[str, Stepper] = _table()
"""Every named scheme: the explicit tableaux (sorted), the Lawson forms, the other split schemes, the
stochastic schemes, each a :class:`~meanfield.core.steppers.Stepper` with the :data:`FLAGS`."""

FLAGS = ("explicit", "split", "exponential", "stochastic", "adaptive", "fsal", "order")
"""The capability flags every entry of :data:`METHODS` declares."""


def capabilities(method) -> dict:
    """The :data:`FLAGS` of one method (a name, Tableau or Stepper) as a dict.

    Parameters
    ----------
    method : str, Tableau or Stepper
        A name of :data:`METHODS`, a Tableau or a Stepper.

    Returns
    -------
    dict
        ``{flag: value}`` for every flag of :data:`FLAGS`.

    Raises
    ------
    ValueError
        An unknown name (:func:`as_stepper`).
    """
    stepper = as_stepper(method)
    return {flag: getattr(stepper, flag) for flag in FLAGS}


def method_names(**flags) -> list[str]:
    """The names of :data:`METHODS` whose flags equal the given ones, in table order.

    ``method_names(split=True)``, ``method_names(stochastic=False, adaptive=True)``; no flags: all names.

    Parameters
    ----------
    **flags
        Required values of flags of :data:`FLAGS`.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        A keyword that is not a flag of :data:`FLAGS`.
    """
    for flag in flags:
        if flag not in FLAGS:
            raise ValueError(f"flag must be one of {list(FLAGS)}; received {flag!r}")
    return [name for name, s in METHODS.items() if all(getattr(s, f) == v for f, v in flags.items())]


def as_stepper(method, **flags) -> Stepper:
    """The :class:`Stepper` of a name in :data:`METHODS`, a Tableau or a Stepper.

    ``flags`` restrict the names accepted (e.g. ``stochastic=False`` where only deterministic schemes
    make sense); the error lists the allowed names from the table.

    Parameters
    ----------
    method : str, Tableau or Stepper
        A name of :data:`METHODS`, a Tableau (wrapped as an explicit Runge-Kutta stepper) or a Stepper.
    **flags
        Required values of flags of :data:`FLAGS`.

    Returns
    -------
    Stepper

    Raises
    ------
    ValueError
        An unknown name, a method whose flags differ from ``flags``, an object of another type, or a keyword
        that is not a flag.
    """
    if isinstance(method, Stepper) and not flags:
        return method
    if isinstance(method, Tableau) and not flags:
        return ExplicitRK(method)
    allowed = method_names(**flags)
    if isinstance(method, str) and method in allowed:
        return METHODS[method]
    if isinstance(method, (Stepper, Tableau)):
        stepper = method if isinstance(method, Stepper) else ExplicitRK(method)
        if all(getattr(stepper, f) == v for f, v in flags.items()):
            return stepper
    raise ValueError(f"method must be one of {allowed}, a Tableau or a Stepper"
                     f"{' with ' + str(flags) if flags else ''}; received {method!r}")


def stable_step(a, d, scheme="rk4", cfl=0.5, what="the PDE") -> float:
    r"""A stable fixed step ``cfl / (a / I + d / R)`` of ``scheme`` for transport rates up to ``i a``
    and diffusion rates down to ``-d`` (``I``, ``R``: the scheme's reaches along the imaginary and the
    negative real axis; RK4: ``2 sqrt 2`` and 2.785).  A split scheme treats the diffusion
    implicitly or exactly, so ``d`` is not counted for it.  A scheme whose region holds no part of
    the imaginary axis is refused when ``a > 0``, naming the schemes that qualify.

    Parameters
    ----------
    a : float
        Largest transport rate (``>= 0``).
    d : float
        Largest diffusion rate (``>= 0``; ignored for split schemes).
    scheme : str, Tableau or Stepper
        The scheme (:func:`as_stepper`).
    cfl : float
        Safety factor, positive and finite.
    what : str
        Names the model in the message.

    Returns
    -------
    float
        The step (``cfl / 1e-300`` when both rates vanish).

    Raises
    ------
    ValueError
        An unknown ``scheme``, a ``cfl`` that is not positive and finite, or ``a > 0`` with a scheme whose
        region holds no part of the imaginary axis.
    """
    stepper = as_stepper(scheme)
    cfl = validate.real("cfl", cfl, positive=True)
    d = 0.0 if stepper.split else d
    if a > 0 and stepper.imag_reach == 0:
        stable = sorted(k for k in method_names(stochastic=False) if METHODS[k].imag_reach > 0)
        raise ValueError(f"scheme must be one whose stability region contains part of the imaginary axis for "
                         f"transport in {what} (one of {stable}); received {stepper.name!r}, stable on the "
                         f"imaginary axis only at 0")
    rate = (a / stepper.imag_reach if a > 0 else 0.0) + (d / stepper.real_reach if d > 0 else 0.0)
    return float(cfl / max(rate, 1e-300))
