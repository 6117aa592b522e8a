"""A scripted cluster answering the bisection stream jobs (switch uplinks
of known rates)."""

from __future__ import annotations

import re

from oddnode.measure.pair.bisection import StreamOptions
from oddnode.reach.base import NodeResult, NodeStatus

from support.clusters.batches import round_by_round
from support.clusters.pairs import job_args
from support.outputs import GOOD_STREAM, prepared_report, runner_report


OPTIONS = StreamOptions(message_size=65536, seconds=0.3, port=6202)


ONE_WAY = GOOD_STREAM.replace("# directions: both (client_to_server and server_to_client at once)",
                              "# directions: client_to_server").replace(
    "stream server_to_client 488701952 0.301053 1623.306\n", "")


def stream_output(rate: float) -> str:
    return re.sub(r"^stream client_to_server (\d+) (\S+) \S+$", rf"stream client_to_server \1 \2 {rate:.3f}",
                  ONE_WAY, flags=re.M)


class BisectionCluster:
    """Pairs stream ``link`` MB/s each, as long as the pairs at once stay
    within the switch's ``capacity``; beyond it they share the capacity."""

    name = "scripted"

    def __init__(self, link=1000.0, capacity=2000.0, down=()):
        self.link, self.capacity, self.down = link, capacity, set(down)
        self.rounds: list[list[tuple[str, str]]] = []

    def run(self, nodes, argv, *, timeout):
        return {node: NodeResult(node, NodeStatus.OK, prepared_report(), "", 0, 0.5) for node in nodes}

    @round_by_round
    def run_each(self, commands, *, timeout):
        pairs = [(node, job_args(argv)[job_args(argv).index("-H") + 1]) for node, argv in sorted(commands.items())
                 if job_args(argv)[0] == "stream"]
        self.rounds.append(pairs)
        rate = min(self.link, self.capacity / len(pairs))
        results = {}
        for node, argv in commands.items():
            if node in self.down:
                results[node] = NodeResult(node, NodeStatus.UNREACHABLE, "", "ssh: No route to host", None, 0.1)
            elif job_args(argv)[0] == "serve":
                results[node] = NodeResult(node, NodeStatus.OK, runner_report("served streams 1\n"), "", 0, 1)
            else:
                server = job_args(argv)[job_args(argv).index("-H") + 1]
                if server in self.down:
                    results[node] = NodeResult(node, NodeStatus.OK, runner_report(
                        "", returncode=3, stderr=f"error: no server at {server}:6202\n"), "", 0, 30)
                else:
                    results[node] = NodeResult(node, NodeStatus.OK, runner_report(stream_output(rate)), "", 0, 1)
        return results
