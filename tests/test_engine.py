"""The one paired engine: particle observer, time alignment, transport grid, summation choice,
checkpoints of paired_run, and the main job as RunConfig -> paired_run -> dataset."""

import numpy as np
import pytest

import meanfield as mf
from meanfield import diagnostics, paired, results
from meanfield.models.particles import SPECTRAL_MIN_N
from meanfield.workflow import run as run_module
from meanfield.workflow.checkpoint import Checkpointer, RunInterrupted
from meanfield.workflow.config import RunConfig
from meanfield.workflow.paired import PDESettings, ParticleSettings, TransportSettings
from _helpers import paired_kw

HEADS = mf.scalar_heads([1.0, 0.5], 3, beta=1.0)
MUS = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])


def blobs(grid):
    return mf.densities.vmf_mixture_density(grid, MUS, 4.0, [0.6, 0.4], floor=0.2)


def tokens(n, seed):
    X = np.random.default_rng(seed).standard_normal((n, 3))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


# ---------------------------------------------------------------------------- particle observer
def test_particle_observer_records_and_entropy_convention():
    X = tokens(150, 0)
    system = mf.ParticleSystem(HEADS, summation="direct")
    rec = diagnostics.particle_observer(system)(0.0, X)
    assert set(rec) == set(diagnostics.PARTICLE_OBSERVABLES)
    n = X.shape[0]
    shannon = diagnostics.attention_entropy(system, X).mean(axis=1)
    # relative entropy = Shannon - log n for uniform weights (an identity; round-off of sums of 150 terms)
    np.testing.assert_allclose(rec["entropy"], shannon - np.log(n), rtol=0, atol=1e-12)
    assert rec["entropy"].shape == (2,) and np.all(rec["entropy"] <= 1e-12)   # <= 0 exactly, round-off margin
    # the same calls as the main job's former observer: identical floats (tolerance 0)
    np.testing.assert_array_equal(rec["entropy"], diagnostics.attention_entropy(system, X, relative=True).mean(axis=1))
    np.testing.assert_array_equal(rec["energy_head"], system.energies(X))
    assert rec["dissipation"] == diagnostics.dissipation(system, X)
    # |mean x| and the clustering measures: plain numpy on the same tokens, round-off only
    assert abs(rec["order_parameter"] - np.linalg.norm(X.mean(axis=0))) < 1e-15
    assert {k: rec[k] for k in ("min_inner", "mean_inner", "n_clusters")} == diagnostics.clustering(X)


def test_particle_observer_weighted_tokens():
    X = tokens(80, 1)
    w = np.random.default_rng(2).uniform(0.5, 1.5, 80)
    w /= w.sum()
    system = mf.ParticleSystem(HEADS, summation="direct")
    rec = diagnostics.particle_observer(system, w)(0.0, X)
    H = diagnostics.attention_entropy(system, X, w, relative=True)
    # weighted mean of the per-token relative entropies, and |sum_i w_i x_i|: the same arithmetic
    np.testing.assert_allclose(rec["entropy"], H @ w, rtol=0, atol=1e-15)
    assert abs(rec["order_parameter"] - np.linalg.norm(w @ X)) < 1e-15
    np.testing.assert_allclose(rec["energy_head"], system.energies(X, w), rtol=0, atol=1e-15)


def test_particle_observer_uses_the_systems_spectral_sums(monkeypatch):
    X = tokens(300, 3)
    direct = diagnostics.particle_observer(mf.ParticleSystem(HEADS, summation="direct"))(0.0, X)
    spectral_system = mf.ParticleSystem(HEADS, summation="spectral", tolerance=1e-12)
    assert spectral_system.uses_spectral(300)
    with monkeypatch.context() as m:           # the spectral path never calls the O(n^2) direct entropy
        m.setattr(diagnostics, "attention_entropy", lambda *a, **k: pytest.fail("direct entropy called"))
        spectral = diagnostics.particle_observer(spectral_system)(0.0, X)
    # Funk-Hecke sums at tolerance 1e-12 against exact pairwise sums: quantities of size O(0.1-1)
    # agree to ~1e-11; 1e-9 leaves a margin for the transforms' epsilon
    for key in ("energy", "energy_head", "dissipation", "entropy"):
        np.testing.assert_allclose(spectral[key], direct[key], rtol=0, atol=1e-9, err_msg=key)


