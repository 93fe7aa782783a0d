"""Issue 12 item 1: particle diagnostics at scale.

The spectral (Funk-Hecke) diagnostics equal the direct pairwise ones where both run, and every
direct O(n^2) path is refused up front beyond :data:`DIRECT_TIME_LIMIT_S` (never a silent O(n^2)).
"""

import numpy as np
import pytest
from conftest import random_tokens

from meanfield.analysis.clustering import clustering
from meanfield.analysis.diagnostics import attention_entropy, attention_entropy_rate, observer
from meanfield.core.heads import Head, scalar_heads
from meanfield.models.particles import DIRECT_PAIR_RATE, DIRECT_TIME_LIMIT_S, ParticleSystem


def _heads(normalization):
    if normalization == "mean":
        return scalar_heads([1.0, -0.5], 3, beta=5.0)
    return [Head(lam * np.eye(3), lam * np.eye(3), 4.0, normalization="softmax") for lam in (1.0, 0.7)]


def _tilted(rng, n):
    """Tokens pulled towards the north pole: an anisotropic state (nonzero order parameter, real forces)."""
    X = random_tokens(rng, n, 3) + [0.0, 0.0, 0.8]
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _compare(rec_s, rec_d, what):
    # tolerance 1e-10 of the sums, relative to the aggregate scale: energies (Parseval of the measure's
    # coefficients) and the order parameter (exact in both) to 1e-9 relative; the dissipation is the
    # mean |v|^2 of velocities each within 1e-10 of the aggregates (|v| ~ |u| here): 1e-8 relative;
    # relative entropies log Z - Q / Z are errors of ~1e-10 * |log Z| ~ 5e-10 absolute: 1e-8 absolute; the
    # Shannon ones add (1/Z) sum_j w_j log(w_j) k_ij for non-uniform weights, a sum of size |log w| ~ 8
    # at the same relative accuracy: 1e-8 absolute too.
    np.testing.assert_allclose(rec_s["energy"], rec_d["energy"], rtol=1e-9, err_msg=what)
    np.testing.assert_allclose(rec_s["energy_head"], rec_d["energy_head"], rtol=1e-9, err_msg=what)
    np.testing.assert_allclose(rec_s["dissipation"], rec_d["dissipation"], rtol=1e-8, err_msg=what)
    np.testing.assert_allclose(rec_s["entropy"], rec_d["entropy"], rtol=0, atol=1e-8, err_msg=what)
    np.testing.assert_allclose(rec_s["relative_entropy"], rec_d["relative_entropy"], rtol=0, atol=1e-8, err_msg=what)
    for key in ("order_parameter", "mean_inner", "min_inner", "n_clusters"):
        if key in rec_d:
            np.testing.assert_allclose(rec_s[key], rec_d[key], rtol=1e-12, err_msg=f"{what}: {key}")


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_observer_spectral_equals_direct(rng, normalization):
    X = _tilted(rng, 4000)
    spec, direct = (ParticleSystem(_heads(normalization), summation=s) for s in ("spectral", "direct"))
    assert spec.uses_spectral(4000) and not direct.uses_spectral(4000)
    _compare(observer(spec)(0.0, X), observer(direct)(0.0, X), normalization)


def test_observer_spectral_equals_direct_weighted(rng):
    X = _tilted(rng, 3000)
    w = rng.uniform(0.5, 1.5, 3000)
    w /= w.sum()
    spec, direct = (ParticleSystem(_heads("softmax"), summation=s) for s in ("spectral", "direct"))
    _compare(observer(spec, w)(0.0, X), observer(direct, w)(0.0, X), "weighted")


@pytest.mark.parametrize("weights, normalization", [("explicit uniform", "mean"), ("non-uniform", "mean"),
                                                     ("explicit uniform", "softmax")])
def test_observer_spectral_equals_direct_any_weights(rng, weights, normalization):
    n = 3000
    X = _tilted(rng, n)
    if weights == "explicit uniform":
        w = np.full(n, 1.0 / n)
    else:
        w = rng.uniform(0.2, 1.8, n)
        w /= w.sum()
    spec, direct = (ParticleSystem(_heads(normalization), summation=s) for s in ("spectral", "direct"))
    rec_s, rec_d = observer(spec, w, per_token=True)(0.0, X), observer(direct, w, per_token=True)(0.0, X)
    _compare(rec_s, rec_d, weights)
    # per token: the same sums without the averaging, so the same tolerances (see _compare)
    for key in ("entropy_token", "relative_entropy_token"):
        np.testing.assert_allclose(rec_s[key], rec_d[key], rtol=0, atol=1e-8, err_msg=f"{weights}: {key}")
    # the direct Shannon entropy is the plain definition -sum p log p: the same call for non-uniform weights
    # (identical floats), relative - log w for uniform ones (one subtraction from sums of O(1) terms: 1e-13)
    np.testing.assert_allclose(rec_d["entropy_token"], attention_entropy(direct, X, w), rtol=0,
                               atol=0 if weights == "non-uniform" else 1e-13)


