"""Typed models of every document a command prints with ``--json``, and of
the parts they share: the one declaration the JSON Schema is generated
from (oddnode.report.schema) and that each producer's return type names.

DOCUMENTS lists the documents, in the schema's order, each with the
commands that print it; SHARED lists the shared parts, each a definition
of its own that the documents refer to. A model that is in neither list is
written out where it is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from oddnode.report.documents.analysis import (Analysis, Common, Compare, CompareList, Correlate, Dist, Findc,
                                               NoiseNode, NoiseSection,
                                               Findn, Fit, History, Stats)
from oddnode.report.documents.interconnect import (Bisection, Matrix, Pairs, SwitchbenchAlltoall, SwitchbenchChain,
                                                   SwitchbenchStream)
from oddnode.report.documents.nodes import (Affinity, Config, Diagnose, Health, Inventory, Model, Numa, Processes,
                                            Profile, ProfileList)
from oddnode.report.documents.sets import Scale, Sets, Sweep, SweepList, Sync
from oddnode.report.documents.shared import (Description, Direction, Finding, Findings, HealthProblem,
                                             InterconnectDocument, LabelKind, NetworkRun, NumberOrNull, Outcome,
                                             OutcomeCounts, Problem, RunReference, SeriesReference, SetRun, SetTables,
                                             Severity, SlurmAction, StatisticsRow, StoredRun)


@dataclass(frozen=True)
class Document:
    """A document: its name in the schema, its model, the commands that print it."""

    name: str
    model: object
    commands: tuple[str, ...]


DOCUMENTS = (
    Document("analysis", Analysis, ("analyze", "check")),
    Document("stats", Stats, ("stats",)),
    Document("dist", Dist, ("dist",)),
    Document("findn", Findn, ("findn",)),
    Document("correlate", Correlate, ("correlate",)),
    Document("findc", Findc, ("findc",)),
    Document("common", Common, ("common",)),
    Document("history", History, ("history",)),
    Document("fit", Fit, ("fit",)),
    Document("compare", Compare, ("compare",)),
    Document("compare-list", CompareList, ("compare",)),
    Document("pairs", Pairs, ("pairs",)),
    Document("bisection", Bisection, ("bisection",)),
    Document("matrix", Matrix, ("matrix",)),
    Document("switchbench-chain", SwitchbenchChain, ("switchbench chain",)),
    Document("switchbench-stream", SwitchbenchStream, ("switchbench stream",)),
    Document("switchbench-alltoall", SwitchbenchAlltoall, ("switchbench alltoall",)),
    Document("sets", Sets, ("sets",)),
    Document("scale", Scale, ("scale",)),
    Document("sync", Sync, ("sync",)),
    Document("sweep", Sweep, ("sweep",)),
    Document("sweep-list", SweepList, ("sweep",)),
    Document("inventory", Inventory, ("inventory",)),
    Document("diagnose", Diagnose, ("diagnose",)),
    Document("processes", Processes, ("processes",)),
    Document("affinity", Affinity, ("affinity",)),
    Document("numa", Numa, ("numa",)),
    Document("model", Model, ("model",)),
    Document("profile", Profile, ("profile", "import mpip", "import itc")),
    Document("profile-list", ProfileList, ("profile",)),
    Document("config", Config, ("config show",)),
    Document("health", Health, ("health",)),
)

SHARED = {
    "severity": Severity,
    "direction": Direction,
    "label_kind": LabelKind,
    "number_or_null": NumberOrNull,
    "finding": Finding,
    "findings": Findings,
    "problem": Problem,
    "description": Description,
    "statistics_row": StatisticsRow,
    "outcome_counts": OutcomeCounts,
    "run_reference": RunReference,
    "network_run": NetworkRun,
    "stored_run": StoredRun,
    "set_tables": SetTables,
    "outcome": Outcome,
    "series_reference": SeriesReference,
    "set_run": SetRun,
    "interconnect_document": InterconnectDocument,
    "health_problem": HealthProblem,
    "slurm_action": SlurmAction,
}
