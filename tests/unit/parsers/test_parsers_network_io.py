"""The IMB, OSU, fio, iperf3 and NetPIPE parsers on real, unedited tool output
(tests/fixtures/README.md says how each file was made)."""

from __future__ import annotations


import pytest

from oddnode.core.model import Direction
from oddnode.parsers import ParsedOutput, ParseError, get_parser, parsers
from support.cli import FIXTURES

TOOLS = ("imb", "osu", "fio", "iperf3", "netpipe")


def parse(tool: str, relative: str) -> ParsedOutput:
    path = FIXTURES / relative
    return get_parser(tool)(path.read_text(encoding="utf-8"), str(path))


def series(output: ParsedOutput) -> dict[tuple[str, str], float]:
    """(benchmark, metric) -> value; fails on a duplicate pair."""
    found: dict[tuple[str, str], float] = {}
    for m in output.measurements:
        key = (m.benchmark, m.metric)
        assert key not in found, f"duplicate series {key}"
        found[key] = m.value
    return found


def one(output: ParsedOutput, benchmark: str, metric: str):
    matches = [m for m in output.measurements if m.benchmark == benchmark and m.metric == metric]
    assert len(matches) == 1, (benchmark, metric, len(matches))
    return matches[0]


def sizes(output: ParsedOutput, benchmark: str, stem: str) -> list[int]:
    return [int(m.metric.split(".")[1]) for m in output.measurements
            if m.benchmark == benchmark and m.metric.split(".")[0] == stem]


def test_parsers_are_registered():
    assert set(TOOLS) <= set(parsers())


# ---------------------------------------------------------------- IMB


def test_imb_pingpong():
    out = parse("imb", "imb/IMB-MPI1_PingPong.out")
    assert out.valid and out.problems == []
    assert out.configuration["version"] == "2021.11"
    assert out.configuration["calling_sequence"] == "./IMB-MPI1 PingPong -msglog 0:22 -time 1"
    assert {m.benchmark for m in out.measurements} == {"imb.pingpong"}
    latency_sizes = sizes(out, "imb.pingpong", "latency")
    assert latency_sizes == [0] + [2**k for k in range(23)]  # 24 rows, 0 .. 4194304
    # a rate over 0 bytes is not a measurement
    assert sizes(out, "imb.pingpong", "bandwidth") == [2**k for k in range(23)]
    first = one(out, "imb.pingpong", "latency.0")
    assert (first.value, first.unit, first.direction) == (0.12, "us", Direction.LOWER)
    assert first.parameters == {"processes": 2, "bytes": 0, "repetitions": 1000, "source_unit": "usec"}
    assert one(out, "imb.pingpong", "latency.4096").value == 2.64
    last = one(out, "imb.pingpong", "bandwidth.4194304")
    assert (last.value, last.unit, last.direction) == (10219.55, "MB/s", Direction.HIGHER)
    assert last.parameters["repetitions"] == 10
    # IMB's Mbytes/sec is 10^6 B/s: bytes / t[usec] reproduces it
    assert 4194304 / one(out, "imb.pingpong", "latency.4194304").value == pytest.approx(last.value, rel=1e-5)
    assert one(out, "imb.pingpong", "bandwidth.1").value == 7.52


def test_imb_sendrecv_has_times_and_bandwidth():
    out = parse("imb", "imb/IMB-MPI1_Sendrecv_np2.out")
    assert out.valid
    values = series(out)
    assert len(values) == 24 * 3 + 23
    assert {b for b, _ in values} == {"imb.sendrecv.np2"}
    assert {m.split(".")[0] for _, m in values} == {"t_min", "t_max", "t_avg", "bandwidth"}
    assert all(m.direction is Direction.LOWER for m in out.measurements if m.metric.startswith("t_"))
    np4 = parse("imb", "imb/IMB-MPI1_Sendrecv_np4.out")
    assert {m.benchmark for m in np4.measurements} == {"imb.sendrecv.np4"}
    assert len(np4.measurements) == 95


