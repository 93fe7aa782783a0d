"""Command line ``meanfield``: the main job, configs, plots, studies and closed forms.

* ``meanfield run [CONFIG.toml] [--out DIR]`` -- PDE and particles from one start, compared by W2
  (no CONFIG: the built-in default, about a minute on 2 cores); writes a NetCDF dataset, PNG
  figures and a GIF into DIR (default ``./meanfield-output``) and prints a summary.  Ctrl-C
  saves the integrator states (exit 130); ``meanfield run --resume DIR`` continues the run.
* ``meanfield sweep SWEEP.toml [--scheduler ADDRESS]`` -- the main job over parameter points on
  dask.distributed (see :mod:`meanfield.sweep`); re-running skips finished points.
* ``meanfield config --default`` -- print the default config as TOML; ``meanfield config FILE``
  validates a config file.
* ``meanfield plot RESULT.nc [--out DIR]`` -- redraw every figure from a results file.
* ``meanfield study NAME [--quick]`` -- run ``python -m studies.NAME.run`` from the repository.
* ``meanfield theory {beta-star,lambda-max,growth-rates}`` -- closed forms of MODEL.md.
* ``meanfield phase-diagram CONFIG.toml [--out DIR]`` -- beta x t phase diagram of batched systems
  (:mod:`meanfield.workflow.phase_diagram`).

Invalid arguments, configs and files exit with status 2 and a one-line message, never a traceback.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from ..core import validate

__all__ = ["main", "build_parser", "studies_root", "available_studies"]

DEFAULT_OUT = "meanfield-output"


def _run(args):
    from .config import RunConfig, load_config
    from .run import RunInterrupted, main_job, resume_job

    started = time.perf_counter()
    progress = False if args.no_progress else None
    try:
        if args.resume is not None:
            if args.config is not None or args.out != DEFAULT_OUT:
                raise ValueError("meanfield run --resume DIR takes no CONFIG and no --out (the run continues "
                                 "in DIR with its saved config)")
            print(f"meanfield run: resuming the run in {args.resume}/", file=sys.stderr)
            out_dir, out = args.resume, resume_job(args.resume, progress=progress)
        else:
            config = RunConfig() if args.config is None else load_config(args.config)
            print(f"meanfield run: {'built-in default' if args.config is None else args.config} -> {args.out}/",
                  file=sys.stderr)
            out_dir, out = args.out, main_job(config, args.out, progress=progress)
    except RunInterrupted as err:
        print(f"meanfield: interrupted: {err}\ncontinue with: meanfield run --resume {err.folder.parent}",
              file=sys.stderr)
        return 130
    except KeyboardInterrupt:                   # outside the integrators (W2, figures): phases are saved
        folder = Path(args.resume or args.out)
        hint = (f"; continue with: meanfield run --resume {folder}" if (folder / "checkpoint").is_dir() else "")
        print(f"meanfield: interrupted{hint}", file=sys.stderr)
        return 130
    print(out["summary"])
    print(f"wrote {len(out['paths'])} files to {out_dir}/: {', '.join(p.name for p in out['paths'])} "
          f"({time.perf_counter() - started:.1f} s)")
    return 0


def _sweep(args):
    from .sweep import load_sweep_spec, run_sweep

    spec = load_sweep_spec(args.sweep)
    out = Path(args.out) if args.out else Path(args.sweep).with_suffix("")
    print(f"meanfield sweep: {len(spec.points)} points -> {out}/ "
          f"({'scheduler ' + args.scheduler if args.scheduler else f'LocalCluster, {args.workers} workers'})",
          file=sys.stderr)
    rows = run_sweep(spec, out, scheduler=args.scheduler, n_workers=args.workers,
                     progress=False if args.no_progress else None)
    failed = [r for r in rows if r["status"] != "done"]
    print(f"{len(rows) - len(failed)} of {len(rows)} points done; index: {out / 'index.json'}")
    for r in failed:
        print(f"  {r['id']} {r['params']}: {r['status']} {r['error']}")
    return 0 if not failed else 1


def _config(args):
    from .config import RunConfig, load_config

    if args.default == (args.file is not None):
        raise ValueError("meanfield config needs exactly one of --default or FILE")
    if args.default:
        print(RunConfig().to_toml(), end="")
    else:
        load_config(args.file)
        print(f"{args.file}: valid")
    return 0


def _plot(args):
    from . import plotting, results

    ds = results.load(args.result)
    out = Path(args.out) if args.out else Path(args.result).resolve().parent
    paths = plotting.save_figures(ds, out, dpi=results.config_of(ds).outputs.dpi, animation=not args.no_animation)
    print(f"wrote {len(paths)} figures to {out}/: {', '.join(p.name for p in paths)}")
    return 0


def studies_root() -> Path:
    """The repository's ``studies/`` folder (next to the installed ``meanfield`` package)."""
    import meanfield

    return Path(meanfield.__file__).resolve().parents[1] / "studies"


def available_studies(root=None) -> list[str]:
    """Names of the study packages (folders with a ``run.py``) under ``root``."""
    root = studies_root() if root is None else Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "run.py").is_file()
                  and not p.name.startswith(("_", ".")))


