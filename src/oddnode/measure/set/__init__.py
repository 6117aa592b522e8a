"""Steps on sets of nodes: STAB's parallel runs on every set of K nodes,
our MPI collectives kernel and the synchronisation sensitivity."""
