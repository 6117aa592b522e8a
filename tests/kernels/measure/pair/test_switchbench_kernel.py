"""Switchbench's kernels built and run for real on loopback through the node
runner (the argv a transport would send): a stream and a ping through a chain
of relays, end to end checked; an all-to-all of four ranks on distinct
ports, every phase accounted for and its data checked; corrupted data
caught; a rank or a hop that never comes fails the others clearly and in
bounded time; bad arguments exit 2; the parsers on genuine and broken
output.  No timing is asserted."""

from __future__ import annotations

import json
from contextlib import ExitStack

import pytest

from oddnode.measure.pair.pingpong import (
    RELAY_BENCHMARK,
    parse_pingpong_run,
    parse_relay_output,
    parse_relay_run,
    parse_stream_run,
    pingpong_ping_argv,
    pingpong_relay_argv,
    pingpong_serve_argv,
    pingpong_stream_argv,
)
from oddnode.measure.pair.switchbench import (
    ALLTOALL_BENCHMARK,
    PhaseLine,
    alltoall_argv,
    alltoall_phases,
    alltoall_run_seconds,
    parse_alltoall_output,
    parse_alltoall_run,
)
from oddnode.reach.jobs import PREPARE_OPTION, decode_job, parse_runner_output, runner_argv, with_runner_options
from oddnode.parsers.base import ParseError
from support.kernels import HAS_IPV6, finish, free_port, kernel_env, run_alone, started  # noqa: F401
from support.outputs import GOOD_ALLTOALL, GOOD_RELAY

MESSAGE = 65536
STREAM_SECONDS = 0.3


def job(argv: list[str]) -> dict:
    return decode_job(argv[-1])


def run_all(argvs: list[list[str]], env: dict[str, str]) -> list[str]:
    """Every argv started at the same moment; their runners' stdout, in order."""
    with ExitStack() as stack:
        processes = [stack.enter_context(started(argv, env)) for argv in argvs]
        return [finish(process) for process in processes]


def kernel_report(stdout: str, source: str = "node"):
    return parse_runner_output(source, stdout)


@pytest.fixture(scope="module")
def built(kernel_env):
    """Both kernels built once, so that concurrent ends find them cached."""
    for argv in (pingpong_serve_argv(free_port()), alltoall_argv(0, [("127.0.0.1", 1), ("127.0.0.1", 2)])):
        report = json.loads(run_alone(with_runner_options(argv, PREPARE_OPTION), kernel_env))
        assert report.get("prepared") is True, report
    return kernel_env


# --- the daisy chain: relays ------------------------------------------------------------


def test_a_stream_through_a_chain_of_three_is_checked_end_to_end(built):
    source_port, sink_port = free_port(), free_port()
    serve, relay, stream = run_all([
        pingpong_serve_argv(sink_port, wait=60),
        pingpong_relay_argv(source_port, "127.0.0.1", sink_port, wait=60),
        pingpong_stream_argv("127.0.0.1", source_port, message_size=MESSAGE, seconds=STREAM_SECONDS),
    ], built)
    parsed = parse_stream_run(stream, "node1")
    assert parsed.valid and parsed.problems == []
    (measurement,) = parsed.measurements
    assert measurement.value > 0 and measurement.parameters["bytes"] > 0
    # The relay forwarded every byte the source sent (and its control records);
    # the way back carried the server's records only.
    hop = parse_relay_run(relay, "node2")
    forward = {m.parameters["direction"]: m for m in hop.measurements}
    assert all(m.benchmark == RELAY_BENCHMARK and m.unit == "MB/s" for m in hop.measurements)
    sent = int(kernel_report(stream).stdout.split("# sent_client_to_server: ")[1].split()[0])
    assert forward["upstream_to_downstream"].parameters["bytes"] > sent
    assert 0 < forward["downstream_to_upstream"].parameters["bytes"] < 4096
    assert hop.configuration["next"] == "127.0.0.1" and hop.configuration["next_port"] == sink_port
    assert hop.configuration["upstream"].startswith("127.0.0.1:")
    served = kernel_report(serve)
    assert served.returncode == 0
    line = next(line for line in served.stdout.splitlines() if line.startswith("served stream client_to_server "))
    assert int(line.split()[3]) == measurement.parameters["bytes"]


