"""Keep ``tests/hostile_xfail.py`` (the strict xfails of the hostile-input suite) in step with the code.

After a fix merges, the cases it fixes XPASS, which strict marks turn into failures.  Two modes, both
reading the output of a pytest run with ``-rfX`` (wide enough not to cut the ids: ``COLUMNS=300``)::

    COLUMNS=300 .venv/bin/python -m pytest tests/test_hostile_api.py -q --tb=no -rfX > run.txt
    .venv/bin/python -m benchmarks.hostile_xfail_table prune run.txt      # delete the rows that XPASSed

    HOSTILE_NO_XFAIL=1 COLUMNS=300 .venv/bin/python -m pytest tests/test_hostile_api.py -q --tb=no -rf > run.txt
    .venv/bin/python -m benchmarks.hostile_xfail_table regen run.txt      # rebuild from every failure

``regen`` names the helper of issue 26 that owned a case when the table was first written (guard: the
cost refusals of the entry points the issue lists; contract: its input-contract cases); every other
case is "open".
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "tests" / "hostile_xfail.py"
KIND = {"bad_values": "bad", "huge_values": "huge", "generated_bad_values": "gen", "edge_values": "edge",
        "generated_bad_values_heavy": "heavy"}
GUARD = ("CirclePDE", "AxisymmetricPDE", "BatchedSystem", "random_heads.random_heads", "step_rules.iterate",
         "schedules.", "phase_diagram.", "extend.extend", "clustering.clustering", "transport.w2_particles_field",
         "semidiscrete.solve_semidiscrete", "mmd.", "cli.phase_diagram")
CONTRACT = ("step_rules.", "CirclePDE", "schedules.HeadSchedule", "ensembles.", "axisymmetric.w2_marginal_samples",
            "clustering.", "cli.", "phase_diagram.load_phase_config", "phase_diagram.run_phase_diagram",
            "phase_diagram.PhaseDiagramConfig")
HEADER = '''"""Hostile-input cases still failing (issue 26), as strict xfails of tests/test_hostile_api.py.

(entry, argument, kind) -> (helper whose fix should make it pass, the first failure seen). kind: bad (listed
bad values), huge (cost refusals), gen (hypothesis-drawn bad values; heavy: the slow profile's extra
failures, its other marks are gen's), edge (legal extremes). "open": no
helper of the issue-26 round owns it.  An XPASS is a failure (strict): delete the line when a fix lands
(``python -m benchmarks.hostile_xfail_table prune RUN.txt`` does it).
"""
'''
LINE = re.compile(r"^(?:FAILED|XPASS) \S*test_hostile_api.py::test_(\w+)\[([^\]]+)\](?: - (.*))?$", re.M)


def parse(text, xpass_only=False):
    """``{(entry, arg, kind): message}`` of the failed (or, ``xpass_only``, XPASSed) cases in a pytest log."""
    out = {}
    for m in LINE.finditer(text):
        test, ident, msg = m.groups()
        msg = msg or ""
        if test not in KIND or (xpass_only and "XPASS" not in msg and not m.group(0).startswith("XPASS")):
            continue
        name, arg = ident.rsplit("-", 1)
        msg = re.sub(r"\s+", " ", msg.replace("Failed: ", "").replace("AssertionError: ", ""))
        msg = re.sub(r" at 0x[0-9a-f]+", "", re.sub(r"/tmp/tmp\w+\.(npy|toml)", "TMP", msg))
        out[(name, arg, KIND[test])] = msg[:110].rstrip()
    return out


def owner(name, arg, kind):
    if kind == "huge":
        return "guard" if name.startswith(GUARD) else "open"
    return "contract" if arg == "heads" or name.startswith(CONTRACT) else "open"


def write(rows):
    lines = [HEADER, "XFAIL = {"]
    lines += [f"    ({n!r}, {a!r}, {k!r}): ({o!r}, {m!r})," for (n, a, k), (o, m) in sorted(rows.items())]
    TABLE.write_text("\n".join(lines + ["}", ""]))


def main(argv=None):
    mode, path = (argv or sys.argv[1:])[:2]
    text = Path(path).read_text()
    if mode == "regen":      # (a heavy row repeating its gen row is dropped: the gen row marks both)
        found = parse(text)
        rows = {key: (owner(*key), msg) for key, msg in found.items()
                if not (key[2] == "heavy" and (key[0], key[1], "gen") in found)}
    elif mode == "prune":
        namespace = {}
        exec(TABLE.read_text(), namespace)
        gone = parse(text, xpass_only=True)
        rows = {k: v for k, v in namespace["XFAIL"].items() if k not in gone}
        print(f"removed {len(namespace['XFAIL']) - len(rows)} rows that XPASSed")
    else:
        raise SystemExit(f"mode must be 'regen' or 'prune'; received {mode!r}")
    write(rows)
    print(len(rows), "rows:", dict(Counter((k[2], v[0]) for k, v in rows.items())))


if __name__ == "__main__":
    main()
