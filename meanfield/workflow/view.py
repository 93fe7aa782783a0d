"""``meanfield view RESULT.nc``: one self-contained interactive HTML page of a results file (plotly, no server).

* A run dataset (``meanfield run``, ``meanfield run --extend``, a sweep's ``points/<id>.nc``): the tokens
  and the PDE density on a sphere that can be rotated, a time slider (and play button) moving both, and
  the energy, relative attention entropy and W2 curves beside it with a marker at the slider's time.
  A sweep point's page names its swept parameters (read from the sweep's ``index.json``).
* A phase diagram (``meanfield phase-diagram``): one heat map per measure over ``beta x t`` with the
  equiangular clustering curve; it has no tokens or density to animate, and the page says so.

The page embeds plotly.js (no CDN: it opens offline) and stays small: at most ``max_frames`` times
(evenly chosen, first and last kept), ``max_particles`` tokens (the same subset at every time) and the
density evaluated from the saved coefficients on a coarse grid (``nlat x 2 nlat`` Gauss-Legendre rings
plus the poles; the package's :class:`~meanfield.core.sphere.SphereGrid`), stored as float32 arrays.
Times the PDE did not reach (NaN in the dataset) show the tokens only, and the title says so.

:func:`write_view` writes atomically (a temporary file in the target folder, then rename): a failure
leaves no half-written page.  A file that is not a meanfield result, or a truncated one, raises
``ValueError`` naming the file and what is missing (``meanfield view`` exits 2).  Nothing of the file's
layout is trusted: its declared sizes are costed (:mod:`meanfield.core.cost`) from the NetCDF header before
anything is read, and the page (density grid, syntheses, page values) before it is built; a run dataset must
hold ``X`` as (time, particle, dim) with 3 components, ``rho_lm_real`` / ``rho_lm_imag`` as the (time, l, m)
table of :mod:`meanfield.workflow.results` (NaN, or 0, where ``m > l``) and a finite, non-decreasing ``time``; a
phase diagram its measures as (beta, t) over finite axes.  Each mismatch is a ``ValueError`` naming the
variable, the layout expected and what was received.  plotly is imported here only (lazily, when a page is
built).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

from ..core import cost, validate
from ..core.sphere import SphereGrid, estimate_grid
from . import results
from .phase_diagram import MEASURES as PHASE_MEASURES

__all__ = ["load_viewable", "build_figure", "write_view", "default_output", "MAX_FRAMES", "MAX_PARTICLES",
           "DENSITY_NLAT"]

MAX_FRAMES = 60
"""Default largest number of times on the slider."""
MAX_PARTICLES = 500
"""Default largest number of tokens drawn (a fixed, evenly spaced subset)."""
DENSITY_NLAT = 48
"""Gauss-Legendre rings of the density's display grid (``2 DENSITY_NLAT`` points per ring)."""
SYNTHESIS_SECONDS_PER_NODE_DEGREE = 2.5e-10
"""Seconds of one density synthesis per grid node and degree (measured 2.4e-10, 0.9e-10 and 0.5e-10 at
lmax = 256, 512 and 1024 on the 2-core development machine)."""
PAGE_BYTES_PER_VALUE = 100.0
"""Peak bytes per value shown on the page (plotly figure, its validation and the HTML text; measured with
tracemalloc: 78 at nlat = 200 and 400)."""
PAGE_SECONDS_PER_VALUE = 1e-6
"""Seconds of building the page per value shown (measured 4e-7 to 7e-7 under tracemalloc)."""


def _path(name, x) -> Path:
    """A file path argument: a str or os.PathLike (named ValueError otherwise)."""
    if isinstance(x, (bool, bytes)) or not isinstance(x, (str, os.PathLike)):
        raise ValueError(f"{name} must be a file path (str or os.PathLike); received {x!r}")
    return Path(x)


