r"""Stochastic time stepping for tokens with noise: Brownian motion on ``S^{d-1}`` (or in ``R^d``).

The SDE (MODEL.md section 3, "Token noise on the particle side"), in Ito form for tokens on the sphere,

.. math:: dx_i = v_i\,dt - \nu (d - 1)\, x_i\,dt + \sqrt{2\nu}\,(I - x_i x_i^T)\, dW_i,

i.e. ``dx = v dt`` plus Brownian motion of generator ``nu Lap_S``; in flat geometry
``dx = v dt + sqrt(2 nu) dW``.  Without drift ``E <x(t), x(0)> = exp(-nu (d - 1) t)``.

Schemes (:data:`SDE_SCHEMES`), each a function of the Brownian increments of the two halves of
the step (``dW`` of shape ``(2, *X.shape)``), so that coarse and fine runs can share one path:

* ``"euler_maruyama"``: projected Euler-Maruyama with retraction
  ``x <- (x + dt v + sqrt(2 nu) P_x dW) / | . |``; the retraction supplies the Ito drift
  ``-nu (d - 1) x dt``.  Strong order 1/2, weak order 1; one drift evaluation per step.
* ``"geodesic_strang"``: Strang splitting ``noise(dt/2) . drift(dt) . noise(dt/2)``: the drift by
  Heun's method (with retraction), each noise half-step a geodesic step
  ``x <- Exp_x(sqrt(2 nu c(h)) P_x dW_half)`` with ``c(h) = 1 - nu (d - 2) h / 3``, the factor that
  makes the second and fourth moments of the geodesic angle match the heat kernel's to ``O(h^3)``
  (the plain geodesic random walk, ``c = 1``, is weak order 1 except on the circle).  Strong order
  1/2, weak order 2; two drift evaluations per step.  Flat: the noise halves are exact.

Step-size range: a step is refused when ``nu (d - 2) dt / 6 >= 1`` (``c(dt/2) <= 0``: the
geodesic scheme is undefined) and warned about (:class:`NoiseStepWarning`) beyond
:func:`noise_dt_bound` ``= 0.5 / (nu (d - 1))``, where the noise moves a token by about a radian
per step and no asymptotic order holds.

:func:`integrate_sde` is the driver: fixed steps on the grid ``t0 + k dt`` (shortened to land on
``t_eval``), the same ``observe`` / ``event`` / ``checkpoint`` / ``resume`` hooks as
:func:`meanfield.core.integrate.integrate` and the same :class:`~meanfield.core.integrate.Trajectory`.
The checkpoint state holds the random generator's state, so a resumed run equals an uninterrupted
one bit for bit.  Numpy only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from . import validate
from .controllers import FixedGrid
from .integrate import Trajectory, _Checkpoints, _Recorder

__all__ = ["SDEScheme", "SDE_SCHEMES", "NoiseStepWarning", "noise_dt_bound", "sde_step", "brownian_increments",
           "integrate_sde", "geodesic_noise"]

GEOMETRIES = ("sphere", "flat")


class NoiseStepWarning(UserWarning):
    """A fixed step beyond the noise scheme's documented range (:func:`noise_dt_bound`)."""


@dataclass(frozen=True)
class SDEScheme:
    """A stochastic scheme: its name, declared orders and drift evaluations per step."""

    name: str
    strong_order: float
    weak_order: int
    n_drift: int


SDE_SCHEMES = {"euler_maruyama": SDEScheme("euler_maruyama", 0.5, 1, 1),
               "geodesic_strang": SDEScheme("geodesic_strang", 0.5, 2, 2)}
"""The stochastic schemes of :func:`integrate_sde` by name."""


def noise_dt_bound(nu, d) -> float:
    """Largest step of the documented range, ``0.5 / (nu (d - 1))`` (inf without noise)."""
    return np.inf if nu == 0 else 0.5 / (nu * (d - 1))


def _retract(X):
    return X / np.linalg.norm(X, axis=-1, keepdims=True)


def _project(X, V):
    return V - np.einsum("...d,...d->...", V, X)[..., None] * X


def geodesic_noise(X, dW, nu, h):
    r"""One geodesic noise step of size ``h`` on the sphere: ``Exp_x(sqrt(2 nu c) P_x dW)``.

    ``c = 1 - nu (d - 2) h / 3`` (see the module docstring); rows of ``X`` (n, d) are unit vectors,
    ``dW`` (n, d) Brownian increments over ``h``.
    """
    d = X.shape[-1]
    c = 1.0 - nu * (d - 2) * h / 3.0
    xi = np.sqrt(2.0 * nu * c) * _project(X, dW)
    theta = np.linalg.norm(xi, axis=-1, keepdims=True)
    sinc = np.where(theta > 0, np.sin(theta) / np.where(theta > 0, theta, 1.0), 1.0)
    return _retract(np.cos(theta) * X + sinc * xi)     # the retraction only removes round-off


