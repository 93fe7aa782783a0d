"""The compiled causal prefix sums (core/prefix.py) against their definition in numpy (the features of
models/causal.py and two matrix products)."""

import numpy as np
import pytest

from meanfield.core.prefix import causal_far_sums
from meanfield.models.causal import _circle_degrees, _sphere_degrees, circle_features, sphere_features


def _tokens(rng, n, d):
    X = rng.standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _definition(P, S, cdeg, carry, block):
    """far[h, :, i] = sum_a cdeg[h, l(a)] F_a(P_i) (carry_a + sum_{j in earlier blocks} F_a(P_j) S_j)."""
    L = cdeg.shape[1] - 1
    F = sphere_features(P, L) if P.shape[1] == 3 else circle_features(P, L)
    deg = _sphere_degrees(L) if P.shape[1] == 3 else _circle_degrees(L)
    m = P.shape[0]
    before = np.empty((m, F.shape[1], S.shape[1]))
    B = carry.copy()
    for a in range(0, m, block):
        before[a:a + block] = B
        B = B + F[a:a + block].T @ S[a:a + block]
    far = np.einsum("ia,ha,iak->hki", F, cdeg[:, deg], before)
    return far, B


@pytest.mark.parametrize("d, L", [(3, 12), (2, 20)])
@pytest.mark.parametrize("block", [1, 5, 16])
def test_far_sums_match_their_definition_across_chunks(rng, d, L, block):
    m = 80
    P = _tokens(rng, 2 * m, d)
    S = rng.standard_normal((2 * m, d + 1))
    cdeg = rng.uniform(-1.0, 1.0, (2, L + 1))
    D = (L + 1) ** 2 if d == 3 else 2 * L + 1
    carry0 = rng.standard_normal((D, d + 1))
    ref, ref_carry = _definition(P, S, cdeg, carry0, block)
    carry = carry0.copy()
    # two chunks: the second one starts from the carry the first one left
    far = np.concatenate([causal_far_sums(P[:m], S[:m], cdeg, carry, block),
                          causal_far_sums(P[m:], S[m:], cdeg, carry, block)], axis=2)
    scale = np.abs(ref).max()
    # the same sums of O(D * m) products in another order (and with fused multiply-adds): round-off of a few
    # hundred terms, about 1e-14 of the largest entry measured; 1e-12 leaves two orders of margin
    np.testing.assert_allclose(far, ref, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(carry, ref_carry, rtol=0, atol=1e-12 * np.abs(ref_carry).max())


def test_far_sums_of_the_first_block_are_the_carry_alone(rng):
    # no earlier block: row i of block 0 sees only the carried coefficients (zero carry: exactly zero)
    P, S = _tokens(rng, 8, 3), rng.standard_normal((8, 4))
    far = causal_far_sums(P, S, np.ones((1, 4)), np.zeros((16, 4)), 8)
    assert np.array_equal(far, np.zeros((1, 4, 8)))


def test_far_sums_refuse_bad_shapes_by_name(rng):
    P, S, cdeg = _tokens(rng, 8, 3), rng.standard_normal((8, 4)), np.ones((1, 4))
    carry = np.zeros((16, 4))
    with pytest.raises(ValueError, match="multiple of block = 3"):
        causal_far_sums(P, S, cdeg, carry, 3)
    with pytest.raises(ValueError, match="block must be"):
        causal_far_sums(P, S, cdeg, carry, 0)
    with pytest.raises(ValueError, match=r"P must have shape"):
        causal_far_sums(rng.standard_normal((8, 4)), S, cdeg, carry, 4)
    with pytest.raises(ValueError, match=r"S must have shape \(8, c\)"):
        causal_far_sums(P, S[:4], cdeg, carry, 4)
    with pytest.raises(ValueError, match="cdeg must have shape"):
        causal_far_sums(P, S, np.ones(4), carry, 4)
    with pytest.raises(ValueError, match=r"carry must be .* shape \(16, 4\)"):
        causal_far_sums(P, S, cdeg, np.zeros((9, 4)), 4)
    with pytest.raises(ValueError, match="carry must be a writeable"):
        causal_far_sums(P, S, cdeg, np.zeros((4, 16)).T, 4)      # not C-contiguous: an update would be lost


def test_far_sums_use_directions_and_take_zero_rows(rng):
    # rows of any length give the sums of their directions (the S^2 kernel normalizes as sphere_features does)
    for d, D in ((3, 16), (2, 7)):
        P = _tokens(rng, 16, d)
        S, cdeg = rng.standard_normal((16, d + 1)), rng.uniform(-1, 1, (1, 4))
        a = causal_far_sums(P, S, cdeg, np.ones((D, d + 1)), 4)
        b = causal_far_sums(P * rng.uniform(0.5, 3.0, (16, 1)), S, cdeg, np.ones((D, d + 1)), 4)
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-13 * np.abs(a).max())       # round-off of the division
        Z = P.copy()
        Z[5] = 0.0                                  # a zero row: the north pole (S^2), theta = 0 (S^1); finite
        assert np.all(np.isfinite(causal_far_sums(Z, S, cdeg, np.ones((D, d + 1)), 4)))


def test_kernels_compile_without_a_writable_cache(monkeypatch):
    # a read-only install without a writable home: numba refuses cache=True when decorating ("no locator
    # available"); the kernels are then compiled without a disk cache instead of failing the import
    import numba

    from meanfield.core import prefix

    real, calls = numba.njit, []

    def njit(**options):
        calls.append(options["cache"])
        if options["cache"]:
            raise RuntimeError("cannot cache function 'f': no locator available for file 'prefix.py'")
        return real(**options)

    monkeypatch.setattr(prefix.numba, "njit", njit)
    f = prefix._compiled(lambda x: 2.0 * x)
    assert f(1.5) == 3.0 and calls == [True, False]