def _unreadable(path, err):
    return ValueError(f"{path} is not a readable NetCDF file (truncated or another format): "
                      f"{type(err).__name__}: {err}")


def _header(path):
    """``{variable: (dims, shape)}`` of a NetCDF file's root group, from its header (no data read)."""
    import netCDF4

    try:
        with netCDF4.Dataset(path, "r") as f:
            return {name: (tuple(v.dimensions), tuple(int(n) for n in v.shape)) for name, v in f.variables.items()}
    except Exception as err:                    # netCDF4/HDF5 report truncation as OSError, RuntimeError, ...
        raise _unreadable(path, err) from None


def _estimate_load(path, header) -> cost.Cost:
    """Peak memory of reading the file ``path`` of ``header`` (:func:`_header`): 8 bytes (float64 after
    decoding) per declared element; ``what`` names the largest variable, its dims and shape."""
    sizes = {name: float(np.prod(shape, dtype=float)) for name, (_, shape) in header.items()}
    big = max(sizes, key=sizes.get, default=None)
    what = f"meanfield view of results file {path}"
    if big is not None:
        what += f" ({big} of dims {header[big][0]} and shape {header[big][1]}, the largest of its {len(sizes)} variables)"
    return cost.Cost(what, 8.0 * sum(sizes.values()), 0.0,
                     f"{sum(sizes.values()):.3g} declared values read into memory as float64")


def _check_phase(where, ds):
    """Refuse a phase-diagram dataset whose measures are not (beta, t) over finite axes."""
    missing = [v for v in PHASE_MEASURES if v not in ds.variables]
    missing += [d for d in ("beta", "t") if d not in ds.dims or d not in ds.variables]
    if missing:
        raise ValueError(f"{where} is a truncated phase-diagram dataset: it lacks {missing}")
    results.check_dims(where, ds, {m: ("beta", "t") for m in PHASE_MEASURES})
    results.check_axis(where, ds, "t")
    results.check_axis(where, ds, "beta", ordered=False)


def load_viewable(path):
    """``(kind, dataset)`` of a results file: kind ``"run"`` or ``"phase_diagram"``.

    Raises ``ValueError`` naming the file and what is missing when it does not exist, is not a readable
    NetCDF file (e.g. truncated), is not a meanfield run or phase-diagram dataset, or holds a drawn variable
    in another layout (named, with the dims expected and received); the file's declared sizes are costed
    (:func:`_estimate_load`, :mod:`meanfield.core.cost`) before anything is read.

    Parameters
    ----------
    path : str or path-like
        A ``.nc`` file of meanfield run, sweep or phase-diagram.

    Returns
    -------
    kind : {"run", "phase_diagram"}
    dataset : xarray.Dataset

    Raises
    ------
    ValueError
        As above, or a file whose declared sizes are above the memory or time limit.
    """
    path = _path("path", path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (meanfield view takes a .nc file written by meanfield run, "
                         f"sweep or phase-diagram)")
    _estimate_load(path, _header(path)).check(fix="a results file of fewer times, tokens or a lower lmax")
    try:
        with xr.open_dataset(path, engine=results.ENGINE) as f:
            phase = f.attrs.get("kind") == "phase_diagram"
            ds = f.load() if phase else xr.Dataset(attrs=f.attrs)       # a run is read by results.load
    except Exception as err:                    # netCDF4/HDF5 report truncation as OSError, RuntimeError, ...
        raise _unreadable(path, err) from None
    if phase:
        _check_phase(f"results file {path}", ds)
        return "phase_diagram", ds
    if "schema_version" not in ds.attrs:
        raise ValueError(f"{path} is not a meanfield result: it has no 'schema_version' attribute (and no "
                         f"'kind' = 'phase_diagram'); meanfield view reads the files of meanfield run, sweep and "
                         f"phase-diagram")
    ds = results.load(path)                     # schema version and the run variables, named when missing
    results.check_run_layout(f"results file {path}", ds)
    return "run", ds


def default_output(path) -> Path:
    """``RESULT.nc`` -> ``RESULT.html`` beside it.

    Parameters
    ----------
    path : str or path-like
        The results file.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        ``path`` not a usable path.
    """
    return _path("path", path).with_suffix(".html")


def _pick(n, k):
    """At most ``k`` evenly spaced indices of ``range(n)``, first and last included."""
    if n <= k:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, k)).astype(int))


