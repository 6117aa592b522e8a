"""What a comparison reads from the store: the runs a selector names, every
repetition of each series those runs measured, and node facts and
topology as they were at a run.

A selector names runs by id (``12``; ``12,13`` or ``12-13`` for several;
a check's id stands for every step it ran), by date (``2025-11-25`` or a
longer prefix such as ``2025-11-25T14``, UTC as stored), or by label: the
run's source (an imported directory, whole or its last path component:
``before`` for ``/data/stab/before/``), else text in its command.  Of the
runs a selector names, each series is read from the newest that measured
it, as the store's own best values are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import numpy as np

from oddnode.core.model import DEFAULT_METRIC, Direction, LabelKind
from oddnode.store import Store

if TYPE_CHECKING:
    from oddnode.report import documents

_ID_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}(:\d{2}(:\d{2})?)?)?$")
# Runs named in an error that found none: the newest few holding results.
SHOWN_RUNS = 8


class SelectionError(ValueError):
    """A selector that names no run with results, or is not well formed."""


@dataclass(frozen=True)
class RunInfo:
    """One run of the store as it was recorded."""

    id: int
    started: datetime
    command: str
    source: str | None
    check_id: int | None = None  # the check it is a step of

    def describe(self) -> str:
        check = f", check {self.check_id}" if self.check_id is not None else ""
        return f"run {self.id} ({self.started:%Y-%m-%d %H:%M} UTC{check}: {self.command})"

    def to_json(self) -> documents.StoredRun:
        return {"id": self.id, "started": self.started.isoformat(timespec="seconds"), "command": self.command,
                "source": self.source, "check_id": self.check_id}


@dataclass(frozen=True)
class Selection:
    """The runs holding results that a selector named, oldest first."""

    selector: str
    runs: tuple[RunInfo, ...]

    @property
    def ids(self) -> list[int]:
        return [run.id for run in self.runs]

    def describe(self) -> str:
        if len(self.runs) == 1:
            return self.runs[0].describe()
        checks = sorted({r.check_id for r in self.runs if r.check_id is not None})
        if len(checks) == 1 and all(r.check_id == checks[0] for r in self.runs):
            return f"check {checks[0]} ({len(self.runs)} runs, {self.runs[0].started:%Y-%m-%d %H:%M} UTC)"
        return f"{self.selector!r}: runs {_fold_ids(self.ids)}"

    def to_json(self) -> dict[str, Any]:
        return {"selector": self.selector, "runs": [run.to_json() for run in self.runs]}


def _fold_ids(ids: Sequence[int]) -> str:
    """12,13,14,20 -> 12-14,20."""
    ranges: list[list[int]] = []
    for run_id in sorted(ids):
        if ranges and ranges[-1][1] == run_id - 1:
            ranges[-1][1] = run_id
        else:
            ranges.append([run_id, run_id])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


# -- the runs ------------------------------------------------------------------------------------


def _runs_with_results(store: Store) -> dict[int, RunInfo]:
    """Every run that holds results, with the check it belongs to."""
    rows = store.con.execute("""
        SELECT r.id, r.started, r.command, r.source, min(s.check_id)
        FROM runs r LEFT JOIN check_steps s ON s.run_id = r.id
        WHERE r.id IN (SELECT DISTINCT run_id FROM results)
        GROUP BY r.id, r.started, r.command, r.source ORDER BY r.id
    """).fetchall()
    return {int(i): RunInfo(int(i), started, command, source, None if check is None else int(check))
            for i, started, command, source, check in rows}


def _check_runs(store: Store) -> dict[int, list[int]]:
    """check id -> the runs of its steps."""
    rows = store.con.execute("SELECT check_id, run_id FROM check_steps ORDER BY run_id").fetchall()
    steps: dict[int, list[int]] = {}
    for check_id, run_id in rows:
        steps.setdefault(int(check_id), []).append(int(run_id))
    return steps


def run_table(store: Store) -> documents.CompareList:
    """The runs holding results, oldest first: id, when, command, source,
    the check they belong to, and how many series and results they hold."""
    counts = dict((int(run_id), (int(series), int(results))) for run_id, series, results in store.con.execute("""
        SELECT run_id, count(DISTINCT (benchmark, metric)), count(*) FROM results GROUP BY run_id
    """).fetchall())
    return [run.to_json() | {"series": counts[run.id][0], "results": counts[run.id][1]}
            for run in _runs_with_results(store).values()]


def _source_names(source: str | None) -> set[str]:
    """What a run's source answers to: itself, each comma-separated path in
    it, and each path's last component."""
    if not source:
        return set()
    names = {source}
    for part in source.split(","):
        part = part.strip()
        if part:
            names.add(part)
            names.add(part.rstrip("/"))
            names.add(PurePath(part.rstrip("/")).name)
    return names


