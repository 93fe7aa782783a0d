"""Particle system: energy identities, tangency, equivariance, input checks (MODEL.md section 1)."""

import numpy as np
import pytest

from meanfield.core.heads import (Head, approx_orthogonal_heads, orthogonal_block_heads, perturbed_value_heads,
                             random_symmetric_heads, scalar_heads)
from meanfield.core.initial import random_rotation, uniform_sphere
from meanfield.models.particles import ParticleSystem, retract_sphere

FD_STEP = 1e-5
# Central differences: truncation ~ h^2 |E'''| ~ 1e-10, round-off ~ eps |E| / h ~ 1e-11;
# 1e-7 relative leaves a wide margin while catching any O(1) or missing-factor error.
FD_RTOL = 1e-7


def fd_energy_rate(system, X, V, w=None):
    """d/ds E(X(s)) at s = 0 along X(s) = X + s V (flat) or its retraction (sphere)."""
    move = (lambda Y: retract_sphere(Y)) if system.geometry == "sphere" else (lambda Y: Y)
    Ep = system.energies(move(X + FD_STEP * V), w)
    Em = system.energies(move(X - FD_STEP * V), w)
    return (Ep - Em) / (2 * FD_STEP)


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
@pytest.mark.parametrize("d", [2, 3, 5, 8])
@pytest.mark.parametrize("kernel", ["exp", "relu"])
def test_energy_identity(geometry, d, kernel):
    """dE/dt = (1/n) sum |dx/dt|^2 for symmetric value-aligned heads, mean normalization."""
    heads = random_symmetric_heads(d, 3, seed=d, beta=1.5, kernel=kernel)
    system = ParticleSystem(heads, geometry)
    X = uniform_sphere(9, d, seed=d + 100)
    v = system.velocity(X)
    diss = np.mean(np.sum(v**2, axis=1))
    per_head_fd = fd_energy_rate(system, X, v)
    per_head = system.energy_rates(X)
    assert per_head_fd.sum() == pytest.approx(diss, rel=FD_RTOL)
    # per-head exact derivatives against finite differences, head by head
    np.testing.assert_allclose(per_head, per_head_fd, rtol=FD_RTOL, atol=FD_RTOL * abs(diss))
    # sum of per-head derivatives equals the total: same floats summed in another order (1e-12)
    assert per_head.sum() == pytest.approx(diss, rel=1e-12)


def test_energy_identity_weighted(rng):
    """With weights w the identity reads dE/dt = sum_i w_i |dx_i/dt|^2."""
    system = ParticleSystem(random_symmetric_heads(3, 2, seed=3, beta=2.0))
    X = uniform_sphere(12, 3, seed=4)
    w = rng.random(12)
    w /= w.sum()
    v = system.velocity(X, w)
    assert fd_energy_rate(system, X, v, w).sum() == pytest.approx(w @ np.sum(v**2, axis=1), rel=FD_RTOL)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_energy_rates_exact_for_general_heads(rng, normalization):
    """energy_rates uses the gradient of E for non-symmetric, non-aligned heads: any direction."""
    d = 4
    heads = tuple(Head(rng.standard_normal((d, d)), rng.standard_normal((d, d)), 0.7, "exp", normalization)
                  for _ in range(2))
    system = ParticleSystem(heads)
    X = uniform_sphere(6, d, seed=5)
    V = system.velocity(X)
    np.testing.assert_allclose(system.energy_rates(X, V), fd_energy_rate(system, X, V), rtol=FD_RTOL)


def test_single_softmax_head_weighted_monotonicity():
    """One softmax head: dE/dt = sum_i Z_i/n^2 |dx_i/dt|^2 (Geshkovski et al. 3.4.1)."""
    system = ParticleSystem(random_symmetric_heads(3, 1, seed=6, beta=1.2, normalization="softmax"))
    X = uniform_sphere(10, 3, seed=7)
    n = X.shape[0]
    v = system.velocity(X)
    _, N = system.forces(X)
    # our N is Z_i / n (weights 1/n in the sum); MODEL's Z_i / n^2 is N_i / n
    expected = np.sum(N[0] / n * np.sum(v**2, axis=1))
    assert fd_energy_rate(system, X, v).sum() == pytest.approx(expected, rel=FD_RTOL)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
