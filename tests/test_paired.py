"""Tests for meanfield.workflow.paired: paired particle/PDE runs and W2 between them (MODEL.md section 4)."""

import numpy as np
import pytest
from _helpers import PAIRED_HEADS as HEADS
from _helpers import paired_blobs as blobs
from _helpers import paired_kw

import meanfield as mf
from meanfield import diagnostics
from meanfield.analysis import transport
from meanfield.models.particles import SPECTRAL_MIN_N
from meanfield.workflow import paired, results
from meanfield.workflow.checkpoint import Checkpointer, RunInterrupted
from meanfield.workflow.paired import ParticleSettings, PDESettings, TransportSettings


@pytest.fixture(scope="module")
def tiny():
    """n = 120 particles, lmax 15, to t = 0.6; the lmax-15 PDE stops (resolution monitor) near t = 0.2."""
    return paired.paired_run(HEADS, blobs, 120, 0.6, [0.0, 0.1, 0.3, 0.6], seed=3, pde=PDESettings(lmax=15))


def test_w2_at_t0_equals_direct_call(tiny):
    pde = mf.ContinuumPDE(HEADS, 15)
    X0 = mf.densities.sample_particles(pde.grid, blobs(pde.grid), 120, seed=3)
    # same seed, same grid: the sample is reproduced exactly (sample_particles is deterministic given the seed)
    assert np.array_equal(X0, tiny.particle_states[0])
    nodes, w = paired.density_measure(pde, blobs(pde.grid))
    direct = transport.w2_particles_density(X0, nodes, w, negative="drop")
    # identical inputs to the same exact emd2 solve: equal up to round-off of the cost summation
    assert abs(tiny.w2[0] - direct.distance) < 1e-12
    assert tiny.w2_methods[0] == "exact" and tiny.w2_method == "exact"


def test_pde_stop_is_reported_and_particles_continue(tiny):
    assert tiny.pde_stopped_early and tiny.pde_status == 1
    assert "no longer resolved" in tiny.pde_message
    # the stopping time is recorded as the PDE's last time, strictly inside (0, t_final)
    assert 0 < tiny.pde_t_stop < 0.6 and tiny.pde_times[-1] == tiny.pde_t_stop
    # particles reached every requested time; W2 exists exactly where both runs exist
    assert tiny.particle_status == 0 and np.array_equal(tiny.particle_times, tiny.times)
    have_pde = np.isin(tiny.times, tiny.pde_times)
    assert np.array_equal(np.isfinite(tiny.w2), have_pde)
    assert have_pde[0] and not have_pde[-1]
    assert [m for m, h in zip(tiny.w2_methods, have_pde) if not h] == [""] * int((~have_pde).sum())
    assert tiny.pde_coefficients.shape == (tiny.pde_times.size, mf.ContinuumPDE(HEADS, 15).grid.nalm)


def test_observables_shapes_and_entropy_convention(tiny):
    T, H = tiny.times.size, len(HEADS)
    for key in diagnostics.OBSERVABLES:
        assert key in tiny.particles
    assert tiny.particles["energy_head"].shape == (T, H) and tiny.particles["relative_entropy"].shape == (T, H)
    # relative entropy H_i - log n is <= 0 (MODEL.md section 3); exact inequality, round-off margin 1e-12
    assert np.all(tiny.particles["relative_entropy"] <= 1e-12)
    X = tiny.particle_states[1]
    system = mf.ParticleSystem(HEADS)
    shannon = mf.diagnostics.attention_entropy(system, X).mean(axis=1)
    # the run's sums versus direct sums recomputed here: both exact up to ~1e-12 relative
    assert np.allclose(tiny.particles["relative_entropy"][1], shannon - np.log(X.shape[0]), rtol=0, atol=1e-9)
    assert abs(tiny.particles["energy"][1] - system.energy(X)) < 1e-9
    # "auto" is ParticleSystem's own rule: 120 tokens < SPECTRAL_MIN_N, so direct sums
    assert tiny.config["particle_sums_requested"] == "auto" and tiny.config["particle_sums"] == "direct"
    assert tiny.config["spectral_lmax"] is None
    assert tiny.config["w2_options"]["seed"] == 3


