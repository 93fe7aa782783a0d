"""``meanfield view``: the HTML page of a run / sweep point / phase diagram, its bad inputs, and the page in a real
headless browser (Debian's chromium driven by playwright; skipped only where either is missing: CI installs
both, see .ci/browser)."""

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from meanfield.workflow import results, view
from meanfield.workflow.cli import main
from meanfield.workflow.config import RunConfig
from meanfield.workflow.phase_diagram import PhaseDiagramConfig, phase_diagram
from meanfield.workflow.run import run

TINY = {"pde": {"lmax": 12}, "particles": {"n": 60}, "integrator": {"t_final": 0.3, "n_frames": 4},
        "initial": {"kappas": [2.0]}, "outputs": {"figures": False, "animation": False}, "seed": 3}
CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    ds = run(RunConfig.from_dict(TINY), progress=False)
    assert ds.attrs["pde_status"] == 0, ds.attrs["pde_message"]       # every frame has a density
    return ds, results.save(ds, tmp_path_factory.mktemp("tiny") / "result.nc")


@pytest.fixture(scope="module")
def page(tiny):
    return view.write_view(tiny[1])


def test_the_page_is_self_contained_and_small(tiny, page):
    assert page == tiny[1].with_suffix(".html") and page.is_file()
    html = page.read_text(encoding="utf-8")
    assert page.stat().st_size < 10e6           # the target (the default run's page: benchmarks/view.py)
    # plotly.js is embedded (its banner), no script is loaded from elsewhere (the browser test checks requests)
    assert "* plotly.js v" in html and re.search(r"<script[^>]*\bsrc\s*=", html) is None
    assert "Plotly.newPlot" in html and "meanfield-view" in html
    assert not list(page.parent.glob(".*.tmp"))                 # the temporary file was renamed


def test_frames_hold_the_datasets_tokens_and_density(tiny):
    ds, path = tiny
    fig = view.build_figure("run", ds, max_particles=25)
    T = ds.sizes["time"]
    assert len(fig.frames) == T and len(fig.layout.sliders[0].steps) == T
    parts = view._pick(ds.sizes["particle"], 25)
    assert parts.size == 25
    for k, frame in enumerate(fig.frames):
        assert list(fig.layout.sliders[0].steps[k].args[0]) == [frame.name]
        surface, tokens = frame.data
        # the tokens are the dataset's, scaled just above the surface (float32 storage: 1e-6 relative)
        np.testing.assert_allclose(np.asarray(tokens.x), ds["X"].values[k, parts, 0] * 1.012, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(tokens.z), ds["X"].values[k, parts, 2] * 1.012, rtol=1e-6, atol=1e-6)
        assert f"t = {ds.time.values[k]:.4g}" in frame.layout.title.text
    assert not np.array_equal(fig.frames[0].data[1].x, fig.frames[-1].data[1].x)   # the tokens move


def test_density_on_the_runs_display_grid_equals_the_stored_rho(tiny):
    """With the display grid of the run (2 (lmax+1) rings) the page's density is the dataset's ``rho`` at the
    same nodes, rows in latitude order, the poles and seam added: a check of orientation and coefficients."""
    ds, _ = tiny
    lmax = ds.sizes["l"] - 1
    x, y, z, rho = view._density_frames(ds, np.arange(ds.sizes["time"]), 2 * (lmax + 1))
    assert x.shape == (2 * (lmax + 1) + 2, 4 * (lmax + 1) + 1)
    # interior rows are the stored grid's nodes: z = sin(lat), longitude = atan2(y, x) (1e-12: float64 trig)
    np.testing.assert_allclose(z[1:-1, 0], np.sin(np.radians(ds.lat.values)), atol=1e-12)
    np.testing.assert_allclose(np.degrees(np.arctan2(y[1, :-1], x[1, :-1])) % 360, ds.lon.values % 360, atol=1e-9)
    for k, r in enumerate(rho):
        # float32 storage: 1e-6 relative of the peak
        np.testing.assert_allclose(r[1:-1, :-1], ds["rho"].values[k], atol=1e-6 * np.abs(ds["rho"].values[k]).max())
        np.testing.assert_array_equal(r[:, -1], r[:, 0])       # the seam is closed
        # the poles are the first and last ring means (float32: 1e-6 relative)
        np.testing.assert_allclose(r[0, 0], ds["rho"].values[k, 0].mean(), rtol=1e-6)


