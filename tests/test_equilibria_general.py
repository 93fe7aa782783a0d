"""Stationary states with general heads on the full sphere: the dense self-consistency problem
(analysis/sphere_states.GibbsProblem) and ``meanfield equilibria`` with general heads (workflow/equilibria_general.py).

The paper's two heads (``M_1 = 2 diag(1, 1, 0)``, ``V_1 = M_1 / 2``; ``M_2 = 2 diag(0, 0, 1)``, ``V_2 = M_2 / 2``,
beta = 1): the primary branch keeps the heads' symmetries (rotations about z, z -> -z), loses stability to an
``m = 1`` pair near nu = 0.45 and has a simple (z -> -z breaking) branch point at nu = 0.41612; the branch
leaving it is subcritical (a fold at nu = 0.46754), its states a cluster on the z axis."""

import numpy as np
import pytest

from meanfield import ContinuumPDE
from meanfield.analysis import equilibria as eq
from meanfield.analysis import sphere_states as ss
from meanfield.core import cost
from meanfield.core.heads import Head
from meanfield.workflow.cli import main
from meanfield.workflow.equilibria_config import EquilibriaConfig
from meanfield.workflow.schema import ConfigError

P1, P2 = np.diag([1.0, 1.0, 0.0]), np.diag([0.0, 0.0, 1.0])
PAPER = (Head(2 * P1, P1, beta=1.0), Head(2 * P2, P2, beta=1.0))
HEADS = [{"M": (2 * P1).tolist(), "V": P1.tolist()}, {"M": (2 * P2).tolist(), "V": P2.tolist()}]


@pytest.fixture(scope="module")
def prob():
    return ss.GibbsProblem(ContinuumPDE(PAPER, lmax=16))


def test_residual_is_the_gibbs_map_of_solve_sphere_state(prob):
    """``F(u) = u - G(u)`` is the equation ``solve_sphere_state`` solves: at ``prob.solve``'s root the Gibbs map
    returns the state to round-off (1e-13: both sides are one synthesis and one analysis of O(1) numbers)."""
    u, res, _ = prob.solve(np.zeros(prob.size), 0.8)
    assert res <= 1e-12
    rho = prob.coefficients(u)
    assert np.abs(ss.gibbs_map(eq.at_noise(prob.pde, 0.8), rho) - rho).max() < 1e-13
    np.testing.assert_allclose(prob.coordinates(rho), u, atol=1e-15)


def test_jacobian_against_central_differences(prob):
    """F_u and F_nu against central differences at h = 1e-5: their error is O(h^2) times third derivatives of
    size O(1), about 1e-10; 1e-8 of the products' size leaves a hundredfold margin and catches any wrong term
    (a dropped normalization or 1/nu is an O(1) relative error)."""
    rng = np.random.default_rng(3)
    u = prob.solve(np.zeros(prob.size), 0.6)[0] + 1e-2 * rng.standard_normal(prob.size) / prob.size
    Fu, Fp = prob.jacobian(u, 0.6)
    h = 1e-5
    v = rng.standard_normal(prob.size)
    fd = (prob.F(u + h * v, 0.6) - prob.F(u - h * v, 0.6)) / (2 * h)
    assert np.abs(fd - Fu @ v).max() <= 1e-8 * np.abs(Fu @ v).max()
    fd = (prob.F(u, 0.6 + h) - prob.F(u, 0.6 - h)) / (2 * h)
    assert np.abs(fd - Fp).max() <= 1e-8 * np.abs(Fp).max()


def test_stability_from_the_pde_spectrum_agrees_with_the_free_energy_hessian(prob):
    """For a gradient flow the PDE linearized at a stationary state is unstable exactly when the free energy's
    Hessian is not negative definite, i.e. when ``F_u = I - DG`` has an eigenvalue < 0 (DG = rho K / nu is
    self-adjoint in the rho-weighted product): two independent computations (ARPACK on the PDE's tendency; the
    dense Jacobian) must agree on both sides of the loss of stability (nu = 0.8 stable, 0.3 unstable, margins
    of 0.2 and more in both)."""
    for nu, stable in ((0.8, True), (0.3, False)):
        u = prob.solve(np.zeros(prob.size), nu)[0]
        vals, rot = ss.sphere_spectrum(eq.at_noise(prob.pde, nu), prob.coefficients(u), k=4)
        low = np.linalg.eigvals(prob.jacobian(u, nu)[0]).real.min()
        assert (vals.real.max() < 0) == stable == (low > 0), (nu, vals, low)
        assert abs(vals.real.max()) > 0.05 and abs(low) > 0.05


