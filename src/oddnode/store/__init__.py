"""The results store: one DuckDB file with a versioned schema.

It keeps every run with the node list it was given, every repetition with
its validity, the node facts, the topology and the findings.  A ``best``
table holds the representative result of every label (max for
higher-is-better, min for lower-is-better, over valid repetitions of the
latest run that measured the series) and the relative spread of those
repetitions; it is refreshed inside the same transaction as every write, so
the analysis reads one row per label.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from oddnode import __version__
from oddnode.core.model import (
    AFFINITY_DETAILS,
    DEFAULT_METRIC,
    DETAILED_SERIES,
    CommandCount,
    Dataset,
    Direction,
    Failure,
    Finding,
    LabelKind,
    NodeProcesses,
    NodeStage,
    Series,
    SetRuns,
    Severity,
)
from oddnode.core.defaults import STORE_PATH
from oddnode.core.inputs import parse_json, quote
from oddnode.core.nodes import NODE_NAME_PATTERN, NodeNameError, expand, label_members
from oddnode.core.order import natural_key
from oddnode.readings.sweep_grid import Grid
from oddnode.readings.history import NodeFinding, NodeHistory, SeriesHistory, SeriesRun, fact_changes

if TYPE_CHECKING:
    from oddnode.readings.profile import Profile

SCHEMA_VERSION = 10
DEFAULT_PATH = STORE_PATH
# Seconds to wait for another process's lock on a store file: a check that
# holds the store only while it writes releases it within a transaction.
LOCK_WAIT = 30.0
LOCK_POLL = 0.1  # seconds between tries
# How DuckDB names the process holding a store file's lock, in its error.
LOCK_HOLDER = re.compile(r"held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")
FINDINGS_SOURCE = "findings"  # runs.source of an analysis run, even one that found nothing
CHECK_SOURCE = "check"  # runs.source of a staged check's own run
SWEEP_SOURCE = "sweep"  # runs.source of a parameter sweep's own run
PROFILE_SOURCE = "profile"  # runs.source of the run that stored a profile: profile:<tool>

# Every connection: DuckDB never loads or downloads an extension for a
# store (given a SQLite or Parquet file it would fetch a reader over HTTP
# into ~/.duckdb).
DUCKDB_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
# A DuckDB file's main header: an 8-byte checksum, then this magic; then
# two database headers, all three 4096 bytes, before the blocks.
DUCKDB_MAGIC, DUCKDB_MAGIC_AT = b"DUCK", 8
DUCKDB_HEADER_BYTES = 3 * 4096
DAMAGED_REMEDY = "restore it from a copy, or start a new store with --db NEW_FILE"
# The characters of any stored label (a stored node name follows
# oddnode.core.nodes' NODE_NAME_PATTERN): node names, the dash of a pair, the
# brackets and commas of a folded node set; never a group (@), a set
# operator, a space or markup (/).  Checked in SQL, so a million labels
# cost one scan.
LABEL_PATTERN = r"[A-Za-z0-9._\[\],-]+"

_SCHEMA_V1 = """
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE SEQUENCE run_ids START 1;
CREATE TABLE runs (
    id BIGINT PRIMARY KEY,
    started TIMESTAMP NOT NULL,
    command VARCHAR NOT NULL,
    tool_version VARCHAR NOT NULL,
    source VARCHAR
);
CREATE TABLE results (
    run_id BIGINT NOT NULL,
    benchmark VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    unit VARCHAR NOT NULL,
    direction VARCHAR NOT NULL CHECK (direction IN ('higher', 'lower')),
    label VARCHAR NOT NULL,
    label_kind VARCHAR NOT NULL CHECK (label_kind IN ('node', 'pair', 'set')),
    repetition INTEGER,
    value DOUBLE,
    valid BOOLEAN NOT NULL,
    parameters VARCHAR,
    raw_ref VARCHAR
);
CREATE TABLE best (
    run_id BIGINT NOT NULL,
    benchmark VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    unit VARCHAR NOT NULL,
    direction VARCHAR NOT NULL,
    label VARCHAR NOT NULL,
    label_kind VARCHAR NOT NULL,
    value DOUBLE NOT NULL,
    repetitions BIGINT NOT NULL
);
CREATE TABLE facts (run_id BIGINT NOT NULL, node VARCHAR NOT NULL, key VARCHAR NOT NULL, value VARCHAR NOT NULL);
CREATE TABLE topology (run_id BIGINT NOT NULL, node VARCHAR NOT NULL, "group" VARCHAR NOT NULL);
CREATE TABLE findings (
    run_id BIGINT NOT NULL,
    kind VARCHAR NOT NULL,
    severity VARCHAR NOT NULL,
    subject VARCHAR NOT NULL,
    nodes VARCHAR NOT NULL,
    message VARCHAR NOT NULL,
    evidence VARCHAR NOT NULL,
    remedy VARCHAR NOT NULL
);
"""

# Entry i upgrades the schema from version i+1 to i+2.  A new store is made
# at version 1 and upgraded by the same steps, so every store has one history.
_MIGRATIONS: list[str] = [
    # 2: how each node fared in each stage of a run (ok, unreachable, timeout, failed).
    """
    CREATE TABLE node_status (
        run_id BIGINT NOT NULL,
        node VARCHAR NOT NULL,
        stage VARCHAR NOT NULL,
        status VARCHAR NOT NULL,
        detail VARCHAR
    );
    """,
    # 3: every node's raw output of every repetition, named by the results' raw_ref.
    """
    CREATE TABLE raw_outputs (
        run_id BIGINT NOT NULL,
        stage VARCHAR NOT NULL,
        label VARCHAR NOT NULL,
        repetition INTEGER NOT NULL,
        stdout VARCHAR,
        stderr VARCHAR
    );
    """,
    # 4: staged checks, so that an interrupted one can be resumed: what it
    # runs on and its plan (JSON), and the run of each step it has begun.
    """
    CREATE TABLE checks (
        check_id BIGINT NOT NULL,
        target VARCHAR NOT NULL,
        plan VARCHAR NOT NULL,
        status VARCHAR NOT NULL
    );
    CREATE TABLE check_steps (
        check_id BIGINT NOT NULL,
        step VARCHAR NOT NULL,
        run_id BIGINT NOT NULL,
        repetitions INTEGER NOT NULL
    );
    """,
    # 5: the node list each run was given (the cluster's declared nodes, so
    # that a node that never booted is still known), in the order given:
    # pair patterns are defined on it.  And the relative spread of the
    # repetitions behind each best value (filled when best is rebuilt after
    # the upgrade).
    """
    CREATE TABLE run_nodes (
        run_id BIGINT NOT NULL,
        position INTEGER NOT NULL,
        node VARCHAR NOT NULL
    );
    ALTER TABLE best ADD COLUMN spread DOUBLE;
    """,
    # 6: process accounting (oddnode processes): per node the interval and
    # how it was accounted, per node and command what its processes did.
    """
    CREATE TABLE process_nodes (
        run_id BIGINT NOT NULL,
        node VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        start DOUBLE NOT NULL,
        seconds DOUBLE NOT NULL,
        source VARCHAR,
        notes VARCHAR
    );
    CREATE TABLE process_counts (
        run_id BIGINT NOT NULL,
        node VARCHAR NOT NULL,
        command VARCHAR NOT NULL,
        executions BIGINT NOT NULL,
        cpu_seconds DOUBLE NOT NULL,
        elapsed_seconds DOUBLE NOT NULL,
        bursts INTEGER NOT NULL
    );
    """,
    # 7: parameter sweeps (oddnode sweep): the step and grid of each (its id
    # is its own run's), and every run it made with the setting it ran
    # under, the round and its place in that round's order.  (IF NOT EXISTS:
    # a store whose version was set back by hand keeps its sweeps.)
    """
    CREATE TABLE IF NOT EXISTS sweeps (
        sweep_id BIGINT NOT NULL,
        step VARCHAR NOT NULL,
        grid VARCHAR NOT NULL,
        repetitions INTEGER NOT NULL,
        seed BIGINT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS sweep_runs (
        sweep_id BIGINT NOT NULL,
        run_id BIGINT NOT NULL,
        setting INTEGER NOT NULL,
        round INTEGER NOT NULL,
        position INTEGER NOT NULL,
        parameters VARCHAR NOT NULL
    );
    """,
    # 8: MPI profiles (oddnode profile, import mpip/itc): a row per profile
    # (the profiled command, the reader's notes and skipped records as JSON,
    # the oddnode run that stored it), per rank its times, per rank, call and
    # message-size bucket its calls.  bucket: k >= 0 holds [2^k, 2^(k+1))
    # bytes, -1 zero bytes, NULL a size the source did not record.
    """
    CREATE SEQUENCE IF NOT EXISTS profile_ids START 1;
    CREATE TABLE IF NOT EXISTS profiles (
        profile_id BIGINT NOT NULL,
        tool VARCHAR NOT NULL,
        source VARCHAR NOT NULL,
        command VARCHAR,
        created TIMESTAMP NOT NULL,
        notes VARCHAR NOT NULL,
        skipped VARCHAR NOT NULL,
        run_id BIGINT
    );
    CREATE TABLE IF NOT EXISTS profile_ranks (
        profile_id BIGINT NOT NULL,
        rank INTEGER NOT NULL,
        host VARCHAR,
        wall DOUBLE NOT NULL,
        mpi_time DOUBLE,
        cpu DOUBLE
    );
    CREATE TABLE IF NOT EXISTS profile_calls (
        profile_id BIGINT NOT NULL,
        rank INTEGER NOT NULL,
        call VARCHAR NOT NULL,
        bucket INTEGER,
        count BIGINT NOT NULL,
        time DOUBLE NOT NULL,
        max_time DOUBLE NOT NULL,
        bytes BIGINT NOT NULL
    );
    """,
    # 9: the commands that started each command's processes (JSON list, most first).
    """
    ALTER TABLE process_counts ADD COLUMN parents VARCHAR;
    """,
    # 10: affinity samples (oddnode affinity): per node the sampler's report
    # as it wrote it (JSON), read back by readings.affinity.
    """
    CREATE TABLE IF NOT EXISTS affinity_samples (
        run_id BIGINT NOT NULL,
        node VARCHAR NOT NULL,
        report VARCHAR NOT NULL
    );
    """,
]

RESULT_COLUMNS = (
    "benchmark", "metric", "unit", "direction", "label", "label_kind",
    "repetition", "value", "valid", "parameters", "raw_ref",
)


class StoreError(RuntimeError):
    """The store cannot be opened or does not hold what was asked for."""


class StoreUnavailable(StoreError):
    """The store file exists but cannot be opened now: another process
    holds its lock, or the file system refuses it."""


class LabelError(StoreError):
    """A label or node name that is not one: refused on the way in, and
    named when an older or hand-edited store holds one."""


def check_label(label: object, kind: LabelKind | str) -> str:
    """``label`` if it is a node name, a pair of them or a node set of
    ``kind``, else LabelError quoting it.  Its characters are checked
    before ClusterShell parses it: a group (``@x``) never reaches a resolver."""
    if not isinstance(label, str) or not re.fullmatch(LABEL_PATTERN, label):
        raise LabelError(f"label {quote(label)} is not a node name, a pair of nodes or a node set: refused")
    try:
        label_members(label, LabelKind(kind))
    except (NodeNameError, ValueError) as err:
        raise LabelError(f"label {quote(label)} is not a valid {LabelKind(kind).value} label ({err}): refused") \
            from None
    return label


@dataclass(frozen=True)
class StoredProfile:
    """One stored MPI profile, as listed: its id, where it came from, its size."""

    profile_id: int
    tool: str
    source: str
    command: str | None
    created: datetime
    ranks: int
    hosts: int
    run_id: int | None = None


@dataclass
class ResultBatch:
    """Results to write, column by column (cheap for millions of rows)."""

    benchmark: list[str] = field(default_factory=list)
    metric: list[str] = field(default_factory=list)
    unit: list[str] = field(default_factory=list)
    direction: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    label_kind: list[str] = field(default_factory=list)
    repetition: list[int | None] = field(default_factory=list)
    value: list[float | None] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    parameters: list[str | None] = field(default_factory=list)
    raw_ref: list[str | None] = field(default_factory=list)

    def add(
        self,
        benchmark: str,
        label: str,
        value: float | None,
        *,
        metric: str = DEFAULT_METRIC,
        unit: str = "",
        direction: Direction = Direction.HIGHER,
        label_kind: LabelKind = LabelKind.NODE,
        repetition: int | None = None,
        valid: bool = True,
        parameters: dict[str, Any] | None = None,
        raw_ref: str | None = None,
    ) -> None:
        self.benchmark.append(benchmark)
        self.metric.append(metric)
        self.unit.append(unit)
        self.direction.append(Direction(direction).value)
        self.label.append(label)
        self.label_kind.append(LabelKind(label_kind).value)
        self.repetition.append(repetition)
        self.value.append(value)
        self.valid.append(valid)
        self.parameters.append(json.dumps(parameters, sort_keys=True) if parameters else None)
        self.raw_ref.append(raw_ref)

    def __len__(self) -> int:
        return len(self.label)

    def columns(self) -> dict[str, np.ndarray]:
        """The columns as arrays DuckDB scans directly; None stays NULL."""
        return {c: np.array(getattr(self, c), dtype=object) for c in RESULT_COLUMNS}


def _reading(method: Callable[..., Any]) -> Callable[..., Any]:
    """A read of the store whose file turns out damaged (a block that fails
    its checksum, or lies past the file's end) as one StoreError saying
    what to do, not DuckDB's exception."""
    @functools.wraps(method)
    def read(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except duckdb.Error as err:
            if not _is_damage(err):
                raise
            raise _damaged(self.path, err) from None
    return read


class Store:
    """A DuckDB results store; open it with :func:`open_store`.

    Every query is read to its end (``fetchall``, never ``fetchone``):
    DuckDB 2 refuses further work on a connection while a result is unread.

    A store opened with ``hold=False`` lets other processes in between its
    writes: its connection is closed at the end of every transaction and
    opened again when next used, so that a long check does not keep its
    store file locked while its nodes run (``oddnode stats`` can read it
    from another terminal meanwhile).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, *, read_only: bool = False,
                 hold: bool = True, lock_wait: float = LOCK_WAIT, on_wait: Callable[[str], None] | None = None):
        self._con: duckdb.DuckDBPyConnection | None = con
        self.path = path
        self.read_only = read_only
        self.hold = hold
        self.lock_wait = lock_wait
        self.on_wait = on_wait
        self._transactions = 0
        self._names_checked = False
        # Runs the loads leave out for an earlier or a recent view (as_of).
        self._hidden: tuple[int, ...] = ()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = _connection(self.path, self.read_only, self.lock_wait, self.on_wait)
        return self._con

    # -- lifecycle -------------------------------------------------------

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def release(self) -> None:
        """Close the connection until the next use, unless the store holds it."""
        if not self.hold and self._transactions == 0:
            self.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: a failure inside leaves the store as it was."""
        self.con.execute("BEGIN TRANSACTION")
        self._transactions += 1
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")
        finally:
            self._transactions -= 1
        self.release()

    # -- writing ---------------------------------------------------------

    def new_run(self, command: str, source: str | None = None, nodes: Sequence[str] = ()) -> int:
        """A new run; ``nodes`` is the node list it was given, kept in order."""
        run_id = int(self.con.execute("SELECT nextval('run_ids')").fetchall()[0][0])
        self.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?)",
            [run_id, datetime.now(timezone.utc).replace(tzinfo=None), command, __version__, source],
        )
        if nodes:
            self._insert("run_nodes", {
                "run_id": np.full(len(nodes), run_id, dtype=np.int64),
                "position": np.arange(1, len(nodes) + 1, dtype=np.int32),
                "node": np.array(nodes, dtype=object),
            })
        return run_id

    def _insert(self, table: str, columns: dict[str, np.ndarray]) -> None:
        """Append columns (named and ordered as the table's) in one scan."""
        names = ", ".join(f'"{name}"' for name in columns)
        self.con.register("_rows", columns)
        if "node" in columns:
            self._check_node_column("_rows", "node")
        self.con.execute(f"INSERT INTO {table} SELECT {names} FROM _rows")
        self.con.unregister("_rows")

    def add_results(self, run_id: int, rows: ResultBatch | duckdb.DuckDBPyRelation, *,
                    whole_series: bool = False) -> None:
        """Write results of one run and refresh the best table for their
        series.  ``rows`` is a batch, or a relation on this store's
        connection with the RESULT_COLUMNS (a bulk import never leaves DuckDB).

        ``whole_series``: the caller vouches that ``run_id`` is the newest
        run of every series in ``rows``, that these rows are all it will
        ever hold of them, and that no label has two valid rows in one
        series (an import without repetitions).  The best rows are then the
        valid rows themselves, copied without grouping a million labels.

        Results accumulate per label (node, pair or set): a series' best
        row of a label comes from the newest run that holds that label, so
        a rerun of some nodes replaces their results and no other's."""
        if isinstance(rows, ResultBatch) and not rows:
            return
        self.con.register("_incoming", rows.columns() if isinstance(rows, ResultBatch) else rows)
        self._check_incoming_labels()
        # The casts give columns of nothing but None (NULL) their type.  A
        # value that is not a finite number (a parser's slip, a division by
        # a zero time; NaN arrives as NULL) is kept, but never as a valid
        # result: it counts as a failed run, not as a node that is missing.
        self.con.execute("""
            INSERT INTO results SELECT ?, benchmark, metric, unit, direction, label, label_kind,
                CAST(repetition AS INTEGER), CAST(value AS DOUBLE),
                valid AND value IS NOT NULL AND isfinite(CAST(value AS DOUBLE)),
                CAST(parameters AS VARCHAR), CAST(raw_ref AS VARCHAR)
            FROM _incoming
        """, [run_id])
        # Left behind after an error (an aborted transaction refuses this),
        # a registration is replaced by the next write.
        self.con.unregister("_incoming")
        if whole_series:
            self._copy_best(run_id)
        else:
            self._refresh_best(self.con.execute(
                "SELECT DISTINCT benchmark, metric FROM results WHERE run_id = ?", [run_id]).fetchall())

    def _check_incoming_labels(self) -> None:
        """Refuse a write whose labels are not node names, pairs or node
        sets (the node labels by one scan, the others, few, one by one), or
        whose repetition numbers do not fit the store's column."""
        odd = self.con.execute("""
            SELECT DISTINCT label, label_kind FROM _incoming
            WHERE label IS NULL OR label_kind IS DISTINCT FROM 'node' OR NOT regexp_full_match(label, ?)
        """, [NODE_NAME_PATTERN]).fetchall()
        for label, kind in odd:
            if kind not in {k.value for k in LabelKind}:
                raise LabelError(f"label {quote(label)}: unknown label kind {quote(kind)}")
            check_label(label, kind)
        # The results' repetition column is a 32-bit INTEGER.
        wide = self.con.execute("""
            SELECT label, repetition FROM _incoming
            WHERE repetition IS NOT NULL AND TRY_CAST(repetition AS INTEGER) IS NULL LIMIT 1
        """).fetchall()
        if wide:
            raise StoreError(f"label {quote(wide[0][0])}: repetition {quote(wide[0][1])} is not a whole number "
                             f"from -2^31 to 2^31-1: refused")

    def _check_node_column(self, table: str, column: str) -> None:
        """Refuse a registered column of node names holding something else."""
        rows = self.con.execute(
            f'SELECT "{column}" FROM {table} WHERE "{column}" IS NULL OR NOT regexp_full_match("{column}", ?) LIMIT 1',
            [NODE_NAME_PATTERN]).fetchall()
        if rows:
            raise LabelError(f"node name {quote(rows[0][0])} is not one (letters, digits, '.', '_', '-'): refused")

    def _copy_best(self, run_id: int) -> None:
        """The best rows of a run's whole series whose labels have one valid
        row each (see add_results): those rows, one repetition, no spread."""
        # An empty best table (a new store) has no rows of these series to
        # replace, and the scan that names the series is saved.
        ((best_rows,),) = self.con.execute("SELECT count(*) FROM best").fetchall()
        if best_rows:
            # Results accumulate per label: the run replaces the labels it
            # holds (a failed one included), the others keep theirs.
            self.con.execute("""
                DELETE FROM best WHERE (benchmark, metric, label) IN
                    (SELECT DISTINCT (benchmark, metric, label) FROM results WHERE run_id = ?)
            """, [run_id])
        self.con.execute("""
            INSERT INTO best
            SELECT run_id, benchmark, metric, unit, direction, label, label_kind, value, 1, NULL
            FROM results WHERE run_id = ? AND valid AND value IS NOT NULL
        """, [run_id])

    def _register_series(self, series: Sequence[tuple[str, str]]) -> None:
        self.con.register("_touched", {
            "benchmark": np.array([s[0] for s in series], dtype=object),
            "metric": np.array([s[1] for s in series], dtype=object),
        })

    def _refresh_best(self, series: Sequence[tuple[str, str]]) -> None:
        """Rebuild the best rows of the given (benchmark, metric) series.

        spread = (max - min) / max(|max|, |min|) of a label's valid
        repetitions, the span relative to the larger end (as the gap
        between two modes is measured): NaN where fewer than two, NULL where
        the results carry no repetition numbers (a plot file's one value per
        label) or every value is 0.  No median: a holistic aggregate over a
        million labels would double the cost of an import.
        """
        if not series:
            return
        self._register_series(series)
        self.con.execute(
            "DELETE FROM best WHERE (benchmark, metric) IN (SELECT (benchmark, metric) FROM _touched)"
        )
        self.con.execute(f"""
            INSERT INTO best
            WITH {_newest_per_label(self._unjudged_runs(), "JOIN _touched USING (benchmark, metric)")}
            {_BEST_ROWS}
        """)
        self.con.unregister("_touched")

    def add_facts(self, run_id: int, facts: Iterable[tuple[str, str, str]]) -> None:
        rows = list(facts)
        if rows:
            nodes, keys, values = zip(*rows)
            self._insert("facts", {
                "run_id": np.full(len(rows), run_id, dtype=np.int64), "node": np.array(nodes, dtype=object),
                "key": np.array(keys, dtype=object), "value": np.array(values, dtype=object),
            })

    def set_topology(self, run_id: int, groups: dict[str, str]) -> None:
        if groups:
            nodes, names = zip(*sorted(groups.items()))
            self._insert("topology", {
                "run_id": np.full(len(nodes), run_id, dtype=np.int64), "node": np.array(nodes, dtype=object),
                "group": np.array(names, dtype=object),
            })

    def add_affinity_samples(self, run_id: int, reports: Mapping[str, Mapping[str, Any]]) -> None:
        """Each node's affinity sampler report (its JSON, as
        NodeAffinity.to_json gives it)."""
        if reports:
            nodes = sorted(reports)
            self._insert("affinity_samples", {
                "run_id": np.full(len(nodes), run_id, dtype=np.int64), "node": np.array(nodes, dtype=object),
                "report": np.array([json.dumps(reports[node]) for node in nodes], dtype=object),
            })

    def add_node_status(self, run_id: int, stage: str, statuses: Iterable[tuple[str, str, str | None]]) -> None:
        """How each node fared in one stage: (node, status, detail)."""
        rows = [(run_id, node, stage, status, detail) for node, status, detail in statuses]
        for _, node, *_ in rows:
            check_label(node, LabelKind.NODE)
        if rows:
            self.con.executemany("INSERT INTO node_status VALUES (?, ?, ?, ?, ?)", rows)

    def add_raw_output(self, run_id: int, stage: str, label: str, repetition: int,
                       stdout: str | None, stderr: str | None) -> None:
        """What one label's run printed in one repetition, kept to re-parse or inspect."""
        self.con.execute(
            "INSERT INTO raw_outputs VALUES (?, ?, ?, ?, ?, ?)", [run_id, stage, label, repetition, stdout, stderr]
        )

    def add_process_counts(self, run_id: int, nodes: Iterable[NodeProcesses]) -> None:
        """Each node's process accounting: its interval, then a row per command."""
        reports = list(nodes)
        if not reports:
            return
        self._insert("process_nodes", {
            "run_id": np.full(len(reports), run_id, dtype=np.int64),
            "node": np.array([r.node for r in reports], dtype=object),
            "method": np.array([r.method for r in reports], dtype=object),
            "start": np.array([r.start for r in reports], dtype=np.float64),
            "seconds": np.array([r.seconds for r in reports], dtype=np.float64),
            "source": np.array([r.source for r in reports], dtype=object),
            "notes": np.array([json.dumps(list(r.notes)) for r in reports], dtype=object),
        })
        rows = [(r.node, command, c) for r in reports for command, c in sorted(r.commands.items())]
        if rows:
            self._insert("process_counts", {
                "run_id": np.full(len(rows), run_id, dtype=np.int64),
                "node": np.array([node for node, _, _ in rows], dtype=object),
                "command": np.array([command for _, command, _ in rows], dtype=object),
                "executions": np.array([c.executions for _, _, c in rows], dtype=np.int64),
                "cpu_seconds": np.array([c.cpu_seconds for _, _, c in rows], dtype=np.float64),
                "elapsed_seconds": np.array([c.elapsed_seconds for _, _, c in rows], dtype=np.float64),
                "bursts": np.array([c.bursts for _, _, c in rows], dtype=np.int32),
                "parents": np.array([json.dumps(list(c.parents)) for _, _, c in rows], dtype=object),
            })

    def start_check(self, check_id: int, target: dict[str, Any], plan: dict[str, Any]) -> None:
        """Record a staged check (its id is its run's) as running."""
        self.con.execute("INSERT INTO checks VALUES (?, ?, ?, 'running')",
                         [check_id, json.dumps(target, sort_keys=True), json.dumps(plan, sort_keys=True)])

    def set_check_status(self, check_id: int, status: str) -> None:
        """running, stopped (by findings, before its last stage) or finished."""
        self.con.execute("UPDATE checks SET status = ? WHERE check_id = ?", [status, check_id])

    def add_check_step(self, check_id: int, step: str, run_id: int, repetitions: int) -> None:
        self.con.execute("INSERT INTO check_steps VALUES (?, ?, ?, ?)", [check_id, step, run_id, repetitions])

    def add_findings(self, run_id: int, findings: Iterable[Finding]) -> None:
        # One scan of columns: executemany costs a statement per finding.
        found = list(findings)
        if found:
            self._insert("findings", {
                "run_id": np.full(len(found), run_id, dtype=np.int64),
                "kind": np.array([f.kind for f in found], dtype=object),
                "severity": np.array([f.severity.value for f in found], dtype=object),
                "subject": np.array([f.subject for f in found], dtype=object),
                "nodes": np.array([f.nodes for f in found], dtype=object),
                "message": np.array([f.message for f in found], dtype=object),
                "evidence": np.array([json.dumps(f.evidence, sort_keys=True, default=_json_default)
                                      for f in found], dtype=object),
                "remedy": np.array([f.remedy for f in found], dtype=object),
            })

    def record_findings(self, command: str, findings: Iterable[Finding]) -> int:
        """An analysis' findings as a run of their own, in one transaction
        (a run even when there are none: the analysis found nothing)."""
        with self.transaction():
            run_id = self.new_run(command, source=FINDINGS_SOURCE)
            self.add_findings(run_id, findings)
        return run_id

    def start_sweep(self, sweep_id: int, step: str, grid: dict[str, Any], repetitions: int, seed: int) -> None:
        """Record a parameter sweep (its id is its run's): the step it runs and its grid (JSON)."""
        self.con.execute("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?)",
                         [sweep_id, step, json.dumps(grid, sort_keys=True), repetitions, seed])

    def add_sweep_runs(self, sweep_id: int, rows: Iterable[tuple[int, int, int, int, dict[str, Any]]]) -> None:
        """The runs one setting of a sweep made in one round: (run id, setting
        index, round, position in the round's order, the setting's parameters)."""
        values = [(sweep_id, run_id, setting, round_, position, json.dumps(parameters, sort_keys=True))
                  for run_id, setting, round_, position, parameters in rows]
        if values:
            self.con.executemany("INSERT INTO sweep_runs VALUES (?, ?, ?, ?, ?, ?)", values)
            # Their results were stored as the newest before they were known
            # as a sweep's: the series they touched are judged again.
            run_ids = sorted({run_id for _, run_id, *_ in values})
            self._refresh_best(self.con.execute(
                "SELECT DISTINCT benchmark, metric FROM results WHERE list_contains(?, run_id)", [run_ids]).fetchall())

    def _unjudged_runs(self) -> list[int]:
        """The runs of every sweep setting but the sweep's default: a sweep
        tries settings, and the analysis judges the cluster as it runs by
        default (`oddnode sweep --stored` compares the settings)."""
        rows = self.con.execute("""
            SELECT s.sweep_id, s.grid, r.run_id, r.setting FROM sweeps s JOIN sweep_runs r USING (sweep_id)
        """).fetchall()
        defaults: dict[int, int] = {}
        unjudged = []
        for sweep_id, grid, run_id, setting in rows:
            if sweep_id not in defaults:
                try:
                    defaults[sweep_id] = Grid.from_json(parse_json(grid, f"{self.path} (sweep {sweep_id})")).default
                except (KeyError, TypeError, ValueError) as err:
                    raise StoreError(f"{self.path}: the grid of sweep {sweep_id} is not one oddnode wrote ({err}): "
                                     f"{DAMAGED_REMEDY}") from None
            if setting != defaults[sweep_id]:
                unjudged.append(int(run_id))
        return unjudged + list(self._hidden)

    def add_profile(self, profile: Profile, command: str | None = None) -> int:
        """Store an MPI profile in one transaction; its id.  ``command``: the
        oddnode command line that made it, recorded as a run of its own
        (source ``profile:<tool>``) that the profile names."""
        with self.transaction():
            run_id = None if command is None else self.new_run(command, source=f"{PROFILE_SOURCE}:{profile.tool}")
            profile_id = int(self.con.execute("SELECT nextval('profile_ids')").fetchall()[0][0])
            self.con.execute("INSERT INTO profiles VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
                profile_id, profile.tool, profile.source, profile.command,
                datetime.now(timezone.utc).replace(tzinfo=None), json.dumps(list(profile.notes)),
                json.dumps(dict(profile.skipped)), run_id])
            if profile.ranks:
                self.con.executemany("INSERT INTO profile_ranks VALUES (?, ?, ?, ?, ?, ?)", [
                    (profile_id, r.rank, r.host, r.wall, r.mpi_time, r.cpu) for r in profile.ranks])
            calls = [(r.rank, call, bucket, s) for r in profile.ranks for (call, bucket), s in r.calls.items()]
            if calls:
                self.con.register("_calls", {
                    "rank": np.array([c[0] for c in calls], dtype=np.int64),
                    "call": np.array([c[1] for c in calls], dtype=object),
                    "bucket": np.array([c[2] for c in calls], dtype=object),
                    "count": np.array([c[3].count for c in calls], dtype=np.int64),
                    "time": np.array([c[3].time for c in calls], dtype=np.float64),
                    "max_time": np.array([c[3].max_time for c in calls], dtype=np.float64),
                    "bytes": np.array([c[3].bytes for c in calls], dtype=np.int64),
                })
                # The cast gives a bucket column of nothing but None (NULL) its type.
                self.con.execute("""
                    INSERT INTO profile_calls SELECT ?, rank, call, CAST(bucket AS INTEGER), count, time, max_time,
                        bytes FROM _calls
                """, [profile_id])
                self.con.unregister("_calls")
        return profile_id

    # -- reading ---------------------------------------------------------

    @_reading
    def check_names(self) -> None:
        """Refuse to read labels and node names that are not ones (stored by
        an older oddnode or by hand): a LabelError naming the first, before
        any is parsed as a node set.  Once per Store; writes are checked."""
        if self._names_checked:
            return
        odd = self.con.execute("""
            SELECT label, label_kind FROM (
                SELECT DISTINCT label, label_kind FROM best
                UNION SELECT DISTINCT label, label_kind FROM results WHERE NOT valid OR label_kind <> 'node')
            WHERE label_kind <> 'node' OR NOT regexp_full_match(label, $node)
            ORDER BY label
        """, {"node": NODE_NAME_PATTERN}).fetchall()
        nodes = self.con.execute("""
            SELECT node FROM (SELECT node FROM facts UNION ALL SELECT node FROM topology
                UNION ALL SELECT node FROM run_nodes UNION ALL SELECT node FROM node_status
                UNION ALL SELECT node FROM process_nodes)
            WHERE NOT regexp_full_match(node, $node) LIMIT 1
        """, {"node": NODE_NAME_PATTERN}).fetchall()
        try:
            for label, kind in odd:
                check_label(label, kind)
            for (node,) in nodes:
                check_label(node, LabelKind.NODE)
        except LabelError as err:
            raise LabelError(f"results store {self.path}: {err} (stored by an older oddnode or by hand; "
                             "delete its rows, or start a new store with --db NEW_FILE)") from None
        self._names_checked = True

    @_reading
    def runs(self) -> list[tuple[Any, ...]]:
        return self.con.execute("SELECT * FROM runs ORDER BY id").fetchall()

    @_reading
    def newest_run_id(self) -> int:
        """The newest run's id, 0 in an empty store."""
        ((newest,),) = self.con.execute("SELECT coalesce(max(id), 0) FROM runs").fetchall()
        return int(newest)

    @_reading
    def runs_after(self, run_id: int, command_prefix: str) -> list[int]:
        """The runs newer than ``run_id`` whose command starts with ``command_prefix``, oldest first."""
        rows = self.con.execute("SELECT id FROM runs WHERE id > ? AND starts_with(command, ?) ORDER BY id",
                                [run_id, command_prefix]).fetchall()
        return [int(found) for (found,) in rows]

    @_reading
    def first_node_detail(self, run_id: int) -> str | None:
        """The first detail any node's status in a run holds (why it did not run), if any."""
        rows = self.con.execute("SELECT detail FROM node_status WHERE run_id = ? AND detail IS NOT NULL LIMIT 1",
                                [run_id]).fetchall()
        return rows[0][0] if rows else None

    @_reading
    def result_parameters(self, run_id: int, benchmark: str) -> list[tuple[str, str]]:
        """(label, parameters as stored JSON text) of a run's valid results of
        one benchmark that carry parameters, in repetition order."""
        self.check_names()
        return self.con.execute("SELECT label, parameters FROM results WHERE run_id = ? AND benchmark = ? AND valid "
                                "AND parameters IS NOT NULL ORDER BY repetition", [run_id, benchmark]).fetchall()

    @_reading
    def best_by_label(self, run_id: int, benchmark: str, metric: str, repetition: int | None = None
                      ) -> dict[str, float]:
        """The largest valid, finite value per label of one run's series
        (of one repetition, when given)."""
        self.check_names()
        query = """SELECT label, max(value) FROM results WHERE run_id = ? AND benchmark = ? AND metric = ?
                   AND valid AND value IS NOT NULL AND isfinite(value)"""
        arguments: list[Any] = [run_id, benchmark, metric]
        if repetition is not None:
            query += " AND repetition = ?"
            arguments.append(repetition)
        return dict(self.con.execute(query + " GROUP BY label", arguments).fetchall())

    @_reading
    def pair_rates(self) -> list[tuple[str, str, float]]:
        """(pair label, unit, best valid value) of the stored pair
        bandwidths (metrics ``bandwidth.*``), per pair and unit."""
        return self.con.execute("""SELECT label, unit, max(value) FROM results
                                   WHERE label_kind = 'pair' AND metric LIKE 'bandwidth.%' AND valid
                                   AND value > 0 AND isfinite(value) GROUP BY label, unit""").fetchall()

    @_reading
    def series_names(self) -> list[tuple[str, str]]:
        return self.con.execute(
            "SELECT DISTINCT benchmark, metric FROM results ORDER BY 1, 2"
        ).fetchall()

    @_reading
    def load_series(self) -> list[Series]:
        """Best value of every label, one Series per benchmark metric (of the
        runs as_of shows: their best rows made for the view)."""
        self.check_names()
        if not self._hidden:
            return self._series_of("best")
        self.con.execute(f"""
            CREATE OR REPLACE TEMP TABLE _best_as_of AS
            WITH {_newest_per_label(self._unjudged_runs())}
            {_BEST_ROWS}
        """)
        try:
            return self._series_of("_best_as_of")
        finally:
            self.con.execute("DROP TABLE IF EXISTS _best_as_of")

    def _series_of(self, best: str) -> list[Series]:
        """The Series of a table of best rows (``best``, or a view's)."""
        meta = self.con.execute(f"""
            SELECT benchmark, metric, any_value(unit), any_value(direction), any_value(label_kind), count(*)
            FROM {best} GROUP BY benchmark, metric ORDER BY benchmark, metric
        """).fetchall()
        if not meta:
            return []
        # Labels travel as codes into the sorted distinct labels: a million
        # strings are fetched as the few thousand distinct ones.  Rows are
        # put in series and label order here, by one integer key, rather
        # than by sorting a million rows on their strings in DuckDB.
        names = np.asarray(self.con.execute(
            f"SELECT label FROM (SELECT DISTINCT label FROM {best}) ORDER BY label").fetchnumpy()["label"], dtype=object)
        self.con.register("_label_codes", {"label": names, "code": np.arange(len(names), dtype=np.int64)})
        self.con.register("_series_positions", {
            "benchmark": np.array([m[0] for m in meta], dtype=object),
            "metric": np.array([m[1] for m in meta], dtype=object),
            "position": np.arange(len(meta), dtype=np.int64),
        })
        cols = self.con.execute(f"""
            SELECT s.position, c.code, b.value, b.repetitions, b.spread
            FROM {best} b JOIN _label_codes c USING (label) JOIN _series_positions s USING (benchmark, metric)
        """).fetchnumpy()
        self.con.unregister("_label_codes")
        self.con.unregister("_series_positions")
        # A label is in a series once: the key is unique.
        order = np.argsort(np.asarray(cols["position"]) * len(names) + np.asarray(cols["code"]), kind="stable")
        codes = np.asarray(cols["code"], dtype=np.intp)[order]
        values = np.asarray(cols["value"], dtype=np.float64)[order]
        reps = np.asarray(cols["repetitions"], dtype=np.int64)[order]
        # NULL spread: the source kept no repetitions (a masked entry here).
        kept = ~np.ma.getmaskarray(cols["spread"])[order]
        spread = np.where(kept, np.ma.getdata(cols["spread"]).astype(np.float64)[order], np.nan)
        series, previous, start = [], 0, 0
        for benchmark, metric, unit, direction, kind, count in meta:
            stop = start + count
            # Series on the same labels as the one before share its array:
            # the correlation groups them by identity, without comparing.
            same = series and np.array_equal(codes[previous:start], codes[start:stop])
            series.append(Series(
                benchmark=benchmark, metric=metric, unit=unit, direction=Direction(direction),
                label_kind=LabelKind(kind), labels=series[-1].labels if same else names[codes[start:stop]],
                values=values[start:stop],
                repetitions=reps[start:stop],
                spread=spread[start:stop] if kept[start:stop].any() else None,
            ))
            previous, start = start, stop
        # In natural order, as every table shows them: message sizes 128 before 1024.
        return sorted(series, key=lambda one: (natural_key(one.benchmark), natural_key(one.metric)))

    def _latest_runs(self) -> list[tuple[str, str, int]]:
        """(benchmark, metric, newest run) of every series with results, in order."""
        return self.con.execute(f"SELECT benchmark, metric, max(run_id) FROM results WHERE {self._visible()} "
                                "GROUP BY benchmark, metric ORDER BY 1, 2").fetchall()

    @_reading
    def load_failures(self) -> list[Failure]:
        return self._failures_of(self._latest_runs())

    def _failures_of(self, latest: Sequence[tuple[str, str, int]]) -> list[Failure]:
        """The failed repetitions of each label's newest run of each series
        (``latest``, as _latest_runs gives it, says whether there are any)."""
        if not latest:
            return []
        self.check_names()
        # Only a label with a failed row somewhere can have failed in its newest
        # run: those labels' newest runs are sought, not a million others'.
        failed = ("JOIN (SELECT DISTINCT benchmark, metric, label FROM results WHERE NOT valid) "
                  "USING (benchmark, metric, label)")
        rows = self.con.execute(f"""
            WITH {_newest_per_label(self._unjudged_runs(), failed)}
            SELECT r.benchmark, r.label, r.label_kind, r.repetition
            FROM newest r WHERE NOT r.valid ORDER BY 1, 2, 4
        """).fetchall()
        failures = []
        for benchmark, label, kind, repetition in rows:
            kind = LabelKind(kind)
            failures.append(Failure(benchmark, label, kind, repetition, label_members(label, kind)))
        return failures

    @_reading
    def load_set_runs(self) -> list[SetRuns]:
        """Every valid repetition of each set's newest run of each set series."""
        self.check_names()
        rows = self.con.execute(f"""
            WITH {_newest_per_label(self._unjudged_runs(), "WHERE label_kind = 'set'")}
            SELECT r.benchmark, r.metric, any_value(r.unit), any_value(r.direction),
                   list(r.label ORDER BY r.label, r.repetition),
                   list(coalesce(r.repetition, -1) ORDER BY r.label, r.repetition),
                   list(r.value ORDER BY r.label, r.repetition)
            FROM newest r
            WHERE r.valid AND r.value IS NOT NULL AND isfinite(r.value)
            GROUP BY r.benchmark, r.metric ORDER BY 1, 2
        """).fetchall()
        return [SetRuns(benchmark=benchmark, metric=metric, unit=unit, direction=Direction(direction),
                        labels=np.array(labels, dtype=object), repetitions=np.array(repetitions, dtype=np.int64),
                        values=np.array(values, dtype=np.float64))
                for benchmark, metric, unit, direction, labels, repetitions, values in rows]

    @_reading
    def load_facts(self) -> dict[str, dict[str, str]]:
        """Every node's facts from the latest run that reported it: key -> node -> value.

        An inventory is a snapshot: a fact a node no longer reports (a
        process that stopped) is gone, not kept from an older run."""
        self.check_names()
        rows = self.con.execute(f"""
            WITH latest AS (SELECT node, max(run_id) AS run_id FROM facts WHERE {self._visible()} GROUP BY node)
            SELECT key, node, value FROM facts JOIN latest USING (node, run_id) ORDER BY key, node
        """).fetchall()
        facts: dict[str, dict[str, str]] = {}
        for key, node, value in rows:
            facts.setdefault(key, {})[node] = value
        return facts

    @_reading
    def load_topology(self) -> dict[str, str]:
        """Node -> group from the latest run that recorded a topology."""
        self.check_names()
        rows = self.con.execute(f"""
            SELECT node, "group" FROM topology WHERE run_id = (SELECT max(run_id) FROM topology WHERE {self._visible()})
        """).fetchall()
        return dict(rows)

    @_reading
    def load_processes(self, run_id: int | None = None) -> dict[str, NodeProcesses]:
        """Node -> its process accounting in one run (default: the latest that has any)."""
        if run_id is None:
            ((run_id,),) = self.con.execute(f"SELECT max(run_id) FROM process_nodes WHERE {self._visible()}").fetchall()
            if run_id is None:
                return {}
        nodes = self.con.execute(
            "SELECT node, method, start, seconds, source, notes FROM process_nodes WHERE run_id = ? ORDER BY node",
            [run_id]).fetchall()
        commands: dict[str, dict[str, CommandCount]] = {node: {} for node, *_ in nodes}
        for node, command, executions, cpu, elapsed, active, parents in self.con.execute("""
                SELECT node, command, executions, cpu_seconds, elapsed_seconds, bursts, parents
                FROM process_counts WHERE run_id = ? ORDER BY node, command""", [run_id]).fetchall():
            commands.setdefault(node, {})[command] = CommandCount(int(executions), float(cpu), float(elapsed),
                                                                  int(active), _parents(parents))
        return {node: NodeProcesses(node=node, seconds=float(seconds), method=method, commands=commands[node],
                                    source=source or "", notes=tuple(json.loads(notes or "[]")), start=float(start))
                for node, method, start, seconds, source, notes in nodes}

    @_reading
    def load_affinity_samples(self) -> dict[str, dict[str, Any]]:
        """Node -> its newest affinity sampler report (a node sampled again
        alone replaces its own), each checked as the sampler's output is: a
        StoreError names the node and run of one that is not."""
        self.check_names()
        rows = self.con.execute(f"""
            WITH latest AS (SELECT node, max(run_id) AS run_id FROM affinity_samples WHERE {self._visible()}
                            GROUP BY node)
            SELECT node, run_id, report FROM affinity_samples JOIN latest USING (node, run_id) ORDER BY node
        """).fetchall()
        if not rows:  # every load_dataset asks; most stores hold none, and need not import the checker
            return {}
        from oddnode.readings.affinity import node_affinity_from_json

        reports = {}
        for node, run_id, text in rows:
            where = f"{self.path} (affinity report of {node}, run {run_id})"
            try:
                report = parse_json(text, where)
                node_affinity_from_json(node, report)
            except ValueError as err:  # InputError and AffinityOutputError are ValueErrors
                raise StoreError(f"{where}: not a report oddnode wrote ({err}): {DAMAGED_REMEDY}") from None
            reports[node] = report
        return reports

    @_reading
    def load_node_status(self) -> dict[str, NodeStage]:
        """Nodes that did not answer in their newest run of each stage (a
        node rerun alone answers for itself only)."""
        self.check_names()
        rows = self.con.execute(f"""
            WITH latest AS (SELECT stage, node, max(run_id) AS run_id FROM node_status WHERE {self._visible()}
                            GROUP BY stage, node)
            SELECT s.node, s.stage, s.status, s.detail FROM node_status s JOIN latest USING (stage, node, run_id)
            WHERE s.status <> 'ok' ORDER BY s.node, s.stage
        """).fetchall()
        return {node: NodeStage(stage, status, detail or "") for node, stage, status, detail in rows}

    @_reading
    def load_details(self, names: Sequence[str] = DETAILED_SERIES) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """The parameters of every valid repetition of the named node series
        (benchmark names, metric ``value``) in each node's newest run:
        series -> label -> one dict per repetition, in repetition order."""
        if not names:
            return {}
        named = "WHERE benchmark IN (SELECT unnest(?)) AND metric = ? AND label_kind = 'node'"
        rows = self.con.execute(f"""
            WITH {_newest_per_label(self._unjudged_runs(), named)}
            SELECT r.benchmark, r.label, r.parameters FROM newest r
            WHERE r.valid AND r.parameters IS NOT NULL ORDER BY 1, 2, r.repetition
        """, [list(names), DEFAULT_METRIC]).fetchall()
        details: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for benchmark, label, parameters in rows:
            details.setdefault(benchmark, {}).setdefault(label, []).append(json.loads(parameters))
        return details

    @contextmanager
    def as_of(self, run: int | None = None, since: datetime | None = None) -> Iterator[None]:
        """Loads made meanwhile see only the runs up to ``run`` and started
        at ``since`` or later: the cluster as it was judged then, or its
        recent results alone.  An error when no run with results is left."""
        hidden = [int(found) for (found,) in self.con.execute(
            "SELECT id FROM runs WHERE (CAST(? AS BIGINT) IS NOT NULL AND id > ?) "
            "OR (CAST(? AS TIMESTAMP) IS NOT NULL AND started < ?) ORDER BY id", [run, run, since, since]).fetchall()]
        previous, self._hidden = self._hidden, tuple(hidden)
        try:
            yield
        finally:
            self._hidden = previous

    def _visible(self, column: str = "run_id") -> str:
        """A condition on ``column`` that leaves out the runs as_of hides."""
        return f"{column} NOT IN ({', '.join(map(str, self._hidden))})" if self._hidden else "TRUE"

    @_reading
    def node_history(self, node: str) -> NodeHistory:
        """``node``'s results of every node series run by run, the facts of
        it that changed between inventories, and the recorded findings that
        name it (their node sets expanded without groups)."""
        self.check_names()
        rows = self.con.execute("""
            SELECT r.benchmark, r.metric, any_value(r.unit), any_value(r.direction), r.run_id,
                   any_value(u.started), any_value(u.command),
                   CASE WHEN any_value(r.direction) = 'lower' THEN min(r.value) FILTER (WHERE r.valid)
                        ELSE max(r.value) FILTER (WHERE r.valid) END,
                   count(*) FILTER (WHERE r.valid), count(*) FILTER (WHERE NOT r.valid)
            FROM results r JOIN runs u ON u.id = r.run_id
            WHERE r.label = ? AND r.label_kind = 'node'
            GROUP BY r.benchmark, r.metric, r.run_id ORDER BY 1, 2, 5
        """, [node]).fetchall()
        medians = dict(((benchmark, metric), median) for benchmark, metric, median in self.con.execute("""
            SELECT benchmark, metric, median(value) FROM best
            WHERE label_kind = 'node' AND (benchmark, metric) IN
                  (SELECT (benchmark, metric) FROM results WHERE label = ? AND label_kind = 'node')
            GROUP BY ALL
        """, [node]).fetchall())
        series: list[SeriesHistory] = []
        for row in rows:
            benchmark, metric, unit, direction, run_id, started, command, value, valid, failed = row
            if not series or (series[-1].benchmark, series[-1].metric) != (benchmark, metric):
                series.append(SeriesHistory(benchmark, metric, unit, Direction(direction),
                                            medians.get((benchmark, metric)), ()))
            run = SeriesRun(int(run_id), started, command, value, int(valid), int(failed))
            series[-1] = dataclasses.replace(series[-1], runs=series[-1].runs + (run,))
        facts = self.con.execute("""
            SELECT f.key, f.run_id, u.started, f.value FROM facts f JOIN runs u ON u.id = f.run_id
            WHERE f.node = ? ORDER BY f.key, f.run_id
        """, [node]).fetchall()
        analyses = self.con.execute(
            "SELECT id, started, command FROM runs WHERE source = ? ORDER BY id", [FINDINGS_SOURCE]).fetchall()
        findings = []
        names: dict[str, bool] = {}  # node set -> whether it names the node
        for run_id, started, kind, severity, subject, nodes, message in self.con.execute("""
                SELECT f.run_id, u.started, f.kind, f.severity, f.subject, f.nodes, f.message
                FROM findings f JOIN runs u ON u.id = f.run_id ORDER BY f.run_id
                """).fetchall():
            if nodes not in names:
                try:
                    names[nodes] = node in expand(nodes)
                except NodeNameError:  # not a node set oddnode wrote: none of this node's
                    names[nodes] = False
            if names[nodes]:
                findings.append(NodeFinding(int(run_id), started, kind, severity, subject, message))
        return NodeHistory(node, tuple(series), fact_changes(facts), tuple(findings),
                           tuple((int(run_id), started, command) for run_id, started, command in analyses))

    @_reading
    def load_declared_nodes(self) -> list[str]:
        """The union of the node lists every run and import was given, each
        node where it was first declared (earliest run, then its position)."""
        self.check_names()
        rows = self.con.execute(f"""
            SELECT node FROM run_nodes WHERE {self._visible()}
            GROUP BY node ORDER BY min(run_id), arg_min(position, run_id), node
        """).fetchall()
        return [node for (node,) in rows]

    @_reading
    def load_dataset(self) -> Dataset:
        # One scan of the results names every series and finds its newest run.
        latest = self._latest_runs()
        return Dataset(
            series=self.load_series(),
            failures=self._failures_of(latest),
            facts=self.load_facts(),
            topology=self.load_topology(),
            node_trouble=self.load_node_status(),
            benchmarks_with_results={(benchmark, metric) for benchmark, metric, _ in latest},
            declared_nodes=self.load_declared_nodes(),
            set_runs=self.load_set_runs(),
            processes=self.load_processes(),
            details={**self.load_details(), **self._affinity_details()},
        )

    def _affinity_details(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """The stored affinity reports as the Dataset's details carry them."""
        reports = self.load_affinity_samples()
        return {AFFINITY_DETAILS: {node: [report] for node, report in reports.items()}} if reports else {}

    @_reading
    def latest_check(self) -> tuple[int, str, dict[str, Any], dict[str, Any]] | None:
        """The newest staged check: (id, status, target, plan), or None; a
        LabelError when its stored nodes are not node names (a store
        edited by hand), before anything reaches them."""
        rows = self.con.execute(
            "SELECT check_id, status, target, plan FROM checks ORDER BY check_id DESC LIMIT 1").fetchall()
        if not rows:
            return None
        ((check_id, status, target, plan),) = rows
        where = f"{self.path} (check {check_id})"
        target, plan = parse_json(target, where), parse_json(plan, where)
        nodes = target.get("nodes") if isinstance(target, dict) else None
        if not isinstance(nodes, list) or not isinstance(plan, dict):
            raise StoreError(f"{where}: its stored target or plan is not one oddnode wrote: {DAMAGED_REMEDY}")
        try:
            for node in nodes:
                check_label(node, LabelKind.NODE)
        except LabelError as err:
            raise LabelError(f"{where}: {err} (stored by hand or by an older oddnode)") from None
        return int(check_id), status, target, plan

    @_reading
    def check_steps(self, check_id: int) -> dict[str, tuple[int, int, int]]:
        """step -> (run id, repetitions wanted, repetitions stored) of a check."""
        rows = self.con.execute("""
            SELECT s.step, s.run_id, s.repetitions,
                   (SELECT count(DISTINCT repetition) FROM raw_outputs r WHERE r.run_id = s.run_id)
            FROM check_steps s WHERE s.check_id = ?
        """, [check_id]).fetchall()
        return {step: (int(run_id), int(wanted), int(done)) for step, run_id, wanted, done in rows}

    @_reading
    def sweeps(self) -> list[tuple[int, datetime, str, str, int, int]]:
        """Every sweep (those as_of leaves): (id, started, command, step,
        repetitions, runs stored), oldest first."""
        rows = self.con.execute(f"""
            SELECT s.sweep_id, r.started, r.command, s.step, s.repetitions,
                   (SELECT count(*) FROM sweep_runs w WHERE w.sweep_id = s.sweep_id)
            FROM sweeps s JOIN runs r ON r.id = s.sweep_id WHERE {self._visible("s.sweep_id")} ORDER BY s.sweep_id
        """).fetchall()
        return [(int(i), started, command, step, int(reps), int(runs)) for i, started, command, step, reps, runs in rows]

    @_reading
    def load_sweep(self, sweep_id: int | None = None) -> tuple[int, str, dict[str, Any], int, int, list[tuple[Any, ...]]]:
        """A sweep (default: the newest) and every result of its runs: (id,
        step, grid, repetitions, seed, rows of (setting, round, run id,
        benchmark, metric, unit, direction, label, label kind, value,
        valid)); StoreError when the store holds no such sweep."""
        if sweep_id is None:
            ((sweep_id,),) = self.con.execute("SELECT max(sweep_id) FROM sweeps").fetchall()
            if sweep_id is None:
                raise StoreError(f"no sweep in {self.path}: run oddnode sweep first")
        found = self.con.execute("SELECT step, grid, repetitions, seed FROM sweeps WHERE sweep_id = ?",
                                 [sweep_id]).fetchall()
        if not found:
            known = [str(row[0]) for row in self.sweeps()]
            raise StoreError(f"no sweep {sweep_id} in {self.path}"
                             + (f" (its sweeps: {', '.join(known)})" if known else ": it holds none"))
        ((step, grid, repetitions, seed),) = found
        rows = self.con.execute("""
            SELECT w.setting, w.round, w.run_id, r.benchmark, r.metric, r.unit, r.direction, r.label, r.label_kind,
                   r.value, r.valid
            FROM sweep_runs w JOIN results r USING (run_id)
            WHERE w.sweep_id = ? ORDER BY w.round, w.position, r.benchmark, r.metric, r.label
        """, [sweep_id]).fetchall()
        return int(sweep_id), step, json.loads(grid), int(repetitions), int(seed), rows

    @_reading
    def profiles(self) -> list[StoredProfile]:
        """Every stored MPI profile (those as_of leaves: an imported one,
        of no run, always), oldest first."""
        rows = self.con.execute(f"""
            SELECT p.profile_id, p.tool, p.source, p.command, p.created,
                   (SELECT count(*) FROM profile_ranks r WHERE r.profile_id = p.profile_id),
                   (SELECT count(DISTINCT r.host) FROM profile_ranks r WHERE r.profile_id = p.profile_id),
                   p.run_id
            FROM profiles p WHERE p.run_id IS NULL OR {self._visible("p.run_id")} ORDER BY p.profile_id
        """).fetchall()
        return [StoredProfile(int(i), tool, source, command, created, int(ranks), int(hosts),
                              None if run is None else int(run))
                for i, tool, source, command, created, ranks, hosts, run in rows]

    @_reading
    def latest_profile_id(self) -> int | None:
        """The newest profile's id; None when the store holds none."""
        ((profile_id,),) = self.con.execute("SELECT max(profile_id) FROM profiles").fetchall()
        return None if profile_id is None else int(profile_id)

    @_reading
    def profile(self, profile_id: int) -> Profile:
        """A stored MPI profile, as it was stored (ranks in order); StoreError
        when the store holds no such profile."""
        from oddnode.readings.profile import CallStats, Profile, RankProfile

        found = self.con.execute("SELECT tool, source, command, notes, skipped FROM profiles WHERE profile_id = ?",
                                 [profile_id]).fetchall()
        if not found:
            known = [str(p.profile_id) for p in self.profiles()]
            raise StoreError(f"no profile {profile_id} in {self.path}"
                             + (f" (its profiles: {', '.join(known)})" if known
                                else ": it holds none; run oddnode profile or oddnode import mpip first"))
        ((tool, source, command, notes, skipped),) = found
        profile = Profile(tool=tool, source=source, command=command, notes=json.loads(notes),
                          skipped=json.loads(skipped))
        ranks = {}
        for rank, host, wall, mpi_time, cpu in self.con.execute(
                "SELECT rank, host, wall, mpi_time, cpu FROM profile_ranks WHERE profile_id = ? ORDER BY rank",
                [profile_id]).fetchall():
            ranks[rank] = RankProfile(int(rank), host, float(wall), mpi_time, cpu)
            profile.ranks.append(ranks[rank])
        for rank, call, bucket, count, time_, max_time, nbytes in self.con.execute("""
                SELECT rank, call, bucket, count, time, max_time, bytes FROM profile_calls WHERE profile_id = ?
                ORDER BY rank, call, bucket NULLS LAST""", [profile_id]).fetchall():
            if rank not in ranks:  # calls of a rank without a rank row: kept, with no times of its own
                ranks[rank] = profile.rank(int(rank))
            ranks[rank].calls[(call, None if bucket is None else int(bucket))] = CallStats(
                int(count), float(time_), float(max_time), int(nbytes))
        return profile

    @_reading
    def latest_run_per_node(self, source: str) -> dict[str, datetime]:
        """Node -> start (UTC, naive) of the newest run of ``source`` whose
        node list named it: when a check last ran on each node."""
        rows = self.con.execute("""
            SELECT n.node, max(r.started) FROM runs r JOIN run_nodes n ON n.run_id = r.id
            WHERE r.source = ? GROUP BY n.node
        """, [source]).fetchall()
        return dict(rows)

    @_reading
    def latest_findings(self) -> list[Finding]:
        rows = self.con.execute("""
            SELECT kind, severity, subject, nodes, message, evidence, remedy FROM findings
            WHERE run_id = (SELECT max(id) FROM runs WHERE source = ?)
        """, [FINDINGS_SOURCE]).fetchall()
        return [
            Finding(kind, Severity(sev), subject, nodes, message, json.loads(evidence), remedy)
            for kind, sev, subject, nodes, message, evidence, remedy in rows
        ]


def open_store(path: str | os.PathLike[str] = DEFAULT_PATH, *, read_only: bool = False, hold: bool = True,
               lock_wait: float = LOCK_WAIT, on_wait: Callable[[str], None] | None = None) -> Store:
    """Open (or create) a store, upgrading an older schema in place first.
    ``hold=False``: keep the file locked only while writing (see Store);
    ``lock_wait``: seconds to wait for another process's lock; ``on_wait``
    is told, in a sentence naming that process, each time a wait begins.

    A path that is not a DuckDB file, or one that was cut short, is a
    StoreError naming it before DuckDB reads it; a store that cannot be
    opened now (locked, unreadable) a StoreUnavailable."""
    path = os.fspath(path)
    if read_only and not os.path.exists(path):
        raise StoreError(f"no results store at {path}: import results first (oddnode import ...)")
    if path != ":memory:":
        check_store_file(path)
    store = _connect(path, read_only, lock_wait, on_wait)
    try:
        _check_blocks(store)
        version = _schema_version(store)
        if version is None:
            if read_only:
                raise StoreError(f"{path} is empty: import results first")
            with store.transaction():
                store.con.execute(_SCHEMA_V1)
                store.con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
            version = 1
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} has schema version {version}, newer than this oddnode "
                f"({__version__}, schema {SCHEMA_VERSION}): upgrade oddnode"
            )
        if version < SCHEMA_VERSION:
            if read_only:  # upgrade through a writable connection, then read
                store.close()
                _upgrade(_connect(path, False, lock_wait, on_wait), version).close()
                store = _connect(path, True, lock_wait, on_wait)
            else:
                _upgrade(store, version)
    except duckdb.Error as err:
        store.close()
        raise _damaged(path, err) from None
    except BaseException:
        store.close()
        raise
    store.hold = hold or path == ":memory:"  # a store in memory lives only in its connection
    store.release()
    return store


