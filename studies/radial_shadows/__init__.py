"""Radial shadows and per-head energies of orthogonal-block heads (paper Thms 16-17, Condition 8)."""
