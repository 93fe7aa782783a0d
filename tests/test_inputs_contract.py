"""Issue 26's input contract: bad inputs that used to pass silently or crash unnamed now raise a named ValueError.

Each case is one of the issue's examples (or one found like it); the assertion is on the message, which must
name the argument (and, where two arguments disagree, both of them).  No numerical tolerance is involved except
where stated.
"""

import numpy as np
import pytest

import meanfield as mf
from meanfield.analysis import ensembles
from meanfield.analysis.axisymmetric import w2_marginal, w2_marginal_samples
from meanfield.analysis.clustering import clustering
from meanfield.core import validate
from meanfield.core.heads import scalar_heads
from meanfield.core.schedules import HeadSchedule
from meanfield.models.batched import BatchedSystem
from meanfield.models.circle import circle_multipliers
from meanfield.models.step_rules import RADIAL_RULES, STEP_RULES, directions, step


def _tokens(rng, shape):
    X = rng.standard_normal(shape)
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


# ------------------------------------------------------------------- heads argument
@pytest.mark.parametrize("bad", [None, "abc", 3.0, {"M": 1}])
def test_models_refuse_a_heads_argument_that_is_no_sequence_of_heads(bad):
    for make in (lambda: mf.CirclePDE(bad, 8), lambda: mf.AxisymmetricPDE(bad, 3, 8),
                 lambda: mf.ParticleSystem(bad), lambda: BatchedSystem(bad)):
        with pytest.raises(ValueError, match=r"^heads must "):
            make()


# ------------------------------------------------------------------- kernel overflow range
@pytest.mark.parametrize("normalization", ["softmax", "mean"])
def test_circle_pde_refuses_multipliers_beyond_float64_like_the_axisymmetric_pde(normalization):
    # beta |lambda| = 750: I_k(750) ~ e^750 overflows float64 (the multipliers came out NaN and passed the
    # resolution check, nan > tol being False); refused by the one shared check of core/kernels
    msg = r"^heads\[0\]: beta \* \|lambda\| = 750 overflows the \w+ multipliers in float64"
    with pytest.raises(ValueError, match=msg):
        mf.CirclePDE(scalar_heads([1.0], 2, beta=750.0, normalization=normalization), 64)
    with pytest.raises(ValueError, match=msg):
        mf.AxisymmetricPDE(scalar_heads([1.0], 3, beta=750.0, normalization=normalization), 3, 64)
    with pytest.raises(ValueError, match=r"^head: beta \* \|lambda\| = 750 overflows"):
        circle_multipliers(scalar_heads([1.0], 2, beta=750.0, normalization=normalization)[0], 8)


def test_continuum_pde_refuses_softmax_multipliers_beyond_float64():
    with pytest.raises(ValueError, match=r"^heads\[0\]: beta \* \|lambda\| = 750 overflows the \w+ multipliers"):
        mf.ContinuumPDE(scalar_heads([1.0], 3, beta=750.0, normalization="softmax"), 16)


def test_circle_pde_still_accepts_a_large_but_finite_kernel_range():
    # beta |lambda| = 600 (e^600 ~ 1e260, finite): accepted, multipliers finite (exact check, no tolerance)
    pde = mf.CirclePDE(scalar_heads([1.0], 2, beta=600.0, normalization="softmax"), 1200, kernel_tol=1e-2)
    assert all(np.all(np.isfinite(v)) for m in pde.multipliers for v in m.values())


# ------------------------------------------------------------------- step rules
@pytest.fixture
def batched():
    return BatchedSystem(scalar_heads([1.0], 3, beta=1.0, normalization="softmax"))


@pytest.mark.parametrize("dt, echo", [(-1.0, "-1.0"), (0.0, "0.0"), (np.nan, "nan"), (np.inf, "inf"),
                                      ("0.1", "'0.1'"), (None, "None"), (True, "True"), (1j, "1j")])
def test_step_refuses_a_bad_dt_by_name(rng, batched, dt, echo):
    X = _tokens(rng, (2, 5, 3))
    with pytest.raises(ValueError, match=r"^dt must be a positive finite number; received " + echo):
        step(batched, X, dt)


