"""The STREAM, HPCC and NPB parsers on the real outputs in tests/fixtures/
(copies of the shared fixtures; see tests/fixtures/README.md), including the
deliberately failed runs, and on input that is not theirs."""

from __future__ import annotations


import pytest

from oddnode.core.model import Direction
from oddnode.parsers import ParseError, get_parser, parsers
from oddnode.core.units import canonical_unit
from support.cli import FIXTURES



def parse(tool: str, relative: str):
    path = FIXTURES / relative
    return get_parser(tool)(path.read_text(encoding="utf-8"), str(path))


def by_key(output):
    return {(m.benchmark, m.metric): m for m in output.measurements}


def test_the_three_parsers_are_registered():
    assert {"stream", "hpcc", "npb"} <= set(parsers())


# ---------------------------------------------------------------- STREAM

# (file, {kernel: (best rate MB/s, avg, min, max time s)}, threads)
STREAM_RUNS = [
    (
        "stream/stream_c.out",
        {
            "copy": (38910.5, 0.017447, 0.016448, 0.019173),
            "scale": (42579.1, 0.016307, 0.015031, 0.018182),
            "add": (44661.3, 0.023418, 0.021495, 0.026896),
            "triad": (44164.1, 0.023390, 0.021737, 0.026171),
        },
        2,
    ),
    (
        "stream/stream_c_1thread.out",
        {
            "copy": (40585.9, 0.018412, 0.015769, 0.022456),
            "scale": (38561.1, 0.018825, 0.016597, 0.023209),
            "add": (39667.9, 0.027439, 0.024201, 0.034923),
            "triad": (39379.7, 0.027568, 0.024378, 0.034420),
        },
        1,
    ),
]


@pytest.mark.parametrize(("relative", "kernels", "threads"), STREAM_RUNS)
def test_stream_valid_runs(relative, kernels, threads):
    out = parse("stream", relative)
    assert out.tool == "stream"
    assert out.valid and out.problems == []
    got = by_key(out)
    assert len(out.measurements) == 4
    for kernel, (rate, avg, best, worst) in kernels.items():
        m = got[(f"stream.{kernel}", "bandwidth")]
        assert m.value == rate
        assert m.unit == "MB/s" == canonical_unit(m.unit)
        assert m.direction is Direction.HIGHER
        assert m.valid
        assert m.parameters == {"avg_time_s": avg, "min_time_s": best, "max_time_s": worst}
    assert out.configuration == {
        "version": "5.10",
        "bytes_per_element": 8,
        "array_size": 40000000,
        "offset": 0,
        "memory_per_array_mib": 305.2,
        "total_memory_mib": 915.5,
        "ntimes": 20,
        "threads_requested": threads,
        "threads_counted": threads,
        "timer_granularity_us": 1,
        "test_duration_us": 10035 if threads == 2 else 14079,
    }


def test_stream_validation_failure_makes_every_measurement_invalid():
    out = parse("stream", "stream/stream_validation_failed.out")
    assert not out.valid
    assert [m.valid for m in out.measurements] == [False] * 4
    assert by_key(out)[("stream.triad", "bandwidth")].value == 75992.4
    assert by_key(out)[("stream.copy", "bandwidth")].value == 70052.8
    for array in "abc":
        assert f"Failed Validation on array {array}[], AvgRelAbsErr > epsilon (1.000000e-13)" in out.problems
        assert f"For array {array}[], 1 errors were found." in out.problems
    assert len(out.problems) == 6


def test_stream_cut_after_the_results_is_truncated():
    text = (FIXTURES / "stream/stream_c.out").read_text()
    cut = text[: text.index("Solution Validates")]
    with pytest.raises(ParseError, match=r"^cut\.out:\d+: truncated STREAM output: no 'Solution Validates'"):
        get_parser("stream")(cut, "cut.out")


def test_stream_cut_inside_the_failure_report_is_truncated():
    text = (FIXTURES / "stream/stream_validation_failed.out").read_text()
    cut = text[: text.index("For array b[]")]
    with pytest.raises(ParseError, match="the validation report is not closed"):
        get_parser("stream")(cut, "cut.out")


# ---------------------------------------------------------------- HPCC

