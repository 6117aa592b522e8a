"""A scripted cluster whose memory kernel runs faster under one environment setting, for sweeps."""

from __future__ import annotations

from oddnode.reach.base import NodeResult, NodeStatus

from support.clusters.check import ScriptedCluster, kernel_stdout
from support.outputs import runner_report


NODES = ["cn-a17", "cn-b02", "gpu003"]


FIXED = ["memory.elements=2000000", "memory.ntimes=3"]


class TunableCluster(ScriptedCluster):
    """The memory kernel 1.5 times faster where its job's environment has
    MEMORY_POLICY=interleave (as numactl's policy would make it on a
    two-socket node); every job's environment is kept."""

    def __init__(self):
        super().__init__()
        self.envs = []

    def run(self, nodes, argv, *, timeout):
        job = self._job(argv)
        if job is None or "--prepare" in argv:
            return super().run(nodes, argv, timeout=timeout)
        self.kernel_calls += 1
        self.envs.append(job["env"])
        fast = 1.5 if job["env"].get("MEMORY_POLICY") == "interleave" else 1.0
        return {node: NodeResult(node, NodeStatus.OK, runner_report(kernel_stdout(
            fast * (1 + 0.01 * ((self.kernel_calls * 7 + i * 3) % 5)))), "", 0, 1.0) for i, node in enumerate(nodes)}
