"""Factored (low-rank) heads in every direct sum (issue 34, item 1): ``Head.from_factors(A, B, C, D)`` with
``M = A B^T``, ``V = C D^T`` is summed through its factors (scores ``(X A)(Y B)^T``, values ``(Y D) C^T``) and
gives the numbers of the same head built dense, ``Head(h.M, h.V, ...)``; dense heads take exactly the operations
they took before (bit for bit).

Tolerances.  A factored sum forms the same real numbers in another order (``x^T (A (B^T y))`` against
``x^T (M y)`` with ``M = A B^T`` rounded once): every score differs by a few ulps of ``|A^T x| |B^T y|``, and a
kernel ``exp(beta s)`` turns that into a relative difference of a few ``beta |s|`` ulps.  The quantities here are
O(1) sums of O(1) terms at n <= 120, so the measured relative differences are 1e-16..1e-14; the asserted
tolerances are 1e-12 (row-local heads: 100x the largest measured, far from any knife edge, the same with one or
two BLAS threads) and 1e-9 for Sinkhorn heads, whose scalings are solved to ``sinkhorn_tol = 1e-12`` from
kernels that differ by rounding (the two solves may stop one iteration apart: a marginal error of at most the
tolerance, times an O(1) condition).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis import diagnostics as dg
from meanfield.core import sums
from meanfield.core.heads import Head
from meanfield.core.kernels import EXP_LIMIT, KERNELS, NORMALIZATIONS, kernel, score_norm
from meanfield.core.options import SaveAt, StepControl
from meanfield.core.schedules import HeadSchedule, integrate_schedule
from meanfield.core.sums import factored_sides, score_sides, value_sides
from meanfield.models.batched import BatchedSystem
from meanfield.models.particles import ParticleSystem

D, R, P = 8, 3, 2           # token dimension, score rank, value rank (r, p < d: the factored path)
ROW_LOCAL_RTOL = 1e-12      # measured 1e-16..1e-14 relative (see the module docstring)
SINKHORN_RTOL = 1e-9        # solves to 1e-12 from kernels equal to rounding
COMBOS = [(k, n) for k in ("exp", "relu", "sigmoid") for n in ("mean", "softmax", "sinkhorn")
          if not (k == "relu" and n == "sinkhorn")]          # Sinkhorn needs k > 0


def factored_head(rng, kernel="exp", normalization="mean", d=D, r=R, p=P, beta=1.5, kernel_params=None):
    A, B = (rng.standard_normal((d, r)) / np.sqrt(r) for _ in range(2))
    C, Dv = (rng.standard_normal((d, p)) / np.sqrt(p) for _ in range(2))
    return Head.from_factors(A, B, C, Dv, beta=beta, kernel=kernel, normalization=normalization,
                             kernel_params=kernel_params)


def dense_twin(h):
    """The same head built dense: the same M and V (bit for bit), no factors."""
    return Head(h.M, h.V, h.beta, h.kernel, h.normalization, h.kernel_params)


def tokens(rng, n, d=D):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def weights(rng, n):
    w = rng.random(n) + 0.2
    return w / w.sum()


def close(a, b, rtol):
    """``|a - b| <= rtol * max|b|`` entrywise (relative to the largest entry: rows near 0 are not ill-scaled)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    scale = np.abs(b).max()
    assert np.abs(a - b).max() <= rtol * scale, (np.abs(a - b).max() / scale, rtol)


def pair(rng, kernel, normalization, n_heads=2, **kw):
    """A factored head tuple and its dense twins."""
    heads = tuple(factored_head(rng, kernel, normalization, **kw) for _ in range(n_heads))
    return heads, tuple(dense_twin(h) for h in heads)


def rtol_of(normalization):
    return SINKHORN_RTOL if normalization == "sinkhorn" else ROW_LOCAL_RTOL


# ----------------------------------------------------------------------------------- the path taken
def test_factored_heads_take_the_factored_path(rng):
    h = factored_head(rng)
    X = tokens(rng, 10)
    assert h.rank == (R, P) and factored_sides(h) == (True, True)
    T, S, L = score_sides(h, X, X)
    assert T.shape == S.shape == (10, R) and L is h.factors[0]          # (X A)(X B)^T, lifted by A
    TT, ST, LT = score_sides(h, X, X, transpose=True)
    assert TT.shape == (10, R) and LT is h.factors[1]
    W, C = value_sides(h, X)
    assert W.shape == (10, P) and C is h.factors[2]
    # the products are the scores and values to rounding (a few ulps of O(1) numbers)
    np.testing.assert_allclose(T @ S.T, X @ h.M @ X.T, rtol=0, atol=1e-14)
    np.testing.assert_allclose(W @ C.T, X @ h.V.T, rtol=0, atol=1e-14)
    # a dense head, and factors as wide as d (saving nothing), take the dense path: T is X itself
    for g in (dense_twin(h), factored_head(rng, r=D, p=D)):
        assert factored_sides(g) == (False, False)
        T, S, L = score_sides(g, X, X)
        assert T is X and S.shape == (10, D) and L is None
        assert value_sides(g, X)[1] is None
    # one side only: r < d = p
    g = factored_head(rng, r=2, p=D)
    assert factored_sides(g) == (True, False)