HPCC_TWO_PROCS = {
    ("hpcc.hpl", "performance"): (12.8644, "GFLOP/s"),
    ("hpcc.star_dgemm", "performance"): (5.34157, "GFLOP/s"),
    ("hpcc.single_dgemm", "performance"): (6.7117, "GFLOP/s"),
    ("hpcc.ptrans", "bandwidth"): (4.84248, "GB/s"),
    ("hpcc.mpi_random_access", "rate"): (0.0261508, "GUP/s"),
    ("hpcc.star_random_access", "rate"): (0.115205, "GUP/s"),
    ("hpcc.single_random_access", "rate"): (0.147138, "GUP/s"),
    ("hpcc.mpi_random_access_lcg", "rate"): (0.0272864, "GUP/s"),
    ("hpcc.star_random_access_lcg", "rate"): (0.158849, "GUP/s"),
    ("hpcc.single_random_access_lcg", "rate"): (0.162665, "GUP/s"),
    ("hpcc.star_stream_copy", "bandwidth"): (25.2238, "GB/s"),
    ("hpcc.star_stream_scale", "bandwidth"): (24.5695, "GB/s"),
    ("hpcc.star_stream_add", "bandwidth"): (26.5151, "GB/s"),
    ("hpcc.star_stream_triad", "bandwidth"): (25.7896, "GB/s"),
    ("hpcc.single_stream_copy", "bandwidth"): (51.5887, "GB/s"),
    ("hpcc.single_stream_scale", "bandwidth"): (47.7772, "GB/s"),
    ("hpcc.single_stream_add", "bandwidth"): (47.7712, "GB/s"),
    ("hpcc.single_stream_triad", "bandwidth"): (45.7418, "GB/s"),
    ("hpcc.star_fft", "performance"): (6.10296, "GFLOP/s"),
    ("hpcc.single_fft", "performance"): (5.06666, "GFLOP/s"),
    ("hpcc.mpi_fft", "performance"): (5.99026, "GFLOP/s"),
    ("hpcc.pingpong", "latency.min"): (0.100817, "us"),
    ("hpcc.pingpong", "latency.avg"): (0.102233, "us"),
    ("hpcc.pingpong", "latency.max"): (0.10365, "us"),
    ("hpcc.pingpong", "bandwidth.min"): (17.4382, "GB/s"),
    ("hpcc.pingpong", "bandwidth.avg"): (17.4848, "GB/s"),
    ("hpcc.pingpong", "bandwidth.max"): (17.5315, "GB/s"),
    ("hpcc.natural_ring", "latency"): (0.0906531, "us"),
    ("hpcc.natural_ring", "bandwidth"): (14.8728, "GB/s"),
    ("hpcc.random_ring", "latency"): (0.0912321, "us"),
    ("hpcc.random_ring", "bandwidth"): (14.955, "GB/s"),
}


def test_hpcc_two_processes():
    out = parse("hpcc", "hpcc/hpccoutf.txt")
    assert out.tool == "hpcc"
    assert out.valid and out.problems == []
    got = by_key(out)
    assert set(got) == set(HPCC_TWO_PROCS)
    for key, (value, unit) in HPCC_TWO_PROCS.items():
        m = got[key]
        assert m.value == pytest.approx(value, rel=1e-12), key
        assert m.unit == unit == canonical_unit(unit)
        assert m.valid
        expected = Direction.LOWER if key[1].startswith("latency") else Direction.HIGHER
        assert m.direction is expected, key
    assert out.configuration == {
        "version": "1.5.0f",
        "N": 4000,
        "NB": 80,
        "P": 1,
        "Q": 2,
        "comm_world_procs": 2,
        "stream_vector_size": 2666666,
        "stream_threads": 1,
        "ptrans_n": 2000,
        "dgemm_n": 1632,
        "fft_n": 1048576,
        "mpi_fft_n": 1048576,
        "hostname": "vm",
    }


def test_hpcc_one_process_leaves_out_the_tests_that_did_not_run():
    out = parse("hpcc", "hpcc/hpccoutf_np1_N2000.txt")
    assert out.valid
    got = by_key(out)
    # LatencyBandwidth needs two processes: HPCC writes -1, which is no result.
    assert not any(b in ("hpcc.pingpong", "hpcc.natural_ring", "hpcc.random_ring") for b, _ in got)
    assert len(got) == 21
    assert got[("hpcc.hpl", "performance")].value == pytest.approx(6.8474)  # HPL_Tflops=0.0068474
    assert got[("hpcc.single_stream_triad", "bandwidth")].value == 54.4193
    assert got[("hpcc.star_random_access", "rate")].value == 0.195309
    assert got[("hpcc.mpi_fft", "performance")].value == 4.78054
    assert (out.configuration["N"], out.configuration["P"], out.configuration["Q"]) == (2000, 1, 1)
    assert out.configuration["comm_world_procs"] == 1


