"""The direct sums on every backend (issue 35): torch (CPU here; CUDA where a GPU is lent) computes the velocities,
energies and entropies numpy computes, numpy stays the reference (bit for bit: tests/test_particles.py and the other
model tests hold unchanged) and imports no torch, and bad backends are refused by name.

torch is imported plainly (never ``importorskip``): CI installs it (``.ci/run``), so a missing torch fails here loudly.
Tolerances: float64 backends agree with numpy to 1e-12 relative to the largest entry (measured 0 to 7e-16: the same
sums, another BLAS); float32 to 3e-5 (measured up to 7e-6 for the velocities of Sinkhorn heads solved to 1e-5, about
5e-7 for the others: float32's epsilon 6e-8 times sums of 10^2 terms).
"""

import subprocess
import sys

import numpy as np
import pytest

from meanfield.core import backends, sums
from meanfield.core.heads import Head
from meanfield.models.batched import BatchedSystem
from meanfield.models.particles import ParticleSystem

F64 = 1e-12      # same sums in float64, another library's BLAS: round-off (measured <= 7e-16)
F32 = 3e-5       # float32 sums (measured <= 7e-6 with Sinkhorn heads solved to 1e-5, 5e-7 otherwise)
F32_SINKHORN_TOL = 1e-5
DTYPES = ("float64", "float32")
CASES = [(k, nm) for k in ("exp", "relu", "sigmoid") for nm in ("mean", "softmax", "sinkhorn")
         if (k, nm) != ("relu", "sinkhorn")]


def tol(dtype):
    return F64 if dtype == "float64" else F32


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def sphere(rng, *shape):
    X = rng.standard_normal(shape)
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def matrix(rng, d, symmetric=False):
    A = rng.standard_normal((d, d)) / np.sqrt(d)
    return (A + A.T) / 2 if symmetric else A


def make_heads(kernel, normalization, d, rng):
    shift = np.eye(d) if kernel == "relu" else 0.0          # relu: rows with attention mass
    params = {"bias": -0.5} if kernel == "sigmoid" else None
    return [Head(matrix(rng, d, True) + shift, matrix(rng, d), beta=2.0, kernel=kernel, normalization=normalization,
                 kernel_params=params),
            Head(matrix(rng, d) + shift, matrix(rng, d), beta=1.0, kernel=kernel, normalization=normalization,
                 kernel_params=params)]


def backend_kw(dtype):
    return {"backend": "torch", "dtype": dtype, "sinkhorn_tol": 1e-12 if dtype == "float64" else F32_SINKHORN_TOL}


