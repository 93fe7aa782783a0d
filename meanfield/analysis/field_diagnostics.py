r"""Continuum diagnostics (MODEL.md section 3): pure functions of a :class:`ContinuumPDE` and ``rho_lm``.

* :func:`mass`, :func:`field_negative_mass`, :func:`field_spectral_tail`, :func:`concentration`
* :func:`field_dissipation` -- ``int |X|^2 rho`` (= dE/dt for symmetric value-aligned mean heads, nu = 0)
* :func:`boltzmann_entropy` -- ``-int rho log rho`` over ``rho > 0``
* :func:`free_energy_dissipation` -- ``int |X - nu grad log rho|^2 rho`` (nu > 0)
* :func:`field_attention_entropy` -- ``int H_h(x) rho(x) dx`` per head, ``H_h(x) = -int p_h log p_h rho``
* :func:`head_forces`, :func:`field_radial_shadows`, :func:`field_radial_dominance`,
  :func:`field_energy_rate_terms` -- the per-head forces, their radial shadows, Condition 8 and the per-head
  energy-rate terms in continuum form (MODEL.md section 1 with ``(1/n) sum_i`` replaced by ``int . rho``)
* :func:`field_observer` and :func:`field_resolution_monitor` -- hooks for :func:`meanfield.core.integrate.integrate`

Quadratures run on the PDE's dealiased grid.

One name, one meaning (issue 32): a quantity that the particle diagnostics (:mod:`meanfield.analysis.diagnostics`)
or the resolution rule (:mod:`meanfield.core.resolution`) also compute carries the prefix ``field_`` here (its
continuum form, of a :class:`ContinuumPDE` and coefficients ``rho_lm``); the keys of :func:`field_observer`'s
records keep their names (``dissipation``, ``negative_mass``, ``spectral_tail``, ...).  The names of 0.2
(``dissipation``, ``observer``, ...) raise an ``AttributeError`` that names their replacement.
"""

from __future__ import annotations

import numpy as np

from ..core import resolution, validate
from ..core.kernels import KERNELS, NORMALIZATIONS
from ..core.sums import aggregate, entropy_rows
from ..models.continuum import ContinuumPDE
from .axisymmetric import _positive_tolerances

__all__ = ["mass", "field_negative_mass", "field_spectral_tail", "concentration", "field_dissipation",
           "boltzmann_entropy", "free_energy_dissipation", "field_attention_entropy", "field_observer",
           "field_resolution_monitor", "head_forces", "field_radial_shadows", "field_radial_dominance",
           "field_energy_rate_terms"]

_RENAMED = {name: f"field_{name}" for name in ("negative_mass", "spectral_tail", "dissipation", "attention_entropy",
                                                "observer", "resolution_monitor", "radial_shadows", "radial_dominance",
                                                "energy_rate_terms")}
"""The names of 0.2 and their replacements (one public name, one meaning: issue 32)."""