def test_a_ping_through_two_relays_is_echoed_unchanged(built):
    ports = [free_port() for _ in range(3)]
    host = "::1" if HAS_IPV6 else "127.0.0.1"
    serve, first, second, ping = run_all([
        pingpong_serve_argv(ports[2], wait=60),
        pingpong_relay_argv(ports[0], "127.0.0.1", ports[1], wait=60),
        pingpong_relay_argv(ports[1], host, ports[2], wait=60),
        pingpong_ping_argv("127.0.0.1", ports[0], sizes=[0, 1, 4096, 65536], seconds_per_size=0.02),
    ], built)
    parsed = parse_pingpong_run(ping, "node1")
    assert parsed.valid and parsed.configuration["echoes_checked"] > 0
    for relay in (first, second):
        both = {m.parameters["direction"]: m.parameters["bytes"] for m in parse_relay_run(relay, "r").measurements}
        # Every echo comes back as it went: the two ways carry the same payload.
        assert both["upstream_to_downstream"] > 0 and both["downstream_to_upstream"] > 0
    assert kernel_report(serve).returncode == 0


def test_a_relay_whose_next_hop_never_listens_gives_up_after_its_wait(built):
    port, nowhere = free_port(), free_port()
    stdout = run_alone(pingpong_relay_argv(port, "127.0.0.1", nowhere, wait=1), built)
    report = kernel_report(stdout)
    assert report.returncode == 3
    assert f"no pingpong server at 127.0.0.1 port {nowhere}" in report.stderr
    with pytest.raises(ParseError, match="pingpong kernel exited with status 3"):
        parse_relay_run(stdout, "node2")


def test_a_relay_whose_upstream_never_comes_gives_up_and_the_server_sees_why(built):
    port, sink = free_port(), free_port()
    serve, relay = run_all([pingpong_serve_argv(sink, wait=30), pingpong_relay_argv(port, "127.0.0.1", sink, wait=1)],
                           built)
    relayed = kernel_report(relay)
    assert relayed.returncode == 3 and f"no upstream node connected to port {port} within 1 s" in relayed.stderr
    # The server got the relay's connection, which closed before any request.
    served = kernel_report(serve)
    assert served.returncode == 4 and "closed the connection without saying goodbye" in served.stderr


# --- the all-to-all -------------------------------------------------------------------------


def ranks_on_loopback(count: int) -> list[tuple[str, int]]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return [("127.0.0.1", port) for port in sorted(ports)]


def test_an_alltoall_of_four_ranks_runs_every_phase_and_checks_its_data(built):
    addresses = ranks_on_loopback(4)
    outputs = run_all([alltoall_argv(rank, addresses, message_size=MESSAGE, seed=7) for rank in range(4)], built)
    parsed = [parse_alltoall_run(stdout, f"rank{rank}") for rank, stdout in enumerate(outputs)]
    for rank, run in enumerate(parsed):
        assert run.valid and run.problems == [], run.problems
        config = run.configuration
        assert config["rank"] == rank and config["ranks"] == 4 and config["message_size"] == MESSAGE
        assert config["port"] == addresses[rank][1] and config["seed"] == 7 and config["warmup_passes"] == 1
        # One warm-up pass and the timed pass, 3 messages each, every one checked.
        assert config["messages_checked"] == 6
        lines = config["phase_lines"]
        assert [line.phase for line in lines] == [1, 2, 3]
        assert [(line.to_rank, line.from_rank) for line in lines] == [((rank + i) % 4, (rank - i) % 4)
                                                                      for i in (1, 2, 3)]
        assert all(line.bytes_sent == line.bytes_received == MESSAGE for line in lines)
        assert all(line.receive_seconds > 0 and line.receive_MBps > 0 for line in lines)
        assert config["total_seconds"] > 0
        assert [m.metric for m in run.measurements] == ["bandwidth.send", "bandwidth.receive"]
        assert all(m.benchmark == ALLTOALL_BENCHMARK and m.unit == "MB/s" and m.value > 0 for m in run.measurements)
    # What rank r receives in phase i, rank r-i sent in phase i.
    for rank, run in enumerate(parsed):
        for line in run.configuration["phase_lines"]:
            sender = parsed[line.from_rank].configuration["phase_lines"][line.phase - 1]
            assert sender.to_rank == rank
    nodes = [f"node{rank}" for rank in range(4)]
    phases, total, aggregate = alltoall_phases(
        nodes, {node: run.configuration["phase_lines"] for node, run in zip(nodes, parsed)},
        {node: run.configuration["total_seconds"] for node, run in zip(nodes, parsed)})
    assert [phase.phase for phase in phases] == [1, 2, 3]
    assert total == max(run.configuration["total_seconds"] for run in parsed)
    assert aggregate == pytest.approx(1e-6 * 4 * 3 * MESSAGE / total)


