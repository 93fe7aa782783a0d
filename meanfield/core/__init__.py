"""The primitives: heads, kernels, Funk-Hecke multipliers, the sphere's transforms, time stepping,
input validation, initial tokens and densities.  Nothing here imports the layers above."""
