"""A scripted cluster answering the all-pairs latency matrix."""

from __future__ import annotations

from oddnode.reach.base import NodeResult, NodeStatus

from support.clusters.batches import round_by_round
from support.clusters.pairs import job_args, slowed
from support.outputs import prepared_report, runner_report


class MatrixCluster:
    """Pings like 8 nodes on one switch.  ``bad`` links are 10 times slower
    on large messages whatever the load; a link of ``contended`` (link ->
    the most pairs at once it copes with) is 10 times slower when more
    pairs than that run in its round.  A node ``held_up`` (node -> rounds)
    is 5 times slower on every message in its first rounds, as when OS work
    holds it up for a while, and fine afterwards, in the retests too."""

    name = "scripted"

    def __init__(self, bad=(), contended=None, down=(), held_up=None):
        self.bad = {frozenset(link) for link in bad}
        self.contended = {frozenset(link): most for link, most in (contended or {}).items()}
        self.down = set(down)
        self.held_up = dict(held_up or {})
        self.rounds: list[list[tuple[str, str]]] = []

    def run(self, nodes, argv, *, timeout):
        return {node: NodeResult(node, NodeStatus.OK, prepared_report(), "", 0, 0.5) for node in nodes}

    @round_by_round
    def run_each(self, commands, *, timeout):
        pairs = []
        for node, argv in sorted(commands.items()):
            args = job_args(argv)
            if args[0] == "ping":
                pairs.append((node, args[args.index("-H") + 1]))
        self.rounds.append(pairs)
        results = {}
        for index, (node, argv) in enumerate(sorted(commands.items())):
            args = job_args(argv)
            if node in self.down:
                results[node] = NodeResult(node, NodeStatus.UNREACHABLE, "", "ssh: No route to host", None, 0.1)
            elif args[0] == "serve":
                results[node] = NodeResult(node, NodeStatus.OK, runner_report("served echoes 10 100\n"), "", 0, 1)
            else:
                link = frozenset((node, args[args.index("-H") + 1]))
                slow = link in self.bad or len(pairs) > self.contended.get(link, len(pairs))
                held = any(len(self.rounds) <= self.held_up.get(member, 0) for member in link)
                jitter = (5.0 if held else 1.0) * (1 + index / 1000)
                results[node] = NodeResult(node, NodeStatus.OK,
                                           runner_report(slowed(10.0 if slow else 1.0, jitter)), "", 0, 1)
        return results