def test_imb_multi_benchmark_with_waiting_processes():
    out = parse("imb", "imb/IMB-MPI1_Sendrecv_Alltoall_Allreduce_Barrier_np4.out")
    assert out.valid
    values = series(out)
    assert {b for b, _ in values} == {
        f"imb.{name}.np{n}" for name in ("sendrecv", "alltoall", "allreduce", "barrier") for n in (2, 4)}
    assert values[("imb.sendrecv.np2", "t_avg.0")] == 2.77
    assert values[("imb.sendrecv.np2", "bandwidth.4194304")] == 11298.21
    # Sendrecv counts the bytes both ways: 2 * bytes / t_max
    assert 2 * 4194304 / values[("imb.sendrecv.np2", "t_max.4194304")] == pytest.approx(11298.21, rel=1e-5)
    assert values[("imb.sendrecv.np4", "t_max.4194304")] == 1087.89
    assert values[("imb.alltoall.np2", "t_avg.1")] == 1.68
    assert values[("imb.alltoall.np4", "t_min.4194304")] == 3231.90
    # Allreduce of MPI_FLOAT starts at 4 bytes after 0
    assert sizes(out, "imb.allreduce.np4", "t_avg") == [0] + [2**k for k in range(2, 23)]
    assert values[("imb.allreduce.np4", "t_avg.1048576")] == 368.17
    assert values[("imb.barrier.np2", "t_avg")] == 1.54
    assert values[("imb.barrier.np4", "t_max")] == 3.09
    waiting = one(out, "imb.alltoall.np2", "t_avg.0")
    assert waiting.parameters["processes"] == 2 and waiting.parameters["waiting_processes"] == 2
    assert "waiting_processes" not in one(out, "imb.alltoall.np4", "t_avg.0").parameters
    assert not any(m.metric.startswith("bandwidth") for m in out.measurements if "alltoall" in m.benchmark)


@pytest.mark.parametrize("name, benchmark, count, probe, value", [
    ("IMB-MPI1_Alltoall_np2.out", "imb.alltoall.np2", 72, "t_avg.4194304", 790.25),
    ("IMB-MPI1_Alltoall_np4.out", "imb.alltoall.np4", 72, "t_avg.0", 0.03),
    ("IMB-MPI1_Allreduce_np4.out", "imb.allreduce.np4", 66, "t_min.4", None),
    ("IMB-MPI1_Barrier_np4.out", "imb.barrier.np4", 3, "t_avg", 4.63),
])
def test_imb_single_collectives(name, benchmark, count, probe, value):
    out = parse("imb", f"imb/{name}")
    assert out.valid
    assert {m.benchmark for m in out.measurements} == {benchmark}
    assert len(series(out)) == count
    measurement = one(out, benchmark, probe)
    assert measurement.unit == "us" and measurement.direction is Direction.LOWER
    if value is not None:
        assert measurement.value == value


def test_imb_invalid_for_one_process_is_a_failed_run():
    out = parse("imb", "imb/IMB-MPI1_PingPong_np1_invalid.out")
    assert not out.valid
    assert out.measurements == []
    assert out.problems == ["IMB: Benchmark PingPong invalid for 1 processes"]


def test_imb_truncated_mid_row_and_after_rows():
    text = (FIXTURES / "imb/IMB-MPI1_PingPong.out").read_text()
    cut = text.index("       158.71")  # inside the 2097152-byte row
    with pytest.raises(ParseError, match=r"x\.out:\d+: .*truncated"):
        get_parser("imb")(text[:cut], "x.out")
    at_row_end = text[:text.index("      4194304")]  # whole rows only, no MPI_Finalize line
    out = get_parser("imb")(at_row_end, "x.out")
    assert not out.valid and "did not finish" in out.problems[0]
    assert len(out.measurements) == 47 - 2


def test_imb_header_only_has_no_numbers():
    text = (FIXTURES / "imb/IMB-MPI1_PingPong.out").read_text()
    header = text[:text.index("# List of Benchmarks")]
    out = get_parser("imb")(header, "x.out")
    assert not out.valid and out.measurements == []  # recorded as a failed run, never as a valid empty one


# ---------------------------------------------------------------- OSU


def test_osu_latency():
    out = parse("osu", "osu/osu_latency.out")
    assert out.valid
    assert out.configuration["version"] == "5.3" and out.configuration["test"] == "latency"
    assert sizes(out, "osu.latency", "latency") == [0] + [2**k for k in range(23)]
    first = one(out, "osu.latency", "latency.0")
    assert (first.value, first.unit, first.direction) == (0.12, "us", Direction.LOWER)
    assert one(out, "osu.latency", "latency.4096").value == 2.10
    assert one(out, "osu.latency", "latency.4194304").value == 390.85