@pytest.mark.parametrize("host", ["127.0.0.1"] + (["::1"] if HAS_IPV6 else []))
def test_two_ranks_share_one_connection_both_ways(built, host):
    addresses = [(host, port) for _, port in ranks_on_loopback(2)]
    outputs = run_all([alltoall_argv(rank, addresses, message_size=1000, warmup_passes=0) for rank in range(2)],
                      built)
    for rank, stdout in enumerate(outputs):
        run = parse_alltoall_run(stdout, f"rank{rank}")
        assert run.valid and run.configuration["messages_checked"] == 1
        (line,) = run.configuration["phase_lines"]
        assert line.to_rank == line.from_rank == 1 - rank


def test_corrupted_data_fails_the_receivers_check_only(built):
    addresses = ranks_on_loopback(4)
    # Rank 1 flips a byte of what it sends in timed phase 2: to rank 3.
    argvs = [alltoall_argv(rank, addresses, message_size=4096,
                           defines=["ODDNODE_TEST_CORRUPT_PHASE=2"] if rank == 1 else [])
             for rank in range(4)]
    parsed = [parse_alltoall_run(stdout, f"rank{rank}") for rank, stdout in enumerate(run_all(argvs, built))]
    assert [run.valid for run in parsed] == [True, True, True, False]
    assert "pass=1 phase=2 from=1 offset=2048 " in parsed[3].configuration["validation_failed"]
    assert "phase 2 from rank 1, byte offset 2048" in parsed[3].problems[0]
    assert all(not m.valid for m in parsed[3].measurements)


