"""Checkpoint and resume of the main job: an interrupted run, resumed, equals an uninterrupted one."""

import numpy as np
import pytest

from meanfield.models.continuum import ContinuumPDE
from meanfield.models.particles import ParticleSystem
from meanfield.workflow.checkpoint import RunInterrupted
from meanfield.workflow.cli import main
from meanfield.workflow.config import RunConfig
from meanfield.workflow.jobs import main_job, resume_job

CONFIG = RunConfig.from_dict({"seed": 2, "pde": {"lmax": 15}, "particles": {"n": 60},
                              "integrator": {"t_final": 0.4, "n_frames": 5},
                              "outputs": {"figures": False, "animation": False, "checkpoint_every": 0.05}})


def interrupt_after(monkeypatch, cls, calls):
    """Make cls.rhs raise KeyboardInterrupt once, at its ``calls``-th evaluation (as Ctrl-C would)."""
    real, count = cls.rhs, {"n": 0}

    def rhs(self, t, y):
        count["n"] += 1
        if count["n"] == calls:
            raise KeyboardInterrupt
        return real(self, t, y)

    monkeypatch.setattr(cls, "rhs", rhs)


@pytest.mark.parametrize("cls, calls", [(ContinuumPDE, 25), (ParticleSystem, 25)])
def test_interrupted_run_resumes_bit_for_bit(tmp_path, monkeypatch, cls, calls):
    reference = main_job(CONFIG, tmp_path / "ref", progress=False)["dataset"]
    with monkeypatch.context() as m:
        interrupt_after(m, cls, calls)
        with pytest.raises(RunInterrupted, match="interrupted at t ="):
            main_job(CONFIG, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "result.nc").exists()          # nothing posing as a finished result
    assert (tmp_path / "run" / "checkpoint" / "config.toml").is_file()
    resumed = resume_job(tmp_path / "run", progress=False)["dataset"]
    # same step sequence and arithmetic as the uninterrupted run: identical floats (tolerance 0)
    for name in ("X", "rho_lm_real", "rho_lm_imag", "w2", "pde_energy", "particle_energy", "particle_entropy"):
        np.testing.assert_array_equal(resumed[name].values, reference[name].values)
    assert not (tmp_path / "run" / "checkpoint").exists()          # cleared once the result is written


def test_cli_interrupt_and_resume(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.to_toml())
    with monkeypatch.context() as m:
        interrupt_after(m, ParticleSystem, 30)
        assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 130
    assert "meanfield run --resume" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]) == 2   # refuses to overwrite
    assert "unfinished run" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path / "o"), "--no-progress"]) == 0
    assert (tmp_path / "o" / "result.nc").is_file()
    assert main(["run", "--resume", str(tmp_path / "o")]) == 2                         # nothing left to resume
    assert "no checkpoint" in capsys.readouterr().err


def test_failed_run_does_not_block_its_folder_and_corrupt_checkpoint_is_clear(tmp_path, monkeypatch, capsys):
    import meanfield.workflow.run as run_module

    def boom(*a, **k):
        raise RuntimeError("boom")

    with monkeypatch.context() as m:
        m.setattr(run_module, "initial_density", boom)
        with pytest.raises(RuntimeError, match="boom"):
            main_job(CONFIG, tmp_path / "f", progress=False)
    assert not (tmp_path / "f" / "checkpoint").exists()           # nothing to resume: folder freed
    main_job(CONFIG, tmp_path / "f", progress=False)               # a corrected run can use it
    # a truncated checkpoint file: a clear error naming it, exit 2 from the CLI, no traceback
    with monkeypatch.context() as m:
        interrupt_after(m, ParticleSystem, 25)
        with pytest.raises(RunInterrupted):
            main_job(CONFIG, tmp_path / "c", progress=False)
    (tmp_path / "c" / "checkpoint" / "pde.done.pkl").write_bytes(b"")
    assert main(["run", "--resume", str(tmp_path / "c")]) == 2
    assert "unreadable" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path / "c"), "--out", "x"]) == 2
    assert "takes no CONFIG and no --out" in capsys.readouterr().err