def __getattr__(name):
    """Module attribute fallback: the names of 0.2 (:data:`_RENAMED`) raise an ``AttributeError`` naming their
    replacement.

    Parameters
    ----------
    name : str
        The attribute looked up.

    Raises
    ------
    AttributeError
        Always (this is called only for names the module does not define).
    """
    if name in _RENAMED:
        raise AttributeError(f"meanfield.field_diagnostics.{name} was renamed {_RENAMED[name]} in 0.3 (the continuum "
                             f"form; one public name, one meaning)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _coefficients(pde, rho_lm, name="rho_lm"):
    """``rho_lm`` as complex128 (nalm,) (no copy when it is one), checked to be finite coefficients of the
    PDE's shape (any mass: these are diagnostics); O(nalm), cheap next to one synthesis."""
    nalm = pde.grid.nalm
    try:
        a = None if isinstance(rho_lm, (str, bytes)) else np.asarray(rho_lm)
    except (TypeError, ValueError):
        a = None
    if a is None or a.dtype.kind not in "iufc" or a.shape != (nalm,) or not np.all(np.isfinite(a)):
        got = (repr(rho_lm) if a is None or a.dtype.kind not in "iufc" else
               f"shape {a.shape}" if a.shape != (nalm,) else f"{int(np.sum(~np.isfinite(a)))} NaN or inf entries")
        raise ValueError(f"{name} must be finite coefficients of shape (nalm,) = ({nalm},) for lmax = {pde.lmax}; "
                         f"received {got}")
    return a.astype(np.complex128, copy=False)


def mass(pde: ContinuumPDE, rho_lm) -> float:
    """``int rho = sqrt(4 pi) Re rho_00`` (exact).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,).
    """
    return float(np.sqrt(4 * np.pi) * np.real(_coefficients(pde, rho_lm)[0]))


def field_negative_mass(pde: ContinuumPDE, rho_lm, rho=None) -> float:
    """``-int min(rho, 0)`` by quadrature on the dealiased grid (>= 0; :func:`meanfield.core.resolution.negative_mass`).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    rho : ndarray, optional
        The density on the PDE's grid, when already synthesized (not checked against ``rho_lm``).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,).
    """
    rho_lm = _coefficients(pde, rho_lm)
    return resolution.negative_mass(pde.grid.synthesis(rho_lm) if rho is None else rho, pde.grid.integrate)


def field_spectral_tail(pde: ContinuumPDE, rho_lm, fraction=2 / 3) -> float:
    """Relative L2 size of degrees ``l > fraction * lmax`` among degrees ``l >= 1``.

    .. math:: \\Big(\\sum_{l > f L} S_l \\big/ \\sum_{l \\ge 1} S_l\\Big)^{1/2}

    Small (spectral decay) while ``lmax`` resolves the density; it grows as the density
    concentrates below the grid scale (:func:`meanfield.core.resolution.spectral_tail` of the power spectrum).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    fraction : float
        The cut ``f`` in ``[0, 1]``.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,)., or ``fraction`` is outside ``[0, 1]``.
    """
    rho_lm = _coefficients(pde, rho_lm)
    validate.real("fraction", fraction, 0, 1)
    return resolution.spectral_tail(pde.grid.power_spectrum(rho_lm), int(fraction * pde.lmax))


def concentration(pde: ContinuumPDE, rho_lm, rho=None) -> dict:
    """``max_density``, the order parameter ``|int x rho|`` and the second moment
    ``int (1 - <x, m>^2) rho`` about the mean direction ``m``.

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    rho : ndarray, shape (nlat, nlon), optional
        The density on the PDE's grid, when already synthesized (not checked against ``rho_lm``).

    Returns
    -------
    dict
        ``max_density``, ``order_parameter`` and ``second_moment`` (floats; ``m`` is the north pole when
        the first moment vanishes).

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,).
    """
    rho_lm = _coefficients(pde, rho_lm)
    g = pde.grid
    rho = g.synthesis(rho_lm) if rho is None else rho
    W = rho * g.weights
    first = np.einsum("ij,ijk->k", W, g.nodes)
    r = np.linalg.norm(first)
    m = first / r if r > 0 else np.array([0.0, 0.0, 1.0])
    second = float(np.sum(W * (1 - (g.nodes @ m) ** 2)))
    return {"max_density": float(rho.max()), "order_parameter": float(r), "second_moment": second}


def field_dissipation(pde: ContinuumPDE, rho_lm, fields=None) -> float:
    """``int |X|^2 rho dx`` (exact quadrature for mean zonal heads: degree <= 3 lmax): the continuum form of
    :func:`meanfield.analysis.diagnostics.dissipation`.

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    fields : dict, optional
        ``pde.fields(rho_lm)``, when already computed.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,).
    """
    rho_lm = _coefficients(pde, rho_lm)
    f = pde.fields(rho_lm) if fields is None else fields
    return pde.grid.integrate(f["rho"] * np.sum(f["X"] ** 2, axis=0))


def boltzmann_entropy(pde: ContinuumPDE, rho_lm, rho=None) -> float:
    """``-int rho log rho`` over the set where ``rho > 0`` (see :func:`field_negative_mass` for the rest).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    rho : ndarray, shape (nlat, nlon), optional
        The density on the PDE's grid, when already synthesized (not checked against ``rho_lm``).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,).
    """
    rho_lm = _coefficients(pde, rho_lm)
    rho = pde.grid.synthesis(rho_lm) if rho is None else rho
    pos = np.where(rho > 0, rho, 1.0)
    return -pde.grid.integrate(np.where(rho > 0, rho * np.log(pos), 0.0))


def free_energy_dissipation(pde: ContinuumPDE, rho_lm, fields=None) -> float:
    """``int |X - nu grad log rho|^2 rho`` = d/dt (E - nu int rho log rho) for nu >= 0 (MODEL.md section 3).

    Needs ``rho > 0``; returns NaN otherwise.

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    fields : dict, optional
        ``pde.fields(rho_lm)``, when already computed.

    Returns
    -------
    float
        The dissipation, or NaN where ``rho <= 0`` somewhere on the grid.

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,).
    """
    rho_lm = _coefficients(pde, rho_lm)
    g = pde.grid
    f = pde.fields(rho_lm) if fields is None else fields
    rho = f["rho"]
    if np.any(rho <= 0):
        return float("nan")
    flux = f["X"] - pde.nu * g.gradient(rho_lm) / rho
    return g.integrate(rho * np.sum(flux**2, axis=0))


def field_attention_entropy(pde: ContinuumPDE, rho_lm, rho=None):
    """Mean continuum attention entropy per head, ``int H_h(x) rho(x) dx``, shape (H,).

    ``H_h(x) = -int p_h(x, y) log p_h(x, y) rho(y) dy``, ``p_h = k_h(<x, M y>) / Z_h(x)``
    (<= 0, -> 0 as rho concentrates).  For zonal heads it is spectral
    (:meth:`meanfield.core.zonal.ZonalOperator.entropies`): ``H = log Z - Q / Z`` with the
    multipliers ``c[k]`` and ``c[k log k]`` (exp: ``4 pi i_l(a)`` and ``4 pi beta lambda i_l'(a)``,
    ``a = beta lambda``); for general heads on the spectral path by their operators
    (:meth:`meanfield.ContinuumPDE.attention_entropies`); otherwise quadrature on the grid.  Heads whose kernel can vanish (ReLU)
    give NaN.  The particle analogue is the mean over tokens of
    ``meanfield.analysis.diagnostics.attention_entropy(system, X, relative=True)`` (the observers'
    ``relative_entropy``).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    rho : ndarray, optional
        The density on the PDE's grid, when already synthesized.

    Returns
    -------
    ndarray, shape (H,)

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,).
    """
    rho_lm = _coefficients(pde, rho_lm)
    g = pde.grid
    rho = g.synthesis(rho_lm) if rho is None else rho
    out = np.full(len(pde.heads), np.nan)
    if pde.zonal or pde.general is not None:
        H = pde.attention_entropies(rho_lm)            # Sinkhorn heads: the entropy of p = a k a
        for h, head in enumerate(pde.heads):
            if KERNELS[head.kernel].positive:
                out[h] = g.integrate(rho * H[h])
        return out
    nodes, W = g.nodes.reshape(-1, 3), (rho * g.weights).reshape(-1)
    for h, head in enumerate(pde.heads):
        if KERNELS[head.kernel].positive:
            out[h] = float(W @ entropy_rows(head, nodes, nodes, W, pde.chunk_bytes, relative=True))
    return out


def field_observer(pde: ContinuumPDE, entropy=True):
    """An ``observe(t, y)`` hook on the real state vector recording mass, energy (total and per
    head), dissipation, attention entropy, Boltzmann entropy, negative mass, spectral tail and
    concentration measures (and the free-energy dissipation when ``nu > 0``, and the smallest
    softmax normalizer ``min_normalizer`` on the grid when a head is softmax-normalized).

    Parameters
    ----------
    pde : ContinuumPDE
    entropy : bool
        Whether to record the attention entropy ``relative_entropy`` (H,) (:func:`field_attention_entropy`).

    Returns
    -------
    callable
        ``observe(t, y) -> dict``.

    Raises
    ------
    ValueError
        If ``entropy`` is not a bool.
    """
    entropy = validate.boolean("entropy", entropy)

    def observe(t, y):
        rho_lm = pde.coefficients(y)
        f = pde.fields(rho_lm)
        E = pde.energies(rho_lm)
        rec = {"mass": mass(pde, rho_lm), "energy": E.sum(), "energy_head": E,
               "dissipation": field_dissipation(pde, rho_lm, f),
               "boltzmann_entropy": boltzmann_entropy(pde, rho_lm, f["rho"]),
               "negative_mass": field_negative_mass(pde, rho_lm, f["rho"]),
               "spectral_tail": field_spectral_tail(pde, rho_lm), **concentration(pde, rho_lm, f["rho"])}
        if entropy:
            rec["relative_entropy"] = field_attention_entropy(pde, rho_lm, f["rho"])
        softmax = [h for h, head in enumerate(pde.heads) if NORMALIZATIONS[head.normalization].uses_normalizer]
        if softmax:         # Z <= 0 anywhere (truncated ReLU kernels) means u = 0 there: reported, not hidden
            rec["min_normalizer"] = float(f["D"][softmax].min())
        if pde.nu > 0:
            rec["free_energy"] = E.sum() + pde.nu * rec["boltzmann_entropy"]
            rec["free_energy_dissipation"] = free_energy_dissipation(pde, rho_lm, f)
        return rec

    return observe


def field_resolution_monitor(pde: ContinuumPDE, tail_tol=1e-3, negative_tol=1e-4):
    """An ``event(t, y)`` hook stopping a run once ``lmax`` no longer resolves the density.

    Stops when the :func:`field_spectral_tail` exceeds ``tail_tol`` or the :func:`field_negative_mass`
    exceeds ``negative_tol``; the message names the criterion and its value
    (:func:`meanfield.core.resolution.resolution_monitor`, the one rule of every continuum model).
    Both tolerances must be ``> 0`` (``inf``: that criterion never stops), as ``pde.tail_tol`` and
    ``pde.negative_tol`` of a run config.

    Parameters
    ----------
    pde : ContinuumPDE
    tail_tol, negative_tol : float

    Returns
    -------
    callable
        ``event(t, y) -> str | None``: the reason to stop, or None.

    Raises
    ------
    ValueError
        If a tolerance is not ``> 0`` (NaN, zero, negative, not a number).
    """
    tail_tol, negative_tol = _positive_tolerances(tail_tol, negative_tol)
    return resolution.resolution_monitor(pde.coefficients, lambda c: field_spectral_tail(pde, c),
                                         lambda c: field_negative_mass(pde, c), tail_tol, negative_tol,
                                         where=f" at lmax = {pde.lmax}")


def head_forces(pde: ContinuumPDE, rho_lm):
    """Per-head forces ``u^h(x) = int k_h(<x, M_h y>) V_h y rho(y) dy / D_h(x)`` (unprojected) on the grid, shape
    (H, nlat, nlon, 3): by the heads' operators on the operator path (general heads), otherwise by direct sums over
    the grid nodes (``O(nodes^2)`` per head: about a second at lmax 47).  Sinkhorn heads are refused (their force
    needs the scaling solve: use :meth:`ContinuumPDE.fields`).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).

    Returns
    -------
    ndarray, shape (H, nlat, nlon, 3)
        ``u^h`` at the grid nodes.

    Raises
    ------
    ValueError
        If ``rho_lm`` is not finite coefficients of the PDE's shape (nalm,), or a head is Sinkhorn-normalized.
    """
    rho_lm = _coefficients(pde, rho_lm)
    g = pde.grid
    solving = [i for i, h in enumerate(pde.heads) if not NORMALIZATIONS[h.normalization].row_local]
    if solving:
        raise ValueError(f"head_forces: heads {solving} are Sinkhorn-normalized (a solve over the density); the "
                         f"per-head forces are defined here for row-local normalizations (mean, softmax)")
    rho = g.synthesis(rho_lm)
    if pde.general is not None:
        U = pde.general.forces(pde._sources(rho))[0]
        return U.reshape((len(pde.heads),) + g.shape + (3,))
    nodes = g.nodes.reshape(-1, 3)
    W = (rho * g.weights).reshape(-1)
    return np.stack([aggregate(h, nodes, nodes, W, pde.chunk_bytes)[0] for h in pde.heads]).reshape(
        (len(pde.heads),) + g.shape + (3,))


def _forces(pde, rho_lm, forces):
    """:func:`head_forces` of ``rho_lm``, or ``forces`` checked to be such an array (H, nlat, nlon, 3)."""
    if forces is None:
        return head_forces(pde, rho_lm)
    _coefficients(pde, rho_lm)
    return validate.real_array("forces", forces, (len(pde.heads),) + pde.grid.shape + (3,))


def field_radial_shadows(pde: ContinuumPDE, rho_lm, forces=None) -> dict:
    """Radial shadows ``a^h = <u^h, x>``, force norms ``|u^h|`` and tangential norms ``|P u^h|`` on the grid, each
    (H, nlat, nlon): the continuum form of :func:`meanfield.analysis.diagnostics.radial_shadows` (``forces``: a
    :func:`head_forces` result to reuse).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    forces : ndarray, shape (H, nlat, nlon, 3), optional
        :func:`head_forces` of ``rho_lm``, when already computed.

    Returns
    -------
    dict
        ``a``, ``norm``, ``tangential``: each (H, nlat, nlon).

    Raises
    ------
    ValueError
        If ``rho_lm`` or ``forces`` has the wrong shape or is not finite, or a head is Sinkhorn-normalized
        (:func:`head_forces`).
    """
    U = _forces(pde, rho_lm, forces)
    x = pde.grid.nodes
    a = np.einsum("hijc,ijc->hij", U, x)
    PU = U - a[..., None] * x
    return {"a": a, "norm": np.linalg.norm(U, axis=-1), "tangential": np.linalg.norm(PU, axis=-1)}


def field_radial_dominance(pde: ContinuumPDE, rho_lm, forces=None) -> dict:
    """Both readings of Condition 8 on the grid (H, nlat, nlon), as :func:`meanfield.analysis.diagnostics.
    radial_dominance`: ``exact`` and ``norm_bounded`` (bool) and their margins (left minus right side).

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    forces : ndarray, shape (H, nlat, nlon, 3), optional
        :func:`head_forces` of ``rho_lm``, when already computed.

    Returns
    -------
    dict
        ``exact``, ``norm_bounded``, ``exact_margin``, ``norm_bounded_margin``: each (H, nlat, nlon).

    Raises
    ------
    ValueError
        As :func:`field_radial_shadows`.
    """
    r = field_radial_shadows(pde, rho_lm, forces)
    a, nrm, tan2 = r["a"], r["norm"], r["tangential"] ** 2
    m_exact = tan2 - a * (a.sum(axis=0, keepdims=True) - a)
    m_norm = tan2 - np.abs(a) * (nrm.sum(axis=0, keepdims=True) - nrm)
    return {"exact": m_exact >= 0, "norm_bounded": m_norm >= 0, "exact_margin": m_exact, "norm_bounded_margin": m_norm}


def field_energy_rate_terms(pde: ContinuumPDE, rho_lm, forces=None):
    """``C[h, h'] = int <P u^h, P u^h'> rho`` (H, H): for symmetric value-aligned mean heads the row sums are the exact
    per-head ``dE_h/dt`` and, for heads on orthogonal subspaces, the off-diagonal terms are ``-int a^h a^h' rho`` (the
    interference through the radial shadows); the continuum form of
    :func:`meanfield.analysis.diagnostics.energy_rate_terms`.

    Parameters
    ----------
    pde : ContinuumPDE
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density (any mass).
    forces : ndarray, shape (H, nlat, nlon, 3), optional
        :func:`head_forces` of ``rho_lm``, when already computed.

    Returns
    -------
    ndarray, shape (H, H)

    Raises
    ------
    ValueError
        As :func:`field_radial_shadows`.
    """
    rho_lm = _coefficients(pde, rho_lm)
    U = _forces(pde, rho_lm, forces)
    g = pde.grid
    x = g.nodes
    PU = U - np.einsum("hijc,ijc->hij", U, x)[..., None] * x
    w = g.synthesis(rho_lm) * g.weights
    return np.einsum("ij,hijc,kijc->hk", w, PU, PU)
