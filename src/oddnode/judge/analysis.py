"""The whole judgement of a store: statistics, findings and correlations.

A pure function of the dataset the store holds; the runners never get here.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oddnode import __version__
from oddnode.findings import Sensitivity, find_all
from oddnode.findings.problems import Problem, group_problems
from oddnode.findings.related import explain_by_processes
from oddnode.core.model import Dataset, Finding, Series, Severity
from oddnode.stats.correlation import Correlation, correlate_all
from oddnode.stats.describe import Description, describe
from oddnode.store import SCHEMA_VERSION

if TYPE_CHECKING:
    from oddnode.judge.sweep import SweepAnalysis
    from oddnode.readings.profile import Profile
    from oddnode.report import documents

# The kind of the finding an analysis makes when there is nothing to judge.
NO_DATA = "no-data"
# The verdicts, as JSON and the reports spell them.
READY, NOT_READY, NOTHING_JUDGED = "ready", "not ready", "no data"


@dataclass
class Analysis:
    dataset: Dataset
    statistics: list[tuple[Series, Description]]
    findings: list[Finding]
    correlations: list[Correlation] = field(default_factory=list)
    sensitivity: Sensitivity = field(default_factory=Sensitivity)
    # The store's parameter sweeps, each judged on its own (judge_stored_sweeps),
    # and its MPI profiles by id, reported as they are.
    sweeps: list[SweepAnalysis] = field(default_factory=list)
    profiles: list[tuple[int, Profile]] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        """The findings of warning severity or above, those one cause
        explains grouped under it."""
        return group_problems(self.findings)

    @property
    def ready(self) -> bool:
        """Ready for production: no finding of warning severity or above
        (nothing to judge is one: the no-data error)."""
        return not any(f.severity.rank >= Severity.WARNING.rank for f in self.findings)

    @property
    def judged(self) -> bool:
        """False when the analysis found nothing to judge (its no-data finding)."""
        return not any(f.kind == NO_DATA for f in self.findings)

    @property
    def verdict(self) -> str:
        """ready, not ready, or no data (nothing to judge)."""
        return NOTHING_JUDGED if not self.judged else READY if self.ready else NOT_READY

    def to_json(self) -> documents.Analysis:
        return {
            "schema_version": SCHEMA_VERSION,
            "oddnode": __version__,
            "ready": self.ready,
            "verdict": self.verdict,
            "sensitivity": {"alpha": self.sensitivity.alpha, "min_effect": self.sensitivity.min_effect},
            "statistics": [
                {"benchmark": s.benchmark, "metric": s.metric, "unit": s.unit, "direction": s.direction.value,
                 "label_kind": s.label_kind.value, **d.to_json()}
                for s, d in self.statistics
            ],
            "findings": [f.to_json() for f in self.findings],
            "problems": [p.to_json() for p in self.problems],
            "correlations": [c.__dict__ for c in self.correlations],
        }


def has_data(dataset: Dataset) -> bool:
    """The dataset holds something to judge: a result, a failed run, a
    node's fact, trouble, process accounting or affinity sample.  Declared
    nodes and runs alone are not: they say what should have been measured,
    not how it went."""
    return bool(dataset.series or dataset.failures or dataset.facts or dataset.node_trouble
                or dataset.set_runs or dataset.processes or dataset.details)


def no_data_finding() -> Finding:
    """The error that keeps an analysis of nothing from passing for ready."""
    return Finding(NO_DATA, Severity.ERROR, "store", "",
                   "nothing to judge: no result, failed run or fact of any node", {},
                   "import results (oddnode import) or run oddnode check, then analyze again")


def analyze(dataset: Dataset, sensitivity: Sensitivity | None = None, correlations: bool = True,
            *, require_data: bool = False) -> Analysis:
    """Describe every series, run every finding rule (a competing process
    named in the findings it may cause) and, if asked, correlate every pair
    of benchmarks.  ``require_data``: a dataset with nothing to judge (a
    whole store, not one stage of a check) gets the no-data error finding."""
    if require_data and not has_data(dataset):
        return Analysis(dataset=dataset, statistics=[], findings=[no_data_finding()],
                        sensitivity=sensitivity or Sensitivity())
    sensitivity = sensitivity or Sensitivity()
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The correlation is numpy's work (matrix products, sorts), which lets
        # go of the interpreter lock: on a second core it runs beside the rules.
        correlated = pool.submit(correlate_all, dataset.series) if correlations else None
        findings = explain_by_processes(find_all(dataset, sensitivity))
        statistics = [(s, describe(s)) for s in dataset.series]
        return Analysis(
            dataset=dataset,
            statistics=statistics,
            findings=findings,
            correlations=correlated.result() if correlated else [],
            sensitivity=sensitivity,
        )