def test_spectral_and_direct_particle_sums_agree():
    kw = dict(lmax=15, seed=5, t_eval=[0.0, 0.15], monitor=False, transport_grid=paired.transport_grid(8))
    a = paired.paired_run(HEADS, blobs, 60, 0.15, **paired_kw(particle_sums="direct", **kw))
    b = paired.paired_run(HEADS, blobs, 60, 0.15, **paired_kw(particle_sums="spectral", **kw))
    # dopri5 at rtol 1e-8 on the same field (sums agree to ~1e-12): trajectories agree to ~1e-8;
    # W2 is 1-Lipschitz in the particle positions (per particle RMS), so it agrees to the same order
    assert np.max(np.abs(a.particle_states - b.particle_states)) < 1e-6
    assert np.max(np.abs(a.w2 - b.w2)) < 1e-6
    for key in ("energy", "dissipation", "order_parameter"):
        assert np.allclose(a.particles[key], b.particles[key], rtol=1e-6, atol=0), key
    # the relative entropy by Funk-Hecke sums (log Z - beta R / Z) against the direct pairwise one, on
    # trajectories that agree to ~1e-8: entropies are O(0.1-1) with O(1) derivatives, so 1e-6 absolute
    assert a.config["particle_sums"] == "direct" and b.config["particle_sums"] == "spectral"
    assert np.allclose(a.particles["relative_entropy"], b.particles["relative_entropy"], rtol=0, atol=1e-6)


def test_density_measure_mass_and_grid_check():
    pde = mf.ContinuumPDE(HEADS, 15)
    rho = blobs(pde.grid)
    for g in (None, paired.transport_grid(8), paired.transport_grid(12, 24)):
        nodes, w = paired.density_measure(pde, rho, g)
        # GL quadrature exact for degree 15 on these grids: total mass 1 to round-off
        assert abs(w.sum() - 1.0) < 1e-12 and nodes.shape == (w.size, 3)
    with pytest.raises(ValueError, match="nlat >= 8"):
        paired.density_measure(pde, rho, paired.transport_grid(6))
    with pytest.raises(ValueError, match="nlon"):
        paired.transport_grid(8, 10)


def test_w2_densities_self_and_separated():
    pde = mf.ContinuumPDE(HEADS, 15)
    tg = paired.transport_grid(8)
    rho = blobs(pde.grid)
    same = paired.w2_densities(pde, rho, pde, rho, tg, method="exact")
    # identical weights on identical nodes: the identity plan, cost 0 up to arccos round-off ~ 1e-8
    assert same.distance < 1e-7 and same.negative_mass == 0.0
    alpha, kappa, tg16 = 1.0, 10.0, paired.transport_grid(16)
    a = mf.densities.vmf_density(pde.grid, [0.0, 0.0, 1.0], kappa)
    b = mf.densities.vmf_density(pde.grid, [np.sin(alpha), 0.0, np.cos(alpha)], kappa)
    res = paired.w2_densities(pde, a, pde, b, tg16, method="exact")
    # lower bound (Jensen): W2_geo >= W2_chordal >= |mean_a - mean_b| = A(kappa) 2 sin(alpha/2),
    # A = coth(kappa) - 1/kappa; it holds exactly for the node measures, whose first moments are exact
    # (GL exact to degree 31 >= 15 + 1), up to the dropped negative mass (Gibbs ringing of the degree-15
    # truncation, ~4e-6 here): dropping mass m and renormalizing moves a mean by at most ~2 m per side
    lower = (1 / np.tanh(kappa) - 1 / kappa) * 2 * np.sin(alpha / 2)
    assert res.negative_mass < 1e-5 and res.distance >= lower - 4 * res.negative_mass
    # upper bound: the rotation by alpha moves every point by <= alpha; the node measures add at most
    # twice their grid floor (spacing pi/16 ~ 0.2, floor ~ 0.2/2.45 ~ 0.08 each)
    assert res.distance <= alpha + 0.2
    back = paired.w2_densities(pde, b, pde, a, tg16, method="exact")
    assert abs(back.distance - res.distance) < 1e-10   # symmetric in its arguments (same LP, transposed)


