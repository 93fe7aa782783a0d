"""Sinkhorn (doubly stochastic) attention on the particle side (MODEL.md section 6): ParticleSystem (direct and
spectral sums), BatchedSystem, step rules and diagnostics, through ``Normalization.force``."""

import pickle

import numpy as np
import pytest
from conftest import random_tokens

from meanfield.analysis import diagnostics
from meanfield.core import sums
from meanfield.core.heads import Head, random_symmetric_heads, scalar_heads
from meanfield.core.sinkhorn import SinkhornError
from meanfield.models import step_rules
from meanfield.models.batched import BatchedSystem
from meanfield.models.particles import ParticleSystem, retract_sphere


def _weights(rng, n):
    w = rng.uniform(0.5, 1.5, n)
    return w / w.sum()


def _dense(head, X, w, res):
    """The doubly stochastic P = a K b of one head and its force, by dense matrices."""
    K = np.exp(head.beta * X @ head.M @ X.T)
    P = res.a[:, None] * K * res.b[None, :]
    return P, (P * w) @ (X @ head.V.T)


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_direct_forces_are_the_doubly_stochastic_sums(rng, geometry):
    n, d = 50, 4
    X = random_tokens(rng, n, d)
    w = _weights(rng, n)
    G = rng.standard_normal((d, d))
    heads = random_symmetric_heads(d, 1, seed=3, beta=2.0, normalization="sinkhorn") + \
        (Head(G / 2, rng.standard_normal((d, d)), beta=1.5, normalization="sinkhorn"),)       # non-symmetric M
    system = ParticleSystem(heads, geometry=geometry, summation="direct", sinkhorn_tol=1e-13, sinkhorn_maxiter=5000)
    U, N = system.forces(X, w)
    scalings = system.sinkhorn_scalings(X, w)
    assert scalings[0].b is scalings[0].a and scalings[1].b is not scalings[1].a
    for h, head in enumerate(heads):
        res = scalings[h]
        P, u = _dense(head, X, w, res)
        # both weighted marginals are 1 to the solve's tolerance (1e-13) plus round-off of the dense sums
        assert res.error <= 1e-13
        assert np.max(np.abs(P @ w - 1)) <= 2e-13 and np.max(np.abs(w @ P - 1)) <= 2e-13
        # the chunked sums are the dense ones (same scalings): round-off of sums of n = 50 terms of size <= e^4
        assert np.max(np.abs(U[h] - u)) <= 1e-12 * np.abs(u).max()
        np.testing.assert_allclose(N[h], 1.0 / res.a, rtol=1e-15)
    v = system.velocity(X, w)
    ref = U.sum(axis=0)
    ref = ref - np.sum(ref * X, axis=1, keepdims=True) * X if geometry == "sphere" else ref
    np.testing.assert_allclose(v, ref, rtol=0, atol=1e-15)       # same sums: projection round-off only