def _hpcc_text() -> str:
    return (FIXTURES / "hpcc/hpccoutf.txt").read_text()


def test_hpcc_failed_hpl_residual_invalidates_hpl_only():
    text = _hpcc_text().replace("0.0049965 ...... PASSED", "17.0049965 ...... FAILED")
    out = get_parser("hpcc")(text, "failed_hpl.txt")
    assert not out.valid
    assert any(p.startswith("HPL: residual check failed") for p in out.problems)
    got = by_key(out)
    assert not got[("hpcc.hpl", "performance")].valid
    assert got[("hpcc.star_dgemm", "performance")].valid


def test_hpcc_summary_success_zero_invalidates_everything():
    out = get_parser("hpcc")(_hpcc_text().replace("Success=1", "Success=0"), "failure.txt")
    assert not out.valid
    assert "Success=0" in out.problems[0]
    assert not any(m.valid for m in out.measurements)


def test_hpcc_node_with_error_invalidates_that_test():
    text = _hpcc_text().replace(
        "Scaled residual: 0.014402\nNode(s) with error 0", "Scaled residual: 0.014402\nNode(s) with error 1"
    )
    out = get_parser("hpcc")(text, "dgemm.txt")
    assert not out.valid
    assert any(p.startswith("StarDGEMM: 1 node(s) with error") for p in out.problems)
    got = by_key(out)
    assert not got[("hpcc.star_dgemm", "performance")].valid
    assert got[("hpcc.single_dgemm", "performance")].valid


def test_hpcc_without_summary_is_an_interrupted_run():
    text = _hpcc_text()
    cut = text[: text.index("Begin of Summary section.")]
    with pytest.raises(ParseError, match=r"interrupted\.txt:\d+: HPCC output without 'Begin of Summary section\.'"):
        get_parser("hpcc")(cut, "interrupted.txt")


def test_hpcc_summary_without_its_end_is_truncated():
    text = _hpcc_text()
    cut = text[: text.index("StarDGEMM_Gflops")]
    with pytest.raises(ParseError, match=r"cut\.txt:\d+: truncated HPCC Summary section"):
        get_parser("hpcc")(cut, "cut.txt")


# ---------------------------------------------------------------- NPB

