"""STAB-style result files: plot files and the files that sit beside them.

A results directory holds:

- ``plot.<benchmark>``: one result a line, value in the first column, label
  (node, ``nodeA-nodeB`` pair or node set) in the second, further columns
  ignored, ``#`` comments;
- ``units.csv`` (benchmark,unit,direction), ``inventory.csv`` (node,key,value),
  ``topology.csv`` (node,group), and ``failed``: one failed run a line, named
  ``benchmark.arch.node.run`` (``xhpl.ppc64.node483.3``);
- ``nodes``: the cluster's node list, one node or node set
  (``gpu[001-128]``) a line, in the cluster's order; ``#`` comments, further
  words on a line ignored (an MPI host file's ``slots=16``).  With the
  topology's nodes it is recorded as the import's declared node list, so a
  node that left no result and no inventory is still named.

Plot files are parsed in bulk by DuckDB (plot_table.py); a file it finds
anything questionable in is read again line by line here.  Everything is
parsed and checked before anything is written, and written in one
transaction: a bad line anywhere leaves the store as it was.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np

from oddnode.core.inputs import InputError, check_regular_file, clip, quote, read_text
from oddnode.store.plot_table import FILES_TABLE, ROWS_TABLE, add_rows, drop_tables, parse_plot_files
from oddnode.core.model import DEFAULT_METRIC, Direction, LabelKind
from oddnode.core.nodes import NodeNameError, expand, is_node_name, label_kind, label_members
from oddnode.store import ResultBatch, Store
from oddnode.core.units import UnknownUnitError, canonical_unit

PLOT_PREFIX = "plot."
UNITS_FILE = "units.csv"
INVENTORY_FILE = "inventory.csv"
TOPOLOGY_FILE = "topology.csv"
FAILED_FILE = "failed"
NODES_FILE = "nodes"
KNOWN_EXTRAS = (UNITS_FILE, INVENTORY_FILE, TOPOLOGY_FILE, FAILED_FILE, NODES_FILE)
# The largest run number of a failed run: the store keeps repetitions as
# 32-bit integers.
MAX_RUN = 2**31 - 1


@dataclass(frozen=True)
class PlotFile:
    """A plot file to import and the benchmark it holds."""

    benchmark: str
    path: Path


@dataclass(frozen=True)
class FailedRun:
    benchmark: str
    arch: str
    label: str
    run: int
    source: str = ""  # file and line it came from, for error messages
    line: int | None = None


@dataclass
class StabInput:
    """Everything read from STAB files, checked and ready to store."""

    plots: list[PlotFile] = field(default_factory=list)  # listed; parsed in bulk on import
    units: dict[str, tuple[str, Direction]] = field(default_factory=dict)
    facts: list[tuple[str, str, str]] = field(default_factory=list)
    topology: dict[str, str] = field(default_factory=dict)
    failures: list[FailedRun] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)  # from nodes files, in order
    ignored: list[str] = field(default_factory=list)

    @property
    def declared_nodes(self) -> list[str]:
        """The node list of the import: the nodes files', then the topology's
        other nodes, each once, in the order read."""
        return list(dict.fromkeys([*self.nodes, *self.topology]))


@dataclass(frozen=True)
class ImportSummary:
    run_id: int
    benchmarks: int
    results: int
    failures: int
    facts: int
    topology_nodes: int
    ignored: tuple[str, ...]
    declared_nodes: int = 0


def _data_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Non-blank, non-comment lines with their 1-based numbers; only a
    regular file is read."""
    for number, raw in enumerate(read_text(path).splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, line


def series_of(name: str) -> tuple[str, str]:
    """(benchmark, metric) of a plot file's series name: ``c.ppc64`` is the
    benchmark's one value, ``pingpong.cut:bandwidth.65536`` one metric of
    it, as ``oddnode export plot`` names a benchmark with several."""
    benchmark, colon, metric = name.rpartition(":")
    return (benchmark, metric) if colon and benchmark and metric else (name, DEFAULT_METRIC)


def benchmark_from_filename(path: Path) -> str:
    name = path.name
    if not name.startswith(PLOT_PREFIX) or len(name) == len(PLOT_PREFIX):
        raise InputError(path, None, "cannot tell the benchmark from the file name: "
                         "name it plot.<benchmark> or pass --benchmark")
    return name[len(PLOT_PREFIX):]


def read_plot_file(path: os.PathLike[str] | str, repetitions: bool = False) -> list[tuple[float, str, int]]:
    """Read one plot file line by line: (value, label, line number) of each
    result, value in column 1, label in column 2.  The reference reading:
    the bulk parse hands here every file it has any doubt about."""
    path = Path(path)
    rows: list[tuple[float, str, int]] = []
    first_seen: dict[str, int] = {}
    for number, line in _data_lines(path):
        fields = line.split()
        try:
            value = float(fields[0])
        except ValueError:
            raise InputError(path, number, f"value {quote(fields[0])} is not a number") from None
        if not math.isfinite(value):
            raise InputError(path, number, f"value {quote(fields[0])} is not finite")
        if len(fields) < 2:
            raise InputError(path, number, "no label in the second column (node, nodeA-nodeB or node set)")
        label = fields[1]
        if label in first_seen and not repetitions:
            raise InputError(path, number, f"label {clip(label)} repeated (first on line {first_seen[label]}); "
                             "use --repetitions if the file holds several runs per label")
        first_seen.setdefault(label, number)
        rows.append((value, label, number))
    if not rows:
        raise InputError(path, None, "no results (the file is empty or only comments)")
    return rows


def _csv_rows(path: Path, header: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """CSV rows with the expected column count; the header line is optional."""
    for number, line in _data_lines(path):
        try:
            row = [cell.strip() for cell in next(csv.reader([line]))]
        except csv.Error as err:  # a field over csv.field_size_limit(), 131,072 characters
            raise InputError(path, number, f"not CSV: {err}") from None
        if [cell.lower() for cell in row] == list(header):
            continue
        if len(row) != len(header):
            raise InputError(path, number, f"expected {len(header)} columns ({','.join(header)}), got {len(row)}")
        if not all(row[:-1]):
            raise InputError(path, number, f"empty field in {','.join(header)}")
        yield number, row


def _checked_node(path: Path, number: int, node: str) -> str:
    if not is_node_name(node):
        raise InputError(path, number, f"invalid node name {quote(node)}")
    return node


def read_units(path: Path) -> dict[str, tuple[str, Direction]]:
    units: dict[str, tuple[str, Direction]] = {}
    for number, (benchmark, unit, direction) in _csv_rows(path, ("benchmark", "unit", "direction")):
        try:
            unit = canonical_unit(unit)
        except UnknownUnitError as err:
            raise InputError(path, number, str(err)) from None
        if direction.lower() not in ("higher", "lower"):
            raise InputError(path, number, f"direction {quote(direction)} must be 'higher' or 'lower' (is better)")
        if benchmark in units:
            raise InputError(path, number, f"benchmark {clip(benchmark)} listed twice")
        units[benchmark] = (unit, Direction(direction.lower()))
    return units


def read_inventory(path: Path) -> list[tuple[str, str, str]]:
    facts, seen = [], {}
    for number, (node, key, value) in _csv_rows(path, ("node", "key", "value")):
        _checked_node(path, number, node)
        if (node, key) in seen:
            raise InputError(path, number, f"{node} {clip(key)} given twice (first on line {seen[node, key]})")
        seen[node, key] = number
        facts.append((node, key, value))
    return facts


def read_topology(path: Path) -> dict[str, str]:
    groups: dict[str, str] = {}
    for number, (node, group) in _csv_rows(path, ("node", "group")):
        _checked_node(path, number, node)
        if not group:
            raise InputError(path, number, f"no group for {node}")
        if node in groups:
            raise InputError(path, number, f"{node} placed in a group twice")
        groups[node] = group
    return groups


def read_nodes(path: Path) -> list[str]:
    """A node list: the first word of each line, a node or a node set,
    expanded in the order written; a node listed twice counts once."""
    nodes: dict[str, None] = {}
    for number, line in _data_lines(path):
        entry = line.split("#", 1)[0].split()[0]
        try:
            nodes.update(dict.fromkeys(expand(entry)))
        except NodeNameError as err:
            raise InputError(path, number, str(err)) from None
    return list(nodes)


def parse_failed_run(name: str) -> FailedRun:
    """Split ``benchmark.arch.node.run``; the benchmark keeps its arch
    (``xhpl.ppc64``) so that it matches ``plot.xhpl.ppc64``."""
    fields = name.split(".")
    if len(fields) < 4:
        raise ValueError(f"{quote(name)} is not benchmark.arch.node.run")
    *head, arch, label, run = fields
    if not (run.isascii() and run.isdigit()):
        raise ValueError(f"run number {quote(run)} in {quote(name)} is not a whole number")
    if int(run) > MAX_RUN:
        raise ValueError(f"run number {quote(run)} in {quote(name)} is out of range (at most {MAX_RUN})")
    return FailedRun(benchmark=".".join([*head, arch]), arch=arch, label=label, run=int(run))


def read_failed(path: Path) -> list[FailedRun]:
    failures = []
    for number, line in _data_lines(path):
        try:
            failed = parse_failed_run(line.split()[0])
        except ValueError as err:
            raise InputError(path, number, str(err)) from None
        failures.append(FailedRun(failed.benchmark, failed.arch, failed.label, failed.run, os.fspath(path), number))
    return failures


def read_paths(paths: Sequence[os.PathLike[str] | str], benchmark: str | None = None,
               repetitions: bool = False) -> StabInput:
    """Read directories and individual plot files into one checked input."""
    data = StabInput()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            _read_directory(path, data)
        elif not path.exists():
            raise InputError(path, None, "no such file or directory")
        else:
            check_regular_file(path)
            data.plots.append(PlotFile(benchmark or benchmark_from_filename(path), path))
    if not (data.plots or data.facts or data.failures or data.topology or data.nodes):
        raise InputError(", ".join(map(os.fspath, paths)), None,
                         "nothing to import: no plot.* files, inventory.csv, failed, topology.csv or nodes")
    seen: dict[str, Path] = {}
    for plot in data.plots:
        if plot.benchmark in seen:
            raise InputError(plot.path, None, f"benchmark {plot.benchmark} also comes from {seen[plot.benchmark]}")
        seen[plot.benchmark] = plot.path
    return data


def _read_directory(directory: Path, data: StabInput) -> None:
    for path in sorted(directory.iterdir()):
        name = path.name
        if name.startswith(PLOT_PREFIX) and not path.is_dir():
            check_regular_file(path)  # a FIFO or device named plot.* is refused, not skipped
            data.plots.append(PlotFile(benchmark_from_filename(path), path))
        elif name == UNITS_FILE:
            data.units.update(read_units(path))
        elif name == INVENTORY_FILE:
            data.facts.extend(read_inventory(path))
        elif name == TOPOLOGY_FILE:
            data.topology.update(read_topology(path))
        elif name == FAILED_FILE:
            data.failures.extend(read_failed(path))
        elif name == NODES_FILE:
            data.nodes.extend(node for node in read_nodes(path) if node not in data.nodes)
        else:
            data.ignored.append(os.fspath(path))


def _units(data: StabInput, unit: str | None, direction: Direction | None) -> dict[str, tuple[str, Direction]]:
    """Unit and direction of every benchmark imported: from units.csv, else
    the ones given, else none and higher is better."""
    try:
        chosen = canonical_unit(unit) if unit is not None else ""
    except UnknownUnitError as err:
        origins = [p.path for p in data.plots] + [Path(f.source or FAILED_FILE) for f in data.failures]
        raise InputError(origins[0] if origins else "--unit", None, str(err)) from None
    units = {}
    for name in [p.benchmark for p in data.plots] + [f.benchmark for f in data.failures]:
        units[name] = data.units.get(name, (chosen, direction or Direction.HIGHER))
    return units


def _label_kinds(con: duckdb.DuckDBPyConnection, data: StabInput) -> dict[str, LabelKind]:
    """Classify every distinct label of the plot rows and failed runs (a
    node, a pair or a set); the first bad one, in file and line order, is
    an error there."""
    plot_labels = [label for (label,) in con.execute(f"SELECT DISTINCT label FROM {ROWS_TABLE}").fetchall()]
    plot_nodes = {label for label in plot_labels if label_kind(label) is LabelKind.NODE}
    known_nodes = {node for node, _, _ in data.facts} | set(data.topology) | set(data.nodes) | plot_nodes
    kinds: dict[str, LabelKind] = {}
    problems: dict[str, str] = {}
    for label in dict.fromkeys([*plot_labels, *(f.label for f in data.failures)]):
        # A plot label that is a node on its own is a known node: a node still.
        kind = LabelKind.NODE if label in plot_nodes else label_kind(label, known_nodes)
        try:
            label_members(label, kind)
        except NodeNameError as err:
            problems[label] = str(err)
        kinds[label] = kind
    if problems:
        con.register("_bad_labels", {"label": np.array(list(problems), dtype=object)})
        first = con.execute(f"""
            SELECT f.path, r.line, r.label FROM {ROWS_TABLE} r JOIN {FILES_TABLE} f USING (file)
            WHERE r.label IN (SELECT label FROM _bad_labels) ORDER BY r.file, r.line LIMIT 1
        """).fetchall()
        con.unregister("_bad_labels")
        if first:
            ((path, line, label),) = first
            raise InputError(path, line, problems[label])
        for failed in data.failures:
            if failed.label in problems:
                raise InputError(failed.source or FAILED_FILE, failed.line, problems[failed.label])
    return kinds


def _result_rows(con: duckdb.DuckDBPyConnection, data: StabInput, units: dict[str, tuple[str, Direction]],
                 kinds: dict[str, LabelKind], repetitions: bool) -> duckdb.DuckDBPyRelation:
    """The results to store, as a relation over the parsed plot rows (with
    their unit, direction, label kind and ``path:line``) and the failed runs."""
    con.register("_plot_meta", {
        "file": np.arange(len(data.plots), dtype=np.int32),
        "benchmark": np.array([series_of(p.benchmark)[0] for p in data.plots], dtype=object),
        "metric": np.array([series_of(p.benchmark)[1] for p in data.plots], dtype=object),
        "unit": np.array([units[p.benchmark][0] for p in data.plots], dtype=object),
        "direction": np.array([units[p.benchmark][1].value for p in data.plots], dtype=object),
        # raw_ref is this prefix and the line number.
        "ref_prefix": np.array([f"{os.fspath(p.path)}:" for p in data.plots], dtype=object),
    })
    # A repeated label's occurrences, in line order, are its repetitions.
    repetition = ("row_number() OVER (PARTITION BY r.file, r.label ORDER BY r.line)::INTEGER"
                  if repetitions else "NULL::INTEGER")
    kind_column, join_kinds = "k.label_kind", "JOIN _label_kinds k USING (label)"
    if len(set(kinds.values())) <= 1:
        # One kind for every label (the usual: all nodes, or all pairs): no join.
        kind_column, join_kinds = f"'{next(iter(kinds.values()), LabelKind.NODE).value}'", ""
    else:
        con.register("_label_kinds", {
            "label": np.array(list(kinds), dtype=object),
            "label_kind": np.array([kind.value for kind in kinds.values()], dtype=object),
        })
    query = f"""
        SELECT m.benchmark, m.metric, m.unit, m.direction, r.label, {kind_column} AS label_kind,
               {repetition} AS repetition, r.value, true AS valid, NULL::VARCHAR AS parameters,
               m.ref_prefix || r.line AS raw_ref
        FROM {ROWS_TABLE} r JOIN _plot_meta m USING (file) {join_kinds}
    """
    if data.failures:
        failed = ResultBatch()
        for run in data.failures:
            origin = run.source or FAILED_FILE
            bench_unit, bench_direction = units[run.benchmark]
            bench, metric = series_of(run.benchmark)
            failed.add(
                bench, run.label, None, metric=metric, unit=bench_unit, direction=bench_direction,
                label_kind=kinds[run.label], repetition=run.run, valid=False,
                parameters={"arch": run.arch}, raw_ref=f"{origin}:{run.line}",
            )
        con.register("_failed_rows", failed.columns())
        query += """
        UNION ALL
        SELECT benchmark, metric, unit, direction, label, label_kind, CAST(repetition AS INTEGER),
               CAST(value AS DOUBLE), valid, CAST(parameters AS VARCHAR), CAST(raw_ref AS VARCHAR)
        FROM _failed_rows
        """
    return con.sql(query)


def import_stab(store: Store, paths: Sequence[os.PathLike[str] | str], *, benchmark: str | None = None,
                unit: str | None = None, direction: Direction | None = None, repetitions: bool = False,
                command: str = "import stab") -> ImportSummary:
    """Read, check, then write everything in one transaction."""
    if benchmark is not None and len(paths) != 1:
        raise InputError(", ".join(map(os.fspath, paths)), None, "--benchmark names one plot file only")
    data = read_paths(paths, benchmark, repetitions)
    units = _units(data, unit, direction)
    source = ", ".join(os.fspath(p) for p in paths)
    con = store.con
    try:
        for index in parse_plot_files(con, [plot.path for plot in data.plots], repetitions):
            add_rows(con, index, read_plot_file(data.plots[index].path, repetitions))
        rows = _result_rows(con, data, units, _label_kinds(con, data), repetitions)
        ((results,),) = con.execute(f"SELECT count(*) FROM {ROWS_TABLE}").fetchall()
        with store.transaction():
            run_id = store.new_run(command, source, nodes=data.declared_nodes)
            # A label appears once in a plot file unless it holds
            # repetitions; two files of one benchmark may share labels.
            benchmarks = [plot.benchmark for plot in data.plots]
            store.add_results(run_id, rows, whole_series=not repetitions and len(set(benchmarks)) == len(benchmarks))
            store.add_facts(run_id, data.facts)
            store.set_topology(run_id, data.topology)
    finally:
        drop_tables(con)
        for name in ("_plot_meta", "_label_kinds", "_failed_rows"):
            con.unregister(name)
    return ImportSummary(
        run_id=run_id,
        benchmarks=len({p.benchmark for p in data.plots} | {f.benchmark for f in data.failures}),
        results=int(results),
        failures=len(data.failures),
        facts=len(data.facts),
        topology_nodes=len(data.topology),
        ignored=tuple(data.ignored),
        declared_nodes=len(data.declared_nodes),
    )
