"""Progress bars are labelled by what runs ("PDE", "particles"), not by the scheme (issue 14, item 4)."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.core.densities import uniform_density
from meanfield.core.integrate import integrate
from meanfield.core.options import SaveAt, StepControl


def _bar_labels(err):
    return {line.split(":")[0].strip() for line in err.replace("\r", "\n").splitlines() if "%|" in line}


def test_solve_particles_and_continuum_bars_say_what_runs(capsys):
    system = mf.ParticleSystem(mf.scalar_heads([1.0], 3, beta=1.0))
    mf.solve_particles(system, mf.initial.uniform_sphere(6, 3, seed=0), 0.1, save=SaveAt(observe=False),
                       progress=True)
    assert _bar_labels(capsys.readouterr().err) == {"particles"}
    # kernel_tol 1e-6: lmax 8 resolves exp(<x, y>) to 1e-9, no KernelResolutionWarning
    pde = mf.ContinuumPDE(mf.scalar_heads([1.0], 3, beta=1.0, normalization="mean"), lmax=8, kernel_tol=1e-6)
    mf.solve_continuum(pde, uniform_density(pde.grid), 0.1, save=SaveAt(observe=False), progress=True)
    assert _bar_labels(capsys.readouterr().err) == {"PDE"}
    # a string is the bar's label (shown), the 0.2 progress_label
    mf.solve_continuum(pde, uniform_density(pde.grid), 0.1, save=SaveAt(observe=False), progress="decay")
    assert _bar_labels(capsys.readouterr().err) == {"decay"}
    with pytest.raises(ValueError, match="progress must be None, True, False or a non-empty label; received ''"):
        mf.solve_continuum(pde, uniform_density(pde.grid), 0.1, progress="")


def test_integrate_label_default_is_the_scheme_and_can_be_given(capsys):
    integrate(lambda t, y: -y, np.ones(2), (0.0, 0.1), method="rk4", step=StepControl(dt=0.05), progress=True)
    assert _bar_labels(capsys.readouterr().err) == {"rk4"}
    integrate(lambda t, y: -y, np.ones(2), (0.0, 0.1), method="rk4", step=StepControl(dt=0.05), progress=True,
              progress_label="decay")
    assert _bar_labels(capsys.readouterr().err) == {"decay"}


@pytest.mark.parametrize("bad", ["", "  ", 3, ["PDE"]])
def test_integrate_refuses_a_bad_label(bad):
    with pytest.raises(ValueError, match="progress_label must be a non-empty string or None; received"):
        integrate(lambda t, y: -y, np.ones(2), (0.0, 0.1), method="rk4", step=StepControl(dt=0.05),
                  progress_label=bad)
