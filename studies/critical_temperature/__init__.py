"""Critical inverse temperature beta* of radial dominance (paper Thm 19); see run.py."""
