"""Inventory facts that differ between nodes that should be identical
(STAB's diagnostics: BIOS dates, memory sizes, kernel versions), and
processes that run on some nodes only (seaborg's node asymmetry).

How values are compared.  Nothing depends on a key's name, its units or
the nodes' names: a site's ``MemTotal``, ``physmem_kb`` or ``Mem Total (kB)``
is judged as our ``memory_total_kb`` is.

- Text is compared exactly; so are numbers unless one of the three cases
  below applies.  ``64`` cores against ``62``, MTU ``9000`` against ``1500``,
  BIOS ``20240112`` against ``20240113``, driver ``535.104`` against
  ``535.129``: every differing value is named, however small the difference.
- **Close integers.**  Integers within CLOSE_RELATIVE (10 ppm) of one
  another are one value, two or three or more of them, whichever holds the
  majority: MemTotal 263856012 kB on half the nodes and 263856016 on the
  others (a firmware reserving a page more) is one value, and a node with a
  quarter less is named alone.  Counts, MTUs and build numbers below
  100,000 are farther apart than that; an integer shaped as a date
  (YYYYMMDD: a year 1970 to 2099, a real month and day) is an identifier and
  never merged.  When several groups of close integers exist, the one with
  the most nodes is the value.
- **Jitter.**  When no value is held by more than half of the nodes and the numbers
  take at least MIN_JITTER_VALUES distinct values, they are one quantity
  that varies from node to node (MemTotal in kB, CPU MHz, bogomips).  The
  values within JITTER_SIGMAS robust standard deviations or JITTER_RELATIVE
  of their median are one value; a node outside that band is named alone,
  with its value and the range of the others.  Jitter is one cluster: two
  jittering kinds of nodes (half with 256 GiB, half with 512) are told apart
  by the empty gap between them.
- **Rounding.**  A number written with decimals is a measurement rounded to
  its last digit.  When the jitter is finer than that digit (251.6 GiB on
  most nodes, 251.7 on those whose MemTotal sits across the rounding
  boundary), values at most ROUNDING_STEPS steps of that digit from the most
  common value are that value, provided the step is below ROUNDING_RELATIVE
  of it (so 5.14 against 5.15, a version, stays a difference).

So a value held by more than half of the nodes is what the others are
compared with, exactly up to close integers and rounding; a spread of many
values is judged by its own spread.  Integers are never rounded: counts,
build numbers and dates must match.  A fact that oddnode derives from another (DERIVED_FACTS)
is judged once, on the fact it comes from.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date

import numpy as np

from oddnode.findings.processes import (
    NOT_RUNNING,
    PROCESS_PREFIX,
    RUNNING,
    SEEN_BRIEFLY,
    is_process_key,
    is_sampled_key,
    is_warning,
    process_reporting_nodes,
    process_state,
    process_wording,
    sampled_key,
)
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import DEFAULT_METRIC, Dataset, Direction, Finding, LabelKind, Series, Severity
from oddnode.core.nodes import fold
from oddnode.core.order import natural_key
from oddnode.onnode.fact_rules import NOT_REPORTED, NUMBER_TEXT, parse_number
from oddnode.onnode.node_probe import SENSOR_PREFIX

__all__ = [
    "DERIVED_FACTS",
    "FACT_PREFIX",
    "MESSAGE_VALUES",
    "NOT_REPORTED",
    "OneValue",
    "inconsistent_facts",
    "is_date_shaped",
    "one_value",
    "fact_series",
    "parse_number",
    "series_or_fact",
    "written_decimals",
]

# The value shown for a node that reported other facts but not this one.
# How many minority values a message spells out.
MESSAGE_VALUES = 5

# Jitter needs at least this many distinct numbers: fewer, none held by more
# than half the nodes, are kinds of nodes (three BIOS builds, two memory
# sizes), each named.  Four, because jitter written coarsely repeats at
# small N: bogomips to 0.01 with a spread of 0.05 takes four values or fewer
# on 8 to 20 nodes in about one cluster of 150, three or fewer in one of 1,500.
MIN_JITTER_VALUES = 4
# 1.4826 turns a normal distribution's median absolute deviation into its
# standard deviation.
MAD_TO_SIGMA = 1.4826
# Half-width of the jitter band in robust standard deviations.  Identical
# nodes' values lie within 5.5 of them at up to 10,000 nodes when the jitter
# is normal, 14 when it is Laplace-shaped; at 8 nodes the MAD itself is so
# uncertain that these reach 18 and 36 in one cluster of 2,000 (the 1% floor
# below covers the rest).  25 keeps a healthy spread whole while a different
# part (a DIMM of 64 less is 1.6% of MemTotal, thousands of its MB-wide
# jitter) stays far outside.
JITTER_SIGMAS = 25.0
# ... and never narrower than 1% of the median: jitter with heavy tails
# (a few nodes reserving a few MB more) stays whole, and any part a site
# would notice (one DIMM of 64, a CPU clock step) is larger.
JITTER_RELATIVE = 0.01
# Rounding: values up to two steps of their last digit from the most common
# one are the same quantity when the jitter straddles a rounding boundary
# (one step) or is up to one step wide (two) ...
ROUNDING_STEPS = 2
# ... and that step is below 0.1% of the value: 251.6 GiB (0.04%) rounds,
# a version such as 5.14 (0.2%) or 2.10 does not.
ROUNDING_RELATIVE = 0.001

# Close integers: values within 10 ppm of one another are one value however
# many nodes hold each (a firmware reserving a few pages more: 4 kB of 256 GiB
# is 0.015 ppm; MemTotal read in MB, one step of 1 MB of 100 GiB, is 10 ppm).
# An integer below 100,000 is farther than that from its neighbour (1 of
# 99,999 is 10.0001 ppm), so counts, MTUs, ports, speeds and build numbers
# of five digits stay exact; larger integers that are identifiers are dates
# (YYYYMMDD, kept exact by their shape), or identifiers that differ by more:
# a driver packed as 535104 against 535129 is 47 ppm apart.  Decimals are
# left to the rounding rule: 535.104 against 535.129 may be versions.
CLOSE_RELATIVE = 1e-5

# Facts that oddnode's inventory derives from another one (collect.py's
# derive_facts: memory_total_gib from memory_total_kb, for expectations such
# as "memory_total_gib: {min: 255}"): not a second observation, so a
# difference is judged once, on the fact they come from.  A site's own key
# in other units is a key of its own and is judged like any other.
DERIVED_FACTS = frozenset({"memory_total_gib"})

# Many numbers, one a line (a plain number: onnode/fact_rules.py's).
_NUMBERS = re.compile(f"(?:{NUMBER_TEXT}\n)*")


# The prefix that names a fact where a benchmark is named (correlate, dist):
# ``fact:cpu_temp_c``.
FACT_PREFIX = "fact:"


def fact_series(dataset: Dataset, name: str) -> Series:
    """A numeric fact as a series over the nodes that report it as a plain
    number (``fact:KEY``), to correlate with a benchmark: a temperature, a
    fan speed, a throttling count.  KeyError naming the fact keys when none
    is numeric or the key is unknown."""
    key = name.removeprefix(FACT_PREFIX)
    per_node = dataset.facts.get(key)
    if per_node is None:
        raise KeyError(f"no fact named {key!r} in the store (facts: {first_few(sorted(dataset.facts), 12)})")
    numbers = {node: number for node, value in per_node.items() if (number := parse_number(value)) is not None}
    if not numbers:
        raise KeyError(f"fact {key!r} is not a number on any node")
    labels = sorted(numbers, key=natural_key)
    return Series(benchmark=name, metric=DEFAULT_METRIC, unit="", direction=Direction.HIGHER,
                  label_kind=LabelKind.NODE, labels=np.array(labels, dtype=object),
                  values=np.array([numbers[node] for node in labels], dtype=np.float64),
                  repetitions=np.ones(len(labels), dtype=np.int64))


def series_or_fact(dataset: Dataset, name: str) -> Series:
    """The series ``name`` names, or the numeric fact ``fact:KEY``."""
    return fact_series(dataset, name) if name.startswith(FACT_PREFIX) else dataset.by_name(name)


def written_decimals(text: str) -> int:
    """Digits after the decimal point of a plain number ("251.60": 2), 0 for
    integers and exponent notation (whose last digit says nothing of rounding)."""
    text = text.strip()
    if "e" in text.lower() or "." not in text:
        return 0
    return len(text.split(".", 1)[1])


@dataclass(frozen=True)
class OneValue:
    """Distinct values of one fact that are one value: a jittering quantity
    or a rounding of one.

    centre: the value shown for them all (one that a node holds);
    members: the texts merged; low, high: their smallest and largest;
    band: the numbers [low, high] that count as this value;
    reason: "jitter", "close" or "rounding".
    """

    centre: str
    members: frozenset[str]
    low: str
    high: str
    band: tuple[float, float]
    reason: str

    def evidence(self) -> dict[str, object]:
        return {"reason": self.reason, "range": [self.low, self.high], "band": list(self.band)}


def _numeric(counts: dict[str, int]) -> list[tuple[float, str, int]]:
    """(number, text, count) of the values that are plain numbers."""
    texts = [str(text).strip() for text in counts]
    if _NUMBERS.fullmatch("\n".join(texts) + "\n"):  # all numbers: one regex and one conversion
        return list(zip(np.array(texts, dtype=float).tolist(), counts, counts.values()))
    return [(number, text, count) for text, count in counts.items() if (number := parse_number(text)) is not None]


def one_value(counts: dict[str, int]) -> OneValue | None:
    """The values of ``counts`` (text -> nodes holding it) that are one value
    by jitter, closeness or rounding (see the module's docstring), or None when every
    distinct value stands for itself."""
    numeric = _numeric(counts)
    if len(numeric) < 2:
        return None
    numbers = np.array([number for number, _, _ in numeric])
    weights = np.array([count for _, _, count in numeric])
    top = int(np.argmax(weights))
    if 2 * weights[top] <= weights.sum() and len(numeric) >= MIN_JITTER_VALUES:
        return _jitter(numeric, numbers, weights)
    return _close(numeric) or _rounding(numeric, numbers, top)


def is_date_shaped(text: str) -> bool:
    """Whether an integer reads as a date YYYYMMDD (a year 1970 to 2099, a
    real month and day): a firmware or BIOS build date, an identifier."""
    text = text.strip()
    if len(text) != 8 or not text.isdigit() or not "1970" <= text[:4] <= "2099":
        return False
    try:
        date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        return False
    return True


def _close(numeric: list[tuple[float, str, int]]) -> OneValue | None:
    """The integers within CLOSE_RELATIVE of each other that hold the most
    nodes, when there are two or more of them (see the module's docstring)."""
    sizes = sorted((number, text, count) for number, text, count in numeric
                   if written_decimals(text) == 0 and "e" not in text.lower() and not is_date_shaped(text))
    groups: list[list[tuple[float, str, int]]] = []
    for item in sizes:  # from the lowest: a group spans at most the band of its highest value
        if groups and item[0] - groups[-1][0][0] <= CLOSE_RELATIVE * abs(item[0]):
            groups[-1].append(item)
        else:
            groups.append([item])
    groups = [group for group in groups if len(group) > 1]
    if not groups:
        return None
    group = max(groups, key=lambda members: sum(count for _, _, count in members))  # the first of a tie
    centre = min(group, key=lambda item: (-item[2], item[0]))  # its most common value, the lower of a tie
    # The band: every number that would join the group (within the band of
    # its highest value, and its lowest within the band of it).
    low, high = group[0][0], group[-1][0]
    band = (high - CLOSE_RELATIVE * abs(high), low + CLOSE_RELATIVE * abs(low))
    return OneValue(centre[1], frozenset(text for _, text, _ in group), group[0][1], group[-1][1], band, "close")


def _median_and_sigma(numbers: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """The median of nodes' values and their robust standard deviation (MAD-based)."""
    every = np.repeat(numbers, weights)  # one entry per node
    median = float(np.median(every))
    return median, MAD_TO_SIGMA * float(np.median(np.abs(every - median)))


def _jitter(numeric: list[tuple[float, str, int]], numbers: np.ndarray, weights: np.ndarray) -> OneValue:
    order = np.argsort(numbers, kind="stable")
    numeric, numbers, weights = [numeric[i] for i in order], numbers[order], weights[order]
    median, sigma = _median_and_sigma(numbers, weights)
    # Two kinds of jittering nodes, half and half (256 and 512 GiB), put the
    # median between them and the MAD across the gap: one band would hold
    # both.  Jitter is one cluster: when the widest empty gap exceeds the
    # band's relative floor and JITTER_SIGMAS of each side's own spread (each
    # side jittering over MIN_JITTER_VALUES values at least), the band is
    # drawn on the side with more nodes.
    gaps = np.diff(numbers)
    split = int(np.argmax(gaps)) + 1
    if min(split, len(numbers) - split) >= MIN_JITTER_VALUES:
        sides = (slice(0, split), slice(split, None))
        spreads = [_median_and_sigma(numbers[side], weights[side]) for side in sides]
        widest = float(gaps[split - 1])
        if widest > JITTER_RELATIVE * abs(median) and widest > JITTER_SIGMAS * max(s for _, s in spreads):
            larger = int(weights[split:].sum() > weights[:split].sum())
            median, sigma = spreads[larger]
    half_width = max(JITTER_SIGMAS * sigma, JITTER_RELATIVE * abs(median))
    inside = np.flatnonzero(np.abs(numbers - median) <= half_width)
    closest = inside[np.argmin(np.abs(numbers[inside] - median))]  # the lower of two equally close
    members = frozenset(numeric[i][1] for i in inside)
    return OneValue(numeric[closest][1], members, numeric[inside[0]][1], numeric[inside[-1]][1],
                    (median - half_width, median + half_width), "jitter")


def _rounding(numeric: list[tuple[float, str, int]], numbers: np.ndarray, top: int) -> OneValue | None:
    value, text, _ = numeric[top]
    decimals = written_decimals(text)
    step = 10.0**-decimals
    if decimals == 0 or step >= ROUNDING_RELATIVE * abs(value):
        return None
    # Half a step of slack: the numbers are binary approximations of decimals.
    reach = (ROUNDING_STEPS + 0.5) * step
    members = [numeric[i] for i in np.flatnonzero(np.abs(numbers - value) <= reach)
               if written_decimals(numeric[i][1]) == decimals]
    if len(members) < 2:
        return None
    return OneValue(text, frozenset(member for _, member, _ in members), min(members)[1], max(members)[1],
                    (value - ROUNDING_STEPS * step, value + ROUNDING_STEPS * step), "rounding")


def _value_key(item: tuple[str, list[str]]) -> tuple[int, str]:
    value, nodes = item
    return (-len(nodes), value)


def _group_values(per_node: dict[str, str], merged: OneValue | None) -> dict[str, list[str]]:
    """Nodes by value, the merged values under their centre."""
    nodes_by_value: dict[str, list[str]] = defaultdict(list)
    members = merged.members if merged is not None else frozenset()
    for node, value in per_node.items():
        text = str(value)
        nodes_by_value[merged.centre if text in members else text].append(node)
    return nodes_by_value


def _process_values(key: str, facts: dict[str, dict[str, str]], process_nodes: set[str],
                    inventory: set[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Nodes by process state (running, seen briefly, not running), and the
    sampling text of the nodes that reported one."""
    sampling = facts.get(sampled_key(key), {})
    nodes_by_value: dict[str, list[str]] = defaultdict(list)
    if not sampling and all(value == RUNNING for value in facts[key].values()):
        nodes_by_value[RUNNING] = list(facts[key])  # the common case, kept cheap
    else:
        for node, value in facts[key].items():
            nodes_by_value[process_state(str(value), sampling.get(node))].append(node)
    absent = inventory.difference(facts[key])
    if absent & process_nodes:
        nodes_by_value[NOT_RUNNING].extend(absent & process_nodes)
    if absent - process_nodes:
        nodes_by_value[NOT_REPORTED].extend(absent - process_nodes)
    return nodes_by_value, sampling


@rule("inconsistent-fact")
def inconsistent_facts(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """One finding per fact key whose value is not the same on every node:
    numbers that jitter, close integers and rounded ones count as one value (see the module's
    docstring); process.* keys read an absent key as "not running" on nodes
    that reported their processes, and their process_seen.* keys say
    whether a node runs the command steadily or saw it briefly."""
    inventory = dataset.inventory_nodes()
    process_nodes = process_reporting_nodes(dataset.facts)
    findings = []
    for key in sorted(dataset.facts):
        if is_sampled_key(key) or key in DERIVED_FACTS or key.startswith(SENSOR_PREFIX):
            continue  # read with its process.* key; judged on the fact it derives from; a measurement
        per_node = dataset.facts[key]
        merged = None
        sampling: dict[str, str] = {}
        if is_process_key(key):
            nodes_by_value, sampling = _process_values(key, dataset.facts, process_nodes, inventory)
        else:
            values = list(per_node.values())
            if values and len(values) == len(inventory) and values.count(values[0]) == len(values):
                continue  # the common case, kept cheap: one value on every node
            counts = Counter(map(str, values))
            merged = one_value(counts) if len(counts) > 1 else None
            whole = merged is not None and len(merged.members) == len(counts)
            if whole and len(per_node) == len(inventory):
                continue  # every value is one jittering or rounded value
            nodes_by_value = _group_values(per_node, merged)
            absent = inventory.difference(per_node)
            if absent:
                nodes_by_value[NOT_REPORTED].extend(absent)
        if len(nodes_by_value) < 2:
            continue
        findings.append(_finding(key, nodes_by_value, merged, sampling))
    return findings


def _finding(key: str, nodes_by_value: dict[str, list[str]], merged: OneValue | None,
             sampling: dict[str, str]) -> Finding:
    ranked = sorted(nodes_by_value.items(), key=_value_key)
    (top_value, top_nodes), (_, second_nodes) = ranked[0], ranked[1]
    majority = len(top_nodes) > len(second_nodes)
    top_folded = "" if majority else fold(top_nodes)  # 10,000 nodes take 40 ms to fold: only when shown
    minority = {value: fold(nodes) for value, nodes in ranked[1:]}
    odd_nodes = fold(node for _, nodes in ranked[1:] for node in nodes)
    shown = first_few([f"{nodes}: {value}" for value, nodes in minority.items()], MESSAGE_VALUES,
                      separator="; ", rest="more values")
    within = ""
    if merged is not None and top_value == merged.centre:
        within = f" ({merged.low} to {merged.high}: one value, {merged.reason})"
    if majority:
        message = f"all nodes but {odd_nodes} have {key} {top_value}{within}; {shown}"
    else:
        message = (
            f"no value of {key} is held by a majority: {top_folded}: {top_value}{within} "
            f"({len(top_nodes)} nodes), tied with {len(second_nodes)}; {shown}"
        )
    target = f"{top_value}, the majority's value" if majority else "one agreed value"
    remedy = (
        f"Nodes meant to be identical differ in {key}: bring {odd_nodes} to {target} "
        "(update firmware, replace or reseat parts, fix the configuration), then rerun the diagnostics."
    )
    severity = Severity.WARNING
    evidence: dict[str, object] = {
        "key": key,
        "majority": top_value if majority else None,
        "largest": top_value,
        "counts": {value: len(nodes) for value, nodes in ranked},
        "minority": minority,
    }
    if merged is not None:
        evidence["one_value"] = merged.evidence()
    if is_process_key(key) and set(nodes_by_value) <= {RUNNING, NOT_RUNNING, SEEN_BRIEFLY}:
        brief = {node: sampling[node] for node in nodes_by_value.get(SEEN_BRIEFLY, ())
                 if node in sampling and top_value != SEEN_BRIEFLY}
        message, remedy = process_wording(key, (top_value, top_folded), minority, odd_nodes, majority, brief)
        if not is_warning(top_value, set(minority)):
            severity = Severity.INFO
        if brief:
            evidence["sampling"] = dict(sorted(brief.items()))
    return Finding(kind="inconsistent-fact", severity=severity, subject=key, nodes=odd_nodes,
                   message=message, evidence=evidence, remedy=remedy)