def select_runs(store: Store, selector: str) -> Selection:
    """The runs holding results that ``selector`` names (see the module)."""
    text = selector.strip()
    if not text:
        raise SelectionError("an empty run selector: give a run id, a date (YYYY-MM-DD) or a label")
    runs = _runs_with_results(store)
    checks = _check_runs(store)
    chosen: set[int] = set()
    if _ID_LIST.match(text) and not _DATE.match(text):
        for part in text.split(","):
            low, _, high = part.partition("-")
            first, last = int(low), int(high or low)
            if first > last:
                raise SelectionError(f"run range {part!r} runs backwards (a date is written YYYY-MM-DD)")
            for run_id in range(first, last + 1):
                chosen.update(checks.get(run_id, [run_id]))
        chosen &= set(runs)
        what = f"run id {text}"
    elif _DATE.match(text):
        prefix = text.replace(" ", "T")
        chosen = {i for i, run in runs.items() if run.started.isoformat().startswith(prefix)}
        what = f"date {text} (UTC)"
    else:
        chosen = {i for i, run in runs.items() if text in _source_names(run.source)}
        if not chosen:
            chosen = {i for i, run in runs.items() if text in run.command}
        what = f"label {text!r} (a run's source or text in its command)"
    if not chosen:
        raise SelectionError(f"no run with results matches {what}; {_known_runs(runs)}")
    return Selection(text, tuple(runs[i] for i in sorted(chosen)))


def _known_runs(runs: dict[int, RunInfo]) -> str:
    if not runs:
        return "the store holds no results"
    newest = list(runs.values())[-SHOWN_RUNS:]
    shown = "; ".join(f"{r.id} {r.started:%Y-%m-%d %H:%M} {r.command}" for r in newest)
    more = f" (and {len(runs) - len(newest)} older; oddnode compare --list shows all)" if len(runs) > len(newest) else ""
    return f"runs with results: {shown}{more}"


# -- the samples ----------------------------------------------------------------------------------


