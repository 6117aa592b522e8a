"""Inventory facts that differ between nodes that should be identical
(STAB's diagnostics: BIOS dates, memory sizes, kernel versions), and
processes that run on some nodes only (seaborg's node asymmetry)."""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from fnmatch import fnmatchcase

from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.model import Dataset, Finding, Severity
from oddnode.nodes import fold

# The value shown for a node that reported other facts but not this one.
NOT_REPORTED = "(not reported)"
# How many minority values a message spells out.
MESSAGE_VALUES = 5

# Fact keys (fnmatch patterns) compared as numbers, within a relative
# tolerance of the majority's median.  MemTotal is what is left after the
# kernel's own reservations (its image, the crash kernel, the firmware's
# reserved ranges), which differ slightly from boot to boot and between BIOS
# releases: identical nodes differ by a few MB.  2% hides that, yet one
# missing DIMM of 16 (6%) or of 32 (3%) still shows.
MEMORY_TOLERANCE = 0.02
TOLERANT_FACTS: dict[str, float] = {
    "memory_total_kb": MEMORY_TOLERANCE,
    "memory_total_gib": MEMORY_TOLERANCE,
    "numa.*.memory_kb": MEMORY_TOLERANCE,
}

# Facts that restate another in other units, kept for expectations
# ("memory_total_gib: {min: 255}"): a difference is judged once, on the
# original, not reported twice.
RESTATED_FACTS = frozenset({"memory_total_gib"})

# process.<comm> facts: the probe reports "running" for every command name
# it sees; a node that reports processes but not this one does not run it.
PROCESS_PREFIX = "process."
RUNNING = "running"
NOT_RUNNING = "not running"

# A plain decimal number: what a numeric fact looks like ("nan", "inf" and
# "1_000", which float() also takes, are text).
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_number(text: str) -> float | None:
    """The value of a fact written as a plain decimal number, else None."""
    text = str(text).strip()
    return float(text) if _NUMBER.match(text) else None


def tolerance_for(key: str) -> float | None:
    """The relative tolerance of a numeric fact key, or None for exact comparison."""
    for pattern, tolerance in TOLERANT_FACTS.items():
        if fnmatchcase(key, pattern):
            return tolerance
    return None


def is_process_key(key: str) -> bool:
    return key.startswith(PROCESS_PREFIX)


def process_reporting_nodes(facts: dict[str, dict[str, str]]) -> set[str]:
    """Nodes that reported a process list: only they can be said not to run a command."""
    nodes: set[str] = set()
    for key, per_node in facts.items():
        if is_process_key(key):
            nodes.update(per_node)
    return nodes


def tolerant_majority(per_node: dict[str, str], tolerance: float) -> tuple[str, list[str]] | None:
    """The largest group of nodes whose numeric values lie within ``tolerance``
    (relative) of the group's median: (the median node's value, the nodes).

    Each value is tried as a centre (O(n log n) with bisection); the fullest
    band wins, then is re-centred on its own median so that the answer does
    not depend on which edge of the group the winning centre sat.
    None when no value is numeric.
    """
    numeric = sorted(
        (number, node, str(value))
        for node, value in per_node.items()
        if (number := parse_number(value)) is not None
    )
    if not numeric:
        return None
    numbers = [number for number, _, _ in numeric]

    def band(centre: float) -> tuple[int, int]:
        spread = tolerance * abs(centre)
        return bisect.bisect_left(numbers, centre - spread), bisect.bisect_right(numbers, centre + spread)

    fullest, best = -1, 0
    for index, number in enumerate(numbers):
        low, high = band(number)
        if high - low > fullest:
            fullest, best = high - low, index
    low, high = band(numbers[best])
    median_index = low + (high - low - 1) // 2  # the lower median: a value some node holds
    low, high = band(numbers[median_index])
    members = [node for _, node, _ in numeric[low:high]]
    return numeric[median_index][2], sorted(members)


def _value_key(item: tuple[str, list[str]]) -> tuple[int, str]:
    value, nodes = item
    return (-len(nodes), value)


