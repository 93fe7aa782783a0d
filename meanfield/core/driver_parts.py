"""The parts of the driver :func:`meanfield.core.integrate.integrate`, each owning its share of the state a
checkpoint saves, and its argument checks.

* :class:`_Recorder` keeps the recorded times, states and observables (``SaveAt``),
* :class:`_Checkpoints` calls ``Checkpointing.save(state)`` on schedule and on Ctrl-C,
* :class:`_Progress` draws the tqdm bar,
* :class:`_Stream` owns the random generator of a stochastic scheme,
* :class:`_Counted` counts right-hand-side evaluations, :class:`_Position` is where the run is;
* ``_check_*``: named ValueErrors for the noise, the events, the linear part and a resume state.

Numpy, tqdm and :mod:`~meanfield.core.dense`, :mod:`~meanfield.core.sde`; nothing else of ``meanfield``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from . import validate
from .dense import Event
from .methods import method_names
from .sde import Noise, check_noise_step, generator_from_state


def _fail(name, allowed, received, as_text=False):
    raise ValueError(f"{name} must be {allowed}; received {received if as_text else repr(received)}")


class _Recorder:
    """The targets (``t_eval`` and the end), and the recorded times, states and observables."""

    def __init__(self, t_eval, t1, observe, save_states, breaks=()):
        self.targets = t_eval if t_eval[-1] == t1 else np.append(t_eval, t1)
        self.is_eval = np.ones(len(self.targets), dtype=bool)
        self.is_eval[len(t_eval):] = False
        extra = np.setdiff1d(np.asarray(breaks, dtype=float), self.targets)     # breakpoints: landed on, not recorded
        if extra.size:
            order = np.argsort(np.concatenate([self.targets, extra]), kind="stable")
            self.targets = np.concatenate([self.targets, extra])[order]
            self.is_eval = np.concatenate([self.is_eval, np.zeros(extra.size, dtype=bool)])[order]
        self.observe, self.save_states = observe, save_states
        self.i_target, self.t, self.y, self.obs = 0, [], [], {}

    @property
    def done(self) -> bool:
        return self.i_target >= len(self.targets)

    def observe_at(self, t, y):
        out = self.observe(t, y) if self.observe is not None else {}
        if not isinstance(out, Mapping):
            raise ValueError(f"observe must return a dict of named values (observe(t, y) -> dict); received "
                             f"{type(out).__name__} at t = {t:g}")
        return {key: np.asarray(val) for key, val in out.items()}

    def append(self, t, y, obs):
        self.t.append(t)
        if self.save_states:
            self.y.append(y)
        for key, val in obs.items():
            self.obs.setdefault(key, []).append(val)

    def record(self, t, y):
        self.append(t, y, self.observe_at(t, y))

    def start(self, t0, y, event):
        """Record ``t0`` if it is a target and test ``event`` there; ``(status, message)`` when it fires, else None."""
        if self.targets[0] == t0:
            self.record(t0, y)
            self.i_target = 1
        stop = event(t0, y) if event is not None else None
        if stop is None:
            return None
        if not self.t:
            self.record(t0, y)
        self.i_target = len(self.targets)
        return 1, f"event at t = {t0}: {stop}"

    def hooks(self, t, y, land, event):
        """``(obs, stop)`` at the end ``(t, y)`` of a step not yet committed: the observables to record
        (None when nothing is recorded there) and what ``event`` returned."""
        keep = land and self.is_eval[self.i_target]
        obs = self.observe_at(t, y) if keep else None
        stop = event(t, y) if event is not None else None
        if stop is not None and not keep:
            obs = self.observe_at(t, y)
        return obs, stop

    def commit(self, t, y, land, obs):
        """Record the committed step's end when :meth:`hooks` gave observables; move past a landed target."""
        if obs is not None:
            self.append(t, y, obs)
        if land:
            self.i_target += 1

    def state(self):
        """The recorded times, states and observables of a checkpoint state (with ``i_target``,
        :meth:`restore` reads them)."""
        return {"rec_t": list(self.t), "rec_y": list(self.y),
                "rec_obs": {k: list(v) for k, v in self.obs.items()}}

    def restore(self, state):
        self.i_target, self.t, self.y = state["i_target"], list(state["rec_t"]), list(state["rec_y"])
        self.obs = {k: list(v) for k, v in state["rec_obs"].items()}

    def arrays(self, y):
        """``(t, states or None, observables)`` as arrays; ``y`` gives the shape of an empty record."""
        states = (np.stack(self.y) if self.y else np.empty((0,) + y.shape, dtype=y.dtype)) if self.save_states else None
        return np.array(self.t, dtype=float), states, {key: np.stack(vals) for key, vals in self.obs.items()}


class _Checkpoints:
    """Calls ``checkpoint(state())`` every ``every`` units of simulated time and on an interrupt."""

    def __init__(self, callback, every, t):
        self.callback, self.every = callback, every
        self.next = t + every if every is not None else np.inf

    def after_step(self, t, more, state):
        if self.callback is not None and t >= self.next and more:
            self.callback(state())
            self.next = t + self.every

    def interrupted(self, state):
        if self.callback is not None:
            self.callback(state())


class _Progress:
    """A tqdm bar over simulated time, redrawn at most every 0.1 s (None: only on a terminal)."""

    def __init__(self, t0, t1, t, enabled, desc):
        self.bar = tqdm(total=t1 - t0, initial=t - t0, disable=None if enabled is None else not enabled, desc=desc,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.4g}/{total:.4g} [{elapsed}<{remaining}]")
        self.shown, self.last_draw = t, time.monotonic()

    def update(self, t):
        if time.monotonic() - self.last_draw > 0.1:
            self.bar.update(t - self.shown)
            self.shown, self.last_draw = t, time.monotonic()

    def close(self, t):
        self.bar.update(t - self.shown)
        self.bar.close()


