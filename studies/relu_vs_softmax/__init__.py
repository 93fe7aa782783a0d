"""ReLU versus softmax clustering times (paper Thm 25); see run.py."""
