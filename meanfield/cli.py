"""Command line: ``meanfield run`` (the main job) and ``meanfield theory`` (closed forms).

Errors in the arguments exit with status 2 and a one-line message, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

__all__ = ["main"]


def _demo_particles(args):
    """A small particle run on S^2 printing energy and attention entropy over time."""
    from .diagnostics import observer
    from .heads import scalar_heads
    from .initial import uniform_sphere
    from .integrate import integrate
    from .particles import ParticleSystem

    system = ParticleSystem(scalar_heads(args.lambdas, 3, beta=args.beta))
    X0 = uniform_sphere(args.n, 3, seed=args.seed)
    t_eval = np.linspace(0, args.t_final, 11)
    traj = integrate(system.rhs, X0, (0.0, args.t_final), method="dopri5", rtol=1e-8, atol=1e-10,
                     t_eval=t_eval, retraction=system.retraction, observe=observer(system))
    obs = traj.observables
    print(f"meanfield particle run: n = {args.n} tokens on S^2, heads lambda = {list(args.lambdas)}, "
          f"beta = {args.beta}, mean normalization, seed {args.seed}")
    print(f"{'t':>6} {'energy':>12} {'entropy/log n':>14} {'min <xi,xj>':>12} {'clusters':>8}")
    for k, t in enumerate(traj.t):
        print(f"{t:6.2f} {obs['energy'][k]:12.6f} {obs['entropy'][k].mean() / np.log(args.n):14.6f} "
              f"{obs['min_inner'][k]:12.6f} {obs['n_clusters'][k]:8d}")
    print(f"status: {traj.message} ({traj.n_steps} steps, {traj.nfev} evaluations, "
          f"max retraction {traj.max_retraction:.1e})")
    energy = obs["energy"]
    print(f"energy non-decreasing: {bool(np.all(np.diff(energy) >= -1e-12 * abs(energy).max()))}")
    return 0 if traj.success else 1


def _theory(args):
    from . import theory

    if args.quantity == "beta-star":
        print(f"c*(H={args.H}) = {theory.c_star(args.H):.12f}")
        print(f"beta*(H={args.H}, n={args.n}, alpha={args.alpha}) = {theory.beta_star(args.H, args.n, args.alpha):.12f}")
    elif args.quantity == "lambda-max":
        print(f"lambda_max(beta={args.beta}, n={args.n}) = {theory.lambda_max(args.beta, args.n):.12f}")
        print(f"inflection(beta={args.beta}, n={args.n}) = {theory.phi_inflection(args.beta, args.n):.12f}")
    else:
        for ell in range(1, args.lmax + 1):
            s = theory.growth_rate(ell, args.lambdas, args.beta, args.normalization, args.nu)
            print(f"sigma_{ell} = {s:.10g}")
    return 0


def _positive_int(s):
    v = int(s)
    if v < 2:
        raise argparse.ArgumentTypeError(f"must be an integer >= 2; received {s}")
    return v


def _positive_float(s):
    v = float(s)
    if not (np.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number; received {s}")
    return v


def build_parser():
    p = argparse.ArgumentParser(prog="meanfield", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the main job (default: a small particle run on S^2)")
    r.add_argument("--n", type=_positive_int, default=200, help="number of tokens (default 200)")
    r.add_argument("--beta", type=_positive_float, default=4.0, help="inverse temperature (default 4)")
    r.add_argument("--lambdas", type=float, nargs="+", default=[1.0, 0.5], help="scalar head strengths")
    r.add_argument("--t-final", type=_positive_float, default=5.0, dest="t_final")
    r.add_argument("--seed", type=int, default=0)
    r.set_defaults(func=_demo_particles)
    t = sub.add_parser("theory", help="print closed forms of MODEL.md")
    t.add_argument("quantity", choices=["beta-star", "lambda-max", "growth-rates"])
    t.add_argument("--H", type=int, default=2)
    t.add_argument("--n", type=_positive_int, default=32)
    t.add_argument("--alpha", type=_positive_float, default=1.0)
    t.add_argument("--beta", type=_positive_float, default=1.0)
    t.add_argument("--lambdas", type=float, nargs="+", default=[1.0])
    t.add_argument("--normalization", choices=["mean", "softmax"], default="mean")
    t.add_argument("--nu", type=float, default=0.0)
    t.add_argument("--lmax", type=_positive_int, default=8)
    t.set_defaults(func=_theory)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:
        print(f"meanfield: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
