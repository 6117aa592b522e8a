"""The TCP ping-pong and streaming kernel built and run for real on loopback
through the node runner (the argv a transport would send), both ends at
once: ping over several sizes, streams one way and both ways, a corrupted
echo caught, a missing partner on either side, a silent one; the argv
checks; the parsers on genuine and broken output.  No timing is asserted."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from oddnode.measure.pair.pingpong import (
    DEFAULT_SIZES,
    PINGPONG_BENCHMARK,
    STREAM_BENCHMARKS,
    parse_pingpong_output,
    parse_pingpong_run,
    parse_stream_output,
    parse_stream_run,
    ping_run_seconds,
    pingpong_ping_argv,
    pingpong_serve_argv,
    pingpong_stream_argv,
)
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import (
    decode_job,
    parse_runner_output,
    runner_argv,
    runner_job,
    schedule_results,
    scheduled_argv,
    start_timing,
)
from oddnode.reach.ssh import MAX_REMOTE_COMMAND, remote_command
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError
from support.outputs import GOOD_PING, GOOD_STREAM
from support.kernels import HAS_IPV6, assert_cuts_said, finish, free_port, kernel_env, run_alone, started

SIZES = [0, 1, 64, 4096, 65536]
SECONDS_PER_SIZE = 0.02
STREAM_SECONDS = 0.3
STREAM_MESSAGE = 65536


LOOPBACKS = ["127.0.0.1"] + (["::1"] if HAS_IPV6 else [])


def run_pair(server_argv: list[str], client_argv: list[str], env: dict[str, str]) -> tuple[str, str]:
    """Server and client started at the same moment; their runners' stdout."""
    with started(server_argv, env) as server, started(client_argv, env) as client:
        client_stdout = finish(client)
        server_stdout = finish(server)
    return server_stdout, client_stdout


def served_lines(server_stdout: str) -> list[str]:
    report = parse_runner_output("server", server_stdout)
    assert report.returncode == 0, report.stderr
    return [line for line in report.stdout.splitlines() if line.startswith("served ")]


# --- the real kernel on loopback ----------------------------------------------------


@pytest.mark.parametrize("host", LOOPBACKS)
def test_ping_measures_and_checks_every_size(kernel_env, host):
    port = free_port()
    server_stdout, client_stdout = run_pair(
        pingpong_serve_argv(port, wait=60),
        pingpong_ping_argv(host, port, sizes=SIZES, seconds_per_size=SECONDS_PER_SIZE),
        kernel_env,
    )
    parsed = parse_pingpong_run(client_stdout, host)
    assert parsed.valid and parsed.problems == []
    assert parsed.tool == "oddnode-pingpong"
    config = parsed.configuration
    assert config["sizes"] == SIZES and config["port"] == port and config["peer"] == host
    assert config["family"] == ("ipv6" if ":" in host else "ipv4")
    assert config["tcp_nodelay"] == "on"
    assert config["timer_granularity_ns"] > 0
    assert config["cflags"].startswith("-O3 -march=native -fopenmp")
    latency = {m.parameters["bytes"]: m for m in parsed.measurements if m.metric.startswith("latency.")}
    bandwidth = {m.parameters["bytes"]: m for m in parsed.measurements if m.metric.startswith("bandwidth.")}
    assert sorted(latency) == SIZES
    assert sorted(bandwidth) == [size for size in SIZES if size > 0]  # a token carries no payload
    for size, measurement in latency.items():
        assert measurement.benchmark == PINGPONG_BENCHMARK and measurement.metric == f"latency.{size}"
        assert measurement.unit == "us" and measurement.direction is Direction.LOWER
        params = measurement.parameters
        assert 0 < measurement.value == params["min_us"] <= params["median_us"]
        assert params["repetitions"] >= params["batches"]
    for size, measurement in bandwidth.items():
        assert measurement.unit == "MB/s" and measurement.direction is Direction.HIGHER
        assert measurement.value == pytest.approx(size / latency[size].value)
    assert_cuts_said(parsed)
    # Set, read back, cross-check: every message the client checked was echoed once.
    served = served_lines(server_stdout)
    echoes, echoed_bytes = (int(word) for word in served[-1].split()[2:])
    assert served[-1].startswith("served echoes ")
    assert echoes == config["echoes_checked"] >= sum(m.parameters["repetitions"] for m in latency.values())
    assert echoed_bytes > 0


