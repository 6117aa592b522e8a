"""The node's quick health check (``oddnode health``), the baseline it
compares with, and what it does in Slurm: drain a node with a problem,
resume one it drained once healthy."""