def poisoned(h):
    """A copy of a factored head whose dense M and V are NaN: a sum that read them would give NaN."""
    g = copy.copy(h)
    object.__setattr__(g, "M", np.full_like(h.M, np.nan))
    object.__setattr__(g, "V", np.full_like(h.V, np.nan))
    return g


@pytest.mark.parametrize("normalization", ["mean", "softmax", "sinkhorn"])
def test_direct_sums_never_read_the_dense_matrices(rng, normalization):
    heads, twins = pair(rng, "exp", normalization)
    X, w = tokens(rng, 40), weights(rng, 40)
    system = ParticleSystem(heads, summation="direct")
    object.__setattr__(system, "heads", tuple(poisoned(h) for h in heads))      # after construction
    ref = ParticleSystem(twins, summation="direct")
    rtol = rtol_of(normalization)
    close(system.velocity(X, w), ref.velocity(X, w), rtol)
    close(system.energies(X, w), ref.energies(X, w), rtol)
    close(dg.attention_entropy(system, X, w), dg.attention_entropy(ref, X, w), rtol)
    close(system.energy_gradients(X, w), ref.energy_gradients(X, w), rtol)
    if normalization != "sinkhorn":
        close(dg.attention_entropy_rate(system, X, w=w), dg.attention_entropy_rate(ref, X, w=w), rtol)


# ----------------------------------------------------------------------------------- particle sums
@pytest.mark.parametrize("kernel, normalization", COMBOS)
def test_velocities_and_energies_match_the_dense_head(rng, kernel, normalization):
    heads, twins = pair(rng, kernel, normalization)
    X, w = tokens(rng, 60), weights(rng, 60)
    F, Dn = ParticleSystem(heads, summation="direct"), ParticleSystem(twins, summation="direct")
    rtol = rtol_of(normalization)
    for weights_ in (None, w):
        close(F.velocity(X, weights_), Dn.velocity(X, weights_), rtol)
        U, N = F.forces(X, weights_)
        Ud, Nd = Dn.forces(X, weights_)
        close(U, Ud, rtol)
        close(N, Nd, rtol)
        close(F.energies(X, weights_), Dn.energies(X, weights_), rtol)
    if normalization != "sinkhorn" or KERNELS[kernel].log_linear:
        close(F.energy_gradients(X, w), Dn.energy_gradients(X, w), rtol)
        close(F.energy_rates(X, w=w), Dn.energy_rates(X, w=w), rtol)
    # the flat geometry sums the same way (unprojected)
    Ff, Df = ParticleSystem(heads, geometry="flat", summation="direct"), ParticleSystem(twins, geometry="flat",
                                                                                        summation="direct")
    close(Ff.velocity(X, w), Df.velocity(X, w), rtol)


@pytest.mark.parametrize("normalization", ["mean", "softmax", "sinkhorn"])
def test_chunked_sums_match(rng, normalization, monkeypatch):
    """Small chunks (many row blocks) and, for Sinkhorn, the kernel recomputed per application (no cached matrix)."""
    monkeypatch.setattr(sums, "KERNEL_CACHE_BYTES", 1024)
    heads, twins = pair(rng, "exp", normalization)
    X, w = tokens(rng, 120), weights(rng, 120)
    F = ParticleSystem(heads, summation="direct", chunk_bytes=8 * 120 * 7)       # 7 rows per chunk
    Dn = ParticleSystem(twins, summation="direct", chunk_bytes=8 * 120 * 7)
    rtol = rtol_of(normalization)
    close(F.velocity(X, w), Dn.velocity(X, w), rtol)
    close(F.energies(X, w), Dn.energies(X, w), rtol)
    close(dg.attention_entropy(F, X, w), dg.attention_entropy(Dn, X, w), rtol)