def test_a_size_out_of_time_ends_after_one_batch_and_says_so(kernel_env):
    # A tenth of a millisecond cannot hold one warm-up round trip and one
    # batch of a millisecond: each size's time is an upper bound, so it
    # stops after its first batch, measured, checked and said cut.
    port = free_port()
    server_stdout, client_stdout = run_pair(
        pingpong_serve_argv(port, wait=60),
        pingpong_ping_argv("127.0.0.1", port, sizes=[0, 1 << 20], seconds_per_size=1e-4), kernel_env)
    parsed = parse_pingpong_run(client_stdout, "cut")
    assert parsed.valid, parsed.problems
    assert {m.parameters["batches"] for m in parsed.measurements} == {1}
    assert all(m.parameters["cut_by_time"] and m.value > 0 for m in parsed.measurements)
    assert parsed.configuration["warnings"] == [
        f"size {size}: cut by its time of 0.0001 s after 1 of 10 timed batches" for size in (0, 1 << 20)]
    assert_cuts_said(parsed)
    assert served_lines(server_stdout)


@pytest.mark.parametrize("both", [False, True], ids=["one-way", "both-ways"])
def test_stream_counts_what_arrives(kernel_env, both):
    port = free_port()
    server_stdout, client_stdout = run_pair(
        pingpong_serve_argv(port, wait=60),
        pingpong_stream_argv("127.0.0.1", port, message_size=STREAM_MESSAGE, seconds=STREAM_SECONDS, both=both),
        kernel_env,
    )
    parsed = parse_stream_run(client_stdout, "127.0.0.1")
    assert parsed.valid and parsed.problems == []
    directions = ["client_to_server", "server_to_client"] if both else ["client_to_server"]
    assert [m.metric for m in parsed.measurements] == [f"bandwidth.{d}" for d in directions]
    for measurement in parsed.measurements:
        assert measurement.benchmark == STREAM_BENCHMARKS[both]
        assert measurement.unit == "MB/s" and measurement.direction is Direction.HIGHER
        params = measurement.parameters
        assert measurement.value > 0 and params["bytes"] > 0 and params["seconds"] > 0
        assert measurement.value == pytest.approx(1e-6 * params["bytes"] / params["seconds"], rel=1e-3)
        assert params["message_size"] == STREAM_MESSAGE and params["both"] is both
    # Both ends report the same counts: the server's own, and the client's sent back.
    served = served_lines(server_stdout)
    for measurement in parsed.measurements:
        line = next(line for line in served if line.startswith(f"served stream {measurement.parameters['direction']} "))
        assert int(line.split()[3]) == measurement.parameters["bytes"]


def test_a_corrupted_echo_fails_validation(kernel_env):
    port = free_port()
    server_stdout, client_stdout = run_pair(
        pingpong_serve_argv(port, wait=60, defines=["ODDNODE_TEST_CORRUPT_ECHO=3"]),
        pingpong_ping_argv("127.0.0.1", port, sizes=[0, 64], seconds_per_size=SECONDS_PER_SIZE),
        kernel_env,
    )
    client = parse_runner_output("client", client_stdout)
    assert client.returncode == 0  # the kernel ran; judging it is the parser's job
    last = client.stdout.rstrip().splitlines()[-1]
    # The server's 4th echo is the 4th round trip of the first size; its one byte is flipped.
    assert last.startswith("validation failed echo bad=1/")
    assert " size=0 round=3 offset=0 " in last
    parsed = parse_pingpong_run(client_stdout, "127.0.0.1")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    assert len(parsed.problems) == 1
    assert "echo check failed: 1 of " in parsed.problems[0] and "round 3" in parsed.problems[0]
    server = parse_runner_output("server", server_stdout)
    assert "# corrupt_echo: 3" in server.stdout and server.returncode == 0


def test_a_client_without_server_gives_up_after_its_wait(kernel_env):
    port = free_port()
    stdout = run_alone(pingpong_ping_argv("127.0.0.1", port, sizes=[1], wait=1), kernel_env)
    report = parse_runner_output("node2", stdout)
    assert report.returncode == 3
    assert f"no pingpong server at 127.0.0.1 port {port}: connection refused for 1 s" in report.stderr
    with pytest.raises(ParseError, match="pingpong kernel exited with status 3: error: no pingpong server"):
        parse_pingpong_run(stdout, "node2")