# (file, benchmark, class, Mop/s total, Time in seconds, count kind, count, verified)
NPB_RUNS = [
    ("bt.A.omp2.out", "bt", "A", 16149.23, 10.42, "threads", 2, True),
    ("bt.S.mpi_np2_active_procs_1.out", "bt", "S", 6283.26, 0.04, "processes", 2, True),
    ("bt.S.mpi_np4.out", "bt", "S", 8326.17, 0.03, "processes", 4, True),
    ("bt.S.omp2.out", "bt", "S", 8974.30, 0.03, "threads", 2, True),
    ("bt.S.serial.out", "bt", "S", 6180.16, 0.04, None, None, True),
    ("bt.W.mpi_np4.out", "bt", "W", 10069.92, 0.77, "processes", 4, True),
    ("bt.W.omp2.out", "bt", "W", 15059.49, 0.51, "threads", 2, True),
    ("bt.W.serial.out", "bt", "W", 6015.31, 1.28, None, None, True),
    ("cg.A.omp2.out", "cg", "A", 5472.28, 0.27, "threads", 2, True),
    ("cg.S.mpi_np2.out", "cg", "S", 4504.59, 0.01, "processes", 2, True),
    ("cg.S.mpi_np4.out", "cg", "S", 2877.35, 0.02, "processes", 4, True),
    ("cg.S.omp2.out", "cg", "S", 8433.96, 0.01, "threads", 2, True),
    ("cg.S.serial.out", "cg", "S", 2946.81, 0.02, None, None, True),
    ("cg.W.mpi_np2.out", "cg", "W", 4848.53, 0.09, "processes", 2, True),
    ("cg.W.mpi_np4.out", "cg", "W", 4383.97, 0.10, "processes", 4, True),
    ("cg.W.omp2.out", "cg", "W", 8303.45, 0.05, "threads", 2, True),
    ("cg.W.serial.out", "cg", "W", 2914.08, 0.14, None, None, True),
    ("dc.S.omp2.out", "dc", "S", 19.27, 0.00, "threads", 2, True),
    ("ep.A.omp2.out", "ep", "A", 377.54, 1.42, "threads", 2, True),
    ("ep.S.mpi_np2.out", "ep", "S", 287.14, 0.12, "processes", 2, True),
    ("ep.S.mpi_np4.out", "ep", "S", 252.12, 0.13, "processes", 4, True),
    ("ep.S.omp2.out", "ep", "S", 379.00, 0.09, "threads", 2, True),
    ("ep.S.serial.out", "ep", "S", 147.35, 0.23, None, None, True),
    ("ep.W.mpi_np2.out", "ep", "W", 286.26, 0.23, "processes", 2, True),
    ("ep.W.mpi_np4.out", "ep", "W", 227.12, 0.30, "processes", 4, True),
    ("ep.W.omp2.out", "ep", "W", 382.82, 0.18, "threads", 2, True),
    ("ep.W.serial.out", "ep", "W", 176.78, 0.38, None, None, True),
    ("ft.A.omp2.out", "ft", "A", 12023.56, 0.59, "threads", 2, True),
    ("ft.S.mpi_np2.out", "ft", "S", 6883.01, 0.03, "processes", 2, True),
    ("ft.S.mpi_np4.out", "ft", "S", 6608.19, 0.03, "processes", 4, True),
    ("ft.S.omp2.out", "ft", "S", 13709.00, 0.01, "threads", 2, True),
    ("ft.S.serial.out", "ft", "S", 4889.52, 0.04, None, None, True),
    ("ft.W.mpi_np2.out", "ft", "W", 6142.81, 0.06, "processes", 2, True),
    ("ft.W.mpi_np4.out", "ft", "W", 5503.54, 0.07, "processes", 4, True),
    ("ft.W.omp2.out", "ft", "W", 13931.04, 0.03, "threads", 2, True),
    ("ft.W.serial.out", "ft", "W", 6778.82, 0.05, None, None, True),
    ("is.A.omp2.out", "is", "A", 952.80, 0.09, "threads", 2, True),
    ("is.S.mpi_np2.out", "is", "S", 640.18, 0.00, "processes", 2, True),
    ("is.S.mpi_np4.out", "is", "S", 407.95, 0.00, "processes", 4, True),
    ("is.S.omp2.out", "is", "S", 354.88, 0.00, "threads", 2, True),
    ("is.S.omp2_verification_failed.out", "is", "S", 394.02, 0.00, "threads", 2, False),
    ("is.S.serial.out", "is", "S", 750.70, 0.00, None, None, True),
    ("is.W.mpi_np2.out", "is", "W", 674.94, 0.02, "processes", 2, True),
    ("is.W.mpi_np4.out", "is", "W", 464.30, 0.02, "processes", 4, True),
    ("is.W.omp2.out", "is", "W", 1330.33, 0.01, "threads", 2, True),
    ("is.W.serial.out", "is", "W", 775.69, 0.01, None, None, True),
    ("lu.A.omp2.out", "lu", "A", 19102.84, 6.24, "threads", 2, True),
    ("lu.S.mpi_np2.out", "lu", "S", 10453.07, 0.01, "processes", 2, True),
    ("lu.S.mpi_np4.out", "lu", "S", 9435.74, 0.01, "processes", 4, True),
    ("lu.S.omp2.out", "lu", "S", 19025.56, 0.01, "threads", 2, True),
    ("lu.S.serial.out", "lu", "S", 11187.49, 0.01, None, None, True),
    ("lu.W.mpi_np2.out", "lu", "W", 13739.36, 1.31, "processes", 2, True),
    ("lu.W.mpi_np4.out", "lu", "W", 12138.44, 1.49, "processes", 4, True),
    ("lu.W.omp2.out", "lu", "W", 20526.66, 0.88, "threads", 2, True),
    ("lu.W.serial.out", "lu", "W", 11144.62, 1.62, None, None, True),
    ("mg.A.omp2.out", "mg", "A", 12335.97, 0.32, "threads", 2, True),
    ("mg.S.mpi_np2.out", "mg", "S", 8455.20, 0.00, "processes", 2, True),
    ("mg.S.mpi_np4.out", "mg", "S", 3362.53, 0.00, "processes", 4, True),
    ("mg.S.omp2.out", "mg", "S", 15351.76, 0.00, "threads", 2, True),
    ("mg.S.omp2_verification_failed.out", "mg", "S", 13491.21, 0.00, "threads", 2, False),
    ("mg.S.serial.out", "mg", "S", 5549.03, 0.00, None, None, True),
    ("mg.W.mpi_np2.out", "mg", "W", 7743.98, 0.06, "processes", 2, True),
    ("mg.W.mpi_np4.out", "mg", "W", 5339.15, 0.09, "processes", 4, True),
    ("mg.W.omp2.out", "mg", "W", 11176.03, 0.04, "threads", 2, True),
    ("mg.W.omp2_verification_failed.out", "mg", "W", 12100.32, 0.04, "threads", 2, False),
    ("mg.W.serial.out", "mg", "W", 6703.86, 0.07, None, None, True),
    ("sp.A.omp2.out", "sp", "A", 12472.03, 6.82, "threads", 2, True),
    ("sp.S.mpi_np4.out", "sp", "S", 4291.20, 0.02, "processes", 4, True),
    ("sp.S.omp2.out", "sp", "S", 16044.22, 0.01, "threads", 2, True),
    ("sp.S.serial.out", "sp", "S", 8590.08, 0.01, None, None, True),
    ("sp.W.mpi_np4.out", "sp", "W", 10039.92, 1.41, "processes", 4, True),
    ("sp.W.omp2.out", "sp", "W", 17032.55, 0.83, "threads", 2, True),
    ("sp.W.serial.out", "sp", "W", 8669.68, 1.63, None, None, True),
    ("ua.S.omp2.out", "ua", "S", 63.14, 0.20, "threads", 2, True),
    ("ua.W.omp2.out", "ua", "W", 60.74, 1.19, "threads", 2, True),
]


