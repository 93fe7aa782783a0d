"""meanfield.analysis.head_measures: the paper's hypotheses measured on heads with known answers.

Orthogonal blocks (delta = 0), approximately orthogonal heads (delta as requested), V = +-M (alignment +-1),
symmetric / antisymmetric / scalar heads, the closed-form effective beta of scalar heads, factored against dense
heads, trajectory measures on short particle runs (energy monotone for symmetric value-aligned heads; V = -M and
per-head energies on the sphere as counterexamples; Condition 8 switching at the closed-form beta*), and bad inputs
refused by name.  Library tier: a few seconds.
"""

import numpy as np
import pytest
import xarray as xr

import meanfield as mf
from meanfield.analysis import diagnostics
from meanfield.analysis import head_measures as hm
from meanfield.analysis.theory import beta_star
from meanfield.core.heads import Head, approx_orthogonal_heads, orthogonal_block_heads, scalar_heads
from meanfield.core.options import SaveAt

EPS = np.finfo(float).eps
# Rounding tolerance of a measure of O(1) matrices of size d <= 64: the QR, SVD and eigenvalue solvers are backward
# stable, so two routes to one number differ by a few d eps times its scale (measured <= 2e-15); 1e-12 leaves a
# factor ~500 for other BLAS blockings and thread counts, and is far below any difference a measure is read for.
RTOL = 1e-12


def _random_factored(d=64, r=8, n_heads=3, seed=0):
    rng = np.random.default_rng(seed)
    return [Head.from_factors(*(rng.standard_normal((d, r)) / np.sqrt(d) for _ in range(4))) for _ in range(n_heads)]


def _dense(heads):
    return [Head(h.M, h.V, h.beta) for h in heads]


# ----------------------------------------------------------------------------------------------- orthogonality
def test_orthogonal_blocks_have_delta_zero():
    heads = orthogonal_block_heads(7, 3, strengths=[1.0, 2.0, -0.5])
    o = hm.orthogonality(heads)
    assert o["delta"] == 0.0 and o["delta_normalized"] == 0.0      # disjoint blocks: every product is an exact 0
    off = ~np.eye(3, dtype=bool)
    assert np.all(o["frobenius_cosine"][off] == 0.0) and np.all(o["value_overlap"][off] == 0.0)
    # the diagonal is |M_h|_2^2 = alpha_h^2; the cosines of a head with itself are 1 (rounding of a ratio)
    assert np.allclose(np.diag(o["overlap"]), [1.0, 4.0, 0.25], rtol=RTOL, atol=0)
    assert np.allclose(np.diag(o["frobenius_cosine"]), 1.0, rtol=RTOL, atol=0)


@pytest.mark.parametrize("d, n_heads, delta, alpha, rank", [(12, 3, 0.3, 1.5, 2), (9, 2, 0.05, 1.0, 3),
                                                            (16, 4, 0.9, 1.0, 1), (8, 3, 0.0, 2.0, 2)])
def test_approx_orthogonal_heads_have_the_requested_delta(d, n_heads, delta, alpha, rank):
    o = hm.orthogonality(approx_orthogonal_heads(d, n_heads, delta, alpha=alpha, rank=rank))
    # |M_g^T M_h|_2 = alpha^2 c = delta, through sqrt(c)^2 and an SVD: rounding of O(alpha^2) numbers
    assert o["delta"] == pytest.approx(delta, rel=0, abs=RTOL * alpha**2)
    # the scale-free overlap is c = delta / alpha^2 (the cosine of the principal angle between the head subspaces)
    assert o["delta_normalized"] == pytest.approx(delta / alpha**2, rel=0, abs=RTOL)
    assert o["value_overlap"] == pytest.approx(o["overlap"], rel=RTOL, abs=RTOL * alpha**2)     # V = M
    off = ~np.eye(n_heads, dtype=bool)
    # every off-diagonal pair has the same overlap: the construction is symmetric in the heads
    assert np.allclose(o["overlap"][off], delta, rtol=0, atol=RTOL * alpha**2)


def test_one_head_has_no_pair():
    o = hm.orthogonality(scalar_heads([2.0], 3))
    assert o["delta"] == 0.0 and o["overlap"].shape == (1, 1) and o["overlap"][0, 0] == pytest.approx(4.0, rel=RTOL)


