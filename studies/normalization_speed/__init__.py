"""Speed of convergence to one cluster under post-LN, nGPT, pre-LN and peri-LN (issue 24); see run.py."""
