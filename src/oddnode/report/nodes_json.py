"""The JSON documents of the commands that look at the nodes themselves
(``inventory --json``, ``diagnose --json``) and of ``common --json``: plain
data, node sets folded wherever many nodes share one answer."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oddnode.core.model import Finding
from oddnode.core.nodes import expand, fold

if TYPE_CHECKING:
    from oddnode.report import documents

# The version of these documents' layout: a key renamed or a meaning changed raises it.
NODES_JSON_VERSION = 1


def _folded(nodes_by_value: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """value -> folded node set, the values held by most nodes first."""
    ranked = sorted(((value, sorted(nodes)) for value, nodes in nodes_by_value.items()),
                    key=lambda item: (-len(item[1]), item[0]))
    return {value: fold(nodes) for value, nodes in ranked}


def differing_facts(findings: Sequence[Finding], inventory_nodes: Iterable[str]) -> dict[str, dict[str, str]]:
    """key -> value -> folded nodes for every fact an ``inconsistent-fact``
    finding names, grouped as the finding judged them: jittering numbers
    under their one value, an absent fact as "(not reported)" or, for a
    process, "not running".  The largest group is the nodes the finding's
    minority groups leave."""
    inventory = set(inventory_nodes)
    differing: dict[str, dict[str, str]] = {}
    for finding in findings:
        if finding.kind != "inconsistent-fact":
            continue
        evidence = finding.evidence
        minority = {str(value): expand(nodes) for value, nodes in evidence.get("minority", {}).items()}
        odd = {node for nodes in minority.values() for node in nodes}
        groups: dict[str, list[str]] = {str(evidence["largest"]): sorted(inventory - odd), **minority}
        differing[finding.subject] = _folded({value: nodes for value, nodes in groups.items() if nodes})
    return differing


def inventory_json(result, run_id: int | None, target, findings: Sequence[Finding],
                   inventory_nodes: Iterable[str]) -> documents.Inventory:
    """What ``inventory --json`` prints: the run, every answering node's
    facts, the facts that differ, the nodes that gave no inventory and why,
    what the probe skipped, and the inconsistent-fact findings."""
    unanswered = {**result.unreachable, **result.failed}
    skipped: dict[str, list[str]] = defaultdict(list)
    for node, report in result.reports.items():
        for note in report.notes:
            skipped[note].append(node)
    return {
        "version": NODES_JSON_VERSION,
        "run_id": run_id,
        "transport": target.transport.name,
        "nodes": target.nodeset,
        "answered": fold(result.reports),
        "facts": {node: dict(sorted(result.reports[node].facts.items())) for node in sorted(result.reports)},
        "differing": differing_facts(findings, inventory_nodes),
        # A node that ran the probe but gave no usable answer counts as failed, as the store says.
        "unanswered": {node: {"status": "failed" if r.ok else r.status.value, "reason": result.reasons.get(node, "")}
                       for node, r in sorted(unanswered.items())},
        "skipped": {note: fold(nodes) for note, nodes in sorted(skipped.items())},
        "findings": [f.to_json() for f in findings],
    }


def expectation_verdicts(expectations, facts: Mapping[str, Mapping[str, str]],
                         nodes: Iterable[str]) -> list[dict[str, Any]]:
    """Every expectation with what each node has, folded by value, and
    whether that value meets it: a node without the fact has "(not
    reported)" (a process on a node that reported its processes: "not
    running"), as :func:`check_expectations` reads it."""
    from oddnode.findings.facts import NOT_REPORTED
    from oddnode.findings.processes import NOT_RUNNING, is_process_key, process_reporting_nodes

    from oddnode.findings.expectations import governed_nodes

    process_nodes = process_reporting_nodes({key: dict(per_node) for key, per_node in facts.items()})
    verdicts = []
    for expectation, checked in governed_nodes(expectations, nodes):
        per_node = facts.get(expectation.key, {})
        by_value: dict[str, list[str]] = defaultdict(list)
        accepted: dict[str, bool] = {}
        for node in checked:
            value = per_node.get(node)
            if value is None:
                value = NOT_RUNNING if is_process_key(expectation.key) and node in process_nodes else NOT_REPORTED
            value = str(value)
            if value not in accepted:
                accepted[value] = value != NOT_REPORTED and expectation.accepts(value)
            by_value[value].append(node)
        failing = [node for value, members in by_value.items() if not accepted[value] for node in members]
        verdicts.append({
            "key": expectation.key,
            **({"scope": expectation.scope} if expectation.scope is not None else {}),
            "expected": expectation.as_dict(),
            "wanted": expectation.describe(),
            "verdict": "fail" if failing else "pass",
            "passed": fold(node for value, members in by_value.items() if accepted[value] for node in members),
            "failed": fold(failing),
            "found": [{"value": value, "nodes": fold(by_value[value]), "count": len(by_value[value]),
                       "pass": accepted[value]}
                      for value in sorted(by_value, key=lambda v: (-len(by_value[v]), v))],
            **({"source": expectation.source} if expectation.source else {}),
            **({"line": expectation.line} if expectation.line is not None else {}),
        })
    return verdicts


def diagnose_json(expectations, facts: Mapping[str, Mapping[str, str]], nodes: Sequence[str],
                  report, source: str) -> documents.Diagnose:
    """What ``diagnose --json`` prints: the expectations file, the nodes
    checked, every expectation's verdict per node, and the findings."""
    return {
        "version": NODES_JSON_VERSION,
        "expectations": source,
        "nodes": fold(nodes),
        "ok": report.ok,
        "checked": expectation_verdicts(expectations, facts, nodes),
        "findings": [f.to_json() for f in report.failures],
    }


def common_json(counts: Sequence[tuple[str, int]], failures: Sequence, source: str) -> documents.Common:
    """What ``common --json`` prints: the failed runs read, and the nodes
    common to them, most frequent first, as the table shows them."""
    return {
        "version": NODES_JSON_VERSION,
        "source": source,
        "failed_runs": len(failures),
        "nodes": [{"node": node, "failed_runs": count} for node, count in counts],
        "runs": [{"benchmark": f.benchmark, "label": f.label, "label_kind": f.label_kind.value,
                  "repetition": f.repetition, "nodes": fold(f.members)} for f in failures],
    }
