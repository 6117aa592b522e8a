"""Several jobs for one start of the node runner: the argv that carries
them (each C source once) and the split of its report back into each job's
own result, whatever the node answered."""

from __future__ import annotations

import json

import pytest

from oddnode.measure.pair.pingpong import pingpong_ping_argv, pingpong_serve_argv
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import (
    decode_job,
    kernel_source,
    schedule_results,
    scheduled_argv,
    start_option,
    with_runner_options,
)
from oddnode.reach.ssh import MAX_REMOTE_COMMAND, remote_command
from support.outputs import runner_report


def test_a_schedule_holds_each_job_with_its_start_and_each_source_once():
    serve, ping = pingpong_serve_argv(6211, wait=5), pingpong_ping_argv("node02", 6211)
    argv = scheduled_argv([(None, serve), (1_900_000_000.12345, ping)])
    assert argv[:-1] == serve[:-1]  # the node runner, as every job's
    spec = decode_job(argv[-1])
    assert spec["sources"] == [kernel_source("pingpong")]
    (served, pinged) = spec["schedule"]
    assert served["start_at"] is None and pinged["start_at"] == 1_900_000_000.123
    assert served["source"] == pinged["source"] == 0
    assert {key: value for key, value in decode_job(serve[-1]).items() if key != "source"} == served["job"]
    assert {key: value for key, value in decode_job(ping[-1]).items() if key != "source"} == pinged["job"]


def test_forty_rounds_of_a_pair_fit_one_remote_command_line():
    jobs = [(1_900_000_000.0 + round_, pingpong_ping_argv(f"node{round_ + 2:02d}", 6211)) for round_ in range(40)]
    assert len(remote_command(scheduled_argv(jobs)).encode()) <= MAX_REMOTE_COMMAND


def test_only_plain_runner_argvs_are_scheduled():
    ping = pingpong_ping_argv("node02", 6211)
    with pytest.raises(ValueError, match="without options"):
        scheduled_argv([(None, with_runner_options(ping, start_option(1_900_000_000.0)))])
    with pytest.raises(ValueError, match="without options"):
        scheduled_argv([(None, ["python3", "-c", "print(1)", "job"])])
    with pytest.raises(ValueError, match="at least one job"):
        scheduled_argv([])


def schedule_stdout(*reports: str) -> str:
    return json.dumps({"runner_version": 1, "schedule": [json.loads(report) for report in reports]}) + "\n"


def test_each_job_gets_its_own_report_as_its_own_run_would_have():
    result = NodeResult("node01", NodeStatus.OK, schedule_stdout(runner_report("first\n"), runner_report("second\n")),
                        "a login banner\n", 0, 4.0)
    first, second = schedule_results(result, 2)
    assert [json.loads(run.stdout)["stdout"] for run in (first, second)] == ["first\n", "second\n"]
    assert all(run.ok and run.node == "node01" and run.stderr == "a login banner\n" and run.duration == 4.0
               for run in (first, second))


def test_a_node_that_ran_no_schedule_gives_its_result_to_every_job():
    unreachable = NodeResult("node01", NodeStatus.UNREACHABLE, "", "ssh: No route to host", None, 0.1)
    assert schedule_results(unreachable, 3) == [unreachable] * 3
    garbled = NodeResult("node01", NodeStatus.OK, "Segmentation fault\n", "", 0, 0.1)
    assert schedule_results(garbled, 2) == [garbled] * 2
    refused = NodeResult("node01", NodeStatus.OK, json.dumps({"runner_version": 1, "error": "bad spec",
                                                              "detail": "a schedule is a list"}), "", 0, 0.1)
    assert schedule_results(refused, 2) == [refused] * 2


def test_a_job_the_report_lacks_failed_saying_so():
    result = NodeResult("node01", NodeStatus.OK, schedule_stdout(runner_report("first\n")), "", 0, 1.0)
    first, second = schedule_results(result, 2)
    assert first.ok and json.loads(first.stdout)["stdout"] == "first\n"
    assert second.status is NodeStatus.FAILED and second.stderr == (
        "the node runner reported 1 of the 2 jobs of its schedule")
