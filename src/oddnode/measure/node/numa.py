"""The NUMA matrix (``oddnode numa``): on every node, the memory kernel's
triad with its threads on NUMA node i and its arrays on NUMA node j, and
the shared-memory ping-pong (``shm_pingpong.c``) between a CPU of NUMA node
i and one of node j, for every i and j, and where the node has Open MPI
(``mpicc`` and ``mpirun``) our MPI ping-pong (``mpi_pingpong.c``, two ranks
on the node, over the MPI library's shared memory) on the same two CPUs;
the probe of each node's NUMA layout, the argv and parsers of the cells,
and the runner that stores them.

Each cell runs on every node that has both of its NUMA nodes at once (all
nodes start it at one moment, as every benchmark of a check), R times, and
is stored as its own series (``numa_series``), labelled by the node: the
analysis then compares the same cell across the nodes, as NCSA's notes on
ember compared STREAM on one board and across boards.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from oddnode.onnode.cpu_topology import TopologyError, format_cpulist, parse_cpulist
from oddnode.measure.benchmarks import BenchmarkSpec, parse_kernel_run
from oddnode.reach.jobs import DEFAULT_TIMEOUT, last_json_object, runner_argv
from oddnode.measure.node.memory import (
    MAX_MIN_LOOP_SECONDS,
    MAX_NUMA_NODE,
    default_elements,
    last_level_cache_bytes,
    memory_kernel_argv,
)
from oddnode.measure.pair.mpi_pingpong import parse_mpi_pingpong_output
from oddnode.readings.numa_series import BANDWIDTH, LATENCY, MPI_PINGPONG, PINGPONG, TRIAD, cell_series
from oddnode.core.model import Direction
from oddnode.core.nodes import fold
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.parsers.oddnode_memory import parse_memory_output
from oddnode.parsers.oddnode_shm_pingpong import SHM_KERNEL, parse_shm_pingpong_output
from oddnode.measure.runner import RunSummary, new_target_run, run_benchmark
from oddnode.measure.steps import option
from oddnode.store import Store
from oddnode.reach.base import NodeStatus, Target
from oddnode.reach.launch import OPEN_MPI_ROOT_ENV, mpirun_line
from oddnode.reach.scripts import python_command
from oddnode.core.units import canonical_unit

NUMA_STAGE = "numa"
# pthreads: in libc from glibc 2.34 on, which keeps an empty stub to link.
SHM_LDLIBS = ("-lpthread",)
# The ping-pong's latency is read at 8 bytes (one word: what a flag or a
# small MPI message costs) and its bandwidth at 4 MiB, past the private
# caches, where the copies stream between the NUMA nodes (NCSA's notes:
# 0.50 us and 4,768 MB/s within one node of ember, 5.44 us and 507 MB/s
# across boards).
DEFAULT_LATENCY_BYTES = 8
DEFAULT_BANDWIDTH_BYTES = 4 << 20
MAX_MESSAGE_BYTES = 256 << 20  # shm_pingpong.c's bound
DEFAULT_SECONDS_PER_SIZE = 0.5
DEFAULT_REPETITIONS = 3
DEFAULT_NTIMES = 10
# Seconds beyond its sizes' time a ping-pong run may take: the warm-ups,
# a build's wait for the start, the runner's start.
_PINGPONG_SLACK = 60.0
# Seconds the layout probe may take on a node.
PROBE_TIMEOUT = 30.0
MPI_KERNEL = "mpi_pingpong"
# Two ranks on this node only, placed by the kernel itself (-P), not by
# mpirun: --bind-to none leaves each rank its whole cpuset to pin itself in.
MPI_LAUNCHER = tuple(mpirun_line(2, ["localhost"], slots=2, bind_to="none"))
# mpirun's start of the two ranks and the library's wire-up, beyond the
# kernel's own run.
_MPI_LAUNCH_SLACK = 30.0
MPI_MISSING = "no mpicc or mpirun on PATH"
_BINDING = re.compile(r"^rank0 cpu (\d+), rank1 cpu (\d+)$")

_MB_PER_S = canonical_unit("MB/s")  # the kernels' MB is 10^6 bytes
_US = canonical_unit("us")


# --- each node's NUMA layout --------------------------------------------------------

# Runs on the nodes (standard library, Python >= 3.6): the NUMA nodes sysfs
# shows, their CPUs and memory, and the CPUs and memory nodes this process's
# cpuset allows, and whether Open MPI's mpicc and mpirun are on PATH.
# Prints one JSON object.
LAYOUT_PROBE = r'''
import json, os, shutil
BASE = "/sys/devices/system/node"
def read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
report = {"numa": os.path.exists(BASE + "/online"), "online": read(BASE + "/online"), "nodes": {},
          "cpus_allowed": None, "mems_allowed": None,
          "mpi": bool(shutil.which("mpicc") and shutil.which("mpirun"))}
for line in (read("/proc/self/status") or "").splitlines():
    key, _, value = line.partition(":")
    if key == "Cpus_allowed_list":
        report["cpus_allowed"] = value.strip()
    elif key == "Mems_allowed_list":
        report["mems_allowed"] = value.strip()
if report["numa"]:
    for name in os.listdir(BASE):
        if name.startswith("node") and name[4:].isdigit():
            total = None
            for line in (read(BASE + "/" + name + "/meminfo") or "").splitlines():
                words = line.split()
                if len(words) >= 4 and words[2] == "MemTotal:" and words[3].isdigit():
                    total = int(words[3])
            report["nodes"][name[4:]] = {"cpus": read(BASE + "/" + name + "/cpulist"), "memory_kb": total}
print(json.dumps(report))
'''


def parse_cpu_list(text: str | None, source: str = "cpu list") -> tuple[int, ...]:
    """A list as sysfs and /proc write them ("0-3,8-11", "" for none), read
    by the topology reader; ParseError naming the source when it is not one."""
    try:
        return tuple(parse_cpulist(text, source))
    except TopologyError:
        raise ParseError(source, None, f"not a CPU or node list: {text!r}") from None


@dataclass(frozen=True)
class NumaLayout:
    """One node's NUMA nodes: the CPUs of each that this process may use,
    and which have memory it may bind to.  ``numa`` False: the kernel shows
    no NUMA nodes, and the node is one, 0.  ``mpi``: mpicc and mpirun are
    on the node's PATH."""

    numa: bool
    cpus: Mapping[int, tuple[int, ...]]  # NUMA node -> usable CPUs (cpuset applied)
    memory_kb: Mapping[int, int]  # NUMA node -> its memory, for those with memory this process may use
    mpi: bool = False

    @property
    def cpu_nodes(self) -> tuple[int, ...]:
        """The NUMA nodes with a CPU this process may use: the matrix's rows."""
        return tuple(sorted(node for node, cpus in self.cpus.items() if cpus))

    @property
    def mem_nodes(self) -> tuple[int, ...]:
        """The NUMA nodes with memory this process may use: the triad's columns."""
        return tuple(sorted(self.memory_kb))

    def has_triad_cell(self, cpu_node: int, mem_node: int) -> bool:
        return cpu_node in self.cpu_nodes and mem_node in self.memory_kb

    def has_pingpong_cell(self, first: int, second: int) -> bool:
        """Both ends' nodes have a usable CPU, two of them when it is one node."""
        if first == second:
            return len(self.cpus.get(first, ())) >= 2
        return first in self.cpu_nodes and second in self.cpu_nodes

    def to_json(self) -> dict[str, Any]:
        return {"numa": self.numa, "cpus": {str(n): format_cpulist(c) for n, c in sorted(self.cpus.items())},
                "memory_mb": {str(n): round(kb / 1024) for n, kb in sorted(self.memory_kb.items())},
                "mpi": self.mpi}