@pytest.mark.parametrize("name, benchmark, first, last", [
    ("osu_bw.out", "osu.bw", 21.37, 11388.46),
    ("osu_bibw.out", "osu.bibw", 27.18, 19508.60),
])
def test_osu_bandwidths(name, benchmark, first, last):
    out = parse("osu", f"osu/{name}")
    assert out.valid
    assert sizes(out, benchmark, "bandwidth") == [2**k for k in range(23)]
    low, high = one(out, benchmark, "bandwidth.1"), one(out, benchmark, "bandwidth.4194304")
    assert (low.value, high.value) == (first, last)
    assert high.unit == "MB/s" and high.direction is Direction.HIGHER
    assert high.parameters["source_unit"] == "MB/s (10^6 B/s)"


def test_osu_collectives():
    allreduce = parse("osu", "osu/osu_allreduce_np4.out")
    assert allreduce.configuration["test"] == "allreduce"
    assert sizes(allreduce, "osu.allreduce", "latency") == [2**k for k in range(2, 21)]
    assert one(allreduce, "osu.allreduce", "latency.4").value == 4.07
    assert one(allreduce, "osu.allreduce", "latency.1048576").value == 342.61
    for name, first, last in (("osu_alltoall_np2.out", 0.21, 112.23), ("osu_alltoall_np4.out", 3.79, 938.92)):
        out = parse("osu", f"osu/{name}")
        assert len(series(out)) == 21
        assert one(out, "osu.alltoall", "latency.1").value == first
        assert one(out, "osu.alltoall", "latency.1048576").value == last
    barrier = parse("osu", "osu/osu_barrier_np4.out")
    assert series(barrier) == {("osu.barrier", "latency"): 4.22}


def test_osu_full_format():
    out = parse("osu", "osu/osu_allreduce_np4_full.out")
    assert out.valid
    assert len(series(out)) == 19 * 3
    assert one(out, "osu.allreduce", "latency.4").value == 4.01
    assert one(out, "osu.allreduce", "latency_min.4").value == 0.28
    assert one(out, "osu.allreduce", "latency_max.4").value == 5.94
    big = one(out, "osu.allreduce", "latency_max.1048576")
    assert big.value == 343.17 and big.parameters["iterations"] == 100 and big.parameters["bytes"] == 1048576
    assert one(out, "osu.allreduce", "latency.4").parameters["iterations"] == 1000


def test_osu_wrong_process_count_is_a_failed_run():
    out = parse("osu", "osu/osu_latency_np3_error.out")
    assert not out.valid and out.measurements == []
    assert out.problems[0] == "OSU: This test requires exactly two processes"
    assert "exited abnormally" in out.problems[1]


def test_osu_truncated_row():
    text = (FIXTURES / "osu/osu_allreduce_np4_full.out").read_text()
    with pytest.raises(ParseError, match=r"y\.out:\d+: .*truncated"):
        get_parser("osu")(text[:text.index("  100\n", text.index("131072"))], "y.out")
    header_only = text[:text.index("4    ")]
    out = get_parser("osu")(header_only, "y.out")
    assert not out.valid and out.measurements == []


# ---------------------------------------------------------------- fio


def test_fio_randread_json():
    out = parse("fio", "fio/randread.json")
    assert out.valid and out.configuration["version"] == "fio-3.33"
    values = series(out)
    assert set(values) == {("fio.randread", m) for m in
                           ("read.bandwidth", "read.iops", "read.lat_mean", "read.clat_p99")}
    bandwidth = one(out, "fio.randread", "read.bandwidth")
    assert bandwidth.value == pytest.approx(301.634025)  # bw_bytes 301634025 B/s
    assert bandwidth.value == pytest.approx(294564 * 1024 / 1e6, rel=1e-5)  # fio's "bw" in KiB/s
    assert (bandwidth.unit, bandwidth.direction) == ("MB/s", Direction.HIGHER)
    assert bandwidth.parameters == {"rw": "randread", "bs": "4k", "iodepth": "16", "numjobs": "1",
                                    "runtime": "3", "ioengine": "libaio", "size": "64M", "direct": "1",
                                    "source_unit": "B/s (bw_bytes)"}
    iops = one(out, "fio.randread", "read.iops")
    assert (iops.value, iops.unit) == (73641.119627, "IOPS")
    latency = one(out, "fio.randread", "read.lat_mean")
    assert latency.value == pytest.approx(216.960146341)  # lat_ns mean / 1000
    assert (latency.unit, latency.direction) == ("us", Direction.LOWER)
    assert values[("fio.randread", "read.clat_p99")] == pytest.approx(284.672)


