"""Running benchmarks on the nodes: the steps of a check and their
options (``steps``), the round runner (``runner``), the plan and the
catalog; per subject ``node/`` (memory, DGEMM, disk, noise, NUMA, HPL),
``pair/`` (ping-pong, bisection, matrix, Switchbench), ``set/`` (sets of
nodes, collectives, sync), ``collect/`` (inventory, accounting, affinity),
``profile/`` (the MPI profiler and placement runs) and ``sweep``."""
