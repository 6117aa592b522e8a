"""oddnode's own C kernels, built and run on the nodes through any transport.

Each kernel has one home here, beside its C source: ``memory.py`` beside
``memory.c``, ``dgemm.py`` beside ``dgemm.c``, ``disk.py`` beside
``disk.c`` -- its argv, the parser of its output, the series it writes and
its step of a check.  ``jobs`` builds the argv that compiles (once) and
runs any of them on a node and reads the report that comes back;
``node_runner.py`` is that runner, shipped to the nodes; ``output`` reads
the ``key value`` lines every kernel prints.  The network kernels
(pingpong.c, mpi_pingpong.c, alltoall.c) have their homes in
``oddnode.interconnect``, beside the runs that pair nodes up.
"""
