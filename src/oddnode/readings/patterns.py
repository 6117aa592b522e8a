"""Pair patterns for ping-pong: who runs with whom, over an ordered node list.

The list order is the cluster's order (node001, node002, ...), so the fixed
patterns follow its cabling.  STAB runs each network over several patterns so
that a weak node (poor in every pattern, whatever its partner) can be told
from a weak route or a bad uplink (poor only in the pairs that cross it).
Positions are 1-based below; M is N rounded down to even.

=======  ==========================================  =============================
pattern  pairs                                       who sits out when N is odd
=======  ==========================================  =============================
sort     1-2, 3-4, ...: neighbours                   the last node
cut      i with i+M/2: the two halves side by side   the last node
fold     i with N+1-i: the list folded               the middle node, (N+1)/2
shuffle  a seeded random matching, a new one for     the node the draw leaves
         each repetition
random   one seeded random matching, the same for    the node the draw leaves
         every repetition
file     the pairs of a pairs file                   every node in no pair
=======  ==========================================  =============================

A random matching is a permutation of the list taken two by two, drawn with
``numpy.random.default_rng((seed, repetition))`` for shuffle (repetitions
count from 1) and ``default_rng((seed, 0))`` for random, so that random is
not shuffle's first repetition under another name; with N odd the last node
of the permutation sits out.

A pairs file holds one pair a line: two node names separated by blanks or a
comma (``node001 node002``, ``node001,node002``), or the pair label that
results carry (``node001-node002``, split against the node list, so names
with dashes work).  ``#`` starts a comment; blank lines are ignored.  Pairs
may share a node: such a plan is not :attr:`PairPlan.disjoint`, and its pairs
must run one at a time, never concurrently.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from oddnode.core.nodes import fold, split_pair, validate_node_name

PATTERNS = ("sort", "cut", "fold", "shuffle", "random")
# Not in PATTERNS: it needs a pairs file, so it cannot run on a node list alone.
FILE_PATTERN = "file"
ALL_PAIRS = "all-pairs"
ORDERED_PAIRS = "ordered-pairs"

PATTERN_TEXT = {
    "sort": "node i with node i+1 (1-2, 3-4, ...)",
    "cut": "node i with node i+M/2 (the two halves)",
    "fold": "node i with node N+1-i (the list folded)",
    "shuffle": "a seeded random matching, a new one each repetition",
    "random": "one seeded random matching, the same every repetition",
    FILE_PATTERN: "the pairs of a pairs file",
    ALL_PAIRS: "one round of every pair of nodes",
    ORDERED_PAIRS: "one round of every ordered pair of nodes",
}
# Why a node has no partner, by pattern.
_IDLE_TEXT = {
    "sort": "the last of an odd count",
    "cut": "the last of an odd count",
    "fold": "the middle of an odd count",
    "shuffle": "left by the draw from an odd count",
    "random": "left by the draw from an odd count",
    FILE_PATTERN: "in no pair of the file",
    ALL_PAIRS: "this round's odd one out",
    ORDERED_PAIRS: "this round's odd one out",
}
# Patterns whose plans are the rounds of one schedule, numbered as repetitions.
_ROUND_PATTERNS = (ALL_PAIRS, ORDERED_PAIRS)
# Blanks and commas separate the two names of a line in a pairs file.
_PAIR_SEPARATOR = re.compile(r"[\s,]+")


class PairPatternError(ValueError):
    """A node list, seed or pairs file that no pair plan can be made from."""


class PairsFileError(PairPatternError):
    """A bad line of a pairs file, named by file and line number."""

    def __init__(self, source: str, line: int, message: str) -> None:
        self.source = source
        self.line = line
        super().__init__(f"{source}:{line}: {message}")


class UnknownPatternError(KeyError):
    """A pattern name that is not one of PATTERNS or 'file'."""

    def __str__(self) -> str:
        return f"no pair pattern named {self.args[0]!r} (known: {', '.join((*PATTERNS, FILE_PATTERN))})"


def check_patterns(patterns: Sequence[str], what: str) -> None:
    """Refuse an empty list of patterns, or a name that is no pattern."""
    unknown = [pattern for pattern in patterns if pattern not in PATTERNS]
    if unknown or not patterns:
        raise ValueError(f"the {what} are some of {', '.join(PATTERNS)}, not {', '.join(unknown) or 'none'}")


def pair_label(a: str, b: str) -> str:
    """The label of a pair's results, ``nodeA-nodeB`` (see oddnode.core.nodes.split_pair)."""
    return f"{a}-{b}"


