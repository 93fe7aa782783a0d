"""The job folder of the main job, from its creation to the finished result.

A job folder (``meanfield run CONFIG --out DIR``) goes through, in :func:`main_job`:

1. created and locked (:class:`FolderLock`: one writer at a time; the operating system releases
   the lock however the process ends);
2. refused if it holds the checkpoint of an unfinished run (resume it instead) or, unless
   ``force``, a finished result (:class:`ResultExists`); :func:`meanfield.workflow.preflight.preflight`
   checks the config;
3. hidden temporaries of a killed save removed (:func:`remove_stale_temporaries`), the previous
   outputs removed (``force``);
4. the checkpoint started: ``checkpoint/config.toml`` is the marker of an unfinished run, which
   :func:`resume_job` continues bit for bit (:class:`~meanfield.workflow.checkpoint.Checkpointer`);
5. the run (:func:`meanfield.workflow.run.run`), its dataset written atomically (the marker of a
   finished result), the checkpoint removed, then the figures and the animation.

The task farm (:func:`meanfield.workflow.tasks.run_tasks`) locks its folders with the same
:class:`FolderLock`.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..core import validate
from .checkpoint import Checkpointer, RunInterrupted
from .config import RunConfig, load_config
from .preflight import estimate_cost, preflight
from .results import add_provenance, save
from .run import run, run_summary

__all__ = ["main_job", "resume_job", "FolderLock", "FolderInUse", "LOCK_NAME", "remove_stale_temporaries",
           "FiguresInterrupted", "ResultExists", "FIGURE_FILES", "AUTO_CHECKPOINT_S"]


LOCK_NAME = ".meanfield.lock"
"""Hidden lock file of an output folder (held with ``flock`` while a run writes into the folder)."""


class FolderInUse(ValueError):
    """Another live process holds the lock of an output folder."""


class FolderLock:
    """An exclusive ``flock`` on ``folder/.meanfield.lock`` held while a run writes into ``folder``.

    The operating system releases it when the process ends, however it ends (kill -9 included), so
    a stale lock file never blocks a later run; the file holds the owner's process id for the message
    a second run gets.  Use as a context manager.
    """

    def __init__(self, folder, log=None):
        self.folder = Path(folder)
        self.log = log                  # optional callable(str): a line per saved state / finished phase
        self.path = self.folder / LOCK_NAME
        self._fd = None

    def acquire(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise FolderInUse(f"output folder {str(self.folder)!r} is in use by process {owner} (a meanfield run "
                              f"writing into it); wait for it to finish, stop it, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return self

    def release(self):
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False


def remove_stale_temporaries(folder, names=("*",)) -> list[Path]:
    """Delete hidden temporary files (``.<name>.*.tmp``) left in ``folder`` by a killed save.

    Call only while holding the folder's :class:`FolderLock` (no live writer can own them then).
    Returns the removed paths.
    """
    folder, removed = Path(folder), []
    if folder.is_dir():
        for name in names:
            for stale in folder.glob(f".{name}.*.tmp"):
                stale.unlink(missing_ok=True)
                removed.append(stale)
    return removed


class FiguresInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) while the figures were being written: the dataset ``path`` is complete."""

    def __init__(self, path):
        super().__init__(str(path))
        self.path = Path(path)


class ResultExists(ValueError):
    """The output folder already holds a finished result (and ``force`` was not given)."""


FIGURE_FILES = ("density_maps.png", "orthographic.png", "energy_entropy.png", "w2.png", "growth_rates.png",
                "animation.gif")
"""Files :func:`meanfield.workflow.plotting.save_figures` writes (named here so that run needs no matplotlib)."""


def _previous_outputs(out: Path, config: RunConfig) -> list[Path]:
    """Files of a previous finished run in ``out``: its dataset, figures and animation."""
    return [p for p in [out / config.outputs.dataset, *(out / f for f in FIGURE_FILES)] if p.exists()]