@dataclass
class SeriesSamples:
    """Every repetition of one series in one run: label -> its valid values
    (finite, in repetition order), and how many of its runs failed."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    label_kind: LabelKind
    run_id: int
    values: dict[str, np.ndarray] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    # Labels drawn again every repetition (shuffled pairs and sets): most
    # labels ran once, so the series is compared as one pooled population.
    reshuffled: bool = False

    @property
    def name(self) -> str:
        return self.benchmark if self.metric == DEFAULT_METRIC else f"{self.benchmark}:{self.metric}"

    @property
    def key(self) -> tuple[str, str]:
        return self.benchmark, self.metric

    @property
    def higher_is_better(self) -> bool:
        return self.direction is Direction.HIGHER


def load_samples(store: Store, run_ids: Iterable[int] | None = None) -> dict[tuple[str, str], SeriesSamples]:
    """Each series' repetitions from the newest of ``run_ids`` that measured
    it (None: the newest run of each series in the whole store)."""
    store.check_names()
    where = ""
    if run_ids is not None:
        ids = sorted(set(int(i) for i in run_ids))
        if not ids:
            return {}
        store.con.register("_chosen_runs", {"id": np.array(ids, dtype=np.int64)})
        where = "WHERE run_id IN (SELECT id FROM _chosen_runs)"
    rows = store.con.execute(f"""
        WITH chosen AS (SELECT benchmark, metric, max(run_id) AS run_id FROM results {where} GROUP BY ALL)
        SELECT r.benchmark, r.metric, any_value(r.unit), any_value(r.direction), any_value(r.label_kind),
               r.run_id, r.label,
               list(r.value ORDER BY r.repetition NULLS LAST)
                   FILTER (WHERE r.valid AND r.value IS NOT NULL AND isfinite(r.value)),
               count(*) FILTER (WHERE NOT r.valid),
               list(DISTINCT r.repetition) FILTER (WHERE r.repetition IS NOT NULL)
        FROM results r JOIN chosen USING (benchmark, metric, run_id)
        GROUP BY r.benchmark, r.metric, r.run_id, r.label
        ORDER BY r.benchmark, r.metric, r.label
    """).fetchall()
    if run_ids is not None:
        store.con.unregister("_chosen_runs")
    samples: dict[tuple[str, str], SeriesSamples] = {}
    repetitions: dict[tuple[str, str], dict[str, set[int]]] = {}
    for benchmark, metric, unit, direction, kind, run_id, label, values, failed, reps in rows:
        key = (benchmark, metric)
        series = samples.get(key)
        if series is None:
            series = samples[key] = SeriesSamples(benchmark, metric, unit, Direction(direction), LabelKind(kind),
                                                  int(run_id))
            repetitions[key] = {}
        if values:
            series.values[label] = np.asarray(values, dtype=np.float64)
        if failed:
            series.failed[label] = int(failed)
        repetitions[key][label] = set(reps or ())
    for key, series in samples.items():
        series.reshuffled = _reshuffled(repetitions[key])
    return samples


def _reshuffled(label_repetitions: dict[str, set[int]]) -> bool:
    """Whether a series' labels were drawn again every repetition (shuffled
    pairs and sets): with two repetitions or more, most labels ran in one
    repetition only.  A label that ran in several, though not in all (a
    node in some of the sets of a scaling curve, a node missing from a
    repetition), is a subject of its own."""
    every = set().union(*label_repetitions.values()) if label_repetitions else set()
    if len(every) < 2:
        return False
    once = sum(1 for reps in label_repetitions.values() if len(reps) <= 1)
    return once > len(label_repetitions) / 2


# -- facts and topology as at a run -----------------------------------------------------------------


def fact_keys(store: Store) -> list[str]:
    return [key for (key,) in store.con.execute("SELECT DISTINCT key FROM facts ORDER BY key").fetchall()]


def facts_at(store: Store, key: str, run_id: int | None = None) -> dict[str, str]:
    """node -> value of one fact, from each node's newest inventory up to
    ``run_id`` (a node inventoried only later: its newest; None: newest)."""
    limit = run_id if run_id is not None else 2 ** 62
    rows = store.con.execute("""
        WITH runs AS (SELECT node, coalesce(max(run_id) FILTER (WHERE run_id <= ?), max(run_id)) AS run_id
                      FROM facts GROUP BY node)
        SELECT f.node, f.value FROM facts f JOIN runs USING (node, run_id) WHERE f.key = ? ORDER BY f.node
    """, [limit, key]).fetchall()
    return dict(rows)


def topology_at(store: Store, run_id: int | None = None) -> dict[str, str]:
    """node -> group from the newest topology recorded up to ``run_id``
    (else the newest of all)."""
    limit = run_id if run_id is not None else 2 ** 62
    rows = store.con.execute("""
        WITH chosen AS (SELECT coalesce(max(run_id) FILTER (WHERE run_id <= ?), max(run_id)) AS run_id FROM topology)
        SELECT t.node, t."group" FROM topology t JOIN chosen USING (run_id)
    """, [limit]).fetchall()
    return dict(rows)