# ------------------------------------------------------------------------------- alignment, symmetry, spectrum
def test_alignment_of_aligned_and_opposite_values():
    rng = np.random.default_rng(1)
    M = rng.standard_normal((6, 6))
    S = 0.5 * (M + M.T)
    # cosines of a matrix with itself or its negative: +-1 to the rounding of a ratio of O(1) sums
    assert hm.alignment(Head(M, M))["cosine"] == pytest.approx(1.0, abs=RTOL)
    assert hm.alignment(Head(M, -M))["cosine"] == pytest.approx(-1.0, abs=RTOL)
    assert hm.alignment(Head(M, S))["cosine_sym"] == pytest.approx(1.0, abs=RTOL)
    assert hm.alignment(Head(M, -S))["cosine_sym"] == pytest.approx(-1.0, abs=RTOL)
    # V = M with M not symmetric: cos(V, sym M) = |sym M|_F / |M|_F, the symmetry of M
    assert hm.alignment(Head(M, M))["cosine_sym"] == pytest.approx(hm.symmetry(Head(M, M)), abs=RTOL)


def test_symmetry_of_symmetric_antisymmetric_gaussian_and_scalar_heads():
    rng = np.random.default_rng(2)
    G = rng.standard_normal((200, 200))
    S, A = G + G.T, G - G.T
    assert hm.symmetry(Head(S, S)) == pytest.approx(1.0, abs=RTOL)
    # antisymmetric: |sym M|_F^2 = (|M|^2 + <M, M^T>) / 2 cancels exactly, a root of rounding at worst: sqrt(eps)
    assert hm.symmetry(Head(A, A)) == pytest.approx(0.0, abs=10 * np.sqrt(EPS))
    assert np.isnan(hm.alignment(Head(A, A))["cosine_sym"])      # sym(A) = 0: the cosine is undefined
    # Gaussian: |sym G|^2 / |G|^2 = (1 + <G, G^T> / |G|^2) / 2, the ratio ~ N(0, sqrt(2) / d): 0.02 is ~8 sigma
    assert hm.symmetry(Head(G, G)) == pytest.approx(1 / np.sqrt(2), abs=0.02)
    lam = scalar_heads([-1.5], 5)[0]
    assert hm.symmetry(lam) == pytest.approx(1.0, abs=RTOL) and hm.alignment(lam)["cosine"] == pytest.approx(1.0)


