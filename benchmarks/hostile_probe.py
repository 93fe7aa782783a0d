"""Hostile-input probe (issue 26, 'Must show'): every bad and edge input of ``tests/hostile_registry.py``,
each in a child process with a memory cap and a time budget, classified and tallied per entry point.

Outcomes (one per input):

``clear``   a ``ValueError`` (or the entry's documented type) whose message names the argument
``sane``    a valid or edge input gave a finite result
``silent``  a bad input returned a result without error, or any input returned NaN / inf
``crash``   another exception, a ``ValueError`` naming no argument, a ``MemoryError`` (the address-space
            cap, :data:`AS_CAP`, turns an attempted huge allocation into one) or more than 1 GiB allocated
            (tracemalloc's peak: numpy reports its buffers to it)
``hang``    still running after :data:`BUDGET_S` (the child is killed)

Each input runs in a forked child (the registry is built once in the parent): ``RLIMIT_AS`` caps the child,
``signal.setitimer`` interrupts it and the parent kills it if the interrupt does not come back.  Two
children at a time.  Prints the table and writes it as a section of ``benchmarks/RESULTS_hostile.md``::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.hostile_probe --label before   # about 3 minutes
    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.hostile_probe --label after --write
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import select
import signal
import sys
import time
import tracemalloc
import warnings
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")       # forked children must not inherit BLAS thread pools
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchmarks._report import provenance, table, write_section  # noqa: E402

AS_CAP = 4 << 30        # bytes of address space a child may add to what the parent already holds
PEAK_CAP = 1 << 30      # more than this allocated by one call is a crash (issue 26: never above 1 GB)
BUDGET_S = 5.0          # a refusal is immediate: a bad input still running after this hangs
VALID_BUDGET_S = 30.0   # a valid (baseline or edge) call is small: < 2 s alone, < 15 s traced on a loaded machine
OUTCOMES = ("clear", "sane", "silent", "crash", "hang")
RESULTS = Path(__file__).with_name("RESULTS_hostile.md")


class Hang(BaseException):
    pass


def enumerate_cases(R, kinds=("bad", "huge", "edge")):
    """``(entry, arg, kind, index, value)`` for every registry input, plus each entry's baseline."""
    out = []
    for name, spec in R.REGISTRY.items():
        out.append((name, None, "base", 0, None))
        for kind in kinds:
            for arg in getattr(spec, kind):
                for i, v in enumerate(R.bad_values(spec, arg, kind)):
                    out.append((name, arg, kind, i, v))
    return out


def _short(v, n=90):
    text = repr(v) if not isinstance(v, np.ndarray) else f"array{v.shape} {v.dtype}"
    text = " ".join(text.split())                 # one line: array reprs span several
    return text if len(text) <= n else text[: n - 3] + "..."


def classify(R, finite, name, arg, kind, value):
    """Run one input here (in the child) and return ``(outcome, detail)``."""
    spec = R.REGISTRY[name]
    kw = dict(spec.base())
    if arg is not None:
        kw[arg] = value
    if spec.traced:
        tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = spec.fn(**kw)
    except Hang:
        return "hang", f"over {budget(kind)} s"
    except MemoryError as err:
        return "crash", f"MemoryError: {str(err)[:160]}"
    except spec.exc as err:
        peak = tracemalloc.get_traced_memory()[1]
        if peak > PEAK_CAP:
            return "crash", f"refused after allocating {peak / 2**30:.1f} GiB"
        msg = str(err)
        if arg is not None and any(t in msg for t in spec.tokens_for(arg)):
            return "clear", msg[:160]
        if arg is None:
            return "crash", f"valid call refused: {msg[:160]}"
        return "crash", f"{type(err).__name__} naming no {arg}: {msg[:160]}"
    except Exception as err:           # noqa: BLE001 -- the probe tallies every kind of failure
        return "crash", f"{type(err).__name__}: {str(err)[:160]}"
    peak = tracemalloc.get_traced_memory()[1]
    if peak > PEAK_CAP:
        return "crash", f"allocated {peak / 2**30:.1f} GiB"
    if kind in ("bad", "huge") and arg in spec.propagates_nonfinite and R.has_nonfinite(value) and not finite(out):
        return "sane", "non-finite state in, non-finite out (documented: the driver rejects such a step)"
    if kind in ("bad", "huge"):
        return "silent", f"returned {_short(out, 120)}"
    if spec.finite and not finite(out):
        return "silent", f"non-finite result {_short(out, 120)}"
    return "sane", ""


def budget(kind):
    return BUDGET_S if kind in ("bad", "huge") else VALID_BUDGET_S


