"""Synthetic series of node and pair results with planted outliers, for the
finding rules and the reports."""

from __future__ import annotations


import numpy as np

from oddnode.core.model import Direction, LabelKind, Series, Severity


def node_names(n: int) -> list[str]:
    width = max(3, len(str(n)))
    return [f"node{i:0{width}d}" for i in range(1, n + 1)]


def make_series(
    benchmark: str,
    labels: list[str],
    values,
    kind: LabelKind = LabelKind.NODE,
    direction: Direction = Direction.HIGHER,
    unit: str = "MB/s",
) -> Series:
    labels_array = np.asarray(labels, dtype=object)
    values_array = np.asarray(values, dtype=np.float64)
    order = np.argsort(labels_array, kind="stable")
    return Series(
        benchmark=benchmark,
        metric="value",
        unit=unit,
        direction=direction,
        label_kind=kind,
        labels=labels_array[order],
        values=values_array[order],
        repetitions=np.ones(len(labels_array), dtype=np.int64),
    )


def pair_patterns(nodes: list[str], rng: np.random.Generator) -> dict[str, list[tuple[str, str]]]:
    """STAB's four ping-pong patterns: neighbours, halves, mirror, random."""
    n = len(nodes)
    half = n // 2
    shuffled = [nodes[i] for i in rng.permutation(n)]
    return {
        "sort": [(nodes[i], nodes[i + 1]) for i in range(0, n - 1, 2)],
        "cut": [(nodes[i], nodes[i + half]) for i in range(half)],
        "fold": [(nodes[i], nodes[n - 1 - i]) for i in range(half)],
        "shuffle": [tuple(sorted(shuffled[i : i + 2])) for i in range(0, n - 1, 2)],
    }


def pair_series(
    nodes: list[str],
    rng: np.random.Generator,
    slowdown=lambda a, b: 1.0,
    cv: float = 0.02,
    base: float = 233.0,
    prefix: str = "spp",
) -> list[Series]:
    """One bandwidth series per pattern; slowdown(a, b) scales a pair's bandwidth."""
    out = []
    for pattern, pairs in pair_patterns(nodes, rng).items():
        values = [base * (1 + cv * rng.standard_normal()) * slowdown(a, b) for a, b in pairs]
        out.append(make_series(f"{prefix}.{pattern}.bw", [f"{a}-{b}" for a, b in pairs], values, LabelKind.PAIR))
    return out


def warnings_and_errors(findings):
    return [f for f in findings if f.severity.rank >= Severity.WARNING.rank]


def processes(nodes: list[str], only_on: dict[str, list[str]], everywhere=("sshd",)) -> dict[str, dict[str, str]]:
    """process.* facts: `everywhere` on every node, each command of `only_on` on its nodes."""
    facts = {f"process.{command}": {node: "running" for node in nodes} for command in everywhere}
    for command, running in only_on.items():
        facts[f"process.{command}"] = {node: "running" for node in running}
    return facts


def memory(nodes: list[str], factor: dict[str, float], seed: int = 3):
    rng = np.random.default_rng(seed)
    values = rng.normal(2000.0, 20.0, len(nodes)) * [factor.get(node, 1.0) for node in nodes]
    return make_series("memory.triad", nodes, values)
