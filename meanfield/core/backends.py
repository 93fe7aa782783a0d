"""Array backends of the direct kernel sums: numpy (the default and the reference) or torch (CPU or CUDA).

The direct sums of :mod:`meanfield.core.sums` and the kernels of :mod:`meanfield.core.kernels` are written once over
the Python array API: numpy arrays in give numpy arrays out (the numpy path runs exactly the operations it always
did), torch tensors in give torch tensors out.  This module is the one home of everything that knows a backend:

* :func:`get_backend` validates ``backend``, ``device`` and ``dtype`` (the options of
  :class:`~meanfield.models.particles.ParticleSystem` and :class:`~meanfield.models.batched.BatchedSystem`) and
  returns a :class:`Backend`, which converts numpy arrays to the backend at a model's boundary
  (:meth:`Backend.asarray`) and results back (:func:`to_numpy`);
* :func:`namespace` and :func:`foreign` give the array namespace of arrays (numpy itself for numpy arrays, without
  importing anything; ``array_api_compat``'s namespace for the others);
* :func:`like` converts a numpy array (a head's matrices, a Sinkhorn scaling) into the namespace, device and dtype of
  another array, cached per owner (a head's matrices are converted once per device);
* :func:`expit` and :func:`log_expit`: the logistic functions, which the array API lacks.

torch and ``array_api_compat`` are imported here only, and lazily: the default numpy path imports neither.  A missing
torch, a CUDA device without a GPU and an out-of-memory device raise :class:`BackendError` (a ``ValueError``) saying
what to do.  ``tests/test_layers.py`` checks that no other module imports torch or ``array_api_compat``.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass

import numpy as np

from . import validate

__all__ = ["BACKENDS", "DEVICES", "DTYPES", "BackendError", "Backend", "get_backend", "namespace", "foreign", "like",
           "to_numpy", "numpy_maps", "expit", "log_expit", "NUMPY", "FLOAT32_SINKHORN_TOL", "check_sinkhorn_tol"]

BACKENDS = ("numpy", "torch")
"""Allowed ``backend`` values: ``"numpy"`` (the default and the reference) or ``"torch"`` (CPU or CUDA)."""

DEVICES = (None, "cpu", "cuda")
"""Allowed ``device`` values: None (the backend's default: the CPU), ``"cpu"`` or ``"cuda"`` (torch only)."""

DTYPES = ("float64", "float32")
"""Allowed ``dtype`` values of the sums: float64 (the default) or float32 (on request only: never chosen silently)."""

FLOAT32_SINKHORN_TOL = 1e-5
"""Smallest Sinkhorn marginal tolerance allowed with float32 sums: the marginals of float32 kernel applications are
exact to about 1e-7 to 1e-6 (n = 10^2 to 10^4), so a solve to the float64 default 1e-12 would never end."""

_NUMPY_TYPES = (np.ndarray, np.generic, float, int)


class BackendError(ValueError):
    """A backend that cannot run here: torch not installed, no CUDA device, a device out of memory (says what to do)."""


def _torch():
    """The torch module, or :class:`BackendError` saying how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise BackendError("backend='torch' needs PyTorch, which is not installed here: pip install torch (or "
                           "pip install 'meanfield[gpu]'; a CPU-only build: pip install torch --index-url "
                           "https://download.pytorch.org/whl/cpu), or use backend='numpy'") from exc
    return torch


def _compat():
    """The ``array_api_compat`` module (lazily imported), or :class:`BackendError` saying how to install it."""
    try:
        import array_api_compat
    except ImportError as exc:
        raise BackendError("non-numpy arrays in the direct sums need array-api-compat, which is not installed here: "
                           "pip install array-api-compat (or pip install 'meanfield[gpu]')") from exc
    return array_api_compat


@dataclass(frozen=True)
class Backend:
    """Where the direct sums run: a validated ``(name, device, dtype)`` (from :func:`get_backend`).

    Attributes
    ----------
    name : {"numpy", "torch"}
    device : {"cpu", "cuda"}
    dtype : {"float64", "float32"}
    """

    name: str = "numpy"
    device: str = "cpu"
    dtype: str = "float64"

    @property
    def reference(self) -> bool:
        """numpy in float64: the sums take the caller's arrays as they are (no conversion at all)."""
        return self.name == "numpy" and self.dtype == "float64"

    def _torch_dtype(self):
        torch = _torch()
        return torch.float64 if self.dtype == "float64" else torch.float32

    def asarray(self, x):
        """``x`` (a numpy array) on this backend: itself (numpy float64), a float32 copy, or a torch tensor on the
        device (``torch.as_tensor``: no copy for float64 on the CPU).

        Parameters
        ----------
        x : ndarray

        Returns
        -------
        array of this backend
        """
        if self.reference:
            return x
        if self.name == "numpy":
            return np.asarray(x, dtype=np.float32)
        torch = _torch()
        x = np.asarray(x)
        return torch.as_tensor(x if x.flags.writeable else x.copy(), dtype=self._torch_dtype(), device=self.device)

    @contextlib.contextmanager
    def guard(self, what):
        """Turn a device's out-of-memory error inside the block into a :class:`BackendError` naming ``what`` and
        the way out (a smaller ``chunk_bytes``, fewer tokens, or the CPU).

        Parameters
        ----------
        what : str
            The computation, for the message.

        Yields
        ------
        None
            The block runs inside (numpy: nothing is caught).

        Raises
        ------
        BackendError
            The device ran out of memory, or torch is not installed (a torch backend).
        """
        if self.name == "numpy":
            yield
            return
        torch = _torch()
        oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
        try:
            yield
        except oom as exc:
            raise BackendError(f"{what} ran out of memory on backend={self.name!r}, device={self.device!r} "
                               f"({str(exc).splitlines()[0][:200]}); use a smaller chunk_bytes (the score blocks), "
                               f"fewer tokens, or device='cpu'") from exc

    def describe(self) -> str:
        """``"torch cuda float32"`` and the like.

        Returns
        -------
        str
            ``"{name} {device} {dtype}"``.
        """
        return f"{self.name} {self.device} {self.dtype}"


NUMPY = Backend()
"""The default backend: numpy on the CPU in float64 (the reference)."""


def get_backend(backend="numpy", device=None, dtype="float64") -> Backend:
    """The validated backend of the direct sums.

    Parameters
    ----------
    backend : {"numpy", "torch"}
        The array library.  torch is imported only here and only when asked for.
    device : {None, "cpu", "cuda"}
        None: the CPU.  ``"cuda"`` needs ``backend="torch"`` and a GPU that torch sees.
    dtype : {"float64", "float32"}
        Precision of the sums (float32 only on request; results are returned as float64 numpy arrays).

    Returns
    -------
    Backend

    Raises
    ------
    ValueError
        An unknown backend, device or dtype (the allowed values listed), or ``device="cuda"`` with
        ``backend="numpy"``.
    BackendError
        torch not installed (``pip install torch``), or ``device="cuda"`` without a CUDA device.
    """
    validate.choice("backend", backend, BACKENDS)
    validate.choice("device", device, DEVICES)
    validate.choice("dtype", dtype, DTYPES)
    if backend == "numpy":
        if device == "cuda":
            raise ValueError("device must be None or 'cpu' with backend='numpy' (numpy runs on the CPU; allowed: "
                             "backend='torch' for device='cuda'); received device='cuda'")
        return NUMPY if dtype == "float64" else Backend("numpy", "cpu", dtype)
    torch = _torch()
    _compat()
    if device == "cuda" and not torch.cuda.is_available():
        raise BackendError("device='cuda' was requested but torch sees no CUDA device here "
                           f"(torch {torch.__version__}, torch.cuda.is_available() is False: no GPU, or a CPU-only "
                           "build of torch); use device='cpu' (or None) or backend='numpy'")
    return Backend("torch", device or "cpu", dtype)


def check_sinkhorn_tol(backend, sinkhorn_tol, solves):
    """Refuse a Sinkhorn tolerance that float32 sums cannot reach.

    Parameters
    ----------
    backend : Backend
    sinkhorn_tol : float
    solves : bool
        Whether a head of the system solves a scaling (a normalization that is not row-local: Sinkhorn).

    Raises
    ------
    ValueError
        ``dtype="float32"``, a Sinkhorn head and ``sinkhorn_tol`` below :data:`FLOAT32_SINKHORN_TOL`.
    """
    if backend.dtype == "float32" and sinkhorn_tol < FLOAT32_SINKHORN_TOL and solves:
        raise ValueError(f"sinkhorn_tol must be >= {FLOAT32_SINKHORN_TOL:g} with dtype='float32' and Sinkhorn heads "
                         f"(float32 kernel sums give marginals exact to about 1e-6 only; allowed: a larger "
                         f"sinkhorn_tol, or dtype='float64'); received sinkhorn_tol={sinkhorn_tol!r}")


def foreign(x):
    """The array namespace of ``x`` when it is not a numpy array (or scalar), else None (without importing anything).

    Parameters
    ----------
    x : array or scalar

    Returns
    -------
    namespace or None
        ``array_api_compat.array_namespace(x)`` for a torch tensor (or another array API array).
    """
    if x is None or isinstance(x, _NUMPY_TYPES):
        return None
    return _compat().array_namespace(x)


def namespace(*arrays):
    """The array namespace of ``arrays``: ``numpy`` itself when they are all numpy arrays (or scalars, or None),
    otherwise the ``array_api_compat`` namespace of the others.

    Parameters
    ----------
    *arrays : arrays, scalars or None

    Returns
    -------
    module
        ``numpy``, or e.g. ``array_api_compat.torch``.

    Raises
    ------
    TypeError
        Arrays of different libraries (from ``array_api_compat``).
    """
    others = [a for a in arrays if a is not None and not isinstance(a, _NUMPY_TYPES)]
    if not others:
        return np
    return _compat().array_namespace(*others)


_CACHE = weakref.WeakKeyDictionary()
"""owner (a Head, a system) -> {(name, library, device, dtype): converted array}: converted once per device."""


def like(x, ref, owner=None, name=None):
    """The numpy array ``x`` in the namespace, device and dtype of the array ``ref``.

    Parameters
    ----------
    x : ndarray or None
        A numpy array (an array already of ``ref``'s kind is returned as it is).
    ref : array
        The array whose namespace, device and dtype ``x`` takes.
    owner : object, optional
        With ``name``: keep the converted array for this (weakly referenced) owner, e.g. a head's matrices, so they are
        copied to a device once.
    name : str, optional

    Returns
    -------
    array
        ``x`` itself when ``ref`` is a numpy array of ``x``'s dtype (the reference path: no copy, no conversion).
    """
    if x is None:
        return None
    if isinstance(ref, np.ndarray):
        if isinstance(x, np.ndarray):
            return x if x.dtype == ref.dtype else x.astype(ref.dtype)
        return np.asarray(to_numpy(x), dtype=ref.dtype)
    if not isinstance(x, _NUMPY_TYPES):
        return x
    key = None
    if owner is not None:
        key = (name, type(ref).__module__, str(ref.device), str(ref.dtype))
        hit = _CACHE.get(owner, {}).get(key)
        if hit is not None:
            return hit
    xp = _compat().array_namespace(ref)
    x = np.ascontiguousarray(x)
    out = xp.asarray(x if x.flags.writeable else x.copy(), dtype=ref.dtype, device=ref.device)  # torch: writable only
    if key is not None:
        try:
            _CACHE.setdefault(owner, {})[key] = out
        except TypeError:                     # an owner that takes no weak reference: not cached
            pass
    return out


def to_numpy(x, dtype=np.float64):
    """``x`` as a numpy array of ``dtype`` (a numpy array of that dtype is returned as it is, no copy).

    Parameters
    ----------
    x : array or scalar
    dtype : numpy dtype

    Returns
    -------
    ndarray
    """
    if isinstance(x, np.ndarray):
        return x if x.dtype == dtype else x.astype(dtype)
    if isinstance(x, _NUMPY_TYPES):
        return np.asarray(x, dtype=dtype)
    if hasattr(x, "detach"):                      # torch: off the autograd graph and the device
        x = x.detach().cpu().numpy()
    else:
        x = np.asarray(_compat().to_device(x, "cpu"))
    return np.asarray(x, dtype=dtype)


def numpy_maps(*maps):
    """Kernel applications ``f -> apply(f)`` (of a sums object on any backend) whose results are numpy float64 arrays,
    for the Sinkhorn solve (:func:`meanfield.core.sinkhorn.solve_scaling`), whose vectors stay numpy: each result passes
    through :func:`to_numpy` (no copy for numpy float64).  The sums objects convert a numpy ``f`` to their own backend.

    Parameters
    ----------
    *maps : callable or None

    Returns
    -------
    tuple of callable or None
        None stays None.
    """
    def wrap(fn):
        if fn is None:
            return None

        def mapped(f):
            return to_numpy(fn(f))
        return mapped
    return tuple(wrap(fn) for fn in maps)


def expit(x):
    """The logistic function ``1 / (1 + exp(-x))`` of a non-numpy array (``torch.sigmoid``); numpy uses scipy's.

    Parameters
    ----------
    x : array API array (a torch tensor), any shape
        The arguments.

    Returns
    -------
    array, shape of ``x``
        ``expit(x)`` in ``x``'s namespace (``x.sigmoid()`` where the array has that method).
    """
    if hasattr(x, "sigmoid"):
        return x.sigmoid()
    xp = namespace(x)
    return 1.0 / (1.0 + xp.exp(-x))


def log_expit(x):
    """``log(expit(x))`` of a non-numpy array, stable for large ``|x|`` (``torch.nn.functional.logsigmoid``).

    Parameters
    ----------
    x : array API array (a torch tensor), any shape
        The arguments.

    Returns
    -------
    array, shape of ``x``
        ``log expit(x)`` in ``x``'s namespace, computed as ``-(max(-x, 0) + log1p(exp(-|x|)))`` outside torch.
    """
    if type(x).__module__.startswith("torch"):
        return _torch().nn.functional.logsigmoid(x)
    xp = namespace(x)
    return -(xp.clip(-x, min=0.0) + xp.log1p(xp.exp(-xp.abs(x))))