def main_job(config: RunConfig | None = None, out_dir="meanfield-output", progress=None, force=False,
             log=None) -> dict:
    """Run, then write the dataset, the figures and the animation into ``out_dir``.

    Integrator states are checkpointed in ``out_dir/checkpoint/`` (every
    ``outputs.checkpoint_every`` and on Ctrl-C); :func:`resume_job` continues an interrupted run.
    The checkpoint folder is removed once the dataset is written.  While the run writes, the folder
    is locked (:class:`FolderLock`): a second run into it is refused with the
    first one's process id.  A folder that already holds a finished result is refused
    (:class:`ResultExists`) unless ``force`` is true, which removes the previous dataset and figures
    first.  Hidden temporary files of a killed save are removed before the run starts.  Before
    computing, :func:`preflight` checks the config (its lines go to ``log``, a callable, if given).

    Returns
    -------
    dict with ``dataset`` (the xarray Dataset), ``paths`` (list of written files) and ``summary`` (str).
    """
    config = RunConfig() if config is None else config
    force = bool(validate.boolean("force", force))
    out = Path(out_dir)
    if str(out_dir) == "":
        raise ValueError("out_dir must name a folder; received ''")
    out.mkdir(parents=True, exist_ok=True)       # fail before the run if the folder cannot be made
    lock = FolderLock(out).acquire()
    try:
        checkpoints = Checkpointer(out / "checkpoint")
        if checkpoints.folder.exists():
            raise ValueError(f"out_dir {str(out)!r} holds the checkpoint of an unfinished run; continue it with "
                             f"'meanfield run --resume {out}' or remove {checkpoints.folder}")
        previous = _previous_outputs(out, config)
        if (out / config.outputs.dataset).exists() and not force:
            raise ResultExists(f"out_dir {str(out)!r} already holds a finished result ({config.outputs.dataset}); "
                               f"choose another output folder, or pass --force to replace it and its figures")
        for line in preflight(config, force=force):
            if log is not None:
                log(line)
        remove_stale_temporaries(out, (config.outputs.dataset,))
        for p in previous:
            p.unlink()
        checkpoints.start(config.to_toml())
        checkpoints.log = log
        try:
            return _finish(config, out, checkpoints, progress)
        except (RunInterrupted, KeyboardInterrupt):
            raise                                   # keep the checkpoint: the run can be resumed
        except BaseException:
            if not checkpoints.has_states():        # failed before any state was saved: nothing to resume
                checkpoints.clear()
            raise
    finally:
        lock.release()


def resume_job(out_dir, progress=None, log=None) -> dict:
    """Continue the interrupted run whose checkpoint is in ``out_dir/checkpoint/``."""
    out = Path(out_dir)
    checkpoints = Checkpointer(out / "checkpoint")
    if not (checkpoints.folder / "config.toml").is_file():
        raise ValueError(f"out_dir {str(out)!r} holds no checkpoint of an unfinished run "
                         f"(expected {checkpoints.folder / 'config.toml'})")
    with FolderLock(out):
        config = load_config(checkpoints.folder / "config.toml")
        remove_stale_temporaries(out, (config.outputs.dataset,))
        remove_stale_temporaries(checkpoints.folder)
        checkpoints.log = log
        return _finish(config, out, checkpoints, progress)


AUTO_CHECKPOINT_S = 60.0
"""Runs estimated longer than this (seconds) save their states periodically even without
``outputs.checkpoint_every`` (every twentieth of ``t_final``)."""


def _checkpoint_every(config):
    if config.outputs.checkpoint_every is not None:
        return None                          # the config's own
    if estimate_cost(config, pilot=False)["seconds"] > AUTO_CHECKPOINT_S:   # from sizes: the same decision every time
        return config.integrator.t_final / 20
    return None


def _finish(config, out, checkpoints, progress):
    started = time.time()
    ds = run(config, progress=progress, checkpoints=checkpoints, checkpoint_every=_checkpoint_every(config))
    add_provenance(ds, started=started)
    paths = [save(ds, out / config.outputs.dataset)]
    checkpoints.clear()
    if config.outputs.figures or config.outputs.animation:
        try:
            from . import plotting  # matplotlib only when figures are asked for

            paths += plotting.save_figures(ds, out, dpi=config.outputs.dpi, figures=config.outputs.figures,
                                           animation=config.outputs.animation)
        except FiguresInterrupted:
            raise
        except KeyboardInterrupt:
            raise FiguresInterrupted(paths[0]) from None
    return {"dataset": ds, "paths": paths, "summary": run_summary(ds)}