def test_shifted_softmax_rows_match(rng):
    """beta |M|_2 far above the shift limit: the rows are log-sum-exp shifted (the bound from the factors' QR)."""
    h = factored_head(rng, "exp", "softmax", beta=1.0)
    scale = 900.0 / score_norm(h)
    A, B, C, Dv = h.factors
    h = Head.from_factors(scale * A, B, C, Dv, beta=1.0, normalization="softmax")
    X, w = tokens(rng, 50), weights(rng, 50)
    v = ParticleSystem([h], summation="direct").velocity(X, w)
    vd = ParticleSystem([dense_twin(h)], summation="direct").velocity(X, w)
    assert np.all(np.isfinite(v))
    # scores of size ~900 rounded differently by ~1e-13 absolute: exp of them differs by ~1e-13 relative
    close(v, vd, 1e-10)


def test_score_norm_from_the_factors(rng):
    for r in (1, 3, 7):
        h = factored_head(rng, r=r)
        # |R_A R_B^T|_2 against the SVD of A B^T: both to a few ulps of |M|_2
        assert abs(score_norm(h) - np.linalg.norm(h.M, 2)) <= 1e-13 * np.linalg.norm(h.M, 2)
    g = dense_twin(h)
    assert score_norm(g) == np.linalg.norm(g.M, 2)                    # dense: the SVD, unchanged
    # the range check of exp heads with mean normalization reads the same norm
    big = Head.from_factors(*[(2 * EXP_LIMIT / score_norm(h)) ** 0.5 * F for F in h.factors[:2]], *h.factors[2:],
                            beta=1.0)
    with pytest.raises(ValueError, match=r"beta \* \|M\|_2 must be <= 700"):
        ParticleSystem([big])


# ----------------------------------------------------------------------------------- diagnostics
@pytest.mark.parametrize("kernel, normalization", [("exp", "mean"), ("exp", "softmax"), ("sigmoid", "softmax"),
                                                   ("relu", "mean"), ("exp", "sinkhorn")])
def test_diagnostics_match(rng, kernel, normalization):
    heads, twins = pair(rng, kernel, normalization, n_heads=3)
    X, w = tokens(rng, 50), weights(rng, 50)
    F, Dn = ParticleSystem(heads, summation="direct"), ParticleSystem(twins, summation="direct")
    rtol = rtol_of(normalization)
    rs, rd = dg.radial_shadows(F, X, w), dg.radial_shadows(Dn, X, w)
    for key in ("a", "norm", "tangential"):
        close(rs[key], rd[key], rtol)
    cs, cd = dg.radial_dominance(F, X, w), dg.radial_dominance(Dn, X, w)
    for key in ("exact_margin", "norm_bounded_margin"):     # the margins (the booleans are their signs)
        close(cs[key], cd[key], rtol)
    close(dg.energy_rate_terms(F, X, w), dg.energy_rate_terms(Dn, X, w), rtol)
    assert abs(dg.dissipation(F, X, w) - dg.dissipation(Dn, X, w)) <= rtol * dg.dissipation(Dn, X, w)
    if KERNELS[kernel].positive:
        for relative in (False, True):
            close(dg.attention_entropy(F, X, w, relative), dg.attention_entropy(Dn, X, w, relative), rtol)
        if NORMALIZATIONS[normalization].row_local:
            close(dg.attention_entropy_rate(F, X, w=w), dg.attention_entropy_rate(Dn, X, w=w), rtol)


# ----------------------------------------------------------------------------------- batched systems
@pytest.mark.parametrize("normalization, causal", [("mean", False), ("mean", True), ("softmax", False),
                                                   ("softmax", True), ("sinkhorn", False)])
def test_batched_systems_match(rng, normalization, causal):
    heads, twins = pair(rng, "exp", normalization)
    Xb = np.stack([tokens(rng, 30) for _ in range(3)])
    rtol = rtol_of(normalization)
    F, Dn = BatchedSystem(heads, causal=causal), BatchedSystem(twins, causal=causal)
    assert all(s is not None for side in F._factors for s in side)          # both sides factored for every head
    close(F.velocity(Xb), Dn.velocity(Xb), rtol)
    close(F.forces(Xb), Dn.forces(Xb), rtol)
    # the batched sums are the particle system's, system by system (uniform weights; a causal row is its prefix)
    if not causal:
        Pf = ParticleSystem(heads, summation="direct")
        close(F.velocity(Xb)[1], Pf.velocity(Xb[1]), rtol)
    # per-system heads: factored for every system (one rank), and mixed factored / dense (then the dense matrices)
    per = [heads, tuple(factored_head(rng, "exp", normalization) for _ in heads), twins]
    per_dense = [twins, tuple(dense_twin(h) for h in per[1]), twins]
    F, Dn = BatchedSystem(per[:2], causal=causal), BatchedSystem(per_dense[:2], causal=causal)
    assert all(s is not None for side in F._factors for s in side)
    close(F.velocity(Xb[:2]), Dn.velocity(Xb[:2]), rtol)
    mixed = BatchedSystem(per, causal=causal)
    assert all(s is None for side in mixed._factors for s in side)
    close(mixed.velocity(Xb), BatchedSystem(per_dense, causal=causal).velocity(Xb), rtol)
    # different ranks per system: the dense matrices too
    ranks = BatchedSystem([heads, tuple(factored_head(rng, "exp", normalization, r=2) for _ in heads)])
    assert all(s is None for s in ranks._factors[0])