def _sweep_label(path):
    """The swept parameters of a sweep point ``.../points/<id>.nc`` (from ``../index.json``), or ''."""
    path = Path(path).resolve()
    index = path.parent.parent / "index.json"
    if path.parent.name != "points" or not index.is_file():
        return ""
    try:
        rows = json.loads(index.read_text())
    except (OSError, ValueError):
        return ""
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and Path(str(row.get("path", ""))).name == path.name:
            params = row.get("params") or {}
            return "sweep point " + ", ".join(f"{k} = {v}" for k, v in params.items())
    return ""


def _density_frames(ds, frames, nlat):
    """Sphere coordinates (3 arrays (nlat+2, nlon+1)) and the density at each frame (float32; None where the
    PDE did not reach), on GL rings plus the two poles, the first meridian repeated to close the seam.

    Above ``lmax = nlat - 1`` the density is evaluated on the degree's own grid and ``nlat`` of its rings
    (``2 nlat`` of its meridians) are shown: a display, not a resolution of the field."""
    lmax = ds.sizes["l"] - 1
    g_lat, g_lon = _density_grid(lmax, nlat)
    grid = SphereGrid(lmax, nlat=g_lat, nlon=g_lon)
    rows = _pick(grid.nlat, nlat)
    cols = _pick(grid.nlon, 2 * nlat)
    nodes = grid.nodes[np.ix_(rows, cols)]

    def close(a):                               # poles (the ring means) and the seam
        north, south = a[:1].mean(axis=(0, 1), keepdims=True), a[-1:].mean(axis=(0, 1), keepdims=True)
        a = np.concatenate([np.repeat(north, a.shape[1], axis=1), a, np.repeat(south, a.shape[1], axis=1)])
        return np.concatenate([a, a[:, :1]], axis=1)

    xyz = close(nodes)
    pole = np.array([0.0, 0.0, 1.0])
    xyz[0], xyz[-1] = pole, -pole               # the ring means are not unit vectors; the poles are
    values = []
    for k in frames:
        coeffs = results.density_coefficients(ds, int(k))
        if not np.all(np.isfinite(coeffs)):
            values.append(None)
            continue
        values.append(close(grid.synthesis(coeffs)[np.ix_(rows, cols)][..., None])[..., 0].astype(np.float32))
    return xyz[..., 0], xyz[..., 1], xyz[..., 2], values


def _series(ds, name):
    if name not in ds.variables:
        return None
    v = ds[name].values.astype(float)
    return np.nanmean(v, axis=1) if v.ndim == 2 and np.isfinite(v).any() else (v if v.ndim == 1 else None)


def _density_grid(lmax, nlat):
    """``(nlat, nlon)`` of the grid :func:`_density_frames` synthesizes on."""
    return max(nlat, lmax + 1), max(2 * nlat, 2 * lmax + 2)


