"""Where a job's processes run and where their memory lives (NCSA's notes
on ember: cpusets, local against remote NUMA memory, an MPI that ignored
its cpuset and put several ranks on one core while others idled), and
NUMA nodes short of memory or CPUs (a DIMM missing on one socket).

- ``oversubscribed-core``: two or more busy threads share one CPU (or the
  hardware threads of one core) while CPUs (cores) that they may use run
  none of the job's busy threads.
- ``unpinned``: busy threads that moved between CPUs, or across NUMA
  nodes, while they were sampled.
- ``remote-memory``: a busy process with most of its memory on NUMA nodes
  other than those its threads ran on.
- ``numa-imbalance``: a NUMA node with less memory, or fewer CPUs, than
  its peers (the other NUMA nodes of its kind, on its node and on every
  other node judged together).

The first three read the samples of ``oddnode affinity`` (the Dataset's
details under AFFINITY_DETAILS, one sampler report per node); the last
reads the numa.N.cpus and numa.N.memory_kb facts that the inventory and
``oddnode affinity`` both report.  A node's findings with the same message
are folded under one node set; the evidence keeps every node's numbers.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from oddnode.onnode.cpu_topology import TopologyError, format_cpulist, parse_cpulist
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.units import convert
from oddnode.core.model import AFFINITY_DETAILS, Dataset, Finding, Severity
from oddnode.core.nodes import fold
from oddnode.core.order import natural_key

if TYPE_CHECKING:  # the sampler's modules import the inventory, which imports the findings
    from oddnode.readings.affinity import NodeAffinity, ProcessSample, ThreadSample

__all__ = [
    "AFFINITY_DETAILS",
    "AFFINITY_KINDS",
    "numa_imbalance",
    "numa_layouts_from_facts",
    "oversubscribed_cores",
    "remote_memory",
    "unpinned",
]

AFFINITY_KINDS = ("oversubscribed-core", "unpinned", "remote-memory", "numa-imbalance")

# A thread is busy when it used at least a fifth of one CPU over the
# interval: a spinning MPI rank uses all of one, and five of them on one
# CPU still get a fifth each, so the sharing that this looks for is never
# hidden by the sharing itself; a daemon waking now and then uses far less.
BUSY_FRACTION = 0.2
# ... or when it wanted a CPU (running, or runnable and waiting for one) in
# half of the samples: a rank starved by others on its CPU still wants one.
RUNNABLE_SHARE = 0.5
# A thread seen running in fewer samples than this (at 50 a second) says
# too little about where it runs to judge its placement.
MIN_RUNNING_SAMPLES = 5
# A CPU that every process together kept busy less than half of the
# interval (/proc/stat) had room for another thread: a thread free to go
# there that shares a CPU instead was left there by the scheduler.
IDLE_BUSY_MAX = 0.5
# A busy thread that spent at least a tenth of its running samples away
# from the CPU it ran on most moved enough to lose its caches and its
# place (one move in a 2 s interval, the load balancer's occasional
# correction, is below that); any move across NUMA nodes counts.
OFF_HOME_SHARE = 0.1
# "Most of its pages": more than half of a process's memory on NUMA nodes
# its busy threads did not run on ...
REMOTE_SHARE = 0.5
# ... for a process holding at least 64 MiB: a small process's few pages
# (its stack, a shared library's data) cost nothing wherever they are.
MIN_MEMORY_KB = 64 * 1024
# A NUMA node short of memory: below its peers' median by 5% and by at
# least 4 GiB, half the smallest server DIMM sold today (8 GiB).  The
# kernel and firmware reserve memory on NUMA node 0 (the kernel image, a
# crash kernel of up to 1 GiB, DMA zones): a few percent of a small node,
# always well under 4 GiB; a missing DIMM is one of 8 to 16 per socket.
MEMORY_SHORTFALL = 0.05
MEMORY_SHORTFALL_MIN_KB = 4 * 1024 * 1024
# How many threads, processes or nodes a message spells out.
MESSAGE_ITEMS = 4

_NUMA_KEY = re.compile(r"^numa\.(\d+)\.(cpus|memory_kb)$")


# -- reading the samples -----------------------------------------------------


def _busy(report: NodeAffinity, thread: ThreadSample) -> float:
    """The share of one CPU a thread used over the interval."""
    return thread.cpu_seconds / report.seconds if report.seconds > 0 else 0.0


def runnable(report: NodeAffinity, thread: ThreadSample) -> float:
    """The share of the samples in which a thread was running or runnable."""
    return thread.counted / report.samples if report.samples else 0.0


def is_busy(report: NodeAffinity, thread: ThreadSample) -> bool:
    """Busy: a fifth of a CPU used, or a CPU wanted in half of the samples."""
    return _busy(report, thread) >= BUSY_FRACTION or runnable(report, thread) >= RUNNABLE_SHARE


def _busy_threads(report: NodeAffinity) -> list[tuple[ProcessSample, ThreadSample]]:
    """The threads that were busy and seen running often enough to judge."""
    return [(process, thread) for process in report.processes for thread in process.threads
            if is_busy(report, thread) and thread.counted >= MIN_RUNNING_SAMPLES]


def _name(process: ProcessSample, thread: ThreadSample | None = None) -> str:
    """"pid 1234 (a.out)" or "pid 1234 thread 1240 (a.out)"."""
    comm = f" ({process.comm})" if process.comm else ""
    if thread is None or thread.tid == process.pid:
        return f"pid {process.pid}{comm}"
    return f"pid {process.pid} thread {thread.tid}{comm}"


def _allowed(process: ProcessSample, thread: ThreadSample) -> set[int]:
    """The CPUs a thread may run on: its own affinity, else its process's."""
    cpus = thread.cpus_allowed if thread.cpus_allowed is not None else process.cpus_allowed
    return set(cpus or ())