def test_coarse_density_grid_integrates_to_the_mass(tiny):
    ds, _ = tiny
    fig = view.build_figure("run", ds)
    grid = view.SphereGrid(ds.sizes["l"] - 1, nlat=view.DENSITY_NLAT, nlon=2 * view.DENSITY_NLAT)
    for frame in fig.frames:
        r = np.asarray(frame.data[0].surfacecolor, dtype=float)[1:-1, :-1]
        # GL quadrature of the shown density = the PDE's mass 1 (conserved to ~1e-10; float32 values: 1e-6)
        assert abs((r * grid.weights).sum() - 1.0) < 1e-5


def test_times_the_pde_did_not_reach_show_tokens_only(tiny, tmp_path):
    ds = tiny[0].copy(deep=True)
    for name in ("rho_lm_real", "rho_lm_imag", "rho"):
        ds[name].values[-1] = np.nan
    fig = view.build_figure("run", ds)
    assert "did not reach this time" in fig.frames[-1].layout.title.text
    assert "did not reach" not in fig.frames[0].layout.title.text
    assert fig.frames[-1].data[0].opacity < 1 and np.all(np.asarray(fig.frames[-1].data[0].surfacecolor) == 0)


def test_frames_and_particles_are_subsampled_with_the_ends_kept():
    idx = view._pick(101, 10)
    assert idx[0] == 0 and idx[-1] == 100 and idx.size == 10 and np.all(np.diff(idx) > 0)
    assert np.array_equal(view._pick(5, 10), np.arange(5))


