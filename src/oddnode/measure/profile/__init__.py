"""MPI applications profiled (our PMPI profiler, our demo application) and
run on candidate placements."""
