"""The one cost guard (meanfield.core.cost): every guarded entry point refuses an over-limit case before
it allocates, with the estimate and the way out; allowed cases still run; estimates follow from sizes.

Each refusal runs under tracemalloc and asserts a traced peak below 100 MB: numpy registers its array
buffers with tracemalloc, so an attempted (B, n, n) block, basis or state list would show up there as
at least its size (GiB); 100 MB leaves room for the inputs and the interpreter's own allocations and
is far below every refused estimate (>= 4 GiB).  No timing is asserted (speed: benchmarks/cost_guard.py).
"""

import tracemalloc
import warnings

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis.clustering import clustering
from meanfield.analysis.mmd import mmd_weights
from meanfield.analysis.transport import w2_particles_field
from meanfield.core import cost
from meanfield.core.options import StepControl
from meanfield.core.random_heads import estimate_random_heads, random_heads
from meanfield.core.schedules import random_layers
from meanfield.core.sphere import SphereGrid, estimate_grid
from meanfield.models.axisymmetric import AxisymmetricPDE, estimate_axisymmetric
from meanfield.models.batched import BatchedSystem, estimate_batched
from meanfield.models.circle import CirclePDE, estimate_circle
from meanfield.models.step_rules import estimate_iterate, iterate
from meanfield.workflow.phase_diagram import PhaseDiagramConfig, phase_diagram

PEAK_BYTES = 100e6   # see the module docstring


