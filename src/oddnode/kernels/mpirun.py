"""The options our MPI kernels add to Open MPI's ``mpirun``, in one place:
the ping-pong's launcher and the collectives' use the same ones.

Open MPI (4.1, ob1 over the TCP BTL) never blocks while it waits for a
message: a rank polls ``opal_progress`` in a loop.  On a real cluster, one
rank per node, that polling is what gives the lowest latency, so nothing is
added there.  Where a node's CPU time is capped (the testbed's CFS quota,
1.25 ms per 10 ms period with 8 nodes on 2 CPUs) a polling rank spends its
quota at the start of each period and is then stopped for the rest of it:
one round trip per period, a 0 B latency of 5 ms at best and 12-16 ms as a
median, and 1 MiB at 9-10 of the 12.5 MB/s that 100 Mbit/s links carry.
Measured on the testbed (docs/testbed.md#mpi-on-the-testbed), only
``mpi_yield_when_idle`` changed that; ``btl_tcp_progress_thread``, ``btl
tcp,self``, ``btl ^vader``, ``pml ob1``, ``btl_tcp_if_include`` /
``oob_tcp_if_include eth0`` and ``--bind-to none`` did not.
"""

from __future__ import annotations


def mpirun_options(rsh_agent: str | None = None, yield_when_idle: bool = False) -> list[str]:
    """The options, beyond the ranks and hosts, for one mpirun launch.

    ``yield_when_idle`` (for nodes whose CPUs are capped or shared, such as
    the testbed's): ``--mca mpi_yield_when_idle 1``, a ``sched_yield()``
    in every idle turn of the progress loop.  Where other tasks want the
    CPU the rank gives it up in small slices instead of spending its quota
    in one block, so a message waits tens of microseconds for its receiver,
    not the rest of a quota period: on the testbed the median 0 B latency
    fell from 12-20 ms to 0.1-0.3 ms with several pairs at once (5 ms, the
    period's half, stays the floor of a lone pair on idle CPUs, but no longer
    13-16 ms), and 1 MiB rose to 11-12 MB/s at 100 Mbit/s (unshaped: 32 to
    230 MB/s).  It costs about 1 us in 5 where a rank has a CPU to itself
    (two ranks on this machine, no quota), so it is off by default: real
    clusters with one rank per node keep polling's latency.  (Open MPI turns
    it on by itself only when a node's slots are oversubscribed.)

    ``rsh_agent``: the command mpirun reaches the other nodes with
    (``--mca plm_rsh_agent``, e.g. ``ssh -F FILE`` for a cluster's own ssh
    configuration); by default its own (ssh).  Always last, so that the
    command's tail names how the nodes are reached."""
    options: list[str] = []
    if yield_when_idle:
        options += ["--mca", "mpi_yield_when_idle", "1"]
    if rsh_agent:
        options += ["--mca", "plm_rsh_agent", rsh_agent]
    return options
