"""The scripted pair clusters answer one round of pair jobs at a time; the
pair runners send several rounds at once, each node's jobs in them one
schedule (reach.jobs.scheduled_argv).  `round_by_round` makes a cluster's
answer to a round answer a batch, as the nodes would."""

from __future__ import annotations

import functools
import json

from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import RUNNER_VERSION, decode_job, runner_job, start_option, with_runner_options


def _schedule(argv: list[str]) -> dict | None:
    try:
        spec = decode_job(argv[-1])
    except ValueError:
        return None
    return spec if "schedule" in spec else None


def _job_argv(item: dict, sources: list[str], interpreter: str) -> list[str]:
    """The argv a scheduled job would have had as a round's own."""
    job = dict(item["job"])
    if item.get("source") is not None:
        job["source"] = sources[item["source"]]
    argv = runner_job(job, interpreter)
    return argv if item["start_at"] is None else with_runner_options(argv, start_option(item["start_at"]))


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def unbatch(commands: dict[str, list[str]], host_node=lambda host: host) -> list[dict[str, list[str]]] | None:
    """A batch's commands as its rounds' commands, in order: a job held
    until a start is in the round of that start; one that runs as soon as
    it can (a server, a relay) in the round whose job names its node with
    -H (``host_node``: the node a host name is), its node's such jobs in
    turn.  None when the commands hold no schedule."""
    schedules = {node: _schedule(argv) for node, argv in commands.items()}
    if not any(schedules.values()):
        return None
    jobs = {node: [(item, _job_argv(item, spec.get("sources", []), commands[node][0])) for item in spec["schedule"]]
            for node, spec in schedules.items()}
    waiting = {node: [(item, argv) for item, argv in node_jobs if item["start_at"] is None]
               for node, node_jobs in jobs.items()}
    starts = sorted({item["start_at"] for node_jobs in jobs.values() for item, _ in node_jobs
                     if item["start_at"] is not None})
    rounds: list[dict[str, list[str]]] = []
    for start in starts:
        round_commands, named = {}, []
        for node, node_jobs in jobs.items():
            for item, argv in node_jobs:
                if item["start_at"] == start:
                    round_commands[node] = argv
                    named.append(item)
        while named:
            args = named.pop()["job"]["args"]
            node = host_node(_option(args, "-H")) if "-H" in args else None
            if node is not None and node not in round_commands and waiting.get(node):
                item, round_commands[node] = waiting[node].pop(0)
                named.append(item)
        rounds.append(round_commands)
    return rounds


def round_by_round(run_round):
    """A scripted cluster's run_each of one round's commands, made to take a
    batch of rounds too: each round run as one, and each node's answers
    packed as its runner packs a schedule's reports (the node's first
    failure, when it had one, stands for the whole schedule)."""
    @functools.wraps(run_round)
    def run_each(self, commands, *, timeout):
        rounds = unbatch(commands, lambda host: getattr(self, "hosts", {}).get(host, host))
        if rounds is None:
            return run_round(self, commands, timeout=timeout)
        answers: dict[str, list[NodeResult]] = {node: [] for node in commands}
        for round_commands in rounds:
            for node, result in run_round(self, round_commands, timeout=timeout).items():
                answers[node].append(result)
        results = {}
        for node, node_results in answers.items():
            failed = [result for result in node_results if not result.ok]
            if failed:
                results[node] = failed[0]
            else:
                reports = [json.loads(result.stdout.strip().splitlines()[-1]) for result in node_results]
                results[node] = NodeResult(node, NodeStatus.OK, json.dumps(
                    {"runner_version": RUNNER_VERSION, "schedule": reports}), "", 0,
                    sum(result.duration for result in node_results))
        return results
    return run_each