def test_spectrum_of_known_heads():
    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    lams = np.array([2.0, 1.0, 0.0, -0.5, -3.0])
    M = Q @ np.diag(lams) @ Q.T
    s = hm.spectrum(Head(M, M))
    # eigenvalues of a symmetric matrix built from them: backward-stable eigvalsh, rounding of |M|_2 = 3
    assert np.allclose(s["sym_eigenvalues"], lams, rtol=0, atol=RTOL * 3)
    assert np.allclose(s["singular_values"], np.sort(np.abs(lams))[::-1], rtol=0, atol=RTOL * 3)
    s = hm.spectrum(scalar_heads([-1.5], 4)[0])
    assert np.array_equal(s["sym_eigenvalues"], np.full(4, -1.5)) and np.array_equal(s["singular_values"],
                                                                                      np.full(4, 1.5))
    # an antisymmetric head: sym(M) = 0, singular values in pairs
    A = np.array([[0.0, 2.0, 0.0], [-2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    s = hm.spectrum(Head(A, A))
    assert np.array_equal(s["sym_eigenvalues"], np.zeros(3)) and np.allclose(s["singular_values"], [2, 2, 0])


# -------------------------------------------------------------------------------------------- effective beta
@pytest.mark.parametrize("lam, beta, d", [(1.0, 1.0, 8), (-0.5, 2.0, 16), (0.25, 0.1, 384)])
def test_effective_beta_of_scalar_heads(lam, beta, d):
    head = scalar_heads([lam], d, beta=beta)[0]
    # closed forms, exact up to the rounding of an SVD of a diagonal matrix and of beta d |lam| c^2
    assert hm.effective_beta(head) == pytest.approx(beta * d * abs(lam), rel=RTOL)
    assert hm.effective_beta(head, gain=np.full(d, 0.5)) == pytest.approx(beta * d * abs(lam) * 0.25, rel=RTOL)
    g = np.linspace(0.5, 2.0, d)          # |diag(g) lam I diag(g)|_2 = |lam| max g^2
    assert hm.effective_beta(head, gain=g) == pytest.approx(beta * d * abs(lam) * 4.0, rel=RTOL)
    assert hm.effective_beta(head, gain=g, radius=3.0) == pytest.approx(beta * 9.0 * abs(lam) * 4.0, rel=RTOL)


# ----------------------------------------------------------------------------------------- factored vs dense
def test_factored_and_dense_heads_agree():
    fh = _random_factored(d=64, r=8, n_heads=3)
    dh = _dense(fh)
    assert all(h.factors is not None for h in fh) and all(h.factors is None for h in dh)
    of, od = hm.orthogonality(fh), hm.orthogonality(dh)
    scale = max(np.abs(od["overlap"]).max(), 1.0)
    for key in ("overlap", "value_overlap", "overlap_normalized", "frobenius_cosine", "delta", "delta_normalized"):
        assert np.allclose(of[key], od[key], rtol=0, atol=RTOL * scale), key
    g = np.random.default_rng(4).uniform(0.5, 1.5, 64)
    for f, d in zip(fh, dh):
        assert hm.symmetry(f) == pytest.approx(hm.symmetry(d), abs=RTOL)
        for key in ("cosine", "cosine_sym"):
            assert hm.alignment(f)[key] == pytest.approx(hm.alignment(d)[key], abs=RTOL)
        sf, sd = hm.spectrum(f), hm.spectrum(d)
        for key in sf:           # the factored head's d - 2r (d - r) null values are exact zeros, the dense ~eps
            assert np.allclose(sf[key], sd[key], rtol=0, atol=RTOL * sd["singular_values"][0]), key
        assert hm.effective_beta(f, g) == pytest.approx(hm.effective_beta(d, g), rel=RTOL)
    # and the whole table
    tf, td = hm.head_table(fh, gain=g), hm.head_table(dh, gain=g)
    assert np.array_equal(tf.rank_bound, [8, 8, 8]) and np.array_equal(td.rank_bound, [64, 64, 64])
    xr.testing.assert_allclose(tf.drop_vars("rank_bound"), td.drop_vars("rank_bound"), rtol=0, atol=RTOL * scale)


def test_head_table_is_self_describing():
    heads = approx_orthogonal_heads(12, 3, 0.3, alpha=1.5, rank=2)
    ds = hm.head_table(heads, n_spectrum=3)
    assert dict(ds.sizes) == {"head": 3, "head_pair": 3, "eig": 3, "dim": 12}
    assert ds.attrs["kind"] == "head_table" and "Theorem 39" in ds.attrs["theorem_delta"]
    assert ds.attrs["delta"] == pytest.approx(0.3, abs=RTOL) and ds.attrs["radius"] == pytest.approx(np.sqrt(12))
    for name, var in ds.data_vars.items():
        assert var.attrs.get("long_name") and var.attrs.get("units") == "1", name
    # symmetric value-aligned heads: symmetry and alignment 1 (rounding of a ratio)
    assert np.allclose(ds.symmetry, 1.0, atol=RTOL) and np.allclose(ds.alignment, 1.0, atol=RTOL)
    # M = alpha U U^T with orthonormal U: eigenvalues alpha (rank times) and 0; |M_h|_2^2 = alpha^2 on the diagonal
    assert np.allclose(ds.sym_eig_top, [1.5, 1.5, 0.0], atol=RTOL) and np.allclose(ds.sym_eig_bottom, 0.0, atol=RTOL)
    assert np.allclose(np.diag(ds.overlap), 2.25, rtol=RTOL)
    # effective beta: beta d |M|_2 = beta d alpha
    assert np.allclose(ds.effective_beta, 12 * 1.5, rtol=RTOL)


def test_a_transformer_sized_factored_table_is_cheap():
    # d = 384, rank 32, 12 heads (a MiniLM layer): O(d r^2) per pair, well under a second (~0.06 s measured)
    fh = _random_factored(d=384, r=32, n_heads=12, seed=5)
    ds = hm.head_table(fh)
    assert ds.sizes["head"] == 12 and np.all(ds.rank_bound == 32) and np.all(np.isfinite(ds.overlap))


# ---------------------------------------------------------------------------------------------- trajectories
def _run(heads, t_final, n=12, times=11, seed=3):
    X0 = mf.initial.uniform_sphere(n, heads[0].dim, seed=seed)
    tr = mf.solve_particles(mf.ParticleSystem(heads), X0, t_final,
                            save=SaveAt(t_eval=np.linspace(0.0, t_final, times), observe=False))
    assert tr.status == 0
    return tr


def test_energy_is_monotone_and_tokens_cluster_under_the_gradient_flow():
    heads = scalar_heads([1.0, 0.5], 3, beta=2.0)
    tr = _run(heads, 10.0)
    ds = hm.trajectory_measures(tr.y, heads, times=tr.t)
    assert dict(ds.sizes) == {"time": 11, "head": 2} and np.array_equal(ds.time, tr.t)
    assert bool(ds.energy_monotone) and bool(ds.energy_head_monotone.all())
    # increments: the flow ascends E (MODEL.md section 1); the integrator (rtol 1e-8) can only blur the plateau
    assert np.all(ds.energy_increment[1:] >= -1e-8 * float(ds.energy.max()))
    assert int(ds.n_clusters[0]) == 12 and int(ds.n_clusters[-1]) == 1 and float(ds.min_inner[-1]) > 0.99
    # the measures are the existing functions' (same calls, same numbers)
    system = mf.ParticleSystem(heads)
    assert np.allclose(ds.energy_head[4], system.energies(tr.y[4]), rtol=RTOL, atol=0)
    rd = diagnostics.radial_dominance(system, tr.y[4])
    assert np.allclose(ds.condition8_exact_margin[4], rd["exact_margin"].min(axis=1), rtol=RTOL, atol=0)
    assert np.allclose(ds.entropy[4], diagnostics.attention_entropy(system, tr.y[4]).mean(axis=1), rtol=RTOL)
    # scalar heads M = lambda I: |M_g^T M_h|_2 = |lambda_g lambda_h| at every time
    assert np.allclose(ds.delta, 0.5, rtol=RTOL)
    assert ds.attrs["kind"] == "trajectory_measures" and ds.energy.attrs["units"] == "1"


def test_non_monotone_counterexamples():
    # V = -M: the flow descends E, so E decreases (MODEL.md: measure, do not assume)
    heads = [h.replace(V=-h.M) for h in scalar_heads([1.0, 0.5], 3, beta=2.0)]
    ds = hm.trajectory_measures(_run(heads, 2.0, times=5).y, heads)
    assert not bool(ds.energy_monotone) and np.all(ds.energy_increment[1:] < 0)
    # orthogonal blocks on the sphere: E is monotone but one head's E_h falls (no per-head monotonicity on the
    # sphere, MODEL.md section 1), where its exact rate dE_h/dt < 0 and Condition 8 (sufficient) fails
    heads = orthogonal_block_heads(4, 2, strengths=[1.0, 2.0], beta=2.0)
    ds = hm.trajectory_measures(_run(heads, 10.0).y, heads)
    assert bool(ds.energy_monotone) and list(ds.energy_head_monotone.values) == [False, True]
    assert float(ds.energy_rate_head[0, 0]) < -0.1 and not bool(ds.condition8_exact[0])


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_condition8_switches_at_the_closed_form_beta_star(normalization):
    # two scalar heads of strength 1 at n = d = 8 orthonormal tokens: the norm-bounded reading holds for
    # beta < beta* = 0.732349 and fails above (MODEL.md section 2); 2% on either side is far from round-off
    b = beta_star(2, 8, 1.0)
    assert b == pytest.approx(0.732349, abs=1e-6)
    X = np.eye(8)[None]
    for beta, holds in ((0.98 * b, True), (1.02 * b, False)):
        ds = hm.trajectory_measures(X, scalar_heads([1.0, 1.0], 8, beta=beta, normalization=normalization))
        assert bool(ds.condition8_norm_bounded[0]) is holds
        assert np.all(ds.condition8_norm_bounded_fraction == (1.0 if holds else 0.0))


def test_heads_per_time_and_weights():
    X = np.stack([mf.initial.uniform_sphere(6, 3, seed=s) for s in range(3)])
    per = [scalar_heads([1.0, lam], 3) for lam in (0.5, 1.0, 2.0)]
    w = np.array([0.3, 0.1, 0.1, 0.2, 0.2, 0.1])
    ds = hm.trajectory_measures(X, per, weights=w, times=[0.0, 1.0, 4.0])
    for t, heads in enumerate(per):
        system = mf.ParticleSystem(heads)
        assert np.allclose(ds.energy_head[t], system.energies(X[t], w), rtol=RTOL, atol=0)
        assert float(ds.delta[t]) == pytest.approx(abs(heads[1].scalar), rel=RTOL)
        assert np.allclose(ds.entropy[t], diagnostics.attention_entropy(system, X[t], w) @ w, rtol=RTOL)


# ------------------------------------------------------------------------------------------------ bad inputs
def test_bad_heads_are_refused_by_name():
    h3, h4 = scalar_heads([1.0], 3)[0], scalar_heads([1.0], 4)[0]
    for fn in (hm.orthogonality, hm.head_table):
        with pytest.raises(ValueError, match="heads must be a non-empty"):
            fn([])
        with pytest.raises(ValueError, match="same dimension"):
            fn([h3, h4])
    for fn in (hm.alignment, hm.symmetry, hm.spectrum, hm.effective_beta):
        with pytest.raises(ValueError, match="head must be a meanfield"):
            fn(np.eye(3))
    with pytest.raises(ValueError, match="n_spectrum"):
        hm.head_table([h3], n_spectrum=4)


@pytest.mark.parametrize("gain", [np.ones(2), np.ones(4), [1.0, np.nan, 1.0], [1.0, np.inf, 1.0], "g", [1j, 1, 1]])
def test_bad_gains_are_refused_by_name(gain):
    head = scalar_heads([1.0], 3)[0]
    with pytest.raises(ValueError, match="gain"):
        hm.effective_beta(head, gain=gain)
    with pytest.raises(ValueError, match="gain"):
        hm.head_table([head], gain=gain)


def test_bad_trajectories_are_refused_by_name():
    heads = scalar_heads([1.0, 0.5], 3)
    X = np.stack([mf.initial.uniform_sphere(5, 3, seed=s) for s in range(2)])
    cases = [(X[0], {}, "X must be"), (X[:, :1], {}, "X must have shape"), (X[:0], {}, "X must have shape"),
             (2.0 * X, {}, "X must be unit"), (np.where(X > 0.5, np.nan, X), {}, "X must be"),
             (X, {"heads_per_time": []}, "heads_per_time"),
             (X, {"heads_per_time": [heads]}, "heads_per_time must hold one sequence"),
             (X, {"heads_per_time": [heads, heads[:1]]}, "same number of heads"),
             (X, {"heads_per_time": scalar_heads([1.0], 4)}, "heads_per_time must have the dimension"),
             (X, {"heads_per_time": [heads[0], scalar_heads([1.0], 4)[0]]}, "heads_per_time"),
             (X, {"weights": np.ones(5)}, "weights"), (X, {"weights": np.full(4, 0.25)}, "weights"),
             (X, {"times": [1.0, 0.0]}, "times must be strictly increasing"), (X, {"times": [0.0]}, "times"),
             (X, {"threshold": 2.0}, "threshold"), (X, {"monotone_rtol": -1.0}, "monotone_rtol")]
    for Xc, kw, message in cases:
        kw = {"heads_per_time": heads, **kw}
        with pytest.raises(ValueError, match=message):
            hm.trajectory_measures(Xc, **kw)


def test_trajectory_measures_says_when_the_energy_overflows():
    # beta <x, M y> = 800 > 709: exp overflows float64; the energies are inf (or NaN) and that is said, not silent
    X = mf.initial.uniform_sphere(6, 3, seed=0)
    heads = mf.scalar_heads([1.0], 3, beta=800.0, normalization="softmax")
    with pytest.warns(RuntimeWarning, match="overflow float64"):
        ds = hm.trajectory_measures(X[None], heads)
    assert ds.attrs["energy_overflow"] == 1
    assert np.isfinite(ds["mean_inner"].values).all()        # clustering is unaffected
    ok = hm.trajectory_measures(X[None], mf.scalar_heads([1.0], 3, beta=2.0, normalization="softmax"))
    assert ok.attrs["energy_overflow"] == 0
