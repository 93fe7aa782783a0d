"""One name per knob across the models (issue 32, item 4).

How the kernel sums are evaluated is ``summation`` on every model that chooses it; the relative truncation accuracy
of the kernel's expansion is ``kernel_tol`` on every model (and public function) that expands one.  The names of 0.2
(``tolerance``, ``ContinuumPDE`` / ``CirclePDE`` ``method``) are refused by a ``TypeError`` that names the new
keyword (:func:`meanfield.core.validate.renamed`), not Python's bare "unexpected keyword argument".  The default
work space of the direct sums has one home, :data:`meanfield.core.sums.CHUNK_BYTES`.
(Every check here is on names, texts or exact integers: no tolerance.)
"""

import dataclasses
import importlib
import inspect
import pickle
import pkgutil

import numpy as np
import pytest

import meanfield as mf
from meanfield import models
from meanfield.core import validate
from meanfield.core.sums import CHUNK_BYTES
from meanfield.models import batched, causal, fastsum, generalsum
from meanfield.models.axisymmetric import AxisymmetricPDE
from meanfield.models.batched import BatchedSystem
from meanfield.models.causal import CausalSystem
from meanfield.models.causal_continuum import CausalCirclePDE, CausalSpherePDE
from meanfield.models.fastsum import SpectralSum
from meanfield.models.generalsum import GeneralSpectralSum

H2 = lambda: mf.scalar_heads([1.0], 2, beta=2.0)  # noqa: E731
H3 = lambda: mf.scalar_heads([1.0], 3, beta=2.0)  # noqa: E731

EXPANDS_A_KERNEL = (mf.ParticleSystem, BatchedSystem, CausalSystem, SpectralSum, GeneralSpectralSum, mf.ContinuumPDE,
                    mf.CirclePDE, AxisymmetricPDE, CausalCirclePDE, CausalSpherePDE)
"""Every model class whose sums or multipliers truncate a kernel's expansion."""

CHOOSES_ITS_SUMMATION = (mf.ParticleSystem, BatchedSystem, CausalSystem, mf.ContinuumPDE, mf.CirclePDE)
"""Every model class with more than one way of evaluating its kernel sums."""

