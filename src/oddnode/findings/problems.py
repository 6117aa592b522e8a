"""Problems: findings that one cause explains, shown as that cause with its
symptoms, as an administrator would say it ("node05: a competing process
(oddnode-hog) slows memory (4 benchmarks), compute.dgemm, its pairs").

The links are those the related-findings step made (related.py): a slowed
finding whose evidence names a competing process on its nodes, or the
fingerprint of a process-asymmetry finding there, is a symptom of the
process findings of those nodes.  Findings a process finding and its
symptoms share a node with join one problem.  A noisy-node finding explains
the outlier and bimodal findings on the noise series of its nodes, which
say the same: they join its problem, or the process problem it is in.
A fact that sets some nodes apart (an inconsistent fact, a failed
expectation) explains the findings left whose nodes are those same nodes,
or nearly (a mode of a bimodal series, an outlier, a weak pair or set
member, a missing or failed benchmark): the DIMM layout of node[001-084]
and the slow mode of STREAM on node[001-084] are one problem, the fact its
cause, whose remedy names the fact.  Every other finding is a problem of
its own.  The findings themselves are kept inside, unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections import defaultdict
from dataclasses import dataclass

from oddnode.findings.noise import KIND as NOISY_KIND
from oddnode.findings.noise import is_noise_series
from oddnode.findings.processes import PROCESS_PREFIX, RUNNING, is_process_key
from oddnode.findings.process_asymmetry import KIND as ASYMMETRY_KIND
from oddnode.findings.process_asymmetry import fingerprint_commands
from oddnode.findings.related import competing_commands, frequent_commands
from oddnode.findings.registry import leads, sort_findings
from oddnode.core.model import Finding, Severity
from oddnode.core.nodes import NodeNameError, expand, fold
from oddnode.core.order import natural_key

if TYPE_CHECKING:
    from oddnode.report import documents

# Findings about a fact: a cause when their nodes are a performance finding's.
FACT_KINDS = frozenset({"inconsistent-fact", "expectation"})
# Node sets that are nearly one: at least this share of their union in
# common (Jaccard).  84 nodes of a DIMM layout and a mode of 80 of them
# (four nodes the mode test left in the other mode) are one set; sets of
# one to nine nodes must be equal.
NEAR_SAME_NODES = 0.9

# How a symptom of each kind is said in a problem's summary.
_SYMPTOM_WORDS = {"weak-pair-member": "its pairs", "slow-link": "its links",
                  "switch-saturation": "the daisy chain"}


@dataclass(frozen=True)
class Problem:
    """One cause and the findings it explains; a finding alone when nothing
    else is explained by it."""

    nodes: str  # folded node set of the cause
    severity: Severity  # the worst of its findings
    cause: tuple[Finding, ...]  # what to fix first
    symptoms: tuple[Finding, ...]  # what it makes other rules see

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.cause + self.symptoms

    @property
    def summary(self) -> str:
        """One line: the cause, then what it slows."""
        if not self.symptoms:
            (finding,) = self.cause
            return f"{finding.kind} [{finding.subject}]"
        return (f"{cause_summary(self.cause)} {symptom_summary(self.symptoms)}: "
                f"{len(self.symptoms)} finding{'s' if len(self.symptoms) > 1 else ''} it explains")

    def to_json(self) -> documents.Problem:
        return {
            "nodes": self.nodes,
            "severity": self.severity.value,
            "summary": self.summary,
            "cause": [f.to_json() for f in self.cause],
            "symptoms": [f.to_json() for f in self.symptoms],
        }


# How many commands of a fingerprint a problem's summary names.
SHOWN_FINGERPRINT = 4


def cause_summary(cause: tuple[Finding, ...]) -> str:
    """The cause and its verb: "a competing process (stress-ng) slows",
    "frequent short processes (basename, sed, sh) slow", or both; "OS
    noise (every 20 ms, 1.2 ms detours) shows in" for a noisy node."""
    if all(f.kind == NOISY_KIND for f in cause):
        return f"OS noise ({'; '.join(dict.fromkeys(f.evidence.get('pattern', '') for f in cause))}) shows in"
    if all(_is_fact_cause(f) for f in cause):
        return f"a different {', '.join(dict.fromkeys(f.subject for f in cause))} shows in"
    running = [f.subject.removeprefix(PROCESS_PREFIX) for f in cause if f.kind != ASYMMETRY_KIND]
    spawned = list(dict.fromkeys(c for f in cause if f.kind == ASYMMETRY_KIND for c in fingerprint_commands(f)))
    parts = []
    if running:
        parts.append(f"a competing process ({', '.join(running)})")
    if spawned:
        shown = ", ".join(spawned[:SHOWN_FINGERPRINT]) + (", …" if len(spawned) > SHOWN_FINGERPRINT else "")
        parts.append(f"frequent short processes ({shown})")
    return " and ".join(parts) + (" slows" if running and not spawned else " slow")


def symptom_summary(symptoms: tuple[Finding, ...]) -> str:
    """What the symptoms are about, folded: benchmarks of one family
    counted ("memory (4 benchmarks)"), pairs and links said in words."""
    families: dict[str, set[str]] = defaultdict(set)
    words: list[str] = []
    for finding in symptoms:
        if finding.kind in _SYMPTOM_WORDS:
            words.append(_SYMPTOM_WORDS[finding.kind])
            continue
        benchmark = finding.subject.split(":", 1)[0]
        families[benchmark.split(".", 1)[0]].add(benchmark)
    parts = [f"{family} ({len(names)} benchmarks)" if len(names) > 1 else next(iter(names))
             for family, names in families.items()]
    return ", ".join([*parts, *dict.fromkeys(words)])