def test_cli_writes_the_page_and_names_it(tiny, tmp_path, capsys):
    out = tmp_path / "sub" / "page.html"
    assert main(["view", str(tiny[1]), "--out", str(out), "--frames", "3", "--particles", "10"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out and out.is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["page.html"]


def test_sweep_point_page_names_its_parameters(tiny, tmp_path):
    points = tmp_path / "sweep" / "points"
    points.mkdir(parents=True)
    shutil.copy(tiny[1], points / "p0001.nc")
    (tmp_path / "sweep" / "index.json").write_text(json.dumps([
        {"id": "p0001", "params": {"heads[0].beta": 2.0}, "status": "done", "path": "points/p0001.nc"}]))
    page = view.write_view(points / "p0001.nc")
    assert "sweep point heads[0].beta = 2.0" in page.read_text(encoding="utf-8")


def test_phase_diagram_page_has_the_heat_maps(tmp_path):
    cfg = PhaseDiagramConfig(betas=(1.0, 4.0), t_final=1.0, dt=0.1, record_every=5, n=6, batch=4)
    path = results.save(phase_diagram(cfg, progress=False), tmp_path / "phase_diagram.nc")
    kind, ds = view.load_viewable(path)
    assert kind == "phase_diagram"
    fig = view.build_figure(kind, ds)
    assert [t.type for t in fig.data].count("heatmap") == 4 and not fig.frames
    assert "no tokens or density" in fig.layout.title.text
    assert view.write_view(path).is_file()


def _truncated(src, dst):
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[: len(data) // 2])
    return dst


def _without_x(src, dst):
    ds = results.load(src).drop_vars("X")
    ds.to_netcdf(dst, engine="netcdf4")
    return dst


def _foreign(src, dst):
    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(dst, engine="netcdf4")
    return dst


def _text(src, dst):
    Path(dst).write_text("not a netcdf file\n")
    return dst


@pytest.mark.parametrize("make, message", [
    (_truncated, "is not a readable NetCDF file"),
    (_without_x, "lacks the variables ['X']"),
    (_foreign, "has no 'schema_version' attribute"),
    (_text, "is not a readable NetCDF file"),
    (None, "no such file"),
], ids=["truncated", "missing-variable", "not-meanfield", "not-netcdf", "missing-file"])
def test_bad_input_exits_2_naming_the_file_and_leaves_no_page(tiny, tmp_path, capsys, make, message):
    bad = tmp_path / "bad.nc"
    if make is not None:
        make(tiny[1], bad)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["view", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and message in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before     # no .html, no temporary file


def test_a_failed_write_leaves_no_half_written_page(tiny, tmp_path, monkeypatch):
    out = tmp_path / "page.html"

    def fail(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(view.os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        view.write_view(tiny[1], out)
    assert list(tmp_path.iterdir()) == []


def test_out_must_be_html(tiny, tmp_path, capsys):
    assert main(["view", str(tiny[1]), "--out", str(tmp_path / "page.png")]) == 2
    assert "--out must name an .html file" in capsys.readouterr().err and not list(tmp_path.iterdir())



# ---- a file's layout is not trusted: sizes costed before reading, dims and the time axis checked by name ----------

def _declared(src, dst, lmax, times=None):
    """``src`` with ``rho_lm_real`` / ``rho_lm_imag`` declared as (time, l, m) tables of degree ``lmax`` whose chunks
    are never written (a small file declaring large sizes; NaN where read); ``times`` other frame times."""
    import netCDF4

    ds = results.load(src).drop_vars(["rho_lm_real", "rho_lm_imag", "l", "m"])
    if times is not None:
        ds = ds.assign_coords(time=times)
    ds.to_netcdf(dst, engine="netcdf4")
    with netCDF4.Dataset(dst, "a") as f:
        f.createDimension("l", lmax + 1)
        f.createDimension("m", lmax + 1)
        for name in ("rho_lm_real", "rho_lm_imag"):
            f.createVariable(name, "f8", ("time", "l", "m"), chunksizes=(1, 256, 256), fill_value=np.nan, zlib=True)
    return dst


def _huge_coefficients(src, dst):
    return _declared(src, dst, 20000)


def _with(src, dst, edit):
    edit(results.load(src)).to_netcdf(dst, engine="netcdf4")
    return dst


def _transposed_x(src, dst):
    return _with(src, dst, lambda ds: ds.assign(X=ds["X"].transpose("time", "dim", "particle")))


def _two_component_x(src, dst):
    return _with(src, dst, lambda ds: ds.drop_vars("dim").isel(dim=slice(0, 2)))


def _swapped_lm_dims(src, dst):
    return _with(src, dst, lambda ds: ds.assign({v: ds[v].transpose("time", "m", "l")
                                                 for v in ("rho_lm_real", "rho_lm_imag")}))


def _swapped_lm_values(src, dst):         # the dims' names kept, the tables transposed
    return _with(src, dst, lambda ds: ds.assign({v: (("time", "l", "m"), np.swapaxes(ds[v].values, 1, 2))
                                                 for v in ("rho_lm_real", "rho_lm_imag")}))


def _nan_time(src, dst):
    return _with(src, dst, lambda ds: ds.assign_coords(time=np.where(np.arange(ds.sizes["time"]) == 1, np.nan,
                                                                     ds["time"].values)))


def _decreasing_time(src, dst):
    return _with(src, dst, lambda ds: ds.assign_coords(time=ds["time"].values[::-1].copy()))


def _phase_nan_t(src, dst):
    t = np.array([0.0, np.nan, 1.0])
    ds = xr.Dataset({m: (("beta", "t"), np.zeros((2, 3))) for m in view.PHASE_MEASURES},
                    coords={"beta": [1.0, 4.0], "t": t}, attrs={"schema_version": 1, "kind": "phase_diagram"})
    ds.to_netcdf(dst, engine="netcdf4")
    return dst


@pytest.mark.parametrize("make, fragments", [
    (_huge_coefficients, ["meanfield view of results file", "rho_lm_real of dims ('time', 'l', 'm') and shape "
                          "(4, 20001, 20001)", "would need about 23.8 GiB of memory", "above MEMORY_LIMIT_BYTES = 4 GiB"]),
    (_transposed_x, ["X must have the dims ('time', 'particle', 'dim')",
                     "received dims ('time', 'dim', 'particle') of shape (4, 3, 60)"]),
    (_two_component_x, ["X must have dims ('time', 'particle', 'dim') with 3 components along dim",
                        "received dims ('time', 'particle', 'dim') of shape (4, 60, 2)"]),
    (_swapped_lm_dims, ["rho_lm_real must have the dims ('time', 'l', 'm')",
                        "received dims ('time', 'm', 'l') of shape (4, 13, 13)"]),
    (_swapped_lm_values, ["rho_lm_real must hold NaN (or 0) where m > l", "received rho_lm_real[time=0, l=0, m=1] = ",
                          "are its l and m swapped?"]),
    (_nan_time, ["the coordinate 'time' must be a 1-d array of finite and non-decreasing real numbers",
                 "received [0. , nan, 0.2, 0.3] (dtype float64)"]),
    (_decreasing_time, ["the coordinate 'time' must be a 1-d array of finite and non-decreasing",
                        "received [0.3, 0.2, 0.1, 0. ]"]),
    (_phase_nan_t, ["the coordinate 't' must be a 1-d array of finite and non-decreasing", "nan,", "(dtype float64)"]),
], ids=["huge-coefficients", "transposed-X", "X-not-3d", "swapped-lm-dims", "swapped-lm-values", "nan-time",
        "decreasing-time", "phase-nan-t"])
def test_hostile_layout_exits_2_naming_the_variable(tiny, tmp_path, capsys, monkeypatch, make, fragments):
    bad = make(tiny[1], tmp_path / "bad.nc")
    assert bad.stat().st_size < 1e6                                 # declared sizes, not stored ones
    if make is _huge_coefficients:              # refused from the header: without the guard, nothing is read either
        monkeypatch.setattr(view.xr, "open_dataset", lambda *a, **k: pytest.fail("the 26 GB file was opened"))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["view", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meanfield: error: ") and "Traceback" not in err
    assert f"results file {bad}" in err and all(f in err for f in fragments), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before     # no .html, no temporary file


def test_the_page_is_costed_before_its_density_grid(tiny, tmp_path, monkeypatch):
    """A file small enough to read whose density of lmax = 1000 would be synthesized on a 1001 x 2002 grid: the
    page's estimate (grid, syntheses, values) is refused by name under a lowered limit before the grid exists."""
    from meanfield.core import cost

    path = _declared(tiny[1], tmp_path / "lmax1000.nc", 1000)
    kind, ds = view.load_viewable(path)                          # 64 MB declared: read
    load = view._estimate_load(path, view._header(path))
    page = view._estimate_page(ds)
    assert load.bytes == pytest.approx(8 * 2 * 4 * 1001**2, rel=0.01)
    assert page.bytes > view.estimate_grid(1000, 1001, 2002).bytes + ds.nbytes and page.seconds > 0
    monkeypatch.setattr(view, "SphereGrid", lambda *a, **k: pytest.fail("the grid was built"))
    with cost.limits(bytes=256 * 2**20), pytest.raises(ValueError) as err:
        view.build_figure(kind, ds)
    msg = str(err.value)
    assert "meanfield view's page of 4 of 4 times, 60 tokens and the density of lmax = 1000" in msg
    assert "rho_lm_real of shape (4, 1001, 1001)" in msg and "above MEMORY_LIMIT_BYTES = 256 MiB" in msg
    assert "fewer frames (--frames, max_frames)" in msg


def test_build_figure_checks_a_datasets_layout(tiny):
    ds = tiny[0]
    with pytest.raises(ValueError, match=r"ds: X must have the dims \('time', 'particle', 'dim'\).*received dims "
                                         r"\('time', 'dim', 'particle'\)"):
        view.build_figure("run", ds.transpose("time", "dim", "particle", ...))
    t = ds["time"].values.copy()
    t[2] = np.inf
    with pytest.raises(ValueError, match=r"ds: the coordinate 'time' must .* finite and non-decreasing .*inf"):
        view.build_figure("run", ds.assign_coords(time=t))
    with pytest.raises(ValueError, match=r"ds: pde_energy must have the dims \('time',\) or \('time', 'head'\); "
                                         r"received dims \('head', 'time'\)"):
        view.build_figure("run", ds.assign(pde_energy=ds["pde_entropy"].transpose()))

# ---- the page in a real browser --------------------------------------------------------------------------------

def _browser():
    # CI (.ci/run sets MEANFIELD_REQUIRE_BROWSER=1 after .ci/browser installed chromium) fails instead of skipping
    required = os.environ.get("MEANFIELD_REQUIRE_BROWSER") == "1"
    if required:
        from playwright import sync_api
    else:
        sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        if required:
            pytest.fail(f"{CHROMIUM} missing although MEANFIELD_REQUIRE_BROWSER=1 (.ci/browser installs it)")
        pytest.skip(f"{CHROMIUM} missing (apt-get install chromium; .ci/browser does it in CI)")
    return sync_api


STATE = """() => { const d = document.getElementById('meanfield-view'), f = d._fullData;   // decoded arrays
  return {title: d.layout.title.text, active: d._fullLayout.sliders[0].active, x: Array.from(f[1].x),
          color: Array.from(f[0].surfacecolor[Math.floor(f[0].surfacecolor.length / 2)])}; }"""
READY = ("() => { const d = document.getElementById('meanfield-view'); "
         "return d && d._fullLayout && d.querySelector('.main-svg'); }")


@pytest.fixture(scope="module")
def browser_page(page):
    sync_api = _browser()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        tab = browser.new_page(viewport={"width": 1400, "height": 800})
        log = {"errors": [], "requests": []}
        tab.on("console", lambda m: log["errors"].append(m.text) if m.type == "error" else None)
        tab.on("pageerror", lambda e: log["errors"].append(str(e)))
        tab.on("request", lambda r: None if r.url.startswith(("file:", "data:", "blob:"))
               else log["requests"].append(r.url))
        tab.goto(page.as_uri(), wait_until="load")
        tab.wait_for_function(READY, timeout=60_000)
        yield tab, log
        browser.close()


def test_browser_loads_the_page_without_errors_or_network(browser_page):
    tab, log = browser_page
    assert log["errors"] == []
    assert log["requests"] == []                                  # self-contained: nothing fetched
    assert tab.evaluate(STATE)["active"] == 0


def test_browser_dragging_the_slider_changes_the_frame(browser_page, tiny):
    tab, log = browser_page
    before = tab.evaluate(STATE)
    rail = tab.locator(".slider-rail-rect").first.bounding_box()
    grip = tab.locator(".slider-grip-rect").first.bounding_box()
    tab.mouse.move(grip["x"] + grip["width"] / 2, grip["y"] + grip["height"] / 2)
    tab.mouse.down()
    tab.mouse.move(rail["x"] + rail["width"] - 2, rail["y"] + rail["height"] / 2, steps=8)
    tab.mouse.up()
    tab.wait_for_function("() => document.getElementById('meanfield-view')._fullLayout.sliders[0].active > 0")
    tab.wait_for_timeout(300)
    after = tab.evaluate(STATE)
    T = tiny[0].sizes["time"]
    assert after["active"] == T - 1
    assert after["title"] != before["title"] and f"t = {tiny[0].time.values[-1]:.4g}" in after["title"]
    assert len(after["x"]) == len(before["x"]) == tiny[0].sizes["particle"]
    assert after["x"] != before["x"] and after["color"] != before["color"]    # tokens and density moved
    # the browser shows the last frame's numbers (float32 in the page: 1e-6)
    np.testing.assert_allclose(after["x"], tiny[0]["X"].values[-1, :, 0] * 1.012, rtol=1e-6, atol=1e-6)
    assert log["errors"] == []


def test_browser_screenshot_is_not_blank(browser_page, tmp_path):
    from PIL import Image

    tab, _ = browser_page
    png = tmp_path / "page.png"
    tab.screenshot(path=str(png))
    scene = tmp_path / "scene.png"
    tab.locator("#scene").first.screenshot(path=str(scene))        # the WebGL sphere alone
    for file in (png, scene):
        pixels = np.asarray(Image.open(file).convert("RGB"), dtype=float)
        # a blank (single-colour) image has variance 0 and one colour; the drawn page has thousands of
        # colours (colour map, tokens, anti-aliased text): 100 and a standard deviation of 10 are far from both
        assert pixels.std() > 10 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 100, file.name
    keep = os.environ.get("MEANFIELD_SCREENSHOT")      # e.g. docs/figures/viewer.png: the check's own screenshot
    if keep:
        shutil.copyfile(png, keep)