def test_a_server_without_client_exits_3_after_its_wait(kernel_env):
    port = free_port()
    report = parse_runner_output("node1", run_alone(pingpong_serve_argv(port, wait=1), kernel_env))
    assert report.returncode == 3
    assert f"no client connected to port {port} within 1 s" in report.stderr
    assert "# oddnode pingpong kernel v1" in report.stdout and f"# port: {port}" in report.stdout


def test_a_silent_partner_cannot_hang_the_client(kernel_env):
    """A listener that accepts and never answers: the client's read gives up
    after its I/O limit, with a message saying so."""
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    try:
        stdout = run_alone(pingpong_ping_argv("127.0.0.1", port, sizes=[1], wait=5, io_timeout=1), kernel_env)
    finally:
        thread.join(timeout=10)
        for connection in accepted:
            connection.close()
        listener.close()
    report = parse_runner_output("node2", stdout)
    assert report.returncode == 4
    assert "no progress for 1 s" in report.stderr and f"127.0.0.1 port {port}" in report.stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ([], "a mode is required"),
        (["listen", "-p", "5000"], "unknown mode 'listen'"),
        (["serve"], "-p PORT is required"),
        (["serve", "-p", "70000"], "-p wants a port"),
        (["ping", "-p", "5000"], "-H HOST is required"),
        (["ping", "-H", "localhost", "-p", "5000", "-s", "1,1"], "-s wants a comma list"),
        (["ping", "-H", "localhost", "-p", "5000", "-s", "1,,2"], "-s wants a comma list"),
        (["ping", "-H", "localhost", "-p", "5000", "--both"], "unknown option"),
        (["stream", "-H", "localhost", "-p", "5000", "-s", "4"], "-s wants a message size"),
        (["stream", "-H", "localhost", "-p", "5000", "-d", "0"], "-d wants seconds"),
        (["serve", "-p", "5000", "extra"], "unexpected argument 'extra'"),
    ],
)
def test_bad_arguments_exit_2(kernel_env, args, complaint):
    report = parse_runner_output("node1", run_alone(runner_argv("pingpong", args, ldlibs=["-lpthread"]), kernel_env))
    assert report.returncode == 2
    assert complaint in report.stderr and "usage:" in report.stderr
    assert report.stdout == ""


# --- the argv ----------------------------------------------------------------------


def test_python_side_refuses_bad_arguments():
    with pytest.raises(ValueError, match="port"):
        pingpong_serve_argv(0)
    with pytest.raises(ValueError, match="wait"):
        pingpong_serve_argv(5000, wait=-1)
    with pytest.raises(ValueError, match="host"):
        pingpong_ping_argv("-H", 5000)
    with pytest.raises(ValueError, match="distinct"):
        pingpong_ping_argv("n1", 5000, sizes=[1, 1])
    with pytest.raises(ValueError, match="message size"):
        pingpong_ping_argv("n1", 5000, sizes=[-1])
    with pytest.raises(ValueError, match="seconds_per_size"):
        pingpong_ping_argv("n1", 5000, seconds_per_size=0)
    with pytest.raises(ValueError, match="message_size"):
        pingpong_stream_argv("n1", 5000, message_size=4)
    with pytest.raises(ValueError, match="io_timeout"):
        pingpong_stream_argv("n1", 5000, io_timeout=0)


def test_runner_timeouts_cover_the_whole_run():
    import base64
    import json

    def job(argv: list[str]) -> dict:
        return decode_job(argv[-1])

    ping = job(pingpong_ping_argv("n1", 5000, wait=30, io_timeout=30))
    assert ping["kernel"] == "pingpong" and ping["ldlibs"] == ["-lpthread"]
    assert ping["args"][:5] == ["ping", "-H", "n1", "-p", "5000"]
    assert ping["args"][6] == ",".join(str(size) for size in DEFAULT_SIZES)
    assert ping["timeout"] >= 30 + ping_run_seconds() + 30
    # A 4 MiB round trip on a 100 Mbit/s link takes about 0.84 s; 26 of them fit.
    assert ping_run_seconds([4 << 20], 0.2) > 26 * 0.84
    serve = job(pingpong_serve_argv(5000, wait=60, session_seconds=100, io_timeout=10))
    assert serve["args"] == ["serve", "-p", "5000", "-w", "60", "-i", "10"]
    assert serve["timeout"] >= 60 + 100 + 10
    stream = job(pingpong_stream_argv("::1", 5000, seconds=2, both=True))
    assert stream["args"][-1] == "--both" and stream["timeout"] > 2 + 30


