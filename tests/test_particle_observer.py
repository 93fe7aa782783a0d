"""The particle observer (meanfield.analysis.diagnostics.observer): what it records, the entropy convention
(``entropy`` Shannon, ``relative_entropy`` relative), weighted tokens, the spectral path, ReLU heads.  Moved
from test_engine.py (0.2.0: test files named after what they test)."""

import numpy as np
import pytest
from _helpers import PAIRED_HEADS as HEADS

import meanfield as mf
from meanfield import diagnostics
from meanfield.analysis.clustering import clustering


def tokens(n, seed):
    X = np.random.default_rng(seed).standard_normal((n, 3))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_observer_records_and_entropy_convention():
    X = tokens(150, 0)
    system = mf.ParticleSystem(HEADS, summation="direct")
    rec = diagnostics.observer(system)(0.0, X)
    assert set(rec) == set(diagnostics.OBSERVABLES)
    n = X.shape[0]
    shannon = diagnostics.attention_entropy(system, X).mean(axis=1)
    # relative entropy = Shannon - log n for uniform weights (an identity; round-off of sums of 150 terms)
    np.testing.assert_allclose(rec["relative_entropy"], shannon - np.log(n), rtol=0, atol=1e-12)
    R = rec["relative_entropy"]
    assert R.shape == (2,) and np.all(R <= 1e-12)   # <= 0 exactly, round-off margin
    # the same calls as the main job's former observer: identical floats (tolerance 0)
    np.testing.assert_array_equal(R, diagnostics.attention_entropy(system, X, relative=True).mean(axis=1))
    # the Shannon entropy is the relative one + log n (uniform weights): one addition, round-off 1e-15
    np.testing.assert_allclose(rec["entropy"], shannon, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(rec["energy_head"], system.energies(X))
    assert rec["dissipation"] == diagnostics.dissipation(system, X)
    # |mean x| and the clustering measures: plain numpy on the same tokens, round-off only
    assert abs(rec["order_parameter"] - np.linalg.norm(X.mean(axis=0))) < 1e-15
    assert {k: rec[k] for k in ("min_inner", "mean_inner", "n_clusters")} == clustering(X)


def test_observer_weighted_tokens():
    X = tokens(80, 1)
    w = np.random.default_rng(2).uniform(0.5, 1.5, 80)
    w /= w.sum()
    system = mf.ParticleSystem(HEADS, summation="direct")
    rec = diagnostics.observer(system, w)(0.0, X)
    H = diagnostics.attention_entropy(system, X, w, relative=True)
    # weighted mean of the per-token relative entropies, and |sum_i w_i x_i|: the same arithmetic
    np.testing.assert_allclose(rec["relative_entropy"], H @ w, rtol=0, atol=1e-15)
    assert abs(rec["order_parameter"] - np.linalg.norm(w @ X)) < 1e-15
    np.testing.assert_allclose(rec["energy_head"], system.energies(X, w), rtol=0, atol=1e-15)


def test_observer_uses_the_systems_spectral_sums(monkeypatch):
    X = tokens(300, 3)
    direct = diagnostics.observer(mf.ParticleSystem(HEADS, summation="direct"))(0.0, X)
    spectral_system = mf.ParticleSystem(HEADS, summation="spectral", kernel_tol=1e-12)
    assert spectral_system.uses_spectral(300)
    with monkeypatch.context() as m:           # the spectral path never calls the O(n^2) direct entropy
        m.setattr(diagnostics, "attention_entropy", lambda *a, **k: pytest.fail("direct entropy called"))
        spectral = diagnostics.observer(spectral_system)(0.0, X)
    # Funk-Hecke sums at tolerance 1e-12 against exact pairwise sums: quantities of size O(0.1-1)
    # agree to ~1e-11; 1e-9 leaves a margin for the transforms' epsilon
    for key in ("energy", "energy_head", "dissipation", "entropy", "relative_entropy"):
        np.testing.assert_allclose(spectral[key], direct[key], rtol=0, atol=1e-9, err_msg=key)


def test_observer_relu_heads_and_bad_system():
    heads = mf.scalar_heads([1.0, 0.5], 3, beta=1.0, kernel="relu")
    X = tokens(100, 4)
    rec = diagnostics.observer(mf.ParticleSystem(heads))(0.0, X)
    # ReLU heads: the relative entropy is defined wherever a token attends to something (here every
    # token: each sees itself with s = lambda > 0) and <= 0 exactly; round-off margin 1e-12
    assert np.all(np.isfinite(rec["relative_entropy"])) and np.all(rec["relative_entropy"] <= 1e-12)
    with pytest.raises(ValueError, match="system must be a ParticleSystem; received tuple"):
        diagnostics.observer(heads)


def test_an_observer_returning_a_list_is_refused_by_name():
    """An observer returning a list (or a number) crashed inside the driver (AttributeError on .items()): now a
    ValueError naming observe and what it returned."""
    import meanfield as mf
    from meanfield.core.options import SaveAt

    system = mf.ParticleSystem(mf.scalar_heads([1.0], 3, 1.0))
    X = mf.initial.uniform_sphere(20, 3, seed=0)
    for bad in ([1.0], 2.0, None):
        with pytest.raises(ValueError, match=f"observe must return a dict of named values .*received "
                                             f"{type(bad).__name__}"):
            mf.solve_particles(system, X, 0.1, save=SaveAt(observe=lambda t, y, bad=bad: bad), progress=False)