def test_a_rank_that_never_starts_fails_the_others_clearly(built):
    addresses = ranks_on_loopback(4)
    outputs = run_all([alltoall_argv(rank, addresses, message_size=4096, wait=2, io_timeout=5)
                       for rank in (0, 1, 3)], built)
    missing = f"rank 2 (127.0.0.1:{addresses[2][1]})"
    for rank, stdout in zip((0, 1, 3), outputs):
        report = kernel_report(stdout)
        assert report.returncode == 3, report.stderr
        assert report.stderr.startswith(f"error: rank {rank}: ") and missing in report.stderr
        with pytest.raises(ParseError, match="alltoall kernel exited with status 3"):
            parse_alltoall_run(stdout, f"rank{rank}")
    # The lower ranks waited for it to connect; the higher one for it to listen.
    assert "never connected within 2 s" in kernel_report(outputs[0]).stderr
    assert "refused every connection for 2 s" in kernel_report(outputs[2]).stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ([], "-R HOST:PORT,... is required"),
        (["-R", "127.0.0.1:5000,127.0.0.1:5001"], "-r RANK is required"),
        (["-r", "2", "-R", "127.0.0.1:5000,127.0.0.1:5001"], "-r 2 is not a rank of the 2 listed"),
        (["-r", "0", "-R", "127.0.0.1:5000"], "at least 2"),
        (["-r", "0", "-R", "127.0.0.1:5000,::1:5001"], "-R entry 2 is not HOST:PORT"),
        (["-r", "0", "-R", "127.0.0.1:5000,host:0"], "-R entry 2"),
        (["-r", "0", "-R", "a:1,b:2", "-s", "0"], "-s wants bytes per message"),
        (["-r", "0", "-R", "a:1,b:2", "-W", "-1"], "-W wants untimed passes"),
        (["-r", "0", "-R", "a:1,b:2", "-S", "-3"], "-S wants a whole number seed"),
        (["-r", "0", "-R", "a:1,b:2", "-x"], "unknown option"),
        (["-r", "0", "-R", "a:1,b:2", "extra"], "unexpected argument 'extra'"),
    ],
)
def test_alltoall_bad_arguments_exit_2(built, args, complaint):
    report = kernel_report(run_alone(runner_argv("alltoall", args), built))
    assert report.returncode == 2
    assert complaint in report.stderr and "usage:" in report.stderr
    assert report.stdout == ""


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["relay", "-p", "5000", "-H", "localhost"], "-P NEXT_PORT is required for relay"),
        (["relay", "-p", "5000", "-P", "5001"], "-H HOST is required for relay"),
        (["relay", "-p", "5000", "-H", "localhost", "-P", "0"], "-P wants the next hop's port"),
        (["relay", "-p", "5000", "-H", "localhost", "-P", "5001", "--both"], "unknown option"),
        (["serve", "-p", "5000", "-P", "5001"], "unknown option"),
    ],
)
def test_relay_bad_arguments_exit_2(built, args, complaint):
    report = kernel_report(run_alone(runner_argv("pingpong", args, ldlibs=["-lpthread"]), built))
    assert report.returncode == 2
    assert complaint in report.stderr and "usage:" in report.stderr


# --- the argv ---------------------------------------------------------------------------


def test_python_side_refuses_bad_arguments():
    two = [("n1", 5000), ("n2", 5000)]
    with pytest.raises(ValueError, match="2 to 4096 ranks"):
        alltoall_argv(0, two[:1])
    with pytest.raises(ValueError, match="same address"):
        alltoall_argv(0, [("n1", 5000), ("n1", 5000)])
    with pytest.raises(ValueError, match="rank must be 0 to 1"):
        alltoall_argv(2, two)
    with pytest.raises(ValueError, match="message_size"):
        alltoall_argv(0, two, message_size=0)
    with pytest.raises(ValueError, match="seed"):
        alltoall_argv(0, two, seed=-1)
    with pytest.raises(ValueError, match="warmup_passes"):
        alltoall_argv(0, two, warmup_passes=101)
    with pytest.raises(ValueError, match="host"):
        alltoall_argv(0, [("-n1", 5000), ("n2", 5000)])
    with pytest.raises(ValueError, match="port"):
        pingpong_relay_argv(5000, "n2", 70000)
    with pytest.raises(ValueError, match="host"):
        pingpong_relay_argv(5000, "", 5001)


def test_argv_carry_every_setting_and_bound_the_run():
    argv = alltoall_argv(1, [("node1", 29171), ("fe80::1", 29171), ("node3", 29171)], message_size=4096, seed=9,
                         warmup_passes=2, wait=10, io_timeout=7)
    spec = job(argv)
    assert spec["kernel"] == "alltoall"
    assert spec["args"] == ["-r", "1", "-R", "node1:29171,[fe80::1]:29171,node3:29171", "-s", "4096", "-S", "9",
                            "-W", "2", "-w", "10", "-i", "7"]
    assert spec["timeout"] >= 10 + alltoall_run_seconds(3, 4096, 2) + 7
    # 3 passes of 2 phases of 4 MiB at 10^7 B/s need at least 2.5 s.
    assert alltoall_run_seconds(3, 4 << 20, 2) > 6 * (4 << 20) / 1e7
    relay = job(pingpong_relay_argv(5000, "node3", 5001, wait=20, session_seconds=40, io_timeout=9))
    assert relay["kernel"] == "pingpong" and relay["ldlibs"] == ["-lpthread"]
    assert relay["args"] == ["relay", "-p", "5000", "-H", "node3", "-P", "5001", "-w", "20", "-i", "9"]
    assert relay["timeout"] >= 20 + 40 + 9