# --- parsing ------------------------------------------------------------------------


def test_parse_genuine_ping_output():
    parsed = parse_pingpong_output(GOOD_PING, "node1")
    assert parsed.valid
    latency = {m.metric: m for m in parsed.measurements if m.metric.startswith("latency.")}
    assert list(latency) == [f"latency.{size}" for size in SIZES]
    assert latency["latency.64"].value == pytest.approx(6.901)
    assert latency["latency.64"].parameters["median_us"] == pytest.approx(7.158)
    assert latency["latency.64"].parameters["repetitions"] == 1443
    assert latency["latency.64"].parameters["batches"] == 13
    bandwidth = next(m for m in parsed.measurements if m.metric == "bandwidth.65536")
    assert bandwidth.value == pytest.approx(65536 / 15.470)
    assert bandwidth.parameters["median_MBps"] == pytest.approx(65536 / 16.437)
    config = parsed.configuration
    assert config["echoes_checked"] == 5915 and config["min_batch_seconds"] == 0.001
    assert "warnings" not in config


def test_kernel_warnings_are_kept():
    warning = ("# warning: size 0: 2 of 10 timed batches lasted under 1000 timer ticks; "
               "round trips per batch raised from 1 to 4")
    parsed = parse_pingpong_output(GOOD_PING.replace("result 0 ", warning + "\nresult 0 "), "node1")
    assert parsed.valid and parsed.configuration["warnings"] == [warning[len("# warning: "):]]


def test_parse_genuine_stream_output():
    parsed = parse_stream_output(GOOD_STREAM, "node1")
    assert parsed.valid
    assert [(m.benchmark, m.metric, m.value) for m in parsed.measurements] == [
        ("tcp.stream_both", "bandwidth.client_to_server", 1958.855),
        ("tcp.stream_both", "bandwidth.server_to_client", 1623.306),
    ]
    one_way = GOOD_STREAM.replace("# directions: both (client_to_server and server_to_client at once)",
                                  "# directions: client_to_server").replace(
        "stream server_to_client 488701952 0.301053 1623.306\n", "")
    (measurement,) = parse_stream_output(one_way, "node1").measurements
    assert measurement.benchmark == "tcp.stream" and measurement.parameters["bytes"] == 587399168


def test_stream_validation_failure_is_kept_invalid():
    failed = GOOD_STREAM.replace(
        "validation ok", "validation failed client_to_server sent=587464704 received=587399168 bad_stamps=0")
    parsed = parse_stream_output(failed, "node1")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    assert "client to server" in parsed.problems[0] and "sent 587464704" in parsed.problems[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not oddnode pingpong kernel output"),
        ("Segmentation fault\n", "not oddnode pingpong kernel output"),
        ("\x00\xff garbage\n# oddnode\n", "not oddnode pingpong kernel output"),
        (GOOD_PING.replace("kernel v1", "kernel v9"), "unsupported kernel version"),
        (GOOD_PING.split("result 4096")[0], "no result line for 4096 bytes, 65536 bytes"),
        (GOOD_PING.replace("validation ok\n", ""), "no validation line"),
        (GOOD_PING.replace("result 64 1443 6.901", "result 64 1443 fast"), "expected a number"),
        (GOOD_PING.replace("result 64 1443 6.901 7.158 13", "result 64 1443 6.901"), "6 fields"),
        (GOOD_PING.replace("result 1 1456", "result 3 1456"), "sizes the header does not list"),
        (GOOD_PING.replace("validation ok", "validation maybe"), "unexpected line"),
        (GOOD_PING.replace("# sizes: 0,1,64,4096,65536\n", ""), "lacks 'sizes'"),
        (GOOD_PING.replace("# port: 6211", "# port 6211"), "malformed header line"),
        (GOOD_PING.replace("# mode: ping", "# mode: stream"), "found mode 'stream'"),
        (GOOD_PING.replace("result 0 1110 6.997 7.303", "result 0 1110 6.997 nan"), "finite number"),
        (GOOD_PING.replace("result 0 1110 6.997 7.303", "result 0 1110 7.303 6.997"), "implausible"),
    ],
)
def test_ping_parse_errors(text, message):
    with pytest.raises(ParseError, match=message) as caught:
        parse_pingpong_output(text, "node1")
    assert caught.value.source == "node1"