def test_batched_shifted_softmax_matches(rng):
    h = factored_head(rng, "exp", "softmax", beta=1.0)
    A, B, C, Dv = h.factors
    h = Head.from_factors(900.0 / score_norm(h) * A, B, C, Dv, normalization="softmax")
    Xb = np.stack([tokens(rng, 20) for _ in range(2)])
    v, vd = BatchedSystem([h], causal=True).velocity(Xb), BatchedSystem([dense_twin(h)], causal=True).velocity(Xb)
    assert np.all(np.isfinite(v))
    close(v, vd, 1e-10)          # scores ~900 rounded by ~1e-13 absolute (as for the particle system)


# ----------------------------------------------------------------------------------- schedules
def test_head_schedule_runs_match(rng):
    layers = [pair(rng, "exp", "softmax") for _ in range(2)]
    X0 = tokens(rng, 20)
    runs = []
    for side in (0, 1):
        sched = HeadSchedule([(0.0, layers[0][side]), (0.2, layers[1][side])])
        tr = integrate_schedule(sched, lambda hs: ParticleSystem(hs, summation="direct"), X0, (0.0, 0.4),
                                method="rk4", step=StepControl(dt=0.05), save=SaveAt(t_eval=[0.0, 0.2, 0.4]))
        runs.append(tr)
    # 8 fixed rk4 steps of O(1) velocities: the rounding differences stay at ~1e-15 (no growth at this time scale)
    close(runs[0].y, runs[1].y, ROW_LOCAL_RTOL)
    assert not np.allclose(runs[0].y_final, X0)          # the tokens did move


# ----------------------------------------------------------------------------------- spectral paths (d = 3)
def test_spectral_paths_use_the_dense_matrices_at_d3(rng):
    """The spectral S^2 sums (fastsum, generalsum, bispherical) read M and V: a factored d = 3 head gives the numbers
    of its dense twin (the same matrices bit for bit, so the same operators; 1e-12 leaves room for nothing else)."""
    heads, twins = pair(rng, "exp", "mean", d=3, r=2, p=1, beta=1.0)
    X, w = tokens(rng, 200, 3), weights(rng, 200)
    F = ParticleSystem(heads, summation="spectral", kernel_tol=1e-10)
    Dn = ParticleSystem(twins, summation="spectral", kernel_tol=1e-10)
    close(F.velocity(X, w), Dn.velocity(X, w), ROW_LOCAL_RTOL)
    close(F.energies(X, w), Dn.energies(X, w), ROW_LOCAL_RTOL)
    # and the spectral sum agrees with the factored direct sum to its tolerance (1e-10 relative to the largest
    # aggregate; 1e-8 of the largest velocity leaves a margin for the projection)
    close(F.velocity(X, w), ParticleSystem(heads, summation="direct").velocity(X, w), 1e-8)
    Xb = np.stack([X[:50], X[50:100]])
    close(BatchedSystem(heads, summation="spectral").velocity(Xb), BatchedSystem(twins, summation="spectral")
          .velocity(Xb), ROW_LOCAL_RTOL)
    pde, pde_d = mf.ContinuumPDE(heads, lmax=12), mf.ContinuumPDE(twins, lmax=12)
    rho = mf.densities.vmf_density(pde.grid, [0.0, 0.6, 0.8], 2.0)
    y = pde.state(rho)
    close(pde.rhs(0.0, y), pde_d.rhs(0.0, y), ROW_LOCAL_RTOL)
    # the continuum's quadrature path sums the nodes directly (core.sums.aggregate): through the factors here
    quad, quad_d = (mf.ContinuumPDE(hs, lmax=12, summation="quadrature") for hs in (heads, twins))
    close(quad.rhs(0.0, y), quad_d.rhs(0.0, y), ROW_LOCAL_RTOL)
    close(quad.energies(rho), quad_d.energies(rho), ROW_LOCAL_RTOL)


