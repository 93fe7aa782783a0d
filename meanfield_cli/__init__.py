"""The ``meanfield`` console command's entry point: signals first, the package second.

Importing :mod:`meanfield` takes a second or more (numpy, scipy, ducc0, xarray).  This tiny package
imports nothing heavy: :func:`main` makes SIGINT and SIGTERM raise ``KeyboardInterrupt`` once (later
ones are ignored) *before* the package is imported, so that Ctrl-C or a scheduler's SIGTERM during
the imports prints one line (``meanfield: interrupted (Ctrl-C)``) and exits 130 / 143, never a
traceback; then :func:`meanfield.workflow.cli.main` runs with its own handling.
"""

import signal
import sys

__all__ = ["main"]


def main(argv=None) -> int:
    """Install the signal handling, import the package, run ``meanfield.workflow.cli.main(argv)``."""
    received = []

    def handler(signum, frame):
        if not received:
            received.append(signum)
            raise KeyboardInterrupt
        # a second signal while the first is handled: ignored

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    try:
        from meanfield.workflow.cli import main as cli_main
    except KeyboardInterrupt:
        return _interrupted(received)
    try:
        return cli_main(argv)                # installs its own handling at once
    except KeyboardInterrupt:                # a signal in the instant between the imports and that
        return _interrupted(received)


def _interrupted(received):
    sig = received[0] if received else signal.SIGINT
    print(f"meanfield: interrupted ({'SIGTERM' if sig == signal.SIGTERM else 'Ctrl-C'}) while starting",
          file=sys.stderr)
    return 128 + sig
