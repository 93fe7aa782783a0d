"""Checkpoint files (meanfield.workflow.checkpoint): atomic saves, phases, corrupt files, RunInterrupted.

The main job's interrupt/resume cycle is tested end to end in test_resume.py; here the
:class:`Checkpointer` itself is tested through its public methods.
"""

import os
import pickle

import numpy as np
import pytest

import meanfield as mf
from meanfield.core.integrate import integrate
from meanfield.core.options import Checkpointing, SaveAt, StepControl
from meanfield.workflow import jobs
from meanfield.workflow.checkpoint import Checkpointer, RunInterrupted


def _state(x):
    return {"t": x, "y": np.arange(6.0).reshape(3, 2) * x, "rec_t": [0.0, x]}


def _assert_same_state(a, b):
    assert a.keys() == b.keys() and a["t"] == b["t"] and a["rec_t"] == b["rec_t"]
    np.testing.assert_array_equal(a["y"], b["y"])      # pickle round trip of float64: exact


def test_start_writes_config_and_refuses_an_existing_folder(tmp_path):
    ck = Checkpointer(tmp_path / "run" / "checkpoint")
    assert not ck.has_states()                           # no folder yet
    ck.start('seed = 1\n[pde]\nlmax = 15\n')
    assert (ck.folder / "config.toml").read_text() == 'seed = 1\n[pde]\nlmax = 15\n'
    assert sorted(p.name for p in ck.folder.iterdir()) == ["config.toml"]     # no temporary left
    assert not ck.has_states()                           # a config alone is not a state
    with pytest.raises(FileExistsError):
        Checkpointer(ck.folder).start("seed = 2\n")      # never silently reuses a run's folder
    assert (ck.folder / "config.toml").read_text().startswith("seed = 1")


def test_state_finish_finished_clear(tmp_path):
    ck = Checkpointer(tmp_path / "ck")
    assert ck.state("pde") is None and ck.finished("pde") is None      # nothing saved yet
    save_pde, save_particles = ck.saver("pde"), ck.saver("particles")
    save_pde(_state(1.0))
    save_pde(_state(2.0))                                # a later save replaces the earlier one
    save_particles(_state(5.0))
    assert ck.has_states()
    _assert_same_state(ck.state("pde"), _state(2.0))
    _assert_same_state(ck.state("particles"), _state(5.0))             # phases are independent
    assert not any(p.name.endswith(".tmp") for p in ck.folder.iterdir())
    ck.finish("pde", {"trajectory": np.linspace(0, 1, 4)})
    assert ck.state("pde") is None                       # the finished phase's state file is removed
    assert not (ck.folder / "pde.state.pkl").exists()
    np.testing.assert_array_equal(ck.finished("pde")["trajectory"], np.linspace(0, 1, 4))
    assert ck.finished("particles") is None
    _assert_same_state(ck.state("particles"), _state(5.0))
    ck.clear()
    assert not ck.folder.exists() and not ck.has_states()
    ck.clear()                                           # clearing twice is harmless


def test_finish_without_state_and_trajectory_round_trip(tmp_path):
    """A phase may finish without an intermediate state; a real Trajectory survives the file exactly."""
    tr = integrate(lambda t, y: -y, [1.0, 2.0], (0.0, 1.0), method="rk4", step=StepControl(dt=0.1),
                   save=SaveAt(t_eval=[0.0, 0.5, 1.0]))
    ck = Checkpointer(tmp_path / "ck")
    ck.finish("particles", tr)
    back = ck.finished("particles")
    assert isinstance(back, mf.Trajectory) and (back.status, back.message, back.nfev) == (0, tr.message, tr.nfev)
    np.testing.assert_array_equal(back.y, tr.y)          # pickle of float64 arrays: exact
    np.testing.assert_array_equal(back.t, tr.t)


def test_save_is_atomic(tmp_path, monkeypatch):
    """A save that fails before its rename leaves the previous checkpoint intact and readable."""
    ck = Checkpointer(tmp_path / "ck")
    save = ck.saver("pde")
    save(_state(1.0))
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        save({"t": 2.0, "y": lambda: None})              # unpicklable: fails while writing
    _assert_same_state(ck.state("pde"), _state(1.0))

    def crash(src, dst):                                 # the process dies between write and rename
        raise OSError("simulated crash")

    with monkeypatch.context() as m:
        m.setattr(os, "replace", crash)
        with pytest.raises(OSError, match="simulated crash"):
            save(_state(3.0))
    _assert_same_state(ck.state("pde"), _state(1.0))
    assert not ck.folder.joinpath("pde.done.pkl").exists()


@pytest.mark.parametrize("content", [b"", b"not a pickle at all", pickle.dumps(_state(1.0))[:20],
                                     b"cno_such_module_x\nf\n."],      # a class of a module that is gone
                         ids=["empty", "garbage", "truncated", "missing-module"])
@pytest.mark.parametrize("which", ["state", "finished"])
def test_corrupt_checkpoint_gives_clear_error(tmp_path, content, which):
    ck = Checkpointer(tmp_path / "ck")
    name = "pde.state.pkl" if which == "state" else "pde.done.pkl"
    ck.folder.mkdir()
    (ck.folder / name).write_bytes(content)
    # the message names the file, says it is unreadable and how to start over
    with pytest.raises(ValueError, match=rf"checkpoint file '.*{name}' is unreadable \(.*\); remove .*ck "
                                         r"to start the run over"):
        getattr(ck, which)("pde")


def test_resume_from_files_is_bit_for_bit(tmp_path):
    """integrate's checkpoint states written through a Checkpointer and read back resume exactly."""
    system = mf.ParticleSystem(mf.scalar_heads([1.0, -0.5], 3, beta=2.0))
    X0 = mf.initial.uniform_sphere(10, 3, seed=3)
    kw = dict(method="dopri5", step=StepControl(rtol=1e-8, atol=1e-10), save=SaveAt(t_eval=np.linspace(0, 1, 6)),
              retraction=system.retraction)
    full = integrate(system.rhs, X0, (0.0, 1.0), **kw)
    ck = Checkpointer(tmp_path / "ck")
    integrate(system.rhs, X0, (0.0, 1.0), checkpointing=Checkpointing(save=ck.saver("particles"), every=0.3), **kw)
    state = ck.state("particles")
    assert 0 < state["t"] < 1
    resumed = integrate(system.rhs, X0, (0.0, 1.0), checkpointing=Checkpointing(resume=state), **kw)
    # same step sequence and arithmetic after a pickle round trip: identical floats (tolerance 0)
    np.testing.assert_array_equal(resumed.y, full.y)
    assert (resumed.nfev, resumed.n_steps) == (full.nfev, full.n_steps)


def test_run_interrupted():
    err = RunInterrupted("some/folder", "pde run interrupted at t = 0.3; state saved in some/folder")
    assert isinstance(err, Exception) and not isinstance(err, KeyboardInterrupt)
    assert str(err) == "pde run interrupted at t = 0.3; state saved in some/folder"
    assert err.folder == type(err.folder)("some/folder") and hasattr(err.folder, "is_dir")   # a Path
    assert jobs.RunInterrupted is RunInterrupted   # the main job (jobs.main_job) handles this very class
    with pytest.raises(RunInterrupted, match="interrupted"):
        raise err