def sde_step(scheme, drift, t, X, dt, dW, nu, geometry="sphere"):
    """One step of ``scheme`` (a name of :data:`SDE_SCHEMES`) from ``(t, X)``.

    Parameters
    ----------
    drift : callable ``drift(t, X) -> ndarray`` of the shape of ``X`` (tangent on the sphere)
    X : ndarray, shape (n, d)
    dt : float
    dW : ndarray, shape (2, n, d)
        Brownian increments over the two halves ``[t, t + dt/2]``, ``[t + dt/2, t + dt]``.
    nu : float
    geometry : {"sphere", "flat"}

    Returns
    -------
    X_new : ndarray, shape (n, d)
    """
    s = np.sqrt(2.0 * nu)
    sphere = geometry == "sphere"
    if scheme == "euler_maruyama":
        dWs = dW[0] + dW[1]
        Y = X + dt * drift(t, X) + s * (_project(X, dWs) if sphere else dWs)
        return _retract(Y) if sphere else Y
    if scheme == "geodesic_strang":
        h = 0.5 * dt
        Y = geodesic_noise(X, dW[0], nu, h) if sphere else X + s * dW[0]
        k1 = drift(t, Y)
        Z = Y + dt * k1
        Y = Y + 0.5 * dt * (k1 + drift(t + dt, Z))
        if sphere:
            Y = _retract(Y)
        return geodesic_noise(Y, dW[1], nu, h) if sphere else Y + s * dW[1]
    raise ValueError(f"scheme must be one of {sorted(SDE_SCHEMES)}; received {scheme!r}")


def brownian_increments(rng, shape, dt):
    """Increments over the two halves of a step: ``sqrt(dt/2) N(0, 1)`` of shape ``(2, *shape)``."""
    return np.sqrt(0.5 * dt) * rng.standard_normal((2,) + tuple(shape))


def _generator_from_state(state):
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)


def check_noise_step(nu, d, dt, scheme, geometry="sphere"):
    """Refuse (``ValueError``) or warn (:class:`NoiseStepWarning`) a step outside the scheme's range."""
    if nu == 0:
        return
    if geometry == "sphere" and scheme == "geodesic_strang" and nu * (d - 2) * dt / 6.0 >= 1.0:
        raise ValueError(f"dt must be < 6 / (nu (d - 2)) = {6.0 / (nu * (d - 2)):.4g} for the scheme "
                         f"'geodesic_strang' (nu = {nu}, d = {d}); received {dt!r}")
    bound = noise_dt_bound(nu, d if geometry == "sphere" else 2)
    if dt > bound:
        warnings.warn(f"dt = {dt:.4g} exceeds the documented range dt <= 0.5 / (nu (d - 1)) = {bound:.4g} of the "
                      f"noise scheme {scheme!r}: no order of accuracy holds there", NoiseStepWarning, stacklevel=3)


