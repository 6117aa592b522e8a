"""The series the sync step stores, named once.

This module imports nothing, so that the findings and the report read the
names without loading the runner.  A sync run stores, per operation
(``allreduce``, ``barrier``) and ordering (``sorted``, ``shuffled``):

- per set run, under the scaling curve's family, ``scale.sync.<operation>.<ordering>``
  (label: the folded node set): ``time`` (us per iteration), ``efficiency``
  (%), ``compute``, ``wait`` and ``extra_wait`` (us per iteration);
- per rank of each set run, ``sync.<operation>.<ordering>``, labelled by the
  rank's node (a set of one), one repetition per set run the node was in:
  the ``RANK_METRICS`` (``time`` is its set run's time per iteration).  They are set results, not node results: a node's
  numbers of one set run depend on the set it ran in, and every one of them
  is kept (a node's best would hide how often it was last).
"""

from __future__ import annotations

SYNC = "sync"
OPERATIONS = ("allreduce", "barrier")

# Per set run (the scale family's series).
TIME = "time"  # us per iteration
EFFICIENCY = "efficiency"  # compute over compute and wait, %
COMPUTE = "compute"  # us per iteration
WAIT = "wait"  # us per iteration
EXTRA_WAIT = "extra_wait"  # us per iteration the last rank made the others wait

# Per rank of a set run.
LAST = "last"  # iterations it arrived last
ITERATIONS = "iterations"  # the set run's iterations
RANKS = "ranks"  # the set run's ranks: the chance of being last is 1/ranks
RANK_METRICS = (LAST, ITERATIONS, RANKS, TIME, EXTRA_WAIT, COMPUTE, WAIT, EFFICIENCY)


def sync_benchmark(operation: str) -> str:
    """What the kernel's parser names its measurements: ``sync.allreduce``."""
    return f"{SYNC}.{operation}"


def rank_series(operation: str, ordering: str) -> str:
    """The per-rank series: ``sync.allreduce.shuffled``."""
    return f"{SYNC}.{operation}.{ordering}"


def split_rank_series(name: str) -> tuple[str, str] | None:
    """(operation, ordering) of a per-rank series' name, None when it is not one."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != SYNC or parts[1] not in OPERATIONS:
        return None
    return parts[1], parts[2]
