"""A scripted cluster answering a script that runs the same argv on every
node (the process accounting collector, the affinity sampler)."""

from __future__ import annotations


import json

from oddnode.reach.base import NodeResult, NodeStatus, Target


def answer(commands, method="acct", seconds=60.0, notes=()):
    return json.dumps({"collector_version": 1, "hostname": "x", "method": method, "source": "acct(2)",
                       "start": 1.7e9, "seconds": seconds, "notes": list(notes), "missed_short_lived": False,
                       "commands": {name: {"executions": e, "cpu_seconds": 0.5, "elapsed_seconds": 1.0,
                                           "bursts": a} for name, (e, a) in commands.items()}})


class AccountingCluster:
    """Answers the collector's argv per node as scripted."""

    name = "scripted"

    def __init__(self, answers):
        self.answers = answers
        self.argv = None

    def run(self, nodes, argv, *, timeout):
        self.argv, self.timeout = list(argv), timeout
        return {node: self.answers[node] if isinstance(self.answers[node], NodeResult)
                else NodeResult(node, NodeStatus.OK, self.answers[node], "", 0, 1.0) for node in nodes}

    def run_each(self, commands, *, timeout):
        raise AssertionError("the collector runs one argv everywhere")


def use_scripted_cluster(monkeypatch, command_module, answers) -> "AccountingCluster":
    """Make ``command_module``'s commands reach the nodes of ``answers``
    (node -> stdout or NodeResult) through an AccountingCluster."""
    scripted = AccountingCluster(answers)
    monkeypatch.setattr(command_module, "selected_target", lambda *args: Target(list(answers), scripted))
    return scripted


NODES = ["cn-a10", "cn-a11", "cn-a12", "cn-a13", "cn-b01", "cn-b02", "cn-b03", "cn-b04"]


def background(extra=None):
    """What a node's collector answers: the same background everywhere, and ``extra`` (command -> (executions, bursts))."""
    return answer({"cron": (1, 1), "sshd": (2, 1), "sh": (4, 2), **(extra or {})})
