"""Quick mode of the critical_noise study: particle growth rates under noise vs sigma_1(nu) and nu_c."""

import numpy as np

from _study_helpers import quick_study_fixture

quick = quick_study_fixture("critical_noise")   # (out, summary, data.json)


def test_rate_sign_changes_at_nu_c_from_particles(quick):
    _, summary, data = quick
    rows = data["rows"]
    # the sign of the particle rate is the closed form's on both sides of nu_c (ratios 0.9 and 1.1 included:
    # |sigma_1| = 0.074 there, above the seed-averaged rate scatter ~0.02 measured at n = 600, 4 seeds)
    assert all(np.sign(r["particle_rate"]) == np.sign(r["sigma"]) for r in rows), rows
    # nu_c from the particles within 10% of the closed form (measured 6% low at n = 600, 4 fixed seeds: the
    # runs are deterministic, so this is a fixed number, not a random one)
    assert abs(summary["nu_c_particles"] / summary["nu_c"] - 1) < 0.1, summary
    # rates within 0.1 of sigma_1: measured 0.064, an offset of about -0.04 at every nu from the nonlinear
    # response of the tilted start (m_z = 0.2) and finite n (it fell to 0.01-0.03 at n = 1500, 6 seeds)
    assert summary["max_abs_rate_error_particles"] < 0.1, summary


def test_pde_rates_match_the_closed_form(quick):
    _, summary, _ = quick
    # linear regime (eps = 1e-6) with error control at rtol 1e-10: the PDE rate equals sigma_1 to ~1e-8
    assert summary["max_abs_rate_error_pde"] < 1e-5, summary