@pytest.mark.parametrize("rule", STEP_RULES)
def test_step_refuses_non_finite_or_non_unit_tokens_never_renormalizing(rng, batched, rule):
    X = _tokens(rng, (2, 5, 3))
    bad = X.copy()
    bad[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match=r"^y must be a finite real array of shape \(B, n, d\)"):
        step(batched, bad, 0.1, rule)
    with pytest.raises(ValueError, match=r"^y must be a finite real array of shape \(B, n, d\); received shape"):
        step(batched, X[0], 0.1, rule)
    with pytest.raises(ValueError, match=r"^y must have d = 3"):
        step(batched, _tokens(rng, (2, 5, 4)), 0.1, rule)
    if rule in RADIAL_RULES:            # the state z = r x: any radius r > 0, but not r = 0
        z = 2.0 * X
        assert np.all(np.isfinite(step(batched, z, 0.1, rule)))
        z[1, 3] = 0.0
        with pytest.raises(ValueError, match=rf"^y rows must be nonzero for rule '{rule}' .* received 1 zero rows"):
            step(batched, z, 0.1, rule)
    else:                               # tokens on the sphere: 2 X was renormalized silently before
        with pytest.raises(ValueError, match=r"^y rows must be unit vectors"):
            step(batched, 2.0 * X, 0.1, rule)


def test_step_and_directions_refuse_an_unknown_rule(rng, batched):
    X = _tokens(rng, (1, 4, 3))
    for call in (lambda: step(batched, X, 0.1, "adam"), lambda: directions(X, "adam")):
        with pytest.raises(ValueError, match=r"^rule must be one of \('post_ln'"):
            call()


def test_step_of_valid_input_is_unchanged(rng, batched):
    # the validation adds no arithmetic: step equals the rule written out (post_ln; exact up to round-off
    # of the one normalization, 1e-15)
    X = _tokens(rng, (2, 6, 3))
    u = batched.field(X)
    ref = (X + 0.1 * u) / np.linalg.norm(X + 0.1 * u, axis=-1, keepdims=True)
    np.testing.assert_allclose(step(batched, X, 0.1), ref, rtol=0, atol=1e-15)


# ------------------------------------------------------------------- schedules
def test_head_schedule_refuses_heads_of_another_dimension_naming_the_layer():
    with pytest.raises(ValueError, match=r"^schedule\[2\] heads must have dimension d = 3 like schedule\[0\] heads"
                                         r".*received d = 4"):
        HeadSchedule([(0.0, scalar_heads([1.0], 3)), (1.0, scalar_heads([2.0], 3)), (2.0, scalar_heads([1.0], 4))])
    per_system = [list(scalar_heads([1.0], 3)), list(scalar_heads([1.0], 3))]
    with pytest.raises(ValueError, match=r"^schedule\[1\] heads must have dimension d = 3"):
        HeadSchedule([(0.0, per_system), (1.0, [list(scalar_heads([1.0], 2))] * 2)])


# ------------------------------------------------------------------- ensemble measures
@pytest.mark.parametrize("measure", [ensembles.gram, ensembles.pair_density, ensembles.one_cluster,
                                     ensembles.cluster_counts, ensembles.gram_rank])
def test_ensemble_measures_refuse_non_unit_tokens(rng, measure):
    # pair_density(10 X) differed from pair_density(X): the thresholds are cosines of unit tokens
    X = _tokens(rng, (3, 6, 3))
    measure(X)
    with pytest.raises(ValueError, match=r"^X must be unit vectors \(\| \|x\|\^2 - 1 \| <= 3e-8\); received max "
                                         r"deviation 99"):
        measure(10 * X)
    # the tolerance covers every batch BatchedSystem accepts (| |x| - 1 | <= 1e-8): rows at |x| = 1 + 0.99e-8
    # (|x|^2 - 1 = 1.98e-8) pass both, so iterate's observer never refuses its own start
    edge = X * (1 + 0.99e-8)
    BatchedSystem(scalar_heads([1.0], 3)).check(edge)
    measure(edge)
    with pytest.raises(ValueError, match=r"^X must be a finite real array"):
        measure(np.where(X > 0.9, np.nan, X))
    with pytest.raises(ValueError, match=r"^X must be a finite real array .* complex values"):
        measure(X.astype(complex))


