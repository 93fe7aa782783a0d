"""Checkpoints of long runs: integrator states saved atomically in a folder, one file per phase.

A :class:`Checkpointer` hands :func:`meanfield.core.integrate.integrate` a ``checkpoint`` callback
for a named phase (``"pde"``, ``"particles"``), keeps the finished trajectory of each phase, and
gives back what a resumed run needs: the finished trajectory, or the last state to continue from.
Files are pickles written to a temporary name and renamed, so a file is never half written.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from ..core import validate

__all__ = ["Checkpointer", "RunInterrupted"]

class RunInterrupted(Exception):
    """A run was interrupted (Ctrl-C); its state is saved in ``folder``.

    Parameters
    ----------
    folder : str or path-like
        The checkpoint folder (kept as :attr:`folder`, a Path).
    message : str
        The exception's message.
    """

    def __init__(self, folder, message):
        super().__init__(message)
        self.folder = Path(folder)


_LABELS = {"pde": "PDE", "particles": "particles"}


class Checkpointer:
    """Checkpoint files of one run in ``folder``.

    Parameters
    ----------
    folder : str or path-like
        The checkpoint folder.
    log : callable, optional
        ``log(line)``, called with a line per saved state and finished phase.
    every : float, optional
        Simulated time between saved states of each phase (None: only on Ctrl-C); when saves happen, never the
        numbers.

    Raises
    ------
    ValueError
        ``every`` given and not a positive finite number.
    """

    def __init__(self, folder, log=None, every=None):
        self.folder = Path(folder)
        self.log = log                  # optional callable(str): a line per saved state / finished phase
        self.every = None if every is None else validate.real("every", every, positive=True)

    def _write(self, name, obj):
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{name}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self.folder / name)

    def _read(self, name):
        path = self.folder / name
        if not path.is_file():
            return None
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except (EOFError, pickle.UnpicklingError, AttributeError, ImportError, IndexError, ValueError) as err:
            raise ValueError(f"checkpoint file {str(path)!r} is unreadable ({type(err).__name__}: {err}); "
                             f"remove {self.folder} to start the run over") from None

    def start(self, config_toml: str):
        """Create the folder with the run's config (written atomically).

        Parameters
        ----------
        config_toml : str
            The config as TOML text (``config.toml``).

        Raises
        ------
        FileExistsError
            The folder exists already.
        """
        self.folder.mkdir(parents=True)
        tmp = self.folder / f".config.toml.{os.getpid()}.tmp"
        tmp.write_text(config_toml)
        os.replace(tmp, self.folder / "config.toml")

    def has_states(self) -> bool:
        """Whether any integrator state or finished phase has been saved.

        Returns
        -------
        bool
        """
        return self.folder.is_dir() and any(self.folder.glob("*.pkl"))

    def saver(self, phase):
        """``checkpoint(state)`` callback writing ``<phase>.state.pkl``.

        Parameters
        ----------
        phase : str
            ``"pde"`` or ``"particles"``.

        Returns
        -------
        callable
            ``save(state)`` for :class:`~meanfield.core.options.Checkpointing`.
        """
        def save(state):
            self._write(f"{phase}.state.pkl", state)
            if self.log is not None:
                self.log(f"{_LABELS.get(phase, phase)}: t = {float(state.get('t', float('nan'))):.4g}, state saved")
        return save

    def state(self, phase):
        """The last saved integrator state of ``phase`` (to pass as ``resume``), or None.

        Parameters
        ----------
        phase : str
            ``"pde"`` or ``"particles"``.

        Returns
        -------
        dict or None

        Raises
        ------
        ValueError
            An unreadable state file.
        """
        state = self._read(f"{phase}.state.pkl")
        if self.log is not None:             # asked for when the phase starts: say so
            self.log(f"{_LABELS.get(phase, phase)}: " + ("started" if state is None else
                                                          f"resumed at t = {float(state.get('t', float('nan'))):.4g}"))
        return state

    def finish(self, phase, trajectory):
        """Keep the finished trajectory of ``phase``; its intermediate state is no longer needed.

        Parameters
        ----------
        phase : str
            ``"pde"`` or ``"particles"``.
        trajectory : Trajectory
            The finished run.
        """
        self._write(f"{phase}.done.pkl", trajectory)
        (self.folder / f"{phase}.state.pkl").unlink(missing_ok=True)
        if self.log is not None:
            self.log(f"{_LABELS.get(phase, phase)}: finished at t = {getattr(trajectory, 't_final', float('nan')):.4g} "
                     f"({getattr(trajectory, 'message', '')})" + ("; W2 distances next" if phase == "particles" else ""))

    def finished(self, phase):
        """The finished trajectory of ``phase``, or None.

        Parameters
        ----------
        phase : str
            ``"pde"`` or ``"particles"``.

        Returns
        -------
        Trajectory or None

        Raises
        ------
        ValueError
            An unreadable file.
        """
        return self._read(f"{phase}.done.pkl")

    def clear(self):
        """Remove the checkpoint files (after the run's results are safely written)."""
        if self.folder.is_dir():
            for f in self.folder.iterdir():
                f.unlink()
            self.folder.rmdir()
