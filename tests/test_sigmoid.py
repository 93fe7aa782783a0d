"""Sigmoid attention k(s) = 1 / (1 + exp(-(beta s + b))), added through the kernel registry alone:
particles (direct and spectral sums), the PDE (zonal spectral and general-head quadrature paths),
energies and the energy identity, attention entropies, and a TOML run config."""

import numpy as np
import pytest
from _helpers import assert_spectral_sums_match, clustered, smooth_density

from meanfield import field_diagnostics as fd
from meanfield.analysis.diagnostics import attention_entropy, attention_entropy_rate, dissipation
from meanfield.core.densities import vmf_mixture_density
from meanfield.core.heads import Head, random_symmetric_heads, scalar_heads
from meanfield.core.initial import uniform_sphere
from meanfield.core.zonal import required_lmax
from meanfield.models.continuum import ContinuumPDE
from meanfield.models.fastsum import SpectralSum
from meanfield.models.particles import ParticleSystem, retract_sphere

BIAS = {"bias": -0.6}


def sig_heads(lambdas, beta, normalization="mean", params=BIAS):
    return scalar_heads(lambdas, 3, beta=beta, kernel="sigmoid", normalization=normalization, kernel_params=params)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_spectral_sums_equal_direct_sums(rng, normalization):
    """Forces (normal part and self-interaction included), normalizers, velocities, energies and
    relative entropies: spectral = direct to the requested tolerance, non-uniform weights."""
    heads = sig_heads([1.0, -0.7], 4.0, normalization) + sig_heads([0.5], 7.0, params={"bias": 1.0})
    X = clustered(1500, seed=3)
    w = rng.random(1500)
    w /= w.sum()
    fast = SpectralSum(heads, kernel_tol=1e-10)
    assert fast.lmax == required_lmax(heads, 1e-10)
    direct = ParticleSystem(heads, summation="direct")
    assert_spectral_sums_match(fast, direct, X, w, tol=1e-10)   # the requested tolerance (see the helper)
    # log Z - Q / Z from sums accurate to 1e-10 of their size (|Q / Z| <= ~3 here)
    np.testing.assert_allclose(fast.entropies(X, w), attention_entropy(direct, X, w, relative=True),
                               rtol=0, atol=1e-9)


def test_auto_summation_goes_spectral_for_large_n():
    system = ParticleSystem(sig_heads([1.0], 3.0))
    assert system.uses_spectral(5000) and not system.uses_spectral(100)


@pytest.mark.parametrize("normalization", ["mean", "softmax"])
def test_pde_velocity_equals_particle_velocity_on_nodes(normalization):
    """Zonal spectral PDE velocity = particle velocity with tokens at the nodes and weights rho w;
    the quadrature path agrees, and Parseval energies equal the double quadrature sums of K."""
    heads = sig_heads([1.2, -0.6], 2.0, normalization)
    pde = ContinuumPDE(heads, lmax=24)
    assert pde.zonal
    g = pde.grid
    rho_lm = smooth_density(g)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    v_particles = ParticleSystem(heads, summation="direct").velocity(g.nodes.reshape(-1, 3), W / W.sum())
    v_pde = pde.velocity(rho_lm).reshape(-1, 3)
    # rho has degree <= 5, so the truncation of the kernel is irrelevant; the dealiased grid
    # integrates degree 3 lmax + 1 ~ 73 exactly and the sigmoid's Legendre tail there is ~3^-70:
    # round-off only
    np.testing.assert_allclose(v_pde, v_particles, rtol=0, atol=1e-12 * np.abs(v_particles).max())
    quad = ContinuumPDE(heads, lmax=24, summation="quadrature")
    np.testing.assert_allclose(quad.velocity(rho_lm).reshape(-1, 3), v_pde, rtol=0, atol=1e-12 * np.abs(v_pde).max())
    np.testing.assert_allclose(quad.energies(rho_lm), pde.energies(rho_lm), rtol=1e-12)


def test_general_heads_quadrature_path_equals_particles():
    """Non-zonal, non-symmetric sigmoid heads: the quadrature path is the particle sum on the nodes."""
    rng = np.random.default_rng(5)
    heads = tuple(Head(0.6 * rng.standard_normal((3, 3)), 0.6 * rng.standard_normal((3, 3)), 1.5, "sigmoid", nrm, BIAS)
                  for nrm in ("mean", "softmax"))
    pde = ContinuumPDE(heads, lmax=10)
    assert not pde.zonal
    g = pde.grid
    rho_lm = smooth_density(g)
    W = (g.synthesis(rho_lm) * g.weights).reshape(-1)
    v_particles = ParticleSystem(heads, summation="direct").velocity(g.nodes.reshape(-1, 3), W / W.sum())
    # the same sums in another order: round-off relative to the largest velocity
    np.testing.assert_allclose(pde.velocity(rho_lm).reshape(-1, 3), v_particles, atol=1e-12 * np.abs(v_particles).max())
    assert np.isfinite(fd.field_attention_entropy(pde, rho_lm)).all()