def test_fio_write_and_mixed():
    write = series(parse("fio", "fio/seqwrite.json"))
    assert set(write) == {("fio.seqwrite", m) for m in
                          ("write.bandwidth", "write.iops", "write.lat_mean", "write.clat_p99")}
    assert write[("fio.seqwrite", "write.bandwidth")] == pytest.approx(3702.500199)
    assert write[("fio.seqwrite", "write.iops")] == 3530.979347
    assert write[("fio.seqwrite", "write.lat_mean")] == pytest.approx(1131.447804906)
    assert write[("fio.seqwrite", "write.clat_p99")] == pytest.approx(1400.832)
    mixed = parse("fio", "fio/randrw70.json")
    values = series(mixed)
    assert len(values) == 8
    assert values[("fio.randrw", "read.bandwidth")] == pytest.approx(148.947812)
    assert values[("fio.randrw", "write.bandwidth")] == pytest.approx(63.741184)
    assert values[("fio.randrw", "read.iops")] == 36364.211929
    assert values[("fio.randrw", "write.lat_mean")] == pytest.approx(169.512910559)
    assert values[("fio.randrw", "write.clat_p99")] == pytest.approx(276.48)
    assert one(mixed, "fio.randrw", "read.iops").parameters["rwmixread"] == "70"


@pytest.mark.parametrize("name", ["randread.txt", "seqwrite.txt", "seqread_2jobs_group_reporting.txt"])
def test_fio_text_output_is_refused_with_the_remedy(name):
    with pytest.raises(ParseError, match=rf"{name}: .*--output-format=json"):
        parse("fio", f"fio/{name}")


def test_fio_job_error_and_warnings_before_json():
    text = (FIXTURES / "fio/randread.json").read_text()
    failed = get_parser("fio")(text.replace('"error" : 0', '"error" : 5', 1), "f.json")
    assert not failed.valid and failed.problems[0].startswith("fio job 'randread' ended with error 5")
    assert failed.measurements and not any(m.valid for m in failed.measurements)
    warned = get_parser("fio")("fio: this platform does not support process shared mutexes\n" + text, "f.json")
    assert series(warned) == series(parse("fio", "fio/randread.json"))


