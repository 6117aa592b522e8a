"""The node the others wait for at every synchronisation (``sync-laggard``).

NERSC's seaborg: serial benchmarks showed nothing, while synchronising MPI
codes ran slower on some nodes, in proportion to their concurrency; timers
around the MPI calls put the asymmetry in the waits.  The sync kernel times
every rank's wait at every collective; the rank that waited least arrived
last, and the others waited for it.  On healthy nodes that is anyone's turn:
in a set of K ranks each is last in 1/K of the iterations.  A node last far
more often, by enough to matter, is the laggard.
"""

from __future__ import annotations

from oddnode.findings.registry import Sensitivity, rule
from oddnode.core.model import Dataset, Finding, Severity
from oddnode.readings.sync import NodeSync, SyncNodes, sync_nodes

KIND = "sync-laggard"

# A node's extra wait per iteration beyond its set-mates' (the median rank
# of each of its set runs, what anyone costs by chance), in at least half of
# its set runs (see steady_excess), must be at least this share of its set
# runs' time per iteration: a job on
# such nodes loses that share of its time to this one node at every
# synchronisation, and more as the ranks grow (seaborg's linear model
# doubled the time at 1,250 tasks).  Below it, a node that is last somewhat
# more often (the rank whose node starts mpirun, or leaves a tree
# collective first, or whose CPU quota's period falls last, as on the
# testbed) costs too little to act on, although thousands of iterations make
# the difference significant.
MIN_EXCESS_FRACTION = 0.05
# And by this many microseconds at least: below it the difference is the
# collective's own skew between ranks (a message hop takes 1-5 us on a fast
# network), whatever the time per iteration.
MIN_EXCESS_US = 5.0


def excess_floor_us(node: NodeSync) -> float:
    """The extra wait beyond its set-mates' that matters for this node."""
    return max(MIN_EXCESS_US, MIN_EXCESS_FRACTION * node.time_us)


def laggards(reading: SyncNodes, alpha: float) -> list[NodeSync]:
    """The nodes of one operation and ordering that are last far more often
    than chance: a one-sided binomial test per node (last_tail, its
    iterations discounted by the dispersion of the other ranks' last counts)
    at ``alpha`` / nodes (Bonferroni: alpha is the chance of any false
    laggard among them), with an extra wait beyond its set-mates' of at
    least excess_floor_us in at least half of its set runs."""
    judged = [n for n in reading.nodes if n.iterations > 0]
    if len(judged) < 2:
        return []
    per_node = alpha / len(judged)
    return [node for node in judged
            if node.last > node.expected and node.p < per_node and node.steady_excess_us >= excess_floor_us(node)]


def _us(value: float) -> str:
    return f"{value / 1000:.3g} ms" if abs(value) >= 1000 else f"{value:.3g} us"


def _finding(reading: SyncNodes, node: NodeSync, alpha: float, judged: int) -> Finding:
    call = "MPI_Allreduce" if reading.operation == "allreduce" else "the barrier"
    share = node.excess_wait_us / node.time_us if node.time_us > 0 else float("nan")
    spread = f", dispersion {node.dispersion:.2g}" if node.dispersion > 1 else ""
    # A tail below the smallest double comes back as 0.
    tail = "< 1e-300" if node.p == 0 else f"= {node.p:.2g}"
    return Finding(
        kind=KIND,
        severity=Severity.WARNING,
        subject=reading.series,
        nodes=node.node,
        message=(
            f"{node.node} arrived last at {call} in {node.last} of {node.iterations} iterations "
            f"({node.share_pct:.3g}%, {node.ratio:.2g}x the {node.chance_pct:.3g}% chance over its {node.set_runs} "
            f"set runs; binomial p {tail} < {alpha / judged:.2g}{spread}): the other ranks waited "
            f"{_us(node.extra_wait_us)} per iteration for it, {_us(node.excess_wait_us)} more than for their "
            f"typical set-mate ({share:.0%} of the {_us(node.time_us)} an iteration took; at least "
            f"{_us(node.steady_excess_us)} in half of its set runs)"
        ),
        evidence={
            **node.to_json(),
            "operation": reading.operation,
            "ordering": reading.ordering,
            "excess_floor_us": excess_floor_us(node),
            "alpha": alpha,
            "alpha_per_node": alpha / judged,
            "nodes_judged": judged,
        },
        remedy=(
            f"Look for what interrupts {node.node} and not the others: a daemon or management agent that spawns "
            "short commands (compare its process accounting with the others' with `oddnode processes`), "
            "interrupt or timer load, a CPU frequency or power setting. Stop or move what runs there more "
            "often and rerun `oddnode sync`; until then keep it out of tightly synchronising jobs, whose time "
            "it sets at every collective."
        ),
    )


@rule(KIND)
def sync_laggard(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Nodes the other ranks wait for at every synchronisation, far more often than chance and long enough to matter."""
    findings = []
    for reading in sync_nodes(dataset):
        judged = sum(1 for n in reading.nodes if n.iterations > 0)
        for node in laggards(reading, sensitivity.alpha):
            findings.append(_finding(reading, node, sensitivity.alpha, judged))
    return findings