def _estimate_page(ds, max_frames=MAX_FRAMES, max_particles=MAX_PARTICLES, nlat=DENSITY_NLAT) -> cost.Cost:
    """Peak memory and time of the page of the run dataset ``ds`` (sizes only): the dataset, the density's
    grid (:func:`~meanfield.core.sphere.estimate_grid`), one synthesis per shown time and the shown values."""
    lmax, T = ds.sizes["l"] - 1, ds.sizes["time"]
    frames, parts = min(T, max_frames), min(ds.sizes["particle"], max_particles)
    g_lat, g_lon = _density_grid(lmax, nlat)
    grid = estimate_grid(lmax, g_lat, g_lon)
    nodes = float(g_lat) * g_lon
    shown = frames * ((nlat + 2.0) * (2 * nlat + 1) + 3.0 * parts) + 4.0 * T
    return cost.Cost(f"meanfield view's page of {frames} of {T} times, {parts} tokens and the density of lmax = "
                     f"{lmax} (rho_lm_real of shape {ds['rho_lm_real'].shape}) on nlat = {nlat} rings",
                     float(ds.nbytes) + grid.bytes + 16.0 * nodes + 4.0 * T * parts + PAGE_BYTES_PER_VALUE * shown,
                     grid.seconds + frames * nodes * (lmax + 1) * SYNTHESIS_SECONDS_PER_NODE_DEGREE
                     + PAGE_SECONDS_PER_VALUE * shown,
                     f"a {g_lat} x {g_lon} synthesis grid and {shown:.3g} values on the page")


def _run_figure(ds, label, max_frames, max_particles, nlat):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    _estimate_page(ds, max_frames, max_particles, nlat).check(
        fix="a results file of lower lmax, or fewer frames (--frames, max_frames) or a smaller nlat")
    t = ds["time"].values.astype(float)
    frames = _pick(t.size, max_frames)
    parts = _pick(ds.sizes["particle"], max_particles)
    X = ds["X"].values[:, parts].astype(np.float32) * np.float32(1.012)    # just above the surface
    sx, sy, sz, rho = _density_frames(ds, frames, nlat)
    finite = [r for r in rho if r is not None]
    cmax = float(max(np.nanmax(r) for r in finite)) if finite else 1.0
    fig = make_subplots(rows=3, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.06, vertical_spacing=0.09,
                        specs=[[{"type": "scene", "rowspan": 3}, {"type": "xy"}], [None, {"type": "xy"}],
                               [None, {"type": "xy"}]],
                        subplot_titles=("tokens and PDE density", "interaction energy",
                                        "relative attention entropy (mean over heads)", "W2(particles, PDE), rad"))
    blank = np.zeros_like(sx, dtype=np.float32)

    def surface(k):
        return rho[k] if rho[k] is not None else blank

    fig.add_trace(go.Surface(x=sx.astype(np.float32), y=sy.astype(np.float32), z=sz.astype(np.float32),
                             surfacecolor=surface(0), cmin=0.0, cmax=cmax, colorscale="Viridis",
                             opacity=1.0 if rho[0] is not None else 0.25, name="PDE density",
                             colorbar=dict(title=dict(text="density (sr⁻¹)"), x=0.0, len=0.7),
                             hovertemplate="density %{surfacecolor:.3g}<extra></extra>"), row=1, col=1)

    def tokens(k):
        x = X[frames[k]]
        ok = np.isfinite(x).all(axis=1)
        return x[ok, 0], x[ok, 1], x[ok, 2]

    tx, ty, tz = tokens(0)
    fig.add_trace(go.Scatter3d(x=tx, y=ty, z=tz, mode="markers", name=f"tokens ({parts.size} of "
                                                                         f"{ds.sizes['particle']})",
                               marker=dict(size=2.5, color="#d62728")), row=1, col=1)
    curves = [(1, "PDE", _series(ds, "pde_energy")), (1, "particles", _series(ds, "particle_energy")),
              (2, "PDE", _series(ds, "pde_entropy")), (2, "particles", _series(ds, "particle_entropy")),
              (3, "W2", _series(ds, "w2"))]
    colors = {"PDE": "#1f77b4", "particles": "#d62728", "W2": "#2ca02c"}
    shown = set()
    for row, name, y in curves:
        if y is None:
            continue
        fig.add_trace(go.Scatter(x=t, y=y, mode="lines", name=name, legendgroup=name, showlegend=name not in shown,
                                 line=dict(color=colors[name])), row=row, col=2)
        shown.add(name)
    axes = []
    for row in (1, 2, 3):
        fig.update_xaxes(title_text="time" if row == 3 else None, row=row, col=2)
        sub = fig.get_subplot(row, 2)
        axes.append((sub.xaxis.plotly_name.replace("axis", ""), sub.yaxis.plotly_name.replace("axis", "")))

    def cursor(k):                              # the slider's time on the three curve panels
        return [dict(type="line", xref=x, yref=f"{y} domain", x0=t[frames[k]], x1=t[frames[k]], y0=0, y1=1,
                     line=dict(color="rgba(0,0,0,0.4)", width=1, dash="dot")) for x, y in axes]

    def title(k):
        note = "" if rho[k] is not None else "  (the PDE did not reach this time: tokens only)"
        return f"{label}t = {t[frames[k]]:.4g}{note}"

    fig.frames = [go.Frame(name=str(i), traces=[0, 1],
                           data=[go.Surface(surfacecolor=surface(i), opacity=1.0 if rho[i] is not None else 0.25),
                                 go.Scatter3d(x=tokens(i)[0], y=tokens(i)[1], z=tokens(i)[2])],
                           layout=go.Layout(title_text=title(i), shapes=cursor(i)))
                  for i in range(frames.size)]
    steps = [dict(method="animate", label=f"{t[k]:.3g}",
                  args=[[str(i)], dict(mode="immediate", frame=dict(duration=0, redraw=True),
                                       transition=dict(duration=0))]) for i, k in enumerate(frames)]
    fig.update_layout(
        title_text=title(0), shapes=cursor(0), height=760, margin=dict(l=10, r=10, t=70, b=40),
        # no axes on the sphere: gl3d draws their labels as polygons, half of the opening time in software WebGL
        scene=dict(aspectmode="cube", camera=dict(eye=dict(x=1.25, y=1.25, z=0.9)),
                   **{f"{a}axis": dict(range=[-1.05, 1.05], visible=False) for a in "xyz"}),
        legend=dict(orientation="h", x=1.0, y=-0.09, xanchor="right", yanchor="top"),
        sliders=[dict(active=0, steps=steps, currentvalue=dict(prefix="t = "), pad=dict(t=30), len=0.55, x=0.05)],
        updatemenus=[dict(type="buttons", direction="left", x=0.0, y=-0.02, xanchor="right", yanchor="top",
                          pad=dict(t=30), buttons=[
                              dict(label="▶", method="animate",
                                   args=[None, dict(frame=dict(duration=250, redraw=True), fromcurrent=True,
                                                    transition=dict(duration=0))]),
                              dict(label="❚❚", method="animate",
                                   args=[[None], dict(mode="immediate", frame=dict(duration=0, redraw=False))])])])
    return fig