def test_ensemble_observer_refuses_non_unit_tokens(rng):
    observe = ensembles.ensemble_observer()
    X = _tokens(rng, (2, 5, 3))
    assert observe(0.0, X)["pair_density"] >= 0
    with pytest.raises(ValueError, match=r"^X must be unit vectors"):
        observe(0.0, 2 * X)


# ------------------------------------------------------------------- axisymmetric analysis
def test_w2_marginal_samples_refuses_different_shapes_naming_both(rng):
    X, Y = _tokens(rng, (200, 3)), _tokens(rng, (200, 4))
    with pytest.raises(ValueError, match=r"^X and Y must have the same shape \(n, d\) .* received X of shape "
                                         r"\(200, 3\) and Y of shape \(200, 4\)"):
        w2_marginal_samples(X, Y)
    with pytest.raises(ValueError, match=r"^X and Y must have the same shape .* \(200, 3\) and Y of shape \(150, 3\)"):
        w2_marginal_samples(X, _tokens(rng, (150, 3)))
    with pytest.raises(ValueError, match=r"^Y must be unit vectors"):
        w2_marginal_samples(X, 2 * X)
    # same shapes: the W2 of a set with itself is 0 (exact: the same sorted angles)
    assert w2_marginal_samples(X, X) == 0.0


def test_w2_marginal_refuses_a_profile_that_is_not_callable(rng):
    with pytest.raises(ValueError, match=r"^profile must be a callable"):
        w2_marginal(_tokens(rng, (50, 3)), 1.0)


# ------------------------------------------------------------------- clustering
@pytest.mark.parametrize("kw, msg", [
    (dict(threshold="0.9"), r"^threshold must be a finite number in \[-1, 1\]; received '0.9'"),
    (dict(threshold=None), r"^threshold must be a finite number in \[-1, 1\]; received None"),
    (dict(threshold=True), r"^threshold must be a finite number in \[-1, 1\]; received True"),
    (dict(threshold=np.nan), r"^threshold must be a finite number in \[-1, 1\]; received nan"),
    (dict(chunk_rows=2.0), r"^chunk_rows must be an integer >= 1; received 2.0"),
    (dict(method=None), r"^method must be one of \('auto', 'direct', 'tree'\); received None"),
])
def test_clustering_refuses_wrong_types_by_name(rng, kw, msg):
    with pytest.raises(ValueError, match=msg):
        clustering(_tokens(rng, (20, 3)), **kw)


def test_clustering_refuses_complex_and_string_tokens(rng):
    X = _tokens(rng, (20, 3))
    with pytest.raises(ValueError, match=r"^X must be a finite real array .* complex values"):
        clustering(X.astype(complex))
    with pytest.raises(ValueError, match=r"^X must be a finite real array"):
        clustering("tokens")


# ------------------------------------------------------------------- found by probing (issue 26, item 1)
@pytest.mark.parametrize("bad", [None, "bs", 3.0, np.eye(3)])
def test_step_rules_refuse_an_object_that_is_no_system(rng, bad):
    from meanfield.models.step_rules import iterate, limit_rhs

    X = _tokens(rng, (1, 4, 3))
    for call in (lambda: step(bad, X, 0.1), lambda: iterate(bad, X, 0.1, 2), lambda: limit_rhs(bad)):
        with pytest.raises(ValueError, match=r"^system must be a BatchedSystem or ScheduledSystem"):
            call()


def test_iterate_refuses_an_observe_that_is_not_callable(rng, batched):
    from meanfield.models.step_rules import iterate

    with pytest.raises(ValueError, match=r"^observe must be None or a callable"):
        iterate(batched, _tokens(rng, (1, 4, 3)), 0.1, 2, observe="pair_density")


def test_batched_field_validates_its_tokens_like_velocity(rng, batched):
    X = _tokens(rng, (2, 5, 3))
    for bad, msg in ((2 * X, r"^X rows must be unit vectors"), (X[0], r"^X must be a finite real array"),
                     (X.astype(complex), r"^X must be a finite real array .* complex values"),
                     (_tokens(rng, (2, 5, 4)), r"^X must have d = 3"), (None, r"^X must be a finite real array")):
        with pytest.raises(ValueError, match=msg):
            batched.field(bad)


