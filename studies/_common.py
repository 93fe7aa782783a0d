"""Shared plumbing for studies: command line, data files and the markdown report.

Every study package ``studies/<name>/`` has

* ``run.py`` with ``run(out_dir: Path, quick: bool = False) -> dict``: computes and writes its
  data (``data.npz`` / ``data.json``) into ``out_dir`` and returns the headline numbers;
* ``report.py`` with ``report(data_dir: Path, out_dir: Path | None = None) -> Path``: reads the
  data, writes PNG figures and ``report.md`` (a table: claim, what we measured, verdict) and
  returns the report's path.

Full-mode outputs are committed in ``studies/<name>/output/``; quick modes run in the tests.
Everything that differs between the two modes (sizes, seeds, grids, times, tolerances) is data:
one frozen ``Settings`` dataclass per study with two instances, ``QUICK`` and ``FULL``, at the top
of its ``run.py``; the code reads only those.

Shared numerics: :func:`fit_slope` (least-squares line, optionally in log coordinates, with the
standard error of the slope) and :func:`blowup_horizon` (probe a run that may blow up in finite
time, then stop the real run at a fraction of the blow-up time).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import meanfield as mf

__all__ = ["main", "save_json", "load_json", "open_study_data", "style_axes", "save_figure", "markdown_table",
           "write_report", "study_dir", "SlopeFit", "fit_slope", "blowup_horizon", "VERDICTS", "REPRODUCED",
           "SHARPENED", "OUTSIDE", "REFUTED", "verdict_section"]

# The referee vocabulary: every verdict against a claim of the paper is exactly one of these.
REPRODUCED = "reproduced"
SHARPENED = "reproduced with sharpened hypotheses"
OUTSIDE = "outside the hypotheses"
REFUTED = "refuted"
VERDICTS = (REPRODUCED, SHARPENED, OUTSIDE, REFUTED)


ROOT = Path(__file__).resolve().parent


def study_dir(name: str) -> Path:
    return ROOT / name


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, (np.floating, float)):
        return None if not np.isfinite(x) else float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def save_json(path, data) -> Path:
    """Write a JSON file (numpy scalars/arrays converted; non-finite floats become null)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(data), indent=2, sort_keys=True))
    return path


def load_json(path):
    return json.loads(Path(path).read_text())


def open_study_data(data_dir, out_dir=None):
    """For a report: ``(out, arrays, summary)`` -- the output folder (default ``data_dir``, created),
    the arrays of ``data.npz`` as a dict (empty if there is none) and ``data.json``."""
    data_dir = Path(data_dir)
    out = Path(out_dir) if out_dir is not None else data_dir
    out.mkdir(parents=True, exist_ok=True)
    npz = data_dir / "data.npz"
    arrays = dict(np.load(npz)) if npz.is_file() else {}
    return out, arrays, load_json(data_dir / "data.json")


def style_axes(axes, legend=None, which="major"):
    """The house style of every panel in ``axes`` (one Axes or an array of them): a light grid
    (alpha 0.3, on the ``which`` ticks) and, if ``legend`` is a font size, a legend."""
    for ax in np.ravel(axes):
        if legend is not None:
            ax.legend(fontsize=legend)
        ax.grid(True, which=which, alpha=0.3)


