"""Quick mode of the phase_transitions study: the dichotomy, particle hysteresis, softmax / two heads / degree 2."""

import re

import numpy as np
from _study_helpers import quick_study_fixture

from studies._common import VERDICTS, load_json
from studies.phase_transitions.report import checks

quick = quick_study_fixture("phase_transitions", with_report=True)   # (out, summary, report.md)


def _data(out):
    return load_json(out / "data.json"), dict(np.load(out / "data.npz"))


def test_outputs_written_and_verdicts_use_the_vocabulary(quick):
    out, _, path = quick
    for name in ("data.json", "data.npz", "report.md", "hysteresis.png", "windows.png", "escape.png", "beyond.png"):
        assert (out / name).is_file(), name
    text = path.read_text()
    section = text.split("## Verdicts against the paper's hypotheses")[1].split("## Claims and verdicts")[0]
    found = re.findall(r"\| \*\*([^*]+)\*\* \|", section)
    assert len(found) >= 8 and all(v in VERDICTS for v in found), found
    assert "**Sinkhorn**" in text and "sigma_1(nu_#) / sigma_1(0)" in text


def test_beta_star_from_the_branch_matches_the_bessel_root_and_the_type_flips(quick):
    out, summary, _ = quick
    data, _ = _data(out)
    # the target: 1e-6 relative; measured at most 3.6e-8 (d = 64; 3e-9 .. 5e-11 for d <= 8)
    assert summary["beta_star_max_rel_error"] < 1e-6, data["dichotomy"]["rows"]
    assert [r["d"] for r in data["dichotomy"]["rows"]] == [2, 3, 4, 8, 64]
    assert summary["type_flips_at_beta_star"] and summary["ordering_holds"]
    # d = 3, beta = 2 beta_*: the values the integrator measured (6 significant digits are the CLI's promise)
    assert abs(summary["nu_sharp"] - 1.039405085) < 1e-6 and abs(summary["nu_fold"] - 1.250227628) < 1e-6
    assert abs(summary["nu_global"] - 1.207149704) < 1e-6


def test_particle_loop_encloses_the_pde_window(quick):
    out, summary, _ = quick
    data, arrays = _data(out)
    c = checks(data, arrays)
    # fixed seeds (runs reproducible bit for bit): down-ramp order parameters stay <= 0.25 inside the window
    # (measured; half the upper branch is >= 0.35 there) and the up ramp stays >= 0.69 below nu_global (>= 0.43
    # needed): the loop test is not near its threshold
    assert c["uniform_kept_in_window"] and c["cluster_kept_in_window"], c
    # the fast quick ramp (dnu/dt = 0.02) lags both bifurcations: jumps measured at 0.927 (< nu_# = 1.039) and
    # 1.347 (> nu_fold = 1.250), each +-0.03 over 3 seeds
    assert c["loop_encloses_window"], c
    assert summary["jump_down"][0] < summary["nu_sharp"] and summary["jump_up"][0] > summary["nu_fold"], summary
    # the clustered branch at dt = 0.025 sits below the PDE by the step bias: measured 0.032 at most (0.020 at
    # nu = 1.15 in the step check); 0.06 allows for the 3-seed scatter
    assert c["max_branch_deviation"] < 0.06, c
    # escape: every run leaves uniform at nu_# - 0.1 within t = 8 (n = 500 and 1000); at nu_# + 0.03 none of 3
    # (n = 500) and 1 of 3 (n = 1000): fixed seeds, so these counts are fixed numbers
    assert summary["escaped"] == {"n=500,-0.1": 3, "n=500,+0.03": 0, "n=1000,-0.1": 3, "n=1000,+0.03": 1}, \
        summary["escaped"]
    # the fold without a ramp: held at nu_fold - 0.02 the cluster stays (half the branch 0.399), at nu_fold + 0.02
    # it dissolves (half the branch 0.354); the seeds are the fresh ones of HOLD_SEED_BASE since the referee
    assert c["fold_hold"], data["fold_hold"]["rows"]


def test_both_states_are_locally_stable_in_the_window_of_the_continuum(quick):
    """The hysteresis claim in the paper's setting: sigma_1 of uniform (closed form, -2 (nu - nu_#) in size) and
    the leading axisymmetric eigenvalue of every upper-branch state are negative for nu_# < nu < nu_fold (22 states
    at lmax 64; largest -0.013 and -0.073 measured: away from 0 against the eigensolver's 1e-10).  The particle
    hysteresis is reported outside the hypotheses (finite n, finite ramp)."""
    out, _, path = quick
    data, _ = _data(out)
    ws = data["window_spectra"]
    assert len(ws["nu"]) >= 10 and ws["both_stable"]
    assert max(ws["uniform_sigma_1"]) < -1e-3 and max(ws["cluster_leading_eigenvalue"]) < -1e-2
    text = path.read_text()
    assert re.search(r"both locally stable for nu_# < nu < nu_fold \(the continuum\) \| .*\| \*\*reproduced\*\*",
                     text)
    assert re.search(r"hysteresis seen on noisy particles.*\| \*\*outside the hypotheses\*\*", text)