@pytest.mark.parametrize("d", [3, 5])
def test_particle_energy_identity(d):
    """Symmetric value-aligned mean heads: dE/dt = sum_i w_i |dx_i/dt|^2 for any kernel with K' = k;
    dE/dt by a five-point difference of the energy along the flow."""
    heads = random_symmetric_heads(d, 2, seed=11, beta=1.8, kernel="sigmoid", kernel_params=BIAS)
    system = ParticleSystem(heads, summation="direct")
    X = uniform_sphere(40, d, seed=4)
    v = system.velocity(X)
    h = 1e-3
    E = [system.energy(retract_sphere(X + k * h * v)) for k in (-2, -1, 1, 2)]
    dEdt = (E[0] - 8 * E[1] + 8 * E[2] - E[3]) / (12 * h)
    # the curve retract(X + h v) has velocity v at h = 0; stencil error h^4 E^(5) ~ 1e-12 and
    # round-off eps E / h ~ 1e-13, against a rate of order 0.1: 1e-9 relative
    assert dEdt == pytest.approx(dissipation(system, X), rel=1e-9)
    np.testing.assert_allclose(system.energy_rates(X).sum(), dissipation(system, X), rtol=1e-12)   # exact gradient


def test_pde_energy_identity_semidiscrete():
    """Mean zonal sigmoid heads, nu = 0: dE/dt = <sum_h N_h, d rho/dt> = int |X|^2 rho to round-off."""
    pde = ContinuumPDE(sig_heads([1.0, 0.4], 3.0), lmax=28)
    g = pde.grid
    rho_lm = vmf_mixture_density(g, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    dEdt = g.inner(sum(pde.fields(rho_lm)["N_lm"]), pde.tendency(rho_lm))
    # exact quadratures on the dealiased grid: round-off, relative 1e-12
    assert dEdt == pytest.approx(fd.field_dissipation(pde, rho_lm), rel=1e-12)


def test_attention_entropies():
    """Continuum: spectral = quadrature; particles: the covariance identity of log k (exact for any
    motion) against a five-point difference of the entropies."""
    heads = sig_heads([1.0, 0.5], 2.0)
    spec, quad = ContinuumPDE(heads, lmax=20), ContinuumPDE(heads, lmax=20, summation="quadrature")
    rho_lm = vmf_mixture_density(spec.grid, [[0, 0, 1.0], [1.0, 0, 0]], [3.0, 2.0], floor=0.3)
    Hs, Hq = fd.field_attention_entropy(spec, rho_lm), fd.field_attention_entropy(quad, rho_lm)
    # log of a band-limited Z on a grid exact to degree 3 lmax: spectral accuracy (~1e-12)
    np.testing.assert_allclose(Hs, Hq, rtol=1e-10)
    assert np.all(Hs < 0)
    system = ParticleSystem(random_symmetric_heads(3, 2, seed=2, beta=2.5, kernel="sigmoid", kernel_params=BIAS))
    X = uniform_sphere(30, 3, seed=8)
    V = system.velocity(X)
    h = 1e-4
    Hk = [attention_entropy(system, retract_sphere(X + k * h * V)) for k in (-2, -1, 1, 2)]
    fd_rate = (Hk[0] - 8 * Hk[1] + 8 * Hk[2] - Hk[3]) / (12 * h)
    # stencil error h^4 ~ 1e-16 times fifth derivatives ~1e3, round-off eps / h ~ 1e-12
    np.testing.assert_allclose(attention_entropy_rate(system, X), fd_rate, rtol=0, atol=1e-8 * np.abs(fd_rate).max())


def test_a_toml_run_with_sigmoid_heads(tmp_path, capsys):
    """[[heads]] kernel = "sigmoid" in a run config: the main job runs and records finite energies
    and entropies for both models."""
    from meanfield.workflow.cli import main
    from meanfield.workflow.config import RunConfig
    from meanfield.workflow.results import config_of, load

    text = """
seed = 3
[[heads]]
lam = 1.0
beta = 2.0
kernel = "sigmoid"
[[heads]]
lam = 0.5
kernel = "sigmoid"
normalization = "softmax"
[pde]
lmax = 15
[particles]
n = 120
[integrator]
t_final = 0.3
n_frames = 3
[outputs]
figures = false
animation = false
"""
    cfg = tmp_path / "sigmoid.toml"
    cfg.write_text(text)
    assert main(["run", str(cfg), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    capsys.readouterr()
    ds = load(tmp_path / "out" / "result.nc")
    assert config_of(ds) == RunConfig.from_toml(text)
    for name in ds.data_vars:
        if ("energy" in name or "entropy" in name) and ds[name].dtype.kind == "f":
            assert np.all(np.isfinite(ds[name].values)), name