def save_figure(fig, path, dpi=110):
    """Lay out, write (PNG) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def markdown_table(header, rows) -> str:
    """A markdown table; ``|`` inside a cell is escaped so it cannot split the cell."""
    cell = lambda c: str(c).replace("\\|", "|").replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict_section(verdicts) -> str:
    """The markdown section "Verdicts against the paper's hypotheses".

    ``verdicts`` is a sequence of rows ``(claim, hypotheses, verdict, evidence)``: the paper's claim,
    its hypotheses as the paper states them (symmetric, value-aligned, normalization, flat or
    spherical, regime), one word of :data:`VERDICTS`, and the evidence (headline number, seeds).
    A verdict outside the vocabulary is refused by name.
    """
    rows = []
    for claim, hyp, verdict, evidence in verdicts:
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}; received {verdict!r}")
        rows.append([claim, hyp, f"**{verdict}**", evidence])
    return "\n".join(["## Verdicts against the paper's hypotheses", "",
                      "Vocabulary: " + " / ".join(VERDICTS) + ".", "",
                      markdown_table(["claim", "hypotheses (as stated)", "verdict", "evidence"], rows), ""])


def write_report(path, title, intro, claims, figures=(), notes="", verdicts=()) -> Path:
    """Write ``report.md``: title, intro, the verdicts against the paper's hypotheses (if
    ``verdicts``, see :func:`verdict_section`), a claims table (claim, measured, verdict), figures, notes."""
    parts = [f"# {title}", "", intro.strip(), ""]
    if verdicts:
        parts += [verdict_section(verdicts)]
    parts += ["## Claims and verdicts", "",
              markdown_table(["claim", "what we measured", "verdict"], claims), ""]
    for fname, caption in figures:
        parts += [f"![{caption}]({fname})", "", f"*{caption}*", ""]
    if notes:
        parts += ["## Notes", "", notes.strip(), ""]
    path = Path(path)
    path.write_text("\n".join(parts))
    return path


@dataclass(frozen=True)
class SlopeFit:
    """A least-squares line ``Y = slope * X + intercept`` through ``n_points`` points.

    ``X``, ``Y`` are the fitted coordinates (``log x`` / ``log y`` where :func:`fit_slope` was asked
    for a log axis).  ``stderr`` is the standard error of the slope,
    ``sqrt(sum r^2 / (m - 2) / sum (X - mean X)^2)`` with residuals ``r`` (``nan`` for ``m <= 2``
    points: no degree of freedom is left to estimate the scatter).  All four are ``nan`` when
    fewer than ``min_points`` points were usable.
    """

    slope: float
    intercept: float
    stderr: float
    n_points: int


def fit_slope(x, y, *, log_x=False, log_y=False, drop_invalid=False, min_points=2) -> SlopeFit:
    """Least-squares slope of ``y`` against ``x``, each on a linear or a log axis.

    The line is fitted by ``np.polyfit(X, Y, 1)`` with ``X = log x`` if ``log_x`` else ``x`` (the
    same for ``Y``), so slopes equal the former ``np.polyfit(np.log(x), np.log(y), 1)[0]`` of each
    study bit for bit.

    Parameters
    ----------
    x, y : array_like, shape (m,)
    log_x, log_y : bool
        Fit on ``log x`` / ``log y`` (natural logarithm).
    drop_invalid : bool
        The mask is explicit: a point is *invalid* when ``x`` or ``y`` is not finite, or is ``<= 0``
        on a log axis.  ``True`` leaves invalid points out of the fit; ``False`` (default) refuses
        them with a ``ValueError``.
    min_points : int
        Fewer usable points than this give a ``SlopeFit`` of ``nan`` (and ``n_points``).

    Returns
    -------
    SlopeFit
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-d arrays of the same length; received shapes {x.shape} and {y.shape}")
    if not (isinstance(min_points, (int, np.integer)) and min_points >= 2):
        raise ValueError(f"min_points must be an integer >= 2 (a line has two parameters); received {min_points!r}")
    ok = np.isfinite(x) & np.isfinite(y)
    if log_x:
        ok &= x > 0
    if log_y:
        ok &= y > 0
    if not drop_invalid and not ok.all():
        axes = " (> 0 on a log axis)" if (log_x or log_y) else ""
        raise ValueError(f"x and y must be finite{axes} unless drop_invalid=True; received {int((~ok).sum())} "
                         f"invalid of {ok.size} points")
    m = int(ok.sum())
    if m < min_points:
        return SlopeFit(np.nan, np.nan, np.nan, m)
    X = np.log(x[ok]) if log_x else x[ok]
    Y = np.log(y[ok]) if log_y else y[ok]
    slope, intercept = np.polyfit(X, Y, 1)
    stderr = np.nan
    if m > 2:
        r = Y - (slope * X + intercept)
        stderr = np.sqrt(np.sum(r * r) / (m - 2) / np.sum((X - X.mean()) ** 2))
    return SlopeFit(float(slope), float(intercept), float(stderr), m)


def blowup_horizon(system, X0, t_final, fraction, rtol=1e-6):
    """End time of a run that may blow up in finite time (flat dynamics with exp kernels).

    A probe run (no observables, ``rtol``) goes from ``X0`` to ``t_final``.  If it stops early
    (status != 0) at ``t_blowup``, the run should stop at ``fraction * t_blowup``; otherwise at
    ``t_final``.

    Parameters
    ----------
    system : meanfield.ParticleSystem
    X0 : ndarray, shape (n, d)
    t_final : float
        The intended end time.
    fraction : float in (0, 1]
    rtol : float
        Relative tolerance of the probe run.

    Returns
    -------
    t_end : float
        ``fraction * t_blowup`` or ``t_final``.
    t_blowup : float or None
        Where the probe stopped; ``None`` if it reached ``t_final``.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1]; received {fraction!r}")
    probe = mf.solve_particles(system, X0, t_final, observe=False, progress=False, rtol=rtol)
    if probe.status == 0:
        return t_final, None
    return fraction * probe.t_final, probe.t_final


def main(run, report, default_out: Path, doc: str = ""):
    """Command line of a study: ``--quick`` and ``--out DIR`` (default: the study's output/)."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0] if doc else None)
    p.add_argument("--quick", action="store_true", help="small fast version (what the tests run)")
    p.add_argument("--out", type=Path, default=None, help=f"output folder (default {default_out})")
    args = p.parse_args()
    out = args.out or (default_out if not args.quick else default_out.parent / "output-quick")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    summary = run(out, quick=args.quick)
    path = report(out, out)
    print(json.dumps(_plain(summary), indent=2))
    print(f"report: {path} ({time.perf_counter() - t0:.1f} s)")