def group_problems(findings: list[Finding], minimum: Severity = Severity.WARNING) -> list[Problem]:
    """The findings at or above ``minimum`` as problems, worst first: each
    competing process (or process-asymmetry fingerprint) with the slowed
    findings of its nodes, every other finding alone."""
    serious = [f for f in sort_findings(findings) if f.severity.rank >= minimum.rank]
    running = competing_commands(serious)
    frequent = frequent_commands(serious)
    causes: dict[str, list[Finding]] = defaultdict(list)  # node -> its process findings
    for finding in serious:
        if finding.kind == "inconsistent-fact" and is_process_key(finding.subject):
            minority = finding.evidence.get("minority", {}).get(RUNNING)
            for node, commands in running.items():
                if finding.subject.removeprefix(PROCESS_PREFIX) in commands and minority:
                    causes[node].append(finding)
        elif finding.kind == ASYMMETRY_KIND:
            for node in frequent:
                if node in _members(finding):
                    causes[node].append(finding)
    # A problem per distinct set of process findings, its symptoms the
    # findings whose competing processes run on its nodes.
    problems: dict[tuple[int, ...], tuple[list[Finding], list[Finding], set[str]]] = {}
    explained: set[int] = set()
    for finding in serious:
        nodes = set(finding.evidence.get("competing_processes", {})) | set(
            finding.evidence.get("frequent_processes", {}))
        if not nodes:
            continue
        # Each process finding once (one may name several of the nodes).
        cause = list({id(f): f for node in sorted(nodes) for f in causes.get(node, [])}.values())
        if not cause:
            continue
        key = tuple(sorted(id(f) for f in cause))
        entry = problems.setdefault(key, (cause, [], set()))
        entry[1].append(finding)
        entry[2].update(nodes)
        explained.add(id(finding))
        explained.update(id(f) for f in cause)
    _add_noise_echoes(serious, problems, explained)
    _add_fact_causes(serious, problems, explained)
    grouped = [Problem(fold(nodes), max((f.severity for f in cause + symptoms), key=lambda s: s.rank),
                       tuple(cause), tuple(symptoms))
               for cause, symptoms, nodes in problems.values()]
    alone = [Problem(f.nodes, f.severity, (f,), ()) for f in serious if id(f) not in explained]
    # Worst first; within a severity a node that never booted leads, then the
    # problems that explain the most findings, then by nodes.
    return sorted(grouped + alone, key=lambda p: (-p.severity.rank, not any(leads(f) for f in p.findings),
                                                  -len(p.findings), natural_key(p.nodes)))


def _members(finding: Finding) -> set[str]:
    """The nodes a finding names; none for text that is not a node set."""
    try:
        return set(expand(finding.nodes))
    except NodeNameError:
        return set()


def _noise_echo(finding: Finding, members: set[str]) -> bool:
    """A finding of the generic rules on a noise series, on the worse side,
    about some of ``members``: what a noisy-node finding already says."""
    if finding.kind not in ("outlier", "bimodal") or not is_noise_series(finding.subject):
        return False
    if finding.kind == "outlier" and not finding.evidence.get("worse"):
        return False
    named = _members(finding)
    return bool(named) and named <= members


def _add_noise_echoes(serious: list[Finding], problems: dict[tuple[int, ...], tuple[list[Finding], list[Finding],
                      set[str]]], explained: set[int]) -> None:
    """Each noisy-node finding explains the generic findings on the noise
    series of its nodes (the outlier rule names the same node on
    noise.lost_fraction): they join its problem, or the process problem
    that explains it; otherwise it becomes a cause of its own."""
    for noisy in serious:
        if noisy.kind != NOISY_KIND:
            continue
        members = _members(noisy)
        echoes = [f for f in serious if id(f) not in explained and f is not noisy and _noise_echo(f, members)]
        if not echoes:
            continue
        home = next((entry for entry in problems.values() if any(f is noisy for f in entry[0] + entry[1])), None)
        if home is None:
            home = problems.setdefault((id(noisy),), ([noisy], [], set(members)))
            explained.add(id(noisy))
        home[1].extend(echoes)
        explained.update(id(f) for f in echoes)


def _same_nodes(a: set[str], b: set[str]) -> float:
    """How nearly two node sets are one: the share of their union they have in common."""
    return len(a & b) / len(a | b) if a and b else 0.0


def _is_fact_cause(finding: Finding) -> bool:
    return finding.kind in FACT_KINDS and not is_process_key(finding.subject)


def _add_fact_causes(serious: list[Finding], problems: dict[tuple[int, ...], tuple[list[Finding], list[Finding],
                     set[str]]], explained: set[int]) -> None:
    """The facts that set some nodes apart explain the findings left whose
    nodes are the same, or nearly (NEAR_SAME_NODES): each such finding joins
    the facts of the node set closest to its own, as their symptom."""
    facts: dict[frozenset[str], list[Finding]] = defaultdict(list)
    for finding in serious:
        if id(finding) not in explained and _is_fact_cause(finding) and (members := _members(finding)):
            facts[frozenset(members)].append(finding)
    if not facts:
        return
    symptoms: dict[frozenset[str], list[Finding]] = defaultdict(list)
    for finding in serious:
        if id(finding) in explained or finding.kind in FACT_KINDS or not (members := _members(finding)):
            continue
        nodes, closeness = max(((nodes, _same_nodes(members, set(nodes))) for nodes in facts),
                               key=lambda item: item[1])
        if closeness >= NEAR_SAME_NODES:
            symptoms[nodes].append(finding)
    for nodes, found in symptoms.items():
        cause = facts[nodes]
        problems[tuple(id(f) for f in cause)] = (cause, found, set(nodes))
        explained.update(id(f) for f in cause + found)
