"""Synthetic NUMA matrices of a cluster, stored as ``oddnode numa`` stores
them (one series per cell, labelled by node, parameters with cpu_node and
mem_node, R repetitions), with faults planted on demand.

Healthy numbers after a two-socket node: triad 40,000 MB/s with threads and
memory on one NUMA node, 22,000 across; ping-pong 0.12 us and 9,000 MB/s
within a node, 0.45 us and 5,000 MB/s across; 1.5% spread between nodes,
0.5% between one node's repetitions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from oddnode.core.model import Direction, LabelKind
from oddnode.readings.numa_series import BANDWIDTH, LATENCY, PINGPONG, TRIAD, cell_series
from oddnode.store import ResultBatch, open_store


REPETITIONS = 3
HEALTHY = {  # (family, metric): (local, remote, unit, direction)
    (TRIAD, BANDWIDTH): (40_000.0, 22_000.0, "MB/s", Direction.HIGHER),
    (PINGPONG, LATENCY): (0.12, 0.45, "us", Direction.LOWER),
    (PINGPONG, BANDWIDTH): (9_000.0, 5_000.0, "MB/s", Direction.HIGHER),
}
NODE_CV = 0.015
REPETITION_CV = 0.005
# What each fault does to the cells it touches: factor on a bandwidth; a
# latency is divided by it (a slower path).
FAULTS = ("slow-memory", "slow-cpus", "slow-link")


def _factor(fault: str | None, family: str, cell: tuple[int, int], k: int) -> float:
    i, j = cell
    if fault == "slow-memory" and family == TRIAD and j == k:
        return 0.55  # a DIMM channel of NUMA node k missing
    if fault == "slow-cpus" and ((family == TRIAD and i == k) or (family == PINGPONG and k in cell)):
        return 0.6  # the cores of NUMA node k throttled
    if fault == "slow-link" and i != j:
        return 0.45  # the socket link at a lower width or speed
    return 1.0


def cluster_results(nodes: list[str], numa_nodes: int | dict[str, int] = 2, seed: int = 0,
                    faults: dict[str, tuple[str, int]] | None = None) -> ResultBatch:
    """Every node's matrices; ``faults`` node -> (fault, NUMA node k)."""
    rng = np.random.default_rng(seed)
    faults = faults or {}
    batch = ResultBatch()
    for node in nodes:
        count = numa_nodes if isinstance(numa_nodes, int) else numa_nodes[node]
        fault, k = faults.get(node, (None, -1))
        level = rng.normal(1.0, NODE_CV, size=(2, count, count))  # this node's own speed per cell
        for (family, metric), (local, remote, unit, direction) in HEALTHY.items():
            for i in range(count):
                for j in range(count):
                    factor = _factor(fault, family, (i, j), k) * level[0 if family == TRIAD else 1, i, j]
                    base = (local if i == j else remote)
                    value = base * factor if direction is Direction.HIGHER else base / factor
                    for repetition in range(1, REPETITIONS + 1):
                        batch.add(cell_series(family, i, j), node,
                                  float(value * rng.normal(1.0, REPETITION_CV)), metric=metric, unit=unit,
                                  direction=direction, label_kind=LabelKind.NODE, repetition=repetition,
                                  valid=True, parameters={"cpu_node": i, "mem_node": j},
                                  raw_ref=f"raw:{cell_series(family, i, j)}:{node}:{repetition}")
    return batch


def store_cluster(path: Path, nodes: list[str], **options) -> Path:
    """A store holding one NUMA run of the synthetic cluster."""
    with open_store(path, read_only=False) as store:
        with store.transaction():
            run_id = store.new_run("oddnode numa", source="synthetic", nodes=nodes)
            store.add_results(run_id, cluster_results(nodes, **options))
    return path


def load(path: Path):
    with open_store(path) as store:
        return store.load_dataset()


def parameters_of(path: Path, benchmark: str) -> list[dict]:
    with open_store(path) as store:
        rows = store.con.execute("SELECT parameters FROM results WHERE benchmark = ?", [benchmark]).fetchall()
    return [json.loads(p) for (p,) in rows]
