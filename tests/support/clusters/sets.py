"""A scripted cluster answering the MPI set jobs with genuine kernel output."""

from __future__ import annotations

import re

from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import PREPARE_OPTION, decode_job

from support.cli import FIXTURES
from support.clusters.pairs import cut
from support.outputs import prepared_report, runner_report


GENUINE = (FIXTURES / "mpi_collectives" / "np3.out").read_text()


SIZES = tuple(int(s) for s in re.search(r"^# sizes: (\S+)$", GENUINE, re.M).group(1).split(","))


TWELVE = [f"node{i:02d}" for i in range(1, 13)]


def job_spec(argv: list[str]) -> dict:
    return decode_job(argv[-1])


def set_output(members: list[str], factor: float, validation: str = "validation ok") -> str:
    """The kernel's genuine output of three ranks, made a run on ``members``:
    their rank lines, and every time multiplied by ``factor``."""
    header = [line for line in GENUINE.splitlines() if line.startswith("#") and not line.startswith("# rank:")]
    at = next(i for i, line in enumerate(header) if line.startswith("# processes:"))
    header[at] = f"# processes: {len(members)}"
    header[at + 1:at + 1] = [f"# rank: {rank} {node}" for rank, node in enumerate(members)]

    def scale(match: re.Match) -> str:
        name, size, calls, low, median, batches = match.groups()
        return f"result {name} {size} {calls} {float(low) * factor:.3f} {float(median) * factor:.3f} {batches}"

    results = [re.sub(r"^result (\S+) (\d+) (\d+) (\S+) (\S+) (\d+)$", scale, line)
               for line in GENUINE.splitlines() if line.startswith("result ")]
    return "\n".join(header + results + [validation]) + "\n"


class SetCluster:
    """Runs the collectives kernel like a cluster of one switch: a set whose
    members include ``weak`` runs ``factor`` times slower; ``down`` nodes
    answer nothing; every set's time also grows a little with its index,
    as no two runs are alike."""

    name = "scripted"

    def __init__(self, weak=(), factor=3.0, down=(), slow_groups=None, cut_sizes=()):
        self.weak, self.factor, self.down, self.cut_sizes = set(weak), factor, set(down), set(cut_sizes)
        self.slow_groups = slow_groups or {}  # node -> its group, for groups behind a slow uplink
        self.prepared: list[list[str]] = []
        self.rounds: list[dict[str, list[str]]] = []
        self.starts: list[dict[str, tuple[str, ...]]] = []  # per round: node -> its --start-at option, if any
        self.launches: list[list[str]] = []  # the nodes of each launch of several rounds

    def run(self, nodes, argv, *, timeout):
        if PREPARE_OPTION in argv:
            self.prepared.append(list(nodes))
            return {n: NodeResult(n, NodeStatus.OK, prepared_report(), "", 0, 0.5) for n in nodes}
        return {n: (NodeResult(n, NodeStatus.UNREACHABLE, "", "ssh: connect to host: No route to host", 255, 0.1)
                    if n in self.down else NodeResult(n, NodeStatus.OK, "", "", 0, 0.1)) for n in nodes}

    def members(self, spec: dict) -> list[str]:
        launcher = spec["launcher"]
        return launcher[launcher.index("--host") + 1].split(",")

    def factor_of(self, members: list[str]) -> float:
        """How many times slower the set runs: ``factor`` with a weak member;
        and, as a ring sends to the right, the uplink of a slow group (a
        tenth of a link) shared by every flow that leaves the group."""
        factor = self.factor if self.weak & set(members) else 1.0
        for group in set(self.slow_groups.values()):
            inside = [self.slow_groups.get(node) == group for node in members]
            leaving = sum(a and not b for a, b in zip(inside, inside[1:] + inside[:1]))
            factor *= 10.0 * leaving if leaving else 1.0
        return factor

    def output(self, members: list[str], place: int) -> str:
        """A set's output, the ``place``-th of its round by first node."""
        factor = self.factor_of(members)
        output = set_output(members, factor * (1 + place / 500))
        if factor > 1:  # a slow set runs out of time first
            output = cut(output, self.cut_sizes)
        return output

    def run_each(self, commands, *, timeout):
        if len(commands) == 1:
            ((node, argv),) = commands.items()
            spec = job_spec(argv)
            if "-P" in spec["args"]:
                return {node: self.run_plan(node, spec)}
        round_members = {}
        results = {}
        self.starts.append({node: tuple(a for a in argv if a.startswith("--start-at=")) for node, argv in commands.items()})
        for index, (node, argv) in enumerate(sorted(commands.items())):
            members = self.members(job_spec(argv))
            assert members[0] == node
            round_members[node] = members
            if self.down & set(members):
                results[node] = NodeResult(node, NodeStatus.FAILED, "", "ORTE was unable to reach a node", 1, 2.0)
                continue
            results[node] = NodeResult(node, NodeStatus.OK, runner_report(self.output(members, index)), "", 0, 1.0)
        self.rounds.append(round_members)
        return results

    def run_plan(self, node: str, spec: dict) -> NodeResult:
        """One launch of several rounds (the kernel's -P plan): each round's
        sets as run_each runs them, their outputs in sections; a down node
        anywhere fails the launch before any round."""
        nodes = self.members(spec)
        assert nodes[0] == node
        self.launches.append(nodes)
        if self.down & set(nodes):
            return NodeResult(node, NodeStatus.FAILED, "", "ORTE was unable to reach a node", 1, 2.0)
        plan = spec["args"][spec["args"].index("-P") + 1]
        sections = []
        for number, round_text in enumerate(plan.split("/"), start=1):
            sets = [[nodes[int(rank)] for rank in text.split(",")] for text in round_text.split(";")]
            self.rounds.append({members[0]: members for members in sets})
            self.starts.append({})
            # Each set as run_each runs it: its place among the round's first nodes.
            places = {first: place for place, first in enumerate(sorted(members[0] for members in sets))}
            sections += [(number, index, self.output(members, places[members[0]]))
                         for index, members in enumerate(sets, start=1)]
        text = "".join(f"== round {number} set {index}\n{output}" for number, index, output in sorted(sections))
        return NodeResult(node, NodeStatus.OK, runner_report(text), "", 0, 1.0)
