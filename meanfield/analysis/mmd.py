r"""Kernel distance (MMD) between particles and a band-limited density on S^2, in O(n + L^2 log L).

With orthonormal :math:`Y_{lm}`, the particles' coefficients
:math:`\mu_{lm} = \sum_i a_i \overline{Y_{lm}(x_i)}` (one adjoint point transform,
``SphereGrid.adjoint_at``) and the density's :math:`\rho_{lm}` (``MODEL.md`` section 4):

.. math:: \mathrm{MMD}_a^2(\mu, \rho) = \sum_{l=1}^{L} a_l \sum_{m=-l}^{l} |\mu_{lm} - \rho_{lm}|^2 ,

the squared MMD of the zonal kernel :math:`K(x, y) = \sum_{l \le L} a_l \sum_m Y_{lm}(x)
\overline{Y_{lm}(y)}` (exact for that kernel: no sampling, no grid).  ``L`` is the grid's ``lmax``;
degrees above it are left out, and ``info["truncation_bound"]`` bounds what they would add for the
untruncated kernel (:math:`\sum_m |\mu_{lm} - \rho_{lm}|^2 \le (2l + 1)/\pi` by the addition
theorem).  Kernels (:func:`mmd_weights`):

``"sobolev"``
    :math:`a_l = (1 + l(l+1))^{-s}`, ``s > 1``: the squared dual norm of :math:`H^s` (a negative
    Sobolev norm :math:`\|\mu - \rho\|_{H^{-s}}^2`); finite for point masses because ``s > 1``.
``"exp"``
    :math:`a_l = 4\pi\, i_l(\beta)`: the Funk-Hecke multipliers of :math:`e^{\beta \langle x, y\rangle}`,
    the attention kernel itself (``core.funk_hecke``).
"""

from __future__ import annotations

import numpy as np

from ..core import cost, validate
from ..core.densities import check_density
from ..core.funk_hecke import funk_hecke_multipliers

__all__ = ["MMD_KERNELS", "mmd_weights", "mmd_particles_field", "mmd_iid_expectation"]

MMD_KERNELS = ("sobolev", "exp")
_TAIL_L = 20000   # degrees summed explicitly in the truncation bound; an integral bounds the rest


def mmd_weights(lmax, kernel="sobolev", s=2.0, beta=1.0):
    r"""Per-degree kernel weights :math:`a_l`, ``l = 0..lmax``, shape (lmax + 1,).

    Parameters
    ----------
    lmax : int
        ``>= 0``.
    kernel : {"sobolev", "exp"}
    s : float
        Sobolev order, ``> 1`` (``"sobolev"``).
    beta : float
        Rate of :math:`e^{\beta \langle x, y \rangle}`, ``> 0`` (``"exp"``).

    Both ``s`` and ``beta`` are checked whichever kernel is used.

    Returns
    -------
    ndarray, shape (lmax + 1,)
        Sobolev: ``(1 + l(l+1))^(-s)``; exp: the Funk-Hecke multipliers of ``exp(beta t)``.

    Raises
    ------
    ValueError
        An unknown ``kernel``, ``lmax`` below 0, ``s <= 1`` or ``beta <= 0`` (or not finite), or an ``lmax``
        above the memory or time limit.
    """
    validate.choice("kernel", kernel, MMD_KERNELS)
    lmax = validate.integer("lmax", lmax, 0)
    cost.guard(f"mmd_weights(lmax={lmax})", bytes=32.0 * (lmax + 1), seconds=1e-7 * (lmax + 1),
               detail="a few (lmax + 1,) float64 arrays", fix="a smaller lmax")
    s, beta = _kernel_parameters(s, beta)
    ell = np.arange(lmax + 1, dtype=float)
    if kernel == "sobolev":
        return (1.0 + ell * (ell + 1.0)) ** (-s)
    return funk_hecke_multipliers(lmax, exp_rate=beta)


def _kernel_parameters(s, beta):
    """``s`` and ``beta`` as floats, both checked whichever kernel is used (a bad value of the other kernel's
    parameter is a mistake too, never ignored)."""
    return (validate.real("s", s, 1, lo_open=True, what="a finite number > 1 (the H^-s norm of a point mass is "
                                                        "finite only then)"),
            validate.real("beta", beta, positive=True, what="a finite number > 0"))