def numa_layout(report: Mapping[str, Any], source: str = "numa probe") -> NumaLayout:
    """A node's layout from the probe's report (pure: tests build reports of
    any machine).  Without NUMA in the kernel: node 0, every allowed CPU."""
    try:
        allowed = parse_cpu_list(report.get("cpus_allowed"), source)
        mpi = report.get("mpi") is True
        if not report.get("numa"):
            return NumaLayout(False, {0: allowed}, {0: 0}, mpi)
        mems = report.get("mems_allowed")
        mems_allowed = set(parse_cpu_list(mems, source)) if mems else None
        cpus: dict[int, tuple[int, ...]] = {}
        memory: dict[int, int] = {}
        for name, node in dict(report.get("nodes") or {}).items():
            number = int(name)
            listed = parse_cpu_list(node.get("cpus"), source)
            cpus[number] = tuple(c for c in listed if not allowed or c in allowed)
            total = node.get("memory_kb")
            if isinstance(total, int) and total > 0 and (mems_allowed is None or number in mems_allowed):
                memory[number] = total
    except (AttributeError, TypeError, ValueError) as problem:
        raise ParseError(source, None, f"not a NUMA layout report: {problem}") from None
    if not cpus:
        raise ParseError(source, None, "the NUMA layout report names no NUMA node")
    return NumaLayout(True, cpus, memory, mpi)


