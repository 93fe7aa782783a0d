"""Particle system: energy rates of general heads, chunking, memory, input checks (MODEL.md section 1).

The energy identities, tangency, rotation equivariance and the scalar-head closed form are cases of
the closed-form table, tests/closed_forms.py; Head validation and presets are in test_heads.py.
"""

import numpy as np
import pytest
from _helpers import FD_RTOL, fd_energy_rate

import meanfield as mf
from meanfield.core.heads import Head, random_symmetric_heads, scalar_heads
from meanfield.core.initial import uniform_sphere
from meanfield.models.particles import ParticleSystem


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


def test_chunking_does_not_change_results():
    heads = random_symmetric_heads(3, 2, seed=10, normalization="softmax")
    X = uniform_sphere(300, 3, seed=11)
    big = ParticleSystem(heads)
    small = ParticleSystem(heads, chunk_bytes=8 * 300 * 7)  # 7 rows per chunk
    # chunks only reorder independent row computations: bitwise-level agreement expected (1e-14)
    np.testing.assert_allclose(small.velocity(X), big.velocity(X), rtol=0, atol=1e-14)
    assert small.energy(X) == pytest.approx(big.energy(X), rel=1e-13)


def test_tokens_bad_input():
    system = ParticleSystem(scalar_heads([1.0], 3))
    X = uniform_sphere(5, 3, seed=0)
    with pytest.raises(ValueError, match="unit vectors.*never renormalized"):
        system.velocity(2 * X)
    with pytest.raises(ValueError, match=r"X must be a finite real array of shape \(n, d\)"):
        system.velocity(np.where(np.arange(15).reshape(5, 3) == 4, np.nan, X))
    with pytest.raises(ValueError, match="d = 3 columns"):
        system.velocity(uniform_sphere(5, 4, seed=0))
    with pytest.raises(ValueError, match="n >= 2"):
        system.velocity(X[:1])
    with pytest.raises(ValueError,
                       match=r"w must be 5 finite weights >= 0 summing to 1 \(to 1e-8\); received shape \(5,\), sum 5.0"):
        system.velocity(X, np.ones(5))
    with pytest.raises(ValueError, match=r"w must be 5 finite weights .*; received shape \(4,\)"):
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


# ------------------------------------------- moved from test_api_friction.py (issue 14, item 9), unchanged
def test_relu_heads_use_spectral_sums_with_lmax():
    heads = (Head(np.eye(3), np.eye(3), kernel="relu"),)
    with pytest.raises(ValueError, match="pass lmax"):
        mf.ParticleSystem(heads, summation="spectral")
    system = mf.ParticleSystem(heads, summation="spectral", lmax=64)
    assert system.spectral_lmax == 64
    direct = mf.ParticleSystem(heads, summation="direct")
    assert direct.spectral_lmax is None
    X = mf.initial.uniform_sphere(200, 3, seed=1)
    v, ref = system.velocity(X), direct.velocity(X)
    # ReLU multipliers decay like l^-3: at lmax 64 the velocity is good to about 1e-3 of its size
    # (benchmarks/RESULTS.md measures the algebraic convergence); 1e-2 checks the sums are the same field
    assert np.max(np.abs(v - ref)) <= 1e-2 * np.max(np.abs(ref))
    with pytest.raises(ValueError, match="lmax must be an integer >= 2 or None"):
        mf.ParticleSystem(heads, summation="spectral", lmax=1)
    assert mf.ParticleSystem(mf.scalar_heads([1.0], 3), summation="spectral").spectral_lmax >= 2


def test_energy_rates_checks_xdot():
    system = mf.ParticleSystem(mf.scalar_heads([1.0], 3))
    X = mf.initial.uniform_sphere(10, 3, seed=0)
    with pytest.raises(ValueError, match=r"Xdot must be a finite real array of shape \(10, 3\); received shape \(9, 3\)"):
        system.energy_rates(X, np.zeros((9, 3)))
    bad = np.zeros((10, 3))
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="Xdot must be a finite real array"):
        system.energy_rates(X, bad)
