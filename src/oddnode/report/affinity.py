"""The report of ``oddnode affinity``: every node's topology (nodes with the
same one folded), its NUMA nodes, and the sampled processes and threads,
each table fitted to the terminal; and the JSON of it all."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from oddnode.readings.affinity import NodeAffinity, ProcessSample, ThreadSample
from oddnode.onnode.cpu_topology import format_cpulist
from oddnode.findings.affinity import is_busy, runnable
from oddnode.core.units import convert
from oddnode.core.model import Finding
from oddnode.core.nodes import fold
from oddnode.core.order import natural_key
from oddnode.report.terminal import WIDE_NOTE, fit_columns, fixed_table

if TYPE_CHECKING:
    from oddnode.report import documents

# Threads the thread table shows by default; the rest are counted in its caption.
TOP_THREADS = 40

_NODES = "nodes"
_NODE = "node"
_NUMA_COLUMNS = (_NODES, "NUMA node", "CPUs", "cores", "memory GiB", "distances")
_PROCESS_COLUMNS = (_NODE, "pid", "comm", "threads", "busy", "cpuset", "cpuset CPUs", "CPUs allowed",
                    "mems allowed", "memory MiB by NUMA node")
_THREAD_COLUMNS = (_NODE, "pid", "tid", "comm", "busy", "runnable", "ran on CPUs", "moves", "CPUs allowed", "cpuset")
# A narrow terminal loses these first, least wanted first.
_NUMA_LEFT_OUT = ("distances", "cores")
_PROCESS_LEFT_OUT = ("cpuset", "mems allowed", "cpuset CPUs", "threads")
_THREAD_LEFT_OUT = ("cpuset", "runnable", "moves", "tid")
_LEFT = {_NODES, _NODE, "comm", "cpuset", "ran on CPUs", "CPUs allowed", "cpuset CPUs", "mems allowed",
         "memory MiB by NUMA node", "distances", "CPUs"}


def _gib(kb: int | None) -> str:
    return "?" if kb is None else f"{convert(kb, 'KiB', 'GiB'):.1f}"


def _cpus(cpus: Sequence[int] | None) -> str:
    return "?" if cpus is None else format_cpulist(cpus)


def topology_lines(reports: Mapping[str, NodeAffinity]) -> list[str]:
    """'cn-a[01-16]: 2 sockets, 2 NUMA nodes, 32 cores, 64 CPUs (sysfs; hwloc agrees)', nodes folded."""
    by_text: dict[str, list[str]] = defaultdict(list)
    for node, report in reports.items():
        topology = report.topology
        source = topology.source + (f"; hwloc {topology.hwloc}" if topology.hwloc else "")
        by_text[f"{topology.summary()} ({source})"].append(node)
    return [f"{fold(nodes)}: {text}" for text, nodes in sorted(by_text.items(), key=lambda i: natural_key(fold(i[1])))]


def note_lines(reports: Mapping[str, NodeAffinity]) -> list[str]:
    """The sampler's notes, each once with its nodes folded."""
    by_note: dict[str, list[str]] = defaultdict(list)
    for node, report in reports.items():
        for note in report.notes:
            by_note[note].append(node)
    return [f"{fold(nodes)}: {note}" for note, nodes in by_note.items()]


def _fitted(title: str, columns: Sequence[str], rows: list[dict[str, Text]], width: int | None,
            left_out_first: Sequence[str], caption: list[str]) -> Table:
    shown, widths, left_out = fit_columns(columns, rows, width, left_out_first)
    if left_out:
        caption = [*caption, f"{', '.join(left_out)} left out to fit {width} columns; {WIDE_NOTE}"]
    return fixed_table(title, " ".join(caption) or None, shown, widths, rows, _LEFT)


def _texts(cells: Mapping[str, str]) -> dict[str, Text]:
    return {column: Text(value) for column, value in cells.items()}  # no markup in a comm or a cpuset


def numa_rows(reports: Mapping[str, NodeAffinity]) -> list[dict[str, str]]:
    """Every distinct NUMA layout, a row per NUMA node, the nodes that share it folded."""
    by_layout: dict[tuple[tuple[str, ...], ...], list[str]] = defaultdict(list)
    for node, report in reports.items():
        topology = report.topology
        cores = topology.cores()
        layout = tuple((str(n.node), _cpus(n.cpus), str(sum(1 for c in cores if set(c) <= set(n.cpus))),
                        _gib(n.memory_kb), " ".join(map(str, n.distances)) if n.distances else "")
                       for n in topology.numa_nodes)
        by_layout[layout].append(node)
    rows = []
    for layout, nodes in sorted(by_layout.items(), key=lambda item: natural_key(fold(item[1]))):
        for index, cells in enumerate(layout):
            rows.append(dict(zip(_NUMA_COLUMNS, (fold(nodes) if index == 0 else "", *cells))))
    return rows


NUMA_CAPTION = "Nodes with the same layout (memory to 0.1 GiB) share one block."


def numa_view(reports: Mapping[str, NodeAffinity], width: int | None = None) -> Table | None:
    """numa_rows fitted to ``width``."""
    rows = numa_rows(reports)
    if not rows:
        return None
    return _fitted("NUMA nodes", _NUMA_COLUMNS, [_texts(row) for row in rows], width, _NUMA_LEFT_OUT, [NUMA_CAPTION])


def _busy(report: NodeAffinity, thread: ThreadSample) -> float:
    return thread.cpu_seconds / report.seconds if report.seconds > 0 else 0.0


def _memory(process: ProcessSample) -> str:
    parts = [f"{node}:{kb / 1024:.0f}" for node, kb in sorted(process.memory_kb.items()) if kb]
    if process.interleaved_kb:
        parts.append(f"interleaved:{process.interleaved_kb / 1024:.0f}")
    return " ".join(parts) or "-"


