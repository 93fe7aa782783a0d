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
from meanfield.core.options import SaveAt, StepControl

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
    probe = mf.solve_particles(system, X0, t_final, step=StepControl(rtol=rtol), save=SaveAt(observe=False),
                               progress=False)
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


# ------------------------------------------------------------------ dense output and intervals
# (added for studies/radial_dominance_invariance and studies/late_dominance)
def mean_ci(x, axis=-1, level=0.95):
    """Mean over ``axis`` and the half-width of its Student-t confidence interval (NaN-free input;
    vectorized: :func:`mean_ci95` is the NaN-dropping scalar form)."""
    from scipy import stats

    x = np.asarray(x, float)
    k = x.shape[axis]
    half = stats.t.ppf(0.5 + level / 2, k - 1) * x.std(axis=axis, ddof=1) / np.sqrt(k)
    return x.mean(axis=axis), half


def mean_ci95(x):
    """``(mean, half-width)`` of the Student-t 95 % confidence interval of the finite entries of ``x``.

    The half-width is ``nan`` for fewer than two finite values; the mean is ``nan`` for none.
    """
    from scipy import stats

    x = np.asarray(x, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return np.nan, np.nan
    if x.size == 1:
        return float(x[0]), np.nan
    return float(x.mean()), float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))


def wilson95(k, m):
    """Wilson 95 % score interval ``(low, high)`` of a proportion ``k / m`` (``m >= 1``)."""
    if m < 1:
        raise ValueError(f"m must be >= 1; received {m!r}")
    z, p = 1.959963984540054, k / m
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    half = z * np.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / (1 + z * z / m)
    return float(centre - half), float(centre + half)


@dataclass(frozen=True)
class DenseRun:
    """A particle trajectory with dense output (:func:`dense_particle_run`).

    ``t_steps`` are the integrator's accepted step times; ``state(t)`` the tokens at any ``t`` in
    ``[0, t_final]`` (the driver's cubic Hermite interpolant; rows renormalized onto the sphere for spherical
    systems, the largest correction over the step times is ``max_drift``).
    """

    sol: object
    n: int
    d: int
    sphere: bool
    t_steps: np.ndarray
    t_final: float
    max_drift: float

    def state(self, t):
        X = np.asarray(self.sol(float(t))).reshape(self.n, self.d)
        return X / np.linalg.norm(X, axis=1, keepdims=True) if self.sphere else X

    def sample_times(self, per_step):
        """The step times plus ``per_step - 1`` equispaced times inside every step."""
        t = self.t_steps
        if per_step <= 1 or t.size < 2:
            return t.copy()
        frac = np.arange(per_step) / per_step
        inner = (t[:-1, None] + frac[None, :] * np.diff(t)[:, None]).ravel()
        return np.append(inner, t[-1])


def dense_particle_run(system, X0, t_final, rtol=1e-11, atol=1e-13, method="dopri5", event=None):
    """Integrate ``system`` (uniform weights) from ``X0`` with :func:`meanfield.integrate` and dense output.

    Event times found from it do not depend on an output grid: they are roots of continuous
    functions of the dense interpolant (:func:`first_sign_change`).  ``event``: an optional
    :class:`meanfield.core.dense.Event` on the (n, d) state (``terminal=True`` stops the run at its
    root, located on the interpolant).  ``method``: an adaptive scheme of ``meanfield.METHODS``.

    Returns
    -------
    DenseRun
    """
    X0 = np.asarray(X0, dtype=float)
    n, d = X0.shape
    tr = mf.integrate(system.rhs, X0, (0.0, float(t_final)), method=method, step=StepControl(rtol=rtol, atol=atol),
                      save=SaveAt(dense=True, states=False), events=() if event is None else [event], progress=False)
    if not tr.success:
        raise RuntimeError(f"integrate failed: {tr.message}")
    sphere = system.geometry == "sphere"
    Y = tr.dense.y
    drift = float(np.abs(np.linalg.norm(Y, axis=2) - 1).max()) if sphere else 0.0
    return DenseRun(tr.dense, n, d, sphere, np.asarray(tr.dense.t), float(tr.t_final), drift)


def first_sign_change(fun, run, per_step=4, xtol=1e-12):
    """First time the continuous scalar ``fun(X)`` of the tokens of ``run`` becomes negative.

    ``fun`` is sampled at :meth:`DenseRun.sample_times` (``per_step`` points per accepted step);
    the first sample where it is negative is refined by Brent's method on the dense interpolant
    between it and the previous sample.

    Returns
    -------
    t_first : float
        ``0.0`` if ``fun < 0`` at ``t = 0``, ``inf`` if never negative at the samples.
    reentered : bool
        ``fun >= 0`` again at a later sample after its first negative one.
    samples : (times, values)
    """
    from scipy import optimize

    ts = run.sample_times(per_step)
    vals = np.array([fun(run.state(t)) for t in ts])
    neg = vals < 0
    if not neg.any():
        return np.inf, False, (ts, vals)
    k = int(np.argmax(neg))
    reentered = bool((~neg[k:]).any())
    if k == 0:
        return 0.0, reentered, (ts, vals)
    root = optimize.brentq(lambda t: fun(run.state(t)), ts[k - 1], ts[k], xtol=xtol)
    return float(root), reentered, (ts, vals)
