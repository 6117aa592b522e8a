"""Which nodes run together: the sets of K nodes of each ordering, and the
node counts of a scaling curve.

- **sorted**: the cluster's list cut into consecutive sets (node001-008,
  node009-016, …), the same every repetition: nodes of one chassis or one
  leaf switch run together, so the sets compare like with like.
- **shuffled**: the list shuffled, then cut; shuffled again every
  repetition, so that every node meets many others and traffic crosses the
  links between switches.  Of a few candidate shuffles the one that repeats
  the fewest earlier set-mates is kept: a node that keeps meeting the same
  partner cannot be told from it when their sets are slow.

When K does not divide N, the last N mod K nodes of the (shuffled) list sit
out that repetition, and the plan says which.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from oddnode.nodes import fold
from oddnode.sets.series import ORDERINGS, SHUFFLED, SORTED

DEFAULT_SET_SIZE = 8
# Candidate shuffles drawn per repetition; the one whose sets repeat the
# fewest earlier pairings is kept.  16 brings the expected number of
# repeated pairs well below a plain shuffle's at a cost that stays small
# (one pass over each candidate's pairs) up to 10,000 nodes.
SHUFFLE_CANDIDATES = 16
# Above this many nodes, chance alone keeps set-mates from meeting twice:
# one plain shuffle per repetition.
BALANCE_MAX_NODES = 2048


@dataclass(frozen=True)
class SetPlan:
    """The sets of one repetition of one ordering, each in rank order, and
    the nodes that sat out."""

    ordering: str
    repetition: int
    sets: tuple[tuple[str, ...], ...]
    idle: tuple[str, ...] = ()

    def describe(self) -> str:
        """What a person reads of a repetition with nodes left out."""
        return (f"{self.ordering}, repetition {self.repetition}: {fold(self.idle)} sat out "
                f"({len(self.idle)} nodes beyond {len(self.sets)} sets of {len(self.sets[0]) if self.sets else 0})")


def check_ordering(ordering: str) -> str:
    if ordering not in ORDERINGS:
        raise ValueError(f"no ordering named {ordering!r} (known: {', '.join(ORDERINGS)})")
    return ordering


def check_set_size(size: int, nodes: int) -> int:
    """A set size that leaves at least one set of the nodes."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 2:
        raise ValueError(f"a set has at least 2 nodes, not {size!r}")
    if size > nodes:
        raise ValueError(f"sets of {size} nodes need at least {size} nodes; {nodes} given")
    return size


def cut(nodes: Sequence[str], size: int) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """Consecutive sets of ``size`` nodes, and the remainder."""
    whole = len(nodes) - len(nodes) % size
    return tuple(tuple(nodes[i:i + size]) for i in range(0, whole, size)), tuple(nodes[whole:])


def _repeats(sets: Sequence[Sequence[str]], met: Counter[tuple[str, str]]) -> int:
    """How many earlier meetings the pairs of these sets repeat."""
    return sum(met[pair] for members in sets for pair in combinations(sorted(members), 2))


def set_plans(nodes: Sequence[str], size: int, ordering: str, repetitions: int, seed: int = 0) -> list[SetPlan]:
    """The sets of every repetition, 1 to ``repetitions``, of one ordering.
    The shuffles depend on ``seed`` and the node list only."""
    check_ordering(ordering)
    check_set_size(size, len(nodes))
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        raise ValueError("a node is named twice in the node list")
    if ordering == SORTED:
        sets, idle = cut(nodes, size)
        return [SetPlan(ordering, r, sets, idle) for r in range(1, repetitions + 1)]
    rng = random.Random(f"{seed}:{SHUFFLED}:{size}")
    met: Counter[tuple[str, str]] = Counter()
    candidates = SHUFFLE_CANDIDATES if len(nodes) <= BALANCE_MAX_NODES else 1
    plans = []
    for repetition in range(1, repetitions + 1):
        best = None
        for _ in range(candidates):
            order = nodes[:]
            rng.shuffle(order)
            sets, idle = cut(order, size)
            score = _repeats(sets, met) if candidates > 1 else 0
            if best is None or score < best[0]:
                best = (score, sets, idle)
        _, sets, idle = best
        if candidates > 1:
            met.update(pair for members in sets for pair in combinations(sorted(members), 2))
        plans.append(SetPlan(ordering, repetition, sets, idle))
    return plans


def scale_counts(nodes: int, counts: Sequence[int] | None = None) -> list[int]:
    """The node counts of a scaling curve: those given, or 2, 4, 8, … and
    the whole cluster."""
    if nodes < 2:
        raise ValueError(f"a scaling curve needs at least 2 nodes, not {nodes}")
    if counts is None:
        chosen, count = [], 2
        while count < nodes:
            chosen.append(count)
            count *= 2
        return chosen + [nodes]
    chosen = sorted(set(counts))
    wrong = [c for c in chosen if isinstance(c, bool) or not isinstance(c, int) or not 2 <= c <= nodes]
    if wrong:
        raise ValueError(f"node counts must be whole numbers from 2 to {nodes} (the nodes given), not "
                         f"{', '.join(map(str, wrong))}")
    return chosen


def scale_plans(nodes: Sequence[str], counts: Sequence[int], ordering: str, repetitions: int,
                seed: int = 0) -> list[tuple[int, int, tuple[str, ...]]]:
    """(repetition, count, the set in rank order) of a scaling curve: the
    first ``count`` nodes of the list, sorted or shuffled again for every
    repetition (one shuffle per repetition, shared by its counts, so that
    the sets of one repetition grow by adding nodes)."""
    check_ordering(ordering)
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    rng = random.Random(f"{seed}:scale")
    plans = []
    for repetition in range(1, repetitions + 1):
        order = list(nodes)
        if ordering == SHUFFLED:
            rng.shuffle(order)
        plans += [(repetition, count, tuple(order[:count])) for count in counts]
    return plans