def parse_layout_output(stdout: str, source: str) -> NumaLayout:
    """The probe's JSON line (the last line: login banners may precede it)."""
    report = last_json_object(stdout)
    if report is None:
        raise ParseError(source, None, f"not a NUMA layout report: {stdout.strip()[:80]!r}")
    return numa_layout(report, source)


def probe_layouts(target: Target, timeout: float = PROBE_TIMEOUT,
                  interpreter: str = "python3") -> tuple[dict[str, NumaLayout], dict[str, str]]:
    """Every node's NUMA layout, and why a node gave none."""
    results = target.transport.run(target.nodes, python_command(LAYOUT_PROBE, interpreter), timeout=timeout)
    layouts: dict[str, NumaLayout] = {}
    reasons: dict[str, str] = {}
    for node in target.nodes:
        result = results.get(node)
        if result is None:
            reasons[node] = "the transport returned no result for this node"
        elif result.status is not NodeStatus.OK:
            reasons[node] = f"{result.status.value}: {' '.join(result.stderr.split())[:200] or 'no message'}"
        else:
            try:
                layouts[node] = parse_layout_output(result.stdout, node)
            except ParseError as problem:
                reasons[node] = str(problem)
    return layouts, reasons


# --- the shared-memory ping-pong ---------------------------------------------------


def _check_sizes(latency_bytes: int, bandwidth_bytes: int) -> None:
    for name, size in (("latency_bytes", latency_bytes), ("bandwidth_bytes", bandwidth_bytes)):
        if not (isinstance(size, int) and 1 <= size <= MAX_MESSAGE_BYTES):
            raise ValueError(f"{name} must be bytes, 1 to {MAX_MESSAGE_BYTES}, got {size!r}")
    if bandwidth_bytes <= latency_bytes:
        raise ValueError(f"bandwidth_bytes ({bandwidth_bytes}) must exceed latency_bytes ({latency_bytes})")


def shm_pingpong_argv(first_node: int, second_node: int, sizes: Sequence[int] = (8, 4 << 20),
                      seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE, *, timeout: float | None = None,
                      interpreter: str = "python3") -> list[str]:
    """The argv that runs the shared-memory ping-pong on a node between a
    CPU of NUMA node ``first_node`` and one of ``second_node``."""
    for name, node in (("first_node", first_node), ("second_node", second_node)):
        if not (isinstance(node, int) and 0 <= node <= MAX_NUMA_NODE):
            raise ValueError(f"{name} must be a NUMA node number, 0 to {MAX_NUMA_NODE}, got {node!r}")
    sizes = list(sizes)
    if not sizes or len(set(sizes)) != len(sizes) or any(not 0 <= s <= MAX_MESSAGE_BYTES for s in sizes):
        raise ValueError(f"sizes must be distinct byte counts, 0 to {MAX_MESSAGE_BYTES}, got {sizes!r}")
    if not 0 < seconds_per_size <= 3600:
        raise ValueError(f"seconds_per_size must be > 0 and <= 3600, got {seconds_per_size!r}")
    if timeout is None:
        timeout = len(sizes) * 2 * seconds_per_size + _PINGPONG_SLACK
    return runner_argv(SHM_KERNEL, ["-a", str(first_node), "-b", str(second_node),
                                    "-s", ",".join(str(s) for s in sizes), "-T", f"{seconds_per_size:g}"],
                       ldlibs=SHM_LDLIBS, timeout=timeout, interpreter=interpreter)


