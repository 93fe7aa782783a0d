r"""Paired runs: particles and the mean-field PDE from the same start, compared by W2 (MODEL.md section 4).

:func:`paired_run` samples ``n`` particles from an initial density ``rho_0``, evolves them and the
continuum PDE with the same heads, records the diagnostics of both (energy, relative attention
entropy, dissipation, order parameter) and the distance

.. math:: W_2\Big(\mu_n(t),\ \sum_g \rho(x_g, t)\, w_g\, \delta_{x_g}\Big),\qquad
          \mu_n = \frac1n \sum_i \delta_{x_i},

at the requested times where both runs exist.  The density side lives on the nodes ``x_g`` and
weights ``w_g`` of a *transport grid* (:func:`density_measure`; by default the PDE's own
quadrature grid).  Negative density values are never clipped silently: ``negative="error"``
raises, ``negative="drop"`` drops them and records the dropped mass per time.

If the PDE's resolution monitor stops it early, :class:`PairedResult` says when and why, the
particles continue to ``t_final`` and ``w2`` is NaN at the times the PDE did not reach.

Particle sums: ``"direct"`` (:func:`meanfield.solve_particles`, O(n^2)) or ``"spectral"``
(:class:`meanfield.fastsum.SpectralSum`, Funk-Hecke fast summation for zonal heads, O(n + L^2 log L),
driven by :func:`meanfield.integrate`).  Both compute the same sums (to ``spectral_tol``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..analysis import diagnostics, transport
from ..models.continuum import ContinuumPDE
from ..core.densities import check_density, sample_particles
from ..models.fastsum import SpectralSum, spectral_supported, zonal_multipliers
from ..core.integrate import integrate
from ..models.particles import ParticleSystem, retract_sphere
from .simulate import solve_continuum, solve_particles
from ..core.sphere import SphereGrid

SAMPLINGS = ("iid", "stratified")
PARTICLE_SUMS = ("auto", "direct", "spectral")
PARTICLE_KEYS = ("energy", "energy_head", "dissipation", "entropy", "order_parameter")

__all__ = ["PairedResult", "paired_run", "transport_grid", "density_measure", "w2_densities", "particle_observer",
           "SAMPLINGS", "PARTICLE_SUMS", "PARTICLE_KEYS"]


def _choice(name, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; received {value!r}")
    return value


# ---------------------------------------------------------------------------- density side
def transport_grid(nlat, nlon=None) -> SphereGrid:
    """A Gauss-Legendre grid of ``nlat x nlon`` nodes (default ``nlon = 2 nlat``) to carry densities in W2.

    It integrates densities of degree ``<= min(2 nlat - 1, nlon - 1)`` exactly (see
    :func:`density_measure`); it is ``SphereGrid(nlat - 1, nlat=nlat, nlon=nlon)``.
    """
    if isinstance(nlat, bool) or not isinstance(nlat, (int, np.integer)) or nlat < 3:
        raise ValueError(f"nlat must be an integer >= 3; received {nlat!r}")
    nlon = 2 * int(nlat) if nlon is None else nlon
    if isinstance(nlon, bool) or not isinstance(nlon, (int, np.integer)) or nlon < 2 * nlat - 1:
        raise ValueError(f"nlon must be an integer >= 2 nlat - 1 = {2 * nlat - 1}; received {nlon!r}")
    return SphereGrid(int(nlat) - 1, nlat=int(nlat), nlon=int(nlon))


def density_measure(pde: ContinuumPDE, rho_lm, transport_grid: SphereGrid | None = None):
    r"""Nodes and weights of the discrete measure :math:`\sum_g \rho(x_g) w_g \delta_{x_g}`.

    Parameters
    ----------
    pde : ContinuumPDE
        Defines the degree ``lmax`` of ``rho_lm``.
    rho_lm : ndarray, shape (nalm,)
        Density coefficients (mass 1).
    transport_grid : SphereGrid, optional
        Grid whose nodes and quadrature weights carry the density (default ``pde.grid``).  Its
        Gauss-Legendre rule must integrate degree-``lmax`` fields exactly, so that the weights
        sum to 1: ``nlat >= (lmax + 1) / 2`` and ``nlon >= lmax + 1``.

    Returns
    -------
    nodes : ndarray, shape (G, 3)
    weights : ndarray, shape (G,)
        ``rho(x_g) w_g``; may contain negative entries (nothing is clipped here).
    """
    g = pde.grid if transport_grid is None else transport_grid
    if not isinstance(g, SphereGrid):
        raise ValueError(f"transport_grid must be a SphereGrid or None; received {type(g).__name__}")
    if 2 * g.nlat < pde.lmax + 1 or g.nlon < pde.lmax + 1:
        raise ValueError(f"transport_grid (nlat={g.nlat}, nlon={g.nlon}) must integrate degree lmax = {pde.lmax} "
                         f"exactly: need nlat >= {(pde.lmax + 2) // 2} and nlon >= {pde.lmax + 1}")
    rho_lm = check_density(pde.grid, rho_lm)
    nodes = g.nodes.reshape(-1, 3)
    rho = pde.grid.synthesis(rho_lm) if g is pde.grid else pde.grid.evaluate(rho_lm, nodes)
    return nodes, np.ravel(rho) * g.weights.reshape(-1)


def w2_densities(pde_a: ContinuumPDE, rho_a, pde_b: ContinuumPDE, rho_b, transport_grid: SphereGrid, *,
                 negative="drop", **kw):
    """W2 between two PDE densities (e.g. two ``lmax``) carried by the same transport grid.

    Both sides are :func:`density_measure` on ``transport_grid``; negative weights are
    ``"drop"``-ped (renormalizing the rest; the dropped mass of each side is reported in
    ``info["negative_mass_a"]`` / ``["negative_mass_b"]`` and their sum in ``negative_mass``) or
    raise (``"error"``).  Keywords go to :func:`meanfield.transport.w2_distance`.

    Returns
    -------
    TransportResult
    """
    _choice("negative", negative, ("error", "drop"))
    sides = []
    for name, pde, rho in (("a", pde_a, rho_a), ("b", pde_b, rho_b)):
        nodes, w = density_measure(pde, rho, transport_grid)
        neg = 0.0 - float(w[w < 0].sum())
        if neg > 0 and negative == "error":
            raise ValueError(f"density {name} has negative mass {neg:.3e} on the transport grid; "
                             f"pass negative='drop' to drop it and renormalize")
        keep = w > 0
        sides.append((nodes[keep], w[keep] / w[keep].sum(), neg))
    res = transport.w2_distance(sides[0][0], sides[1][0], sides[0][1], sides[1][1], **kw)
    info = dict(res.info, negative_mass_a=sides[0][2], negative_mass_b=sides[1][2])
    return transport.TransportResult(res.distance, res.cost, res.method, res.metric,
                                     sides[0][2] + sides[1][2], info)


# ---------------------------------------------------------------------------- particle side
def particle_observer(heads, sums="direct", spectral=None):
    """``observe(t, X)`` hook recording :data:`PARTICLE_KEYS` for uniform weights.

    ``energy`` (total), ``energy_head`` (H,), ``dissipation`` ``(1/n) sum |dx/dt|^2``, ``entropy``
    (H,) the mean *relative* attention entropy ``mean_i H_i^h - log n`` (exp kernels; NaN
    otherwise), ``order_parameter`` ``|mean_i x_i|``.  ``sums="spectral"`` evaluates everything by
    Funk-Hecke sums with ``spectral`` (a :class:`meanfield.fastsum.SpectralSum`).
    """
    _choice("sums", sums, ("direct", "spectral"))
    system = ParticleSystem(heads)
    if sums == "spectral":
        if not isinstance(spectral, SpectralSum):
            raise ValueError(f"spectral must be a SpectralSum when sums='spectral'; received {type(spectral).__name__}")
        g = spectral.grid
        mults = [zonal_multipliers(h, spectral.lmax) for h in system.heads]

    def observe(t, X):
        n = X.shape[0]
        w = np.full(n, 1.0 / n)
        H = np.full(system.n_heads, np.nan)
        if sums == "direct":
            E = system.energies(X, w)
            v = system.velocity(X, w)
            ent = diagnostics.attention_entropy(system, X, w, relative=True)
            for h, head in enumerate(system.heads):
                H[h] = ent[h] @ w if head.kernel == "exp" else np.nan
        else:
            E = spectral.energies(X, w)
            v = spectral.velocity(X, w)
            b = spectral.coefficients(X, w)
            pts = g.prepare_points(X)      # angles once for all the evaluations below
            for h, (head, m) in enumerate(zip(system.heads, mults)):
                if head.kernel == "exp":   # H_i = log Z_i - beta R_i / Z_i, R = sum_j w_j e^{beta s} s
                    Z = pts.evaluate(g.multiply_degree(b, m["normalizer"]))
                    R = pts.evaluate(g.multiply_degree(b, m["normal"]))
                    H[h] = w @ (np.log(Z) - head.beta * R / Z)
        return {"energy": float(E.sum()), "energy_head": E, "dissipation": float(w @ np.einsum("nd,nd->n", v, v)),
                "entropy": H, "order_parameter": float(np.linalg.norm(w @ X))}

    return observe


# ---------------------------------------------------------------------------- result
@dataclass(frozen=True, eq=False)
class PairedResult:
    """Outcome of :func:`paired_run`.

    Attributes
    ----------
    times : ndarray, shape (T,)
        The requested times ``t_eval``.
    w2 : ndarray, shape (T,)
        ``W2(mu_n(t), rho(t))``; NaN where the PDE (or the particle run) did not reach ``t``.
    w2_methods : tuple of str, length T
        Method used at each time (``"exact"``, ``"sinkhorn"``, ``"sliced"``; ``""`` where NaN).
    w2_negative_mass : ndarray, shape (T,)
        Negative density mass dropped on the transport grid at each time (NaN where no W2).
    w2_info : tuple of dict, length T
        :attr:`meanfield.transport.TransportResult.info` per time (empty where no W2).
    particle_times : ndarray, shape (Tp,)
    particles : dict of str to ndarray, each of shape (Tp, ...)
        :data:`PARTICLE_KEYS` at ``particle_times``.
    particle_states : ndarray, shape (Tp, n, 3)
    pde_times : ndarray, shape (Tq,)
        Times reached by the PDE; when it stopped early the last one is the stopping time.
    pde : dict of str to ndarray, each of shape (Tq, ...)
        :func:`meanfield.field_diagnostics.observer` records (``energy``, ``entropy`` (H,),
        ``spectral_tail``, ``negative_mass``, ...).
    pde_coefficients : ndarray, shape (Tq, nalm), complex
        ``rho_lm`` at ``pde_times``.
    pde_status : int
        0 reached ``t_final``; 1 stopped by the resolution monitor; -1 failed.
    pde_message : str
    pde_t_stop : float
        Time the PDE run ended (``t_final`` when it completed).
    particle_status : int
    particle_message : str
    config : dict
        Every setting (heads, sizes, methods, seeds, the particle-sum method used, timings).
    """

    times: np.ndarray
    w2: np.ndarray
    w2_methods: tuple
    w2_negative_mass: np.ndarray
    w2_info: tuple
    particle_times: np.ndarray
    particles: dict
    particle_states: np.ndarray
    pde_times: np.ndarray
    pde: dict
    pde_coefficients: np.ndarray
    pde_status: int
    pde_message: str
    pde_t_stop: float
    particle_status: int
    particle_message: str
    config: dict = field(default_factory=dict)

    @property
    def pde_stopped_early(self) -> bool:
        """True when the PDE ended before ``t_final`` (resolution monitor or failure)."""
        return self.pde_status != 0

    @property
    def w2_method(self) -> str:
        """The W2 method(s) used, comma-joined if they differ between times."""
        return ",".join(sorted({m for m in self.w2_methods if m}))


# ---------------------------------------------------------------------------- driver
def _times(t_final, t_eval):
    if isinstance(t_final, bool) or not isinstance(t_final, (int, float, np.number)) \
            or not (np.isfinite(t_final) and t_final > 0):
        raise ValueError(f"t_final must be a positive finite number; received {t_final!r}")
    t = np.linspace(0.0, float(t_final), 5) if t_eval is None else np.asarray(t_eval, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0) or t[0] < 0 or t[-1] > t_final:
        raise ValueError(f"t_eval must be a strictly increasing 1-d array in [0, t_final = {t_final}]; "
                         f"received {t_eval!r}")
    return t


def _index(times, t):
    """Index of each ``t`` in ``times`` (exact match: the integrators land on t_eval), -1 if absent."""
    out = np.full(len(t), -1)
    for k, s in enumerate(t):
        hit = np.nonzero(times == s)[0]
        out[k] = hit[0] if hit.size else -1
    return out


def paired_run(heads, rho_lm0, n_particles, t_final, t_eval=None, lmax=31, *, sampling="iid", seed=None,
               nu=0.0, particle_sums="auto", particle_method="dopri5", particle_dt=None, particle_rtol=1e-8,
               particle_atol=1e-10, spectral_tol=1e-12, pde_method="dopri5", pde_dt=None, pde_rtol=1e-8,
               pde_atol=1e-12, monitor=True, tail_tol=1e-3, negative_tol=1e-4, transport_grid=None,
               w2_method="auto", metric="geodesic", negative="drop", w2_options=None) -> PairedResult:
    """Run particles and the PDE from the same density and compare them by W2.

    Parameters
    ----------
    heads : sequence of Head
        Heads of dimension 3 (shared by both runs).
    rho_lm0 : ndarray, shape (nalm,), or callable
        Initial coefficients for ``lmax``, or ``builder(grid) -> rho_lm`` called with the PDE's
        grid (e.g. ``lambda g: densities.vmf_mixture_density(g, mus, kappas, floor=0.2)``).
    n_particles : int
        Number of particles (>= 2), drawn by :func:`meanfield.densities.sample_particles`.
    t_final : float
    t_eval : array_like, shape (T,), optional
        Increasing times in ``[0, t_final]`` (default 5 equispaced).
    lmax : int
        Degree of the PDE.
    sampling : {"iid", "stratified"}
    seed : int, optional
        Seed of the sampling (and, by default, of sliced W2 projections).
    nu : float
        Must be 0: the particle system is noiseless, so it is paired with the noiseless PDE.
    particle_sums : {"auto", "direct", "spectral"}
        ``"auto"``: spectral when every head is zonal, else direct.
    particle_method, particle_dt, particle_rtol, particle_atol
        Particle integrator settings (:func:`meanfield.integrate.integrate`).
    spectral_tol : float
        Accuracy of the spectral sums (:class:`meanfield.fastsum.SpectralSum` ``tolerance``).
    pde_method, pde_dt, pde_rtol, pde_atol, monitor, tail_tol, negative_tol
        Passed to :func:`meanfield.solve_continuum`.
    transport_grid : SphereGrid, optional
        Carries the density in W2 (:func:`density_measure`); default the PDE's quadrature grid.
    w2_method, metric : str
        Passed to :func:`meanfield.transport.w2_particles_density`.
    negative : {"drop", "error"}
        Negative density weights: dropped and reported in ``w2_negative_mass``, or an error.
    w2_options : dict, optional
        More keywords for :func:`meanfield.transport.w2_distance` (``max_exact``,
        ``n_projections``, ``seed``, ``reg``); ``seed`` defaults to ``seed``.

    Returns
    -------
    PairedResult
    """
    if isinstance(n_particles, bool) or not isinstance(n_particles, (int, np.integer)) or n_particles < 2:
        raise ValueError(f"n_particles must be an integer >= 2; received {n_particles!r}")
    _choice("sampling", sampling, SAMPLINGS)
    _choice("particle_sums", particle_sums, PARTICLE_SUMS)
    _choice("negative", negative, ("error", "drop"))
    _choice("metric", metric, transport.METRICS)
    _choice("w2_method", w2_method, transport.METHODS)
    if nu != 0:
        raise ValueError(f"nu must be 0: the particle system has no noise, so only the noiseless PDE is its "
                         f"mean-field limit; received nu = {nu!r}")
    t = _times(t_final, t_eval)
    w2_options = dict(w2_options or {})
    w2_options.setdefault("seed", seed)
    pde = ContinuumPDE(heads, lmax)
    rho0 = rho_lm0(pde.grid) if callable(rho_lm0) else rho_lm0
    rho0 = check_density(pde.grid, rho0, "rho_lm0")
    if particle_sums == "auto":
        particle_sums = "spectral" if spectral_supported(pde.heads) is None else "direct"
    timings = {}

    tic = time.perf_counter()
    X0 = sample_particles(pde.grid, rho0, int(n_particles), method=sampling, seed=seed)
    timings["sampling"] = time.perf_counter() - tic

    tic = time.perf_counter()
    if particle_sums == "spectral":
        ss = SpectralSum(pde.heads, tolerance=spectral_tol)
        w = np.full(int(n_particles), 1.0 / n_particles)
        ptraj = integrate(lambda s, y: ss.velocity(y, w), X0, (0.0, float(t_final)), t_eval=t,
                          method=particle_method, dt=particle_dt, rtol=particle_rtol, atol=particle_atol,
                          retraction=retract_sphere, observe=particle_observer(pde.heads, "spectral", ss),
                          progress=False)
        spectral_lmax = ss.lmax
    else:
        ptraj = solve_particles(ParticleSystem(pde.heads), X0, t_final, t_eval=t, method=particle_method,
                                dt=particle_dt, rtol=particle_rtol, atol=particle_atol,
                                observe=particle_observer(pde.heads, "direct"), progress=False)
        spectral_lmax = None
    timings["particles"] = time.perf_counter() - tic

    tic = time.perf_counter()
    qtraj = solve_continuum(pde, rho0, t_final, t_eval=t, method=pde_method, dt=pde_dt, rtol=pde_rtol,
                            atol=pde_atol, monitor=monitor, tail_tol=tail_tol, negative_tol=negative_tol,
                            progress=False)
    timings["pde"] = time.perf_counter() - tic
    coeffs = np.stack([pde.coefficients(y).copy() for y in qtraj.y])

    tic = time.perf_counter()
    ip, iq = _index(ptraj.t, t), _index(qtraj.t, t)
    w2 = np.full(t.size, np.nan)
    neg = np.full(t.size, np.nan)
    methods, infos = [""] * t.size, [{}] * t.size
    for k in range(t.size):
        if ip[k] < 0 or iq[k] < 0:
            continue
        nodes, weights = density_measure(pde, coeffs[iq[k]], transport_grid)
        res = transport.w2_particles_density(ptraj.y[ip[k]], nodes, weights, negative=negative, metric=metric,
                                             method=w2_method, **w2_options)
        w2[k], neg[k], methods[k], infos[k] = res.distance, res.negative_mass + 0.0, res.method, res.info
    timings["w2"] = time.perf_counter() - tic

    tg = pde.grid if transport_grid is None else transport_grid
    config = {"heads": [h.to_dict() for h in pde.heads], "n_particles": int(n_particles), "t_final": float(t_final),
              "t_eval": t.tolist(), "lmax": int(lmax), "sampling": sampling, "seed": seed, "nu": 0.0,
              "particle_sums": particle_sums, "spectral_lmax": spectral_lmax, "spectral_tol": spectral_tol,
              "particle_method": ptraj.method, "particle_nfev": ptraj.nfev, "pde_method": qtraj.method,
              "pde_nfev": qtraj.nfev, "tail_tol": tail_tol, "negative_tol": negative_tol, "monitor": monitor,
              "transport_grid": {"lmax": tg.lmax, "nlat": tg.nlat, "nlon": tg.nlon, "nodes": tg.nlat * tg.nlon},
              "w2_method": w2_method, "metric": metric, "negative": negative,
              "w2_options": {k: v for k, v in w2_options.items()}, "timings": timings}
    return PairedResult(times=t, w2=w2, w2_methods=tuple(methods), w2_negative_mass=neg, w2_info=tuple(infos),
                        particle_times=ptraj.t, particles=dict(ptraj.observables), particle_states=ptraj.y,
                        pde_times=qtraj.t, pde=dict(qtraj.observables), pde_coefficients=coeffs,
                        pde_status=qtraj.status, pde_message=qtraj.message, pde_t_stop=qtraj.t_final,
                        particle_status=ptraj.status, particle_message=ptraj.message, config=config)
