"""Benchmarks on sets of nodes: STAB's parallel runs on every set of K
nodes in sorted and shuffled order (``oddnode sets``) and SCAB's scaling
curves over growing node counts (``oddnode scale``)."""