def test_ensemble_measures_refuse_an_empty_batch():
    with pytest.raises(ValueError, match=r"^X must have B >= 1 systems of n >= 2 tokens .* received shape \(0, 6, 3\)"):
        ensembles.pair_density(np.zeros((0, 6, 3)))


def test_research_inputs_refuse_a_grid_that_is_no_sphere_grid_and_name_a_massless_input():
    from meanfield.core.sphere import SphereGrid
    from meanfield.workflow.inputs import density_from_coefficients, zonal_density

    for call in (lambda: density_from_coefficients(None, np.ones(6, complex)),
                 lambda: zonal_density(8, legendre=[1.0])):
        with pytest.raises(ValueError, match=r"^grid must be a meanfield.SphereGrid"):
            call()
    g = SphereGrid(8)
    with pytest.raises(ValueError, match=r"^coefficients must have positive mass to be normalized; received mass 0.0"):
        density_from_coefficients(g, np.zeros(g.nalm, complex))
    with pytest.raises(ValueError, match=r"^profile.legendre must have positive mass"):
        zonal_density(g, legendre=[-1.0])
    with pytest.raises(ValueError, match=r"^profile.legendre must be .* received booleans"):
        zonal_density(g, legendre=[True])          # True is not 1 (validate.real_array refuses bool arrays)


def test_pde_states_refuse_complex_or_non_numeric_values():
    circle = mf.CirclePDE(scalar_heads([1.0], 2), 8, kernel_tol=1e-6)
    axi = mf.AxisymmetricPDE(scalar_heads([1.0], 3), 3, 8, kernel_tol=1e-6)
    for bad in (np.zeros(circle.n_state, complex), "y"):
        with pytest.raises(ValueError, match=r"^y must be a real state vector of shape \(18,\)"):
            circle.rhs(0.0, bad)
    for bad in (np.zeros(9, complex), "y", None, np.zeros(3)):
        with pytest.raises(ValueError, match=r"^y must be a real state vector of shape \(9,\) for lmax = 8"):
            axi.rhs(0.0, bad)


def test_axisymmetric_observers_refuse_an_object_that_is_no_pde():
    from meanfield.analysis.axisymmetric import reduced_observer, reduced_resolution_monitor

    for call in (lambda: reduced_observer(None), lambda: reduced_resolution_monitor("pde")):
        with pytest.raises(ValueError, match=r"^pde must be an AxisymmetricPDE or CirclePDE"):
            call()


@pytest.mark.parametrize("bad", [None, "system", 3.0])
def test_solvers_refuse_a_model_of_the_wrong_kind_by_name(bad):
    with pytest.raises(ValueError, match=r"^system must be a meanfield.ParticleSystem; received "):
        mf.solve_particles(bad, np.eye(3), 1.0)
    with pytest.raises(ValueError, match=r"^pde must be a meanfield.ContinuumPDE .* received "):
        mf.solve_continuum(bad, np.zeros(3), 1.0)


def test_perturbed_uniform_refuses_booleans_for_degrees_and_amplitudes():
    from meanfield.core.densities import perturbed_uniform
    from meanfield.core.sphere import SphereGrid

    g = SphereGrid(4)
    with pytest.raises(ValueError, match=r"^perturbations keys must be integer \(l, m\)"):
        perturbed_uniform(g, {(True, 0): 0.1})
    with pytest.raises(ValueError, match=r"^perturbations\[\(1, 0\)\] must be finite .* received True"):
        perturbed_uniform(g, {(1, 0): True})


@pytest.mark.parametrize("check, value", [
    (lambda v: validate.unit_vector("x", v), [True, False, False]),
    (lambda v: validate.unit_vector("x", v), True),
    (lambda v: validate.unit_vector("x", v), [1, True, 0]),          # numpy would make it the integers [1, 1, 0]
    (lambda v: validate.unit_vectors("X", v), [[1.0, 0.0, 0.0], [0.0, True, 0.0]]),
    (lambda v: validate.unit_vectors("X", v), np.eye(3, dtype=bool)),
    (lambda v: validate.probability_weights("w", v, 1), np.array([True])),
])
def test_booleans_are_no_coordinates_or_weights(check, value):
    # True == 1.0 would pass as the unit vector e_1 or as the weight 1: refused by name, never cast
    with pytest.raises(ValueError, match=r"^(x|X|w) must"):
        check(value)