@pytest.mark.parametrize("kernel", ["exp", "relu"])
def test_tangency_and_rotation_equivariance(rng, normalization, kernel):
    d = 5
    heads = tuple(Head(rng.standard_normal((d, d)), rng.standard_normal((d, d)), 1.1, kernel, normalization)
                  for _ in range(3))
    system = ParticleSystem(heads)
    X = uniform_sphere(11, d, seed=8)
    v = system.velocity(X)
    # tangency: <x_i, v_i> = 0 up to round-off of the projection (|v| ~ 1, eps ~ 1e-16)
    assert np.abs(np.sum(X * v, axis=1)).max() < 1e-13
    Q = random_rotation(d, seed=9)
    rot = ParticleSystem(tuple(h.replace(M=Q @ h.M @ Q.T, V=Q @ h.V @ Q.T) for h in heads))
    # rotating tokens and conjugating M, V rotates velocities: identical up to matmul round-off
    np.testing.assert_allclose(rot.velocity(X @ Q.T), v @ Q.T, rtol=0, atol=1e-12 * np.abs(v).max())


def test_chunking_does_not_change_results():
    heads = random_symmetric_heads(3, 2, seed=10, normalization="softmax")
    X = uniform_sphere(300, 3, seed=11)
    big = ParticleSystem(heads)
    small = ParticleSystem(heads, chunk_bytes=8 * 300 * 7)  # 7 rows per chunk
    # chunks only reorder independent row computations: bitwise-level agreement expected (1e-14)
    np.testing.assert_allclose(small.velocity(X), big.velocity(X), rtol=0, atol=1e-14)
    assert small.energy(X) == pytest.approx(big.energy(X), rel=1e-13)


def test_scalar_head_velocity_closed_form():
    """Orthogonal tokens, one scalar head: f_i = alpha (e^{beta alpha} x_i + sum_{j != i} x_j)."""
    n, beta, alpha = 4, 0.8, 1.3
    X = np.eye(n)
    system = ParticleSystem(scalar_heads([alpha], n, beta=beta), geometry="flat")
    f = alpha * (np.exp(beta * alpha) * X + (X.sum(0) - X))
    np.testing.assert_allclose(system.velocity(X), f / n, rtol=1e-14)


def test_presets():
    heads = orthogonal_block_heads(6, 3, strengths=[1.0, 2.0, 3.0])
    for i, h in enumerate(heads):
        for j, g in enumerate(heads):
            if i != j:
                assert np.abs(g.M @ h.M).max() == 0.0  # disjoint blocks: exact zeros
    ap = approx_orthogonal_heads(6, 2, delta=0.3, alpha=1.5, rank=2)
    # |M_2 M_1|_op = delta by construction (round-off of sqrt products, 1e-14)
    assert np.linalg.norm(ap[1].M @ ap[0].M, 2) == pytest.approx(0.3, abs=1e-14)
    pert = perturbed_value_heads(random_symmetric_heads(4, 2, seed=1), 0.2, seed=2)
    for h in pert:
        assert np.linalg.norm(h.V - h.M, 2) == pytest.approx(0.2, rel=1e-12)
    assert scalar_heads([1.0, -2.0], 3)[1].scalar == -2.0 and scalar_heads([1.0], 3)[0].is_zonal


@pytest.mark.parametrize("kwargs, match", [
    (dict(beta=0.0), "beta must be a positive finite number; received 0.0"),
    (dict(beta=-1.0), "beta"),
    (dict(beta=float("nan")), "beta"),
    (dict(kernel="gauss"), r"kernel must be one of \('exp', 'relu'.*\); received 'gauss'"),
    (dict(normalization="sum"), "normalization must be one of"),
    (dict(M=np.full((3, 3), np.nan)), "M must have finite entries"),
    (dict(V=np.eye(4)), "M and V must have the same shape"),
    (dict(M=np.ones(3)), "M must be a square matrix"),
])
def test_head_bad_input(kwargs, match):
    base = dict(M=np.eye(3), V=np.eye(3), beta=1.0, kernel="exp", normalization="mean")
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        Head(**base)


