"""Per-head monotonicity under approximately orthogonal heads (paper Thm 39)."""