def check_store_file(path: str) -> None:
    """Refuse, before DuckDB opens it, a path that is not a DuckDB file
    (a directory, a FIFO or device, a SQLite or text file) or a DuckDB
    file shorter than its header says (cut by a full disk or a copy); a
    path that does not exist is a new store."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise StoreUnavailable(f"cannot open results store {path}: {err.strerror or err}") from None
    if stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{path} is a directory, not a results store: name a file with --db")
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{path} is not a regular file (a device, FIFO or socket): name a results store with --db")
    try:
        with open(path, "rb") as file:
            head = file.read(DUCKDB_HEADER_BYTES)
    except OSError as err:
        raise StoreUnavailable(f"cannot open results store {path}: {err.strerror or err}") from None
    if head[DUCKDB_MAGIC_AT:DUCKDB_MAGIC_AT + len(DUCKDB_MAGIC)] != DUCKDB_MAGIC:
        what = "an empty file" if not head else "SQLite" if head.startswith(b"SQLite format 3") else None
        raise StoreError(f"not an oddnode store (DuckDB) file: {path}" + (f" ({what})" if what else "")
                         + ": name a results store with --db, or a new file to start one")
    if len(head) < DUCKDB_HEADER_BYTES:
        raise StoreError(f"results store {path} is damaged: {len(head)} bytes, shorter than DuckDB's header "
                         f"(cut short): {DAMAGED_REMEDY}")


def _check_blocks(store: Store) -> None:
    """Refuse a store file holding fewer blocks than DuckDB says it uses:
    one cut short (a full disk, a copy interrupted), found before a query
    reads past its end.  DuckDB drops free blocks from the end of the file,
    never used ones.  Skipped while a write-ahead log is pending, whose
    blocks the file does not hold yet."""
    if store.path == ":memory:" or os.path.exists(f"{store.path}.wal"):
        return
    rows = store.con.execute(
        "SELECT block_size, used_blocks FROM pragma_database_size() WHERE database_name = current_database()"
    ).fetchall()
    if not rows or not rows[0][0]:
        return
    ((block_size, used),) = rows
    held = (os.path.getsize(store.path) - DUCKDB_HEADER_BYTES) // block_size
    if used > held:
        raise StoreError(f"results store {store.path} is damaged: it uses {used} blocks of {block_size} bytes, "
                         f"the file holds {held} (cut short): {DAMAGED_REMEDY}")


def _is_damage(err: duckdb.Error) -> bool:
    """Whether DuckDB's error says its file is damaged: cut short, or a
    block that fails its checksum."""
    text = str(err).lower()
    return "corrupt" in text or "could not read enough bytes" in text


def _damaged(path: str, err: duckdb.Error) -> StoreError:
    """DuckDB's error on a store as one line: a damaged file with what to
    do, else a store that cannot be opened now (StoreUnavailable)."""
    first = " ".join(str(err).split())
    if _is_damage(err):
        return StoreError(f"results store {path} is damaged ({quote(first)}): {DAMAGED_REMEDY}")
    return StoreUnavailable(f"cannot open results store {path}: {quote(first)}")


def _connect(path: str, read_only: bool, lock_wait: float, on_wait: Callable[[str], None] | None) -> Store:
    return Store(_connection(path, read_only, lock_wait, on_wait), path, read_only=read_only, lock_wait=lock_wait,
                 on_wait=on_wait)


def lock_holder(error: str) -> str:
    """The process a DuckDB lock error names ("python3.11, PID 1234"), or
    "another process" when it names none."""
    held = LOCK_HOLDER.search(error)
    if held is None:
        return "another process"
    return f"{os.path.basename(held['program'])}, PID {held['pid']}"


def _connection(path: str, read_only: bool, lock_wait: float,
                on_wait: Callable[[str], None] | None = None) -> duckdb.DuckDBPyConnection:
    """A connection to the store file, waiting up to ``lock_wait`` seconds
    while another process holds its lock (``on_wait`` told once, as the wait
    begins); never loading an extension."""
    deadline = time.monotonic() + lock_wait
    told = False
    while True:
        try:
            return duckdb.connect(path, read_only=read_only, config=DUCKDB_CONFIG)
        except duckdb.Error as err:
            text = str(err).lower()
            locked = re.search(r"\block\b", text) is not None  # a lock, not a "block" that is corrupt
            if not locked:
                raise _damaged(path, err) from None
            if not told and on_wait is not None and lock_wait > 0:
                on_wait(f"results store {path} is in use by {lock_holder(str(err))}: waiting up to "
                        f"{lock_wait:g} s for it")
                told = True
            if time.monotonic() >= deadline:
                raise StoreUnavailable(f"cannot open results store {path}: another process has it open ({err}); "
                                       "a check lets others in between its writes, other commands hold it until "
                                       "they end") from err
        time.sleep(LOCK_POLL)


def _schema_version(store: Store) -> int | None:
    """The schema version, or None for an empty file."""
    con = store.con
    has_meta = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
    ).fetchall()[0][0]
    if has_meta:
        rows = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        if len(rows) != 1 or not re.fullmatch(r"[0-9]{1,9}", str(rows[0][0])):
            found = "no schema version" if not rows else f"schema version {quote(rows[0][0])}"
            raise StoreError(f"results store {store.path} is damaged: its meta table holds {found}: {DAMAGED_REMEDY}")
        return int(rows[0][0])
    if con.execute("SELECT count(*) FROM information_schema.tables").fetchall()[0][0]:
        raise StoreError(f"{store.path} is a DuckDB file but not an oddnode results store")
    return None


def _upgrade(store: Store, version: int) -> Store:
    """Apply the missing migrations, then rebuild the best table: it is
    derived from the results, and a new column of it is filled this way."""
    with store.transaction():
        for step in _MIGRATIONS[version - 1:]:
            store.con.execute(step)
        store._refresh_best(store.series_names())
        store.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
    return store


# The best rows of the ``newest`` rows (see _newest_per_label): per label the
# maximum (higher is better) or minimum of the valid repetitions, their
# count, and their spread (max - min) / max(|max|, |min|): NaN where fewer
# than two, NULL where the results carry no repetition numbers (a plot
# file's one value per label).
_BEST_ROWS = """
    SELECT r.run_id, r.benchmark, r.metric, any_value(r.unit) AS unit, any_value(r.direction) AS direction,
           r.label, any_value(r.label_kind) AS label_kind,
           CASE WHEN any_value(r.direction) = 'lower' THEN min(r.value) ELSE max(r.value) END AS value,
           count(*) AS repetitions,
           CASE WHEN count(r.repetition) = 0 THEN NULL
                WHEN count(*) < 2 THEN 'NaN'::DOUBLE
                ELSE (max(r.value) - min(r.value)) / greatest(abs(max(r.value)), abs(min(r.value))) END AS spread
    FROM newest r
    WHERE r.valid AND r.value IS NOT NULL
    GROUP BY r.run_id, r.benchmark, r.metric, r.label"""


def _newest_per_label(unjudged: Sequence[int], restriction: str = "") -> str:
    """A common table expression ``newest``: the result rows of each label's
    newest judged run of each series, of the results ``restriction`` (a join
    or a WHERE clause on ``results``) keeps.  Results accumulate per label:
    a rerun of some nodes, pairs or sets replaces theirs and no other's.
    The runs ``unjudged`` (see Store._unjudged_runs) are left out."""
    judged = f"(SELECT * FROM results WHERE run_id NOT IN ({', '.join(map(str, map(int, unjudged)))}))" \
        if unjudged else "results"
    return f"""newest AS (
        SELECT r.* FROM results r JOIN (
            SELECT benchmark, metric, label, max(run_id) AS run_id FROM {judged} AS results {restriction} GROUP BY ALL
        ) USING (benchmark, metric, label, run_id))"""


def _parents(text: str | None) -> tuple[str, ...]:
    """A command's stored parents: none when not recorded (an older store)
    or not a list of names (written by hand)."""
    try:
        parents = json.loads(text) if text else []
    except ValueError:
        return ()
    return tuple(parents) if isinstance(parents, list) and all(isinstance(p, str) for p in parents) else ()


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot store {type(value).__name__} in evidence")