class _Stream:
    """The Brownian stream of a stochastic run: the generator, advanced only when a step is committed
    (a rejected or interrupted step leaves it where it was), its state saved in the checkpoint."""

    def __init__(self, rng):
        self.rng, self.pending = rng, None

    def draw(self, stepper, shape, dt):
        self.pending = generator_from_state(self.rng.bit_generator.state)
        return stepper.increments(self.pending, shape, dt)

    def commit(self):
        self.rng = self.pending


class _Counted:
    """``rhs`` (plus ``linear * y`` for an explicit scheme given a linear part), counting evaluations."""

    def __init__(self, rhs, linear=None):
        self.rhs, self.linear, self.nfev = rhs, linear, 0

    def __call__(self, t, y):
        self.nfev += 1
        return self.rhs(t, y) if self.linear is None else self.linear * y + self.rhs(t, y)


@dataclass
class _Position:
    """Where the run is: the accepted state, its derivative if known, and the counts so far."""

    t: float
    y: np.ndarray
    k0: np.ndarray | None
    n_steps: int = 0
    n_rejected: int = 0
    max_retraction: float = 0.0


def _check_noise(stepper, noise, y, dt, retraction, resume):
    """The :class:`_Stream` of a stochastic scheme (None for a deterministic one); named errors for
    noise given to a deterministic scheme or missing for a stochastic one, and the step's range."""
    if not stepper.stochastic:
        if noise is not None:
            _fail("noise", f"None for the deterministic method {stepper.name!r} (a Noise for one of "
                  f"{method_names(stochastic=True)})", noise)
        return None
    if not isinstance(noise, Noise):
        _fail("noise", f"a Noise(nu, seed, geometry) for the stochastic method {stepper.name!r}", noise)
    if retraction is not None:
        _fail("retraction", f"None for the stochastic method {stepper.name!r} (it retracts itself)", retraction)
    if y.ndim != 2 or y.dtype.kind != "f":
        _fail("y0", f"a real array of shape (n, d) for the stochastic method {stepper.name!r}",
              f"shape {y.shape}, dtype {y.dtype}", True)
    check_noise_step(noise.nu, y.shape[1], dt, stepper.name, noise.geometry)
    return _Stream(noise.generator() if resume is None else None)


def _check_events(stepper, dense, events, checkpoint, resume):
    """The events as :class:`Event` objects; named errors where dense output or events cannot be had."""
    validate.boolean("dense", dense)
    if isinstance(events, (Event,)) or callable(events):
        events = [events]
    try:
        events = [e if isinstance(e, Event) else Event(e) for e in events]
    except (TypeError, ValueError):
        _fail("events", "a sequence of Event or of callables fn(t, y) -> float", events)
    if dense or events:
        if not stepper.reuses_k0:
            _fail("dense", f"False and events empty for the method {stepper.name!r} (stochastic schemes and step "
                  f"rules have no dense output)", f"dense={dense}, {len(events)} events", True)
        if checkpoint is not None or resume is not None:
            _fail("checkpoint", "None (and resume None) with dense output or events", "a checkpoint", True)
    return events


def _check_linear(linear, y):
    if linear is None:
        return None
    L = np.asarray(linear)
    real = "real " if y.dtype.kind == "f" else ""
    allowed = f"None or a finite {real}numeric array broadcasting to y0's shape {y.shape}"
    if L.dtype.kind not in "iufc" or (L.dtype.kind == "c" and y.dtype.kind == "f"):
        _fail("linear", allowed, f"an array of dtype {L.dtype}", True)
    if not np.all(np.isfinite(L)):
        _fail("linear", allowed, "an array containing NaN or inf", True)
    try:
        ok = np.broadcast_shapes(L.shape, y.shape) == y.shape
    except ValueError:
        ok = False
    if not ok:
        _fail("linear", allowed, f"shape {L.shape}", True)
    return L.astype(np.result_type(L.dtype, y.dtype))


def _check_resume(state, method, t_span, t_eval, shape, settings=None, stochastic=False):
    """A checkpoint continues only the run it came from: same scheme, span, times, shape and step
    settings (``dt`` of fixed steps, ``rtol``/``atol`` of adaptive ones; checkpoints written before
    the settings were recorded carry none and are not checked for them)."""
    need = {"method", "t_span", "t_eval", "t", "y", "k0", "h", "i_target", "n_steps", "n_rejected", "k_grid",
            "max_retraction", "rejected_last", "nfev", "rec_t", "rec_y", "rec_obs"}
    need |= {"rng_state"} if stochastic else set()          # the Brownian stream of a stochastic scheme
    if not isinstance(state, dict) or need - set(state):
        missing = sorted(need - set(state)) if isinstance(state, dict) else "not a dict"
        _fail("resume", "a checkpoint state from integrate(checkpoint=...)", f"missing {missing}", True)
    if state["method"] != method:
        _fail("resume", f"a checkpoint of method {method!r}", f"one of method {state['method']!r}", True)
    if tuple(map(float, state["t_span"])) != tuple(t_span) or not np.array_equal(state["t_eval"], t_eval):
        _fail("resume", f"a checkpoint of the same t_span {t_span} and t_eval",
              f"t_span {tuple(state['t_span'])}", True)
    if np.shape(state["y"]) != shape:
        _fail("resume", f"a checkpoint with states of shape {shape}", np.shape(state["y"]), True)
    saved = state.get("settings")
    if settings is not None and saved is not None and saved != settings:
        _fail("resume", f"a checkpoint made with the same step settings {settings}", f"one made with {saved}", True)
