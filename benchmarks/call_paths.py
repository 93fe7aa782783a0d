"""The files of ``meanfield`` a call passes through before it reaches its work (issue 32, "must show").

Two paths, traced with :func:`sys.setprofile` (every Python call, in the order entered):

* ``solve_particles`` (and :func:`meanfield.solve`) on 64 tokens of two scalar heads in d = 3, from the
  call to the first velocity (``ParticleSystem.velocity``);
* ``meanfield equilibria`` on its built-in default (``cli.main(["equilibria", ...])``), from the command to
  the first evaluation of the Newton map (``analysis.equilibria._gibbs``, the Gibbs map every Newton and continuation step evaluates).

For each path it prints how many distinct files were entered, and for the files above ``core/`` (the
models, analysis and workflow layers; ``core/`` holds the shared checks and sums every path calls) how many
times the walk entered each of them (a file entered twice: the walk went back and forth between modules).  Run from the repository root (a few seconds)::

    .venv/bin/python -m benchmarks.call_paths
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "meanfield"


class _Stop(Exception):
    pass


def trace(call, stop_file, stop_name):
    """Files of ``meanfield`` entered by ``call()`` until a function ``stop_name`` of ``stop_file`` is entered.

    Returns ``(files_in_order, visits)``: the distinct files in order of first entry, and the sequence of file
    changes (a visit each time the innermost meanfield frame moves to another file).
    """
    order, visits = [], []

    def prof(frame, event, arg):
        if event != "call":
            return
        f = frame.f_code.co_filename
        if not f.startswith(str(ROOT)):
            return
        rel = str(Path(f).relative_to(ROOT))
        if rel.endswith(stop_file) and frame.f_code.co_name == stop_name:
            raise _Stop
        if rel not in order:
            order.append(rel)
        if not visits or visits[-1] != rel:
            visits.append(rel)

    sys.setprofile(prof)
    try:
        call()
    except _Stop:
        pass
    finally:
        sys.setprofile(None)
    return order, visits


def _particles(entry):
    import meanfield as mf
    from meanfield.core import initial
    from meanfield.core.heads import scalar_heads
    system = mf.ParticleSystem(scalar_heads([1.0, 0.5], 3))
    X0 = initial.uniform_sphere(64, 3, seed=1)
    if entry == "solve":
        return lambda: mf.solve(system, X0, 1.0)
    return lambda: mf.solve_particles(system, X0, 1.0)


def _equilibria():
    from meanfield.workflow import cli
    out = tempfile.mkdtemp()
    return lambda: cli.main(["equilibria", "--out", out, "--force", "--no-progress"])


def main():
    rows = [("solve_particles -> first velocity", _particles("solve_particles"), "models/particles.py", "velocity"),
            ("solve -> first velocity", _particles("solve"), "models/particles.py", "velocity"),
            ("meanfield equilibria -> first Newton residual", _equilibria(), "analysis/equilibria.py", "_gibbs")]
    for label, call, f, name in rows:
        order, visits = trace(call, f, name)
        upper = [v for v in visits if not v.startswith("core/")]
        upper = [v for i, v in enumerate(upper) if i == 0 or upper[i - 1] != v]
        entries = {v: upper.count(v) for v in dict.fromkeys(upper)}
        print(f"{label}: {len(order)} files ({len(entries)} above core/); entries into each file above core/:")
        print("   " + ", ".join(f"{k} x{v}" for k, v in entries.items()))


if __name__ == "__main__":
    main()
