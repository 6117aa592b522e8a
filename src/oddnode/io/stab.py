"""STAB-style result files: plot files and the files that sit beside them.

A results directory holds:

- ``plot.<benchmark>``: one result a line, value in the first column, label
  (node, ``nodeA-nodeB`` pair or node set) in the second, further columns
  ignored, ``#`` comments;
- ``units.csv`` (benchmark,unit,direction), ``inventory.csv`` (node,key,value),
  ``topology.csv`` (node,group), and ``failed``: one failed run a line, named
  ``benchmark.arch.node.run`` (``xhpl.ppc64.node483.3``).

Everything is parsed and checked before anything is written, and written in
one transaction: a bad line anywhere leaves the store as it was.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oddnode.model import DEFAULT_METRIC, Direction, LabelKind
from oddnode.nodes import NodeNameError, is_node_name, label_kind, label_members
from oddnode.store import ResultBatch, Store
from oddnode.units import UnknownUnitError, canonical_unit

PLOT_PREFIX = "plot."
UNITS_FILE = "units.csv"
INVENTORY_FILE = "inventory.csv"
TOPOLOGY_FILE = "topology.csv"
FAILED_FILE = "failed"
KNOWN_EXTRAS = (UNITS_FILE, INVENTORY_FILE, TOPOLOGY_FILE, FAILED_FILE)


class InputError(ValueError):
    """Bad input, located by file and line."""

    def __init__(self, path: os.PathLike[str] | str, line: int | None, message: str):
        self.path, self.line, self.detail = os.fspath(path), line, message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


@dataclass
class PlotFile:
    benchmark: str
    path: Path
    rows: list[tuple[float, str, int]]  # value, label, line number
    repetitions: bool  # repeated labels are repetitions of one label


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

    plots: list[PlotFile] = field(default_factory=list)
    units: dict[str, tuple[str, Direction]] = field(default_factory=dict)
    facts: list[tuple[str, str, str]] = field(default_factory=list)
    topology: dict[str, str] = field(default_factory=dict)
    failures: list[FailedRun] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ImportSummary:
    run_id: int
    benchmarks: int
    results: int
    failures: int
    facts: int
    topology_nodes: int
    ignored: tuple[str, ...]


def _data_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Non-blank, non-comment lines with their 1-based numbers."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(path, None, f"not a text file ({err.reason} at byte {err.start})") from err
    except OSError as err:
        raise InputError(path, None, err.strerror or str(err)) from err
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            yield number, line


def benchmark_from_filename(path: Path) -> str:
    name = path.name
    if not name.startswith(PLOT_PREFIX) or len(name) == len(PLOT_PREFIX):
        raise InputError(path, None, "cannot tell the benchmark from the file name: "
                         "name it plot.<benchmark> or pass --benchmark")
    return name[len(PLOT_PREFIX):]


def read_plot_file(path: os.PathLike[str] | str, benchmark: str | None = None,
                   repetitions: bool = False) -> PlotFile:
    """Read one plot file: value in column 1, label in column 2."""
    path = Path(path)
    benchmark = benchmark or benchmark_from_filename(path)
    rows: list[tuple[float, str, int]] = []
    first_seen: dict[str, int] = {}
    for number, line in _data_lines(path):
        fields = line.split()
        try:
            value = float(fields[0])
        except ValueError:
            raise InputError(path, number, f"value {fields[0]!r} is not a number") from None
        if not math.isfinite(value):
            raise InputError(path, number, f"value {fields[0]!r} is not finite")
        if len(fields) < 2:
            raise InputError(path, number, "no label in the second column (node, nodeA-nodeB or node set)")
        label = fields[1]
        if label in first_seen and not repetitions:
            raise InputError(path, number, f"label {label} repeated (first on line {first_seen[label]}); "
                             "use --repetitions if the file holds several runs per label")
        first_seen.setdefault(label, number)
        rows.append((value, label, number))
    if not rows:
        raise InputError(path, None, "no results (the file is empty or only comments)")
    return PlotFile(benchmark, path, rows, repetitions)


def _csv_rows(path: Path, header: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """CSV rows with the expected column count; the header line is optional."""
    for number, line in _data_lines(path):
        row = [cell.strip() for cell in next(csv.reader([line]))]
        if [cell.lower() for cell in row] == list(header):
            continue
        if len(row) != len(header):
            raise InputError(path, number, f"expected {len(header)} columns ({','.join(header)}), got {len(row)}")
        if not all(row[:-1]):
            raise InputError(path, number, f"empty field in {','.join(header)}")
        yield number, row


def _checked_node(path: Path, number: int, node: str) -> str:
    if not is_node_name(node):
        raise InputError(path, number, f"invalid node name {node!r}")
    return node


def read_units(path: Path) -> dict[str, tuple[str, Direction]]:
    units: dict[str, tuple[str, Direction]] = {}
    for number, (benchmark, unit, direction) in _csv_rows(path, ("benchmark", "unit", "direction")):
        try:
            unit = canonical_unit(unit)
        except UnknownUnitError as err:
            raise InputError(path, number, str(err)) from None
        if direction.lower() not in ("higher", "lower"):
            raise InputError(path, number, f"direction {direction!r} must be 'higher' or 'lower' (is better)")
        if benchmark in units:
            raise InputError(path, number, f"benchmark {benchmark} listed twice")
        units[benchmark] = (unit, Direction(direction.lower()))
    return units


def read_inventory(path: Path) -> list[tuple[str, str, str]]:
    facts, seen = [], {}
    for number, (node, key, value) in _csv_rows(path, ("node", "key", "value")):
        _checked_node(path, number, node)
        if (node, key) in seen:
            raise InputError(path, number, f"{node} {key} given twice (first on line {seen[node, key]})")
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


def parse_failed_run(name: str) -> FailedRun:
    """Split ``benchmark.arch.node.run``; the benchmark keeps its arch
    (``xhpl.ppc64``) so that it matches ``plot.xhpl.ppc64``."""
    fields = name.split(".")
    if len(fields) < 4:
        raise ValueError(f"{name!r} is not benchmark.arch.node.run")
    *head, arch, label, run = fields
    if not run.isdigit():
        raise ValueError(f"run number {run!r} in {name!r} is not a whole number")
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
            _read_directory(path, data, repetitions)
        elif path.is_file():
            data.plots.append(read_plot_file(path, benchmark, repetitions))
        else:
            raise InputError(path, None, "no such file or directory")
    if not (data.plots or data.facts or data.failures or data.topology):
        raise InputError(", ".join(map(os.fspath, paths)), None,
                         "nothing to import: no plot.* files, inventory.csv, failed or topology.csv")
    seen: dict[str, Path] = {}
    for plot in data.plots:
        if plot.benchmark in seen:
            raise InputError(plot.path, None, f"benchmark {plot.benchmark} also comes from {seen[plot.benchmark]}")
        seen[plot.benchmark] = plot.path
    return data


def _read_directory(directory: Path, data: StabInput, repetitions: bool) -> None:
    for path in sorted(directory.iterdir()):
        name = path.name
        if name.startswith(PLOT_PREFIX) and path.is_file():
            data.plots.append(read_plot_file(path, repetitions=repetitions))
        elif name == UNITS_FILE:
            data.units.update(read_units(path))
        elif name == INVENTORY_FILE:
            data.facts.extend(read_inventory(path))
        elif name == TOPOLOGY_FILE:
            data.topology.update(read_topology(path))
        elif name == FAILED_FILE:
            data.failures.extend(read_failed(path))
        else:
            data.ignored.append(os.fspath(path))


def to_batch(data: StabInput, unit: str | None = None, direction: Direction | None = None) -> ResultBatch:
    """Turn checked input into result rows, classifying every label."""
    known_nodes = {node for node, _, _ in data.facts} | set(data.topology)
    for plot in data.plots:
        known_nodes.update(label for _, label, _ in plot.rows if label_kind(label) is LabelKind.NODE)

    def unit_of(benchmark: str, path: Path) -> tuple[str, Direction]:
        if benchmark in data.units:
            return data.units[benchmark]
        try:
            chosen = canonical_unit(unit) if unit is not None else ""
        except UnknownUnitError as err:
            raise InputError(path, None, str(err)) from None
        return chosen, direction or Direction.HIGHER

    def classified(path: Path, number: int | None, label: str) -> LabelKind:
        kind = label_kind(label, known_nodes)
        try:
            label_members(label, kind)
        except NodeNameError as err:
            raise InputError(path, number, str(err)) from None
        return kind

    batch = ResultBatch()
    for plot in data.plots:
        bench_unit, bench_direction = unit_of(plot.benchmark, plot.path)
        occurrences: dict[str, int] = {}
        for value, label, number in plot.rows:
            occurrences[label] = occurrences.get(label, 0) + 1
            batch.add(
                plot.benchmark, label, value, metric=DEFAULT_METRIC, unit=bench_unit,
                direction=bench_direction, label_kind=classified(plot.path, number, label),
                repetition=occurrences[label] if plot.repetitions else None,
                raw_ref=f"{plot.path}:{number}",
            )
    for failed in data.failures:
        origin = Path(failed.source or FAILED_FILE)
        bench_unit, bench_direction = unit_of(failed.benchmark, origin)
        batch.add(
            failed.benchmark, failed.label, None, unit=bench_unit, direction=bench_direction,
            label_kind=classified(origin, failed.line, failed.label), repetition=failed.run, valid=False,
            parameters={"arch": failed.arch}, raw_ref=f"{origin}:{failed.line}",
        )
    return batch


def import_stab(store: Store, paths: Sequence[os.PathLike[str] | str], *, benchmark: str | None = None,
                unit: str | None = None, direction: Direction | None = None, repetitions: bool = False,
                command: str = "import stab") -> ImportSummary:
    """Read, check, then write everything in one transaction."""
    if benchmark is not None and len(paths) != 1:
        raise InputError(", ".join(map(os.fspath, paths)), None, "--benchmark names one plot file only")
    data = read_paths(paths, benchmark, repetitions)
    batch = to_batch(data, unit, direction)
    source = ", ".join(os.fspath(p) for p in paths)
    with store.transaction():
        run_id = store.new_run(command, source)
        store.add_results(run_id, batch)
        store.add_facts(run_id, data.facts)
        store.set_topology(run_id, data.topology)
    return ImportSummary(
        run_id=run_id,
        benchmarks=len({p.benchmark for p in data.plots} | {f.benchmark for f in data.failures}),
        results=sum(len(p.rows) for p in data.plots),
        failures=len(data.failures),
        facts=len(data.facts),
        topology_nodes=len(data.topology),
        ignored=tuple(data.ignored),
    )
