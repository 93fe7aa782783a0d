r"""Token densities on S^2 as spherical-harmonic coefficients (MODEL.md section 3), and sampling.

A density ``rho`` is taken w.r.t. surface measure with mass 1, so ``rho_00 = 1/sqrt(4 pi)``
(uniform ``rho = 1/(4 pi)``).  Coefficient vectors ``rho_lm`` follow :mod:`meanfield.core.sphere`
(ducc0 alm of a real field, orthonormal ``Y_lm`` with Condon-Shortley phase); only
``grid.lmax`` matters.  The von Mises-Fisher (vMF) density and its coefficients (Funk-Hecke) are

.. math:: \rho(x) = \frac{\kappa}{4\pi\sinh\kappa} e^{\kappa\langle\mu,x\rangle}, \qquad
          \rho_{lm} = a_l(\kappa)\,\overline{Y_{lm}(\mu)}, \quad a_l = i_l(\kappa)/i_0(\kappa),

with ``a_l`` computed from exp-scaled Bessel functions (``scipy.special.ive``), finite for any
``kappa`` (tested to 1e4).  Nothing here clips a negative density silently.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
from scipy.special import ive

from . import cost, resolution, validate
from .choices import SAMPLING_NEGATIVE_POLICIES, SAMPLINGS
from .sphere import SphereGrid, estimate_grid

__all__ = ["uniform_density", "perturbed_uniform", "vmf_density", "vmf_mixture_density",
           "density_from_particles", "oversampled_negative_mass", "sample_particles", "normalize", "check_density",
           "vmf_multiplier", "default_kde_kappa"]


def __getattr__(name):
    """Module attribute fallback: ``negative_mass`` of 0.2 raises an ``AttributeError`` naming its replacement.

    Parameters
    ----------
    name : str
        The attribute looked up.

    Raises
    ------
    AttributeError
        Always (this is called only for names the module does not define).
    """
    if name == "negative_mass":
        raise AttributeError("meanfield.densities.negative_mass was renamed oversampled_negative_mass in 0.3 (one "
                             "public name, one meaning: meanfield.core.resolution.negative_mass is the rule on grid "
                             "values, meanfield.field_diagnostics.field_negative_mass the PDE's diagnostic)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_Y00 = 1.0 / np.sqrt(4.0 * np.pi)


def _kappa(kappa, name="kappa", allow_inf=False):
    return validate.real(name, kappa, 0, finite=not allow_inf)


def _unit(mu, name="mu"):
    m = validate.unit_vector(name, mu, 3)
    return m / np.linalg.norm(m)


def vmf_multiplier(lmax, kappa):
    """Funk-Hecke multiplier ``a_l = i_l(kappa) / i_0(kappa)`` (lmax+1,) of the vMF kernel, ``a_0 = 1``.

    ``ive(l + 1/2, kappa) / ive(1/2, kappa)``: the ``sqrt(pi / 2 kappa) e^kappa`` factors cancel, so it
    never overflows; ``kappa = 0`` gives ``(1, 0, ..., 0)``; large kappa: ``~ exp(-l(l+1)/(2 kappa))``.

    Parameters
    ----------
    lmax : int
        Largest degree, ``>= 0``.
    kappa : float
        Concentration, finite and ``>= 0``.

    Returns
    -------
    ndarray, shape (lmax+1,), float64
        ``a_l`` for ``l = 0, ..., lmax``.

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0``, ``kappa`` not a finite number ``>= 0``, or an ``lmax`` above the
        cost guard's limits (:func:`meanfield.core.cost.guard`).
    """
    lmax = validate.integer("lmax", lmax, 0)
    # a few (lmax + 1,) float64 arrays; scipy's ive about 1e-7 s per degree
    cost.guard(f"vmf_multiplier(lmax={lmax})", bytes=40.0 * (lmax + 1), seconds=1e-7 * (lmax + 1), fix="a smaller lmax")
    k, a = _kappa(kappa), (np.arange(lmax + 1) == 0).astype(float)
    if k > 0:
        a[1:] = ive(np.arange(1, lmax + 1) + 0.5, k) / ive(0.5, k)
    return a


def _coeffs(grid, rho_lm, name):
    """Finite complex copy of shape (nalm,) and its mass ``rho_00 sqrt(4 pi)``."""
    a = np.array(rho_lm, dtype=np.complex128) if np.shape(rho_lm) == (grid.nalm,) else None
    if a is None or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be a finite array of shape (nalm,) = ({grid.nalm},) for lmax = "
                         f"{grid.lmax}; received shape {np.shape(rho_lm)}" + ("" if a is None else ", non-finite"))
    return a, float(a[0].real) * np.sqrt(4.0 * np.pi)


def check_density(grid, rho_lm, name="rho_lm"):
    """Validated complex128 copy (nalm,) of a density's coefficients on the :class:`SphereGrid`
    ``grid``: finite, mass ``rho_00 sqrt(4 pi) = 1`` to :data:`meanfield.core.validate.MASS_TOL`.

    Parameters
    ----------
    grid : SphereGrid
        The grid whose ``lmax`` (``nalm``) the coefficients have.
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density.
    name : str, optional
        The argument's name in the messages (default ``"rho_lm"``).

    Returns
    -------
    ndarray, shape (nalm,), complex128
        A copy of the coefficients (not renormalized).

    Raises
    ------
    ValueError
        ``grid`` not a :class:`SphereGrid`, coefficients of another shape or not finite, or a mass that
        is not 1 (use :func:`normalize` to rescale).
    """
    if not isinstance(grid, SphereGrid):
        raise ValueError(f"grid must be a SphereGrid; received {type(grid).__name__}")
    a, mass = _coeffs(grid, rho_lm, name)
    validate.unit_mass(name, mass, hint=" (rho_00 sqrt(4 pi); use normalize() to rescale explicitly)")
    return a


def normalize(grid, rho_lm, name="rho_lm"):
    """Rescale coefficients (nalm,) to mass 1 (only when the caller asks); mass must be > 0 (``name``: the
    argument's name in the errors).

    Parameters
    ----------
    grid : SphereGrid
        The grid whose ``lmax`` (``nalm``) the coefficients have.
    rho_lm : array_like, shape (nalm,)
        Coefficients of a field of positive mass.
    name : str, optional
        The argument's name in the messages (default ``"rho_lm"``).

    Returns
    -------
    ndarray, shape (nalm,), complex128
        A copy divided by the mass, ``rho_00 = 1/sqrt(4 pi)`` exactly.

    Raises
    ------
    ValueError
        Coefficients of another shape or not finite, or a mass that is not ``> 0``.
    """
    a, mass = _coeffs(grid, rho_lm, name)
    if not mass > 0:
        raise ValueError(f"{name} must have positive mass to be normalized; received mass {float(mass)!r}")
    a /= mass
    a[0] = _Y00
    return a


_normalize = normalize  # sample_particles has an argument of the same name


def uniform_density(grid):
    """Uniform density ``1/(4 pi)``: coefficients (nalm,) with only ``rho_00 = 1/sqrt(4 pi)``.

    Parameters
    ----------
    grid : SphereGrid
        The grid (its ``nalm``).

    Returns
    -------
    ndarray, shape (nalm,), complex128
        The coefficients.
    """
    return np.where(np.arange(grid.nalm) == 0, _Y00, 0.0).astype(np.complex128)


def perturbed_uniform(grid, perturbations):
    r"""Coefficients (nalm,) of ``1/(4 pi)`` plus spherical-harmonic perturbations.

    ``perturbations`` is a dict ``{(l, m): eps}`` with ``1 <= l <= lmax`` (``l = 0`` is refused: the
    mass stays 1) and ``0 <= m <= l``; ``eps`` is added to the stored ``(l, m)`` coefficient, so the
    field gains ``eps Y_l0`` (``m = 0``, ``eps`` real) or ``eps Y_lm + conj(eps Y_lm)`` (``m > 0``).

    Parameters
    ----------
    grid : SphereGrid
        The grid (its ``lmax`` bounds ``l``).
    perturbations : dict
        ``{(l, m): eps}``, integer keys, ``eps`` a finite real or complex number (real for ``m = 0``).

    Returns
    -------
    ndarray, shape (nalm,), complex128
        The coefficients (mass 1; not checked to be nonnegative).

    Raises
    ------
    ValueError
        ``perturbations`` not a dict, a key that is not integers ``(l, m)`` with ``1 <= l <= lmax``,
        ``0 <= m <= l``, or an amplitude that is not finite (``bool`` refused) or not real for ``m = 0``.
    """
    a = uniform_density(grid)
    if not isinstance(perturbations, dict):
        raise ValueError(f"perturbations must be a dict {{(l, m): amplitude}}; received {type(perturbations).__name__}")
    for key, eps in perturbations.items():
        ok = (isinstance(key, tuple) and len(key) == 2
              and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in key))
        if not ok or not (1 <= key[0] <= grid.lmax and 0 <= key[1] <= key[0]):
            raise ValueError(f"perturbations keys must be integer (l, m) with 1 <= l <= lmax = {grid.lmax}, "
                             f"0 <= m <= l; received {key!r}")
        e = complex(eps) if np.ndim(eps) == 0 and isinstance(eps, (int, float, complex, np.number)) \
            and not isinstance(eps, (bool, np.bool_)) else np.nan                 # True is not 1
        if not np.isfinite(e) or (key[1] == 0 and e.imag != 0):
            raise ValueError(f"perturbations[{key}] must be finite (real for m = 0); received {eps!r}")
        a[grid.index(*key)] += e
    return a


def vmf_density(grid, mu, kappa):
    """Coefficients (nalm,) of the vMF density about unit ``mu`` (3,), ``kappa >= 0`` (0: uniform).

    Parameters
    ----------
    grid : SphereGrid
        The grid.
    mu : array_like, shape (3,)
        Mean direction, a unit vector (to 1e-8; renormalized).
    kappa : float
        Concentration, finite and ``>= 0``.

    Returns
    -------
    ndarray, shape (nalm,), complex128
        The coefficients, ``rho_00 = 1/sqrt(4 pi)`` exactly.

    Raises
    ------
    ValueError
        ``mu`` not a finite unit 3-vector, ``kappa`` not a finite number ``>= 0``, or an ``lmax`` above
        the cost guard's limits.
    """
    mu, k = _unit(mu), _kappa(kappa)
    a = grid.multiply_degree(grid.adjoint_at(mu[None], np.ones(1)), vmf_multiplier(grid.lmax, k))
    a[0] = _Y00
    return a


def vmf_mixture_density(grid, mus, kappas, weights=None, floor=0.0):
    """Coefficients (nalm,) of ``(1 - floor) sum_k w_k vMF(mu_k, kappa_k) + floor / (4 pi)``.

    ``mus`` (K, 3) unit vectors; ``kappas`` scalar or (K,); ``weights`` (K,) nonnegative summing to
    1 (to ``validate.WEIGHTS_TOL``), default equal; ``floor`` in [0, 1].

    Parameters
    ----------
    grid : SphereGrid
        The grid.
    mus : array_like, shape (K, 3)
        Mean directions, unit vectors, ``K >= 1``.
    kappas : float or array_like, shape (K,)
        Concentrations, finite and ``>= 0``.
    weights : array_like, shape (K,), optional
        Mixture weights (default ``1/K`` each).
    floor : float, optional
        Mass of the uniform part (default 0).

    Returns
    -------
    ndarray, shape (nalm,), complex128
        The coefficients, ``rho_00 = 1/sqrt(4 pi)`` exactly.

    Raises
    ------
    ValueError
        ``mus`` not finite unit vectors of shape (K, 3), ``kappas`` of another shape or out of range,
        weights that are not a probability vector, or ``floor`` outside [0, 1].
    """
    M = validate.unit_vectors("mus", mus, 3, min_rows=1)
    K, ks = M.shape[0], np.broadcast_to(kappas, M.shape[:1]) if np.ndim(kappas) == 0 else np.asarray(kappas)
    if ks.shape != (K,):
        raise ValueError(f"kappas must be a scalar or have shape (K,) = ({K},); received shape {ks.shape}")
    w, f = validate.probability_weights("weights", weights, K), validate.real("floor", floor, 0.0, 1.0)
    a = f * uniform_density(grid)
    for j in range(K):
        a += (1.0 - f) * w[j] * vmf_density(grid, _unit(M[j], f"mus[{j}]"), _kappa(ks[j], f"kappas[{j}]"))
    a[0] = _Y00  # exact: a convex combination of mass-1 densities
    return a


def default_kde_kappa(lmax):
    """Default KDE concentration ``lmax (lmax + 1) / 70`` (angular width ``~ 8.4 / lmax``): the kernel
    multiplier ``a_lmax`` (``~ exp(-35)`` for large lmax) makes the truncation negligible; a one-point
    KDE has negative mass <= 1.3e-14 for lmax <= 256, below :func:`sample_particles`' 1e-12.

    Parameters
    ----------
    lmax : int
        Largest degree, ``>= 0``.

    Returns
    -------
    float
        ``lmax (lmax + 1) / 70``.

    Raises
    ------
    ValueError
        ``lmax`` not an integer ``>= 0``.
    """
    lmax = validate.integer("lmax", lmax, 0)
    return lmax * (lmax + 1) / 70.0


def density_from_particles(grid, X, w=None, kappa=None):
    r"""Coefficients (nalm,) of the kernel density estimate ``sum_j w_j vMF(x_j, kappa)``.

    ``rho_lm = a_l(kappa) sum_j w_j conj(Y_lm(x_j))`` (exact to ducc0's ``epsilon = 1e-13``) for
    unit vectors ``X`` (n, 3) and weights ``w`` (n,) >= 0 summing to 1 (to ``validate.WEIGHTS_TOL``; default 1/n).
    ``kappa`` defaults to :func:`default_kde_kappa` ``(lmax)``; ``kappa = np.inf`` gives the truncated
    empirical measure, which is *not* a nonnegative density (Gibbs oscillations).

    Parameters
    ----------
    grid : SphereGrid
        The grid.
    X : array_like, shape (n, 3)
        Unit vectors, ``n >= 1``.
    w : array_like, shape (n,), optional
        Probability weights (default ``1/n`` each).
    kappa : float, optional
        KDE concentration ``> 0`` (``inf`` allowed); default :func:`default_kde_kappa`.

    Returns
    -------
    ndarray, shape (nalm,), complex128
        The coefficients, ``rho_00 = 1/sqrt(4 pi)`` exactly.

    Raises
    ------
    ValueError
        ``X`` not finite unit vectors of shape (n, 3), weights that are not a probability vector of
        length n, or ``kappa`` not a number ``> 0``.
    """
    X = validate.unit_vectors("X", X, 3, min_rows=1)
    w = validate.probability_weights("w", w, X.shape[0])
    k = default_kde_kappa(grid.lmax) if kappa is None else validate.real(
        "kappa", kappa, positive=True, finite=False, what="a number > 0 (inf: the truncated empirical measure)")
    a = grid.adjoint_at(X, w)
    if np.isfinite(k):
        a = grid.multiply_degree(a, vmf_multiplier(grid.lmax, k))
    a[0] = _Y00
    return a


@lru_cache(maxsize=16)
def _fine(lmax, oversample):
    return SphereGrid(lmax, nlat=oversample * (lmax + 1), nlon=2 * oversample * (lmax + 1))


def oversampled_negative_mass(grid, rho_lm, oversample=2):
    """``-int min(rho, 0) dx`` by quadrature on ``SphereGrid(lmax, nlat=oversample (lmax+1),
    nlon=2 oversample (lmax+1))`` (finer than the density's own grid: the check before sampling).

    Parameters
    ----------
    grid : SphereGrid
        The grid whose ``lmax`` the coefficients have.
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density.
    oversample : int
        The quadrature grid's refinement (``>= 1``).

    Returns
    -------
    float
        The negative mass, ``>= 0``.

    Raises
    ------
    ValueError
        If ``oversample`` is not an integer ``>= 1``, ``rho_lm`` is not coefficients of ``grid``'s shape, or the
        oversampled grid is above the cost guard's limits (:func:`meanfield.core.cost.guard`).
    """
    oversample = validate.integer("oversample", oversample, 1)
    est = estimate_grid(grid.lmax, oversample * (grid.lmax + 1), 2 * oversample * (grid.lmax + 1))
    cost.guard(f"oversampled_negative_mass(oversample={oversample}) on {est.what}", bytes=est.bytes, seconds=est.seconds,
               detail=est.detail, fix="a smaller oversample")
    fine = _fine(grid.lmax, oversample)
    return 0.0 + resolution.negative_mass(fine.synthesis(_coeffs(grid, rho_lm, "rho_lm")[0]), fine.integrate)


def _uniform_points(z, phi):
    s = np.sqrt(np.maximum(1.0 - z * z, 0.0))
    return np.stack([s * np.cos(phi), s * np.sin(phi), z], axis=-1)


def _iid(grid, rho_lm, n, rng, clip):
    top = _fine(grid.lmax, 3).synthesis(rho_lm).max()
    for bound in 1.2 * top * 1.5 ** np.arange(4):
        out, violated = [], False
        while sum(len(o) for o in out) < n:
            m = int(min(max(1.2 * (n - sum(len(o) for o in out)) * 4 * np.pi * bound, 256), 2 ** 20))
            x = _uniform_points(rng.uniform(-1, 1, m), rng.uniform(0, 2 * np.pi, m))
            r = grid.evaluate(rho_lm, x)
            if np.any(r > bound):
                violated = True  # samples so far were drawn with a wrong bound: redo, larger
                break
            out.append(x[rng.uniform(0, bound, m) < (np.maximum(r, 0) if clip else r)])
        if not violated:
            return np.concatenate(out)[:n]
    raise RuntimeError("rejection bound exceeded after 4 enlargements; rho_lm is under-resolved")


def _stratified(grid, rho_lm, n, rng, clip):
    fine = _fine(grid.lmax, 2)
    gw = fine.ring_weights * fine.nlon / (2 * np.pi)               # GL weights, sum 2
    zb = np.concatenate([[1.0], 1.0 - np.cumsum(gw[:-1]), [-1.0]])  # ring boundaries in cos(theta)
    zhi, zlo, dphi = zb[:-1], zb[1:], 2 * np.pi / fine.nlon
    t, v = np.polynomial.legendre.leggauss(3)                       # 3 x 3 Gauss rule per cell
    zs = 0.5 * (zhi + zlo)[:, None] + 0.5 * (zhi - zlo)[:, None] * t            # (nlat, 3)
    ps = fine.phi[:, None] + 0.5 * dphi * t                                        # (nlon, 3)
    Z, P = np.broadcast_arrays(zs[:, :, None, None], ps[None, None])              # (nlat, 3, nlon, 3)
    R = grid.evaluate(rho_lm, _uniform_points(Z, P).reshape(-1, 3)).reshape(Z.shape)
    R = np.maximum(R, 0.0) if clip else R
    W = (0.25 * dphi * (zhi - zlo)[:, None, None, None] * v[None, :, None, None] * v)
    mass = np.einsum("iakb->ik", W * R).ravel()
    rmax, rmin = R.max(axis=(1, 3)).ravel(), R.min(axis=(1, 3)).ravel()
    cum = np.cumsum(np.maximum(mass, 0.0))
    cell = np.minimum(np.searchsorted(cum / cum[-1], (rng.uniform() + np.arange(n)) / n, side="right"),
                      mass.size - 1)
    ring, col = np.divmod(cell, fine.nlon)
    for slack in 0.5 * 2.0 ** np.arange(4):
        bound = (rmax + slack * (rmax - rmin) + 2e-3 * slack * rmax.max())[cell]
        X, todo, violated = np.empty((n, 3)), np.arange(n), False
        while todo.size and not violated:
            k = 8                                                    # proposals per pending point
            i = np.repeat(todo, k)
            z = zlo[ring[i]] + rng.uniform(size=i.size) * (zhi - zlo)[ring[i]]
            x = _uniform_points(z, fine.phi[col[i]] + (rng.uniform(size=i.size) - 0.5) * dphi)
            r = grid.evaluate(rho_lm, x)
            violated = bool(np.any(r > bound[i]))
            ok = (rng.uniform(size=i.size) * bound[i] < r).reshape(-1, k)
            hit = ok.any(axis=1)
            X[todo[hit]] = x.reshape(-1, k, 3)[hit, ok[hit].argmax(axis=1)]
            todo = todo[~hit]
        if not violated:
            return X[rng.permutation(n)]
    raise RuntimeError("in-cell rejection bound exceeded after 4 enlargements; rho_lm is under-resolved")


SAMPLING_BYTES_PER_POINT = {"iid": 900.0, "stratified": 1200.0}
"""Peak bytes per drawn point of :func:`sample_particles` (proposals, their densities, the output; measured
with tracemalloc at lmax 8 and 32, n = 10^4 and 10^5: 610-850 iid, 1030-1130 stratified)."""
SAMPLING_SECONDS_PER_POINT = 3e-6
"""Seconds per drawn point at lmax <= 32 (measured 1.2e-6 to 2.6e-6), growing as lmax^2 beyond (evaluations)."""


def estimate_sampling(lmax, n, method="iid") -> cost.Cost:
    """Estimated peak memory and time of :func:`sample_particles` (sizes only)."""
    secs = float(n) * SAMPLING_SECONDS_PER_POINT * max(1.0, (lmax / 32.0) ** 2)
    return cost.Cost(f"sample_particles(n={n}, method={method!r}) at lmax = {lmax}",
                     float(n) * SAMPLING_BYTES_PER_POINT[method], secs, f"{n} rejection-sampled points")


def sample_particles(grid, rho_lm, n, method="iid", seed=None, negative="raise", normalize=False):
    r"""Draw ``n`` unit vectors (n, 3) distributed according to the density ``rho_lm`` (nalm,).

    ``rho_lm`` must have mass 1 (to ``validate.MASS_TOL``; ``normalize=True`` rescales explicitly) and negative mass
    (:func:`oversampled_negative_mass`) ``<= 1e-12``, else ValueError; ``negative="clip"`` samples ``max(rho, 0)``
    instead and warns with the clipped mass.  ``seed``: int, None or ``numpy.random.Generator``.

    ``method="iid"``: rejection sampling from uniform proposals with bound ``1.2 max rho`` on a 3x
    oversampled grid; a proposal above the bound discards all samples and restarts with a 1.5x
    larger bound (never silently biased).

    ``method="stratified"`` (low variance): the cells are the pixels of the 2x oversampled GL grid,
    bounded in ``cos(theta)`` by cumulative sums of the GL weights (exact equal-area ring
    boundaries) and in ``phi`` by midpoints between nodes; cell masses come from a 3x3 Gauss rule in
    ``(cos theta, phi)``.  The ``n`` points are allocated to cells by systematic resampling (one
    uniform offset), then each is placed by rejection sampling within its cell (uniform in area)
    against a per-cell bound with a safety margin (a violation restarts with a larger margin).  The
    output is shuffled, so each row's law is ``rho`` up to the cell-mass quadrature error.

    Parameters
    ----------
    grid : SphereGrid
        The grid whose ``lmax`` the coefficients have.
    rho_lm : array_like, shape (nalm,)
        Coefficients of the density.
    n : int
        Number of points, ``>= 1``.
    method : {"iid", "stratified"}, optional
        Sampling scheme (above).
    seed : None, int or numpy.random.Generator, optional
        Random source.
    negative : {"raise", "clip"}, optional
        What to do when the negative mass exceeds 1e-12.
    normalize : bool, optional
        Rescale ``rho_lm`` to mass 1 first (:func:`normalize`).

    Returns
    -------
    ndarray, shape (n, 3)
        The points.

    Raises
    ------
    ValueError
        An unknown ``method`` or ``negative``, ``n`` not an integer ``>= 1``, a bad ``seed``, an ``n``
        above the cost guard's limits, coefficients that are not a mass-1 density of ``grid``'s shape, or
        (``negative="raise"``) negative mass above 1e-12.
    RuntimeError
        The rejection bound is still exceeded after 4 enlargements (an under-resolved ``rho_lm``).
    """
    validate.choice("method", method, SAMPLINGS)
    validate.choice("negative", negative, SAMPLING_NEGATIVE_POLICIES)
    n = validate.integer("n", n, 1)
    generator = validate.rng(seed)        # a bad seed is refused before any work
    estimate_sampling(grid.lmax, n, method).check("a smaller n")
    if normalize:
        rho_lm = _normalize(grid, rho_lm)
    rho_lm = check_density(grid, rho_lm)
    neg = oversampled_negative_mass(grid, rho_lm)
    clip = neg > 1e-12
    if clip and negative == "raise":
        raise ValueError(f"rho_lm must be a nonnegative density to be sampled; received negative mass "
                         f"{neg:.3e} (> 1e-12); pass negative='clip' to sample max(rho, 0)")
    if clip:
        warnings.warn(f"sample_particles: clipping negative mass {neg:.3e} of rho_lm", RuntimeWarning, stacklevel=2)
    return (_iid if method == "iid" else _stratified)(grid, rho_lm, n, generator, clip)
