"""The local transport: this machine as a one-node cluster, run for real."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from oddnode.core.nodes import NodeNameError
from oddnode.reach import NodeStatus, TransportError, UnknownTransportError, get_transport, python_command, transports
from oddnode.reach.local import LocalTransport, local_node_name, run_process_group

from support.processes import alive


def run_one(argv, timeout=30.0, nodes=()):
    results = get_transport("local").run(list(nodes), argv, timeout=timeout)
    assert len(results) == 1
    return next(iter(results.values()))


def test_registered_names():
    assert {"local", "ssh", "slurm"} <= set(transports())
    assert isinstance(get_transport("local"), LocalTransport)


def test_unknown_transport_lists_the_known_ones():
    with pytest.raises(UnknownTransportError) as caught:
        get_transport("pdsh")
    message = str(caught.value)
    assert "'pdsh'" in message
    for name in ("local", "slurm", "ssh"):
        assert name in message


def test_python_command_runs_and_keys_the_result_by_host_name():
    script = "import sys\nprint('out', 6 * 7)\nprint('err line', file=sys.stderr)\n"
    results = get_transport("local").run([], python_command(script, interpreter=sys.executable), timeout=30)
    assert list(results) == [local_node_name()]
    result = results[local_node_name()]
    assert result.status is NodeStatus.OK and result.ok
    assert result.exit_code == 0
    assert result.stdout == "out 42\n"
    assert result.stderr == "err line\n"  # kept apart from stdout
    assert 0 < result.duration < 30


def test_plain_argv_is_not_reinterpreted_by_a_shell():
    args = ["a b", "'single'", '"double"', "$(touch /nonexistent)", "`id`", "*", "$HOME", "", "%hosts"]
    result = run_one([sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *args])
    assert result.ok
    assert json.loads(result.stdout) == args


def test_exit_codes():
    assert run_one(["sh", "-c", "exit 0"]).status is NodeStatus.OK
    failed = run_one(["sh", "-c", "echo partial; echo why >&2; exit 7"])
    assert failed.status is NodeStatus.FAILED
    assert failed.exit_code == 7
    assert failed.stdout == "partial\n"
    assert failed.stderr == "why\n"


def test_killed_by_a_signal_reads_as_a_shell_shows_it():
    result = run_one(["sh", "-c", "kill -9 $$"])
    assert result.status is NodeStatus.FAILED
    assert result.exit_code == 128 + 9


def test_missing_program_fails_like_a_shell_would():
    result = run_one(["/nonexistent/oddnode-probe"])
    assert result.status is NodeStatus.FAILED
    assert result.exit_code == 127
    assert "/nonexistent/oddnode-probe" in result.stderr


def test_output_is_kept_byte_for_byte():
    result = run_one(["printf", "no newline\\n\\nend"])
    assert result.stdout == "no newline\n\nend"
    undecodable = run_one([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'ok \\xff')"])
    assert undecodable.stdout == "ok \ufffd"


@pytest.mark.timing
def test_timeout_cuts_the_whole_process_group():
    # The shell prints its own pid and its background child's, then waits.
    argv = ["sh", "-c", "sleep 30 & echo $$ $!; sleep 30"]
    started = time.monotonic()
    result = run_one(argv, timeout=1)
    elapsed = time.monotonic() - started
    assert result.status is NodeStatus.TIMEOUT
    assert result.exit_code is None
    assert elapsed < 3.5
    assert 1 <= result.duration < 3
    pids = [int(pid) for pid in result.stdout.split()]  # the output before the cut is kept
    assert len(pids) == 2
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


@pytest.mark.timing
def test_timeout_spares_processes_outside_the_group():
    # A process of ours, in our own group, must survive another group's cut.
    bystander = run_process_group([sys.executable, "-c", "print('still here')"], 10)
    assert bystander.returncode == 0 and bystander.stdout_text == "still here\n"
    result = run_one(["sleep", "30"], timeout=0.5)
    assert result.status is NodeStatus.TIMEOUT
    assert alive(os.getpid())


def test_one_named_node_is_used_as_the_key():
    results = get_transport("local").run(["node001"], ["true"], timeout=10)
    assert list(results) == ["node001"]


def test_more_than_one_node_is_refused():
    with pytest.raises(TransportError, match="ssh or slurm"):
        get_transport("local").run(["node001", "node002"], ["true"], timeout=10)


def test_invalid_node_name_is_refused():
    with pytest.raises(NodeNameError):
        get_transport("local").run(["node;reboot"], ["true"], timeout=10)


def test_empty_argv_is_refused():
    with pytest.raises(TransportError):
        get_transport("local").run([], [], timeout=10)