def test_fio_truncated_json():
    text = (FIXTURES / "fio/seqwrite.json").read_text()
    with pytest.raises(ParseError, match=r"f\.json:\d+: fio JSON is malformed or truncated"):
        get_parser("fio")(text[: len(text) // 2], "f.json")


# ---------------------------------------------------------------- iperf3


def test_iperf3_tcp():
    out = parse("iperf3", "iperf3/tcp.json")
    assert out.valid and out.configuration["version"] == "iperf 3.12"
    values = series(out)
    assert set(values) == {("iperf3.tcp", m) for m in
                           ("sender.bandwidth", "receiver.bandwidth", "sender.retransmits")}
    sent = one(out, "iperf3.tcp", "sender.bandwidth")
    assert sent.value == pytest.approx(21592696224.437824 / 8 / 1e6)  # bits/s -> MB/s
    assert sent.value == pytest.approx(2699.087028)
    assert (sent.unit, sent.direction, sent.parameters["source_unit"]) == ("MB/s", Direction.HIGHER, "bits/s")
    assert sent.parameters["num_streams"] == 1 and sent.parameters["reverse"] is False
    assert values[("iperf3.tcp", "receiver.bandwidth")] == pytest.approx(21592142051.2477 / 8e6)
    retransmits = one(out, "iperf3.tcp", "sender.retransmits")
    assert (retransmits.value, retransmits.unit, retransmits.direction) == (25, "count", Direction.LOWER)


def test_iperf3_reverse_is_its_own_benchmark():
    values = series(parse("iperf3", "iperf3/tcp_reverse.json"))
    assert values == {
        ("iperf3.tcp.reverse", "sender.bandwidth"): pytest.approx(24178354694.20374 / 8e6),
        ("iperf3.tcp.reverse", "receiver.bandwidth"): pytest.approx(24179928538.02413 / 8e6),
        ("iperf3.tcp.reverse", "sender.retransmits"): 45,
    }


def test_iperf3_udp():
    out = parse("iperf3", "iperf3/udp_1G.json")
    values = series(out)
    assert values[("iperf3.udp", "receiver.bandwidth")] == pytest.approx(998.778449540419 / 8)  # Mbit/s -> MB/s
    assert values[("iperf3.udp", "sender.bandwidth")] == pytest.approx(999.674186136972 / 8)
    jitter = one(out, "iperf3.udp", "receiver.jitter")
    assert (jitter.value, jitter.unit, jitter.direction) == (0.011001761186815381, "ms", Direction.LOWER)
    lost = one(out, "iperf3.udp", "receiver.lost_percent")
    assert (lost.value, lost.unit, lost.direction) == (0.087404947120007, "%", Direction.LOWER)
    assert ("iperf3.udp", "sender.retransmits") not in values
    assert lost.parameters["target_bitrate"] == 1000000000


@pytest.mark.parametrize("name", ["tcp_connection_refused.json", "tcp_connection_refused.txt"])
def test_iperf3_connection_refused_is_a_failed_run(name):
    out = parse("iperf3", f"iperf3/{name}")
    assert not out.valid and out.measurements == []
    assert out.problems == ["iperf3: unable to connect to server: Connection refused"]


@pytest.mark.parametrize("name", ["tcp.txt", "tcp_P2.txt", "udp_1G.txt", "server.txt"])
def test_iperf3_text_output_is_refused_with_the_remedy(name):
    with pytest.raises(ParseError, match=rf"{name}: iperf3 text output .*-J"):
        parse("iperf3", f"iperf3/{name}")


def test_iperf3_truncated_json():
    text = (FIXTURES / "iperf3/tcp.json").read_text()
    with pytest.raises(ParseError, match=r"i\.json:\d+: iperf3 JSON is malformed or truncated"):
        get_parser("iperf3")(text[: text.index('"sum_sent"')], "i.json")


# ---------------------------------------------------------------- NetPIPE

NETPIPE_MB = 2**20 / 8 / 1e6  # NetPIPE Mbps (2^20 bit/s) -> MB/s


def test_netpipe_tcp_stdout():
    out = parse("netpipe", "netpipe/NPtcp.stdout")
    assert out.valid and out.configuration["transport"] == "tcp"
    assert len(sizes(out, "netpipe.tcp", "bandwidth")) == 124
    first = one(out, "netpipe.tcp", "bandwidth.1")
    assert first.value == pytest.approx(0.27 * NETPIPE_MB)
    assert first.parameters == {"bytes": 1, "transport": "tcp", "repetitions": 13404,
                                "source_unit": "Mbps (2^20 bits/s)"}
    assert one(out, "netpipe.tcp", "latency.1").value == 28.06
    assert one(out, "netpipe.tcp", "latency.8195").value == 32.16
    last = one(out, "netpipe.tcp", "bandwidth.8388611")
    assert last.value == pytest.approx(39017.65 * 0.131072)
    assert last.value == pytest.approx(8388611 / 1640.28, rel=1e-4)  # bytes / one-way usec = MB/s
    assert one(out, "netpipe.tcp", "latency.8388611").value == 1640.28


def test_netpipe_np_out_matches_stdout():
    out = parse("netpipe", "netpipe/np.out")
    # np.out does not say which transport wrote it, nor does its name
    assert out.configuration["transport"] == "unknown"
    assert {m.benchmark for m in out.measurements} == {"netpipe"}
    values = series(out)
    assert len(values) == 2 * 124
    assert values[("netpipe", "bandwidth.1")] == pytest.approx(0.271922 * NETPIPE_MB)
    assert values[("netpipe", "latency.1")] == pytest.approx(28.06)  # 0.00002806 s
    assert values[("netpipe", "bandwidth.8195")] == pytest.approx(1944.104017 * NETPIPE_MB)
    assert values[("netpipe", "latency.8388611")] == pytest.approx(1640.28)
    stdout = series(parse("netpipe", "netpipe/NPtcp.stdout"))
    assert {metric for _, metric in stdout} == {metric for _, metric in values}
    renamed = get_parser("netpipe")((FIXTURES / "netpipe/np.out").read_text(), "/runs/NPtcp_np.out")
    assert {m.benchmark for m in renamed.measurements} == {"netpipe.tcp"}


def test_netpipe_mpi_with_interleaved_host_names():
    out = parse("netpipe", "netpipe/NPopenmpi.stdout")
    assert out.configuration["transport"] == "mpi"
    assert out.configuration["interleaved_lines"] == ["1: vm", "0: vm"]
    values = series(out)
    assert len(values) == 2 * 124
    assert values[("netpipe.mpi", "bandwidth.1")] == pytest.approx(59.04 * NETPIPE_MB)
    assert values[("netpipe.mpi", "latency.1")] == 0.13
    assert one(out, "netpipe.mpi", "latency.1").parameters["repetitions"] == 356962
    assert values[("netpipe.mpi", "latency.8195")] == 2.86
    assert values[("netpipe.mpi", "bandwidth.8388611")] == pytest.approx(48754.10 * NETPIPE_MB)
    np_out = series(parse("netpipe", "netpipe/NPopenmpi_np.out"))
    assert np_out[("netpipe.mpi", "bandwidth.8195")] == pytest.approx(21886.267040 * NETPIPE_MB)
    assert np_out[("netpipe.mpi", "latency.8388611")] == pytest.approx(1312.71)


def test_netpipe_receiver_has_no_numbers():
    with pytest.raises(ParseError, match=r"NPtcp_receiver\.stdout: .*receiver.*np\.out"):
        parse("netpipe", "netpipe/NPtcp_receiver.stdout")


def test_netpipe_truncated():
    text = (FIXTURES / "netpipe/NPtcp.stdout").read_text()
    with pytest.raises(ParseError, match=r"n:127: .*truncated"):
        get_parser("netpipe")(text[: text.index("39017.65")], "n")
    np_out = (FIXTURES / "netpipe/np.out").read_text()
    with pytest.raises(ParseError, match=r"n:124: not NetPIPE output"):
        get_parser("netpipe")(np_out[: np_out.index("39017.646024") + 5], "n")


# ---------------------------------------------------------------- every parser


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("text", ["", "\n\n", "hello world\nthis is not a benchmark\n", "{]"])
def test_garbage_is_a_parse_error_naming_the_source(tool, text):
    with pytest.raises(ParseError, match=r"^garbage\.out(:\d+)?: "):
        get_parser(tool)(text, "garbage.out")


OTHER_OUTPUTS = {
    "imb": "osu/osu_latency.out",
    "osu": "imb/IMB-MPI1_PingPong.out",
    "fio": "iperf3/tcp.json",
    "iperf3": "fio/randread.json",
    "netpipe": "osu/osu_bw.out",
}


@pytest.mark.parametrize("tool", TOOLS)
def test_another_tools_output_is_a_parse_error(tool):
    for other in {*OTHER_OUTPUTS.values(), "stream/stream_c.out", "netpipe/np.out", "fio/randread.json"}:
        if other.split("/")[0] == tool:
            continue
        path = FIXTURES / other
        with pytest.raises(ParseError, match=rf"^{path}"):
            get_parser(tool)(path.read_text(), str(path))


@pytest.mark.parametrize("tool, relative", [
    ("imb", "imb/IMB-MPI1_PingPong.out"), ("osu", "osu/osu_bw.out"), ("fio", "fio/randrw70.json"),
    ("iperf3", "iperf3/udp_1G.json"), ("netpipe", "netpipe/NPopenmpi.stdout"),
])
def test_units_are_canonical_and_series_unique(tool, relative):
    from oddnode.core.units import canonical_unit

    out = parse(tool, relative)
    assert out.tool == tool
    series(out)
    for m in out.measurements:
        assert canonical_unit(m.unit) == m.unit
        assert "source_unit" in m.parameters
        assert m.direction is (Direction.LOWER if m.unit in ("us", "ms") else Direction.HIGHER) \
            or m.metric.endswith(("retransmits", "lost_percent"))
