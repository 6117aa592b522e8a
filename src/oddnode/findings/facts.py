"""Inventory facts that differ between nodes that should be identical
(STAB's diagnostics: BIOS dates, memory sizes, kernel versions)."""

from __future__ import annotations

from collections import defaultdict

from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.model import Dataset, Finding, Severity
from oddnode.nodes import fold

# The value shown for a node that reported other facts but not this one.
NOT_REPORTED = "(not reported)"
# How many minority values a message spells out.
MESSAGE_VALUES = 5


def _value_key(item: tuple[str, list[str]]) -> tuple[int, str]:
    value, nodes = item
    return (-len(nodes), value)


@rule("inconsistent-fact")
def inconsistent_facts(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """One finding per fact key whose value is not the same on every node."""
    inventory = dataset.inventory_nodes()
    findings = []
    for key in sorted(dataset.facts):
        per_node = dataset.facts[key]
        nodes_by_value: dict[str, list[str]] = defaultdict(list)
        for node, value in per_node.items():
            nodes_by_value[str(value)].append(node)
        absent = inventory.difference(per_node)
        if absent:
            nodes_by_value[NOT_REPORTED].extend(absent)
        if len(nodes_by_value) < 2:
            continue
        ranked = sorted(nodes_by_value.items(), key=_value_key)
        (top_value, top_nodes), (_, second_nodes) = ranked[0], ranked[1]
        majority = len(top_nodes) > len(second_nodes)
        minority = {value: fold(nodes) for value, nodes in ranked[1:]}
        odd_nodes = fold(node for _, nodes in ranked[1:] for node in nodes)
        shown = first_few([f"{nodes}: {value}" for value, nodes in minority.items()], MESSAGE_VALUES,
                          separator="; ", rest="more values")
        if majority:
            message = f"all nodes but {odd_nodes} have {key} {top_value}; {shown}"
        else:
            message = (
                f"no value of {key} is held by a majority: {fold(top_nodes)}: {top_value} "
                f"({len(top_nodes)} nodes), tied with {len(second_nodes)}; {shown}"
            )
        target = f"{top_value}, the majority's value" if majority else "one agreed value"
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
                },
                remedy=(
                    f"Nodes meant to be identical differ in {key}: bring {odd_nodes} to {target} "
                    "(update firmware, replace or reseat parts, fix the configuration), then rerun the diagnostics."
                ),
            )
        )
    return findings