def test_chunked_applications_equal_the_kept_kernel_matrix(rng, monkeypatch):
    # beyond KERNEL_CACHE_BYTES every application recomputes the kernel chunk by chunk (large n): same sums
    n, d = 60, 3
    X = random_tokens(rng, n, d)
    w = _weights(rng, n)
    heads = random_symmetric_heads(d, 1, seed=7, beta=2.0, normalization="sinkhorn") + \
        (Head(rng.standard_normal((d, d)) / 2, np.eye(d), beta=1.5, normalization="sinkhorn"),)
    kept = ParticleSystem(heads, summation="direct", sinkhorn_maxiter=5000)
    chunked = ParticleSystem(heads, summation="direct", chunk_bytes=8 * n * 7, sinkhorn_maxiter=5000)   # 7 rows
    U, N = kept.forces(X, w)
    monkeypatch.setattr(sums, "KERNEL_CACHE_BYTES", 0)
    Uc, Nc = chunked.forces(X, w)
    # identical kernel values; only the blocking of the matrix products differs: round-off of n = 60 terms
    np.testing.assert_allclose(Uc, U, rtol=0, atol=1e-14 * np.abs(U).max())
    np.testing.assert_allclose(Nc, N, rtol=1e-13)


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_energy_identity_along_the_flow(rng, geometry):
    # exp kernel, M symmetric, V = M: dE_S/dt = sum_i w_i |dx_i/dt|^2 (flat and spherical)
    n, d = 40, 4
    X = random_tokens(rng, n, d)
    w = _weights(rng, n)
    heads = random_symmetric_heads(d, 2, seed=1, beta=2.0, normalization="sinkhorn")
    system = ParticleSystem(heads, geometry=geometry, summation="direct", sinkhorn_tol=1e-14)
    v = system.velocity(X, w)
    rate = w @ np.einsum("nd,nd->n", v, v)
    curve = (lambda t: retract_sphere(X + t * v)) if geometry == "sphere" else (lambda t: X + t * v)  # x'(0) = v
    h = 1e-5
    fd = (system.energy(curve(h), w) - system.energy(curve(-h), w)) / (2 * h)
    # centred difference: truncation h^2 |E'''| / 6 (measured 1.4e-9 relative at h = 1e-4, scaling as h^2, so
    # ~1.4e-11 here), round-off eps |E| / h ~ 1e-11, the solve's O(tol^2) error in E_S (dual form) negligible
    assert abs(fd - rate) <= 1e-9 * rate
    # the exact rates from the envelope-theorem gradients agree to round-off
    assert abs(system.energy_rates(X, w=w).sum() - rate) <= 1e-12 * rate
    assert abs(diagnostics.dissipation(system, X, w) - rate) <= 1e-14 * rate


def test_energy_gradients_of_a_nonsymmetric_head_match_finite_differences(rng):
    # E_S = -(1/(2 beta)) sum w (log a + log b) = -OT_eps(mu, mu) / 2 for any M: its envelope gradient
    n, d = 30, 3
    X = random_tokens(rng, n, d)
    w = _weights(rng, n)
    head = Head(rng.standard_normal((d, d)) / 2, np.eye(d), beta=1.5, normalization="sinkhorn")
    system = ParticleSystem([head], geometry="flat", summation="direct", sinkhorn_tol=1e-14, sinkhorn_maxiter=10000)
    D = rng.standard_normal((n, d))
    h = 1e-5
    fd = (system.energy(X + h * D, w) - system.energy(X - h * D, w)) / (2 * h)
    exact = system.energy_rates(X, D, w)[0]
    # centred difference as above: truncation ~h^2 |E'''| and round-off eps |E| / h, both ~1e-11
    assert abs(fd - exact) <= 1e-9 * abs(exact)


@pytest.mark.parametrize("kernel, params", [("relu", None), ("sigmoid", {"bias": -1.0})])
def test_other_kernels_scale_but_have_no_transport_gradient(rng, kernel, params):
    n = 40
    X = random_tokens(rng, n, 3)
    head = scalar_heads([1.0], 3, beta=3.0, kernel=kernel, kernel_params=params, normalization="sinkhorn")[0]
    system = ParticleSystem([head], summation="direct")
    res = system.sinkhorn_scalings(X)[0]
    K = head.scalar * X @ X.T
    K = np.maximum(K, 0) if kernel == "relu" else 1 / (1 + np.exp(-(head.beta * K + params["bias"])))
    P = res.a[:, None] * K * res.b[None, :] / n
    # rows and columns of P / n sum to 1 to the default tolerance 1e-12 (plus round-off of the dense sums)
    assert res.error <= 1e-12 and np.max(np.abs(P.sum(axis=1) - 1)) <= 2e-12 and np.max(np.abs(P.sum(0) - 1)) <= 2e-12
    with pytest.raises(ValueError, match=r"energy_gradients of heads\[0\] .*received kernel '" + kernel):
        system.energy_rates(X)