def refused(call, *patterns):
    """Run ``call`` under tracemalloc: it must raise ValueError matching every pattern, with a traced peak
    below PEAK_BYTES (nothing large was allocated before the refusal)."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as err:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BYTES, f"{peak / 2**20:.0f} MiB traced before the refusal"
    for p in patterns:
        assert __import__("re").search(p, str(err.value)), (p, str(err.value))
    return str(err.value)


def heads(d, n=1, **kw):
    return mf.scalar_heads([1.0] * n, d, beta=1.0, **kw)


def unit_batch(B, n, d):
    X = np.zeros((B, n, d))
    X[..., 0] = 1.0
    return X


# ---------------------------------------------------------------------------- the guard itself
def test_guard_message_names_estimate_limit_and_way_out():
    msg = refused(lambda: cost.guard("thing(k=9)", bytes=5 * 2**30, seconds=7200.0, fix="a smaller k"),
                  r"thing\(k=9\) would need about 5 GiB of memory and would take an estimated 7200 s \(2.0 h\)",
                  r"MEMORY_LIMIT_BYTES = 4 GiB and TIME_LIMIT_S = 3600 s", r"use a smaller k",
                  r"cost.limits\(bytes=..., seconds=...\)")
    assert "TIME_LIMIT_S" in msg
    assert cost.guard("small", bytes=2**30, seconds=10.0, fix="-").bytes == 2**30      # below: the Cost back


def test_limits_lift_and_restore():
    with cost.limits(bytes=float("inf"), seconds=1e9):
        assert cost.current_limits() == (float("inf"), 1e9)
        cost.guard("big", bytes=1e15, seconds=1e8, fix="-")                             # lifted: no error
        with cost.limits(seconds=1.0):
            assert cost.current_limits() == (float("inf"), 1.0)
    assert cost.current_limits() == (cost.MEMORY_LIMIT_BYTES, cost.TIME_LIMIT_S)
    for bad in (0, -1.0, float("nan"), "1", True):
        with pytest.raises(ValueError, match="bytes must be a number > 0"):
            with cost.limits(bytes=bad):
                pass


# ---------------------------------------------------------------------------- each guarded entry point refuses
def test_circle_pde_kmax():
    refused(lambda: CirclePDE(heads(2), 10**10), r"CirclePDE\(kmax=10000000000\)", r"TiB", r"a smaller kmax")


@pytest.mark.parametrize("lmax, d", [(10**9, 3), (30000, 16)])
def test_axisymmetric_pde_lmax(lmax, d):
    refused(lambda: AxisymmetricPDE(heads(d), d, lmax), rf"AxisymmetricPDE\(d={d}, lmax={lmax}\)", r"GiB|TiB",
            r"a smaller lmax")


@pytest.mark.parametrize("causal", [False, True])
def test_batched_score_blocks(causal):
    X = unit_batch(1, 100_000, 3)
    system = BatchedSystem(heads(3), causal=causal)
    for call in (system.velocity, system.field, system.forces):
        refused(lambda: call(X), r"\(1, 100000, 3\)", r"74.5 GiB" if not causal else r"GiB", r"fewer tokens n")


def test_random_heads_and_layers():
    refused(lambda: random_heads(100_000), r"random_heads\(d=100000", r"GiB", r"a smaller d")
    refused(lambda: random_heads(3000, 100), r"n_heads=100", r"fewer n_heads")
    refused(lambda: random_layers(2000, 200, 0.1), r"random_layers\(d=2000, n_layers=200", r"fewer n_layers")


def test_iterate_steps():
    system = BatchedSystem(heads(3))
    X = unit_batch(2, 8, 3)
    refused(lambda: iterate(system, X, 0.01, 10**9, save_states=True), r"iterate\(n_steps=1000000000",
            r"TiB", r"h\)", r"save_states=False")
    refused(lambda: iterate(system, X, 0.01, 10**8, every=10**8, save_states=False), r"estimated \d+ s",
            r"fewer n_steps")


def test_phase_diagram_total():
    config = PhaseDiagramConfig(betas=tuple(np.linspace(1, 9, 40)), t_final=1000.0, dt=0.01, n=64, batch=256)
    refused(lambda: phase_diagram(config), r"phase_diagram of 40 betas x 100000 layers", r"TIME_LIMIT_S",
            r"fewer betas")


def test_tree_clustering_counts_cell_pairs():
    X = mf.initial.uniform_sphere(400, 200, seed=1)
    with cost.limits(bytes=1e6):              # 400 tokens: ~8e4 candidate pairs x 128 bytes = 10 MB > 1 MB
        refused(lambda: clustering(X, 0.0, method="tree"), r"clustering\(method='tree'\)", r"candidate pairs",
                r"method='direct'")
    # the same case runs under the default limit, with the direct path's numbers (both exact here)
    tree, direct = clustering(X, 0.0, method="tree"), clustering(X, 0.0, method="direct")
    assert tree["n_clusters"] == direct["n_clusters"]
    # the same extreme pair: equal to the round-off of two summation orders of a 200-term product
    assert tree["min_inner"] == pytest.approx(direct["min_inner"], abs=1e-14)


def test_semidiscrete_quadrature():
    grid = SphereGrid(7)
    rho = np.zeros(grid.nalm, complex)
    rho[0] = 1 / np.sqrt(4 * np.pi)
    X = mf.initial.uniform_sphere(100, 3, seed=2)
    refused(lambda: w2_particles_field(X, rho, grid, n_quad=10**6), r"n_quad = 1000000", r"GiB",
            r"a smaller n_quad")


def test_grid_and_mmd_sizes():
    refused(lambda: SphereGrid(100_000), r"SphereGrid\(lmax=100000", r"a smaller lmax")
    refused(lambda: mmd_weights(10**10), r"mmd_weights\(lmax=10000000000\)", r"a smaller lmax")


def test_fixed_step_runs_count_per_step_overhead():
    # 10 tokens, 1e7 noisy steps: 2e9 head-pairs of sums (20 s) but 1e7 x STEP_OVERHEAD_S = 2500 s of steps
    system = mf.ParticleSystem(heads(3), summation="direct", nu=0.1)
    X0 = mf.initial.uniform_sphere(10, 3, seed=1)
    msg = refused(lambda: mf.solve_particles(system, X0, 1.0, step=StepControl(dt=1e-7), seed=1,
                                             direct_limit_s=600.0),
                  r"10000000 steps x 0.00025 s of per-step overhead", r"direct_limit_s = 600 s",
                  r"use a larger dt")
    assert "2500 s of steps" in msg
    deterministic = mf.ParticleSystem(heads(3))
    refused(lambda: mf.solve_particles(deterministic, X0, 1.0, method="rk4", step=StepControl(dt=1e-8)),
            r"100000000 steps", r"direct_limit_s = 3600 s")
    cost_ = system.check_direct_run(10, 2000, steps=1000)
    # 1000 steps x STEP_OVERHEAD_S + 2000 passes x 100 pairs / DIRECT_PAIR_RATE: exact arithmetic
    assert cost_["overhead_s"] == 1000 * cost.STEP_OVERHEAD_S
    assert cost_["seconds"] == pytest.approx(0.25 + 2e5 / 1e8, rel=1e-12)


# ---------------------------------------------------------------------------- allowed cases still run
def test_large_but_allowed_cases_run():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # resolution warnings of the coarse kernels: not the point here
        assert CirclePDE(heads(2), 20000).kmax == 20000
        assert AxisymmetricPDE(heads(8), 8, 300).lmax == 300
    assert len(random_heads(300, 2, seed=0)) == 2
    v = BatchedSystem(heads(3), causal=True).velocity(np.stack([mf.initial.uniform_sphere(500, 3, seed=1)]))
    assert v.shape == (1, 500, 3) and np.all(np.isfinite(v))
    tr = iterate(BatchedSystem(heads(3)), unit_batch(2, 8, 3), 0.01, 2000, every=100)
    assert tr.y.shape == (21, 2, 8, 3)


# ---------------------------------------------------------------------------- estimates from sizes
def test_memory_estimates_bound_what_is_kept():
    # the estimate is the peak; what the object keeps must lie below it and within a factor of 6 of it
    # (temporaries and per-head multipliers are in the peak only; measured ratios in RESULTS_cost_guard.md)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pde = AxisymmetricPDE(heads(3), 3, 200)
        circle = CirclePDE(heads(2), 5000)
    kept = pde._Q.nbytes + pde._dQ.nbytes + pde._dQ_flux.nbytes
    est = estimate_axisymmetric(200, 3).bytes
    assert kept <= est <= 6 * kept
    kept = circle.theta.nbytes + circle._nodes.nbytes + circle._ik.nbytes + circle._k2.nbytes
    assert kept <= estimate_circle(5000, 1).bytes <= 6 * kept
    hs = random_heads(200, 3, seed=1)
    kept = sum(h.M.nbytes + h.V.nbytes for h in hs)
    assert kept <= estimate_random_heads(200, 3).bytes <= 6 * kept
    grid = SphereGrid(40)
    kept = grid.nodes.nbytes + grid.e_theta.nbytes + grid.e_phi.nbytes + grid.weights.nbytes
    assert kept <= estimate_grid(40, grid.nlat, grid.nlon).bytes <= 6 * kept
    # one (n, n) float64 score block per system chunk: exactly 8 n^2 bytes of blocks at n = 1000
    assert estimate_batched(1, 1000, 3, 1).bytes == pytest.approx(8e6 + 2 * 8 * 3000, rel=1e-12)
    tr = iterate(BatchedSystem(heads(3)), unit_batch(2, 8, 3), 0.01, 50)
    assert tr.y.nbytes <= estimate_iterate(BatchedSystem(heads(3)), (2, 8, 3), 50).bytes


def test_estimates_scale_with_sizes():
    # the bytes formulas: linear in kmax, in the basis entries (lmax^2), in the score blocks (n^2)
    assert estimate_circle(2 * 10**6, 1).bytes == pytest.approx(2 * estimate_circle(10**6, 1).bytes, rel=1e-5)
    ratio = estimate_axisymmetric(2000, 3).bytes / estimate_axisymmetric(1000, 3).bytes
    assert ratio == pytest.approx(4.0, rel=2e-3)              # (2001 x 3001) / (1001 x 1501)
    assert estimate_batched(1, 20000, 3, 1).bytes == pytest.approx(4 * estimate_batched(1, 10000, 3, 1).bytes,
                                                                   rel=1e-3)


def test_extend_far_beyond_the_run():
    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.extend import extend
    from meanfield.workflow.run import run

    config = RunConfig.from_dict({"pde": {"lmax": 11}, "particles": {"n": 20}, "initial": {"kappas": [1.0]},
                                  "seed": 3, "outputs": {"figures": False, "animation": False},
                                  "integrator": {"t_final": 0.1, "n_frames": 2}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # resolution warnings of the small run: not the point here
        ds = run(config, progress=False)
    refused(lambda: extend(ds, 1e9), r"extend to t_final = 1e\+09 from t = 0.1 \(9999999999 new frames\)",
            r"TIME_LIMIT_S|MEMORY_LIMIT_BYTES", r"a t_final closer")


def traced_peak(call):
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_estimates_match_the_traced_peak():
    # tracemalloc sees numpy's buffers, deterministically: the estimate must lie within a factor 1.5 of the
    # traced peak, plus 2 MB of fixed overhead (heads, small arrays) that the per-size formulas leave out
    # (benchmarks/RESULTS_cost_guard.md: ratios 0.85-1.10 at sizes 100x these)
    X = np.stack([mf.initial.uniform_sphere(1500, 3, seed=1)])
    cases = [(lambda: BatchedSystem(heads(3)).velocity(X), estimate_batched(1, 1500, 3, 1)),
             (lambda: BatchedSystem(heads(3), causal=True).velocity(X), estimate_batched(1, 1500, 3, 1, causal=True)),
             (lambda: AxisymmetricPDE(heads(8), 8, 600), estimate_axisymmetric(600, 8)),
             (lambda: CirclePDE(heads(2), 100_000), estimate_circle(100_000, 1)),
             (lambda: random_heads(600, 2, seed=0), estimate_random_heads(600, 2))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # resolution warnings of the coarse kernels: not the point here
        for call, est in cases:
            peak = traced_peak(call)
            assert est.bytes / 1.5 - 2e6 <= peak <= 1.5 * est.bytes + 2e6, (est.what, peak, est.bytes)


def test_circle_quadrature_path_one_evaluation():
    # non-zonal heads sum over all (3K+3)^2 grid pairs at every evaluation: K = 2e5 is 3.6e11 pairs, ~1 h each
    M = np.array([[1.0, 0.3], [0.0, 1.0]])
    head = mf.Head(M, np.eye(2), 1.0)
    refused(lambda: CirclePDE((head,), 200_000), r"quadrature path", r"one evaluation", r"zonal heads")
    assert not CirclePDE((head,), 50).zonal                    # small: the quadrature path still builds


def test_one_pair_rate_serves_every_direct_sum_estimate():
    # particles, batched systems and the circle's quadrature path estimate a direct sum at one rate, the
    # cost guard's SECONDS_PER_PAIR: no module keeps a rate of its own (exact floats, no tolerance)
    from meanfield.core import cost
    from meanfield.models import batched, circle, particles
    assert not hasattr(batched, "BATCHED_SECONDS_PER_PAIR") and not hasattr(circle, "CIRCLE_SECONDS_PER_PAIR")
    assert particles.DIRECT_PAIR_RATE == 1.0 / cost.SECONDS_PER_PAIR
    est = batched.estimate_batched(2, 100, 3, 1)
    assert est.seconds >= 2 * 100 * 100 * cost.SECONDS_PER_PAIR


def test_a_spectral_particle_run_is_refused_by_its_memory_not_a_memoryerror():
    """Spectral runs had no memory estimate: 10^8 noisy tokens were accepted and ended in a MemoryError.  Now the
    run's peak (RUN_BYTES_PER_TOKEN, measured 380 to 520, plus the saved frames) is guarded before anything is
    allocated; 10^6 tokens with 11 frames (0.9 GB) pass."""
    import meanfield as mf
    from meanfield.workflow.simulate import solve_particles

    system = mf.ParticleSystem(mf.scalar_heads([1.0], 3, 2.0), nu=0.1)
    assert system.uses_spectral(10**8)
    with pytest.raises(ValueError, match=r"solve_particles with n = 100000000 tokens .* GiB of memory .*fewer tokens"):
        system.check_run(10**8, 1.0, dt=0.01)
    assert system.check_run(10**6, 1.0, dt=0.01) == "geodesic_strang"
    X = mf.initial.uniform_sphere(1000, 3, seed=0)
    with cost.limits(bytes=2**16):                      # 1000 tokens need ~0.7 MiB: refused before the run
        with pytest.raises(ValueError, match="solve_particles with n = 1000 tokens"):
            solve_particles(system, X, 0.1, step=mf.StepControl(dt=0.05), seed=0, progress=False)
