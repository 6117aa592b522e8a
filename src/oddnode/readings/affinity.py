"""The affinity sampler's report as typed values, read (and checked) from
the JSON it prints on a node, and written back to the same JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oddnode.onnode.node_affinity import AFFINITY_VERSION
from oddnode.onnode.cpu_topology import TopologyError, format_cpulist, parse_cpulist
from oddnode.onnode.node_probe import NUMA_CPUS_KEY, NUMA_DISTANCES_KEY, NUMA_MEMORY_KEY
from oddnode.core.inputs import NodeOutputError

__all__ = [
    "AffinityOutputError",
    "Cpu",
    "NodeAffinity",
    "NumaNode",
    "ProcessSample",
    "ThreadSample",
    "Topology",
    "node_affinity_from_json",
]


class AffinityOutputError(NodeOutputError):
    """The sampler's output on one node cannot be used; names the node and what."""


def _cpus_text(cpus: tuple[int, ...] | None) -> str | None:
    return None if cpus is None else format_cpulist(cpus)


@dataclass(frozen=True)
class NumaNode:
    """One NUMA node: its CPUs (none for a memory-only node), its memory
    (kB, None when unknown) and its distance row to every NUMA node."""

    node: int
    cpus: tuple[int, ...]
    memory_kb: int | None
    distances: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Cpu:
    """One online CPU (hardware thread): its socket, die, core and NUMA node."""

    cpu: int
    package: int
    core: int
    siblings: tuple[int, ...]
    numa: int | None
    die: int | None = None


@dataclass(frozen=True)
class Topology:
    """A node's sockets, cores and NUMA nodes, and where it was read (sysfs
    or hwloc; ``hwloc``: whether hwloc agreed with sysfs, None unasked)."""

    source: str
    cpus: tuple[Cpu, ...]
    numa_nodes: tuple[NumaNode, ...]
    hwloc: str | None = None

    def cpu(self, number: int) -> Cpu | None:
        return next((c for c in self.cpus if c.cpu == number), None)

    def packages(self) -> dict[int, tuple[int, ...]]:
        """Socket -> its CPUs."""
        out: dict[int, list[int]] = {}
        for c in self.cpus:
            out.setdefault(c.package, []).append(c.cpu)
        return {package: tuple(cpus) for package, cpus in sorted(out.items())}

    def cores(self) -> list[tuple[int, ...]]:
        """Every core as the CPUs (hardware threads) it holds, in CPU order."""
        return sorted({c.siblings for c in self.cpus})

    def numa_of(self, cpu: int) -> int | None:
        found = self.cpu(cpu)
        return found.numa if found else None

    def summary(self) -> str:
        """"2 sockets, 2 NUMA nodes, 32 cores, 64 CPUs"."""
        def count(n: int, word: str) -> str:
            return f"{n} {word}{'' if n == 1 else 's'}"

        return ", ".join([count(len(self.packages()), "socket"), count(len(self.numa_nodes), "NUMA node"),
                          count(len(self.cores()), "core"), count(len(self.cpus), "CPU")])

    def facts(self) -> dict[str, str]:
        """The per-NUMA-node facts the inventory probe reports, from this topology."""
        facts = {"numa_nodes": str(len(self.numa_nodes))}
        for n in self.numa_nodes:
            facts[NUMA_CPUS_KEY % n.node] = format_cpulist(n.cpus)
            if n.memory_kb is not None:
                facts[NUMA_MEMORY_KEY % n.node] = str(n.memory_kb)
            if n.distances is not None:
                facts[NUMA_DISTANCES_KEY % n.node] = " ".join(map(str, n.distances))
        return facts

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "cpus": [{"cpu": c.cpu, "package": c.package, "die": c.die, "core": c.core,
                      "siblings": format_cpulist(c.siblings), "numa": c.numa} for c in self.cpus],
            "numa_nodes": [{"node": n.node, "cpus": format_cpulist(n.cpus), "memory_kb": n.memory_kb,
                            "distances": list(n.distances) if n.distances is not None else None}
                           for n in self.numa_nodes],
        }
        if self.hwloc is not None:
            out["hwloc"] = self.hwloc
        return out


