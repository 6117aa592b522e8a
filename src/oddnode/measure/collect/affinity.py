"""Run the affinity sampler on every node at once through a transport and
read what comes back.

The sampler (``node_affinity.py``, with ``topology.py``, ``sampler.py``
and the inventory probe's readers of /proc and /sys that they import)
travels inside the command line as the inventory probe does
(reach/scripts.py's ``onnode_script`` and ``python_command``): the
modules' sources in one script that registers each under its package name,
so that the files that run on a node without oddnode installed are the
ones the tests import here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from oddnode.readings.affinity import AffinityOutputError, NodeAffinity, node_affinity_from_json
from oddnode.onnode.node_affinity import DEFAULT_SECONDS
from oddnode.reach.base import NodeResult, Target, Transport
from oddnode.reach.scripts import ScriptResults, onnode_script, python_command, sort_results

__all__ = ["AFFINITY_STAGE", "AffinityResult", "DEFAULT_MARGIN", "classify", "collect_affinity",
           "parse_sampler_output", "sampler_argv", "sampler_script", "store_affinity"]

AFFINITY_STAGE = "affinity"  # the stage of its runs' node status

# Seconds a node may take beyond the sampling: the transport's start,
# lstopo (a second or two on a large node), reading numa_maps.
DEFAULT_MARGIN = 30.0
QUOTED_CHARS = 80
# The modules that travel, in the order they are loaded (each imports only those before it).
MODULES = ("node_probe", "cpu_topology", "affinity_sampler", "node_affinity")


class AffinityResult(ScriptResults[NodeAffinity]):
    """The reports of the nodes that answered, and why the others did not."""


def sampler_script() -> str:
    """The sampler and the modules it imports, as one script."""
    return onnode_script(*MODULES)


def sampler_argv(pids: Sequence[int] | None = None, command: str | None = None, slurm_job: str | None = None,
                 seconds: float = DEFAULT_SECONDS, interpreter: str = "python3") -> list[str]:
    """The argv that runs the sampler on a node: the topology, and the
    processes of at most one selection sampled for ``seconds``."""
    if sum(bool(x) for x in (pids, command, slurm_job)) > 1:
        raise ValueError("--pid, --command and --slurm-job each select processes: give one")
    if not seconds > 0:
        raise ValueError(f"--seconds must be > 0, not {seconds:g}")
    if pids and min(pids) <= 0:
        raise ValueError(f"PIDs are whole numbers > 0, not {min(pids)}")
    argv = python_command(sampler_script(), interpreter) + [f"--seconds={seconds:g}"]
    if pids:
        argv.append("--pid=" + ",".join(str(pid) for pid in pids))
    if command:
        argv.append(f"--command={command}")
    if slurm_job:
        argv.append(f"--slurm-job={slurm_job}")
    return argv


def _quote(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "...")


def parse_sampler_output(node: str, stdout: str) -> NodeAffinity:
    """The sampler's JSON from one node's stdout, checked; lines before it
    (a login banner) are ignored."""
    lines = [line for line in (stdout or "").strip().splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("{")]
    if not starts:
        raise AffinityOutputError(node, f"the sampler's output is not JSON: {_quote(stdout or '')}")
    try:
        data = json.loads("\n".join(lines[starts[-1]:]))
    except json.JSONDecodeError as err:
        raise AffinityOutputError(node, f"the sampler's output is not valid JSON ({err.msg} at character "
                                        f"{err.pos})") from None
    return node_affinity_from_json(node, data)


def classify(results: dict[str, NodeResult], nodes: Iterable[str], timeout: float) -> AffinityResult:
    """Sort a transport's results into reports, unreachable and failed nodes."""
    return sort_results(AffinityResult(), results, nodes, timeout, parse_sampler_output, "sampler",
                        prefix="oddnode affinity: ")


def collect_affinity(transport: Transport, nodes: Sequence[str], pids: Sequence[int] | None = None,
                     command: str | None = None, slurm_job: str | None = None, seconds: float = DEFAULT_SECONDS,
                     margin: float = DEFAULT_MARGIN) -> AffinityResult:
    """The sampler on every node at once; one bad node never loses the others."""
    requested = list(dict.fromkeys(nodes))
    timeout = seconds + margin
    results = transport.run(requested, sampler_argv(pids, command, slurm_job, seconds), timeout=timeout)
    return classify(results, requested, timeout)


def store_affinity(store, target: Target, result: AffinityResult, command: str) -> int:
    """One run: every node's report and how every node fared, in one transaction."""
    with store.transaction():
        run_id = store.new_run(command, source=f"{target.transport.name}:{target.nodeset}", nodes=target.nodes)
        store.add_affinity_samples(run_id, {node: report.to_json() for node, report in result.reports.items()})
        store.add_node_status(run_id, AFFINITY_STAGE, result.statuses())
    return run_id
