"""Accuracy failures, traced to the nodes they have in common (STAB's
``checkresults`` followed by ``xcommon``)."""

from __future__ import annotations

from collections import Counter, defaultdict

from oddnode.findings.registry import Sensitivity, rule
from oddnode.core.model import Dataset, Failure, Finding, LabelKind, Severity
from oddnode.core.nodes import fold

# A node common to fewer failed multi-node runs than this is not named: one
# failed run of eight nodes says nothing about which of the eight is bad.
MIN_COMMON_RUNS = 2
# How many failed labels the evidence of an unexplained remainder lists.
EVIDENCE_LABELS = 50


def _members(failure: Failure) -> tuple[str, ...]:
    return failure.members or (failure.label,)


def _is_single_node(failure: Failure) -> bool:
    return failure.label_kind is LabelKind.NODE or len(_members(failure)) == 1


def common_node_cover(runs: list[Failure]) -> tuple[list[tuple[str, list[int]]], list[int]]:
    """Greedy cover of failed multi-node runs by their common nodes.

    Repeatedly names the node in the most runs not yet explained, with those
    runs, and marks them explained; stops when every run is explained or the
    best remaining node is in fewer than MIN_COMMON_RUNS of them.  Returns the
    named nodes with their run indices, and the indices left unexplained.
    """
    runs_of: dict[str, list[int]] = defaultdict(list)
    for index, failure in enumerate(runs):
        for node in set(_members(failure)):
            runs_of[node].append(index)
    unexplained_count = {node: len(indices) for node, indices in runs_of.items()}
    explained = [False] * len(runs)
    named: list[tuple[str, list[int]]] = []
    remaining = len(runs)
    while remaining and unexplained_count:
        # Most unexplained runs first; ties by name so the result is stable.
        best = min(unexplained_count, key=lambda node: (-unexplained_count[node], node))
        if unexplained_count[best] < MIN_COMMON_RUNS:
            break
        credited = [i for i in runs_of[best] if not explained[i]]
        for i in credited:
            explained[i] = True
            for node in set(_members(runs[i])):
                unexplained_count[node] -= 1
        remaining -= len(credited)
        named.append((best, credited))
    return named, [i for i, done in enumerate(explained) if not done]


def _runs(count: int, adjective: str = "") -> str:
    return f"{count} {adjective}run{'' if count == 1 else 's'}"


def _counts_text(counts: Counter) -> str:
    return ", ".join(f"{benchmark}: {count}" for benchmark, count in sorted(counts.items()))


@rule("accuracy")
def accuracy(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Every node that failed a single-node accuracy check, and the nodes
    common to failed multi-node runs."""
    single: dict[str, Counter] = defaultdict(Counter)
    multi_runs: list[Failure] = []
    for failure in dataset.failures:
        if _is_single_node(failure):
            single[_members(failure)[0]][failure.benchmark] += 1
        else:
            multi_runs.append(failure)
    named, unexplained = common_node_cover(multi_runs)
    multi: dict[str, Counter] = {}
    for node, indices in named:
        multi[node] = Counter(multi_runs[i].benchmark for i in indices)

    findings = []
    for node in sorted(set(single) | set(multi)):
        alone, common = single.get(node, Counter()), multi.get(node, Counter())
        parts = []
        if alone:
            runs = _runs(sum(alone.values()), "single-node " if common else "")
            parts.append(f"failed accuracy checks in {runs} ({_counts_text(alone)})")
        if common:
            parts.append(f"is common to {_runs(sum(common.values()), 'failed multi-node ')} ({_counts_text(common)})")
        benchmarks = alone + common
        if alone:
            remedy = (
                f"{node} fails on its own: replace memory, processors, then system board, in that order, "
                "rerunning the failed benchmark after each."
            )
        else:
            remedy = (
                f"Run {node}'s single-node benchmarks (STREAM, HPL on one node) with their accuracy checks "
                "first; if they pass, check its interconnect card and cable, then replace memory, "
                "processors and system board in that order."
            )
        findings.append(
            Finding(
                kind="accuracy",
                severity=Severity.ERROR,
                subject=", ".join(sorted(benchmarks)),
                nodes=node,
                message=f"{node} " + " and ".join(parts),
                evidence={
                    "runs": sum(benchmarks.values()),
                    "single_node_runs": sum(alone.values()),
                    "multi_node_runs": sum(common.values()),
                    "benchmarks": dict(sorted(benchmarks.items())),
                },
                remedy=remedy,
            )
        )

    if unexplained:
        leftover = [multi_runs[i] for i in unexplained]
        counts = Counter(failure.benchmark for failure in leftover)
        members = fold(node for failure in leftover for node in _members(failure))
        findings.append(
            Finding(
                kind="accuracy",
                severity=Severity.ERROR,
                subject=", ".join(sorted(counts)),
                nodes=members,
                message=(
                    f"{_runs(len(leftover), 'failed multi-node ')} ({_counts_text(counts)}) share no node that "
                    f"failed in {MIN_COMMON_RUNS} of them; their members: {members}"
                ),
                evidence={
                    "runs": len(leftover),
                    "benchmarks": dict(sorted(counts.items())),
                    "labels": [failure.label for failure in leftover[:EVIDENCE_LABELS]],
                },
                remedy=(
                    "Rerun these benchmarks: failures that do not follow a node point at the interconnect, "
                    "the MPI library or the benchmark's input rather than at one node."
                ),
            )
        )
    return findings