def shared_nodes(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """Nodes that are in more than one pair, in order of first appearance."""
    counts = Counter(node for pair in pairs for node in pair)
    return [node for node, count in counts.items() if count > 1]


def is_disjoint(pairs: Iterable[tuple[str, str]]) -> bool:
    """Whether no node is in two pairs, so that every pair can run at once."""
    return not shared_nodes(pairs)


@dataclass
class PairPlan:
    """The pairs of one pattern for one repetition, and the nodes left out."""

    pattern: str
    pairs: list[tuple[str, str]]
    idle: list[str] = field(default_factory=list)
    repetition: int = 1  # for all_pairs_rounds and ordered_rounds: the round
    seed: int | None = None  # the seed of a drawn pattern; None for the others
    source: str | None = None  # the pairs file of the file pattern

    @property
    def disjoint(self) -> bool:
        return is_disjoint(self.pairs)

    @property
    def labels(self) -> list[str]:
        return [pair_label(a, b) for a, b in self.pairs]

    @property
    def nodes(self) -> list[str]:
        """The nodes in some pair, each once, in pair order."""
        return list(dict.fromkeys(node for pair in self.pairs for node in pair))

    def describe(self) -> str:
        """One line: the pattern, its pair count, who sits out and why."""
        where = f"{'round' if self.pattern in _ROUND_PATTERNS else 'repetition'} {self.repetition}"
        if self.seed is not None:
            where += f", seed {self.seed}"
        if self.source is not None:
            where += f", from {self.source}"
        count = len(self.pairs)
        text = f"{self.pattern} ({where}): {count} pair{'' if count == 1 else 's'}"
        if self.idle:
            verb = "sits" if len(self.idle) == 1 else "sit"
            why = _IDLE_TEXT.get(self.pattern)
            text += f"; {fold(self.idle)} {verb} out" + (f" ({why})" if why else "")
        shared = shared_nodes(self.pairs)
        if shared:
            text += f"; pairs share {fold(shared)}: run them one at a time"
        return text

    def to_json(self) -> dict:
        """The plan as data: its repetition (or round), pairs, who sat out, seed and pairs file."""
        return {"repetition": self.repetition, "pairs": self.labels, "idle": list(self.idle), "seed": self.seed,
                "source": self.source}


def _checked(nodes: Sequence[str]) -> list[str]:
    """The node list as a list, after checking that pairs can be made of it."""
    if isinstance(nodes, str):
        raise PairPatternError(f"a list of node names is needed, not the string {nodes!r} "
                               "(expand a node set with oddnode.core.nodes.expand)")
    names = list(nodes)
    if len(names) < 2:
        raise PairPatternError(f"a pair pattern needs at least 2 nodes, got {len(names)}"
                               + (f" ({names[0]})" if names else ""))
    for name in names:
        validate_node_name(name)
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        raise PairPatternError(f"the node list names {fold(repeated)} more than once")
    return names


def _checked_draw(seed: int, repetition: int) -> None:
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PairPatternError(f"the seed must be a non-negative integer, got {seed!r}")
    _checked_repetition(repetition)


def _checked_repetition(repetition: int) -> None:
    if not isinstance(repetition, (int, np.integer)) or repetition < 1:
        raise PairPatternError(f"repetitions count from 1, got {repetition!r}")


def pairs_sort(nodes: Sequence[str]) -> PairPlan:
    """1-2, 3-4, ...: neighbours, which share a chassis switch on most clusters."""
    names = _checked(nodes)
    paired = len(names) - len(names) % 2
    pairs = [(names[i], names[i + 1]) for i in range(0, paired, 2)]
    return PairPlan("sort", pairs, names[paired:])


def pairs_cut(nodes: Sequence[str]) -> PairPlan:
    """i with i+M/2: the list cut in two halves laid side by side."""
    names = _checked(nodes)
    half = len(names) // 2
    pairs = [(names[i], names[i + half]) for i in range(half)]
    return PairPlan("cut", pairs, names[2 * half:])


def pairs_fold(nodes: Sequence[str]) -> PairPlan:
    """i with N+1-i: the list folded in the middle, the middle node out when N is odd."""
    names = _checked(nodes)
    n = len(names)
    pairs = [(names[i], names[n - 1 - i]) for i in range(n // 2)]
    return PairPlan("fold", pairs, [names[n // 2]] if n % 2 else [])


def _matching(names: list[str], rng: np.random.Generator) -> tuple[list[tuple[str, str]], list[str]]:
    """A random permutation taken two by two, and the node it leaves when odd."""
    order = [names[i] for i in rng.permutation(len(names))]
    paired = len(order) - len(order) % 2
    return [(order[i], order[i + 1]) for i in range(0, paired, 2)], order[paired:]


def pairs_shuffle(nodes: Sequence[str], seed: int = 0, repetition: int = 1) -> PairPlan:
    """A random matching drawn anew for each repetition, reproducible from seed and repetition."""
    names = _checked(nodes)
    _checked_draw(seed, repetition)
    pairs, idle = _matching(names, np.random.default_rng((int(seed), int(repetition))))
    return PairPlan("shuffle", pairs, idle, repetition=int(repetition), seed=int(seed))


def pairs_random(nodes: Sequence[str], seed: int = 0, repetition: int = 1) -> PairPlan:
    """One random matching of the seed, the same whatever the repetition."""
    names = _checked(nodes)
    _checked_draw(seed, repetition)
    pairs, idle = _matching(names, np.random.default_rng((int(seed), 0)))
    return PairPlan("random", pairs, idle, repetition=int(repetition), seed=int(seed))


def parse_pairs(text: str, nodes: Sequence[str], source: str = "<pairs>") -> PairPlan:
    """The pairs of a pairs file's text (format in the module docstring).

    Every node must be in ``nodes``; the nodes of ``nodes`` in no pair are the
    plan's idle nodes.  Errors name ``source`` and the line.
    """
    names = _checked(nodes)
    known = set(names)
    pairs: list[tuple[str, str]] = []
    first_line: dict[frozenset[str], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [f for f in _PAIR_SEPARATOR.split(line) if f]
        if len(fields) == 1:
            split = split_pair(fields[0], known)
            if split is None:
                raise PairsFileError(source, number, f"{fields[0]!r} is not a pair: write two nodes, 'nodeA nodeB'")
            fields = list(split)
        if len(fields) != 2:
            raise PairsFileError(source, number, f"{len(fields)} names where a pair has 2: {line!r}")
        a, b = fields
        unknown = [f for f in dict.fromkeys(fields) if f not in known]
        if unknown:
            raise PairsFileError(source, number, f"{' and '.join(unknown)} not in the node list ({fold(names)})")
        if a == b:
            raise PairsFileError(source, number, f"{a} is paired with itself")
        key = frozenset(fields)
        if key in first_line:
            raise PairsFileError(source, number, f"the pair {a}-{b} is already on line {first_line[key]}")
        first_line[key] = number
        pairs.append((a, b))
    if not pairs:
        raise PairPatternError(f"{source}: no pairs in the file (one pair a line: 'nodeA nodeB')")
    paired = {node for pair in pairs for node in pair}
    return PairPlan(FILE_PATTERN, pairs, [name for name in names if name not in paired], source=source)


def read_pairs_file(path: str | Path, nodes: Sequence[str]) -> PairPlan:
    """The pairs of a pairs file (format in the module docstring)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise PairPatternError(f"cannot read the pairs file {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise PairPatternError(f"the pairs file {path} is not UTF-8 text: {err}") from err
    return parse_pairs(text, nodes, source=str(path))


def pattern_pairs(
    pattern: str,
    nodes: Sequence[str],
    repetition: int = 1,
    seed: int = 0,
    pairs_file: str | Path | None = None,
) -> PairPlan:
    """The plan of a pattern named in PATTERNS, or of 'file' with ``pairs_file``.

    ``seed`` is read by shuffle and random only, ``pairs_file`` by file only.
    """
    _checked_repetition(repetition)
    if pattern == FILE_PATTERN:
        if pairs_file is None:
            raise PairPatternError("the 'file' pattern needs a pairs file")
        return replace(read_pairs_file(pairs_file, nodes), repetition=int(repetition))
    if pairs_file is not None:
        raise PairPatternError(f"a pairs file goes with the 'file' pattern, not with {pattern!r}")
    if pattern == "shuffle":
        return pairs_shuffle(nodes, seed, repetition)
    if pattern == "random":
        return pairs_random(nodes, seed, repetition)
    fixed = {"sort": pairs_sort, "cut": pairs_cut, "fold": pairs_fold}
    if pattern not in fixed:
        raise UnknownPatternError(pattern)
    return replace(fixed[pattern](nodes), repetition=int(repetition))


def all_pairs_rounds(nodes: Sequence[str]) -> list[PairPlan]:
    """Every unordered pair exactly once, in rounds of disjoint pairs.

    The circle method of round-robin tournaments: the first node stays put
    while the others turn one place a round; N-1 rounds for N even, N rounds
    for N odd (an empty seat makes the count even, and whoever faces it sits
    out, each node once).  Each pair lists the earlier node of the list first;
    the rounds are numbered from 1 as the plans' repetition.
    """
    names = _checked(nodes)
    position = {name: i for i, name in enumerate(names)}
    seats: list[str | None] = [*names, None] if len(names) % 2 else list(names)
    count = len(seats)
    rounds = []
    for number in range(1, count):
        pairs: list[tuple[str, str]] = []
        idle: list[str] = []
        for i in range(count // 2):
            a, b = seats[i], seats[count - 1 - i]
            if a is None or b is None:
                idle.append(a if b is None else b)
            else:
                pairs.append((a, b) if position[a] < position[b] else (b, a))
        rounds.append(PairPlan(ALL_PAIRS, sorted(pairs, key=lambda p: position[p[0]]), idle, repetition=number))
        seats = [seats[0], seats[-1], *seats[1:-1]]
    return rounds


def ordered_rounds(nodes: Sequence[str]) -> list[PairPlan]:
    """Every ordered pair exactly once, in rounds of disjoint pairs.

    The rounds of all_pairs_rounds, then the same rounds with each pair
    reversed: 2(N-1) rounds for N even, 2N for N odd.  For measurements that
    differ by direction (the first node sends, the second receives).
    """
    forward = all_pairs_rounds(nodes)
    total = len(forward)
    plans = [replace(plan, pattern=ORDERED_PAIRS) for plan in forward]
    plans += [
        PairPlan(ORDERED_PAIRS, [(b, a) for a, b in plan.pairs], list(plan.idle), repetition=total + plan.repetition)
        for plan in forward
    ]
    return plans
