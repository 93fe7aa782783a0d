"""Energy monotonicity of multi-head attention (paper Thm 11-12; MODEL.md section 1)."""