def _group_values(
    key: str, per_node: dict[str, str], inventory: set[str], process_nodes: set[str]
) -> tuple[dict[str, list[str]], dict[str, object]]:
    """Nodes by value, tolerant keys' near-equal values merged into one group,
    absent nodes under NOT_RUNNING or NOT_REPORTED; plus evidence to add."""
    nodes_by_value: dict[str, list[str]] = defaultdict(list)
    extra: dict[str, object] = {}
    remaining = dict(per_node)
    tolerance = tolerance_for(key)
    if tolerance is not None:
        group = tolerant_majority(per_node, tolerance)
        if group is not None:
            centre, members = group
            nodes_by_value[centre].extend(members)
            for node in members:
                del remaining[node]
            by_number = sorted((parse_number(per_node[node]), str(per_node[node])) for node in members)
            extra = {"tolerance": tolerance, "majority_range": [by_number[0][1], by_number[-1][1]]}
    for node, value in remaining.items():
        nodes_by_value[str(value)].append(node)
    absent = inventory.difference(per_node)
    if is_process_key(key):
        not_running = absent & process_nodes
        if not_running:
            nodes_by_value[NOT_RUNNING].extend(not_running)
        absent -= not_running
    if absent:
        nodes_by_value[NOT_REPORTED].extend(absent)
    return nodes_by_value, extra


def _process_wording(
    key: str, top_value: str, top_nodes: list[str], odd_nodes: str, majority: bool
) -> tuple[str, str]:
    """Message and remedy for a command that runs on some nodes only."""
    comm = key[len(PROCESS_PREFIX):]
    why = (
        "A command that runs on only some of the nodes meant to be identical takes CPU time from "
        "synchronising parallel codes there, which then wait for those nodes (seaborg's node asymmetry): "
    )
    if not majority:
        running = fold(top_nodes) if top_value == RUNNING else odd_nodes
        idle = odd_nodes if top_value == RUNNING else fold(top_nodes)
        message = f"{comm} runs on {running} and is not running on {idle}; neither is a majority"
        return message, why + f"decide whether {comm} belongs on these nodes and make them all agree."
    if top_value == RUNNING:
        message = f"{comm} runs on every node but {odd_nodes}: not running on {odd_nodes}"
        remedy = why + f"start {comm} on {odd_nodes} if it is needed, or find out why it stopped there."
    else:
        message = f"{comm} runs on {odd_nodes} only"
        remedy = why + f"stop {comm} on {odd_nodes} (and disable it) unless those nodes have a reason to run it."
    return message, remedy


@rule("inconsistent-fact")
def inconsistent_facts(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """One finding per fact key whose value is not the same on every node.

    Keys in TOLERANT_FACTS count values within their tolerance of the
    majority's median as the same; process.* keys read an absent key as
    "not running" on nodes that reported their processes.
    """
    inventory = dataset.inventory_nodes()
    process_nodes = process_reporting_nodes(dataset.facts)
    findings = []
    for key in sorted(dataset.facts.keys() - RESTATED_FACTS):
        per_node = dataset.facts[key]
        nodes_by_value, extra = _group_values(key, per_node, inventory, process_nodes)
        if len(nodes_by_value) < 2:
            continue
        ranked = sorted(nodes_by_value.items(), key=_value_key)
        (top_value, top_nodes), (_, second_nodes) = ranked[0], ranked[1]
        majority = len(top_nodes) > len(second_nodes)
        minority = {value: fold(nodes) for value, nodes in ranked[1:]}
        odd_nodes = fold(node for _, nodes in ranked[1:] for node in nodes)
        shown = first_few([f"{nodes}: {value}" for value, nodes in minority.items()], MESSAGE_VALUES,
                          separator="; ", rest="more values")
        within = f" (within {extra['tolerance']:.0%})" if extra else ""
        if majority:
            message = f"all nodes but {odd_nodes} have {key} {top_value}{within}; {shown}"
        else:
            message = (
                f"no value of {key} is held by a majority: {fold(top_nodes)}: {top_value}{within} "
                f"({len(top_nodes)} nodes), tied with {len(second_nodes)}; {shown}"
            )
        target = f"{top_value}, the majority's value" if majority else "one agreed value"
        remedy = (
            f"Nodes meant to be identical differ in {key}: bring {odd_nodes} to {target} "
            "(update firmware, replace or reseat parts, fix the configuration), then rerun the diagnostics."
        )
        if is_process_key(key) and set(nodes_by_value) <= {RUNNING, NOT_RUNNING}:
            message, remedy = _process_wording(key, top_value, top_nodes, odd_nodes, majority)
        findings.append(
            Finding(
                kind="inconsistent-fact",
                severity=Severity.WARNING,
                subject=key,
                nodes=odd_nodes,
                message=message,
                evidence={
                    "key": key,
                    "majority": top_value if majority else None,
                    "largest": top_value,
                    "counts": {value: len(nodes) for value, nodes in ranked},
                    "minority": minority,
                    **extra,
                },
                remedy=remedy,
            )
        )
    return findings