@dataclass(frozen=True)
class ThreadSample:
    """One thread over the interval: its affinity, CPU time, and the CPUs
    it ran on, in order (``runs``: (CPU, samples in a row))."""

    tid: int
    comm: str | None
    cpuset: str | None
    cpus_allowed: tuple[int, ...] | None
    mems_allowed: tuple[int, ...] | None
    cpu_seconds: float
    runs: tuple[tuple[int, int], ...]
    last_cpu: int | None

    def samples_by_cpu(self) -> Counter[int]:
        counts: Counter[int] = Counter()
        for cpu, samples in self.runs:
            counts[cpu] += samples
        return counts

    @property
    def counted(self) -> int:
        """Samples in which it was running or runnable."""
        return sum(samples for _, samples in self.runs)

    @property
    def home(self) -> int | None:
        """The CPU it was seen on most (the lowest of a tie), None when never seen running."""
        counts = self.samples_by_cpu()
        return min(counts, key=lambda cpu: (-counts[cpu], cpu)) if counts else None

    @property
    def migrations(self) -> int:
        return max(0, len(self.runs) - 1)

    def to_json(self) -> dict[str, Any]:
        return {"tid": self.tid, "comm": self.comm, "cpuset": self.cpuset,
                "cpus_allowed": _cpus_text(self.cpus_allowed), "mems_allowed": _cpus_text(self.mems_allowed),
                "cpu_seconds": self.cpu_seconds, "runs": [list(run) for run in self.runs],
                "last_cpu": self.last_cpu}


@dataclass(frozen=True)
class ProcessSample:
    """One process: its cpuset and the CPUs that grants, its affinity, its
    memory per NUMA node (kB; pages interleaved on purpose apart) and threads."""

    pid: int
    comm: str | None
    ended: bool
    cpuset: str | None
    cpuset_cpus: tuple[int, ...] | None
    cpus_allowed: tuple[int, ...] | None
    mems_allowed: tuple[int, ...] | None
    memory_kb: dict[int, int]
    interleaved_kb: int
    threads: tuple[ThreadSample, ...]

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "comm": self.comm, "ended": self.ended, "cpuset": self.cpuset,
                "cpuset_cpus": _cpus_text(self.cpuset_cpus), "cpus_allowed": _cpus_text(self.cpus_allowed),
                "mems_allowed": _cpus_text(self.mems_allowed),
                "memory_kb": {str(node): kb for node, kb in sorted(self.memory_kb.items())},
                "interleaved_kb": self.interleaved_kb, "threads": [t.to_json() for t in self.threads]}


@dataclass(frozen=True)
class NodeAffinity:
    """One node's report: its topology and, when asked for, its processes
    sampled over ``seconds`` with the busy fraction of each of its CPUs."""

    node: str
    topology: Topology
    processes: tuple[ProcessSample, ...] = ()
    cpu_busy: dict[int, float] = field(default_factory=dict)
    seconds: float = 0.0
    samples: int = 0
    selection: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    hostname: str = ""

    def to_json(self) -> dict[str, Any]:
        """The sampler's own JSON (``node_affinity_from_json`` reads it back)."""
        return {"affinity_version": AFFINITY_VERSION, "hostname": self.hostname,
                "topology": self.topology.to_json(), "selection": dict(self.selection),
                "processes": [p.to_json() for p in self.processes],
                "cpu_busy": {str(cpu): busy for cpu, busy in sorted(self.cpu_busy.items())},
                "seconds": self.seconds, "samples": self.samples, "notes": list(self.notes)}


# -- reading the JSON --------------------------------------------------------


class _Reader:
    """Checks one node's JSON, each error naming the node and the field."""

    def __init__(self, node: str) -> None:
        self.node = node

    def fail(self, problem: str) -> AffinityOutputError:
        return AffinityOutputError(self.node, problem)

    def get(self, data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str,
            optional: bool = False) -> Any:
        if not isinstance(data, Mapping):
            raise self.fail(f"{where} is not an object")
        value = data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, kind):
            raise self.fail(f"{where}.{key} is {value!r}, not {_kind_name(kind)}")
        return value

    def cpus(self, data: Mapping[str, Any], key: str, where: str, optional: bool = True) -> tuple[int, ...] | None:
        text = self.get(data, key, str, where, optional)
        if text is None:
            return None
        try:
            return tuple(parse_cpulist(text, f"{where}.{key}"))
        except TopologyError as err:
            raise self.fail(str(err)) from None


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "a whole number", float: "a number", str: "text", list: "a list", dict: "an object"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _topology(read: _Reader, data: Mapping[str, Any]) -> Topology:
    where = "topology"
    cpus = []
    for index, entry in enumerate(read.get(data, "cpus", list, where)):
        at = f"topology.cpus[{index}]"
        cpus.append(Cpu(cpu=read.get(entry, "cpu", int, at), package=read.get(entry, "package", int, at),
                        core=read.get(entry, "core", int, at), siblings=read.cpus(entry, "siblings", at, False) or (),
                        numa=read.get(entry, "numa", int, at, optional=True),
                        die=read.get(entry, "die", int, at, optional=True)))
    if not cpus:
        raise read.fail("topology.cpus is empty")
    numa_nodes = []
    for index, entry in enumerate(read.get(data, "numa_nodes", list, where)):
        at = f"topology.numa_nodes[{index}]"
        distances = read.get(entry, "distances", list, at, optional=True)
        if distances is not None and not all(isinstance(d, int) and not isinstance(d, bool) for d in distances):
            raise read.fail(f"{at}.distances is {distances!r}, not whole numbers")
        numa_nodes.append(NumaNode(node=read.get(entry, "node", int, at), cpus=read.cpus(entry, "cpus", at, False) or (),
                                   memory_kb=read.get(entry, "memory_kb", int, at, optional=True),
                                   distances=tuple(distances) if distances is not None else None))
    source = read.get(data, "source", str, where)
    return Topology(source=source, cpus=tuple(cpus), numa_nodes=tuple(numa_nodes),
                    hwloc=read.get(data, "hwloc", str, where, optional=True))