def _study(args):
    root = studies_root()
    names = available_studies(root)
    if not root.is_dir():
        raise ValueError(f"no studies folder at {root} (studies live in the source repository, not in an "
                         f"installed wheel)")
    if args.name not in names:
        raise ValueError(f"unknown study {args.name!r}; available studies: {names or 'none'}")
    cmd = [sys.executable, "-m", f"studies.{args.name}.run"] + (["--quick"] if args.quick else [])
    print(f"running {' '.join(cmd[1:])} in {root.parent}", file=sys.stderr)
    return subprocess.call(cmd, cwd=root.parent)


def _theory(args):
    from ..analysis import theory

    if args.quantity == "beta-star":
        print(f"c*(H={args.H}) = {theory.c_star(args.H):.12f}")
        value = theory.beta_star(args.H, args.n, args.alpha)
        print(f"beta*(H={args.H}, n={args.n}, alpha={args.alpha}) = {value:.12f}")
    elif args.quantity == "lambda-max":
        print(f"lambda_max(beta={args.beta}, n={args.n}) = {theory.lambda_max(args.beta, args.n):.12f}")
        print(f"inflection(beta={args.beta}, n={args.n}) = {theory.phi_inflection(args.beta, args.n):.12f}")
    else:
        for ell in range(1, args.lmax + 1):
            s = theory.growth_rate(ell, args.lambdas, args.beta, args.normalization, args.nu, d=args.d)
            print(f"sigma_{ell} = {s:.10g}")
    return 0


def _int_at_least(lo):
    """argparse type: an integer >= lo, with the allowed range and the received text in the error."""

    def parse(s):
        try:
            return validate.integer("value", int(s), lo)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}; received {s}") from None

    return parse


_positive_int, _positive_int_1 = _int_at_least(2), _int_at_least(1)


def _positive_float(s):
    """argparse type: a positive finite number, with the received text in the error."""
    try:
        return validate.real("value", float(s), positive=True)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive finite number; received {s}") from None


def build_parser():
    p = argparse.ArgumentParser(prog="meanfield", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the main job: PDE and particles from one start, compared by W2")
    r.add_argument("config", nargs="?", default=None, help="TOML config (default: the built-in demonstration)")
    r.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.add_argument("--resume", default=None, metavar="DIR",
                   help="continue the interrupted run whose output folder is DIR")
    r.set_defaults(func=_run)
    sw = sub.add_parser("sweep", help="run the main job over a grid or list of parameter points (dask)")
    sw.add_argument("sweep", help="sweep TOML file (see meanfield.sweep)")
    sw.add_argument("--out", default=None, help="output folder (default: the sweep file's name)")
    sw.add_argument("--scheduler", default=None, metavar="ADDRESS", help="an existing dask scheduler")
    sw.add_argument("--workers", type=_positive_int_1, default=2, help="LocalCluster workers (default 2)")
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")
    sw.set_defaults(func=_sweep)
    c = sub.add_parser("config", help="print the default config (--default) or validate a config FILE")
    c.add_argument("file", nargs="?", default=None, help="TOML config to validate")
    c.add_argument("--default", action="store_true", help="print the default config as TOML")
    c.set_defaults(func=_config)
    pl = sub.add_parser("plot", help="redraw every figure from a results file")
    pl.add_argument("result", help="NetCDF file written by meanfield run")
    pl.add_argument("--out", default=None, help="output folder (default: the file's folder)")
    pl.add_argument("--no-animation", action="store_true", help="skip the GIF")
    pl.set_defaults(func=_plot)
    s = sub.add_parser("study", help="run a study of studies/ (python -m studies.NAME.run)")
    s.add_argument("name", help="study name (a folder of studies/)")
    s.add_argument("--quick", action="store_true", help="the small fast version")
    s.set_defaults(func=_study)
    t = sub.add_parser("theory", help="print closed forms of MODEL.md")
    t.add_argument("quantity", choices=["beta-star", "lambda-max", "growth-rates"])
    t.add_argument("--H", type=int, default=2)
    t.add_argument("--n", type=_positive_int, default=32)
    t.add_argument("--alpha", type=_positive_float, default=1.0)
    t.add_argument("--beta", type=_positive_float, default=1.0)
    t.add_argument("--lambdas", type=float, nargs="+", default=[1.0])
    t.add_argument("--normalization", choices=["mean", "softmax"], default="mean")
    t.add_argument("--nu", type=float, default=0.0)
    t.add_argument("--lmax", type=_positive_int, default=8)
    t.add_argument("--d", type=_int_at_least(2), default=3, help="growth-rates: the dimension of S^{d-1} (>= 2)")
    t.set_defaults(func=_theory)
    ph = sub.add_parser("phase-diagram", help="beta x t phase diagram of batched token systems (NetCDF + figure)")
    ph.add_argument("config", help="TOML file with a [phase_diagram] table (see meanfield.workflow.phase_diagram)")
    ph.add_argument("--out", default="phase-diagram-output", help="output folder")
    ph.add_argument("--scheduler", default=None, choices=["threads", "processes", "synchronous"],
                    help="run the beta cells as dask tasks")
    ph.add_argument("--no-progress", action="store_true", help="no progress bar")
    ph.set_defaults(func=_phase_diagram)
    return p


def _phase_diagram(args):
    from .phase_diagram import run_phase_diagram

    paths = run_phase_diagram(args.config, args.out, scheduler=args.scheduler,
                              progress=False if args.no_progress else None)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:          # ConfigError, SchemaError and library input errors
        print(f"meanfield: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:             # an output folder that cannot be written, ...
        print(f"meanfield: error: {err.strerror or err}: {err.filename or ''}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