def test_tokens_bad_input():
    system = ParticleSystem(scalar_heads([1.0], 3))
    X = uniform_sphere(5, 3, seed=0)
    with pytest.raises(ValueError, match="unit vectors.*never renormalized"):
        system.velocity(2 * X)
    with pytest.raises(ValueError, match="must be finite"):
        system.velocity(np.where(np.arange(15).reshape(5, 3) == 4, np.nan, X))
    with pytest.raises(ValueError, match="d = 3 columns"):
        system.velocity(uniform_sphere(5, 4, seed=0))
    with pytest.raises(ValueError, match="n >= 2"):
        system.velocity(X[:1])
    with pytest.raises(ValueError, match="w must sum to 1"):
        system.velocity(X, np.ones(5))
    with pytest.raises(ValueError, match="w must have shape"):
        system.velocity(X, np.ones(4) / 4)
    with pytest.raises(ValueError, match="geometry must be one of"):
        ParticleSystem(scalar_heads([1.0], 3), geometry="torus")
    with pytest.raises(ValueError, match="same dimension"):
        ParticleSystem(scalar_heads([1.0], 3) + scalar_heads([1.0], 4))
    with pytest.raises(ValueError, match="non-empty"):
        ParticleSystem(())


def peak_velocity_memory(n, n_heads):
    import tracemalloc

    system = ParticleSystem(random_symmetric_heads(3, n_heads, seed=0), chunk_bytes=4 * 2**20)
    X = uniform_sphere(n, 3, seed=1)
    tracemalloc.start()
    v = system.velocity(X)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert v.shape == X.shape and np.all(np.isfinite(v))
    return peak


def test_memory_bounded():
    """n = 5000, 4 heads: chunked work space (MiBs), not the 4 x 200 MB score matrices."""
    # outputs (H, n, d) ~ 0.5 MB plus a few 4 MiB chunks and their temporaries; 64 MiB is
    # 12x below one unchunked 5000^2 score matrix (200 MB)
    assert peak_velocity_memory(5000, 4) < 64 * 2**20


@pytest.mark.slow
def test_memory_bounded_n20000():
    """The issue's case: n = 20 000 tokens, 4 heads, well under 8 GiB (measured: tens of MiB)."""
    # unchunked this would need 4 * 20000^2 * 8 bytes = 12.8 GB; 64 MiB leaves room for temporaries
    assert peak_velocity_memory(20_000, 4) < 64 * 2**20


def test_softmax_shift_ignores_zero_weight_tokens():
    """Large beta: rows are shifted by the largest *weighted* score, so a zero-weight tracer with
    the largest score does not underflow the rest (the force must not silently become 0)."""
    X = np.array([[0, 0, -1.0], [0.1, 0, 0.995], [-0.1, 0, 0.995]])
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = np.array([0.0, 0.5, 0.5])
    v = {beta: ParticleSystem(scalar_heads([1.0], 3, beta=beta, normalization="softmax")).forces(X, w)[0][0, 0]
         for beta in (500.0, 700.0)}
    # the two weighted tokens are symmetric about z: u = mean of them, for any beta (round-off)
    for u in v.values():
        np.testing.assert_allclose(u, X[1:].mean(axis=0), atol=1e-12)


def test_mean_exp_overflow_refused_and_weighted_rhs_checked():
    with pytest.raises(ValueError, match=r"heads\[0\]: beta \* \|M\|_2 must be <= 700"):
        ParticleSystem(scalar_heads([1.0], 3, beta=800.0))
    ParticleSystem(scalar_heads([1.0], 3, beta=800.0, normalization="softmax"))      # shifted: fine
    rhs = ParticleSystem(scalar_heads([1.0], 3)).weighted_rhs([0.5, 0.5])
    with pytest.raises(ValueError, match="y must have 2 rows"):
        rhs(0.0, uniform_sphere(3, 3, seed=0))