# --- the MPI ping-pong on the node ------------------------------------------------


def _check_cpus(cpus: Sequence[int]) -> tuple[int, int]:
    pair = tuple(cpus)
    if len(pair) != 2 or not all(isinstance(c, int) and 0 <= c for c in pair):
        raise ValueError(f"cpus must be two CPU numbers, rank 0's and rank 1's, got {cpus!r}")
    return pair[0], pair[1]


def numa_mpi_argv(cpus: Sequence[int], sizes: Sequence[int] = (8, 4 << 20),
                  seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE, *, timeout: float | None = None,
                  interpreter: str = "python3") -> list[str]:
    """The argv that runs our MPI ping-pong on a node, two ranks started by
    mpirun there (``--bind-to none``), rank r pinning itself to ``cpus[r]``
    (the kernel's -P) before it touches its buffers."""
    first, second = _check_cpus(cpus)
    sizes = list(sizes)
    if not sizes or len(set(sizes)) != len(sizes) or any(not 0 <= s <= MAX_MESSAGE_BYTES for s in sizes):
        raise ValueError(f"sizes must be distinct byte counts, 0 to {MAX_MESSAGE_BYTES}, got {sizes!r}")
    if not 0 < seconds_per_size <= 3600:
        raise ValueError(f"seconds_per_size must be > 0 and <= 3600, got {seconds_per_size!r}")
    if timeout is None:
        timeout = len(sizes) * 2 * seconds_per_size + _PINGPONG_SLACK + _MPI_LAUNCH_SLACK
    return runner_argv(MPI_KERNEL, ["-s", ",".join(str(s) for s in sizes), "-T", f"{seconds_per_size:g}",
                                    "-P", f"{first},{second}"],
                       env=dict(OPEN_MPI_ROOT_ENV), timeout=timeout, interpreter=interpreter, compiler="mpicc",
                       launcher=list(MPI_LAUNCHER))


def parse_numa_mpi_output(text: str, source: str) -> ParsedOutput:
    """One pinned run of the MPI ping-pong (rank 0's stdout): its
    measurements (``mpi.pingpong``) and, from its ``# binding`` line, the
    CPUs of its ranks (``a_cpu``, ``b_cpu``); ParseError when the line is
    missing (a run without -P) or malformed."""
    parsed = parse_mpi_pingpong_output(text, source)
    binding = parsed.configuration.get("binding")
    if binding is None:
        raise ParseError(source, None, "the MPI ping-pong output has no '# binding' line: its ranks were not pinned")
    match = _BINDING.match(str(binding))
    if match is None:
        raise ParseError(source, None, f"not a binding of two ranks: {str(binding)[:80]!r}")
    configuration = {**parsed.configuration, "a_cpu": int(match.group(1)), "b_cpu": int(match.group(2))}
    problems = [p.replace("between the nodes", "between the two ranks") for p in parsed.problems]
    return ParsedOutput(parsed.tool, parsed.measurements, parsed.valid, problems, configuration)


# --- the cells ---------------------------------------------------------------------


