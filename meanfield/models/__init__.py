"""The two models: the finite-n particle system (any d) with its fast spectral sums, and the
mean-field continuity equation on S^2.  They import only :mod:`meanfield.core`, never each other's
layers above (``particles`` may use ``fastsum``)."""