def test_ping_parse_errors_name_the_line():
    text = GOOD_PING.replace("result 64 1443 6.901", "result 64 1443 fast")
    with pytest.raises(ParseError) as caught:
        parse_pingpong_output(text, "node1")
    assert caught.value.line == text.splitlines().index("result 64 1443 fast 7.158 13") + 1
    assert str(caught.value).startswith(f"node1:{caught.value.line}: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD_STREAM.split("stream server_to_client")[0], "no stream line for server_to_client"),
        (GOOD_STREAM.replace("validation ok\n", ""), "no validation line"),
        (GOOD_STREAM.replace("stream client_to_server", "stream sideways"), "malformed stream line"),
        (GOOD_STREAM.replace("0.299869 1958.855", "0 0"), "implausible"),
        (GOOD_STREAM.replace("# mode: stream", "# mode: ping"), "read it with parse_pingpong_output"),
        (GOOD_STREAM.replace("# message_size: 65536\n", ""), "lacks 'message_size'"),
    ],
)
def test_stream_parse_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_stream_output(text, "node1")


def test_runner_report_errors_reach_the_wrappers():
    with pytest.raises(ParseError, match="no output from the kernel runner"):
        parse_pingpong_run("", "node1")
    with pytest.raises(ParseError, match="compile failed"):
        parse_stream_run('{"runner_version": 1, "error": "compile failed", "detail": "x.c:1: error"}', "node1")


# --- several rounds for one start of each end's runner ------------------------------


def test_a_schedule_runs_each_round_of_a_pair_at_its_start_and_reports_each(kernel_env):
    """Two rounds of one pair, each end's jobs one schedule: the client's
    rounds start at their moments, the server's each as soon as the one
    before it ended; each round's report comes back as its own run's."""
    ports = [free_port(), free_port()]
    first = time.time() + 2.0
    starts = [first, first + 1.5]
    client = scheduled_argv([(start, pingpong_ping_argv("127.0.0.1", port, sizes=[0, 64], seconds_per_size=0.05))
                             for start, port in zip(starts, ports)])
    server = scheduled_argv([(None, pingpong_serve_argv(port, wait=30)) for port in ports])
    assert len(remote_command(client).encode()) <= MAX_REMOTE_COMMAND  # one source for both rounds
    server_stdout, client_stdout = run_pair(server, client, kernel_env)
    clients = schedule_results(NodeResult("node2", NodeStatus.OK, client_stdout, "", 0, 1.0), 2)
    servers = schedule_results(NodeResult("node1", NodeStatus.OK, server_stdout, "", 0, 1.0), 2)
    for start, port, client_run, server_run in zip(starts, ports, clients, servers):
        parsed = parse_pingpong_run(client_run.stdout, "node2")
        assert parsed.valid and parsed.configuration["port"] == port
        timing = start_timing(client_run.stdout)
        assert timing.start_at == pytest.approx(start, abs=1e-3) and timing.arrived < start < timing.finished
        assert served_lines(server_run.stdout)[-1].startswith("served echoes ")
    # The second round began after the first ended; the client started once.
    first_run, second_run = (start_timing(run.stdout) for run in clients)
    assert first_run.finished <= second_run.start_at and first_run.launched == second_run.launched


def test_a_failed_job_of_a_schedule_does_not_stop_the_next(kernel_env):
    port = free_port()
    stdout = run_alone(scheduled_argv([(None, pingpong_serve_argv(port, wait=1)),
                                       (None, pingpong_ping_argv("127.0.0.1", port, sizes=[1], wait=1))]), kernel_env)
    served, pinged = schedule_results(NodeResult("node1", NodeStatus.OK, stdout, "", 0, 1.0), 2)
    assert parse_runner_output("node1", served.stdout).returncode == 3  # nobody came
    assert parse_runner_output("node1", pinged.stdout).returncode == 3  # nobody served


def test_a_schedule_with_a_bad_job_reports_it_in_that_job_alone(kernel_env):
    bad = runner_job({"kernel": "../pingpong", "source": "", "args": []})
    port = free_port()
    stdout = run_alone(scheduled_argv([(None, bad), (None, pingpong_serve_argv(port, wait=1))]), kernel_env)
    wrong, served = schedule_results(NodeResult("node1", NodeStatus.OK, stdout, "", 0, 1.0), 2)
    with pytest.raises(ParseError, match=r"bad spec:\s+kernel name '\.\./pingpong' is not a plain file name"):
        parse_runner_output("node1", wrong.stdout)
    assert parse_runner_output("node1", served.stdout).returncode == 3