def _phase_figure(ds, label):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    beta, t = ds["beta"].values.astype(float), ds["t"].values.astype(float)
    fig = make_subplots(rows=2, cols=2, subplot_titles=[m.replace("_", " ") for m in PHASE_MEASURES],
                        horizontal_spacing=0.12, vertical_spacing=0.14)
    curve = ds["equiangular_time"].values.astype(float) if "equiangular_time" in ds.variables else None
    for i, m in enumerate(PHASE_MEASURES):
        row, col = divmod(i, 2)
        fig.add_trace(go.Heatmap(x=t, y=beta, z=ds[m].values.astype(np.float32), colorscale="Viridis",
                                 colorbar=dict(len=0.4, x=0.45 + 0.55 * col, y=0.79 - 0.56 * row),
                                 hovertemplate="t %{x:.3g}, beta %{y:.3g}: %{z:.3g}<extra>" + m + "</extra>"),
                      row=row + 1, col=col + 1)
        if curve is not None and np.isfinite(curve).any():
            fig.add_trace(go.Scatter(x=curve, y=beta, mode="lines", line=dict(color="white", dash="dash"),
                                     name="equiangular clustering time", showlegend=i == 0), row=row + 1, col=col + 1)
        half = (t[1] - t[0]) / 2 if t.size > 1 else 0.5          # the curve may leave the recorded times
        fig.update_xaxes(title_text="t", range=[t[0] - half, t[-1] + half], row=row + 1, col=col + 1)
        fig.update_yaxes(title_text="beta", row=row + 1, col=col + 1)
    fig.update_layout(title_text=f"{label}phase diagram (beta x t); no tokens or density in this dataset, so no "
                                 f"sphere or time slider", height=760, margin=dict(l=10, r=10, t=80, b=40),
                      legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.08, yanchor="top", bgcolor="#666",
                                  font=dict(color="white")))
    return fig


