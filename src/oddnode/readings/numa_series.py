"""The series ``oddnode numa`` stores, named once.

This module imports nothing, so that the findings and the report read the
names without loading the runner.  Every cell of a node's NUMA matrix is a
series of its own, labelled by the node, so that the same cell is compared
across the nodes as any single-node benchmark is:

- ``numa.triad.<i>.<j>``, metric ``bandwidth`` (MB/s): the memory kernel's
  triad with its threads pinned to the CPUs of NUMA node i and its arrays
  bound to the memory of NUMA node j;
- ``numa.pingpong.<i>.<j>``, metrics ``latency`` (us, one way, at the
  smallest message size) and ``bandwidth`` (MB/s, at the largest): the
  shared-memory ping-pong between a CPU of NUMA node i and one of node j;
- ``numa.mpi_pingpong.<i>.<j>``, the same two metrics: our MPI ping-pong
  (two ranks started by mpirun on the node, over the MPI library's shared
  memory) on the CPU pair the shared-memory ping-pong used in that cell.

Each result's parameters also say ``cpu_node`` (i) and ``mem_node`` (j; for
the ping-pong, the NUMA node of its second end, whose memory it receives
into).
"""

from __future__ import annotations

NUMA = "numa"
TRIAD = f"{NUMA}.triad"
PINGPONG = f"{NUMA}.pingpong"
MPI_PINGPONG = f"{NUMA}.mpi_pingpong"
FAMILIES = (TRIAD, PINGPONG, MPI_PINGPONG)
# The ping-pong families: a first and a second end, a latency and a bandwidth.
PINGPONG_FAMILIES = (PINGPONG, MPI_PINGPONG)
BANDWIDTH = "bandwidth"  # MB/s, higher is better
LATENCY = "latency"  # us, lower is better
# The (family, metric) pairs a matrix is drawn for, in the order reports show them.
MEASURES = ((TRIAD, BANDWIDTH), (PINGPONG, LATENCY), (PINGPONG, BANDWIDTH), (MPI_PINGPONG, LATENCY),
            (MPI_PINGPONG, BANDWIDTH))
# Each family in words, and in the few letters a table column has room for.
FAMILY_WORDS = {TRIAD: "triad", PINGPONG: "ping-pong", MPI_PINGPONG: "MPI ping-pong"}
FAMILY_SHORT = {TRIAD: "triad", PINGPONG: "pp", MPI_PINGPONG: "mpi"}


def cell_series(family: str, cpu_node: int, mem_node: int) -> str:
    """The benchmark name of one cell: ``numa.triad.0.1``."""
    return f"{family}.{cpu_node}.{mem_node}"


def split_cell_series(name: str) -> tuple[str, int, int] | None:
    """(family, i, j) of a cell's benchmark name, None when it is not one."""
    family, dot, rest = name.rpartition(".")
    family, dot2, first = family.rpartition(".")
    if not (dot and dot2) or family not in FAMILIES or not (first.isdigit() and rest.isdigit()):
        return None
    return family, int(first), int(rest)


def is_numa_series(subject: str) -> bool:
    """Whether a finding's subject (``benchmark`` or ``benchmark:metric``) is a NUMA cell's."""
    return split_cell_series(subject.split(":", 1)[0]) is not None