def test_scalar_heads_on_the_sphere_move_along_minus_grad_log_a(rng):
    # v = -(1/beta) grad_S log a, with a(x) = 1 / sum_j w_j k(lambda <x, x_j>) a_j extended off the tokens
    n = 60
    X = random_tokens(rng, n, 3)
    w = _weights(rng, n)
    head = scalar_heads([1.5], 3, beta=3.0, normalization="sinkhorn")[0]
    system = ParticleSystem([head], summation="direct", sinkhorn_tol=1e-14)
    v = system.velocity(X, w)
    a = system.sinkhorn_scalings(X, w)[0].a

    def log_a(Y):
        return -np.log(np.exp(head.beta * head.scalar * Y @ X.T) @ (w * a))

    h = 1e-5
    grad = np.zeros_like(X)
    for k in range(3):
        E = np.zeros(3)
        E[k] = h
        grad[:, k] = (log_a(X + E) - log_a(X - E)) / (2 * h)
    grad -= np.sum(grad * X, axis=1, keepdims=True) * X          # tangent part
    # centred differences: truncation h^2 |d^3 log a| / 6 ~ beta^3 h^2 ~ 3e-9 (and round-off 1e-16 / h ~ 1e-11)
    np.testing.assert_allclose(v, -grad / head.beta, rtol=0, atol=1e-8)


def test_direct_and_spectral_sums_agree(rng):
    n = 400
    X = random_tokens(rng, n, 3)
    w = _weights(rng, n)
    heads = scalar_heads([1.0, -0.5], 3, beta=4.0, normalization="sinkhorn") + \
        scalar_heads([1.0], 3, beta=2.0, normalization="softmax")
    direct = ParticleSystem(heads, summation="direct")
    spectral = ParticleSystem(heads, summation="spectral")
    vd, vs = direct.velocity(X, w), spectral.velocity(X, w)
    # spectral sums at tolerance 1e-10 of the aggregates; scalings both solved to 1e-12
    assert np.max(np.abs(vd - vs)) <= 1e-10 * np.abs(vd).max()
    (Ud, Nd), (Us, Ns) = direct.forces(X, w), spectral.forces(X, w)
    assert np.max(np.abs(Ud - Us)) <= 1e-10 * np.abs(Ud).max()
    assert np.max(np.abs(Nd - Ns)) <= 1e-10 * np.abs(Nd).max()
    np.testing.assert_allclose(direct.energies(X, w), spectral.energies(X, w), rtol=1e-10)
    for rd, rs in zip(direct.sinkhorn_scalings(X, w)[:2], spectral.sinkhorn_scalings(X, w)[:2]):
        assert rd.error <= 1e-12 and rs.error <= 1e-12
        np.testing.assert_allclose(rd.a, rs.a, rtol=1e-10)
    assert direct.sinkhorn_scalings(X, w)[2] is None          # softmax head: row-local, no scaling
    Hd = diagnostics.attention_entropy(direct, X, w, relative=True)
    Hs = spectral.spectral.entropies(X, w)
    # entropies of O(1) size: sum tolerance plus the scalings' 1e-12
    assert np.max(np.abs(Hd - Hs)) <= 1e-9
    Hd = diagnostics.attention_entropy(direct, X, w)                  # Shannon, non-uniform weights
    Hs = spectral.spectral.entropies(X, w, shannon=True)
    assert np.max(np.abs(Hd - Hs)) <= 1e-9 * np.log(n)             # the same, on entropies of size log n


def test_sinkhorn_attention_rows_are_distributions_and_their_entropy_is_exact(rng):
    n = 30
    X = random_tokens(rng, n, 3)
    w = _weights(rng, n)
    head = random_symmetric_heads(3, 1, seed=2, beta=2.0, normalization="sinkhorn")[0]
    system = ParticleSystem([head], summation="direct", sinkhorn_tol=1e-14)
    P, _ = _dense(head, X, w, system.sinkhorn_scalings(X, w)[0])
    p = P * w                                                   # p_ij = P_ij w_j: rows sum to 1
    assert np.max(np.abs(p.sum(axis=1) - 1)) <= 1e-13           # the solve's tolerance plus round-off
    H = diagnostics.attention_entropy(system, X, w)[0]
    # Shannon entropy of the normalized rows; the dense p is normalized to 1e-14 only: that much off
    np.testing.assert_allclose(H, -np.sum(p * np.log(p), axis=1), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"row-local normalizations.*heads\[0\]"):
        diagnostics.attention_entropy_rate(system, X, w=w)