@dataclass(frozen=True)
class NumaOptions:
    """What ``oddnode numa`` runs.  ``elements`` None: each array 4x this
    machine's last-level cache (as the memory step); ``threads`` None: one
    per CPU of the threads' NUMA node."""

    memory: bool = option(True, help="The memory kernel's triad with threads on NUMA node i, memory on j")
    pingpong: bool = option(True, help="The shared-memory ping-pong between a CPU of NUMA node i and one of j")
    # the MPI ping-pong needs ``pingpong``
    mpi: bool = option(True, help="Also our MPI ping-pong (two ranks by mpirun on the node) on the shared-memory "
                                  "ping-pong's CPUs, on the nodes with mpicc and mpirun")
    elements: int | None = option(None, help="Doubles per array",
                                  shown_default="each array 4x this machine's last-level cache")
    ntimes: int = option(DEFAULT_NTIMES, help="Iterations of the memory kernel, the first not counted")
    threads: int | None = option(None, help="Threads of the memory kernel",
                                 shown_default="one per CPU of NUMA node i")
    min_loop_seconds: float = 0.0
    latency_bytes: int = option(DEFAULT_LATENCY_BYTES, help="The ping-pong's message size for the latency matrix")
    bandwidth_bytes: int = option(DEFAULT_BANDWIDTH_BYTES,
                                  help="The ping-pong's message size for the bandwidth matrix")
    seconds_per_size: float = option(DEFAULT_SECONDS_PER_SIZE, help="Seconds of ping-pong per message size",
                                     check="seconds")
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not (self.memory or self.pingpong):
            raise ValueError("nothing to run: the memory kernel and the ping-pong are both left out")
        if self.elements is not None and self.elements < 1:
            raise ValueError(f"elements must be >= 1, got {self.elements}")
        if self.ntimes < 2:
            raise ValueError(f"ntimes must be >= 2 (the first iteration is discarded), got {self.ntimes}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not 0.0 <= self.min_loop_seconds <= MAX_MIN_LOOP_SECONDS:
            raise ValueError(f"min_loop_seconds must be 0 to {MAX_MIN_LOOP_SECONDS:g}, got {self.min_loop_seconds}")
        _check_sizes(self.latency_bytes, self.bandwidth_bytes)
        if not 0 < self.seconds_per_size <= 3600:
            raise ValueError(f"seconds_per_size must be > 0 and <= 3600, got {self.seconds_per_size}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")


def _cell_output(parsed: ParsedOutput, measurements: list[Measurement]) -> ParsedOutput:
    return ParsedOutput(parsed.tool, measurements, parsed.valid, parsed.problems, parsed.configuration)


def _check_binding(configuration: Mapping[str, Any], keys: tuple[str, str], cell: tuple[int, int],
                   source: str) -> None:
    """Set, read back, cross-check: the kernel says it bound what was asked."""
    got = tuple(configuration.get(key) for key in keys)
    if got != cell:
        raise ParseError(source, None, f"the kernel reports {keys[0]} {got[0]} and {keys[1]} {got[1]}, "
                                       f"not the cell {cell[0]}->{cell[1]} asked for")


def parse_triad_cell(cpu_node: int, mem_node: int, text: str, source: str) -> ParsedOutput:
    """A bound memory kernel's run (the node runner's report) as its cell:
    the triad only, under ``numa.triad.<i>.<j>``."""
    parsed = parse_kernel_run(text, source, "memory", parse_memory_output)
    _check_binding(parsed.configuration, ("cpu_node", "mem_node"), (cpu_node, mem_node), source)
    triad = next(m for m in parsed.measurements if m.benchmark == "memory.triad")
    return _cell_output(parsed, [replace(triad, benchmark=cell_series(TRIAD, cpu_node, mem_node),
                                         metric=BANDWIDTH)])


def parse_pingpong_cell(first: int, second: int, latency_bytes: int, bandwidth_bytes: int, text: str,
                        source: str) -> ParsedOutput:
    """A ping-pong run as its cell: the latency at ``latency_bytes`` and the
    bandwidth at ``bandwidth_bytes`` under ``numa.pingpong.<i>.<j>``."""
    parsed = parse_kernel_run(text, source, SHM_KERNEL, parse_shm_pingpong_output)
    _check_binding(parsed.configuration, ("a_node", "b_node"), (first, second), source)
    name = cell_series(PINGPONG, first, second)
    wanted = {f"latency.{latency_bytes}": LATENCY, f"bandwidth.{bandwidth_bytes}": BANDWIDTH}
    chosen = [replace(m, benchmark=name, metric=wanted[m.metric],
                      parameters={**m.parameters, "cpu_node": first, "mem_node": second})
              for m in parsed.measurements if m.metric in wanted]
    if len(chosen) != 2:
        raise ParseError(source, None, f"the ping-pong output lacks {latency_bytes} or {bandwidth_bytes} bytes")
    return _cell_output(parsed, chosen)


def parse_mpi_cell(first: int, second: int, cpus: tuple[int, int], latency_bytes: int, bandwidth_bytes: int,
                   text: str, source: str) -> ParsedOutput:
    """A pinned MPI ping-pong run (the node runner's report) as its cell:
    the latency at ``latency_bytes`` and the bandwidth at
    ``bandwidth_bytes`` under ``numa.mpi_pingpong.<i>.<j>``, its ranks'
    CPUs checked against those asked for."""
    parsed = parse_kernel_run(text, source, MPI_KERNEL, parse_numa_mpi_output)
    got = (parsed.configuration["a_cpu"], parsed.configuration["b_cpu"])
    if got != tuple(cpus):
        raise ParseError(source, None, f"the MPI ping-pong reports its ranks on CPUs {got[0]},{got[1]}, "
                                       f"not {cpus[0]},{cpus[1]} as asked")
    name = cell_series(MPI_PINGPONG, first, second)
    wanted = {f"latency.{latency_bytes}": LATENCY, f"bandwidth.{bandwidth_bytes}": BANDWIDTH}
    ends = {"cpu_node": first, "mem_node": second, "a_cpu": got[0], "b_cpu": got[1]}
    chosen = [replace(m, benchmark=name, metric=wanted[m.metric],
                      parameters={**{k: v for k, v in m.parameters.items() if k not in ("peer", "port")}, **ends})
              for m in parsed.measurements if m.metric in wanted]
    if len(chosen) != 2:
        raise ParseError(source, None, f"the MPI ping-pong output lacks {latency_bytes} or {bandwidth_bytes} bytes")
    return _cell_output(parsed, chosen)


def triad_cell_spec(cpu_node: int, mem_node: int, options: NumaOptions, elements: int) -> BenchmarkSpec:
    """The memory kernel bound to one cell, as a benchmark every node runs at once."""
    name = cell_series(TRIAD, cpu_node, mem_node)
    argv = memory_kernel_argv(elements, options.ntimes, options.threads, proc_bind=None,
                              min_loop_seconds=options.min_loop_seconds, cpu_node=cpu_node, mem_node=mem_node,
                              timeout=options.timeout)
    return BenchmarkSpec(name=name, stage=NUMA_STAGE, argv=argv,
                         parse=functools.partial(parse_triad_cell, cpu_node, mem_node),
                         series=((name, BANDWIDTH, _MB_PER_S, Direction.HIGHER),), synchronized=True)


def pingpong_cell_spec(first: int, second: int, options: NumaOptions) -> BenchmarkSpec:
    """The ping-pong between NUMA nodes ``first`` and ``second``, as a benchmark."""
    name = cell_series(PINGPONG, first, second)
    sizes = (options.latency_bytes, options.bandwidth_bytes)
    argv = shm_pingpong_argv(first, second, sizes, options.seconds_per_size)
    return BenchmarkSpec(name=name, stage=NUMA_STAGE, argv=argv,
                         parse=functools.partial(parse_pingpong_cell, first, second, *sizes),
                         series=((name, LATENCY, _US, Direction.LOWER),
                                 (name, BANDWIDTH, _MB_PER_S, Direction.HIGHER)),
                         synchronized=True)


def mpi_cell_spec(first: int, second: int, cpus: tuple[int, int], options: NumaOptions) -> BenchmarkSpec:
    """The MPI ping-pong of cell (``first``, ``second``) on the CPUs ``cpus``,
    as a benchmark (run on the nodes whose shared-memory ping-pong used them)."""
    name = cell_series(MPI_PINGPONG, first, second)
    sizes = (options.latency_bytes, options.bandwidth_bytes)
    argv = numa_mpi_argv(cpus, sizes, options.seconds_per_size)
    return BenchmarkSpec(name=name, stage=NUMA_STAGE, argv=argv,
                         parse=functools.partial(parse_mpi_cell, first, second, cpus, *sizes),
                         series=((name, LATENCY, _US, Direction.LOWER),
                                 (name, BANDWIDTH, _MB_PER_S, Direction.HIGHER)),
                         synchronized=True)


@dataclass(frozen=True)
class Cell:
    """One cell of the matrices and the nodes that have it."""

    family: str  # TRIAD, PINGPONG or MPI_PINGPONG
    cpu_node: int
    mem_node: int
    nodes: tuple[str, ...]

    @property
    def name(self) -> str:
        return cell_series(self.family, self.cpu_node, self.mem_node)


def plan_cells(layouts: Mapping[str, NumaLayout], options: NumaOptions, order: Sequence[str]) -> list[Cell]:
    """Every cell some node has, triad cells first, each with the nodes
    (in ``order``) that have it (pure)."""
    cells: list[Cell] = []
    kinds: list[tuple[str, Callable[[NumaLayout, int, int], bool], Callable[[NumaLayout], tuple[int, ...]]]] = []
    if options.memory:
        kinds.append((TRIAD, NumaLayout.has_triad_cell, lambda layout: layout.mem_nodes))
    if options.pingpong:
        kinds.append((PINGPONG, NumaLayout.has_pingpong_cell, lambda layout: layout.cpu_nodes))
    for family, has, columns in kinds:
        rows = sorted({i for layout in layouts.values() for i in layout.cpu_nodes})
        cols = sorted({j for layout in layouts.values() for j in columns(layout)})
        for i in rows:
            for j in cols:
                nodes = tuple(node for node in order if node in layouts and has(layouts[node], i, j))
                if nodes:
                    cells.append(Cell(family, i, j, nodes))
    return cells


@dataclass
class NumaRun:
    """What a NUMA run did: its run id, every node's layout (or why it gave
    none), each cell's run summary, and why the MPI ping-pong was not run
    where it was not (``mpi_skipped``: nodes -> reason)."""

    run_id: int
    layouts: dict[str, NumaLayout]
    unanswered: dict[str, str]
    cells: list[tuple[Cell, RunSummary]] = field(default_factory=list)
    repetitions: int = 0
    mpi_skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "repetitions": self.repetitions,
                "layouts": {node: layout.to_json() for node, layout in self.layouts.items()},
                "unanswered": dict(self.unanswered), "mpi_skipped": dict(self.mpi_skipped),
                "cells": [{"series": cell.name, "cpu_node": cell.cpu_node, "mem_node": cell.mem_node,
                           "nodes": list(cell.nodes), "outcomes": summary.per_node} for cell, summary in self.cells]}