def integrate_sde(drift, y0, t_span, *, nu, dt, method="geodesic_strang", geometry="sphere", seed=None,
                  t_eval=None, observe=None, event=None, save_states=True, checkpoint=None, checkpoint_every=None,
                  resume=None) -> Trajectory:
    """Integrate the noisy token dynamics with a fixed step (see the module docstring).

    Parameters
    ----------
    drift : callable ``drift(t, X)``, the noiseless velocity (e.g. :meth:`ParticleSystem.rhs`)
    y0 : ndarray, shape (n, d); unit rows when ``geometry="sphere"``
    t_span : (float, float)
    nu : float >= 0
    dt : float > 0
        Fixed step; see :func:`check_noise_step` for its range.
    method : {"euler_maruyama", "geodesic_strang"}
    geometry : {"sphere", "flat"}
    seed : None, int >= 0 or numpy.random.Generator
        The Brownian increments: an integer makes the run reproducible bit for bit.
    t_eval, observe, event, save_states, checkpoint, checkpoint_every, resume
        As in :func:`meanfield.core.integrate.integrate`; the checkpoint state also holds
        ``rng_state``, so a resumed run continues the same random stream.

    Returns
    -------
    Trajectory
        ``method`` is the scheme's name; ``n_rejected`` and ``max_retraction`` are 0 (fixed steps;
        the retraction is part of each scheme).
    """
    nu = validate.real("nu", nu, 0.0)
    method = validate.choice("method", method, tuple(SDE_SCHEMES))
    geometry = validate.choice("geometry", geometry, GEOMETRIES)
    dt = validate.real("dt", dt, positive=True)
    y = np.array(y0, dtype=float, copy=True)
    if y.ndim != 2:
        raise ValueError(f"y0 must have shape (n, d); received shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y0 must be a finite array; received an array containing NaN or inf")
    ts = np.asarray(t_span, dtype=float)
    if ts.shape != (2,) or not np.all(np.isfinite(ts)) or not ts[1] > ts[0]:
        raise ValueError(f"t_span must be a pair (t0, t1) of finite numbers with t1 > t0; received {t_span!r}")
    t0, t1 = float(ts[0]), float(ts[1])
    t_eval = np.array([t0, t1]) if t_eval is None else np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval.size == 0 or np.any(np.diff(t_eval) <= 0) or t_eval[0] < t0 or t_eval[-1] > t1:
        raise ValueError(f"t_eval must be a non-empty strictly increasing array inside [{t0}, {t1}]; received {t_eval!r}")
    check_noise_step(nu, y.shape[1], dt, method, geometry)
    nfev = [0]

    def f(t, X):
        nfev[0] += 1
        return drift(t, X)

    rec = _Recorder(t_eval, t1, observe, save_states)
    settings = {"dt": float(dt), "nu": float(nu), "geometry": geometry}
    status, message = 0, f"reached t = {t1}"
    if resume is None:
        rng = validate.rng(seed)
        t, n_steps, ctl = t0, 0, FixedGrid(t0, t1, dt)
        started = rec.start(t0, y, event)
        if started is not None:
            status, message = started
    else:
        need = {"method", "t_span", "t_eval", "t", "y", "n_steps", "k_grid", "nfev", "rng_state", "i_target",
                "rec_t", "rec_y", "rec_obs"}
        if not isinstance(resume, dict) or need - set(resume):
            raise ValueError(f"resume must be a checkpoint state from integrate_sde(checkpoint=...); received "
                             f"{'missing ' + str(sorted(need - set(resume))) if isinstance(resume, dict) else resume!r}")
        if resume["method"] != method or tuple(resume["t_span"]) != (t0, t1) \
                or not np.array_equal(resume["t_eval"], t_eval) or np.shape(resume["y"]) != y.shape \
                or resume.get("settings", settings) != settings:
            raise ValueError(f"resume must be a checkpoint of the same method {method!r}, t_span, t_eval, shape and "
                             f"settings {settings}; received one of method {resume['method']!r}, t_span "
                             f"{tuple(resume['t_span'])}, settings {resume.get('settings')}")
        rng = _generator_from_state(resume["rng_state"])
        t, y, n_steps = resume["t"], np.array(resume["y"]), resume["n_steps"]
        nfev[0] = resume["nfev"]
        rec.restore(resume)
        ctl = FixedGrid(t0, t1, dt, resume["k_grid"])

    def state():
        return {"method": method, "t_span": (t0, t1), "t_eval": t_eval, "t": t, "y": y, "n_steps": n_steps,
                "k_grid": ctl.state()["k_grid"], "nfev": nfev[0], "rng_state": rng.bit_generator.state,
                "i_target": rec.i_target, **rec.state(), "settings": settings}

    checkpoints = _Checkpoints(checkpoint, checkpoint_every, t)
    try:
        while not rec.done:
            t_new, land = ctl.propose(t, rec.targets[rec.i_target])
            step = t_new - t
            gen = _generator_from_state(rng.bit_generator.state)     # commit the draw only with the step
            y_new = sde_step(method, f, t, y, step, brownian_increments(gen, y.shape, step), nu, geometry)
            if not np.all(np.isfinite(y_new)):
                status, message = -1, f"non-finite state in the step from t = {t} to t = {t_new}"
                break
            obs, stop = rec.hooks(t_new, y_new, land, event)
            ctl.commit()
            rng = gen
            n_steps += 1
            t, y = t_new, y_new
            rec.commit(t, y, land, obs)
            if stop is not None:
                status, message = 1, f"event at t = {t}: {stop}"
                break
            checkpoints.after_step(t, not rec.done, state)
    except KeyboardInterrupt:
        status, message = 2, f"interrupted at t = {t}"
        checkpoints.interrupted(state)
    if resume is None and isinstance(seed, np.random.Generator):
        seed.bit_generator.state = rng.bit_generator.state   # a Generator passed in is advanced, as numpy's are
    t_rec, y_rec, obs = rec.arrays(y)
    return Trajectory(t=t_rec, y=y_rec, observables=obs, y_final=y, t_final=float(t), status=status,
                      message=message, method=method, nfev=nfev[0], n_steps=n_steps, n_rejected=0,
                      max_retraction=0.0)
