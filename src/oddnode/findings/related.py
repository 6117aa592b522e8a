"""Findings that explain others.

A command that runs on some nodes only (an ``inconsistent-fact`` on a
``process.*`` key) takes CPU time and memory bandwidth from whatever runs
beside it: the memory, compute and ping-pong results of its nodes fall with
it, and the rules that judge those results name the nodes as they would a
weak DIMM or a bad cable.  The process is the cheaper cause to rule out, so
the slowed findings of its nodes get it in their evidence and their remedy
starts with stopping it.

Likewise a node on which short commands run far more often than on the
others (``process-asymmetry``, seaborg's fingerprint): every one of them
interrupts what runs beside it, so its noisy, lagging or slow findings get
the fingerprint's commands in their evidence (``frequent_processes``) and
a remedy that starts with finding what spawns them.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable

from oddnode.findings.process_asymmetry import KIND as ASYMMETRY_KIND
from oddnode.findings.process_asymmetry import fingerprint_commands
from oddnode.findings.processes import NOT_RUNNING, PROCESS_PREFIX, RUNNING, SEEN_BRIEFLY, is_process_key
from oddnode.core.model import Finding, Severity
from oddnode.core.nodes import NodeNameError, expand, fold

# The kinds of finding a competing process can cause on its nodes: slower
# results, pairs and links (``outlier`` on its worse side only), OS noise,
# and the node a synchronising job waits for.
SLOWED_KINDS = ("outlier", "weak-pair-member", "slow-link", "switch-saturation", "noisy-node", "sync-laggard")


def competing_commands(findings: Iterable[Finding]) -> dict[str, list[str]]:
    """Node -> the commands it runs steadily that the majority of the nodes
    does not run, or saw only briefly; nodes that saw a command briefly are
    not slowed by it."""
    commands: dict[str, list[str]] = defaultdict(list)
    for finding in findings:
        if finding.kind != "inconsistent-fact" or not is_process_key(finding.subject):
            continue
        if finding.evidence.get("majority") not in (NOT_RUNNING, SEEN_BRIEFLY):
            continue
        for node in _nodes(finding.evidence.get("minority", {}).get(RUNNING) or ""):
            commands[node].append(finding.subject.removeprefix(PROCESS_PREFIX))
    return commands


def frequent_commands(findings: Iterable[Finding]) -> dict[str, list[str]]:
    """Node -> the commands a process-asymmetry finding says it runs far more
    often than the others (its fingerprint), for nodes named alone or in a group."""
    commands: dict[str, list[str]] = defaultdict(list)
    for finding in findings:
        if finding.kind != ASYMMETRY_KIND or finding.severity.rank < Severity.WARNING.rank:
            continue
        for node in _nodes(finding.nodes):
            commands[node].extend(c for c in fingerprint_commands(finding) if c not in commands[node])
    return commands


def _nodes(nodeset: str) -> list[str]:
    """The nodes of a folded node set; none for text that is not one."""
    try:
        return expand(nodeset)
    except NodeNameError:
        return []


def _slowed(finding: Finding) -> bool:
    if finding.kind not in SLOWED_KINDS or finding.severity.rank < Severity.WARNING.rank:
        return False
    return finding.kind != "outlier" or bool(finding.evidence.get("worse"))


def explain_by_processes(findings: list[Finding]) -> list[Finding]:
    """The findings, those a competing process on their nodes may cause
    given the process in their evidence (``competing_processes``: node ->
    commands; ``frequent_processes`` for a process-asymmetry fingerprint)
    and a remedy that starts with stopping it."""
    commands = competing_commands(findings)
    frequent = frequent_commands(findings)
    if not commands and not frequent:
        return findings
    related = []
    for finding in findings:
        if _slowed(finding):
            spawning = {node: frequent[node] for node in _nodes(finding.nodes) if node in frequent}
            if spawning:
                finding = _with_frequent(finding, spawning)
            running = {node: commands[node] for node in _nodes(finding.nodes) if node in commands}
            if running:
                finding = _with_process(finding, running)
        related.append(finding)
    return related


def _with_process(finding: Finding, running: dict[str, list[str]]) -> Finding:
    names = sorted({command for commands in running.values() for command in commands})
    keys = ", ".join(PROCESS_PREFIX + name for name in names)
    verb = "runs" if len(running) == 1 else "run"
    return dataclasses.replace(
        finding,
        evidence={**finding.evidence, "competing_processes": running},
        remedy=(f"{fold(running)} {verb} {', '.join(names)}, which the other nodes do not (inconsistent-fact "
                f"{keys}): a competing process slows what runs beside it, so stop it and rerun before suspecting "
                f"the hardware. If the result stays poor: {finding.remedy}"),
    )


def _with_frequent(finding: Finding, spawning: dict[str, list[str]]) -> Finding:
    names = list(dict.fromkeys(command for commands in spawning.values() for command in commands))
    verb = "runs" if len(spawning) == 1 else "run"
    return dataclasses.replace(
        finding,
        evidence={**finding.evidence, "frequent_processes": spawning},
        remedy=(f"{fold(spawning)} {verb} {', '.join(names)} far more often than the other nodes "
                f"({ASYMMETRY_KIND}): frequent short processes interrupt what runs beside them, so find what "
                f"spawns them and stop it, then rerun before suspecting the hardware. If the result stays poor: "
                f"{finding.remedy}"),
    )
