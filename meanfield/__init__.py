"""meanfield: multi-head self-attention dynamics, as particles and as a mean-field PDE."""

__version__ = "0.1.0"