def process_rows(reports: Mapping[str, NodeAffinity]) -> list[dict[str, str]]:
    """A row per sampled process: its cpuset, affinity and memory per NUMA node."""
    rows = []
    for node in sorted(reports, key=natural_key):
        report = reports[node]
        for process in report.processes:
            busy = sum(_busy(report, t) for t in process.threads)
            rows.append({
                _NODE: node, "pid": str(process.pid), "comm": process.comm or "(ended)",
                "threads": str(len(process.threads)), "busy": f"{busy:.2f}", "cpuset": process.cpuset or "?",
                "cpuset CPUs": _cpus(process.cpuset_cpus), "CPUs allowed": _cpus(process.cpus_allowed),
                "mems allowed": _cpus(process.mems_allowed), "memory MiB by NUMA node": _memory(process)})
    return rows


PROCESS_CAPTION = "busy: CPUs used over the interval, all threads together."


def process_view(reports: Mapping[str, NodeAffinity], width: int | None = None) -> Table | None:
    """process_rows fitted to ``width``."""
    rows = process_rows(reports)
    if not rows:
        return None
    return _fitted("Processes", _PROCESS_COLUMNS, [_texts(row) for row in rows], width, _PROCESS_LEFT_OUT,
                   [PROCESS_CAPTION])


def thread_rows(reports: Mapping[str, NodeAffinity], show_all: bool = False,
                top: int | None = TOP_THREADS) -> tuple[list[dict[str, str]], int, int]:
    """A row per busy thread (every thread with ``show_all``, ``top`` at
    most): the CPUs it ran on (samples on each), its moves and what it may
    use; with the number of idle threads left out and of busy ones beyond
    ``top``."""
    chosen = []
    idle = 0
    for node in sorted(reports, key=natural_key):
        report = reports[node]
        for process in report.processes:
            for thread in process.threads:
                if not show_all and not is_busy(report, thread):
                    idle += 1
                    continue
                chosen.append((node, report, process, thread))
    hidden = len(chosen) - top if top and len(chosen) > top else 0
    rows = []
    for node, report, process, thread in chosen[:top] if hidden else chosen:
        counts = thread.samples_by_cpu()
        ran = " ".join(f"{cpu}:{counts[cpu]}" for cpu in sorted(counts)) or "-"
        allowed = thread.cpus_allowed if thread.cpus_allowed is not None else process.cpus_allowed
        rows.append({
            _NODE: node, "pid": str(process.pid), "tid": str(thread.tid), "comm": thread.comm or process.comm or "?",
            "busy": f"{_busy(report, thread):.2f}", "runnable": f"{runnable(report, thread):.0%}", "ran on CPUs": ran,
            "moves": str(thread.migrations), "CPUs allowed": _cpus(allowed),
            "cpuset": thread.cpuset or process.cpuset or "?"})
    return rows, idle, hidden


def thread_caption(idle: int, hidden: int, options: bool = True) -> list[str]:
    """How to read the thread table, and what it leaves out (with the
    command's options that show it, when ``options``)."""
    caption = ["busy: share of one CPU used; runnable: share of the samples it was running or waiting for a CPU; "
               "ran on CPUs: CPU:samples it was running in."]
    if idle:
        caption.append(f"{idle} idle threads left out{'; --all shows them' if options else ''}.")
    if hidden:
        caption.append(f"{hidden} more threads{'; --top 0 shows every one' if options else ''}.")
    return caption


def thread_view(reports: Mapping[str, NodeAffinity], width: int | None = None, show_all: bool = False,
                top: int | None = TOP_THREADS) -> Table | None:
    """thread_rows fitted to ``width``."""
    rows, idle, hidden = thread_rows(reports, show_all, top)
    if not rows:
        return None
    return _fitted("Threads", _THREAD_COLUMNS, [_texts(row) for row in rows], width, _THREAD_LEFT_OUT,
                   thread_caption(idle, hidden))


def affinity_section(analysis) -> dict[str, Any] | None:
    """The HTML report's "Affinity" section from the stored sampler
    reports: the nodes' topologies and the sampler's notes, then the NUMA
    layouts, the sampled processes and their busy threads (TOP_THREADS at
    most), each table with its caption; None without any report."""
    from oddnode.findings.affinity import sampled_reports

    reports = sampled_reports(analysis.dataset)
    if not reports:
        return None
    threads, idle, hidden = thread_rows(reports)
    tables = [("NUMA nodes", _NUMA_COLUMNS, numa_rows(reports), [NUMA_CAPTION]),
              ("Processes", _PROCESS_COLUMNS, process_rows(reports), [PROCESS_CAPTION]),
              ("Threads", _THREAD_COLUMNS, threads, thread_caption(idle, hidden, options=False))]
    return {"topology": topology_lines(reports), "notes": note_lines(reports),
            "tables": [{"title": title, "columns": list(columns), "rows": [[row[c] for c in columns] for row in rows],
                        "caption": " ".join(caption)}
                       for title, columns, rows, caption in tables if rows]}


def affinity_json(reports: Mapping[str, NodeAffinity], reasons: Mapping[str, str],
                  findings: Sequence[Finding]) -> documents.Affinity:
    """The reports, the nodes that gave none and the findings (formats.md#affinity-json)."""
    return {
        "nodes": {node: reports[node].to_json() for node in sorted(reports, key=natural_key)},
        "unanswered": dict(sorted(reasons.items(), key=lambda item: natural_key(item[0]))),
        "findings": [f.to_json() for f in findings],
    }
