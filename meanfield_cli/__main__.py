"""``python -m meanfield_cli``: the ``meanfield`` command (as the console script runs it)."""

import sys

from . import main

sys.exit(main())
