"""A scripted cluster answering the sync kernel's jobs, laggards as told."""

from __future__ import annotations

import numpy as np

from oddnode.measure.set.mpi_sync import TCP_KERNEL
from oddnode.measure.set.sync import MPI_PROBE
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import PREPARE_OPTION, decode_job

from support.cli import FIXTURES as ALL_FIXTURES
from support.outputs import prepared_report, runner_report


FIXTURES = ALL_FIXTURES / "mpi_sync"


NODES = [f"cn-a{i:02d}" for i in range(1, 9)]


ITERATIONS = 400


def spec_of(argv: list[str]) -> dict:
    return decode_job(argv[-1])


def kernel_output(kernel: str, members: list[str], slow: set[str], rng: np.random.Generator) -> str:
    """A genuine output's header made a run of ``members``, and rank lines
    where a slow member is last in most iterations and holds the others
    back by 2 ms each time."""
    genuine = (FIXTURES / ("tcp_np3.out" if kernel == TCP_KERNEL else "mpi_np3.out")).read_text()
    header = [line for line in genuine.splitlines() if line.startswith("#") and not line.startswith("# rank:")]
    header = [f"# processes: {len(members)}" if line.startswith("# processes:") else line for line in header]
    header = [f"# iterations: {ITERATIONS}" if line.startswith("# iterations:") else line for line in header]
    at = next(i for i, line in enumerate(header) if line.startswith("# processes:")) + 1
    header[at:at] = [f"# rank: {r} host{r} {node}" for r, node in enumerate(members)]
    weights = np.array([20.0 if node in slow else 1.0 for node in members])
    lasts = rng.multinomial(ITERATIONS, weights / weights.sum())
    time = 1050.0 + (2000.0 * 0.9 if slow & set(members) else 0.0)
    lines = [f"loop {ITERATIONS} {time * ITERATIONS / 1e6:.6f} {time:.3f}"]
    for r, (node, last) in enumerate(zip(members, lasts)):
        extra = last * (2000.0 if node in slow else 10.0)
        lines.append(f"rank {r} {1000.0 * ITERATIONS:.3f} 1000.000 1100.000 {(time - 1000.0) * ITERATIONS:.3f} "
                     f"40.000 {last} {extra:.3f}")
    return "\n".join(header + lines + ["validation ok"]) + "\n"


class ScriptedSyncCluster:
    """Runs the sync kernels like a cluster: ``slow`` nodes arrive last;
    ``without_mpi`` nodes have no mpicc or mpirun."""

    name = "scripted"

    def __init__(self, slow=(), without_mpi=()):
        self.slow, self.without_mpi = set(slow), set(without_mpi)
        self.prepared: list[str] = []
        self.rounds: list[dict[str, dict]] = []
        self.rng = np.random.default_rng(0)

    def run(self, nodes, argv, *, timeout):
        if argv == MPI_PROBE:
            return {n: NodeResult(n, NodeStatus.OK, "", "", 1 if n in self.without_mpi else 0, 0.1) for n in nodes}
        if PREPARE_OPTION in argv:
            self.prepared.append(spec_of(argv)["kernel"])
            return {n: NodeResult(n, NodeStatus.OK, prepared_report(), "", 0, 0.5) for n in nodes}
        return {n: NodeResult(n, NodeStatus.OK, "", "", 0, 0.1) for n in nodes}

    def run_each(self, commands, *, timeout):
        specs = {node: spec_of(argv) for node, argv in commands.items()}
        self.rounds.append(specs)
        results = {}
        for node, spec in specs.items():
            args = spec["args"]
            members = args[args.index("-N") + 1].split(",")
            if spec["kernel"] == TCP_KERNEL and args[args.index("-r") + 1] != "0":
                results[node] = NodeResult(node, NodeStatus.OK, runner_report(""), "", 0, 1.0)
                continue
            output = kernel_output(spec["kernel"], members, self.slow, self.rng)
            results[node] = NodeResult(node, NodeStatus.OK, runner_report(output), "", 0, 1.0)
        return results
