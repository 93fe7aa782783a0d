"""Condition 8 (radial dominance) with unequal scalar head strengths (paper Thm 19 beyond one alpha).

``theory.radial_dominance_margins`` / ``radial_dominance_threshold`` against the particle system's
own diagnostics (``diagnostics.radial_dominance``) and against ``beta_star`` for equal strengths.
"""

import numpy as np
import pytest

import meanfield as mf

CASES = [([0.5, 1.0, 1.5], 32), ([0.25, 0.75, 1.25, 1.75], 64), ([0.8, 1.2], 16), ([1.0, 2.0, 0.7], 8)]


def _particle_margins(beta, alphas, n, normalization, reading, seed=None):
    system = mf.ParticleSystem(mf.scalar_heads(alphas, n, beta, normalization=normalization))
    X = mf.initial.orthonormal(n, n, seed=seed)
    return mf.diagnostics.radial_dominance(system, X)[f"{reading}_margin"]      # (H, n)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
@pytest.mark.parametrize("reading", ["norm_bounded", "exact"])
@pytest.mark.parametrize("alphas,n", CASES)
def test_margins_equal_particle_diagnostics(alphas, n, normalization, reading):
    for beta in (0.1, 0.7, 2.0):
        closed = mf.theory.radial_dominance_margins(beta, alphas, n, normalization, reading)
        particles = _particle_margins(beta, alphas, n, normalization, reading, seed=3)
        scale = np.abs(particles).max()
        # same numbers computed two ways (closed form vs forces on a randomly rotated orthonormal
        # basis, d = n): round-off of O(n) sums and one rotation, 1e-12 of the largest margin
        assert np.all(np.abs(particles - closed[:, None]) <= 1e-12 * scale)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_threshold_reduces_to_beta_star_for_equal_heads(normalization):
    for H in (2, 3, 4, 5):
        for n in (8, 16, 32, 128):
            for alpha in (0.5, 1.0, 3.0):
                bs = mf.theory.beta_star(H, n, alpha)
                got = mf.theory.radial_dominance_threshold([alpha] * H, n, normalization)
                # brentq to xtol 1e-14 on a smooth margin: 1e-12 absolute; beta* <= 0 reads as 0.0
                assert got == pytest.approx(max(bs, 0.0), abs=1e-12)
                exact = mf.theory.radial_dominance_threshold([alpha] * H, n, normalization, reading="exact")
                # exact reading, equal heads: c^2 = 1/H, i.e. beta = ln((n-1)/(H-1)) / (2 alpha)
                assert exact == pytest.approx(np.log((n - 1) / (H - 1)) / (2 * alpha), abs=1e-12)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
@pytest.mark.parametrize("reading", ["norm_bounded", "exact"])
@pytest.mark.parametrize("alphas,n", CASES)
def test_threshold_is_where_the_particle_condition_fails(alphas, n, normalization, reading):
    b = mf.theory.radial_dominance_threshold(alphas, n, normalization, reading)
    if b == 0.0:
        # fails already at beta = 0+: some particle margin negative at a tiny beta
        assert _particle_margins(1e-9, alphas, n, normalization, reading).min() < 0
        return
    assert np.isfinite(b) and b > 0
    # 1e-6 either side of a root found to 1e-14: the margins there are O(1e-6) times the slope, far
    # above round-off (1e-16 relative), so the signs are certain
    below = _particle_margins(b - 1e-6, alphas, n, normalization, reading)
    above = _particle_margins(b + 1e-6, alphas, n, normalization, reading)
    assert below.min() > 0 and above.min() < 0


def test_threshold_scales_like_one_over_alpha():
    # the margins depend on beta only through beta * alpha_h (and scale homogeneously in alpha):
    # beta_th(c alphas) = beta_th(alphas) / c up to the brentq tolerance
    al = np.array([0.6, 1.0, 1.3])
    for nz in ("mean", "softmax"):
        b1 = mf.theory.radial_dominance_threshold(al, 64, nz)
        b3 = mf.theory.radial_dominance_threshold(3 * al, 64, nz)
        assert b1 > 0 and b3 == pytest.approx(b1 / 3, rel=1e-12)


def test_one_head_never_fails_and_weak_head_at_beta_zero():
    assert mf.theory.radial_dominance_threshold([1.3], 16) == np.inf
    # beta = 0: norm-bounded holds for head h iff (n-1) alpha_h >= sqrt(n) sum_{h' != h} alpha_h'
    n = 16
    ok = [1.0, 1.0 * (n - 1) / np.sqrt(n) * 0.999]          # weak head just above the bound
    bad = [1.0, 1.0 * (n - 1) / np.sqrt(n) * 1.001]         # ... just below
    assert mf.theory.radial_dominance_threshold(ok, n) > 0
    assert mf.theory.radial_dominance_threshold(bad, n) == 0.0


def test_input_checks():
    with pytest.raises(ValueError, match="alphas must be positive"):
        mf.theory.radial_dominance_threshold([1.0, -0.5], 8)
    with pytest.raises(ValueError, match="reading must be one of"):
        mf.theory.radial_dominance_threshold([1.0, 0.5], 8, reading="loose")
    with pytest.raises(ValueError, match="normalization must be one of"):
        mf.theory.radial_dominance_margins(1.0, [1.0, 0.5], 8, normalization="sum")
    with pytest.raises(ValueError, match="n"):
        mf.theory.radial_dominance_margins(1.0, [1.0, 0.5], 1)
    with pytest.raises(ValueError, match="beta"):
        mf.theory.radial_dominance_margins(np.nan, [1.0, 0.5], 8)


def test_extreme_strengths_stay_finite():
    # strength ratio 1e4: beta alpha_max reaches ~1e3 during the bracket search, beyond exp overflow
    # (709); the softmax terms are written in exp(-|beta alpha|) and must stay finite
    al = [1e-3, 10.0]
    for nz in ("mean", "softmax"):
        for rd in ("norm_bounded", "exact"):
            b = mf.theory.radial_dominance_threshold(al, 10**5, nz, rd)
            assert np.isfinite(b) and b >= 0
            m = mf.theory.radial_dominance_margins(200.0, al, 10**5, nz, rd)
            assert not np.any(np.isnan(m))
    # softmax margins at beta alpha = 800 are finite (no inf - inf)
    assert np.all(np.isfinite(mf.theory.radial_dominance_margins(80.0, [10.0, 12.0], 64, "softmax")))
