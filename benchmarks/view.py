"""Benchmark of ``meanfield view`` (issue 25): the page of the default run, its size and its opening time in
headless chromium.

Targets: the page of the default run (``meanfield run`` without a config) under 10 MB, opening in under 3 s
in headless chromium (Debian's ``/usr/bin/chromium`` driven by playwright, software WebGL: ``--disable-gpu``).

1. the default run (about a minute on 2 cores; ``--result FILE`` reuses a finished one instead), then
   ``view.write_view``: its size and the seconds it takes;
2. ``repeats`` openings of the page in one browser, each in a fresh tab: wall seconds from navigation to
   the plot drawn (plotly's ``_fullLayout`` and its SVG present, the WebGL scene initialized), and the CPU
   seconds all chromium processes spent meanwhile (psutil) -- on a loaded machine the wall time is
   mostly waiting for a core, and the CPU time is the better estimate of an idle machine's wall time;
3. the same for a page of plotly.js alone with one 3-D surface of 2 x 2 points (axes hidden, as the view's
   sphere): the floor any plotly 3-D page pays (parsing plotly.js, creating the WebGL context in software).

Run from the repository root::

    .venv/bin/python -m benchmarks.view                    # about 1.5 minutes (the default run, 5 openings)
    .venv/bin/python -m benchmarks.view --result meanfield-output/result.nc
    .venv/bin/python -m benchmarks.view --quick            # a tiny run, 2 openings (about 20 s)
    .venv/bin/python -m benchmarks.view --write            # also write benchmarks/RESULTS_view.md

Speed is measured here, never asserted by a test (``tests/test_benchmarks_view.py`` runs the quick mode).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READY = ("() => { const d = document.getElementById('meanfield-view'); "
         "return d && d._fullLayout && d.querySelector('.main-svg'); }")
TINY = {"pde": {"lmax": 12}, "particles": {"n": 60}, "integrator": {"t_final": 0.3, "n_frames": 4},
        "initial": {"kappas": [2.0]}, "outputs": {"figures": False, "animation": False}, "seed": 3}
TARGET_MB, TARGET_S = 10.0, 3.0


def _cpu(browser_pid):
    """CPU seconds (user + system) of the chromium process and all its children."""
    import psutil

    try:
        root = psutil.Process(browser_pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _chromium_pid():
    import psutil

    me = psutil.Process()
    for child in me.children(recursive=True):
        try:
            if Path(child.exe()).name.startswith("chromium") and "--type=" not in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            pass
    return None


def open_times(page, repeats):
    """[(wall seconds, chromium CPU seconds, console errors)] for ``repeats`` openings of ``page``."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        pid = _chromium_pid()
        for _ in range(repeats):
            tab = browser.new_page(viewport={"width": 1400, "height": 800})
            errors = []
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            cpu0, t0 = (_cpu(pid) if pid else np.nan), time.perf_counter()
            tab.goto(Path(page).resolve().as_uri(), wait_until="load", timeout=120_000)
            tab.wait_for_function(READY, polling=20, timeout=120_000)
            wall = time.perf_counter() - t0
            out.append((wall, (_cpu(pid) - cpu0) if pid else np.nan, len(errors)))
            tab.close()
        browser.close()
    return out


def floor_page(folder):
    import plotly.graph_objects as go

    path = Path(folder) / "floor.html"
    fig = go.Figure(go.Surface(z=[[1.0, 2.0], [2.0, 3.0]]))
    fig.update_scenes(xaxis_visible=False, yaxis_visible=False, zaxis_visible=False)     # as the view's sphere
    fig.write_html(path, include_plotlyjs=True, div_id="meanfield-view")
    return path


def main(argv=None):
    from meanfield.workflow import results, view
    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.jobs import main_job
    from meanfield.workflow.run import run

    from . import _report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tiny run and 2 openings")
    ap.add_argument("--result", default=None, help="an existing run dataset instead of running the default")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--write", action="store_true", help="write benchmarks/RESULTS_view.md")
    args = ap.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)
    load0, started = os.getloadavg()[0], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="meanfield-view-bench-") as tmp:
        if args.result is not None:
            source, what = Path(args.result), f"the run {args.result}"
        elif args.quick:
            source = results.save(run(RunConfig.from_dict(TINY), progress=False), Path(tmp) / "result.nc")
            what = "a tiny run (quick mode)"
        else:
            t = time.perf_counter()
            main_job(RunConfig(), Path(tmp) / "run", progress=False)
            source = Path(tmp) / "run" / "result.nc"
            what = f"the default run (computed in {time.perf_counter() - t:.0f} s)"
        t = time.perf_counter()
        page = view.write_view(source, Path(tmp) / "page.html")
        build = time.perf_counter() - t
        size = page.stat().st_size / 1e6
        have_browser = os.path.exists(CHROMIUM)
        rows, summary = [], [f"page of {what}: {size:.2f} MB (target < {TARGET_MB:g} MB), built in {build:.1f} s"]
        if have_browser:
            for label, file in (("meanfield view page", page), ("plotly.js + one 2x2 surface (floor)",
                                                                floor_page(tmp))):
                runs = open_times(file, repeats)
                wall = np.array([r[0] for r in runs])
                cpu = np.array([r[1] for r in runs])
                rows.append((label, f"{file.stat().st_size / 1e6:.2f}", f"{wall.min():.2f}", f"{np.median(wall):.2f}",
                             f"{np.nanmin(cpu):.2f}", f"{np.nanmedian(cpu):.2f}", sum(r[2] for r in runs)))
                summary.append(f"{label}: open {wall.min():.2f} s min / {np.median(wall):.2f} s median wall, "
                               f"{np.nanmin(cpu):.2f} / {np.nanmedian(cpu):.2f} s chromium CPU "
                               f"(target < {TARGET_S:g} s), {rows[-1][-1]} console errors")
        else:
            summary.append(f"{CHROMIUM} missing: no opening times (apt-get install chromium)")
    load1 = os.getloadavg()[0]
    md = "\n".join([
        "## meanfield view: page size and opening time", "",
        _report.provenance(load0, load1, time.perf_counter() - started,
                           "python -m benchmarks.view" + (" --quick" if args.quick else "")
                           + (f" --result {args.result}" if args.result else "")),
        "", f"Page of {what}: **{size:.2f} MB** (target < {TARGET_MB:g} MB), written in {build:.1f} s.", "",
        _report.table(["page", "MB", "open wall min (s)", "open wall median (s)", "chromium CPU min (s)",
                       "chromium CPU median (s)", "console errors"], rows) if rows else "(no browser)", "",
        f"Opening: headless chromium ({' '.join(BROWSER_ARGS)}), navigation to the plot drawn, {repeats} fresh tabs "
        f"in one browser. CPU seconds are those of every chromium process meanwhile (renderer, GPU process with "
        f"software WebGL); on a loaded machine they estimate an idle machine's wall time better than the wall "
        f"time does. Target: < {TARGET_S:g} s."])
    _report.finish(summary, "## meanfield view", md, args.write, HERE / "RESULTS_view.md")
    if args.write:                              # a new file: no blank lines before the heading
        path = HERE / "RESULTS_view.md"
        path.write_text(path.read_text().lstrip("\n"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