# ------------------------------------------------------------------------------------------ agreement with numpy
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel,normalization", CASES)
def test_particle_velocities_and_energies_agree_with_numpy(kernel, normalization, dtype):
    rng = np.random.default_rng(35)
    heads = make_heads(kernel, normalization, 6, rng)
    X = sphere(rng, 90, 6)
    ref = ParticleSystem(heads, summation="direct", chunk_bytes=9000)          # several row chunks
    other = ParticleSystem(heads, summation="direct", chunk_bytes=9000, **backend_kw(dtype))
    v, E = other.velocity(X), other.energies(X)
    assert v.dtype == np.float64 and isinstance(v, np.ndarray) and E.dtype == np.float64   # results: numpy float64
    assert rel(v, ref.velocity(X)) <= tol(dtype)
    assert rel(E, ref.energies(X)) <= tol(dtype)
    U, N = other.forces(X)
    U0, N0 = ref.forces(X)
    assert rel(U, U0) <= tol(dtype) and rel(N, N0) <= tol(dtype)
    if normalization != "sinkhorn":                           # weights, one of them 0 (a weightless source)
        w = rng.random(90)
        w[5] = 0.0
        w /= w.sum()
        assert rel(other.velocity(X, w), ref.velocity(X, w)) <= tol(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("normalization", ["mean", "softmax", "sinkhorn"])
def test_factored_heads_agree_with_numpy(normalization, dtype):
    rng = np.random.default_rng(1)
    d, r = 24, 4
    heads = [Head.from_factors(*(rng.standard_normal((d, r)) / np.sqrt(d) for _ in range(4)), beta=1.0,
                               normalization=normalization) for _ in range(2)]
    X = sphere(rng, 70, d)
    ref = ParticleSystem(heads, summation="direct", chunk_bytes=5000)
    other = ParticleSystem(heads, summation="direct", chunk_bytes=5000, **backend_kw(dtype))
    assert rel(other.velocity(X), ref.velocity(X)) <= tol(dtype)
    assert rel(other.energies(X), ref.energies(X)) <= tol(dtype)


def test_shifted_softmax_rows_agree_with_numpy():
    # beta |M|_2 = 900: the rows are shifted by their largest log k (exp would overflow float64 unshifted)
    rng = np.random.default_rng(2)
    heads = [Head(3 * np.eye(5), np.eye(5), beta=300.0, normalization="softmax"),
             Head(3 * np.eye(5), np.eye(5), beta=300.0, kernel="sigmoid", normalization="softmax",
                  kernel_params={"bias": 2.0})]
    X = sphere(rng, 40, 5)
    w = rng.random(40)
    w[[1, 7]] = 0.0
    w /= w.sum()
    v0 = ParticleSystem(heads, summation="direct").velocity(X, w)
    v = ParticleSystem(heads, summation="direct", backend="torch").velocity(X, w)
    assert np.all(np.isfinite(v)) and rel(v, v0) <= F64


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["exp", "relu", "sigmoid"])
def test_entropies_and_core_sums_agree_with_numpy(kernel, dtype):
    import torch
    rng = np.random.default_rng(3)
    head = make_heads(kernel, "softmax", 5, rng)[1]
    X = sphere(rng, 50, 5)
    w = rng.random(50)
    w /= w.sum()
    scale = np.linspace(0.5, 1.5, 50)
    T = torch.float64 if dtype == "float64" else torch.float32
    Xt, wt = torch.as_tensor(X, dtype=T), torch.as_tensor(w, dtype=T)
    for relative, sc in ((False, None), (True, scale)):
        H0 = sums.entropy_rows(head, X, X, w, 4000, relative=relative, scale=sc)
        H = sums.entropy_rows(head, Xt, Xt, wt, 4000, relative=relative, scale=sc)
        assert isinstance(H, torch.Tensor) and H.dtype == T                   # torch in, torch out
        assert rel(H.numpy(), H0) <= tol(dtype)
    u0, N0 = sums.aggregate(head, X[:9], X, w, 4000)
    u, N = sums.aggregate(head, Xt[:9], Xt, wt, 4000)
    assert rel(u.numpy(), u0) <= tol(dtype) and rel(N.numpy(), N0) <= tol(dtype)
    assert abs(sums.pair_sum(head, Xt, wt, 4000) - sums.pair_sum(head, X, w, 4000)) \
        <= tol(dtype) * abs(sums.pair_sum(head, X, w, 4000))
    L0 = sums.log_attention(head, X @ X.T, w)
    L = sums.log_attention(head, Xt @ Xt.T, wt).numpy()
    finite = np.isfinite(L0)
    assert np.array_equal(finite, np.isfinite(L)) and rel(L[finite], L0[finite]) <= tol(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel,normalization", CASES)
def test_batched_systems_agree_with_numpy_causal_and_chunked(kernel, normalization, dtype):
    rng = np.random.default_rng(4)
    heads = make_heads(kernel, normalization, 5, rng)
    X = sphere(rng, 6, 12, 5)
    for causal in (False, True):
        if causal and normalization == "sinkhorn":
            continue                                   # refused by name (no positive causal scaling)
        for chunk in (8 * 2**20, 2000):                # one block of systems, or one system a block
            ref = BatchedSystem(heads, causal=causal, chunk_bytes=chunk)
            kw = backend_kw(dtype)
            other = BatchedSystem(heads, causal=causal, chunk_bytes=chunk, **kw)
            v = other.velocity(X)
            assert v.dtype == np.float64 and rel(v, ref.velocity(X)) <= tol(dtype), (causal, chunk)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_per_system_and_factored_heads_agree(dtype):
    rng = np.random.default_rng(5)
    d, r = 16, 3
    per = [[Head.from_factors(*(rng.standard_normal((d, r)) / np.sqrt(d) for _ in range(4)), beta=1.0,
                              normalization="softmax")] for _ in range(3)]
    X = sphere(rng, 3, 10, d)
    for causal in (False, True):
        ref = BatchedSystem(per, causal=causal)
        other = BatchedSystem(per, causal=causal, **backend_kw(dtype))
        assert rel(other.velocity(X), ref.velocity(X)) <= tol(dtype)


def test_a_trajectory_through_the_one_driver_agrees():
    # the state stays numpy at the driver: integrate(system.rhs, ...) is unchanged; 20 rk4 steps
    from meanfield.core.integrate import integrate
    from meanfield.core.options import StepControl
    rng = np.random.default_rng(6)
    heads = make_heads("exp", "softmax", 4, rng)
    X0 = sphere(rng, 30, 4)
    out = [integrate(s.rhs, X0, (0.0, 1.0), method="rk4", step=StepControl(dt=0.05), retraction=s.retraction).y_final
           for s in (ParticleSystem(heads, summation="direct"), ParticleSystem(heads, summation="direct",
                                                                              backend="torch"))]
    assert out[1].dtype == np.float64 and rel(out[1], out[0]) <= F64 * 10   # 80 evaluations: round-off grows a little


# ------------------------------------------------------------------------------------------ the default path
def test_the_numpy_path_imports_neither_torch_nor_array_api_compat():
    code = ("import sys, numpy as np\n"
            "from meanfield.core.heads import Head\n"
            "from meanfield.models.particles import ParticleSystem\n"
            "from meanfield.models.batched import BatchedSystem\n"
            "X = np.eye(3)[:2]\n"
            "ParticleSystem([Head(np.eye(3), np.eye(3), normalization='sinkhorn')], summation='direct').velocity(X)\n"
            "BatchedSystem([Head(np.eye(3), np.eye(3))], causal=True).velocity(X[None])\n"
            "print(sorted(m for m in ('torch', 'array_api_compat') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_float64_by_default_never_silently_float32():
    import torch
    rng = np.random.default_rng(7)
    s = ParticleSystem(make_heads("exp", "softmax", 4, rng), summation="direct", backend="torch")
    assert s._backend.dtype == "float64" and s._backend.device == "cpu"
    Xb, wb = s.on_backend(sphere(rng, 5, 4), np.full(5, 0.2))
    assert Xb.dtype == torch.float64 and wb.dtype == torch.float64
    assert backends.get_backend().reference and backends.get_backend("torch").dtype == "float64"


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("kw,allowed", [({"backend": "jax"}, "('numpy', 'torch')"),
                                        ({"backend": "torch", "device": "gpu"}, "(None, 'cpu', 'cuda')"),
                                        ({"dtype": "float16"}, "('float64', 'float32')"),
                                        ({"dtype": np.float32}, "('float64', 'float32')")])
@pytest.mark.parametrize("model", ["particles", "batched"])
def test_unknown_backend_device_or_dtype_is_refused_by_name(kw, allowed, model):
    head = Head(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match=rf"{list(kw)[-1]} must be one of .*received") as info:
        ParticleSystem([head], **kw) if model == "particles" else BatchedSystem([head], **kw)
    assert allowed in str(info.value)


def test_cuda_with_numpy_is_refused():
    with pytest.raises(ValueError, match="device must be None or 'cpu' with backend='numpy'.*received device='cuda'"):
        ParticleSystem([Head(np.eye(3), np.eye(3))], device="cuda")


def test_torch_not_installed_says_pip_install_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)         # `import torch` now raises ImportError
    with pytest.raises(backends.BackendError, match="pip install torch"):
        ParticleSystem([Head(np.eye(3), np.eye(3))], backend="torch")
    with pytest.raises(ValueError, match="pip install torch"):                  # a ValueError, as every bad input
        BatchedSystem([Head(np.eye(3), np.eye(3))], backend="torch")


def test_cuda_without_a_gpu_is_a_named_error():
    import torch
    if torch.cuda.is_available():                           # a lent GPU: the device works instead
        s = ParticleSystem([Head(np.eye(3), np.eye(3))], backend="torch", device="cuda")
        assert s.velocity(np.eye(3)[:2]).shape == (2, 3)
        return
    with pytest.raises(backends.BackendError, match="device='cuda' was requested but torch sees no CUDA device"):
        ParticleSystem([Head(np.eye(3), np.eye(3))], backend="torch", device="cuda")


def test_float32_sinkhorn_tolerance_below_its_reach_is_refused():
    head = Head(np.eye(3), np.eye(3), normalization="sinkhorn")
    with pytest.raises(ValueError, match="sinkhorn_tol must be >= 1e-05 with dtype='float32'.*received"):
        ParticleSystem([head], backend="torch", dtype="float32")
    with pytest.raises(ValueError, match="sinkhorn_tol must be >= 1e-05 with dtype='float32'"):
        BatchedSystem([head], dtype="float32")


def test_out_of_memory_on_the_device_is_a_named_error(monkeypatch):
    import torch
    s = ParticleSystem([Head(np.eye(3), np.eye(3))], summation="direct", backend="torch")

    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB")

    monkeypatch.setattr(sums.DirectSums, "fused", oom)
    with pytest.raises(backends.BackendError, match="ran out of memory.*smaller chunk_bytes"):
        s.velocity(np.eye(3)[:2])


@pytest.mark.parametrize("model", ["particles", "batched"])
def test_numpy_float32_on_request(model):
    rng = np.random.default_rng(8)
    heads = make_heads("exp", "softmax", 5, rng)
    if model == "particles":
        X = sphere(rng, 40, 5)
        ref, other = (ParticleSystem(heads, summation="direct", dtype=dt) for dt in DTYPES)
    else:
        X = sphere(rng, 3, 12, 5)
        ref, other = (BatchedSystem(heads, causal=True, dtype=dt) for dt in DTYPES)
    v = other.velocity(X)
    assert v.dtype == np.float64 and 0 < rel(v, ref.velocity(X)) <= F32      # float32 sums: not bit-identical