def _thread(read: _Reader, entry: Mapping[str, Any], at: str) -> ThreadSample:
    runs = []
    for run in read.get(entry, "runs", list, at):
        if (not isinstance(run, list) or len(run) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in run)):
            raise read.fail(f"{at}.runs holds {run!r}, not [CPU, samples]")
        runs.append((run[0], run[1]))
    return ThreadSample(tid=read.get(entry, "tid", int, at), comm=read.get(entry, "comm", str, at, optional=True),
                        cpuset=read.get(entry, "cpuset", str, at, optional=True),
                        cpus_allowed=read.cpus(entry, "cpus_allowed", at),
                        mems_allowed=read.cpus(entry, "mems_allowed", at),
                        cpu_seconds=float(read.get(entry, "cpu_seconds", (int, float), at)), runs=tuple(runs),
                        last_cpu=read.get(entry, "last_cpu", int, at, optional=True))


def _process(read: _Reader, entry: Mapping[str, Any], at: str) -> ProcessSample:
    memory = read.get(entry, "memory_kb", dict, at)
    try:
        placed = {int(node): int(kb) for node, kb in memory.items()}
    except (TypeError, ValueError):
        raise read.fail(f"{at}.memory_kb is {memory!r}, not NUMA node -> kB") from None
    threads = tuple(_thread(read, t, f"{at}.threads[{i}]") for i, t in enumerate(read.get(entry, "threads", list, at)))
    return ProcessSample(pid=read.get(entry, "pid", int, at), comm=read.get(entry, "comm", str, at, optional=True),
                         ended=bool(entry.get("ended")), cpuset=read.get(entry, "cpuset", str, at, optional=True),
                         cpuset_cpus=read.cpus(entry, "cpuset_cpus", at), cpus_allowed=read.cpus(entry, "cpus_allowed", at),
                         mems_allowed=read.cpus(entry, "mems_allowed", at), memory_kb=placed,
                         interleaved_kb=read.get(entry, "interleaved_kb", int, at), threads=threads)


def node_affinity_from_json(node: str, data: Any) -> NodeAffinity:
    """A node's report from the sampler's JSON, checked; AffinityOutputError
    names the node and the field when it is not what the sampler writes."""
    read = _Reader(node)
    if not isinstance(data, Mapping):
        raise read.fail(f"the sampler's JSON is a {type(data).__name__}, not an object")
    if data.get("affinity_version") != AFFINITY_VERSION:
        raise read.fail(f"affinity_version is {data.get('affinity_version')!r}, expected {AFFINITY_VERSION} "
                        "(an older or newer oddnode's sampler?)")
    topology = _topology(read, read.get(data, "topology", dict, "report"))
    processes = tuple(_process(read, p, f"processes[{i}]")
                      for i, p in enumerate(read.get(data, "processes", list, "report")))
    busy = read.get(data, "cpu_busy", dict, "report")
    try:
        cpu_busy = {int(cpu): float(value) for cpu, value in busy.items()}
    except (TypeError, ValueError):
        raise read.fail(f"cpu_busy is {busy!r}, not CPU -> fraction") from None
    notes = read.get(data, "notes", list, "report")
    if not all(isinstance(note, str) for note in notes):
        raise read.fail("notes is not a list of text")
    return NodeAffinity(node=node, topology=topology, processes=processes, cpu_busy=cpu_busy,
                        seconds=float(read.get(data, "seconds", (int, float), "report")),
                        samples=read.get(data, "samples", int, "report"),
                        selection=dict(read.get(data, "selection", dict, "report")), notes=tuple(notes),
                        hostname=str(data.get("hostname") or ""))