def build_figure(kind, ds, *, label="", max_frames=MAX_FRAMES, max_particles=MAX_PARTICLES, nlat=DENSITY_NLAT):
    """The plotly Figure of a dataset of ``kind`` (:func:`load_viewable`).

    ``ds`` is checked as :func:`load_viewable` checks a file (layout, time axis) and the page costed
    (:func:`_estimate_page`) before it is built: ``ValueError`` naming the variable or size refused.

    Parameters
    ----------
    kind : {"run", "phase_diagram"}
    ds : xarray.Dataset
        From :func:`load_viewable`.
    label : str
        Prefix of the titles.
    max_frames : int
        Most animation frames, ``>= 2``.
    max_particles : int
        Most particles drawn, ``>= 1``.
    nlat : int
        Latitudes of the density surface, ``>= 4``.

    Returns
    -------
    plotly.graph_objects.Figure

    Raises
    ------
    ValueError
        An unknown ``kind``, ``ds`` not a Dataset or not in its layout, a size out of range, or a page above
        the limits.
    """
    validate.choice("kind", kind, ("run", "phase_diagram"))
    if not isinstance(ds, xr.Dataset):
        raise ValueError(f"ds must be an xarray Dataset (of load_viewable); received {type(ds).__name__}")
    max_frames = validate.integer("max_frames", max_frames, 2)
    max_particles = validate.integer("max_particles", max_particles, 1)
    nlat = validate.integer("nlat", nlat, 4)
    if kind == "phase_diagram":
        _check_phase("ds", ds)
        return _phase_figure(ds, label)
    results.check_run_layout("ds", ds)
    return _run_figure(ds, label, max_frames, max_particles, nlat)


def write_view(path, out=None, *, max_frames=MAX_FRAMES, max_particles=MAX_PARTICLES, nlat=DENSITY_NLAT) -> Path:
    """Write the page of the results file ``path`` to ``out`` (default ``RESULT.html`` beside it); returns it.

    Atomic: the page is written to a temporary file in ``out``'s folder and renamed, so a failure (bad
    input, Ctrl-C) leaves no partial page.  ``ValueError`` for input that is not a meanfield result.

    Parameters
    ----------
    path : str or path-like
        The results file.
    out : str or path-like, optional
        The page, an ``.html`` / ``.htm`` file.
    max_frames, max_particles, nlat
        As for :func:`build_figure`.

    Returns
    -------
    pathlib.Path
        The page.

    Raises
    ------
    ValueError
        What :func:`load_viewable` or :func:`build_figure` refuses, or ``out`` not an HTML file name.
    OSError
        The page cannot be written.
    """
    kind, ds = load_viewable(path)
    out = default_output(path) if out is None else _path("out", out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--out must name an .html file; received {str(out)!r}")
    label = _sweep_label(path)
    label = f"{Path(path).name}{' (' + label + ')' if label else ''}: "
    fig = build_figure(kind, ds, label=label, max_frames=max_frames, max_particles=max_particles, nlat=nlat)
    html = fig.to_html(include_plotlyjs=True, full_html=True, auto_play=False, div_id="meanfield-view",
                       config={"displaylogo": False, "responsive": True})
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(html)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
