"""The series the interconnect's kernels store, named once.

The runners write them, the finding rules and the report read them: this
module imports nothing, so that the analysis and the report know the names
without loading the runners.  A pattern run stores ``<family>.<pattern>``
(``pingpong.sort``, ``mpi.cut``, ``stream.shuffle``), one label per pair;
over a network named by ``pairs --network``, ``<family>.<pattern>@<network>``.
"""

from __future__ import annotations

PINGPONG = "pingpong"  # our TCP ping-pong (pingpong.c), per pattern
MPI = "mpi"  # our MPI ping-pong (mpi_pingpong.c), per pattern
STREAM = "stream"  # Switchbench's pairwise streaming, per pattern
# Families whose pattern runs are judged as one population per metric.
PAIR_FAMILIES = (PINGPONG, MPI, STREAM)

SORTED = f"{PINGPONG}.sort"  # neighbours in the cluster's list: one switch
SHUFFLED = (f"{PINGPONG}.shuffle", f"{PINGPONG}.random")  # across switches
MATRIX = f"{PINGPONG}.matrix"  # every ordered pair
MATRIX_RETEST = f"{PINGPONG}.matrix-retest"  # slow pairs at halving concurrency
# The retest's concurrency metric: how many pairs ran at once in a pair's
# last retest (the best is the least, so a pair retested alone reads 1).
CONCURRENCY_METRIC = "concurrency"
# What the matrix decides of a slow pair: slow alone too, slow only in
# company, or never retested.
BAD_LINK, CONTENTION, NOT_RETESTED = "bad-link", "contention", "not-retested"

BISECTION = "bisection"  # the cut's figures: demonstrated, full, fraction
BISECTION_CUT = f"{BISECTION}.cut"  # each cut pair while all stream at once
BISECTION_ALONE = f"{BISECTION}.alone"  # each cut pair streaming alone

CHAIN = "chain"  # Switchbench's daisy chain, one label per chain
ALLTOALL = "alltoall"  # Switchbench's all-to-all, per node and per phase


# Between a pattern and the network it ran over (``pingpong.sort@ib``): a
# run over a network of the site's other than the one node names reach.
NETWORK_MARK = "@"


def pattern_series(family: str, pattern: str, network: str | None = None) -> str:
    """The series a pattern run of a family stores: ``pingpong.sort``, or
    ``pingpong.sort@ib`` over the network named ``ib``."""
    return f"{family}.{pattern}" + (f"{NETWORK_MARK}{network}" if network else "")


def split_network(pattern: str) -> tuple[str, str | None]:
    """A series' pattern part and its network: ``sort@ib`` -> (sort, ib), ``sort`` -> (sort, None)."""
    base, mark, network = pattern.partition(NETWORK_MARK)
    return base, (network if mark else None)