# ----------------------------------------------------------------------------------- dense heads: bit for bit
def reference_aggregate(head, targets, sources, w, chunk_bytes):
    """``meanfield.core.sums.aggregate`` as committed before factored heads (e0eb603), verbatim but for names."""
    kern, norm = KERNELS[head.kernel], NORMALIZATIONS[head.normalization]
    Y = sources @ head.M.T
    YV = sources @ head.V.T
    normalized = norm.uses_normalizer
    shifted = norm.shifts_rows and kern.needs_shift(head, sums._max_score(head, targets, sources))
    weighted = w > 0
    all_weighted = bool(weighted.all())
    Y = kern.rate(head) * Y
    d = targets.shape[1]
    wYV = w[:, None] * (np.column_stack([YV, np.ones(len(w))]) if normalized else YV)
    UZ = np.empty((targets.shape[0], wYV.shape[1]))
    N = np.ones(targets.shape[0])
    for sl in sums.row_chunks(targets.shape[0], sources.shape[0], chunk_bytes):
        K = targets[sl] @ Y.T
        if shifted:
            kern.log_scaled(head, K, out=K)
            if not all_weighted:
                K[:, ~weighted] = -np.inf
            shift = K.max(axis=1)
            K -= shift[:, None]
            np.exp(K, out=K)
        else:
            kern.scaled(head, K, out=K)
        np.matmul(K, wYV, out=UZ[sl])
        if normalized:
            Z = UZ[sl, d]
            norm.combine(UZ[sl, :d], Z)
            N[sl] = Z * np.exp(shift) if shifted else Z
    return (UZ[:, :d] if normalized else UZ), N


def reference_pair_sum(head, X, w, chunk_bytes):
    """``meanfield.core.sums.pair_sum`` as committed before factored heads (e0eb603)."""
    kern = KERNELS[head.kernel]
    Y = kern.rate(head) * (X @ head.M.T)
    total = 0.0
    for sl in sums.row_chunks(X.shape[0], X.shape[0], chunk_bytes):
        K = X[sl] @ Y.T
        kern.antiderivative_scaled(head, K, out=K)
        total += w[sl] @ (K @ w)
    return 0.5 * total / kern.antiderivative_divisor(head)


def reference_gradients(system, X, w):
    """``ParticleSystem.energy_gradients`` of row-local heads as committed before factored heads (e0eb603)."""
    n, d = X.shape
    G = np.empty((system.n_heads, n, d))
    ra = rb = np.ones(n)
    for h, head in enumerate(system.heads):
        Y, YT = X @ head.M.T, X @ head.M
        for sl in system.chunks(n):
            K1 = kernel(head, X[sl] @ Y.T) * (w * rb)
            K2 = kernel(head, X[sl] @ YT.T) * (w * ra)
            G[h, sl] = 0.5 * w[sl, None] * (ra[sl, None] * (K1 @ Y) + rb[sl, None] * (K2 @ YT))
    return G


@pytest.mark.parametrize("kernel_name, normalization", [("exp", "mean"), ("exp", "softmax"), ("relu", "softmax"),
                                                        ("sigmoid", "mean")])
def test_dense_heads_are_bit_identical_to_before(rng, kernel_name, normalization):
    """Dense heads go through the very operations of the committed code: equal bit for bit (tolerance 0), here
    against verbatim copies of the old sums (also checked once against the old package on 63 quantities:
    velocities, energies, gradients, entropies and their rates, batched and causal sums, Sinkhorn heads)."""
    X, w = tokens(rng, 70), weights(rng, 70)
    w[3] = 0.0                                                # a weightless source (the shifted rows mask it)
    w /= w.sum()
    for beta in (1.3, 700.0):                                 # unshifted, and softmax rows shifted
        M, V = rng.standard_normal((D, D)), rng.standard_normal((D, D))
        M *= 1.0 / np.linalg.norm(M, 2)
        head = Head(M, V, beta, kernel_name, normalization)
        if beta > 1 and normalization == "mean" and kernel_name == "exp":
            continue                                          # refused by the range check
        for chunk in (8 * 70 * 9, 8 * 2**20):
            u, N = sums.aggregate(head, X, X, w, chunk)
            ur, Nr = reference_aggregate(head, X, X, w, chunk)
            np.testing.assert_array_equal(u, ur)
            np.testing.assert_array_equal(N, Nr)
            assert sums.pair_sum(head, X, w, chunk) == reference_pair_sum(head, X, w, chunk)
    system = ParticleSystem([Head(M, V, 1.3, kernel_name, normalization)], summation="direct", chunk_bytes=8 * 70 * 9)
    np.testing.assert_array_equal(system.energy_gradients(X, w), reference_gradients(system, X, w))
