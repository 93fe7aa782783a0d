"""Statistics of the continuum-scale study computed from the per-seed arrays of ``data.npz``.

The report recomputes its fits here (the ~3 h run is not repeated): per-seed regressions with
Student-t intervals on the right degrees of freedom, local slopes between neighbouring n, the
AKT offset ``n W2^2 - ln n`` per n, per-seed growth rates in time, and the model-comparison rule
(a difference of AIC below 2 is no preference).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

DAIC_MIN = 2.0   # the project's rule: |dAIC| < 2 is no preference between two models


def _t(df, level=0.95):
    return float(stats.t.ppf(0.5 + level / 2, df)) if df >= 1 else np.nan   # df = inf: the normal quantile


def seed_fit(ns, V, keep=None):
    """Slope of ``log V`` against ``log n`` from per-seed values ``V`` (n, seeds; NaN = missing).

    Two fits of the same line: on every (n, seed) value (``df = points - 2``; the scatter within
    each n estimates the noise) and on the per-n means of ``log V`` (``df = #n - 2``, the honest
    count when the seeds' scatter is not trusted).  ``keep``: boolean mask over ``ns`` (default all).
    Returns a dict with ``slope``, ``stderr``, ``df``, ``ci95`` (half-width, t quantile), ``points``,
    ``n_values`` and ``means_slope``, ``means_stderr``, ``means_df``, ``means_ci95``; NaN where a fit
    has no degree of freedom.
    """
    ns, V = np.asarray(ns, float), np.asarray(V, float)
    keep = np.ones(ns.size, bool) if keep is None else np.asarray(keep, bool)
    x, y, xm, ym = [], [], [], []
    for i in np.flatnonzero(keep):
        v = V[i][np.isfinite(V[i]) & (V[i] > 0)]
        if v.size:
            x += [np.log(ns[i])] * v.size
            y += list(np.log(v))
            xm.append(np.log(ns[i]))
            ym.append(np.mean(np.log(v)))
    out = {"n_values": [int(round(np.exp(a))) for a in xm], "points": len(x)}
    for pre, X, Y in (("", x, y), ("means_", xm, ym)):
        X, Y = np.asarray(X), np.asarray(Y)
        m = X.size
        if m < 2 or np.ptp(X) == 0:
            out.update({f"{pre}slope": np.nan, f"{pre}stderr": np.nan, f"{pre}df": max(m - 2, 0),
                        f"{pre}ci95": np.nan})
            continue
        slope, icpt = np.polyfit(X, Y, 1)
        df = m - 2
        se = np.sqrt(np.sum((Y - slope * X - icpt) ** 2) / df / np.sum((X - X.mean()) ** 2)) if df else np.nan
        out.update({f"{pre}slope": float(slope), f"{pre}stderr": float(se), f"{pre}df": df,
                    f"{pre}ci95": float(_t(df) * se) if df else np.nan})
    return out


def local_slopes(ns, V):
    """Slopes of the mean ``log V`` between neighbouring n, with Welch t-intervals (95 %)."""
    ns, V = np.asarray(ns, float), np.asarray(V, float)
    rows = []
    for i in range(ns.size - 1):
        a, b = (np.log(v[np.isfinite(v) & (v > 0)]) for v in (V[i], V[i + 1]))
        if a.size < 2 or b.size < 2:
            continue
        dx = np.log(ns[i + 1] / ns[i])
        va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
        den = va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)
        df = (va + vb) ** 2 / den if den > 0 else np.inf    # no scatter: a zero-width interval
        rows.append({"n": [int(ns[i]), int(ns[i + 1])], "slope": float((b.mean() - a.mean()) / dx),
                     "ci95": float(_t(df) * np.sqrt(va + vb) / dx), "df": float(df)})
    return rows


def akt_offset(ns, V):
    """``n W2^2 - ln n`` per n (mean, 95 % t half-width, sd, seeds) and a one-way ANOVA of its constancy.

    On a compact 2-d manifold of area ``4 pi`` the i.i.d. empirical measure of a density bounded away
    from zero has ``E W2^2 = (ln n + c + o(1)) / n`` (Ajtai-Komlos-Tusnady; Ambrosio, Stra and Trevisan
    2019 for the constant), so this offset must be flat in n at t = 0 if every n is computed alike.
    """
    ns, V = np.asarray(ns, float), np.asarray(V, float)
    groups, rows = [], []
    for i, n in enumerate(ns):
        v = V[i][np.isfinite(V[i])]
        if v.size < 2:
            continue
        c = n * v ** 2 - np.log(n)
        groups.append(c)
        rows.append({"n": int(n), "mean": float(c.mean()), "ci95": float(_t(c.size - 1) * c.std(ddof=1) / np.sqrt(c.size)),
                     "sd": float(c.std(ddof=1)), "seeds": int(c.size)})
    p = float(stats.f_oneway(*groups).pvalue) if len(groups) >= 2 else np.nan
    last = {}
    if len(groups) >= 2:   # the largest n against all the others pooled (Welch)
        rest = np.concatenate(groups[:-1])
        w = stats.ttest_ind(groups[-1], rest, equal_var=False)
        last = {"n": rows[-1]["n"], "others_mean": float(rest.mean()), "difference": float(groups[-1].mean() - rest.mean()),
                "welch_p": float(w.pvalue)}
    return {"rows": rows, "anova_p": p, "largest_vs_others": last}


def same_method(method, values):
    """Per n (first axis): True where every computed value (finite in ``values``) has method 0 (semi-discrete)."""
    method, values = np.asarray(method), np.asarray(values)
    return np.array([bool(np.all(method[i][np.isfinite(values[i])] == 0)) for i in range(values.shape[0])])


def growth_rates(times, D, rows):
    """Per-seed growth rates of ``log D`` in time (least squares over the window) for the n indices ``rows``;
    their mean with a 95 % t-interval over all those seeds (``df = seeds - 1``)."""
    r = []
    for i in rows:
        for s in range(D.shape[1]):
            y = D[i, s]
            ok = np.isfinite(y) & (y > 0)
            if ok.sum() >= 3:
                r.append(np.polyfit(np.asarray(times)[ok], np.log(y[ok]), 1)[0])
    r = np.asarray(r)
    if r.size < 2:
        return {"mean": np.nan, "ci95": np.nan, "seeds": int(r.size)}
    return {"mean": float(r.mean()), "ci95": float(_t(r.size - 1) * r.std(ddof=1) / np.sqrt(r.size)),
            "seeds": int(r.size)}


def preference(fit):
    """The model comparison in words: the preferred model only where |dAIC| >= 2."""
    if "aic_difference" not in fit:
        return "not fitted"
    if fit["aic_difference"] < DAIC_MIN:
        return f"no preference (dAIC {fit['aic_difference']:.1f} < {DAIC_MIN:g})"
    return f"prefers {fit['preferred']} (dAIC {fit['aic_difference']:.1f})"


def residual_correlation(A, B, rows):
    """Pearson correlation of the per-seed deviations of ``log A`` and ``log B`` from their per-n means,
    pooled over the n indices ``rows`` (A, B: (n, seeds) of the same tokens); with its p-value and count.

    Measures whether two statistics of the same token sets move together (e.g. W2 at two times, or
    W2 and the MMD at one time): a per-n mean that sits high in one then sits high in the other."""
    x, y = (np.log(np.asarray(V, float)[rows]) for V in (A, B))
    x, y = x - np.nanmean(x, axis=1, keepdims=True), y - np.nanmean(y, axis=1, keepdims=True)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return {"r": np.nan, "p": np.nan, "points": int(ok.sum())}
    r = stats.pearsonr(x[ok], y[ok])
    return {"r": float(r.statistic), "p": float(r.pvalue), "points": int(ok.sum())}


def mmd_adjusted(W, M0, mmd_iid, rows):
    """``log W`` with the t = 0 MMD of the same tokens as a control variate: ``log W - beta u``.

    ``u = log MMD(t=0) - (1/2) log E_iid MMD^2`` measures how far each seed's token sample is from a
    typical i.i.d. sample (``E_iid MMD^2`` is exact, closed form; for i.i.d. samples ``n MMD^2`` has an
    n-independent limit law, so the mean of ``u`` is the same at every large n and drops out of slopes).
    ``beta``: the pooled within-n least-squares slope of ``log W`` on ``u`` over the n indices ``rows``.
    Returns ``(beta, exp(log W - beta u))`` (n, seeds), to be fitted like ``W``.
    """
    lw = np.log(np.asarray(W, float))
    u = np.log(np.asarray(M0, float)) - 0.5 * np.log(np.asarray(mmd_iid, float))[:, None]
    x = u[rows] - np.nanmean(u[rows], axis=1, keepdims=True)
    y = lw[rows] - np.nanmean(lw[rows], axis=1, keepdims=True)
    ok = np.isfinite(x) & np.isfinite(y)
    beta = float(np.sum(x[ok] * y[ok]) / np.sum(x[ok] ** 2))
    return beta, np.exp(lw - beta * u)
