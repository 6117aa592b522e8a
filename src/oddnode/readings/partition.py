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

- **packed**: the nodes grouped by a topology's group (leaf switch, line
  card, chassis), then cut: a set fills one group before it takes the next,
  the usual job cabled onto one leaf.  Groups come in the order of their
  first node in the node list, a group's nodes in the list's order.
- **striped**: round-robin across the groups (the first node of every group,
  then the second of every group, …; a group drops out when its nodes are
  used up), then cut: every set spread over as many groups as it can.

Packed and striped are fixed orders, the same every repetition, like
sorted.  Nodes the topology does not place form one group of their own,
``(ungrouped)``, placed where its first node stands in the list: nothing
says they hang from different switches, so striped does not pretend to
spread over them, and the plan names them in a note.  With one group only
packed and striped are the node list itself (a note says so).

When K does not divide N, the last N mod K nodes of the (shuffled) list sit
out that repetition, and the plan says which.

``placement`` gives one job of ``count`` nodes in any of these orders, and
``given`` (the list's first ``count`` nodes): the candidate placements of
an application's job.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from oddnode.core.nodes import fold
from oddnode.core.order import natural_key
from oddnode.readings.sets_series import (
    LIST_ORDERINGS,
    ORDERINGS,
    PACKED,
    SHUFFLED,
    SORTED,
    STRIPED,
    TOPOLOGY_ORDERINGS,
)

DEFAULT_SET_SIZE = 8
# Candidate shuffles drawn per repetition; the one whose sets repeat the
# fewest earlier pairings is kept.  16 brings the expected number of
# repeated pairs well below a plain shuffle's at a cost that stays small
# (one pass over each candidate's pairs) up to 10,000 nodes.
SHUFFLE_CANDIDATES = 16
# Above this many nodes, chance alone keeps set-mates from meeting twice:
# one plain shuffle per repetition.
BALANCE_MAX_NODES = 2048
# The group of the nodes a topology does not place; parentheses keep it
# apart from every group a topology file can name (see oddnode.core.topology).
UNGROUPED = "(ungrouped)"
# A job's placement as listed: the first ``count`` nodes of the node list.
GIVEN = "given"
PLACEMENTS = (GIVEN, SORTED, PACKED, STRIPED, SHUFFLED)


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


def check_ordering(ordering: str, known: Sequence[str] = LIST_ORDERINGS) -> str:
    """``ordering`` when it is one of ``known`` (default sorted, shuffled), else ValueError."""
    if ordering not in known:
        extra = (f"; {', '.join(o for o in TOPOLOGY_ORDERINGS if o not in known)} only for oddnode sets"
                 if ordering in TOPOLOGY_ORDERINGS else "")
        raise ValueError(f"no ordering named {ordering!r} here (known: {', '.join(known)}{extra})")
    return ordering


# --- orders by topology group ------------------------------------------------------------


def _unique(nodes: Sequence[str]) -> list[str]:
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        twice = sorted({n for n in nodes if nodes.count(n) > 1}, key=natural_key)
        raise ValueError(f"a node is named twice in the node list: {', '.join(twice[:5])}")
    return nodes


def check_topology(nodes: Sequence[str], groups: Mapping[str, str] | None, ordering: str = PACKED) -> None:
    """Refuse (ValueError) an ordering by topology without a topology that
    places at least one of the nodes."""
    if not groups:
        raise ValueError(f"ordering {ordering} needs a topology (--topology FILE: which group, a leaf switch "
                         "or line card, each node hangs from)")
    if not any(node in groups for node in nodes):
        raise ValueError(f"ordering {ordering}: the topology places none of the {len(nodes)} nodes "
                         f"({fold(list(nodes))}); is it the topology of this cluster?")


def node_groups(nodes: Sequence[str], groups: Mapping[str, str]) -> dict[str, list[str]]:
    """Group -> its nodes: groups in the order of their first node in
    ``nodes``, each group's nodes in that order; the nodes ``groups`` does
    not place together under UNGROUPED."""
    grouped: dict[str, list[str]] = {}
    for node in _unique(nodes):
        grouped.setdefault(groups.get(node, UNGROUPED), []).append(node)
    return grouped


def packed_order(nodes: Sequence[str], groups: Mapping[str, str]) -> list[str]:
    """The nodes group after group (see node_groups): consecutive nodes share a group."""
    return [node for members in node_groups(nodes, groups).values() for node in members]


def striped_order(nodes: Sequence[str], groups: Mapping[str, str]) -> list[str]:
    """The nodes round-robin across the groups: the first of every group,
    then the second of every group, …; a group drops out once used up."""
    grouped = list(node_groups(nodes, groups).values())
    depth = max((len(members) for members in grouped), default=0)
    return [members[i] for i in range(depth) for members in grouped if i < len(members)]


def placement(nodes: Sequence[str], groups: Mapping[str, str] | None, ordering: str, count: int,
              seed: int = 0) -> tuple[str, ...]:
    """One job of ``count`` nodes: ``given`` the first ``count`` as listed,
    ``sorted`` the first in natural order, ``packed`` and ``striped`` the
    first of packed_order and striped_order (a topology needed), ``shuffled``
    the first of the list shuffled from ``seed``."""
    if ordering not in PLACEMENTS:
        raise ValueError(f"no placement named {ordering!r} (known: {', '.join(PLACEMENTS)})")
    nodes = _unique(nodes)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= len(nodes):
        raise ValueError(f"a job of {count!r} nodes cannot be placed on {len(nodes)} nodes")
    if ordering == GIVEN:
        order = nodes
    elif ordering == SORTED:
        order = sorted(nodes, key=natural_key)
    elif ordering == SHUFFLED:
        order = nodes[:]
        random.Random(f"{seed}:placement").shuffle(order)
    else:
        check_topology(nodes, groups, ordering)
        order = packed_order(nodes, groups) if ordering == PACKED else striped_order(nodes, groups)
    return tuple(order[:count])


def spanned_groups(members: Sequence[str], groups: Mapping[str, str]) -> tuple[str, ...]:
    """The groups a set's members hang from, in the order of their first
    member; UNGROUPED for members the topology does not place."""
    return tuple(dict.fromkeys(groups.get(node, UNGROUPED) for node in members))


def topology_notes(nodes: Sequence[str], groups: Mapping[str, str], ordering: str) -> list[str]:
    """What a plan by topology says of its groups: the nodes the topology
    does not place, and when there is one group only."""
    notes = []
    unplaced = [node for node in nodes if node not in groups]
    if unplaced:
        notes.append(f"{ordering}: {len(unplaced)} node{'s' if len(unplaced) != 1 else ''} not in the topology, "
                     f"{fold(unplaced)}, form one group {UNGROUPED}")
    found = node_groups(nodes, groups)
    if len(found) == 1:
        notes.append(f"{ordering}: every node is in one group ({next(iter(found))}): packed and striped sets are "
                     "the same, the node list cut in order")
    return notes


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


def set_plans(nodes: Sequence[str], size: int, ordering: str, repetitions: int, seed: int = 0,
              groups: Mapping[str, str] | None = None) -> list[SetPlan]:
    """The sets of every repetition, 1 to ``repetitions``, of one ordering.
    The shuffles depend on ``seed`` and the node list only; packed and
    striped need ``groups`` (node -> group, a topology)."""
    check_ordering(ordering, ORDERINGS)
    check_set_size(size, len(nodes))
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    nodes = _unique(nodes)
    if ordering in TOPOLOGY_ORDERINGS:
        check_topology(nodes, groups, ordering)
        nodes = packed_order(nodes, groups) if ordering == PACKED else striped_order(nodes, groups)
    if ordering != SHUFFLED:
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