def test_rotation_equivariance(rng):
    # v(X Q^T; Q M Q^T, Q V Q^T) = v(X) Q^T for a rotation Q (any heads, spectral and direct)
    n, d = 300, 3
    X = random_tokens(rng, n, d)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    heads = random_symmetric_heads(d, 2, seed=4, beta=2.0, normalization="sinkhorn")
    rot = tuple(h.replace(M=Q @ h.M @ Q.T, V=Q @ h.V @ Q.T) for h in heads)
    v = ParticleSystem(heads, sinkhorn_tol=1e-14).velocity(X)
    vr = ParticleSystem(rot, sinkhorn_tol=1e-14).velocity(X @ Q.T)
    # same sums in rotated coordinates: round-off of the scores, the scalings to 1e-14 (two independent solves)
    np.testing.assert_allclose(vr, v @ Q.T, rtol=0, atol=1e-12 * np.abs(v).max())
    zonal = scalar_heads([1.0], 3, beta=3.0, normalization="sinkhorn")
    s = ParticleSystem(zonal, summation="spectral")
    # zonal heads are invariant: the spectral sums to their tolerance 1e-10 of the aggregates
    np.testing.assert_allclose(s.velocity(X @ Q.T), s.velocity(X) @ Q.T, rtol=0,
                               atol=1e-10 * np.abs(s.velocity(X)).max())


def test_rhs_and_weighted_rhs_are_the_velocity(rng):
    n = 25
    X = random_tokens(rng, n, 3)
    w = _weights(rng, n)
    system = ParticleSystem(random_symmetric_heads(3, 2, seed=5, normalization="sinkhorn"), summation="direct")
    np.testing.assert_array_equal(system.rhs(0.0, X), system.velocity(X))       # same sums, same start: identical
    np.testing.assert_array_equal(system.weighted_rhs(w)(0.0, X), system.velocity(X, w))


@pytest.mark.parametrize("summation", ["direct", "spectral"])
def test_scalings_of_the_last_state_are_shared_and_change_nothing(rng, summation):
    X, Y = random_tokens(rng, 80, 3), random_tokens(rng, 80, 3)
    heads = scalar_heads([1.0, 0.5], 3, beta=3.0, normalization="sinkhorn")
    system = ParticleSystem(heads, summation=summation)
    first = system.sinkhorn_scalings(X)
    v = system.velocity(X)
    assert all(r is s for r, s in zip(system.sinkhorn_scalings(X), first))     # one solve at one state
    assert not first[0].a.flags.writeable                                     # shared: read-only
    system.velocity(Y)                                                        # another state: solved anew
    assert system.sinkhorn_scalings(Y)[0] is not first[0]
    fresh = ParticleSystem(heads, summation=summation)                        # no history
    # a hit returns exactly what the solve gives (no warm start from another state): bit for bit
    np.testing.assert_array_equal(system.velocity(X), fresh.velocity(X))
    np.testing.assert_array_equal(system.velocity(X), v)
    np.testing.assert_array_equal(system.energies(X), fresh.energies(X))
    copy = pickle.loads(pickle.dumps(system))                                 # the cache is not pickled
    assert copy.sinkhorn_scalings(X)[0] is not first[0]
    np.testing.assert_array_equal(copy.velocity(X), v)


