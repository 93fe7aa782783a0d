"""Small helpers shared by several test modules (plain functions: import them explicitly)."""

import numpy as np

from meanfield.core.densities import uniform_density, vmf_mixture_density
from meanfield.core.heads import scalar_heads
from meanfield.models.particles import retract_sphere

FD_STEP = 1e-5
# Central differences: truncation ~ h^2 |E'''| ~ 1e-10, round-off ~ eps |E| / h ~ 1e-11;
# 1e-7 relative leaves a wide margin while catching any O(1) or missing-factor error.
FD_RTOL = 1e-7


def fd_energy_rate(system, X, V, w=None):
    """d/ds E(X(s)) at s = 0 along X(s) = X + s V (flat) or its retraction (sphere)."""
    move = (lambda Y: retract_sphere(Y)) if system.geometry == "sphere" else (lambda Y: Y)
    Ep = system.energies(move(X + FD_STEP * V), w)
    Em = system.energies(move(X - FD_STEP * V), w)
    return (Ep - Em) / (2 * FD_STEP)


def smooth_density(grid, seed=0, amp=0.004, lmax_pert=5):
    """Uniform plus a random real perturbation of degrees 1..lmax_pert (positive for small amp)."""
    rng = np.random.default_rng(seed)
    rho_lm = uniform_density(grid).copy()
    sel = (grid.l_index >= 1) & (grid.l_index <= lmax_pert)
    rho_lm[sel] += amp * (rng.standard_normal(sel.sum()) + 1j * rng.standard_normal(sel.sum()))
    rho_lm[grid.m_index == 0] = rho_lm[grid.m_index == 0].real
    return rho_lm


def clustered(n, seed, spread=0.3):
    """Three noisy clusters on S^2: velocities O(1), unlike the O(n^-1/2) ones of uniform tokens."""
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((3, 3))
    X = mu[rng.integers(0, 3, n)] / np.linalg.norm(mu, axis=1).max() + spread * rng.standard_normal((n, 3))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def assert_spectral_sums_match(fast, direct, X, w, tol=1e-10):
    """Forces, normalizers, velocities and energies of a SpectralSum ``fast`` equal those of the direct
    ParticleSystem ``direct`` to ``tol`` (the tolerance ``fast`` was built with)."""
    U, N = direct.forces(X, w)
    Uf, Nf = fast.forces(X, w)
    # tol: the requested tolerance, relative to the aggregates' size (measured ~1e-12 at tol 1e-10)
    assert np.abs(Uf - U).max() <= tol * np.abs(U).max()
    assert np.abs(Nf - N).max() <= tol * np.abs(N).max()
    assert np.abs(fast.velocity(X, w) - direct.velocity(X, w)).max() <= tol * np.abs(U).max()
    # Parseval energies: the same truncation, errors ~1e-14 measured
    np.testing.assert_allclose(fast.energies(X, w), direct.energies(X, w), rtol=tol)


def sde_ends_on_one_path(method, rhs, X0, T, dW, levels, fine, nu):
    """End states of ``sde_step`` runs with ``dt = T / 2^L`` for each ``L`` in ``levels + [fine]``, all
    driven by the same Brownian path: ``dW`` holds its ``2^(fine + 1)`` half-step increments (leading
    axis), summed per half step of each level.  Returns ``{L: X(T)}``."""
    from meanfield.core.sde import sde_step

    ends = {}
    for L in list(levels) + [fine]:
        X, m = X0.copy(), 2 ** (fine + 1 - L)
        for k in range(2**L):
            seg = dW[k * m:(k + 1) * m]
            X = sde_step(method, rhs, k * T / 2**L, X, T / 2**L,
                         np.stack([seg[:m // 2].sum(0), seg[m // 2:].sum(0)]), nu)
        ends[L] = X
    return ends


# the heads and the two-blob start of the paired-run and main-job tests (test_paired, test_run)
PAIRED_HEADS = scalar_heads([1.0, 0.5], 3, beta=1.0)
PAIRED_MUS = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])


def paired_blobs(grid):
    """Two vMF blobs (kappa 4, weights 0.6 / 0.4) over a floor 0.2 on ``grid``: the paired tests' start."""
    return vmf_mixture_density(grid, PAIRED_MUS, 4.0, [0.6, 0.4], floor=0.2)


def paired_kw(**flat):
    """``paired_run`` keywords from the flat names of its settings (``lmax``, ``particle_dt``, ``w2_method``, ...):
    grouped into ``particles=ParticleSettings``, ``pde=PDESettings``, ``transport=TransportSettings``; other
    keywords pass through.  For tests whose cases are flat dicts of one setting each."""
    from meanfield.core.options import StepControl
    from meanfield.workflow.paired import ParticleSettings, PDESettings, TransportSettings

    groups = {"particles": ({"sampling": "sampling", "particle_sums": "sums", "spectral_tol": "spectral_tol",
                             "particle_method": "method"}, {"particle_dt": "dt", "particle_rtol": "rtol",
                                                            "particle_atol": "atol"}, ParticleSettings),
              "pde": ({"lmax": "lmax", "pde_method": "method", "monitor": "monitor"},
                      {"pde_dt": "dt", "pde_rtol": "rtol", "pde_atol": "atol"},
                      PDESettings),
              "transport": ({"transport_grid": "grid", "w2_method": "method", "metric": "metric",
                             "negative": "negative", "w2_options": "options"}, {}, TransportSettings)}
    out = dict(flat)
    for key, (names, step_names, cls) in groups.items():
        fields = {new: out.pop(old) for old, new in names.items() if old in out}
        step = {new: out.pop(old) for old, new in step_names.items() if old in out}
        if step:
            fields["step"] = StepControl(**step)
        if fields:
            out[key] = cls(**fields)
    return out


def spied_run(monkeypatch, config):
    """``meanfield.workflow.run.run(config)`` with its ``paired_run`` spied: ``(dataset, the PairedResult)``."""
    from meanfield.workflow import run as run_module

    seen = {}
    real = run_module.paired_run

    def spy(*args, **kw):
        seen["result"] = real(*args, **kw)
        return seen["result"]

    monkeypatch.setattr(run_module, "paired_run", spy)
    return run_module.run(config, progress=False), seen["result"]
