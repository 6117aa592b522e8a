"""The series the set steps store, named once.

This module imports nothing, so that the findings and the report read the
names without loading the runners.  A set run stores
``<family>.<benchmark>.<ordering>``, one label per node set (its folded
name, ``node[01,05,07,11]``):

- family ``sets``: every set of K nodes of one ordering, all at once
  (``sets.sendrecv.sorted``, ``sets.npb.bt.B.shuffled``);
- family ``scale``: one set per node count, alone on the cluster
  (``scale.sendrecv.shuffled``); a label's node count is its size.

Orderings: sorted and shuffled (the node list alone), packed and striped
(the node list grouped by a topology, see ``oddnode.readings.partition``).

``<benchmark>`` is what the kernel or the tool's parser calls its
measurement (``sendrecv``, ``allreduce``, ``alltoall``, ``barrier`` for our
MPI kernel; ``npb.bt.B``, ``hpcc`` for installed applications), and may
hold dots; the ordering is always the last part.
"""

from __future__ import annotations

SETS = "sets"
SCALE = "scale"
FAMILIES = (SETS, SCALE)

SORTED = "sorted"  # adjacent in the cluster's list: one switch, one chassis
SHUFFLED = "shuffled"  # drawn from a list shuffled again every repetition
PACKED = "packed"  # a topology group filled before the next: the job on one leaf
STRIPED = "striped"  # round-robin across the topology's groups: the job spread over leaves
# Every ordering a set series may carry, in the order tables show them.
ORDERINGS = (SORTED, SHUFFLED, PACKED, STRIPED)
# The orderings of the node list alone (what ``scale`` and ``sync`` run),
# the default of ``sets``; packed and striped need a topology.
LIST_ORDERINGS = (SORTED, SHUFFLED)
TOPOLOGY_ORDERINGS = (PACKED, STRIPED)


def set_series(family: str, benchmark: str, ordering: str) -> str:
    """The series a set run stores: ``sets.sendrecv.sorted``."""
    return f"{family}.{benchmark}.{ordering}"


def split_set_series(name: str) -> tuple[str, str, str] | None:
    """(family, benchmark, ordering) of a set series' name, or None when the
    name is not one: ``scale.npb.bt.B.shuffled`` -> (scale, npb.bt.B, shuffled)."""
    family, _, rest = name.partition(".")
    benchmark, _, ordering = rest.rpartition(".")
    if family not in FAMILIES or not benchmark or not ordering:
        return None
    return family, benchmark, ordering

# Our MPI collectives kernel (mpi_collectives.c): Allreduce reduces doubles,
# so its sizes are whole elements; the largest message size it accepts.
ALLREDUCE_ELEMENT_BYTES = 8
MAX_SIZE = 64 << 20