def run_numa(store: Store, target: Target, options: NumaOptions, repetitions: int = DEFAULT_REPETITIONS, *,
             command: str = "oddnode numa", on_progress: Callable[[int, int], None] | None = None,
             elements: int | None = None) -> NumaRun:
    """Probe every node's NUMA layout, then run every cell on the nodes that
    have it, all at once, ``repetitions`` times, storing each repetition as
    it ends (one run for the whole matrix).  ``on_progress(done, total)``
    counts cells."""
    if repetitions < 1:
        raise ValueError(f"repetitions must be >= 1, got {repetitions}")
    layouts, unanswered = probe_layouts(target)
    run_id = new_target_run(store, target, command)
    if unanswered:
        with store.transaction():
            store.add_node_status(run_id, NUMA_STAGE, [
                (node, "unreachable" if reason.startswith(("unreachable", "timeout")) else "failed",
                 f"NUMA layout: {reason}") for node, reason in unanswered.items()])
    run = NumaRun(run_id, layouts, unanswered, repetitions=repetitions)
    if elements is None:
        elements = options.elements or default_elements(last_level_cache_bytes())
    cells = plan_cells(layouts, options, target.nodes)
    mpi_nodes = mpi_plan(layouts, options, run.mpi_skipped)
    total = len(cells) + sum(cell.family == PINGPONG and bool(set(cell.nodes) & mpi_nodes) for cell in cells)
    done = 0
    for cell in cells:
        spec = (triad_cell_spec(cell.cpu_node, cell.mem_node, options, elements) if cell.family == TRIAD
                else pingpong_cell_spec(cell.cpu_node, cell.mem_node, options))
        timeout = options.timeout if cell.family == TRIAD else max(options.timeout, _PINGPONG_SLACK)
        summary = run_benchmark(store, Target(list(cell.nodes), target.transport), spec, repetitions, timeout,
                                command=command, run_id=run_id)
        run.cells.append((cell, summary))
        done += 1
        if on_progress is not None:
            on_progress(done, total)
        if cell.family == PINGPONG and set(cell.nodes) & mpi_nodes:
            mpi = _run_mpi_cell(store, target, cell, options, repetitions, run_id, command, mpi_nodes)
            if mpi is not None:
                run.cells.append(mpi)
            done += 1
            if on_progress is not None:
                on_progress(done, total)
    return run