def test_particle_observer_relu_heads_and_bad_system():
    heads = mf.scalar_heads([1.0, 0.5], 3, beta=1.0, kernel="relu")
    X = tokens(100, 4)
    rec = diagnostics.particle_observer(mf.ParticleSystem(heads))(0.0, X)
    # ReLU heads: the relative entropy is defined wherever a token attends to something (here every
    # token: each sees itself with s = lambda > 0) and <= 0 exactly; round-off margin 1e-12
    assert np.all(np.isfinite(rec["entropy"])) and np.all(rec["entropy"] <= 1e-12)
    with pytest.raises(ValueError, match="system must be a ParticleSystem; received tuple"):
        diagnostics.particle_observer(heads)


# ---------------------------------------------------------------------------- summation, grid, alignment
def test_zonal_relu_heads_with_auto_sums_run_direct():
    heads = mf.scalar_heads([1.0, 0.5], 3, beta=1.0, kernel="relu")
    res = paired.paired_run(heads, blobs, 40, 0.1, [0.0, 0.1], seed=1, particles=ParticleSettings(sums="auto"),
                            pde=PDESettings(lmax=15), transport=TransportSettings(grid=paired.transport_grid(8)))
    assert res.config["particle_sums"] == "direct" and res.config["particle_sums_requested"] == "auto"
    assert res.particle_status == 0 and np.all(np.isfinite(res.w2))
    system = mf.ParticleSystem(heads, summation="direct")
    # the recorded energies are the direct sums of the recorded states (same code, round-off only)
    np.testing.assert_allclose(res.particles["energy"][-1], system.energy(res.particle_states[-1]), rtol=1e-14)
    with pytest.raises(ValueError, match="no lmax rule"):   # asking for spectral sums still says why not
        paired.paired_run(heads, blobs, 40, 0.1, particles=ParticleSettings(sums="spectral"),
                          pde=PDESettings(lmax=15))


def test_auto_sums_follow_particle_system_rule():
    system = mf.ParticleSystem(HEADS, summation="auto", tolerance=1e-12)
    assert not system.uses_spectral(SPECTRAL_MIN_N - 1) and system.uses_spectral(SPECTRAL_MIN_N)
    res = paired.paired_run(HEADS, blobs, SPECTRAL_MIN_N, 0.05, [0.0, 0.05], seed=2, pde=PDESettings(lmax=15),
                            transport=TransportSettings(grid=paired.transport_grid(8), method="sliced"))
    assert res.config["particle_sums"] == "spectral" and res.config["spectral_lmax"] >= 2


