"""Hysteresis of the noisy particles at larger n and several ramp rates (issue 23, item 5).

The ramps of :func:`studies.phase_transitions.run.hysteresis` (d = 3, one zonal exp head at
``beta = 2 beta_*``, spectral sums) are repeated for every ``n`` of ``ns`` and every factor of
``stage_factors`` (the time spent at each ``nu`` of the ramp multiplied by it: factor 2 is a ramp
twice as slow).  Each (n, factor, seed) ramp is one task whose result is kept in
``out_dir/hysteresis_scale/`` as JSON, so an interrupted run continues where it stopped (the ramp
of a seed is deterministic: the same numbers when redone).

    python -m studies.phase_transitions.scale    # FULL: n = 10^4, factors 1, 0.5, 2, 10 seeds, into data.json

``run.run`` calls :func:`hysteresis_scale` with the mode's settings; :func:`main` adds the FULL sections to an
existing full run's ``data.json`` (the rest of that run is not redone).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import meanfield as mf

from . import run as study


def _segments(segments, factor):
    return tuple((a, b, step, T * factor) for a, b, step, T in segments)


def ramp_task(s, beta, half, n, factor, seed):
    """One down-and-up ramp: (jump_down, jump_up, seconds)."""
    t0 = time.perf_counter()
    heads = mf.scalar_heads([1.0], study.D_PARTICLES, beta=beta)
    sf = replace(s, n=n, down=_segments(s.down, factor), up=_segments(s.up, factor))
    down, up = study.schedule(sf.down), study.schedule(sf.up)
    X = mf.initial.uniform_sphere(n, study.D_PARTICLES, seed=500 + seed)
    nd, rd, X = study.run_ramp(heads, down, X, seed, sf, 0)
    nu_up, ru, X = study.run_ramp(heads, up, X, seed, sf, 500)
    return (study.jump(nd, rd, half, True), study.jump(nu_up, ru, half, False), time.perf_counter() - t0,
            rd.tolist(), ru.tolist())


def ramp_key(s, beta) -> dict:
    """What a cached ramp depends on besides (n, factor, seed), stored with it: a cache written with other
    settings is refused, never mixed in."""
    return json.loads(json.dumps({"beta": float(beta), "dt": s.dt, "down": s.down, "up": s.up,
                                  "samples": s.samples}))


def hysteresis_scale(out_dir, s, ns, stage_factors, seeds, beta, r_up, progress=print) -> dict:
    """Jumps of every (n, factor) over ``seeds`` ramps (cached per ramp in ``out_dir/hysteresis_scale``).

    Raises
    ------
    ValueError
        If a cached ramp was written with other settings (:func:`ramp_key`): remove the folder to recompute.
    """
    folder = Path(out_dir) / "hysteresis_scale"
    key = ramp_key(s, beta)
    folder.mkdir(parents=True, exist_ok=True)
    half = lambda nu: 0.5 * r_up(nu)      # noqa: E731  (the criterion of the main hysteresis test)
    rows = []
    for n in ns:
        for factor in stage_factors:
            down, up = [], []
            secs = 0.0
            for seed in range(seeds):
                path = folder / f"n{n}_x{factor:g}_seed{seed}.json"
                if path.exists():
                    rec = json.loads(path.read_text())
                    if rec.get("key") != key:
                        raise ValueError(f"{path} was computed with settings {rec.get('key')}, not the requested "
                                         f"{key}: remove {folder} to recompute the ramps")
                else:
                    jd, ju, sec, rd, ru = ramp_task(s, beta, half, n, factor, seed)
                    rec = {"jump_down": jd, "jump_up": ju, "seconds": sec, "r_down": rd, "r_up": ru, "key": key}
                    tmp = path.with_suffix(".tmp")
                    tmp.write_text(json.dumps(rec))
                    tmp.replace(path)
                    if progress:
                        progress(f"n = {n}, stage x{factor:g}, seed {seed}: down {jd:.4f}, up {ju:.4f} ({sec:.0f} s)")
                down.append(rec["jump_down"])
                up.append(rec["jump_up"])
                secs += rec["seconds"]
            slow = s.down[-1]
            rows.append({"n": n, "stage_factor": factor, "seeds": seeds,
                         "ramp_rate": float(slow[2] / (slow[3] * factor)),
                         "jump_down": down, "jump_up": up, "seconds": secs})
    return {"rows": rows}


def main():
    """The FULL settings' (n, factor) ramps, added to the full run's ``output/data.json`` (with the degree-3 branch
    of ``run.degree_three``): the sections this module and that function add, without redoing the rest."""
    from studies._common import load_json, save_json

    s = study.FULL
    beta = 2 * study.pt.beta_star_bessel(study.D_PARTICLES)
    nu_b, r_b, _ = study.pde_branch(beta)
    out = Path(__file__).parent / "output"
    hs = hysteresis_scale(out, s, s.scale_ns, s.scale_factors, s.scale_seeds, beta, study.upper_branch(nu_b, r_b))
    data = load_json(out / "data.json")
    data["hysteresis_scale"] = hs
    data["beyond"]["degree_three"] = study.degree_three(s, beta)
    data["settings"].update(scale_ns=list(s.scale_ns), scale_factors=list(s.scale_factors), scale_seeds=s.scale_seeds)
    data["summary"]["wall_seconds"]["hysteresis_scale"] = sum(r["seconds"] for r in hs["rows"])
    save_json(out / "data.json", data)


if __name__ == "__main__":
    main()
