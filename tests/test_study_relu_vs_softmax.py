"""Quick mode of studies/relu_vs_softmax: runs, reports, and reproduces its key numbers."""

import numpy as np
from _study_helpers import quick_study_fixture

from studies._common import load_json

study = quick_study_fixture("relu_vs_softmax", with_report=True)   # (out, summary, report path)


def test_outputs_written(study):
    out, summary, path = study
    for name in ("data.npz", "data.json", "times_vs_n.png", "times_vs_d.png", "report.md"):
        assert (out / name).is_file()
    text = path.read_text()
    assert "| claim | what we measured | verdict |" in text
    # the JSON on disk is the returned summary (same fits, to JSON's float round trip)
    fits = load_json(out / "data.json")["fits"]
    assert abs(fits["linearized/exp-softmax/loglog_n"] - summary["fits"]["linearized/exp-softmax/loglog_n"]) <= 1e-15


def test_linearized_scalings(study):
    _, s, _ = study
    f = s["fits"]
    # T = (e + n - 1) / 4: over n = 16..4096 the offset e - 1 bends the log-log slope to ~0.984
    assert abs(f["linearized/exp-softmax/loglog_n"] - 1) <= 0.03
    # ReLU-mean linearized T = (n/4) ln d - (n/2) ln 2 exactly: slopes 1 (in n) and 1/4 (T/n vs ln d);
    # only least-squares round-off separates them from the exact values
    assert abs(f["linearized/relu-mean/loglog_n"] - 1) <= 1e-9
    assert abs(f["linearized/relu-mean/Tn_vs_logd"] - 0.25) <= 1e-9
    # softmax-normalized ReLU: no n anywhere in the rate (theory author's note); exact zero up to round-off
    assert abs(f["linearized/relu-softmax/loglog_n"]) <= 1e-9
    assert abs(f["nonlinear/relu-softmax/loglog_n"]) <= 1e-9


def test_nonlinear_softmax_grows_like_log_n(study):
    _, s, _ = study
    T = np.array(list(s["nonlinear_softmax_times"].values()))
    # MODEL.md quotes 1.5, 2.1, 2.8, 3.5, 4.2 (one decimal): rounding tolerance 0.05
    np.testing.assert_allclose(T, [1.5, 2.1, 2.8, 3.5, 4.2], rtol=0, atol=0.05)
    # slope against ln n ~ 1/2 (measured 0.48 over n = 16..4096; 0.05 covers the finite-n curvature)
    assert abs(s["fits"]["nonlinear/exp-softmax/vs_logn"] - 0.5) <= 0.05
    # and far from O(n): log-log slope well below 1 (measured 0.18)
    assert s["fits"]["nonlinear/exp-softmax/loglog_n"] < 0.3


def test_random_tokens_follow_nonlinear_not_linearized(study):
    out, _, _ = study
    z = np.load(out / "data.npz")
    pT, th, pd = z["particle_T"], z["theory_at_particles"], z["particle_d"]
    j = int(np.flatnonzero(pd == 16)[0])
    soft = pT[0, :, j, 0]                  # exp-softmax, d = 16, seed 0, n = 16, 32
    # random tokens in d >= n are nearly orthogonal: their time is within ~15% of the nonlinear ODE
    # from gamma0 = 0 (measured ratios 1.13, 0.95); 0.7..1.5 leaves room for seed-to-seed spread
    ratio = soft / th[0, 1, :, j]
    assert np.all((ratio > 0.7) & (ratio < 1.5))
    # ... and at most half the linearized time (measured 0.39, 0.21 of it)
    assert np.all(soft < 0.5 * th[0, 0, :, j])
    # ReLU (mean) is slower than softmax for the same tokens (measured factor ~6 at d = 16)
    assert np.all(pT[2, :, j, 0] > 2 * soft)


