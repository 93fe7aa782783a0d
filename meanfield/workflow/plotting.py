"""Figures of a run dataset (:mod:`meanfield.workflow.results` schema): Datasets in, Figures out.

The only module of the package that imports matplotlib.  Figures are built with
:class:`matplotlib.figure.Figure` (no pyplot state); the Agg backend is selected when no display
is available.

* :func:`density_maps` -- Mollweide maps of the density with the particles on top
* :func:`orthographic_views` -- the density and the particles seen from one direction
* :func:`energy_curves` -- energy, dissipation, attention and Boltzmann entropies of both runs
* :func:`w2_curve` -- W2(particles, PDE) over time
* :func:`growth_rate_spectrum` -- ``sigma_l`` of the uniform state (:func:`meanfield.analysis.stability.growth_rate`)
* :func:`save_animation` -- a GIF of density and particles over time
* :func:`save_figures` -- all of the above into a folder (what ``meanfield plot`` calls)
* :func:`phase_diagram_figure`, :func:`bifurcation_figure`, :func:`transition_map_figure` -- the figures of
  ``meanfield phase-diagram`` and ``meanfield equilibria`` (branches; the (d, beta) map)
* :func:`sweep_figure` -- the final energy and W2 of each point of a ``meanfield sweep``
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import matplotlib

if not os.environ.get("MPLBACKEND") and (sys.platform.startswith("linux") and not os.environ.get("DISPLAY")
                                         and not os.environ.get("WAYLAND_DISPLAY")):
    matplotlib.use("Agg")

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.animation import PillowWriter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ..analysis import stability  # noqa: E402
from ..analysis.ensembles import CLUSTER_THRESHOLD, PAIR_THRESHOLD  # noqa: E402
from ..core import validate  # noqa: E402
from ..core.kernels import KERNELS  # noqa: E402
from ..core.sphere import SphereGrid  # noqa: E402
from .results import density_coefficients  # noqa: E402

__all__ = ["density_maps", "orthographic_views", "energy_curves", "w2_curve", "growth_rate_spectrum",
           "save_animation", "save_figures", "phase_diagram_figure", "bifurcation_figure",
           "transition_map_figure", "sweep_figure"]

CMAP = "viridis"
PDE_STYLE = dict(color="C0", lw=2)
PARTICLE_STYLE = dict(color="C3", lw=1.5, ls="--", marker=".", ms=4)


def _config(ds):
    from .inputs import parse_json

    return parse_json(ds.attrs["config"], "the dataset's 'config' attribute")


def title_line(ds: xr.Dataset) -> str:
    """One line with the run's parameters (for titles)."""
    cfg = _config(ds)
    heads = cfg["heads"]
    lam = ", ".join(f"{h['lam']:g}" if "lam" in h else "general" for h in heads)
    beta = ", ".join(f"{h['beta']:g}" for h in heads)
    kinds = sorted({f"{h['kernel']}/{h['normalization']}" for h in heads})
    return (f"{len(heads)} head(s): lambda = ({lam}), beta = ({beta}), {', '.join(kinds)}; "
            f"PDE lmax = {cfg['pde']['lmax']}; n = {ds.sizes['particle']} particles; seed {ds.attrs['seed']}")


def _reached(ds):
    """Time indices where both the PDE and the particles have values."""
    ok = np.isfinite(ds["pde_energy"].values) & np.all(np.isfinite(ds["X"].values), axis=(1, 2))
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        raise ValueError("the dataset has no time at which both the PDE and the particles have values")
    return idx