# --- parsing ------------------------------------------------------------------------------


def test_parse_genuine_alltoall_output():
    parsed = parse_alltoall_output(GOOD_ALLTOALL, "node2")
    assert parsed.valid and parsed.tool == "oddnode-alltoall"
    lines = parsed.configuration["phase_lines"]
    assert lines[0] == PhaseLine(1, 2, 0, 100000, 0.000019, 5263.158, 100000, 0.00004, 2500.0)
    send, receive = parsed.measurements
    assert send.metric == "bandwidth.send" and send.value == pytest.approx(1e-6 * 200000 / 0.000032)
    assert receive.value == pytest.approx(1e-6 * 200000 / 0.00009)
    assert receive.parameters["min_phase_MBps"] == 2000.0 and receive.parameters["rank"] == 1
    assert parsed.configuration["total_seconds"] == 0.002175


def test_alltoall_validation_failure_is_kept_invalid():
    failed = GOOD_ALLTOALL.replace("validation ok", "validation failed data bad=1/4 pass=1 phase=2 from=2 "
                                                    "offset=50000 expected=0x1f got=0xe0")
    parsed = parse_alltoall_output(failed, "node2")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    assert "phase 2 from rank 2, byte offset 50000: expected 0x1f, got 0xe0" in parsed.problems[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not oddnode alltoall kernel output"),
        (GOOD_ALLTOALL.replace("kernel v1", "kernel v2"), "unsupported kernel version"),
        (GOOD_ALLTOALL.split("phase 2 ")[0], "no line for phase 2"),
        (GOOD_ALLTOALL.replace("total 0.002175 200000 200000\n", ""), "no total line"),
        (GOOD_ALLTOALL.replace("validation ok\n", ""), "no validation line"),
        (GOOD_ALLTOALL.replace("phase 1 2 0", "phase 1 0 2"), "goes to 0 and comes from 2"),
        (GOOD_ALLTOALL.replace("phase 2 0 2", "phase 1 0 2"), "phase 1 repeated"),
        (GOOD_ALLTOALL.replace("phase 1 2 0 100000", "phase 1 2 0 99999"), "implausible phase line"),
        (GOOD_ALLTOALL.replace(" 0.000040000 ", " 0.000000000 "), "implausible phase line"),
        (GOOD_ALLTOALL.replace(" 2500.000", ""), "10 fields"),
        (GOOD_ALLTOALL.replace("# ranks: 3\n", ""), "lacks 'ranks'"),
        (GOOD_ALLTOALL.replace("# rank: 1", "# rank: 3"), "rank 3 of 3 ranks"),
        (GOOD_ALLTOALL.replace("validation ok", "validation perhaps"), "unexpected line"),
    ],
)
def test_alltoall_parse_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_alltoall_output(text, "node2")


def test_parse_genuine_relay_output():
    parsed = parse_relay_output(GOOD_RELAY, "node2")
    assert parsed.valid
    assert [(m.metric, m.value, m.parameters["bytes"]) for m in parsed.measurements] == [
        ("bandwidth.upstream_to_downstream", 1363.406, 683933848),
        ("bandwidth.downstream_to_upstream", 0.0, 192),
    ]
    assert parsed.configuration["relay_buffer_bytes"] == 4194304


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD_RELAY.split("relayed downstream")[0], "no relayed line for downstream_to_upstream"),
        (GOOD_RELAY.replace("relayed upstream_to_downstream", "relayed sideways"), "malformed relayed line"),
        (GOOD_RELAY.replace("# mode: relay", "# mode: stream"), "read it with parse_stream_output"),
        (GOOD_RELAY.replace("# session: both ends closed", "served echoes 0 0"), "unexpected line"),
    ],
)
def test_relay_parse_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_relay_output(text, "node2")