def child(R, finite, case, wfd):
    name, arg, kind, _, value = case
    vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (vm + AS_CAP, resource.getrlimit(resource.RLIMIT_AS)[1]))

    def on_alarm(signum, frame):
        raise Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, budget(kind))
    try:
        result = classify(R, finite, name, arg, kind, value)
    except Hang:
        result = ("hang", f"over {budget(kind)} s")
    except BaseException as err:     # noqa: BLE001
        result = ("crash", f"{type(err).__name__}: {str(err)[:160]}")
    signal.setitimer(signal.ITIMER_REAL, 0)
    os.write(wfd, pickle.dumps(result))
    os.close(wfd)
    os._exit(0)


def run_all(R, finite, cases, workers=2):
    """Fork one child per case, ``workers`` at a time; returns ``{index: (outcome, detail, seconds)}``."""
    results, running, todo = {}, {}, list(enumerate(cases))
    while todo or running:
        while todo and len(running) < workers:
            i, case = todo.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                child(R, finite, case, w)
            os.close(w)
            running[r] = (i, pid, time.perf_counter(), bytearray(), budget(case[2]) + 10)
        ready, _, _ = select.select(list(running), [], [], 0.2)
        for r in ready:
            chunk = os.read(r, 65536)
            if chunk:
                running[r][3].extend(chunk)
                continue
            i, pid, t0, buf, _ = running.pop(r)
            os.close(r)
            _, status = os.waitpid(pid, 0)
            dt = time.perf_counter() - t0
            if buf:
                outcome, detail = pickle.loads(bytes(buf))
            else:
                outcome, detail = "crash", f"child died (status {status}: killed by the memory cap or a signal)"
            results[i] = (outcome, detail, dt)
        for r, (i, pid, t0, buf, kill_s) in list(running.items()):
            if time.perf_counter() - t0 > kill_s:                 # the interrupt did not come back: kill
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(r)
                running.pop(r)
                results[i] = ("hang", f"killed after {kill_s:.0f} s", time.perf_counter() - t0)
    return results


def report(cases, results, label, commit, total, load0, load1, command):
    per = defaultdict(Counter)
    examples = defaultdict(list)
    for i, (name, arg, kind, _, value) in enumerate(cases):
        outcome, detail, _ = results[i]
        detail = " ".join(detail.split())
        per[name][outcome] += 1
        if outcome in ("silent", "crash", "hang"):
            examples[outcome].append(f"`{name}({arg}={_short(value, 60)})` [{kind}]: {detail}".replace("|", "/"))
    rows = [[name, sum(c.values()), *(c[o] for o in OUTCOMES)] for name, c in per.items()]
    totals = Counter()
    for c in per.values():
        totals.update(c)
    rows.append(["**total**", sum(totals.values()), *(totals[o] for o in OUTCOMES)])
    md = [f"## {label}", "",
          f"Commit {commit}. " + provenance(load0, load1, total, command), "",
          f"{len(cases)} inputs over {len(per)} entry points (each entry's valid baseline counts as one input); "
          f"budget {BUDGET_S:g} s and address-space cap +{AS_CAP >> 30} GiB per input, 1 GiB traced peak.", "",
          table(["entry point", "inputs", *OUTCOMES], rows), ""]
    for outcome in ("hang", "crash", "silent"):
        md += [f"### {outcome} ({len(examples[outcome])})", ""]
        md += [f"- {e}" for e in examples[outcome]] + [""]
    return "\n".join(md), totals


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--label", default="before", help="the section's name (before / after)")
    p.add_argument("--write", action="store_true", help="write the section into benchmarks/RESULTS_hostile.md")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--only", default=None, help="only entry points whose name contains this")
    args = p.parse_args(argv)

    import subprocess

    import hostile_registry as R
    import matplotlib.pyplot  # noqa: F401  -- heavy imports once, before forking
    from hostile_registry import finite

    cases = [c for c in enumerate_cases(R) if args.only is None or args.only in c[0]]
    for name in {c[0] for c in cases}:          # the valid inputs (a small run, models) built once, here
        R.REGISTRY[name].base()
    git = lambda *a: subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    commit = f"{git('rev-parse', '--short', 'HEAD')} (library `meanfield/` last changed in " \
             f"{git('log', '-1', '--format=%h', '--', 'meanfield')}" + \
             (", uncommitted changes" if git("status", "--porcelain", "--", "meanfield") else "") + ")"
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    results = run_all(R, finite, cases, args.workers)
    total = time.perf_counter() - t0
    md, totals = report(cases, results, f"{args.label}", commit, total, load0, os.getloadavg()[0],
                        "python -m benchmarks.hostile_probe " + " ".join(argv or sys.argv[1:]))
    print(md)
    print("totals:", dict(totals))
    if args.write:
        if not RESULTS.exists():
            RESULTS.write_text("# Hostile-input probe (issue 26)\n\nWritten by `benchmarks/hostile_probe.py`; "
                               "the cases are `tests/hostile_registry.py`'s.\n")
        write_section(RESULTS, f"## {args.label}", md)


if __name__ == "__main__":
    main()
