"""Part A(iv) of the approximate-orthogonality study alone: per-token critical margins of Condition 8.

Writes ``token.npz`` / ``token.json`` into the output folder and regenerates the report from them and
the other parts' ``data.npz`` / ``data.json`` (left as they are), so that this part can be rerun without
the ~12 minutes of the others.  ``python -m studies.approximate_orthogonality.run`` runs every part.
Run from the repository root: ``python -m studies.approximate_orthogonality.token [--quick]``.
"""

from pathlib import Path

from studies._common import main
from studies.approximate_orthogonality.report import report
from studies.approximate_orthogonality.run import run_token

if __name__ == "__main__":
    main(run_token, report, Path(__file__).parent / "output", __doc__)
