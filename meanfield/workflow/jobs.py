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

Every job of the package has this one shape, :class:`JobFolder` (issue 32): the main job, the equilibria
job (:func:`meanfield.workflow.equilibria_job.equilibria_job`), the phase diagram
(:func:`meanfield.workflow.phase_diagram.run_phase_diagram`), the transition map
(:func:`meanfield.workflow.transition_map.run_transition_map`) and the sweep
(:func:`meanfield.workflow.sweep.run_sweep`) make and lock their folder, refuse a finished result unless
``force`` (the sweep, resumable, never refuses: a re-run rewrites its ``sweep.nc``), remove stale temporaries, save
their dataset with provenance, atomically, and write their figures after it, through it.  The task farm
(:func:`meanfield.workflow.tasks.run_tasks`) opens its folder as a ``JobFolder`` too (its index is the result,
always resumed), or runs inside the open ``JobFolder`` of the job that called it (the sweep).
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
from .results import describe, provenance, save
from .run import run, run_summary

__all__ = ["main_job", "resume_job", "JobFolder", "FolderLock", "FolderInUse", "LOCK_NAME",
           "remove_stale_temporaries", "FiguresInterrupted", "ResultExists", "FIGURE_FILES", "AUTO_CHECKPOINT_S"]


LOCK_NAME = ".meanfield.lock"
"""Hidden lock file of an output folder (held with ``flock`` while a run writes into the folder)."""


class FolderInUse(ValueError):
    """Another live process holds the lock of an output folder."""


class FolderLock:
    """An exclusive ``flock`` on ``folder/.meanfield.lock`` held while a run writes into ``folder``.

    The operating system releases it when the process ends, however it ends (kill -9 included), so
    a stale lock file never blocks a later run; the file holds the owner's process id for the message
    a second run gets.  Use as a context manager.

    Parameters
    ----------
    folder : str or path-like
        The output folder (made when the lock is acquired).
    log : callable, optional
        ``log(line)``: a line per saved state or finished phase (kept for the run's writers).
    """

    def __init__(self, folder, log=None):
        self.folder = Path(folder)
        self.log = log                  # optional callable(str): a line per saved state / finished phase
        self.path = self.folder / LOCK_NAME
        self._fd = None

    def acquire(self):
        """Take the lock (without waiting), writing this process's id into the lock file.

        Returns
        -------
        FolderLock
            Itself.

        Raises
        ------
        FolderInUse
            Another live process holds the lock (its id is named).
        """
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

    Parameters
    ----------
    folder : str or path-like
        The folder (nothing happens when it does not exist).
    names : sequence of str
        Glob patterns of the saved files' names (default: any).

    Returns
    -------
    list of pathlib.Path
        The removed paths.
    """
    folder, removed = Path(folder), []
    if folder.is_dir():
        for name in names:
            for stale in folder.glob(f".{name}.*.tmp"):
                stale.unlink(missing_ok=True)
                removed.append(stale)
    return removed


class FiguresInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) while the figures were being written: the dataset ``path`` is complete.

    Parameters
    ----------
    path : str or path-like
        The finished dataset.
    """

    def __init__(self, path):
        super().__init__(str(path))
        self.path = Path(path)


class ResultExists(ValueError):
    """The output folder of a job already holds a finished result (and ``force`` was not given); the message
    names ``--force``.  Every job raises it (:class:`JobFolder`)."""