def test_span_run_equals_full_dimensional_run():
    from studies.relu_vs_softmax.run import horizon_for, particle_time, span_particle_time
    # scalar heads keep the tokens in their span, so the n-dimensional run is the d-dimensional one;
    # both integrate to rtol 1e-7 and interpolate the crossing linearly: 1e-5 relative leaves 100x rtol
    for kernel, norm in (("relu", "mean"), ("exp", "softmax")):
        a = particle_time(kernel, norm, 8, 48, 0, horizon_for(8, 48))["T"]
        b = span_particle_time(kernel, norm, 8, 48, 0, horizon_for(8, 48))["T"]
        assert abs(a / b - 1) < 1e-5


def test_first_order_softmax_linearization_is_logarithmic():
    from studies.relu_vs_softmax.run import first_order_softmax_time
    n = np.array([1024, 4096, 16384])
    T = np.array([first_order_softmax_time(int(k)) for k in n])
    # large n: T -> ln(1 + n/2)/(2 lambda), slope 1/2 against ln n; the finite-n corrections of a and b
    # leave a slope of 0.496 over n = 1024..16384 (tolerance 0.01) and a gap to the asymptote that
    # shrinks (1.0e-2, 3.2e-3, 9.6e-4): at n = 16384 it must be below 2e-3
    assert abs(np.polyfit(np.log(n), T, 1)[0] - 0.5) < 0.01
    gap = np.abs(T - np.log(1 + n / 2) / 2)
    assert np.all(np.diff(gap) < 0) and gap[-1] < 2e-3
    # exact against the closed form of the linear ODE a + b gamma solved independently (round-off only)
    e, k = np.e, 64
    a = 2 / (e + k - 1)
    b = 2 * (e / (e + k - 1) ** 2 + (k - 2) / (e + k - 1))
    assert abs(first_order_softmax_time(k) - np.log(1 + b * 0.5 / a) / b) < 1e-12


def test_high_dimension_relu_grows_with_d(study):
    out, _, _ = study
    z = np.load(out / "data_highd.npz")
    T = z["T"][2, 0]       # relu-mean, n = 8, d = 256 and 4096, quick seeds
    means = [np.mean(row[np.isfinite(row)]) for row in T]
    # sqrt(d) > n: the linearized time (n/4) ln d grows by 2 ln 16 = 5.5 from d = 256 to 4096; the
    # quick runs grow by ~3 (nonlinear speed-up); requiring +1 separates growth from seed noise (~0.5)
    assert means[1] - means[0] > 1.0


def test_particle_seed_fits_mean_and_interval():
    from studies.relu_vs_softmax.run import COMBOS, particle_seed_fits
    pn, pd = np.array([16, 32, 64]), np.array([4, 16, 64])
    rng = np.random.default_rng(0)
    slopes = np.array([0.2, 0.4, 0.3, 0.5])                     # one exact power law n^a per seed
    T = np.empty((len(COMBOS), 3, 3, 4))
    for k, a in enumerate(slopes):
        T[..., k] = rng.uniform(1, 2) * pn[None, :, None] ** a * np.log(pd)[None, None, :]
    T[1, :, 0, :] = np.inf                                      # a combo whose d = 4 runs never reach the target
    T[1, -1, :, 3] = np.inf                                     # ... and one seed without any run at the largest n
    f = particle_seed_fits(T, pn, pd)
    # per-seed log-log slopes are exact (round-off, 1e-12); their mean and t-interval (t_0.975,3 = 3.182)
    v = f["exp-softmax/loglog_n"]
    assert v["seeds"] == 4 and abs(v["mean"] - 0.35) < 1e-12
    assert abs(v["ci95"] - 3.182446305284263 * slopes.std(ddof=1) / 2) < 1e-9
    # T / n_max against ln d with T ~ ln d: slope = n_max^a / n_max * c per seed -> positive, 4 seeds
    assert f["exp-softmax/Tn_vs_logd"]["seeds"] == 4 and f["exp-softmax/Tn_vs_logd"]["mean"] > 0
    # unreached runs are left out: the d-fit of seed 3 at the largest n has no point left, the others keep 2
    assert f["exp-mean/loglog_d"]["seeds"] == 3
    assert f["exp-mean/loglog_n"]["seeds"] == 4 and abs(f["exp-mean/loglog_n"]["mean"] - 0.35) < 1e-12


