"""Nodes that did not answer: unreachable, cut at the timeout, or failed to run."""

from __future__ import annotations

from collections import defaultdict

from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import Dataset, Finding, Severity
from oddnode.core.nodes import fold

# status recorded by the runner -> (finding kind, what it means, what to do)
_TROUBLE = {
    "unreachable": (
        "unreachable",
        "could not be reached",
        "Check that {nodes} booted and answer on the network (ping, ssh by hand, console); then rerun.",
    ),
    "timeout": (
        "timeout",
        "did not finish before the timeout",
        "Log in to {nodes} and look for what hangs (a stuck file system, a full disk, an overloaded node); "
        "then rerun, with a longer --timeout if the node is merely slow.",
    ),
    "failed": (
        "failed-to-run",
        "could not run the probe",
        "Run the failing step by hand on {nodes} and read its error (a missing python3, a read-only "
        "file system); then rerun.",
    ),
}


@rule("node-trouble", kinds=tuple(kind for kind, _, _ in _TROUBLE.values()))
def node_trouble(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """One finding per stage and kind of trouble, its nodes folded."""
    grouped: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for node, trouble in dataset.node_trouble.items():
        grouped[trouble.stage, trouble.status][node] = trouble.detail
    findings = []
    for (stage, status), details in sorted(grouped.items()):
        kind, meaning, remedy = _TROUBLE.get(status, _TROUBLE["failed"])
        nodes = fold(details)
        reasons = first_few(sorted({d for d in details.values() if d}), 3, separator="; ", rest="more reasons")
        findings.append(Finding(
            kind=kind,
            severity=Severity.ERROR,
            subject=stage,
            nodes=nodes,
            message=f"{nodes} ({len(details)} {'node' if len(details) == 1 else 'nodes'}) {meaning} "
                    f"in the {stage} stage" + (f": {reasons}" if reasons else ""),
            evidence={"stage": stage, "status": status, "details": dict(sorted(details.items()))},
            remedy=remedy.format(nodes=nodes),
        ))
    return findings