def mpi_plan(layouts: Mapping[str, NumaLayout], options: NumaOptions, skipped: dict[str, str]) -> set[str]:
    """The nodes the MPI ping-pong runs on; why not on the others goes
    into ``skipped`` (nodes folded -> reason), once per reason."""
    if not options.mpi:
        return set()
    if not options.pingpong:
        if layouts:
            skipped[fold(layouts)] = "it runs on the shared-memory ping-pong's CPUs, and that is left out"
        return set()
    lacking = [node for node, layout in layouts.items() if not layout.mpi]
    if lacking:
        skipped[fold(lacking)] = MPI_MISSING
    return {node for node, layout in layouts.items() if layout.mpi}


def shm_cpu_pairs(store: Store, run_id: int, name: str) -> dict[str, tuple[int, int]]:
    """Per node, the CPUs (end A's, end B's) the shared-memory ping-pong
    of cell ``name`` ran on in this run: its valid results' parameters."""
    pairs: dict[str, tuple[int, int]] = {}
    for label, parameters in store.result_parameters(run_id, name):
        try:
            values = json.loads(parameters)
            pair = (int(values["a_cpu"]), int(values["b_cpu"]))
        except (ValueError, KeyError, TypeError):
            continue
        pairs[str(label)] = pair
    return pairs