def test_one_time_alignment_and_one_transport_grid():
    assert results.align_times is paired.align_times
    pde = mf.ContinuumPDE(HEADS, 15)
    assert paired.resolve_transport_grid(pde) is pde.grid
    tg = paired.transport_grid(8)
    assert paired.resolve_transport_grid(pde, tg) is tg
    with pytest.raises(ValueError, match="transport_grid must be a SphereGrid or None; received int"):
        paired.resolve_transport_grid(pde, 8)
    with pytest.raises(ValueError, match="nlat >= 8"):     # checked before any run starts
        paired.paired_run(HEADS, blobs, 10, 0.1, pde=PDESettings(lmax=15),
                          transport=TransportSettings(grid=paired.transport_grid(6)))
    # a grid of the PDE's degree carries the density by its exact synthesis: the same nodes and
    # weights as synthesizing there directly (identical floats)
    g = paired.transport_grid(16)
    nodes, w = paired.density_measure(pde, blobs(pde.grid), g)
    np.testing.assert_array_equal(w, g.synthesis(blobs(pde.grid)).ravel() * g.weights.ravel())
    # any other grid evaluates at its nodes: agrees with the synthesis to the transforms' epsilon 1e-13
    _, w_pde = paired.density_measure(pde, blobs(pde.grid))
    np.testing.assert_allclose(w_pde, pde.grid.synthesis(blobs(pde.grid)).ravel() * pde.grid.weights.ravel(),
                               rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------- checkpoints of paired_run
def test_paired_run_checkpoint_resume_is_bit_identical(tmp_path, monkeypatch):
    kw = dict(lmax=15, seed=4, transport_grid=paired.transport_grid(8), checkpoint_every=0.05)
    ref = paired.paired_run(HEADS, blobs, 50, 0.3, [0.0, 0.15, 0.3], **paired_kw(**kw))
    ck = Checkpointer(tmp_path / "ck")
    ck.start("# test\n")
    real, count = mf.ParticleSystem.rhs, {"n": 0}

    def rhs(self, t, y):
        count["n"] += 1
        if count["n"] == 20:
            raise KeyboardInterrupt
        return real(self, t, y)

    with monkeypatch.context() as m:
        m.setattr(mf.ParticleSystem, "rhs", rhs)
        with pytest.raises(RunInterrupted, match="particles run interrupted at t ="):
            paired.paired_run(HEADS, blobs, 50, 0.3, [0.0, 0.15, 0.3], checkpoints=ck, **paired_kw(**kw))
    assert ck.finished("pde") is not None and ck.state("particles") is not None
    again = paired.paired_run(HEADS, blobs, 50, 0.3, [0.0, 0.15, 0.3], checkpoints=ck, **paired_kw(**kw))
    # the same steps and arithmetic as the uninterrupted run: identical floats (tolerance 0)
    np.testing.assert_array_equal(again.particle_states, ref.particle_states)
    np.testing.assert_array_equal(again.pde_coefficients, ref.pde_coefficients)
    np.testing.assert_array_equal(again.w2, ref.w2)
    for key in ref.particles:
        np.testing.assert_array_equal(again.particles[key], ref.particles[key])
    with pytest.raises(ValueError, match="checkpoints must be a Checkpointer or None; received str"):
        paired.paired_run(HEADS, blobs, 50, 0.3, checkpoints="ck", pde=PDESettings(lmax=15))


# ---------------------------------------------------------------------------- the main job through paired_run
def test_main_job_is_paired_run_converted(monkeypatch):
    config = RunConfig.from_dict({"seed": 5, "pde": {"lmax": 15}, "particles": {"n": 80},
                                  "integrator": {"t_final": 1.0, "n_frames": 5}})
    seen = {}
    real = run_module.paired_run

    def spy(*args, **kw):
        seen["result"] = real(*args, **kw)
        return seen["result"]

    monkeypatch.setattr(run_module, "paired_run", spy)
    ds = run_module.run(config, progress=False)
    res = seen["result"]
    # the dataset holds the engine's numbers unchanged (copies, tolerance 0)
    np.testing.assert_array_equal(ds["w2"].values, res.w2)
    np.testing.assert_array_equal(ds["particle_order_parameter"].values, res.particles["order_parameter"])
    assert ds.attrs["w2_grid_nlat"] == 16 and ds.attrs["w2_grid_nlon"] == 32      # the degree-lmax GL grid
    assert ds.attrs["particle_sums"] == res.config["particle_sums"] == "direct"
    # lmax 15 stops the PDE before t = 1 (resolution monitor): NaN exactly where it did not reach
    assert res.pde_stopped_early and ds.attrs["pde_status"] == 1
    reached = np.isin(res.times, res.pde_times)
    assert np.array_equal(np.isfinite(ds["pde_energy"].values), reached)
    assert np.array_equal(np.isfinite(ds["w2"].values), reached)
    assert np.all(np.isnan(ds["rho"].values[~reached])) and np.all(np.isfinite(ds["X"].values))
    k = int(np.flatnonzero(reached)[-1])
    np.testing.assert_array_equal(results.density_coefficients(ds, k), res.pde_coefficients[k])


def test_to_dataset_refuses_a_result_of_another_config():
    res = paired.paired_run(HEADS, blobs, 30, 0.1, [0.0, 0.1], seed=0, pde=PDESettings(lmax=15),
                            transport=TransportSettings(grid=paired.transport_grid(8)))
    config = RunConfig.from_dict({"pde": {"lmax": 15}, "particles": {"n": 31}})
    with pytest.raises(ValueError, match=r"made from config \(lmax, n_particles, heads\) = \(15, 31, 2\); "
                                         r"received a run with \(15, 30, 2\)"):
        run_module.to_dataset(res, config)