def test_refusals_name_the_cause():
    with pytest.raises(ValueError, match="softmax or Sinkhorn"):
        ss.GibbsProblem(ContinuumPDE((Head(np.eye(3), np.eye(3), beta=1.0, normalization="softmax"),), lmax=12))
    with pytest.raises(ValueError, match="not a gradient"):
        ss.GibbsProblem(ContinuumPDE((Head(2 * P1, P2, beta=1.0),), lmax=8))
    with pytest.raises(ValueError, match=r"GibbsProblem\(lmax=200\) would need about .* use a smaller lmax"):
        ss.GibbsProblem(ContinuumPDE((Head(2 * P1, P1, beta=1.0),), lmax=200))
    assert ss.gibbs_problem_cost(200, 201 * 402).bytes > cost.MEMORY_LIMIT_BYTES
    prob = ss.GibbsProblem(ContinuumPDE(PAPER, lmax=16))
    with pytest.raises(ValueError, match=r"u must be a finite real array of shape \(288,\)"):
        prob.coefficients(np.zeros(3))
    with pytest.raises(ValueError, match="mass 1"):
        prob.coordinates(2 * prob.coefficients(np.zeros(prob.size)))


def _config(**cont):
    return {"heads": HEADS, "geometry": {"d": "sphere", "lmax": 20},
            "continuation": {"nu_range": [0.39, 0.5], "step": 0.08, "n_eigenvalues": 2, **cont},
            "outputs": {"figures": False}}


def test_general_config_round_trips_and_its_refusals_name_the_key():
    cfg = EquilibriaConfig.from_dict(_config(sides=[1, -1]))
    assert cfg.general and EquilibriaConfig.from_toml(cfg.to_toml()) == cfg
    assert "degrees" not in cfg.to_dict()["continuation"]
    for change, key in (({"geometry": {"d": 3}}, "geometry.d"),
                        ({"continuation": {"degrees": [1]}}, "continuation.degrees"),
                        ({"continuation": {"parameter": "beta", "beta_range": [1.0, 2.0], "nu": 0.5}},
                         "continuation.parameter")):
        d = _config()
        for k, v in change.items():
            d[k] = {**d.get(k, {}), **v}
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            EquilibriaConfig.from_dict(d)


