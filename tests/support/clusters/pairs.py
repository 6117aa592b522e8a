"""A scripted cluster answering the ping-pong pair jobs, links slowed as told."""

from __future__ import annotations

import re

from oddnode.measure.pair.pairs import PingPongOptions
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import PREPARE_OPTION, decode_job

from support.clusters.batches import round_by_round
from support.outputs import GOOD_PING, prepared_report, runner_report


NODES = [f"node{i:02d}" for i in range(1, 9)]


# A pattern over 8 nodes has 4 pairs, too few to call one of them an
# outlier; over 12 it has 6.
TWELVE = [f"node{i:02d}" for i in range(1, 13)]


SIZES = (0, 1, 64, 4096, 65536)


OPTIONS = PingPongOptions(sizes=SIZES, seconds_per_size=0.02, port=6211)


def job_args(argv):
    return decode_job(argv[-1])["args"]


def slowed(factor: float, jitter: float, output: str = GOOD_PING, large: int = 4096) -> str:
    """Genuine ping output (the TCP kernel's by default) with its times
    scaled: messages of ``large`` bytes and up by ``factor``, all by ``jitter``."""
    def scale(match):
        size, trips, low, median, batches = match.groups()
        f = (factor if int(size) >= large else 1.0) * jitter
        return f"result {size} {trips} {float(low) * f:.3f} {float(median) * f:.3f} {batches}"
    return re.sub(r"^result (\d+) (\d+) (\S+) (\S+) (\d+)$", scale, output, flags=re.M)


def cut(output: str, sizes, batches: int = 3, seconds: float = 0.02) -> str:
    """Kernel output (ping or collectives) whose ``sizes`` ran out of their
    time after ``batches`` batches, each said in a warning line as the
    kernel says it."""
    def shorten(match):
        head, size, rest = match.group(1), match.group(2), match.group(3)
        if int(size) not in sizes:
            return match.group(0)
        what = head.split()[1] + " " if len(head.split()) > 1 else ""
        return (f"# warning: {what}size {size}: cut by its time of {seconds:g} s after {batches} of 10 timed "
                f"batches\n{head} {size} {rest.rsplit(' ', 1)[0]} {batches}")
    return re.sub(r"^(result(?: [a-z]+)?) (\d+) (.*)$", shorten, output, flags=re.M)


class PairCluster:
    """Serves and pings like 8 nodes on one switch; pairs with ``weak`` are
    ``factor`` times slower on large messages; ``down`` nodes are unreachable.
    ``hosts``: the names a client may reach a server by besides its own
    (``node03-ib`` -> ``node03``), as a second network's; each one a
    client used is kept in ``hosts_used``."""

    name = "scripted"

    def __init__(self, weak=None, factor=10.0, down=(), cut_sizes=(), hosts=None):
        self.weak, self.factor, self.down, self.cut_sizes = weak, factor, set(down), set(cut_sizes)
        self.hosts, self.hosts_used = dict(hosts or {}), set()
        self.rounds: list[dict[str, list[str]]] = []
        self.prepared = 0

    def run(self, nodes, argv, *, timeout):
        assert PREPARE_OPTION in argv
        self.prepared += 1
        return {node: NodeResult(node, NodeStatus.OK, prepared_report(), "", 0, 0.5) for node in nodes}

    @round_by_round
    def run_each(self, commands, *, timeout):
        self.rounds.append({node: job_args(argv) + [a for a in argv if a.startswith("--start-at=")]
                            for node, argv in commands.items()})
        results = {}
        for index, (node, argv) in enumerate(sorted(commands.items())):
            args = job_args(argv)
            if node in self.down:
                results[node] = NodeResult(node, NodeStatus.UNREACHABLE, "",
                                           f"ssh: connect to host {node} port 22: No route to host", None, 0.1)
            elif args[0] == "serve":
                results[node] = NodeResult(node, NodeStatus.OK, runner_report("served echoes 10 100\n"), "", 0, 1)
            else:
                host = args[args.index("-H") + 1]
                self.hosts_used.add(host)
                server = self.hosts.get(host, host)
                if server in self.down:
                    results[node] = NodeResult(node, NodeStatus.OK, runner_report(
                        "", returncode=3, stderr=f"error: no server at {server}:6211\n"), "", 0, 30)
                    continue
                factor = self.factor if self.weak in (node, server) else 1.0
                output = slowed(factor, 1 + index / 1000)
                if self.weak in (node, server):  # a slow link runs out of time first
                    output = cut(output, self.cut_sizes)
                results[node] = NodeResult(node, NodeStatus.OK, runner_report(output), "", 0, 1.0)
        return results