@pytest.mark.parametrize("summation", ["direct", "spectral"])
def test_non_convergence_names_the_head_and_the_error(rng, summation):
    X = random_tokens(rng, 40, 3)
    heads = scalar_heads([1.0], 3, normalization="softmax") + scalar_heads([1.0], 3, beta=3.0, normalization="sinkhorn")
    system = ParticleSystem(heads, summation=summation, sinkhorn_tol=1e-16, sinkhorn_maxiter=2)
    with pytest.raises(SinkhornError, match=r"heads\[1\]: the Sinkhorn scaling did not converge in 2 iterations: "
                                            r"marginal error \S+ > tol = 1e-16"):
        system.velocity(X)


def test_tolerance_arguments_are_validated():
    heads = scalar_heads([1.0], 3, normalization="sinkhorn")
    with pytest.raises(ValueError, match=r"sinkhorn_tol must be a number in \(0, 1\)"):
        ParticleSystem(heads, sinkhorn_tol=0.0)
    with pytest.raises(ValueError, match="sinkhorn_maxiter"):
        BatchedSystem(heads, sinkhorn_maxiter=0)


def test_diagnostics_through_the_forces(rng):
    n = 30
    X = random_tokens(rng, n, 3)
    w = _weights(rng, n)
    system = ParticleSystem(random_symmetric_heads(3, 2, seed=6, beta=1.5, normalization="sinkhorn"),
                            summation="direct")
    U, _ = system.forces(X, w)
    r = diagnostics.radial_shadows(system, X, w)
    np.testing.assert_array_equal(r["a"], np.einsum("hnd,nd->hn", U, X))   # the same forces, the same formula
    C = diagnostics.energy_rate_terms(system, X, w)
    # row sums of C are the per-head rates for symmetric value-aligned heads (as for mean heads): round-off
    np.testing.assert_allclose(C.sum(axis=1), system.energy_rates(X, w=w), rtol=1e-12)
    rec = diagnostics.observer(system, w)(0.0, X)
    np.testing.assert_allclose(rec["energy_head"], system.energies(X, w), rtol=0, atol=0)   # same calls


# ------------------------------------------------------------------------------------------ batched
def test_batched_sinkhorn_matches_the_particle_system(rng):
    B, n, d = 3, 20, 4
    X = np.stack([random_tokens(rng, n, d) for _ in range(B)])
    G = rng.standard_normal((d, d))
    heads = random_symmetric_heads(d, 1, seed=1, beta=2.0, normalization="sinkhorn") + \
        (Head(G / 2, G.T, beta=1.5, normalization="sinkhorn"),)
    per = [random_symmetric_heads(d, 2, seed=b, beta=2.0, normalization="sinkhorn") for b in range(B)]
    for hs, system in ((heads, BatchedSystem(heads, sinkhorn_maxiter=5000)), (per, BatchedSystem(per))):
        ref = np.stack([ParticleSystem(hs if system.batch is None else hs[b], summation="direct",
                                       sinkhorn_maxiter=5000).velocity(X[b]) for b in range(B)])
        # one joint solve over the B systems (stopping at the worst one) against B solves: both to 1e-12
        np.testing.assert_allclose(system.velocity(X), ref, rtol=0, atol=1e-11 * np.abs(ref).max())
    Y = step_rules.step(BatchedSystem(heads, sinkhorn_maxiter=5000), X, 0.1, "post_ln")
    field = BatchedSystem(heads, sinkhorn_maxiter=5000).field(X)
    np.testing.assert_allclose(Y, retract_sphere((X + 0.1 * field).reshape(-1, d)).reshape(X.shape), rtol=0,
                               atol=1e-15)                    # the post-LN map on the same field: round-off


