"""Affinity sampler reports as a node's probe writes them: topologies,
processes, threads and the CPUs they ran on."""

from __future__ import annotations

from oddnode.onnode.node_affinity import AFFINITY_VERSION
from oddnode.readings.affinity import node_affinity_from_json


GIB_KB = 1024 * 1024


SAMPLES = 100


def topology(sockets: int = 2, cores: int = 8, memory_gib: tuple[int, ...] = (64, 64)) -> dict:
    """Sockets of ``cores`` cores, two threads each (CPU c and c + sockets*cores), one NUMA node a socket."""
    total = sockets * cores
    cpus = [{"cpu": cpu, "package": (cpu % total) // cores, "die": None, "core": cpu % cores,
             "siblings": f"{cpu % total},{cpu % total + total}", "numa": (cpu % total) // cores}
            for cpu in range(2 * total)]
    numa = [{"node": s, "cpus": f"{s * cores}-{s * cores + cores - 1},{total + s * cores}-{total + s * cores + cores - 1}",
             "memory_kb": memory_gib[s] * GIB_KB, "distances": [10 if o == s else 21 for o in range(sockets)]}
            for s in range(sockets)]
    return {"source": "sysfs", "cpus": cpus, "numa_nodes": numa}


def thread(tid: int, runs: list[list[int]], busy: float = 1.0, allowed: str | None = None) -> dict:
    return {"tid": tid, "comm": "a.out", "cpuset": "/slurm/job42", "cpus_allowed": allowed, "mems_allowed": "0-1",
            "cpu_seconds": busy * 2.0, "runs": runs, "last_cpu": runs[-1][0] if runs else None}


def process(pid: int, threads: list[dict], allowed: str = "0-31", memory: dict | None = None,
            cpuset_cpus: str = "0-31") -> dict:
    return {"pid": pid, "comm": "a.out", "ended": False, "cpuset": "/slurm/job42", "cpuset_cpus": cpuset_cpus,
            "cpus_allowed": allowed, "mems_allowed": "0-1", "memory_kb": memory or {}, "interleaved_kb": 0,
            "threads": threads}


def report(processes: list[dict], cpu_busy: dict | None = None, topo: dict | None = None) -> dict:
    return {"affinity_version": AFFINITY_VERSION, "hostname": "h", "topology": topo or topology(),
            "selection": {"command": "a.out"}, "processes": processes,
            "cpu_busy": {str(k): v for k, v in (cpu_busy or {}).items()}, "seconds": 2.0, "samples": SAMPLES,
            "notes": []}


def reports(data: dict[str, dict]):
    return {node: node_affinity_from_json(node, entry) for node, entry in data.items()}


def bound_ranks(cpus: list[int]) -> list[dict]:
    """One single-threaded rank bound to each CPU given, busy all the time."""
    return [process(1000 + i, [thread(1000 + i, [[cpu, SAMPLES]], allowed=str(cpu))], allowed=str(cpu))
            for i, cpu in enumerate(cpus)]