def test_beyond_the_papers(quick):
    out, _, _ = quick
    data, _ = _data(out)
    b = data["beyond"]
    # softmax: continuous (nu_2 < 0) at beta = 2 and 6, measured nu_2 = -0.052, -0.0126 (far from 0 against the
    # Richardson error ~1e-10 of branch_curvature)
    assert b["softmax"]["all_continuous"] and b["softmax"]["max_nu_2"] < -1e-3, b["softmax"]
    # two heads [1, -0.3]: the type flips at its own beta_* (measured 1.17507, below one head's 1.81615)
    th = b["two_heads"]
    assert th["type_flips"] and th["ordering_holds"] and 1.0 < th["beta_star_continuation"] < 1.5, th
    # degree 2: unstable, and the full S^2 spectrum contains the axisymmetric block's leading eigenvalue
    # (two independent linearizations: dense central differences vs ARPACK on the S^2 tendency; measured equal to
    # 1e-8) plus exactly two neutral rotation modes (an axisymmetric state's orbit is 2-dimensional)
    for st in b["degree_two"]["states"]:
        assert st["ok"] and st["axisym_top"][0] > 0.1, st
        sp = st["sphere"]
        assert sp["ok"], sp
        ev, rot = np.array(sp["eigenvalues_re"]), np.array(sp["rotation"])
        assert abs(ev[0] - st["axisym_top"][0]) < 1e-6 * max(1.0, abs(ev[0])), (ev, st["axisym_top"])
        assert int(np.sum((rot > 0.99) & (np.abs(ev) < 1e-6))) == 2 == sp["removed"], (ev, rot)
    # Sinkhorn: nu_# from the solver is the zero of the closed-form Sinkhorn sigma_1 (two derivations, 1e-12)
    sk = b["sinkhorn"]
    assert sk["nu_sharp_is_the_zero_of_sigma_1"] and all(r["ok"] for r in sk["rows"]), sk


def test_cached_ramps_of_other_settings_are_refused_not_mixed(tmp_path):
    # scale.py caches one JSON per ramp; a record written with another dt must raise, never enter the table
    import json

    import pytest

    from studies.phase_transitions import run as study
    from studies.phase_transitions import scale
    s, beta = study.QUICK, 2.0
    folder = tmp_path / "hysteresis_scale"
    folder.mkdir()
    key = scale.ramp_key(s, beta)
    (folder / "n10_x1_seed0.json").write_text(json.dumps({"jump_down": 1.0, "jump_up": 1.2, "seconds": 0.0,
                                                          "key": dict(key, dt=key["dt"] / 2)}))
    with pytest.raises(ValueError, match="computed with settings"):
        scale.hysteresis_scale(tmp_path, s, (10,), (1,), 1, beta, r_up=None, progress=None)
    # the committed FULL ramps carry the key of the FULL settings at the study's beta (their data.json)
    committed = scale.Path(scale.__file__).parent / "output" / "hysteresis_scale"
    beta_full = 2 * study.pt.beta_star_bessel(study.D_PARTICLES)
    assert all(json.loads(p.read_text())["key"] == scale.ramp_key(study.FULL, beta_full)
               for p in committed.glob("*.json"))


def test_the_tetrahedral_fold_is_located_not_sampled():
    """An independent solver puts the tetrahedral branch's fold at nu = 0.2529891 (two grids agree to 1e-8); the
    study reported the largest of 50 samples (0.2529881).  Located by Brent on the amplitude-held solves at
    lmax 23 and 31: equal to 1e-12 (both grids resolve it), within 1e-7 of the independent value (its quoted
    digits), and above every sample."""
    import dataclasses

    from studies.phase_transitions import run as study

    beta = 2 * study.pt.beta_star_bessel(study.D_PARTICLES)
    got = [study.degree_three(dataclasses.replace(study.QUICK, sphere_lmax=L), beta) for L in (23, 31)]
    assert all(d["fold_located"] for d in got)
    assert abs(got[0]["nu_fold_3"] - got[1]["nu_fold_3"]) < 1e-12
    assert abs(got[1]["nu_fold_3"] - 0.2529891) < 1e-7
    assert got[1]["nu_fold_3"] >= max(got[1]["nu"])