@pytest.mark.parametrize(("relative", "name", "npb_class", "rate", "time_s", "kind", "count", "verified"), NPB_RUNS)
def test_npb_every_fixture(relative, name, npb_class, rate, time_s, kind, count, verified):
    out = parse("npb", f"npb/{relative}")
    assert out.tool == "npb"
    assert out.valid is verified
    got = by_key(out)
    benchmark = f"npb.{name}.{npb_class}"
    m = got[(benchmark, "rate")]
    assert m.value == rate
    assert m.unit == "Mop/s" == canonical_unit(m.unit)
    assert m.direction is Direction.HIGHER
    assert m.valid is verified
    assert m.parameters["version"] == "3.4"
    if kind is None:  # the serial build prints no thread or process count
        assert "threads" not in m.parameters and "processes" not in m.parameters
    else:
        assert m.parameters[kind] == count
    if time_s >= 0.01:
        t = got[(benchmark, "time")]
        assert t.value == time_s
        assert t.unit == "s" and t.direction is Direction.LOWER and t.valid is verified
    else:  # "0.00" is below NPB's printed resolution: no time measurement
        assert (benchmark, "time") not in got
    assert len(out.measurements) == (2 if time_s >= 0.01 else 1)


def test_npb_every_fixture_file_is_in_the_table():
    assert sorted(p.name for p in (FIXTURES / "npb").glob("*.out")) == sorted(r[0] for r in NPB_RUNS)


def test_npb_report_details():
    out = parse("npb", "npb/bt.S.mpi_np2_active_procs_1.out")
    m = by_key(out)[("npb.bt.S", "rate")]
    assert m.parameters == {
        "size": "12x12x12",
        "iterations": 60,
        "version": "3.4",
        "processes": 2,
        "active_processes": 1,
    }
    assert out.configuration["operation_type"] == "floating point"
    assert out.configuration["compile_options"]["FFLAGS"] == "-O3 -fallow-invalid-boz -fallow-argument-mi..."
    assert out.configuration["mops_per_process"] == 3141.63
    omp = parse("npb", "npb/cg.S.omp2.out")
    assert omp.configuration["suite"] == "NPB3.4-OMP"
    assert omp.configuration["mops_per_thread"] == 4216.98
    assert by_key(omp)[("npb.cg.S", "rate")].parameters["size"] == "1400"