def test_job_refuses_non_gradient_and_zonal_like_heads_before_writing(tmp_path, capsys):
    from meanfield.workflow import equilibria_job as job

    bad = {**_config(), "heads": [{"M": (2 * P1).tolist(), "V": P2.tolist()}]}
    with pytest.raises(ValueError, match="heads: .*not a gradient"):
        job.equilibria_job(EquilibriaConfig.from_dict(bad), tmp_path / "a", progress=False)
    iso = {**_config(), "heads": [{"M": np.eye(3).tolist(), "V": np.eye(3).tolist()}]}
    with pytest.raises(ValueError, match="give them as zonal heads"):
        job.equilibria_job(EquilibriaConfig.from_dict(iso), tmp_path / "b", progress=False)
    assert not (tmp_path / "a" / "equilibria.nc").exists() and not (tmp_path / "b" / "equilibria.nc").exists()
    big = _config()
    big["geometry"]["lmax"] = 200
    f = tmp_path / "big.toml"
    f.write_text(EquilibriaConfig.from_dict(big).to_toml())
    assert main(["equilibria", str(f), "--out", str(tmp_path / "c"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "geometry.lmax" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One job (lmax 20, one side, nu in [0.39, 0.5]: the primary, its branch point and one switched branch
    through its fold; about 20 s)."""
    from meanfield.workflow import equilibria_job as job

    out = tmp_path_factory.mktemp("eqg") / "job"
    cfg = EquilibriaConfig.from_dict({**_config(sides=[1]), "outputs": {"figures": True}})
    return cfg, out, job.equilibria_job(cfg, out, progress=False)


class TestJob:
    """What the job's dataset must hold."""

    def test_branches_and_special_points(self, run):
        cfg, out, res = run
        ds = res["dataset"]
        assert (out / "equilibria.nc").is_file() and (out / "bifurcation.png").is_file() and not res["failures"]
        assert list(ds.branch_kind.values) == ["primary", "switched"]
        assert ds.attrs["heads"] == "general" and "primary" in res["summary"]
        kinds = list(ds.special_kind.values)
        bp = ds.special_parameter.values[kinds.index("branch_point")]
        folds = ds.special_parameter.values[[k == "fold" for k in kinds]]
        # located to tol_s = 1e-10 in arclength; 1e-8 between the lmax 20 run and the lmax 24 one (0.4161180294)
        assert abs(bp - 0.4161180294) < 1e-8 and np.all(ds.special_located.values == 1)
        np.testing.assert_allclose(folds, 0.4675373192, atol=1e-8)

    def test_the_pde_has_a_zero_eigenvalue_at_the_branch_point_and_the_fold(self, run):
        """Located on the dense Jacobian's determinant and tangent; the PDE's own spectrum (ARPACK on its
        tendency) must have an eigenvalue within 1e-6 of 0 there (the location's error 1e-10 times the
        eigenvalue's slope O(1), plus ARPACK's 1e-12), which no point of the march has (the nearest is 1e-3 away)."""
        cfg, _, res = run
        ds = res["dataset"]
        prob = ss.GibbsProblem(ContinuumPDE(PAPER, lmax=20))
        for s in ds.special.values:
            u = ds.special_coefficients.values[s, 1:]
            vals, rot = ss.sphere_spectrum(eq.at_noise(prob.pde, float(ds.special_parameter[s])), prob.coefficients(u), k=6)
            assert np.abs(vals[rot < 0.5]).min() < 1e-6, (str(ds.special_kind.values[s]), vals)

    def test_the_mirror_image_is_stationary_and_the_branch_clusters_on_the_axis_head(self, run):
        """The heads are symmetric under z -> -z (``Y_lm -> (-1)^(l+m) Y_lm``): the fold's mirror image is a
        stationary state too (residual below 1e-10, as the fold's own), the other side's fold; the branch's first
        moment points along +z; below the fold the stable state is one cluster on head 2's axis (second moment's
        largest eigenvalue > 0.75 below nu = 0.41: 0.78 to 0.80 measured; 1/3 for an isotropic state, at most 1/2
        for one spread over a plane)."""
        from meanfield.core.sphere import lm_indices

        _, _, res = run
        ds = res["dataset"]
        prob = ss.GibbsProblem(ContinuumPDE(PAPER, lmax=20))
        l, m = lm_indices(20)
        parity = (-1.0) ** np.concatenate([l + m, (l + m)[m > 0]])
        s = int(np.flatnonzero(ds.special_kind.values == "fold")[0])
        u, nu = ds.special_coefficients.values[s], float(ds.special_parameter[s])
        assert np.abs(prob.F(u[1:], nu)).max() < 1e-10 and np.abs(prob.F((parity * u)[1:], nu)).max() < 1e-10
        assert np.abs((parity * u) - u).max() > 0.1                 # a different state: the other pole
        n = int(ds.branch_n_points[1])
        assert np.all(ds.first_moment.values[1, 1:n, 2] > 0)
        low = np.flatnonzero((ds.parameter.values[1, :n] < 0.41) & (ds.stable.values[1, :n] == 1))
        assert low.size and np.all(ds.second_moment.values[1, low, 2] > 0.75)
        assert np.all(np.abs(ds.first_moment.values[0, :int(ds.branch_n_points[0]), :]) < 1e-9)   # symmetric

    def test_free_energy_obeys_the_envelope_identity(self, run):
        """At a critical point of G, dG/dnu = -int rho log rho (the entropy column): central differences of G
        over states solved at nu +- 1e-4 agree to 1e-6 (the difference's O(h^2) error, ~1e-8, and Newton's
        1e-12 over h)."""
        from meanfield.workflow.equilibria_general import _state

        _, _, res = run
        ds = res["dataset"]
        prob = ss.GibbsProblem(ContinuumPDE(PAPER, lmax=20))
        for b, i in ((0, 1), (1, 5)):
            nu, u = float(ds.parameter[b, i]), ds.coefficients.values[b, i, 1:]
            h = 1e-4
            G = [_state(prob, prob.solve(u, nu + s, tol=1e-13)[0], nu + s)[2] for s in (h, -h)]
            assert abs((G[0] - G[1]) / (2 * h) - float(ds.entropy[b, i])) < 1e-6

    def test_resume_gives_identical_arrays(self, run, tmp_path, monkeypatch):
        from meanfield.workflow import equilibria_general as eg
        from meanfield.workflow import equilibria_job as job

        cfg, _, res = run
        out = tmp_path / "resumed"

        def interrupted(*a, **k):
            raise KeyboardInterrupt
        with monkeypatch.context() as m:
            m.setattr(eg.ct, "switch_branch", interrupted)          # Ctrl-C after the primary branch was saved
            with pytest.raises(KeyboardInterrupt):
                job.equilibria_job(cfg, out, progress=False)
        assert (out / job.PARTIAL / "primary.npz").is_file() and not (out / "equilibria.nc").exists()
        with monkeypatch.context() as m:
            m.setattr(ss.GibbsProblem, "solve", lambda *a, **k: pytest.fail("the primary branch was computed again"))
            again = job.equilibria_job(cfg, out, progress=False)["dataset"]
        for name in res["dataset"].data_vars:
            np.testing.assert_array_equal(again[name].values, res["dataset"][name].values, err_msg=name)


def test_zonal_heads_give_the_same_equation_and_a_nonsymmetric_m_no_free_energy():
    """GibbsProblem with zonal mean heads: F is the Gibbs map's residual (its diagonal potential acts alike on the
    cos and sin coordinates; a review found the sin ones zeroed).  A non-symmetric M (V = M / 2) is still a
    gradient head (X = c grad N), so its Gibbs states are stationary, but P is not symmetric and there is no free
    energy: ``symmetric`` says so (the job writes G as NaN)."""
    import meanfield as mf
    from meanfield.core.sphere import to_real_basis

    zonal = ss.GibbsProblem(ContinuumPDE(mf.scalar_heads([1.0], 3, 2.0), lmax=16))
    rng = np.random.default_rng(5)
    u = 1e-2 * rng.standard_normal(zonal.size)
    rho = zonal.coefficients(u)
    want = u - to_real_basis(ss.gibbs_map(eq.at_noise(zonal.pde, 0.5), rho), 16)[1:]
    assert np.abs(zonal.F(u, 0.5) - want).max() < 1e-13 and zonal.symmetric
    M = np.array([[2.0, 1.5, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.5]])
    skew = ss.GibbsProblem(ContinuumPDE((Head(M, M / 2, beta=1.0),), lmax=16))
    assert not skew.symmetric and ss.GibbsProblem(ContinuumPDE(PAPER, lmax=16)).symmetric


def test_a_failed_start_is_a_status_and_the_job_refuses_by_name(tmp_path, monkeypatch):
    """GibbsProblem.solve returns its residual (a Newton cut short is not converged: the caller sees it), and a job
    whose first state does not converge stops before anything is continued, naming continuation.nu_range."""
    from meanfield.workflow import equilibria_job as job

    prob = ss.GibbsProblem(ContinuumPDE(PAPER, lmax=16))
    u, res, it = prob.solve(np.zeros(prob.size), 0.3, maxiter=1)
    assert it == 1 and res > 1e-8                   # one Newton step from uniform at nu = 0.3 is far from the state
    monkeypatch.setattr(ss.GibbsProblem, "solve", lambda self, u0, nu, **k: (u0, 1.0, 50))
    with pytest.raises(ValueError, match=r"continuation.nu_range: Newton from the uniform density .* did not converge "
                                         r"\(residual 1 after 50 steps\)"):
        job.equilibria_job(EquilibriaConfig.from_dict(_config()), tmp_path / "j", progress=False)
