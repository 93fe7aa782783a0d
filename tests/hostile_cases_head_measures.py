"""Hostile-input cases (see ``hostile_registry``): :mod:`meanfield.analysis.head_measures`, the paper's hypotheses
measured on heads (issue 34, item 4).  Every public function has an entry; heads, gains, tokens, weights, times and
the numeric options are fuzzed."""

from __future__ import annotations

import functools

import numpy as np
from hostile_registry import H3, X3, array, entry, heads, int_pos, real_finite, real_nonneg, real_pos, tokens

from meanfield.analysis import head_measures as _hm


def _head_bad(b):
    """Bad single heads: not a Head (a bare matrix, a tuple of heads, a string, None)."""
    return [None, "head", np.eye(3), (H3()[0],), 1.0]


@functools.cache
def XT():
    """A two-time trajectory of 8 unit tokens in d = 3."""
    return np.stack([X3(), X3()[::-1]])


_GAIN = np.array([1.0, 0.5, 2.0])

entry("head_measures.orthogonality", _hm.orthogonality, lambda: dict(heads=H3()),
      bad={"heads": lambda b: heads(b["heads"])})
entry("head_measures.alignment", _hm.alignment, lambda: dict(head=H3()[0]), bad={"head": _head_bad})
entry("head_measures.symmetry", _hm.symmetry, lambda: dict(head=H3()[0]), bad={"head": _head_bad})
entry("head_measures.spectrum", _hm.spectrum, lambda: dict(head=H3()[0]), bad={"head": _head_bad})
entry("head_measures.effective_beta", _hm.effective_beta, lambda: dict(head=H3()[0], gain=_GAIN, radius=2.0),
      bad={"head": _head_bad, "gain": lambda b: array(b["gain"]), "radius": real_pos()})
entry("head_measures.head_table", _hm.head_table, lambda: dict(heads=H3(), gain=_GAIN, radius=2.0, n_spectrum=2),
      bad={"heads": lambda b: heads(b["heads"]), "gain": lambda b: array(b["gain"]), "radius": real_pos(),
           "n_spectrum": int_pos(1, 4)})
entry("head_measures.trajectory_measures", _hm.trajectory_measures,
      lambda: dict(X=XT(), heads_per_time=H3(), weights=np.full(8, 1 / 8), times=np.array([0.0, 1.0]),
                   threshold=0.99, monotone_rtol=1e-9),
      bad={"X": lambda b: tokens(b["X"]), "heads_per_time": lambda b: heads(b["heads_per_time"], extra=([H3()],)),
           "weights": lambda b: array(b["weights"], extra=(np.r_[1.0, np.zeros(6), -1e-3],
                                                           np.full(8, 0.2))),
           "times": lambda b: array(b["times"], extra=([1.0, 0.0], [0.0, 0.0])),
           "threshold": real_finite(1.5, -2.0), "monotone_rtol": real_nonneg()})