def test_explicit_uniform_weights_give_the_default_record(rng):
    n = 2500
    X = _tilted(rng, n)
    for system in (ParticleSystem(_heads("mean")), ParticleSystem(_heads("softmax"), summation="direct")):
        default, explicit = observer(system)(0.0, X), observer(system, np.full(n, 1.0 / n))(0.0, X)
        assert set(default) == set(explicit)
        for key in default:               # the same case, the same calls: identical floats (tolerance 0)
            np.testing.assert_array_equal(explicit[key], default[key], err_msg=key)


@pytest.mark.slow
def test_observer_spectral_equals_direct_n2e4(rng):
    X = _tilted(rng, 20000)
    spec, direct = (ParticleSystem(_heads("mean"), summation=s) for s in ("spectral", "direct"))
    _compare(observer(spec)(0.0, X), observer(direct)(0.0, X), "n = 2e4")


def test_observer_switches_to_spectral_shannon_entropy(rng):
    n = 3000
    X = _tilted(rng, n)
    spec, direct = (ParticleSystem(_heads("mean"), summation=s) for s in ("spectral", "direct"))
    rec = observer(spec, per_token=True)(0.0, X)
    H = attention_entropy(direct, X)
    # Shannon = relative + log n (uniform weights); spectral entropies within ~1e-10 |log Z|: 1e-8 absolute
    np.testing.assert_allclose(rec["entropy_token"], H, rtol=0, atol=1e-8)
    np.testing.assert_allclose(rec["entropy"], H.mean(axis=1), rtol=0, atol=1e-8)
    # relative = Shannon - log n for uniform weights (MODEL.md section 3): one subtraction, 1e-13 absolute
    np.testing.assert_allclose(rec["relative_entropy"], rec["entropy"] - np.log(n), rtol=0, atol=1e-13)
    np.testing.assert_allclose(rec["relative_entropy_token"], H - np.log(n), rtol=0, atol=1e-8)


def test_clustering_false_keeps_the_exact_mean_inner(rng):
    X = _tilted(rng, 2500)
    system = ParticleSystem(_heads("mean"))
    rec = observer(system, clustering=False)(0.0, X)
    assert "min_inner" not in rec and "n_clusters" not in rec
    # (|sum x|^2 - n) / (n (n - 1)) is the pairwise mean exactly: equal to rounding (1e-12 relative)
    np.testing.assert_allclose(rec["mean_inner"], clustering(X)["mean_inner"], rtol=1e-12)
    with pytest.raises(ValueError, match="clustering"):
        observer(system, clustering="yes")
    with pytest.raises(ValueError, match="per_token must be"):
        observer(system, per_token="yes")
    with pytest.raises(ValueError, match=r"threshold must be .*received 2"):
        observer(system, threshold=2)
    with pytest.raises(ValueError, match="w must"):
        observer(system, np.full(10, 0.2))            # weights that do not sum to 1, refused up front


# ----------------------------------------------------------------------------- guards
def test_direct_cost_is_the_pair_count():
    system = ParticleSystem(_heads("mean"), summation="direct")
    cost = system.direct_cost(10**4, passes=2)
    assert cost["pairs"] == 2 * 2 * 1e8                       # passes * heads * n^2, exact integers
    assert cost["seconds"] == pytest.approx(4e8 / DIRECT_PAIR_RATE, rel=1e-15)  # one division


def test_direct_paths_refused_up_front_at_large_n():
    n = 200_000        # 2 heads: 8e10 head-pairs, 800 s at 1e8/s: above the 600 s limit
    X = random_tokens(np.random.default_rng(0), n, 3)
    assert 2 * n**2 / DIRECT_PAIR_RATE > DIRECT_TIME_LIMIT_S
    direct = ParticleSystem(_heads("mean"), summation="direct")
    for call in (lambda: direct.energies(X), lambda: direct.velocity(X), lambda: direct.forces(X),
                 lambda: direct.energy_gradients(X), lambda: direct.energy_rates(X),
                 lambda: attention_entropy(direct, X), lambda: attention_entropy_rate(direct, X, Xdot=X * 0)):
        with pytest.raises(ValueError, match=r"O\(n\^2\).*n = 200000.*estimated \d+ s.*DIRECT_TIME_LIMIT_S.*use "):
            call()
    with pytest.raises(ValueError, match="summation='spectral'"):
        direct.energies(X)
    spectral = ParticleSystem(_heads("mean"))              # auto: spectral at this n, so no refusal
    assert np.isfinite(spectral.energy(X))
    with pytest.raises(ValueError, match="energy_gradients .always direct.*use energies"):
        spectral.energy_gradients(X)                      # always direct: refused even when sums are spectral


def test_nthreads_reaches_the_transforms_and_changes_nothing(rng):
    X = _tilted(rng, 3000)
    one, two = (ParticleSystem(_heads("softmax"), summation="spectral", nthreads=t) for t in (1, 2))
    assert two.spectral.grid.nthreads == 2
    # the same transforms split over threads: equal up to the order of floating-point sums (1e-13 relative)
    np.testing.assert_allclose(two.velocity(X), one.velocity(X), rtol=0, atol=1e-13 * np.abs(one.velocity(X)).max())
    with pytest.raises(ValueError, match="nthreads must be an integer >= 1; received 0"):
        ParticleSystem(_heads("mean"), nthreads=0)