def _default_times(ds, count=3):
    idx = _reached(ds)
    return sorted({int(idx[0]), int(idx[len(idx) // 2]), int(idx[-1])})[:count]


def _lonlat(X):
    """Longitude in (-pi, pi] and latitude in [-pi/2, pi/2] of unit vectors (..., 3), radians."""
    return np.arctan2(X[..., 1], X[..., 0]), np.arcsin(np.clip(X[..., 2], -1.0, 1.0))


def _mollweide(ax, ds, k, vmin, vmax, particles=True):
    lon = np.radians((ds.lon.values + 180.0) % 360.0 - 180.0)
    order = np.argsort(lon)
    lat = np.radians(ds.lat.values)
    up = np.argsort(lat)
    rho = ds["rho"].values[k][up][:, order]
    mesh = ax.pcolormesh(lon[order], lat[up], rho, shading="nearest", cmap=CMAP, vmin=vmin, vmax=vmax,
                         rasterized=True)
    if particles:
        plon, plat = _lonlat(ds["X"].values[k])
        ax.scatter(plon, plat, s=1.5, c="white", edgecolors="none", alpha=0.8)
    ax.grid(True, color="0.7", lw=0.4, alpha=0.6)
    ax.set_xticklabels([])                 # longitude labels would sit on the data; lines every 30 deg
    ax.tick_params(labelsize=7, colors="0.3")
    ax.set_title(f"t = {ds.time.values[k]:.3g}", fontsize=11)
    return mesh


def density_maps(ds: xr.Dataset, times=None) -> Figure:
    """Mollweide maps of ``rho`` (white dots: the particles) at up to three time indices.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:mod:`meanfield.workflow.results`).
    times : sequence of int, optional
        Time indices (default: up to three spread over the reached times).

    Returns
    -------
    matplotlib.figure.Figure
    """
    times = _default_times(ds) if times is None else list(times)
    vals = ds["rho"].values[times]
    vmin, vmax = min(0.0, float(np.nanmin(vals))), float(np.nanmax(vals))
    fig = Figure(figsize=(5.2 * len(times), 3.9), layout="constrained")
    axes = [fig.add_subplot(1, len(times), i + 1, projection="mollweide") for i in range(len(times))]
    for ax, k in zip(axes, times):
        mesh = _mollweide(ax, ds, k, vmin, vmax)
    fig.colorbar(mesh, ax=axes, shrink=0.75, label="density rho (per steradian)")
    fig.suptitle(f"Density on S^2 (Mollweide: longitude 0 at the centre, east to the right, grid every 30 deg), "
                 f"particles in white\n{title_line(ds)}",
                 fontsize=10)
    return fig


def _frame(center_lon, center_lat):
    lo, la = np.radians(center_lon), np.radians(center_lat)
    c = np.array([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)])
    east = np.array([-np.sin(lo), np.cos(lo), 0.0])
    return east, np.cross(c, east), c


def _graticule(ax, basis):
    e1, e2, c = basis
    s = np.linspace(0, 2 * np.pi, 361)
    curves = [np.stack([np.cos(la) * np.cos(s), np.cos(la) * np.sin(s), np.full_like(s, np.sin(la))], -1)
              for la in np.radians([-60, -30, 0, 30, 60])]
    t = np.linspace(-np.pi / 2, np.pi / 2, 181)
    curves += [np.stack([np.cos(t) * np.cos(lo), np.cos(t) * np.sin(lo), np.sin(t)], -1)
               for lo in np.radians(np.arange(0, 360, 30))]
    for P in curves:
        u, v = P @ e1, P @ e2
        u[P @ c < 0] = np.nan
        ax.plot(u, v, color="0.6", lw=0.4, alpha=0.7)
    ax.add_patch(matplotlib.patches.Circle((0, 0), 1.0, fill=False, color="0.3", lw=0.8))
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def orthographic_views(ds: xr.Dataset, times=None, center=(20.0, 25.0), resolution=220) -> Figure:
    """Orthographic views from longitude/latitude ``center`` (degrees): density (left), particles (right).

    The density is evaluated exactly from its coefficients; only the visible hemisphere is drawn
    (particles on the far side are hidden).  One row per time index (default: first and last).
    ``resolution`` (an integer >= 2) pixels across each disc.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:mod:`meanfield.workflow.results`).
    times : sequence of int, optional
        Time indices.
    center : (float, float)
        Longitude and latitude of the view, degrees.
    resolution : int
        Pixels across each disc, ``>= 2``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        ``center`` not two finite numbers, or ``resolution`` below 2.
    """
    validate.real_array("center", center, (2,))
    validate.integer("resolution", resolution, 2)
    idx = _reached(ds)
    times = sorted({int(idx[0]), int(idx[-1])}) if times is None else list(times)
    basis = _frame(*center)
    u = np.linspace(-1, 1, resolution)
    U, V = np.meshgrid(u, u)
    inside = U**2 + V**2 < 1
    W = np.sqrt(np.clip(1 - U**2 - V**2, 0, None))
    P = U[..., None] * basis[0] + V[..., None] * basis[1] + W[..., None] * basis[2]
    grid = SphereGrid(ds.sizes["l"] - 1)
    images = []
    for k in times:
        img = np.full(U.shape, np.nan)
        img[inside] = grid.evaluate(density_coefficients(ds, k), P[inside])
        images.append(img)
    vmax = max(float(np.nanmax(im)) for im in images)
    vmin = min(0.0, min(float(np.nanmin(im)) for im in images))
    fig = Figure(figsize=(8.2, 4.0 * len(times)), layout="constrained")
    axes = fig.subplots(len(times), 2, squeeze=False)
    for row, (k, img) in enumerate(zip(times, images)):
        t = ds.time.values[k]
        im = axes[row, 0].imshow(img, origin="lower", extent=(-1, 1, -1, 1), cmap=CMAP, vmin=vmin, vmax=vmax)
        _graticule(axes[row, 0], basis)
        axes[row, 0].set_title(f"density rho, t = {t:.3g}", fontsize=10)
        X = ds["X"].values[k]
        front = X @ basis[2] > 0
        axes[row, 1].scatter(X[front] @ basis[0], X[front] @ basis[1], s=3, c="C3", edgecolors="none")
        _graticule(axes[row, 1], basis)
        axes[row, 1].set_title(f"particles (visible side: {int(front.sum())} of {len(X)}), t = {t:.3g}",
                               fontsize=10)
    fig.colorbar(im, ax=axes[:, 0], shrink=0.8, label="density rho (per steradian)")
    fig.suptitle(f"Orthographic view from longitude {center[0]:g} deg, latitude {center[1]:g} deg; "
                 f"graticule every 30 deg\n{title_line(ds)}", fontsize=9)
    return fig


def _pair(ax, ds, name, label, head=None):
    t = ds.time.values
    for prefix, style, who in (("pde_", PDE_STYLE, "PDE"), ("particle_", PARTICLE_STYLE, "particles")):
        var = ds[prefix + name]
        if head is None:
            ax.plot(t, var.values, label=who, **style)
        else:
            for h in range(ds.sizes["head"]):
                st = dict(style, alpha=1.0 - 0.45 * h)
                ax.plot(t, var.values[:, h], label=f"{who}, head {h} (lambda {ds.head_lambda.values[h]:g})", **st)
    ax.set_xlabel("time t")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def energy_curves(ds: xr.Dataset) -> Figure:
    """Energy, dissipation, attention entropy per head (both runs) and the PDE's Boltzmann entropy.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:mod:`meanfield.workflow.results`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    ax = fig.subplots(2, 2)
    _pair(ax[0, 0], ds, "energy", "energy E = sum_h E_h")
    ax[0, 0].set_title("Energy (non-decreasing for mean, value-aligned heads)", fontsize=10)
    _pair(ax[0, 1], ds, "dissipation", "dissipation int |X|^2 rho")
    ax[0, 1].set_title("Dissipation (= dE/dt for mean, value-aligned heads)", fontsize=10)
    _pair(ax[1, 0], ds, "entropy", "attention entropy (relative, <= 0)", head=True)
    ax[1, 0].set_title("Attention entropy: PDE int H_h rho vs particles mean(H_i^h) - log n", fontsize=10)
    t = ds.time.values
    ax[1, 1].plot(t, ds["pde_boltzmann_entropy"].values, **PDE_STYLE, label="PDE")
    ax[1, 1].axhline(np.log(4 * np.pi), color="0.5", ls=":", label="uniform density: log(4 pi)")
    ax[1, 1].set_xlabel("time t")
    ax[1, 1].set_ylabel("Boltzmann entropy -int rho log rho")
    ax[1, 1].set_title("Boltzmann entropy of the density (PDE only)", fontsize=10)
    ax[1, 1].grid(True, alpha=0.3)
    ax[1, 1].legend(fontsize=7)
    stop = ds.attrs.get("pde_message", "")
    fig.suptitle(f"Energy and entropy, PDE (solid) vs particles (dashed)\n{title_line(ds)}\nPDE: {stop}", fontsize=9)
    return fig


def w2_curve(ds: xr.Dataset) -> Figure:
    """W2 between the particles and the density over time, with its t = 0 (sampling) level.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:mod:`meanfield.workflow.results`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    t, w2 = ds.time.values, ds["w2"].values
    ax.plot(t, w2, "o-", color="C2", label="W2(particles, PDE density on GL nodes)")
    if np.isfinite(w2[0]):
        ax.axhline(w2[0], color="0.5", ls=":", label=f"t = 0 level (sampling error of n = {ds.sizes['particle']})")
    negs = np.abs(ds["w2_negative_mass"].values)
    neg = float(np.nanmax(negs)) if np.any(np.isfinite(negs)) else 0.0
    ax.set_xlabel("time t")
    ax.set_ylabel("W2 (geodesic distance, radians)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Particles vs continuum: 2-Wasserstein distance ({ds.attrs.get('w2_method', '')}; "
                 f"negative density mass dropped: max {neg:.1e})\n{title_line(ds)}", fontsize=8)
    return fig


def growth_rate_spectrum(ds: xr.Dataset) -> Figure:
    """Linear growth rates ``sigma_l`` of the uniform state for the run's heads, l = 1..lmax.

    Rates add over heads (the linearization is a sum of per-head terms); heads whose kernel has no
    closed form ``"growth_rate"`` in :mod:`meanfield.analysis.stability` (ReLU, sigmoid) are left out (said in
    the title).

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:mod:`meanfield.workflow.results`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    cfg = _config(ds)
    lmax = cfg["pde"]["lmax"]
    ell = np.arange(1, lmax + 1)
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    total, skipped = np.zeros(ell.size), []
    general = []
    for h, head in enumerate(cfg["heads"]):
        if "lam" not in head:                 # M and V given: the closed forms are those of zonal heads
            general.append(h)
            continue
        if "growth_rate" not in KERNELS[head["kernel"]].closed_forms:
            skipped.append(h)
            continue
        s = stability.growth_rate(ell, [head["lam"]], head["beta"], head["normalization"])
        total += s
        ax.plot(ell, s, "o-", ms=3, lw=1, label=f"head {h}: lambda {head['lam']:g}, beta {head['beta']:g}, "
                f"{head['normalization']}")
    shown = lmax
    if len(skipped) + len(general) < len(cfg["heads"]):
        ax.plot(ell, total, "s-", color="k", ms=4, lw=1.5, label="sum over heads")
        best = int(ell[np.argmax(total)])
        big = np.flatnonzero(np.abs(total) >= 1e-3 * np.abs(total).max())
        shown = int(min(lmax, max(8, ell[big[-1]] + 2)))
        ax.axvline(best, color="0.5", ls=":", label=f"most unstable degree l* = {best}")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no heads with closed-form growth rates (zonal exp heads)", ha="center",
                transform=ax.transAxes)
    ax.set_xlim(0.5, shown + 0.5)
    ax.axhline(0, color="0.3", lw=0.6)
    ax.set_xlabel("spherical-harmonic degree l")
    ax.set_ylabel("growth rate sigma_l (1 / time)")
    ax.grid(True, alpha=0.3)
    note = f"; ReLU heads {skipped} left out (no closed form)" if skipped else ""
    if general:
        note += f"; general heads {general} left out (closed forms for zonal heads only)"
    if shown < lmax:
        note += f"; degrees {shown + 1}..{lmax} (below 1e-3 of the peak) not shown"
    ax.set_title(f"Linear growth rates of the uniform state (nu = 0){note}\n{title_line(ds)}", fontsize=8)
    return fig


def save_animation(ds: xr.Dataset, path, fps=5, dpi=72) -> Path:
    """GIF (PillowWriter) of the Mollweide density with the particles, one frame per reached time.

    ``fps`` frames per second and ``dpi`` dots per inch: positive finite numbers.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:mod:`meanfield.workflow.results`).
    path : str or path-like
        The GIF file.
    fps, dpi : float
        Positive finite numbers.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        ``fps`` or ``dpi`` not positive and finite.
    """
    validate.real("fps", fps, positive=True)
    validate.real("dpi", dpi, positive=True)
    idx = _reached(ds)
    vals = ds["rho"].values[idx]
    vmin, vmax = min(0.0, float(np.nanmin(vals))), float(np.nanmax(vals))
    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    ax = fig.add_subplot(projection="mollweide")
    mesh = _mollweide(ax, ds, idx[0], vmin, vmax)
    fig.colorbar(mesh, ax=ax, shrink=0.7, label="density rho (per steradian)")
    fig.suptitle(title_line(ds), fontsize=7)
    path = Path(path)
    writer = PillowWriter(fps=fps)
    with writer.saving(fig, str(path), dpi):
        for k in idx:
            for artist in list(ax.collections):
                artist.remove()
            _mollweide(ax, ds, k, vmin, vmax)
            ax.set_title(f"density and particles, t = {ds.time.values[k]:.3g}", fontsize=10)
            writer.grab_frame()
    return path


FIGURES = {"density_maps.png": density_maps, "orthographic.png": orthographic_views,
           "energy_entropy.png": energy_curves, "w2.png": w2_curve, "growth_rates.png": growth_rate_spectrum}


def save_figures(ds: xr.Dataset, out_dir, dpi=110, figures=True, animation=True) -> list[Path]:
    """Write every figure of :data:`FIGURES` (PNG) and the animation (``animation.gif``) into ``out_dir``.

    ``dpi`` (a positive finite number) applies to the PNG figures; ``figures`` and ``animation``
    (True or False) choose what is written.

    Parameters
    ----------
    ds : xarray.Dataset
        A run dataset (:mod:`meanfield.workflow.results`).
    out_dir : str or path-like
        The folder (created).
    dpi : float
        Positive finite number.
    figures, animation : bool
        What is written.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        ``dpi`` not positive and finite, or ``figures`` / ``animation`` not booleans.
    """
    validate.real("dpi", dpi, positive=True)
    validate.boolean("figures", figures)
    validate.boolean("animation", animation)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if figures:
        for name, make in FIGURES.items():
            fig = make(ds)
            fig.savefig(out / name, dpi=dpi)
            paths.append(out / name)
    if animation:
        paths.append(save_animation(ds, out / "animation.gif"))
    return paths


def phase_diagram_figure(ds: xr.Dataset, pair_threshold: float = PAIR_THRESHOLD,
                         cluster_threshold: float = CLUSTER_THRESHOLD) -> Figure:
    """Colour maps over (t, beta) of a phase-diagram dataset (:mod:`meanfield.workflow.phase_diagram`), with
    the equiangular clustering curve ``t*(beta)`` of the reduced ODE drawn where it exists.  The thresholds
    (those the dataset was measured with) are written into the titles and colour-bar labels.

    Parameters
    ----------
    ds : xarray.Dataset
        A phase-diagram dataset.
    pair_threshold, cluster_threshold : float
        In ``[-1, 1]``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        A threshold outside ``[-1, 1]``.
    """
    pair_threshold = validate.real("pair_threshold", pair_threshold, -1, 1)
    cluster_threshold = validate.real("cluster_threshold", cluster_threshold, -1, 1)
    p, c = f"{pair_threshold:g}", f"{cluster_threshold:g}"
    names = [("one_cluster", f"fraction of runs in one cluster (every pair <x_i, x_j> > {p})",
              f"one cluster (> {p})"),
             ("pair_density", f"pair density: fraction of pairs with <x_i, x_j> > {p}", f"pair density (> {p})"),
             ("median_clusters", f"median cluster count (rank of [<x_i, x_j> > {c}])", f"clusters (> {c})"),
             ("mean_gram_rank", "mean Gram rank", "Gram rank")]
    fig = Figure(figsize=(11, 8), layout="constrained")
    axes = fig.subplots(2, 2, sharex=True, sharey=True)
    t, beta = ds["t"].values, ds["beta"].values
    curve = ds["equiangular_time"].values if "equiangular_time" in ds else np.full(beta.shape, np.nan)
    for ax, (name, label, short) in zip(axes.flat, names):
        pc = ax.pcolormesh(t, beta, ds[name].values, cmap="RdBu_r", shading="nearest", rasterized=True)
        fig.colorbar(pc, ax=ax, label=short)
        ok = np.isfinite(curve) & (curve <= t[-1])
        if ok.any():
            ax.plot(curve[ok], beta[ok], color="k", lw=1.5, ls="--", label="equiangular t*(beta)")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_title(label, fontsize=10)
    for ax in axes[-1]:
        ax.set_xlabel("t")
    for ax in axes[:, 0]:
        ax.set_ylabel(r"$\beta$")
    return fig


_SPECIAL_STYLE = {"fold": dict(marker="^", color="k", label="fold"),
                  "branch_point": dict(marker="o", color="C3", label="branch point"),
                  "maxwell": dict(marker="*", color="C2", ms=12, label="Maxwell point (G = G_uniform)")}


def bifurcation_figure(ds: xr.Dataset) -> Figure:
    """The branches of an equilibria dataset (:mod:`meanfield.workflow.equilibria_job`): the order parameter and
    ``G - G_uniform`` against the parameter (general heads: ``|int x rho|`` and ``G``), stable parts solid and
    unstable ones dashed, folds, branch points and Maxwell points marked.

    Parameters
    ----------
    ds : xarray.Dataset
        An equilibria dataset.

    Returns
    -------
    matplotlib.figure.Figure
    """
    par = ds.attrs["parameter"]
    general = ds.attrs.get("heads") == "general"        # general heads: no uniform branch, G itself
    gap = "free_energy" if general else "free_energy_gap"
    has_gap = bool(np.isfinite(ds[gap].values).any())
    fig = Figure(figsize=(11 if has_gap else 6, 4.5), layout="constrained")
    axes = fig.subplots(1, 2 if has_gap else 1, sharex=True, squeeze=False)[0]
    names = [("order_parameter", r"order parameter $|\int x \rho|$") if general else
             ("amplitude", r"amplitude $|b_l| / Q_l(1)$ (l = 1: order parameter $|\langle x\rangle|$)")]
    names += [(gap, r"free energy $G$" if general else r"$G - G_{uniform}$")] if has_gap else []
    for ax, (name, label) in zip(axes, names):
        for b in ds.branch.values:
            n = int(ds.branch_n_points[b])
            st = ds["sphere_stable" if "sphere_stable" in ds else "stable"].values[b, :n]   # the full sphere's
            x, y = ds["parameter"].values[b, :n], ds[name].values[b, :n]
            color = f"C{b % 10}"
            if general:
                lab = str(ds.branch_kind.values[b]) + ("" if int(ds.branch_side[b]) == 0 else
                                                       f" at nu = {float(ds.branch_parent_parameter[b]):.4g} "
                                                       f"({'+' if int(ds.branch_side[b]) > 0 else '-'})")
            else:
                deg = int(ds.branch_degree[b])
                lab = "uniform" if deg == 0 else f"degree {deg}" + (" (b < 0)" if int(ds.branch_side[b]) < 0 else "")
            start, labelled = 0, False
            for k in range(1, n + 1):               # runs of equal stability, joined at their ends
                if k == n or st[k] != st[start]:
                    seg = slice(start, min(k + 1, n))
                    mark = not labelled and (st[start] == 1 or not (st == 1).any())   # a stable run names it
                    ax.plot(x[seg], y[seg], color=color, ls="-" if st[start] == 1 else (":" if st[start] < 0
                                                                                          else "--"), lw=1.8,
                            label=lab if mark else None)
                    labelled |= mark
                    start = k
        seen = set()
        for s in ds.special.values:
            kind = str(ds.special_kind.values[s])
            value = float(ds[f"special_{name}"].values[s])
            style = dict(_SPECIAL_STYLE[kind])
            if kind in seen:
                style.pop("label")
            seen.add(kind)
            ax.plot([float(ds.special_parameter[s])], [value], ls="none", ms=style.pop("ms", 8), **style)
        if name == "free_energy_gap":
            ax.axhline(0.0, color="0.6", lw=0.8)
        ax.set_xlabel(r"$\nu$" if par == "nu" else r"$\beta$")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8, loc="best")
    cfg = _config(ds)
    title = (f"d = {ds.attrs['d']}, lmax {ds.attrs['lmax']}; " + ", ".join(
        ("general M, V" if "M" in h else f"lambda {h.get('lam', 1.0):g}") + (f" beta {h['beta']:.4g}" if "beta" in h
                                                                             else "") + f" {h['normalization']}"
        for h in cfg["heads"]))
    if "transition" in ds.attrs:
        title += f"; {ds.attrs['transition']} transition"
    fig.suptitle(title + "\nsolid: stable, dashed: unstable", fontsize=9)
    return fig


def transition_map_figure(ds: xr.Dataset) -> Figure:
    """The (d, beta) map of :mod:`meanfield.workflow.transition_map`: the transition type and ``nu_fold / nu_#``
    over the grid (failed cells blank).

    Parameters
    ----------
    ds : xarray.Dataset
        A transition-map dataset.

    Returns
    -------
    matplotlib.figure.Figure
    """
    y = ds["d"].values
    xname = "beta_ratio" if "beta_ratio" in ds.dims else "beta"
    x = ds[xname].values
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    kind = ds["discontinuous"].values.astype(float)
    kind[kind < 0] = np.nan
    xi, yi = np.arange(x.size), np.arange(y.size)
    pc = ax1.pcolormesh(xi, yi, kind, cmap="coolwarm", vmin=0, vmax=1, shading="nearest")
    cb = fig.colorbar(pc, ax=ax1, ticks=[0, 1])
    cb.ax.set_yticklabels(["continuous", "discontinuous"])
    ratio = ds["nu_fold"].values / ds["nu_sharp"].values
    pc = ax2.pcolormesh(xi, yi, ratio, cmap="viridis", shading="nearest")
    fig.colorbar(pc, ax=ax2, label=r"$\nu_{fold} / \nu_\#$")
    for i in yi:
        for j in xi:
            if np.isfinite(ratio[i, j]):
                ax2.text(j, i, f"{ratio[i, j]:.4g}", ha="center", va="center", fontsize=8, color="w")
    for ax, title in ((ax1, "transition type"), (ax2, "window of hysteresis")):
        ax.set_xticks(xi, [f"{v:.4g}" for v in x])
        ax.set_yticks(yi, [str(int(v)) for v in y])
        ax.set_xlabel(r"$\beta / \beta_*^{(d)}$" if xname == "beta_ratio" else r"$\beta$")
        ax.set_title(title, fontsize=10)
    ax1.set_ylabel("d")
    return fig


def _last_finite(values):
    """The last finite value of each row of ``values`` (points x times; NaN for a row without one)."""
    ok = np.isfinite(values)
    last = values.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
    return np.where(ok.any(axis=1), values[np.arange(values.shape[0]), last], np.nan)


def sweep_figure(ds: xr.Dataset) -> Figure:
    """The final energy (PDE solid, particles dashed) and the final W2 of each point of a sweep against its first
    swept parameter, one line per value of the others (what ``meanfield sweep`` writes as ``sweep.png``).

    A point's final value is its last finite one in time (a point that stopped early counts where it stopped).
    Numeric values of the first parameter are its axis; other values (strings, booleans, lists) are categories in
    the order of the points.

    Parameters
    ----------
    ds : xarray.Dataset
        A sweep (:func:`meanfield.workflow.sweep.load_sweep`, or its ``sweep.nc``): a grid with one dimension per
        swept key, or a list along ``point``, with the attribute ``sweep_parameters``.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        ``ds`` not a Dataset, or without ``sweep_parameters`` naming its coordinates.
    """
    if not isinstance(ds, xr.Dataset):
        raise ValueError(f"ds must be the xarray.Dataset of a sweep; received {type(ds).__name__}")
    try:
        keys = json.loads(ds.attrs["sweep_parameters"])
    except (KeyError, TypeError, ValueError):
        keys = None
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k in ds.coords for k in keys):
        raise ValueError(f"ds must be a sweep (meanfield.workflow.sweep.load_sweep) whose attribute sweep_parameters "
                         f"names its swept coordinates; received {ds.attrs.get('sweep_parameters')!r}")
    flat = ds if "point" in ds.dims else ds.stack(point=keys)          # one entry per point, grid or list
    params = {k: flat[k].values for k in keys}
    x = params[keys[0]]
    numeric = np.issubdtype(x.dtype, np.number) and not np.issubdtype(x.dtype, np.bool_)
    labels = list(dict.fromkeys(str(v) for v in x))
    pos = x.astype(float) if numeric else np.array([labels.index(str(v)) for v in x], float)
    groups = list(dict.fromkeys(tuple(str(params[k][i]) for k in keys[1:]) for i in range(x.size)))
    final = {name: _last_finite(flat[name].transpose("point", "time").values)
             for name in ("pde_energy", "particle_energy", "w2") if name in flat and flat[name].ndim == 2}
    fig = Figure(figsize=(11, 4.3), layout="constrained")
    ax_e, ax_w = fig.subplots(1, 2)
    for c, group in enumerate(groups):
        members = [i for i in range(x.size) if tuple(str(params[k][i]) for k in keys[1:]) == group]
        members.sort(key=lambda i: pos[i])
        label = ", ".join(f"{k} = {v}" for k, v in zip(keys[1:], group)) or None
        color = f"C{c % 10}"
        for name, ax, style in (("pde_energy", ax_e, dict(PDE_STYLE, marker="o")),
                                ("particle_energy", ax_e, dict(PARTICLE_STYLE, marker="s")),
                                ("w2", ax_w, dict(color="C2", lw=1.5, marker="o"))):
            if name in final:
                style = dict(style, color=color)
                ax.plot(pos[members], final[name][members], **style,
                        label=label if name in ("pde_energy", "w2") else None)
    for ax, ylabel, title in ((ax_e, "final energy E = sum_h E_h", "Energy at the end (PDE solid, particles dashed)"),
                              (ax_w, "final W2 (radians)", "W2(particles, PDE) at the end")):
        ax.set_xlabel(keys[0])
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        if not numeric:
            ax.set_xticks(np.arange(len(labels)), labels, fontsize=8)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    fig.suptitle(f"Sweep of {x.size} point{'s' * (x.size != 1)} over {', '.join(keys)}", fontsize=9)
    return fig