def test_censored_median_and_bootstrap():
    from studies.relu_vs_softmax.run import censored_median, median_summary
    # runs that never reach the target are inf: the median counts them (it is not the median of the rest)
    T = np.array([1.0, 2.0, 3.0, 4.0, np.inf, np.inf])
    assert censored_median(T) == 3.5                      # the reached-only median would be 2.5
    assert np.isinf(censored_median(np.array([1.0, 2.0, np.inf, np.inf])))    # half censored: not reached
    s = median_summary(np.array([[1.0, 2.0, 3.0, 4.0, 5.0, np.inf, np.inf, np.inf]]), n_boot=500)
    assert s["censored"][0] == 3 / 8 and s["median"][0] == 4.5
    # bootstrap resamples can censor half the runs: the interval is then open above (no inf - inf)
    assert s["lo"][0] <= 4.5 and np.isinf(s["hi"][0])
    # no censoring, no scatter: a zero-width interval at the value
    z = median_summary(np.full((2, 10), 7.0), n_boot=200)
    assert np.all(z["lo"] == 7.0) and np.all(z["hi"] == 7.0) and np.all(z["censored"] == 0)


def test_ln_d_analysis_linear_and_curved():
    from studies.relu_vs_softmax.run import ln_d_analysis
    d = np.array([256, 1024, 4096, 16384])
    rng = np.random.default_rng(3)
    x = np.log(d)
    lin = (2.0 * x)[:, None] + 0.05 * rng.standard_normal((4, 10))
    a = ln_d_analysis(lin, d, n_boot=400)
    # T = 2 ln d + noise 0.05: slope 2 within the bootstrap interval, every local slope near 2
    # (noise / ln 4 ~ 0.04), curvature interval containing 0, the whole range linear
    assert a["slope"]["lo"] < 2 < a["slope"]["hi"]
    assert all(abs(r["value"] - 2) < 0.15 for r in a["local"])
    assert [r["d"] for r in a["linear_ranges"]] == [[256, 16384]]
    assert abs(a["ols_quadratic"]["value"]) < a["ols_quadratic"]["ci95"] + 0.01 and a["ols_quadratic"]["df"] == 37
    curved = (0.5 * x ** 2)[:, None] + 0.05 * rng.standard_normal((4, 10))
    b = ln_d_analysis(curved, d, n_boot=400)
    # T = (ln d)^2 / 2: curvature 0.5 recovered (noise 0.05 on a second difference over (ln 4)^2 ~ 1.9),
    # no range linear, local slopes rising (ln d at the midpoints: 6.2, 7.6, 9.0)
    assert abs(b["curvature"][0]["value"] - 0.5) < 0.02 and b["curvature"][0]["lo"] > 0
    assert b["linear_ranges"] == [] and np.all(np.diff([r["value"] for r in b["local"]]) > 1)
    # censored runs: the median keeps them, the OLS (which would drop them) is not offered
    cens = lin.copy()
    cens[0, :3] = np.inf
    c = ln_d_analysis(cens, d, n_boot=400)
    assert c["censored"][0] == 0.3 and "ols_quadratic" not in c and c["median"][0] > np.median(lin[0])


def test_grid_median_fits_drop_censored_cells():
    from studies.relu_vs_softmax.run import COMBOS, grid_median_fits
    pn, pd = np.array([16, 32, 64]), np.array([4, 16, 64])
    T = np.ones((len(COMBOS), 3, 3, 6)) * (pn[None, :, None, None] ** 0.3) * np.log(pd)[None, None, :, None]
    T[2, -1, 0, :4] = np.inf          # relu-mean, n = 64, d = 4: 4 of 6 censored -> no median, dropped
    f = grid_median_fits(T, pn, pd, n_boot=200)
    # exact power laws: the slopes on the medians are exact (round-off), zero-width intervals
    assert abs(f["exp-softmax/loglog_n"]["value"] - 0.3) < 1e-12 and f["exp-softmax/loglog_n"]["dropped"] == []
    assert abs(f["exp-softmax/loglog_n"]["hi"] - 0.3) < 1e-12
    assert f["relu-mean/loglog_d"]["dropped"] == ["n=64, d=4"] and np.isfinite(f["relu-mean/loglog_d"]["value"])