def test_npb_mg_verification_failure_names_the_norms():
    out = parse("npb", "npb/mg.W.omp2_verification_failed.out")
    assert not out.valid
    assert out.problems == [
        "MG class W: Verification = UNSUCCESSFUL (VERIFICATION FAILED; "
        "L2 Norm is 0.2117961129934E-04; The correct L2 Norm is 0.6467329375339E-05)"
    ]
    assert all(not m.valid for m in out.measurements)


def test_npb_is_verification_failure_counts_the_partial_failures():
    out = parse("npb", "npb/is.S.omp2_verification_failed.out")
    assert not out.valid
    # 10 timed iterations plus one untimed warm-up ranking, 5 test keys each
    assert out.problems == [
        "IS class S: Verification = UNSUCCESSFUL (55 'Failed partial verification' lines, "
        "first: Failed partial verification: iteration 1, test key 0)"
    ]


def test_npb_several_reports_in_one_file():
    first = (FIXTURES / "npb/cg.S.omp2.out").read_text()
    text = first + (FIXTURES / "npb/mg.S.omp2_verification_failed.out").read_text()
    out = get_parser("npb")(text, "two.out")
    assert [(m.benchmark, m.metric, m.valid) for m in out.measurements] == [
        ("npb.cg.S", "rate", True),
        ("npb.cg.S", "time", True),
        ("npb.mg.S", "rate", False),
    ]
    assert not out.valid
    assert len(out.problems) == 1 and out.problems[0].startswith("MG class S")
    assert [run["benchmark"] for run in out.configuration["runs"]] == ["CG", "MG"]


def test_npb_report_cut_inside_is_truncated():
    text = (FIXTURES / "npb/cg.S.omp2.out").read_text()
    cut = text[: text.index(" Mop/s total")]
    expected = r"cut\.out:\d+: truncated NPB report for CG: no 'Mop/s total', 'Verification'"
    with pytest.raises(ParseError, match=expected):
        get_parser("npb")(cut, "cut.out")
    # cut in the middle of the verdict: "Verification    =               SU"
    cut = text[: text.index("SUCCESSFUL\n Version") + 2]
    with pytest.raises(ParseError, match="truncated NPB report for CG"):
        get_parser("npb")(cut, "cut.out")


# ---------------------------------------------------------------- not their input

OTHER_TOOL = {"stream": "npb/cg.S.omp2.out", "hpcc": "stream/stream_c.out", "npb": "hpcc/hpccoutf.txt"}
REAL = {"stream": "stream/stream_c.out", "hpcc": "hpcc/hpccoutf.txt", "npb": "npb/bt.W.omp2.out"}
NOT_THEIRS = {"stream": "not STREAM output", "hpcc": "not HPCC output", "npb": "not NPB output"}
TRUNCATED = {"stream": "truncated STREAM output", "hpcc": "HPCC output without", "npb": "truncated NPB output"}


@pytest.mark.parametrize("tool", ["stream", "hpcc", "npb"])
def test_garbage_is_a_parse_error_naming_the_source(tool):
    with pytest.raises(ParseError, match=f"^garbage.txt: {NOT_THEIRS[tool]}") as caught:
        get_parser(tool)("lorem ipsum\n\x00\x01 = 42\nCopy: fast\n", "garbage.txt")
    assert caught.value.source == "garbage.txt"


@pytest.mark.parametrize("tool", ["stream", "hpcc", "npb"])
def test_empty_file_is_a_parse_error(tool):
    with pytest.raises(ParseError, match=f"^empty.txt: {NOT_THEIRS[tool]}"):
        get_parser(tool)("", "empty.txt")


@pytest.mark.parametrize("tool", ["stream", "hpcc", "npb"])
def test_another_tools_output_is_a_parse_error(tool):
    path = FIXTURES / OTHER_TOOL[tool]
    with pytest.raises(ParseError, match=NOT_THEIRS[tool]) as caught:
        get_parser(tool)(path.read_text(), str(path))
    assert caught.value.source == str(path)


@pytest.mark.parametrize("tool", ["stream", "hpcc", "npb"])
def test_first_half_of_a_real_file_is_a_parse_error(tool):
    path = FIXTURES / REAL[tool]
    text = path.read_text()
    half = text[: len(text) // 2]
    with pytest.raises(ParseError, match=TRUNCATED[tool]) as caught:
        get_parser(tool)(half, str(path))
    assert caught.value.source == str(path)
    assert caught.value.line == len(half.splitlines())