def test_batched_spectral_sinkhorn(rng):
    X = np.stack([random_tokens(rng, 50, 3) for _ in range(2)])
    heads = scalar_heads([1.0], 3, beta=3.0, normalization="sinkhorn")
    v = BatchedSystem(heads, summation="spectral").velocity(X)
    ref = BatchedSystem(heads).velocity(X)
    # spectral sums at tolerance 1e-10 of the aggregates; scalings to 1e-12
    np.testing.assert_allclose(v, ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_batched_causal_sinkhorn_is_refused():
    heads = scalar_heads([1.0], 3, normalization="softmax") + scalar_heads([1.0], 3, normalization="sinkhorn")
    with pytest.raises(ValueError, match=r"causal must be False with heads of normalization 'sinkhorn' \(heads\[1\]\)"):
        BatchedSystem(heads, causal=True)


# ------------------------------------------------------------------------------------------ configs
def test_a_run_config_with_sinkhorn_heads_builds_a_particle_system(rng):
    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.run import build_heads

    cfg = RunConfig.from_toml('[[heads]]\nlam = 1.0\nbeta = 3.0\nnormalization = "sinkhorn"\n'
                              '[[heads]]\nlam = -0.5\nnormalization = "softmax"\n')
    heads = build_heads(cfg)
    assert [h.normalization for h in heads] == ["sinkhorn", "softmax"]
    system = ParticleSystem(heads)
    X = random_tokens(rng, 3000, 3)                              # spectral (n >= SPECTRAL_MIN_N)
    assert system.uses_spectral(3000)
    assert system.sinkhorn_scalings(X)[0].error <= 1e-12         # the default tolerance, reached
    assert np.all(np.isfinite(system.velocity(X)))


# ------------------------------------------------------------------------------------------ continuum
def test_particles_at_the_quadrature_nodes_are_the_continuum():
    # the particle sums with the quadrature weights rho w_g at the grid nodes evaluate the PDE's velocity and
    # energies (MODEL.md 5.3): two independent Sinkhorn implementations (particles: this branch; grid: the
    # continuum models' own scaling solve)
    import dataclasses

    import meanfield as mf
    from meanfield.core.densities import vmf_mixture_density

    if "sinkhorn_tol" not in {f.name for f in dataclasses.fields(mf.ContinuumPDE)}:
        pytest.skip("needs Sinkhorn heads in ContinuumPDE (the continuum side of issue 22)")
    heads = scalar_heads([1.0, -0.6], 3, beta=3.0, normalization="sinkhorn")
    pde = mf.ContinuumPDE(heads, lmax=16, sinkhorn_tol=1e-14)
    rho_lm = vmf_mixture_density(pde.grid, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    x = pde.grid.nodes.reshape(-1, 3)
    W = (pde.grid.synthesis(rho_lm) * pde.grid.weights).reshape(-1)
    W /= W.sum()                                                 # 1 - 1e-16: the check's sum-to-1 tolerance
    v_pde = pde.velocity(rho_lm).reshape(-1, 3)
    for summation, tol in (("direct", 1e-13), ("spectral", 1e-12)):
        s = ParticleSystem(heads, summation=summation, sinkhorn_tol=1e-14)
        # both solved to 1e-14; exact GL quadrature of degree <= 2 lmax; measured 3e-15 (direct) and 2e-14
        # (spectral: transforms at epsilon 1e-13) of max |v|
        assert np.abs(s.velocity(x, W) - v_pde).max() <= tol * np.abs(v_pde).max()
        np.testing.assert_allclose(s.energies(x, W), pde.energies(rho_lm), rtol=1e-13)   # measured 5e-15


def test_a_blown_up_stage_gives_nan_not_an_error(rng):
    # the integrators report non-finite stages themselves: the Sinkhorn sums pass NaN through, as the others do
    X = random_tokens(rng, 20, 3)
    X[3] = np.nan
    heads = random_symmetric_heads(3, 1, seed=8, normalization="sinkhorn")
    assert np.all(np.isnan(ParticleSystem(heads, summation="direct").rhs(0.0, X)))
    assert np.all(np.isnan(BatchedSystem(heads).rhs(0.0, X[None])))
    assert np.all(np.isnan(ParticleSystem(scalar_heads([1.0], 3, normalization="sinkhorn"), summation="spectral")
                           .rhs(0.0, X)))