OLD_NAMES = [
    # (what, call with the old keyword, old, new)
    ("ParticleSystem", lambda: mf.ParticleSystem(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("BatchedSystem", lambda: BatchedSystem(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("CausalSystem", lambda: CausalSystem(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("SpectralSum", lambda: SpectralSum(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("GeneralSpectralSum", lambda: GeneralSpectralSum(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("spectral_sum", lambda: fastsum.spectral_sum(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("general_degree", lambda: generalsum.general_degree(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("circle_kmax", lambda: causal.circle_kmax(H2(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("sphere_lmax", lambda: causal.sphere_lmax(H3(), tolerance=1e-8), "tolerance", "kernel_tol"),
    ("ContinuumPDE", lambda: mf.ContinuumPDE(H3(), 8, method="quadrature"), "method", "summation"),
    ("CirclePDE", lambda: mf.CirclePDE(H2(), 8, method="quadrature"), "method", "summation"),
]

NEW_NAMES = [
    lambda: mf.ParticleSystem(H3(), kernel_tol=1e-8),
    lambda: BatchedSystem(H3(), kernel_tol=1e-8),
    lambda: CausalSystem(H3(), kernel_tol=1e-8),
    lambda: SpectralSum(H3(), kernel_tol=1e-8),
    lambda: GeneralSpectralSum(H3(), kernel_tol=1e-8),
    lambda: fastsum.spectral_sum(H3(), kernel_tol=1e-8),
    lambda: generalsum.general_degree(H3(), kernel_tol=1e-8),
    lambda: causal.circle_kmax(H2(), kernel_tol=1e-8),
    lambda: causal.sphere_lmax(H3(), kernel_tol=1e-8),
    lambda: mf.ContinuumPDE(H3(), 8, summation="quadrature"),
    lambda: mf.CirclePDE(H2(), 8, summation="quadrature"),
]


@pytest.mark.parametrize("what, call, old, new", OLD_NAMES, ids=[c[0] for c in OLD_NAMES])
def test_an_old_keyword_is_refused_by_its_new_name(what, call, old, new):
    with pytest.raises(TypeError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"{what}: {old} is now {new}"), msg
    assert "unexpected keyword" not in msg


@pytest.mark.parametrize("call", NEW_NAMES, ids=[c[0] for c in OLD_NAMES])
def test_the_new_keyword_is_accepted(call):
    assert call() is not None


def test_signatures_show_the_new_keywords_only():
    # functools.wraps keeps the signature: help(), IDEs and the docstring checks see the new names
    for fn in (mf.ParticleSystem, BatchedSystem, CausalSystem, SpectralSum, GeneralSpectralSum, fastsum.spectral_sum,
               generalsum.general_degree, causal.circle_kmax, causal.sphere_lmax):
        params = inspect.signature(fn).parameters
        assert "kernel_tol" in params and "tolerance" not in params, fn
    for cls in (mf.ContinuumPDE, mf.CirclePDE):
        params = inspect.signature(cls).parameters
        assert "summation" in params and "method" not in params, cls


def _fields(cls):
    return {f.name for f in dataclasses.fields(cls)}


def test_models_share_the_knob_names():
    for cls in EXPANDS_A_KERNEL:
        assert "kernel_tol" in _fields(cls), cls
    for cls in CHOOSES_ITS_SUMMATION:
        assert "summation" in _fields(cls), cls
    # every dataclass of meanfield.models, found by walking the package (a new model is checked too)
    seen = 0
    for info in pkgutil.iter_modules(models.__path__):
        module = importlib.import_module(f"meanfield.models.{info.name}")
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and obj.__module__ == module.__name__ and dataclasses.is_dataclass(obj):
                seen += 1
                assert not {"tolerance", "method"} & _fields(obj), (module.__name__, name)
    assert seen >= len(EXPANDS_A_KERNEL)


def test_the_continuum_summations_are_one_choice():
    from meanfield.core import choices
    from meanfield.models import circle, continuum

    assert continuum.CONTINUUM_SUMMATIONS is choices.CONTINUUM_SUMMATIONS is circle.CONTINUUM_SUMMATIONS
    assert not hasattr(choices, "CONTINUUM_METHODS")
    with pytest.raises(ValueError, match=r"summation must be one of \('auto', 'spectral', 'quadrature'\); received 'fast'"):
        mf.CirclePDE(H2(), 8, summation="fast")


def test_renamed_classes_still_replace_and_pickle():
    system = mf.ParticleSystem(H3(), kernel_tol=1e-8)
    assert dataclasses.replace(system, kernel_tol=1e-6).kernel_tol == 1e-6
    with pytest.raises(TypeError, match="tolerance is now kernel_tol"):
        dataclasses.replace(system, tolerance=1e-6)
    assert pickle.loads(pickle.dumps(system)).kernel_tol == 1e-8
    pde = mf.ContinuumPDE(H3(), 8, summation="quadrature")
    assert pickle.loads(pickle.dumps(pde)).summation == "quadrature"


def test_renamed_on_a_function_and_a_class():
    @validate.renamed(old="new")
    def f(new=1):
        return new

    assert f(new=2) == 2 and f(3) == 3 and f.__name__ == "f" and list(inspect.signature(f).parameters) == ["new"]
    with pytest.raises(TypeError, match=r"^f: old is now new \(the same meaning\); received old=4$"):
        f(old=4)

    @validate.renamed(a="b")
    @dataclasses.dataclass(frozen=True)
    class C:
        b: int = 0

    assert C(b=1).b == 1 and C.__name__ == "C" and C.__renamed__ == {"a": "b"}
    with pytest.raises(TypeError, match="C: a is now b"):
        C(a=1)


def test_chunk_bytes_defaults_have_one_home():
    assert CHUNK_BYTES == 8 * 2**20
    for cls in (BatchedSystem, CausalSystem):
        assert {f.name: f.default for f in dataclasses.fields(cls)}["chunk_bytes"] == CHUNK_BYTES, cls
    for fn in (causal.causal_direct_sums, causal.causal_attention_received, batched.estimate_batched):
        assert inspect.signature(fn).parameters["chunk_bytes"].default == CHUNK_BYTES, fn
    # the documented exceptions: another row-block size changes the last bits of their direct sums
    # (CHUNK_BYTES' docstring has the measurements), so they keep their defaults of 0.2
    old = {mf.ParticleSystem: 2**20, mf.ContinuumPDE: 4 * 2**20, mf.CirclePDE: 4 * 2**20}
    for cls, default in old.items():
        assert {f.name: f.default for f in dataclasses.fields(cls)}["chunk_bytes"] == default, cls


def test_direct_sums_depend_on_the_chunk_size_only_through_round_off():
    # why ParticleSystem keeps 1 MiB: rows summed in blocks of another height are not bit-identical (measured
    # 6e-16 at n = 500 and 3000); one block holding every row (n = 50) gives the same bits.  The agreement to
    # 1e-14 (x 100 the measured difference, a few float64 ulps of O(1) velocities) says the blocks change nothing else.
    heads = mf.scalar_heads([1.0, -0.5], 3, beta=2.0)
    for n in (50, 500):
        X = mf.initial.uniform_sphere(n, 3, seed=n)
        a, b = (mf.ParticleSystem(heads, summation="direct", chunk_bytes=c).velocity(X) for c in (2**20, CHUNK_BYTES))
        if n == 50:
            assert np.array_equal(a, b)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)


def test_moved_options_say_where_they_went():
    # issue 32 moved these into option objects; each old keyword is refused with its new place, not Python's bare
    # "unexpected keyword argument"
    from meanfield.workflow.paired import PDESettings, paired_run
    from meanfield.workflow.run import run

    cases = [(PDESettings, "tail_tol", r"PDESettings: tail_tol is now a field of monitor: monitor=Monitor\(tail_tol"),
             (PDESettings, "negative_tol", r"negative_tol is now a field of monitor: monitor=Monitor\(negative_tol"),
             (paired_run, "checkpoint_every", r"paired_run: checkpoint_every is now .*Checkpointer\(folder, every"),
             (run, "checkpoint_every", r"run: checkpoint_every is now .*Checkpointer\(folder, every")]
    for fn, old, message in cases:
        with pytest.raises(TypeError, match=message + r".*; received " + old + "=3$"):
            fn(**{old: 3})
    assert PDESettings(lmax=8).lmax == 8 and "tail_tol" not in inspect.signature(PDESettings).parameters

    @validate.moved(old="part of x: x=X(old=...)")
    def g(x=None):
        return x

    assert g(x=1) == 1 and not hasattr(g, "__renamed__")
    with pytest.raises(TypeError, match=r"^g: old is now part of x: x=X\(old=\.\.\.\); received old=2$"):
        g(old=2)
