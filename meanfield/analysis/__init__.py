"""Analysis of the models: particle and field diagnostics, closed forms (theory, stability) and
optimal-transport distances.  Imports :mod:`meanfield.core` and :mod:`meanfield.models` only."""