def _subject(report: NodeAffinity) -> str:
    selection = report.selection
    if selection.get("command"):
        return f"command {selection['command']}"
    if selection.get("slurm_job"):
        return f"job {selection['slurm_job']}"
    if selection.get("pid"):
        return "pid " + ",".join(map(str, selection["pid"]))
    return "affinity"


def _folded(kind: str, per_node: Mapping[str, tuple[Severity, str, str, dict[str, Any], str]]) -> list[Finding]:
    """One finding per distinct (severity, subject, message), its nodes folded,
    every node's evidence kept."""
    groups: dict[tuple[Severity, str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for node, (severity, subject, message, evidence, remedy) in per_node.items():
        groups[severity, subject, message, remedy][node] = evidence
    return [Finding(kind=kind, severity=severity, subject=subject, nodes=fold(nodes), message=message,
                    evidence={"per_node": dict(sorted(nodes.items(), key=lambda item: natural_key(item[0])))},
                    remedy=remedy)
            for (severity, subject, message, remedy), nodes in groups.items()]


# -- oversubscribed-core -----------------------------------------------------

OVERSUBSCRIBED_REMEDY = (
    "Bind each rank or thread to a CPU of its own within the job's cpuset (srun --cpu-bind=cores, mpirun "
    "--bind-to core --map-by core, OMP_PLACES=cores OMP_PROC_BIND=close); check that the MPI library reads the "
    "cpuset (Cpus_allowed_list) rather than binding to CPUs from 0; run no more ranks than CPUs.")


def _sharing(report: NodeAffinity, busy: list[tuple[ProcessSample, ThreadSample]]) -> list[dict[str, Any]]:
    """Every CPU, then every core, that runs two or more busy threads while
    CPUs (cores) the threads may use run none of the job's busy threads."""
    topology = report.topology
    online = {c.cpu for c in topology.cpus}
    homes = {thread.home for _, thread in busy}
    core_of = {c.cpu: c.siblings for c in topology.cpus}
    busy_cores = {core_of.get(cpu, (cpu,)) for cpu in homes}
    by_cpu: dict[int, list[tuple[ProcessSample, ThreadSample]]] = defaultdict(list)
    for process, thread in busy:
        by_cpu[thread.home].append((process, thread))
    units: list[tuple[str, tuple[int, ...], list[tuple[ProcessSample, ThreadSample]]]] = [
        ("CPU", (cpu,), members) for cpu, members in sorted(by_cpu.items()) if len(members) >= 2]
    shared_cpus = {cpus[0] for _, cpus, _ in units}
    by_core: dict[tuple[int, ...], list[tuple[ProcessSample, ThreadSample]]] = defaultdict(list)
    for process, thread in busy:
        by_core[core_of.get(thread.home, (thread.home,))].append((process, thread))
    for core, members in sorted(by_core.items()):
        if len({thread.home for _, thread in members}) >= 2 and not shared_cpus & set(core):
            units.append(("core", core, members))  # hardware threads of one core, each on its own CPU
    found = []
    for unit, cpus, members in units:
        may_use = set().union(*(_allowed(p, t) | set(p.cpuset_cpus or ()) for p, t in members)) & online
        if unit == "CPU":
            idle = sorted(may_use - homes)
        else:
            idle_cores = [core for core in topology.cores() if set(core) <= may_use and core not in busy_cores]
            idle = sorted(cpu for core in idle_cores for cpu in core)
        if not idle:
            continue  # more busy threads than the CPUs they may use: asked for, not misplaced
        # Bound so that each can only go where the job's busy threads already are: the binding put them here.
        bound = all(_allowed(p, t) <= homes | set(cpus) for p, t in members)
        if not bound:
            # Free to move: only a fault when the CPUs they could take were idle for every process on the node.
            idle = [cpu for cpu in idle if report.cpu_busy.get(cpu, 1.0) < IDLE_BUSY_MAX]
            if not idle:
                continue
        found.append({
            "unit": unit, "cpus": format_cpulist(cpus), "bound": bound,
            "threads": [{"pid": p.pid, "tid": t.tid, "comm": p.comm, "busy": round(_busy(report, t), 3),
                         "cpus_allowed": format_cpulist(sorted(_allowed(p, t)))} for p, t in members],
            "idle_cpus": format_cpulist(idle),
            "idle_cpu_busy": {cpu: report.cpu_busy[cpu] for cpu in idle if cpu in report.cpu_busy},
        })
    return found


def oversubscribed_cores(reports: Mapping[str, NodeAffinity]) -> list[Finding]:
    """``oversubscribed-core`` for every node whose busy threads share a CPU
    or a core while CPUs they may use run none of them."""
    per_node = {}
    for node, report in reports.items():
        shared = _sharing(report, _busy_threads(report))
        if not shared:
            continue
        parts = []
        for entry in shared:
            names = first_few([_name(_process(report, t["pid"]), _thread(report, t["pid"], t["tid"]))
                               for t in entry["threads"]], MESSAGE_ITEMS)
            parts.append(f"{entry['unit']} {entry['cpus']} runs {len(entry['threads'])} busy threads ({names})")
        idle = format_cpulist(sorted({cpu for e in shared for cpu in parse_cpulist(e["idle_cpus"])}))
        why = "bound there" if all(e["bound"] for e in shared) else "free to move, yet left there"
        one = len(parse_cpulist(idle)) == 1
        message = (f"{first_few(parts, MESSAGE_ITEMS, separator='; ', rest='more')}, {why}, while "
                   f"{'CPU' if one else 'CPUs'} {idle} that they may use {'runs' if one else 'run'} none of them")
        per_node[node] = (Severity.WARNING, _subject(report), message, {"shared": shared}, OVERSUBSCRIBED_REMEDY)
    return _folded("oversubscribed-core", per_node)


def _process(report: NodeAffinity, pid: int) -> ProcessSample:
    return next(p for p in report.processes if p.pid == pid)


def _thread(report: NodeAffinity, pid: int, tid: int) -> ThreadSample:
    return next(t for t in _process(report, pid).threads if t.tid == tid)


# -- unpinned ----------------------------------------------------------------

UNPINNED_REMEDY = (
    "Pin the ranks (srun --cpu-bind=cores, mpirun --bind-to core, OMP_PROC_BIND=close with OMP_PLACES=cores) or at "
    "least bind each to one NUMA node (--bind-to numa, numactl --cpunodebind); a thread that moves loses its caches "
    "and, across NUMA nodes, its local memory.")


def _moves(report: NodeAffinity, thread: ThreadSample) -> tuple[int, int, float]:
    """(moves between CPUs, moves across NUMA nodes, share of running samples off its most used CPU)."""
    numa = [report.topology.numa_of(cpu) for cpu, _ in thread.runs]
    across = sum(1 for a, b in zip(numa, numa[1:]) if a is not None and b is not None and a != b)
    counts = thread.samples_by_cpu()
    off_home = 1.0 - counts[thread.home] / thread.counted if thread.counted else 0.0
    return thread.migrations, across, off_home


def unpinned(reports: Mapping[str, NodeAffinity]) -> list[Finding]:
    """``unpinned`` for every node whose busy threads moved between CPUs
    (a tenth of their time away from their usual CPU) or across NUMA nodes."""
    per_node = {}
    for node, report in reports.items():
        busy = _busy_threads(report)
        moved = []
        for process, thread in busy:
            moves, across, off_home = _moves(report, thread)
            if moves and (across or off_home >= OFF_HOME_SHARE):
                moved.append({"pid": process.pid, "tid": thread.tid, "comm": process.comm,
                              "busy": round(_busy(report, thread), 3), "moves": moves, "numa_moves": across,
                              "off_home": round(off_home, 3), "cpus": format_cpulist(thread.samples_by_cpu()),
                              "cpus_allowed": format_cpulist(sorted(_allowed(process, thread)))})
        if not moved:
            continue
        across = sum(1 for entry in moved if entry["numa_moves"])
        names = first_few([_name(_process(report, e["pid"]), _thread(report, e["pid"], e["tid"])) for e in moved],
                          MESSAGE_ITEMS)
        allowed = sorted({entry["cpus_allowed"] for entry in moved})
        message = (f"{len(moved)} of {len(busy)} busy threads moved between CPUs in {report.seconds:.3g} s"
                   f"{f' ({across} across NUMA nodes)' if across else ''}: {names}; they may run on CPUs "
                   f"{first_few(allowed, 2, separator='; ', rest='more sets')}")
        per_node[node] = (Severity.WARNING, _subject(report), message,
                          {"moved": moved, "busy_threads": len(busy), "seconds": report.seconds}, UNPINNED_REMEDY)
    return _folded("unpinned", per_node)


# -- remote-memory -----------------------------------------------------------

REMOTE_REMEDY = (
    "Keep the memory with the CPUs that use it: bind each rank to one NUMA node's CPUs and memory (srun "
    "--cpu-bind=ldoms --mem-bind=local, numactl --cpunodebind=N --membind=N or --localalloc), let each thread "
    "first touch its own data, and pin ranks so that they do not move away from memory they allocated; check "
    "Mems_allowed_list and the cpuset's mems.")


def remote_memory(reports: Mapping[str, NodeAffinity]) -> list[Finding]:
    """``remote-memory`` for every busy process holding at least
    MIN_MEMORY_KB with more than REMOTE_SHARE of it on NUMA nodes its busy
    threads did not run on."""
    per_node = {}
    for node, report in reports.items():
        busy_by_pid: dict[int, list[ThreadSample]] = defaultdict(list)
        for process, thread in _busy_threads(report):
            busy_by_pid[process.pid].append(thread)
        remote = []
        for process in report.processes:
            threads = busy_by_pid.get(process.pid)
            total = sum(process.memory_kb.values())
            if not threads or total < MIN_MEMORY_KB:
                continue
            ran_on = sorted({n for t in threads for cpu in t.samples_by_cpu()
                             if (n := report.topology.numa_of(cpu)) is not None})
            if not ran_on:
                continue
            away = total - sum(process.memory_kb.get(n, 0) for n in ran_on)
            if away / total > REMOTE_SHARE:
                remote.append({"pid": process.pid, "comm": process.comm, "ran_on": ran_on,
                               "memory_kb": {n: kb for n, kb in sorted(process.memory_kb.items())},
                               "remote_share": round(away / total, 3),
                               "memory_gib": round(convert(total, "KiB", "GiB"), 2),
                               "mems_allowed": format_cpulist(process.mems_allowed or ())})
        if not remote:
            continue
        parts = []
        for entry in remote:
            nodes = ",".join(map(str, entry["ran_on"]))
            parts.append(f"{_name(_process(report, entry['pid']))} ran on NUMA node {nodes} with "
                         f"{entry['remote_share']:.0%} of its {entry['memory_gib']:.3g} GiB elsewhere")
        message = first_few(parts, MESSAGE_ITEMS, separator="; ", rest="more processes")
        per_node[node] = (Severity.WARNING, _subject(report), message, {"processes": remote}, REMOTE_REMEDY)
    return _folded("remote-memory", per_node)


# -- numa-imbalance ----------------------------------------------------------

IMBALANCE_REMEDY = (
    "Compare the NUMA node's memory slots with its peers' (dmidecode -t 17, the BMC's inventory): reseat or "
    "replace a missing or failed DIMM, check the BIOS for memory or cores disabled on that socket, then rerun.")


def numa_layouts_from_facts(facts: Mapping[str, Mapping[str, str]]) -> dict[str, dict[int, tuple[int | None,
                                                                                             int | None]]]:
    """node -> NUMA node -> (CPUs, memory kB) from the numa.N.cpus and
    numa.N.memory_kb facts (None where a fact is missing or unreadable)."""
    layouts: dict[str, dict[int, list[int | None]]] = defaultdict(lambda: defaultdict(lambda: [None, None]))
    for key, per_node in facts.items():
        match = _NUMA_KEY.match(key)
        if not match:
            continue
        index, what = int(match.group(1)), match.group(2)
        for node, value in per_node.items():
            text = str(value).strip()
            if what == "cpus":
                try:
                    layouts[node][index][0] = len(parse_cpulist(text))
                except TopologyError:
                    continue
            elif text.isdigit():
                layouts[node][index][1] = int(text)
    return {node: {index: (cpus, memory) for index, (cpus, memory) in per.items()} for node, per in layouts.items()}


def numa_imbalance(layouts: Mapping[str, Mapping[int, tuple[int | None, int | None]]]) -> list[Finding]:
    """``numa-imbalance``: NUMA nodes with less memory or fewer CPUs than the
    median of their peers, the NUMA nodes of the same kind (with CPUs, or
    memory only) on the same node and on every other node together."""
    entries = [(node, index, cpus, memory) for node, per in layouts.items() for index, (cpus, memory) in per.items()]
    findings: list[Finding] = []
    for with_cpus in (True, False):
        peers = [e for e in entries if (e[2] or 0) > 0] if with_cpus else [e for e in entries if e[2] == 0]
        findings += _short(peers, "memory", 3, with_cpus)
        if with_cpus:
            findings += _short(peers, "CPUs", 2, with_cpus)
    return findings


def _short(peers: list[tuple[str, int, int | None, int | None]], what: str, position: int,
           with_cpus: bool) -> list[Finding]:
    values = [entry[position] for entry in peers if entry[position] is not None]
    if len(values) < 2:
        return []
    median = statistics.median(values)
    if what == "memory":
        limit = median - max(MEMORY_SHORTFALL * median, MEMORY_SHORTFALL_MIN_KB)
    else:
        limit = median - 0.5  # CPU counts are exact: any fewer is short
    short: dict[int, dict[str, int]] = defaultdict(dict)
    for node, index, cpus, memory in peers:
        value = memory if what == "memory" else cpus
        if value is not None and value < limit:
            short[index][node] = value
    nodes_with = defaultdict(set)
    for node, index, _, _ in peers:
        nodes_with[index].add(node)
    kind = "NUMA nodes with CPUs" if with_cpus else "memory-only NUMA nodes"
    findings = []
    for index, per_node in sorted(short.items()):
        everywhere = set(per_node) == nodes_with[index] and len(nodes_with[index]) > 1
        low, high = min(per_node.values()), max(per_node.values())
        if what == "memory":
            have = _gib(low) if low == high else f"{_gib(low)} to {_gib(high)}"
            want = _gib(median)
            deficit = 1 - high / median if median else 1.0
            detail = f"{deficit:.0%} or more below" if low != high else f"{deficit:.0%} below"
        else:
            have = str(low) if low == high else f"{low} to {high}"
            want = f"{median:g}"
            detail = "fewer than"
        message = (f"NUMA node {index} has {have} of {what}, {detail} the {want} of its peers ({kind}, median)"
                   f"{': the same on every node, by design or missing everywhere' if everywhere else ''}")
        findings.append(Finding(
            kind="numa-imbalance", severity=Severity.INFO if everywhere else Severity.WARNING,
            subject=f"numa.{index}.{'memory_kb' if what == 'memory' else 'cpus'}", nodes=fold(per_node),
            message=message,
            evidence={"numa_node": index, "what": what, "values": dict(sorted(per_node.items(),
                                                                              key=lambda i: natural_key(i[0]))),
                      "peer_median": median, "peers": len(values), "limit": limit},
            remedy=IMBALANCE_REMEDY))
    return findings


def _gib(kb: float) -> str:
    return f"{convert(kb, 'KiB', 'GiB'):.1f} GiB"


# -- the rules ---------------------------------------------------------------


def sampled_reports(dataset: Dataset) -> dict[str, NodeAffinity]:
    """The sampler reports the dataset carries (the newest of each node)."""
    carried = dataset.details.get(AFFINITY_DETAILS, {})
    if not carried:  # every analysis asks; most datasets carry none, and need not import the reader
        return {}
    from oddnode.readings.affinity import node_affinity_from_json

    return {node: node_affinity_from_json(node, entries[-1]) for node, entries in carried.items() if entries}


@rule("oversubscribed-core")
def oversubscribed_core_rule(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Busy threads sharing a CPU or core while CPUs they may use idle (sampled processes)."""
    return oversubscribed_cores(sampled_reports(dataset))


@rule("unpinned")
def unpinned_rule(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Busy threads moving between CPUs or NUMA nodes (sampled processes)."""
    return unpinned(sampled_reports(dataset))


@rule("remote-memory")
def remote_memory_rule(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Busy processes with most of their memory on another NUMA node (sampled processes)."""
    return remote_memory(sampled_reports(dataset))


@rule("numa-imbalance")
def numa_imbalance_rule(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """NUMA nodes with less memory or fewer CPUs than their peers (inventory facts)."""
    return numa_imbalance(numa_layouts_from_facts(dataset.facts))
