"""A scripted cluster answering the inventory probe and the memory kernel
like 8 nodes, for the stages of a check."""

from __future__ import annotations

import json
import re

from oddnode.app.check import CheckPlan
from oddnode.onnode.node_probe import PROBE_VERSION
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import PREPARE_OPTION, decode_job

from support.outputs import KERNEL_STDOUT, prepared_report, runner_report


NODES = [f"node{i:02d}" for i in range(1, 9)]


MEMORY_ONLY = {"memory": {"elements": 2_000_000, "ntimes": 3}}


def kernel_stdout(factor: float) -> str:
    """The genuine kernel output with every bandwidth scaled by `factor`."""
    return re.sub(r"^(result \w+) (\S+)", lambda m: f"{m.group(1)} {float(m.group(2)) * factor:.3f}",
                  KERNEL_STDOUT, flags=re.M)


class ScriptedCluster:
    """Answers the inventory probe and the memory kernel like 8 nodes would.

    ``speed`` scales a node's bandwidths; ``facts`` overrides a node's facts;
    ``interrupt_at`` raises KeyboardInterrupt on that kernel call (1-based),
    as Ctrl-C would during a repetition.
    """

    name = "scripted"

    def __init__(self, speed=None, facts=None, interrupt_at=None):
        self.speed = speed or {}
        self.facts = facts or {}
        self.interrupt_at = interrupt_at
        self.kernel_calls = 0

    def run(self, nodes, argv, *, timeout):
        job = self._job(argv)
        if job is None:  # the inventory probe
            return {node: NodeResult(node, NodeStatus.OK, self._probe(node), "", 0, 0.3) for node in nodes}
        if PREPARE_OPTION in argv:
            return {node: NodeResult(node, NodeStatus.OK, prepared_report(), "", 0, 0.5) for node in nodes}
        self.kernel_calls += 1
        if self.kernel_calls == self.interrupt_at:
            raise KeyboardInterrupt
        # A few per cent of spread between healthy nodes, as on real hardware.
        return {node: NodeResult(node, NodeStatus.OK, runner_report(kernel_stdout(
            self.speed.get(node, 1.0) * (1 + 0.004 * (i % 5) + 0.001 * self.kernel_calls))), "", 0, 2.0)
            for i, node in enumerate(nodes)}

    @staticmethod
    def _job(argv):
        try:
            return decode_job(argv[-1])
        except ValueError:
            return None

    def _probe(self, node):
        facts = {"kernel": "6.1.0-18-amd64", "cpu_model": "Test CPU", "memory_total_kb": "263856012",
                 **self.facts.get(node, {})}
        return json.dumps({"probe_version": PROBE_VERSION, "hostname": node, "facts": facts, "notes": [],
                           "elapsed": 0.1})


def plan(**changes):
    return CheckPlan(**{"stages": ("memory",), "repetitions": 3, "parameters": MEMORY_ONLY, **changes})