class JobFolder:
    """The folder of one job, from its creation to its finished result: the one shape of every job.

    Entered (``with JobFolder(out_dir, "result.nc", force=force) as folder:``), it makes the folder, takes its
    :class:`FolderLock` (a second writer is refused with :class:`FolderInUse`), refuses a folder that holds a
    finished result (the file ``result_name``) unless ``force`` or ``resume`` (:class:`ResultExists`, naming
    ``--force``) and removes the hidden temporaries of a killed save of the result
    (:func:`remove_stale_temporaries`).  The job then makes its own checks, calls :meth:`remove_previous` (the
    previous result and its ``outputs``: nothing is removed before the checks pass), computes, writes its dataset
    with :meth:`save` (provenance added, written atomically: the file marks a finished result) and its figures
    after it (:meth:`save_figure`, :meth:`save_figures`).  The lock is released on exit, however the job ends;
    what the job wrote is listed in :attr:`paths`.

    Parameters
    ----------
    out_dir : str or path-like
        The output folder (made if missing).
    result_name : str
        The file name of the job's dataset in ``out_dir``.
    force : bool
        Replace a finished result (and its ``outputs``).
    what : str
        What the result is called in the refusal (``"result"``, ``"map"``).
    outputs : sequence of str
        The names of the job's other files (figures) in ``out_dir``, removed with a replaced result.
    resume : bool
        The job continues an unfinished one in ``out_dir``: a finished result is not refused.

    Raises
    ------
    ValueError
        An empty ``out_dir``, a ``result_name`` that is not a file name, or a non-boolean ``force`` or ``resume``.
    """

    def __init__(self, out_dir, result_name, *, force=False, what="result", outputs=(), resume=False):
        if str(out_dir) == "":
            raise ValueError("out_dir must name a folder; received ''")
        if not isinstance(result_name, str) or result_name in ("", ".", "..") or Path(result_name).name != result_name:
            raise ValueError(f"result_name must be a file name in out_dir; received {result_name!r}")
        self.force = bool(validate.boolean("force", force))
        self.resume = bool(validate.boolean("resume", resume))
        self.path = Path(out_dir)
        self.result = self.path / result_name
        self.what = str(what)
        self.outputs = tuple(outputs)
        self.paths: list[Path] = []
        self.started = None
        self._lock = None

    def open(self):
        """Make the folder, lock it, refuse a finished result (unless ``force`` or ``resume``), remove stale
        temporaries of the result; ``with JobFolder(...)`` calls it.

        Returns
        -------
        JobFolder
            Itself.

        Raises
        ------
        FolderInUse
            Another process holds the folder's lock.
        ResultExists
            ``out_dir`` holds a finished result, without ``force`` or ``resume``.
        OSError
            The folder cannot be made.
        """
        self.path.mkdir(parents=True, exist_ok=True)       # fail before the job computes if it cannot be made
        self._lock = FolderLock(self.path).acquire()
        try:
            if self.result.exists() and not (self.force or self.resume):
                also = "" if not self.outputs else " and its figure" + ("s" if len(self.outputs) > 1 else "")
                raise ResultExists(f"out_dir {str(self.path)!r} already holds a finished {self.what} "
                                   f"({self.result.name}); choose another output folder, or pass --force to replace "
                                   f"it{also}")
            remove_stale_temporaries(self.path, (self.result.name,))
        except BaseException:
            self.close()
            raise
        self.started = time.time()
        return self

    def close(self):
        """Release the folder's lock (``with`` calls it, however the job ends)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()
        return False

    def remove_temporaries(self, *names) -> list[Path]:
        """Remove the hidden temporaries of a killed save of the job's other files ``names`` (:meth:`open` removes
        those of the result only), e.g. the ``index.json`` of a task farm that runs inside the job's folder.

        Parameters
        ----------
        *names : str
            File names (or glob patterns) in the folder.

        Returns
        -------
        list of pathlib.Path
            The removed temporaries.

        Raises
        ------
        RuntimeError
            The folder is not open (a live writer could own them).
        """
        self._check_open("remove temporaries")
        return remove_stale_temporaries(self.path, names)

    def remove_previous(self) -> list[Path]:
        """Remove the previous result (there is one only with ``force`` or ``resume``) and the job's ``outputs``
        left in the folder; call it once the job's checks have passed.

        Returns
        -------
        list of pathlib.Path
            The removed files.
        """
        removed = [p for p in (self.result, *(self.path / name for name in self.outputs)) if p.exists()]
        for p in removed:
            p.unlink()
        return removed

    def save(self, ds, name=None, started=None) -> Path:
        """Add :func:`~meanfield.workflow.results.provenance` to ``ds`` in place and write it atomically
        (:func:`~meanfield.workflow.results.save`) into the folder.

        Parameters
        ----------
        ds : xarray.Dataset
            The job's dataset (``schema_version`` of :mod:`meanfield.workflow.results`).
        name : str, optional
            The file name (default ``result_name``).
        started : float, optional
            The job's start (``time.time()``) in the provenance (default: when the folder was opened; the main job
            passes the start of its run, after the preflight).

        Returns
        -------
        pathlib.Path
            The written file.

        Raises
        ------
        RuntimeError
            The folder is not open (outside the ``with`` block).
        """
        self._check_open("save a dataset")
        ds.attrs.update(provenance(started=self.started if started is None else started))
        path = save(ds, self.result if name is None else self.path / name)
        self.paths.append(path)
        return path

    def save_figures(self, draw) -> list[Path]:
        """Write figures after the dataset: ``draw(folder)`` writes them into the folder and returns their paths.

        Parameters
        ----------
        draw : callable
            ``draw(path)`` with ``path`` the folder (pathlib.Path); returns the list of files written.

        Returns
        -------
        list of pathlib.Path
            The files ``draw`` wrote.

        Raises
        ------
        RuntimeError
            The folder is not open, or its dataset has not been saved yet (figures come after the dataset).
        """
        self._check_open("write figures")
        if self.result not in self.paths:
            raise RuntimeError(f"the figures of {str(self.path)!r} are written after its dataset "
                               f"({self.result.name}); save it first")
        written = list(draw(self.path))
        self.paths += written
        return written

    def save_figure(self, figure, name, *, dpi) -> Path:
        """Write one matplotlib figure into the folder after the dataset (:meth:`save_figures`).

        Parameters
        ----------
        figure : matplotlib.figure.Figure
            The figure.
        name : str
            Its file name.
        dpi : int
            Resolution.

        Returns
        -------
        pathlib.Path
            The written file.

        Raises
        ------
        RuntimeError
            As :meth:`save_figures`.
        """
        def draw(folder):
            figure.savefig(folder / name, dpi=dpi)
            return [folder / name]
        return self.save_figures(draw)[0]

    def _check_open(self, action):
        if self._lock is None:
            raise RuntimeError(f"JobFolder({str(self.path)!r}) is not open: {action} inside its with block")


FIGURE_FILES = ("density_maps.png", "orthographic.png", "energy_entropy.png", "w2.png", "growth_rates.png",
                "animation.gif")
"""Files :func:`meanfield.workflow.plotting.save_figures` writes (named here so that run needs no matplotlib)."""


def main_job(config: RunConfig | None = None, out_dir="meanfield-output", progress=None, force=False,
             log=None) -> dict:
    """Run, then write the dataset, the figures and the animation into ``out_dir``.

    Integrator states are checkpointed in ``out_dir/checkpoint/`` (every
    ``outputs.checkpoint_every`` and on Ctrl-C); :func:`resume_job` continues an interrupted run.
    The checkpoint folder is removed once the dataset is written.  While the run writes, the folder
    is locked (:class:`FolderLock`): a second run into it is refused with the
    first one's process id.  A folder that already holds a finished result is refused
    (:class:`ResultExists`) unless ``force`` is true, which removes the previous dataset and figures
    once the preflight passed.  Hidden temporary files of a killed save are removed before the run starts
    (the folder is a :class:`JobFolder`, the shape of every job).  Before
    computing, :func:`preflight` checks the config (its lines go to ``log``, a callable, if given).

    Parameters
    ----------
    config : RunConfig, optional
        The run (default ``RunConfig()``).
    out_dir : str or path-like
        The output folder (made if missing).
    progress : bool, optional
        Progress bars (None: only on a terminal).
    force : bool
        Replace a finished result in ``out_dir``.
    log : callable, optional
        ``log(line)`` told the preflight's lines and each saved state.

    Returns
    -------
    dict
        ``dataset`` (the xarray Dataset), ``paths`` (list of written files) and ``summary`` (str).

    Raises
    ------
    ResultExists
        A finished result in ``out_dir`` without ``force``.
    FolderInUse
        Another process writes into ``out_dir``.
    ValueError
        A non-boolean ``force``, an empty ``out_dir``, an unfinished run's checkpoint in ``out_dir``, or what the
        preflight refuses.
    """
    config = RunConfig() if config is None else config
    folder = JobFolder(out_dir, config.outputs.dataset, force=force, outputs=FIGURE_FILES)
    out = folder.path
    checkpoints = Checkpointer(out / "checkpoint")
    with folder:
        if checkpoints.folder.exists():
            raise ValueError(f"out_dir {str(out)!r} holds the checkpoint of an unfinished run; continue it with "
                             f"'meanfield run --resume {out}' or remove {checkpoints.folder}")
        for line in preflight(config, force=folder.force):
            if log is not None:
                log(line)
        folder.remove_previous()
        checkpoints.start(config.to_toml())
        checkpoints.log = log
        try:
            return _finish(config, folder, checkpoints, progress)
        except (RunInterrupted, KeyboardInterrupt):
            raise                                   # keep the checkpoint: the run can be resumed
        except BaseException:
            if not checkpoints.has_states():        # failed before any state was saved: nothing to resume
                checkpoints.clear()
            raise


def resume_job(out_dir, progress=None, log=None) -> dict:
    """Continue the interrupted run whose checkpoint is in ``out_dir/checkpoint/``.

    Parameters
    ----------
    out_dir : str or path-like
        The interrupted run's folder.
    progress : bool, optional
        Progress bars (None: only on a terminal).
    log : callable, optional
        ``log(line)`` told each saved state.

    Returns
    -------
    dict
        As :func:`main_job`.

    Raises
    ------
    ValueError
        No checkpoint in ``out_dir``, or a checkpoint whose config is invalid.
    FolderInUse
        Another process writes into ``out_dir``.
    """
    out = Path(out_dir)
    checkpoints = Checkpointer(out / "checkpoint")
    if not (checkpoints.folder / "config.toml").is_file():
        raise ValueError(f"out_dir {str(out)!r} holds no checkpoint of an unfinished run "
                         f"(expected {checkpoints.folder / 'config.toml'})")
    config = load_config(checkpoints.folder / "config.toml")       # atomically written: the result's name
    with JobFolder(out, config.outputs.dataset, outputs=FIGURE_FILES, resume=True) as folder:
        if not (checkpoints.folder / "config.toml").is_file():     # under the lock: finished meanwhile
            raise ValueError(f"out_dir {str(out)!r} holds no checkpoint of an unfinished run "
                             f"(expected {checkpoints.folder / 'config.toml'})")
        remove_stale_temporaries(checkpoints.folder)
        checkpoints.log = log
        return _finish(config, folder, checkpoints, progress)


AUTO_CHECKPOINT_S = 60.0
"""Runs estimated longer than this (seconds) save their states periodically even without
``outputs.checkpoint_every`` (every twentieth of ``t_final``)."""


def _checkpoint_every(config):
    if config.outputs.checkpoint_every is not None:
        return config.outputs.checkpoint_every          # the config's own
    if estimate_cost(config, pilot=False)["seconds"] > AUTO_CHECKPOINT_S:   # from sizes: the same decision every time
        return config.integrator.t_final / 20
    return None


def _finish(config, folder, checkpoints, progress):
    started = time.time()                       # the run's own start (after the preflight and its pilot), as before
    checkpoints.every = _checkpoint_every(config)
    ds = run(config, progress=progress, checkpoints=checkpoints)
    describe(ds)                                # the run's CF attributes; the folder adds the provenance
    result = folder.save(ds, started=started)
    checkpoints.clear()
    if config.outputs.figures or config.outputs.animation:
        try:
            from . import plotting  # matplotlib only when figures are asked for

            folder.save_figures(lambda out: plotting.save_figures(ds, out, dpi=config.outputs.dpi,
                                                                  figures=config.outputs.figures,
                                                                  animation=config.outputs.animation))
        except FiguresInterrupted:
            raise
        except KeyboardInterrupt:
            raise FiguresInterrupted(result) from None
    return {"dataset": ds, "paths": list(folder.paths), "summary": run_summary(ds)}
