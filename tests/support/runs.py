"""Node runs written into a store as ``oddnode check`` writes them, for compare."""

from __future__ import annotations

import math

import numpy as np

from oddnode.core.model import Direction, LabelKind
from oddnode.store import ResultBatch



NODES = [f"cn-a{i:02d}" for i in range(1, 9)]  # foreign-looking names: cn-a01 ... cn-a08


def write_run(store, nodes, *, repetitions=5, seed=0, factor=None, benchmark="stream.triad",
              metric="bandwidth", unit="MB/s", direction=Direction.HIGHER, level=1000.0, noise=0.01,
              command="oddnode check [memory]", source=None, kind=LabelKind.NODE, failing=()):
    """One run of one series: every node ``repetitions`` times, each node at
    its own level (a node effect that stays between runs), lognormal noise;
    ``factor(node)`` scales a node's values (the change planted); nodes in
    ``failing`` fail every repetition."""
    rng = np.random.default_rng(seed)
    batch = ResultBatch()
    for index, node in enumerate(nodes):
        own = level * (1 + 0.03 * math.sin(index + 1))
        for repetition in range(1, repetitions + 1):
            value = own * (factor(node) if factor else 1.0) * math.exp(noise * rng.standard_normal())
            batch.add(benchmark, node, None if node in failing else value, metric=metric, unit=unit,
                      direction=direction, label_kind=kind, repetition=repetition, valid=node not in failing)
    with store.transaction():
        run_id = store.new_run(command, source=source, nodes=list(nodes))
        store.add_results(run_id, batch)
    return run_id