def _tail(lmax, kernel, s, beta):
    """Upper bound of sum_{l > lmax} a_l (2l + 1) / pi."""
    ell = np.arange(lmax + 1, max(lmax + 1, _TAIL_L) + 1, dtype=float)
    if kernel == "sobolev":
        head = np.sum((1.0 + ell * (ell + 1.0)) ** (-s) * (2 * ell + 1)) / np.pi
        # (2l + 1)(1 + l(l+1))^-s <= 3 l^(1 - 2s) for l >= 1; its sum beyond N is <= 3 N^(2-2s)/(2s-2)
        return float(head + 3.0 * ell[-1] ** (2 - 2 * s) / ((2 * s - 2) * np.pi))
    a = funk_hecke_multipliers(int(lmax) + 60, exp_rate=beta)[lmax + 1:]   # decays like beta^l / (2l+1)!!
    return float(np.sum(a * (2 * np.arange(lmax + 1, lmax + 61) + 1)) / np.pi)


def mmd_particles_field(X, rho_lm, grid, a=None, *, kernel="sobolev", s=2.0, beta=1.0, epsilon=1e-13):
    r"""Exact kernel distance between weighted particles and a density on S^2 (module docstring).

    Parameters
    ----------
    X : array_like, shape (n, 3)
        Unit vectors.
    rho_lm : array_like, shape (grid.nalm,)
        Density coefficients of mass 1 (``SphereGrid`` conventions; negative values allowed).
    grid : SphereGrid
        Fixes ``L = grid.lmax``.
    a : array_like, shape (n,), optional
        Nonnegative particle weights summing to 1 (default uniform).
    kernel, s, beta
        See :func:`mmd_weights`.
    epsilon : float
        Accuracy of the adjoint point transform.

    Returns
    -------
    TransportResult
        ``distance = MMD``, ``cost = MMD^2``, ``method = "mmd"``, ``metric = kernel``; ``info`` has
        ``a_l``, ``per_degree`` (``a_l sum_m |mu_lm - rho_lm|^2``) and ``truncation_bound``.

    Raises
    ------
    ValueError
        ``X`` not ``n >= 1`` unit vectors of length 3, ``a`` not probability weights, ``grid`` not a
        :class:`~meanfield.core.sphere.SphereGrid`, ``rho_lm`` not finite coefficients of mass 1, or kernel
        parameters :func:`mmd_weights` refuses.
    """
    from .transport import TransportResult  # the result type of every distance (imports POT)

    X = validate.unit_vectors("X", X, 3, min_rows=1)
    w = validate.probability_weights("a", a, X.shape[0])
    rho_lm = check_density(grid, rho_lm)
    a_l = mmd_weights(grid.lmax, kernel, s, beta)
    mu_lm = grid.adjoint_at(X, w, epsilon)
    per_degree = a_l * grid.power_spectrum(mu_lm - rho_lm)
    per_degree[0] = 0.0                               # both sides have mass 1: a_0 is irrelevant
    cost = float(per_degree.sum())
    info = {"kernel": kernel, "s": float(s) if kernel == "sobolev" else None,
            "beta": float(beta) if kernel == "exp" else None, "lmax": grid.lmax, "a_l": a_l,
            "per_degree": per_degree, "truncation_bound": _tail(grid.lmax, kernel, float(s), float(beta))}
    return TransportResult(float(np.sqrt(max(cost, 0.0))), cost, "mmd", kernel, 0.0, info)


def mmd_iid_expectation(grid, rho_lm, n, kernel="sobolev", s=2.0, beta=1.0):
    r"""Expected :math:`\mathrm{MMD}_a^2` of ``n`` i.i.d. samples of ``rho_lm`` (``MODEL.md`` section 4):

    .. math:: E\,\mathrm{MMD}_a^2 = \frac1n \sum_{l=1}^{L} a_l \Big[\frac{2l+1}{4\pi}
              - \sum_m |\rho_{lm}|^2\Big].

    Parameters
    ----------
    grid : SphereGrid
        Fixes ``L = grid.lmax``.
    rho_lm : array_like, shape (grid.nalm,)
        Density coefficients of mass 1.
    n : int
        Sample size, ``>= 1``.
    kernel, s, beta
        See :func:`mmd_weights`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``grid`` not a SphereGrid, ``rho_lm`` not finite coefficients of mass 1, ``n`` below 1, or kernel
        parameters :func:`mmd_weights` refuses.
    """
    rho_lm = check_density(grid, rho_lm)
    n = validate.integer("n", n, 1)
    a_l = mmd_weights(grid.lmax, kernel, s, beta)
    ell = np.arange(grid.lmax + 1)
    terms = a_l * ((2 * ell + 1) / (4 * np.pi) - grid.power_spectrum(rho_lm))
    return float(terms[1:].sum() / n)