def test_negative_density_error_and_drop():
    pde = mf.ContinuumPDE(HEADS, 15)
    rho = mf.densities.vmf_density(pde.grid, [0.0, 0.0, 1.0], 400.0)   # under-resolved: Gibbs ringing
    nodes, w = paired.density_measure(pde, rho)
    assert w.min() < 0
    with pytest.raises(ValueError, match="negative"):
        paired.w2_densities(pde, rho, pde, blobs(pde.grid), paired.transport_grid(8), negative="error")
    res = paired.w2_densities(pde, rho, pde, blobs(pde.grid), paired.transport_grid(8), negative="drop")
    # the dropped mass is reported (never silently clipped): it is the negative part of side a
    nodes8, w8 = paired.density_measure(pde, rho, paired.transport_grid(8))
    assert abs(res.info["negative_mass_a"] - (-w8[w8 < 0].sum())) < 1e-15 and res.negative_mass > 0


@pytest.mark.parametrize("kw, match", [
    (dict(n_particles=1), "n_particles"),
    (dict(sampling="sobol"), "^particles.sampling must be"),
    (dict(particle_sums="fmm"), "^particles.sums must be"),
    (dict(spectral_tol=-1.0), "^particles.spectral_tol must be"),
    (dict(lmax=0), "^pde.lmax must be"),
    (dict(monitor="yes"), "^pde.monitor must be True, False or a meanfield.Monitor"),
    (dict(negative="clip"), "^transport.negative must be"),
    (dict(metric="euclid"), "^transport.metric must be"),
    (dict(w2_method="emd"), "^transport.method must be"),
    (dict(transport_grid=16), "^transport.grid must be None or a SphereGrid"),
    (dict(nu=-0.1), "nu must be"),
    (dict(nu=float("nan")), "nu must be"),
    (dict(nu=0.1), "dt must be a positive number"),        # noisy particles need a fixed particle_dt
    (dict(t_final=-1.0), "t_final"),
    (dict(t_eval=[0.0, 0.5, 0.2]), "t_eval"),
])
def test_bad_input(kw, match):
    args = dict(heads=HEADS, rho_lm0=blobs, n_particles=10, t_final=0.2, lmax=15)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        paired.paired_run(**paired_kw(**args))


def test_bad_initial_density():
    pde = mf.ContinuumPDE(HEADS, 15)
    with pytest.raises(ValueError, match="rho_lm0"):
        paired.paired_run(HEADS, 2 * blobs(pde.grid), 10, 0.2, pde=PDESettings(lmax=15))   # mass 2, not rescaled silently


def test_noisy_pair_runs_with_one_nu():
    """nu applies to both sides; the particle noise is reproducible from the seed."""
    args = dict(heads=HEADS, rho_lm0=blobs, n_particles=60, t_final=0.2, t_eval=[0.0, 0.2], lmax=15, seed=4,
                nu=0.2, particle_dt=0.02)
    a, b = paired.paired_run(**paired_kw(**args)), paired.paired_run(**paired_kw(**args))
    assert a.config["nu"] == 0.2 and np.array_equal(a.particle_states, b.particle_states)   # bit for bit
    # the noise moved the tokens: not the noiseless path (a step of noise moves a token by ~sqrt(2 nu dt) = 0.09)
    c = paired.paired_run(**paired_kw(**dict(args, nu=0.0, particle_dt=None)))
    assert np.abs(a.particle_states[-1] - c.particle_states[-1]).max() > 0.05


# ------------------------------- moved from test_engine.py unchanged: summation, grid, alignment, checkpoints
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
    system = mf.ParticleSystem(HEADS, summation="auto", kernel_tol=1e-12)
    assert not system.uses_spectral(SPECTRAL_MIN_N - 1) and system.uses_spectral(SPECTRAL_MIN_N)
    res = paired.paired_run(HEADS, blobs, SPECTRAL_MIN_N, 0.05, [0.0, 0.05], seed=2, pde=PDESettings(lmax=15),
                            transport=TransportSettings(grid=paired.transport_grid(8), method="sliced"))
    assert res.config["particle_sums"] == "spectral" and res.config["spectral_lmax"] >= 2


def test_one_time_alignment_and_one_transport_grid():
    # one time alignment, with one home (results no longer re-exports it)
    assert callable(paired.align_times) and not hasattr(results, "align_times")
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


def test_paired_run_checkpoint_resume_is_bit_identical(tmp_path, monkeypatch):
    kw = dict(lmax=15, seed=4, transport_grid=paired.transport_grid(8))
    ref = paired.paired_run(HEADS, blobs, 50, 0.3, [0.0, 0.15, 0.3], **paired_kw(**kw))
    ck = Checkpointer(tmp_path / "ck", every=0.05)
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