def _run_mpi_cell(store: Store, target: Target, cell: Cell, options: NumaOptions, repetitions: int, run_id: int,
                  command: str, mpi_nodes: set[str]) -> tuple[Cell, RunSummary] | None:
    """The MPI ping-pong of a ping-pong cell on each node with MPI, on the
    CPUs its shared-memory ping-pong used there; nodes with the same two
    CPUs run at once (one argv), the groups one after the other."""
    pairs = shm_cpu_pairs(store, run_id, cell.name)
    groups: dict[tuple[int, int], list[str]] = {}
    for node in cell.nodes:
        if node in mpi_nodes and node in pairs:
            groups.setdefault(pairs[node], []).append(node)
    if not groups:
        return None
    merged = RunSummary(run_id, repetitions)
    for cpus, nodes in groups.items():
        spec = mpi_cell_spec(cell.cpu_node, cell.mem_node, cpus, options)
        summary = run_benchmark(store, Target(nodes, target.transport), spec, repetitions,
                                max(options.timeout, _PINGPONG_SLACK + _MPI_LAUNCH_SLACK), command=command,
                                run_id=run_id)
        merged.per_node.update(summary.per_node)
    nodes = tuple(node for node in cell.nodes if node in merged.per_node)
    return Cell(MPI_PINGPONG, cell.cpu_node, cell.mem_node, nodes), merged
