"""The compute stage for real on this machine: our DGEMM kernel built and run
through the node runner with the BLAS it finds, its residual check, its
fallback and its errors; HPL through the installed hpcc; both specs parsed,
and the DGEMM spec run through the runner with the local transport."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import FIXTURES as ALL_FIXTURES
from support.kernels import openmp_problem
from oddnode.measure.node.hpl import HPCC_OUTPUT, HPL_THRESHOLD, hpcc_input, hpl_benchmark
from oddnode.measure.node.dgemm import COMPUTE_STAGE, dgemm_benchmark
from oddnode.measure.node.dgemm import BLAS_THREAD_VARIABLES, dgemm_kernel_argv, parse_dgemm_output
from oddnode.reach.jobs import RUNNER_VERSION, parse_runner_output, runner_argv
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError, ToolUnavailable
from oddnode.measure.runner import run_benchmark
from oddnode.reach import get_transport
from oddnode.reach.base import Target
from oddnode.reach.local import local_node_name

ORDER = 300
NTIMES = 3
FIXTURES = ALL_FIXTURES / "hpcc"
# The kernel's own list of libraries, in its order (ODDNODE_BLAS_CANDIDATES).
BLAS_CANDIDATES = (
    "libopenblaso.so.0", "libopenblasp.so.0", "libopenblas.so.0", "libmkl_rt.so.2", "libmkl_rt.so",
    "libflexiblas.so.3", "libblis.so.4", "libblas.so.3",
)

# Genuine output of the kernel (n=200, 2 threads, Debian's OpenBLAS 0.3.21, gcc 12).
KERNEL_STDOUT = """\
# oddnode dgemm kernel v1
# n: 200
# bytes_per_matrix: 320000
# ntimes: 3
# flops_per_call: 16000000
# threads_requested: 2
# threads_counted: 2
# blas: libopenblas.so.0
# blas_file: /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so
# blas_config: OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64
# blas_core: SkylakeX
# blas_threads: 2
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 33
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp -ldl
# seed: 20240601
result dgemm 47.114 0.001716931 0.000339602 0.003094261
# residual_threshold: 16.0
# scaled_residual: 2.206450e-04
validation ok
"""


def _system_blas() -> str | None:
    """The first library of the kernel's list that this machine can load and
    that has dgemm_, found independently of the kernel; None if none."""
    for name in BLAS_CANDIDATES:
        try:
            library = ctypes.CDLL(name)
        except OSError:
            continue
        if hasattr(library, "dgemm_"):
            return name
    return None


def _clean_env() -> dict[str, str]:
    """This process's environment without the settings the kernel reads."""
    return {
        k: v for k, v in os.environ.items()
        if not k.startswith("OMP_") and k not in BLAS_THREAD_VARIABLES and k != "ODDNODE_BLAS"
    }


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """An environment whose build cache is private to this module's tests."""
    tmp = tmp_path_factory.mktemp("dgemm_kernel")
    problem = openmp_problem(tmp)
    if problem:
        pytest.skip(f"the dgemm kernel needs a C compiler with OpenMP: {problem}")
    env = _clean_env()
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    return env


def on_this_node(argv: list[str], env: dict[str, str]) -> str:
    """Run a node argv here, with this interpreter in place of the node's python3."""
    completed = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def run_kernel(argv: list[str], env: dict[str, str]):
    return parse_runner_output("localhost", on_this_node(argv, env))


# --- the real DGEMM kernel ------------------------------------------------------------


@pytest.fixture(scope="module")
def first_run(kernel_env):
    return run_kernel(dgemm_kernel_argv(ORDER, NTIMES), kernel_env)


def test_kernel_validates_and_reports_the_blas_it_found(first_run):
    assert first_run.returncode == 0, first_run.stderr
    parsed = parse_dgemm_output(first_run.stdout, "localhost")
    assert parsed.valid and parsed.problems == []
    (measurement,) = parsed.measurements
    assert measurement.benchmark == "compute.dgemm" and measurement.metric == "performance"
    assert measurement.unit == "GFLOP/s" and measurement.direction is Direction.HIGHER
    assert measurement.value > 0 and measurement.valid
    params = measurement.parameters
    assert params["n"] == ORDER and params["ntimes"] == NTIMES
    assert 0 < params["min_time_s"] <= params["avg_time_s"] <= params["max_time_s"]
    config = parsed.configuration
    assert config["threads_counted"] == len(os.sched_getaffinity(0))
    assert config["bytes_per_matrix"] == ORDER * ORDER * 8
    assert config["flops_per_call"] == 2 * ORDER**3
    assert 0 <= config["scaled_residual"] < config["residual_threshold"] == HPL_THRESHOLD
    assert "-ldl" in config["cflags"]

    expected = _system_blas()
    if expected is None:
        assert config["blas"] == "builtin" and params["blas"] == "builtin"
    else:
        assert config["blas"] == expected
        assert Path(config["blas_file"]).is_file() and params["blas"] == config["blas_file"]
    if "openblas" in config.get("blas_config", "").lower():
        # OpenBLAS reads OMP_NUM_THREADS when its own variable is unset.
        assert config["blas_threads"] == params["blas_threads"] == len(os.sched_getaffinity(0))


def test_thread_count_is_set_and_read_back(kernel_env):
    parsed = parse_dgemm_output(run_kernel(dgemm_kernel_argv(ORDER, NTIMES, threads=1), kernel_env).stdout, "n")
    assert parsed.valid
    assert parsed.configuration["threads_counted"] == parsed.measurements[0].parameters["threads"] == 1
    assert parsed.configuration.get("blas_threads", 1) == 1


def test_a_corrupted_element_fails_the_residual_check(kernel_env):
    argv = dgemm_kernel_argv(ORDER, NTIMES, defines=["ODDNODE_CORRUPT_ELEMENT=12345"])
    report = run_kernel(argv, kernel_env)
    assert report.returncode == 0  # the kernel ran; judging it is the parser's job
    assert report.stdout.rstrip().splitlines()[-1].startswith("validation failed dgemm ")
    parsed = parse_dgemm_output(report.stdout, "localhost")
    assert not parsed.valid and not parsed.measurements[0].valid
    (problem,) = parsed.problems
    assert "scaled residual" in problem and "threshold 16" in problem
    assert parsed.configuration["scaled_residual"] > 1e6 * HPL_THRESHOLD
    assert parsed.configuration["corrupt_element"] == 12345


def test_our_own_multiply_when_asked_for_it(kernel_env):
    parsed = parse_dgemm_output(run_kernel(dgemm_kernel_argv(ORDER, NTIMES, blas="builtin"), kernel_env).stdout, "n")
    assert parsed.valid
    assert parsed.configuration["blas"] == "builtin" and "blas_file" not in parsed.configuration
    assert parsed.measurements[0].parameters["blas"] == "builtin"


def test_a_node_without_any_blas_falls_back_to_our_multiply(kernel_env):
    # A candidate list where one library does not exist and one has no dgemm_.
    argv = dgemm_kernel_argv(ORDER, NTIMES, defines=['ODDNODE_BLAS_CANDIDATES="libnot-a-blas.so.0:libc.so.6"'])
    parsed = parse_dgemm_output(run_kernel(argv, kernel_env).stdout, "n")
    assert parsed.valid and parsed.configuration["blas"] == "builtin"
    reasons = parsed.configuration["blas_not_found"]
    assert "libnot-a-blas.so.0: " in reasons and "libc.so.6: no dgemm_ symbol" in reasons


def test_a_blas_asked_for_but_missing_is_an_error_not_a_substitute(kernel_env):
    text = on_this_node(dgemm_kernel_argv(ORDER, NTIMES, blas="/nonexistent/libblas.so.3"), kernel_env)
    report = parse_runner_output("node07", text)
    assert report.returncode == 4 and report.stdout == ""
    assert "cannot use ODDNODE_BLAS: /nonexistent/libblas.so.3" in report.stderr
    with pytest.raises(ParseError, match="dgemm kernel exited with status 4: error: cannot use ODDNODE_BLAS"):
        dgemm_benchmark(ORDER, NTIMES).parse(text, "node07")


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["-n", "0"], "-n wants"),
        (["-n", "2000000"], "-n wants"),
        (["-n", "12abc"], "-n wants"),
        (["-t", "1"], "-t wants"),
        (["--bogus"], "unknown option"),
        (["-n", "100", "extra"], "unexpected argument"),
    ],
)
def test_bad_arguments_exit_2(kernel_env, args, complaint):
    report = run_kernel(runner_argv("dgemm", args, ldlibs=["-ldl"]), kernel_env)
    assert report.returncode == 2
    assert complaint in report.stderr and "usage:" in report.stderr
    assert report.stdout == ""


def test_python_side_refuses_bad_arguments():
    with pytest.raises(ValueError, match="n must be"):
        dgemm_kernel_argv(0)
    with pytest.raises(ValueError, match="ntimes"):
        dgemm_kernel_argv(ORDER, ntimes=1)
    with pytest.raises(ValueError, match="threads"):
        dgemm_kernel_argv(ORDER, threads=0)


# --- the parser on genuine and broken output --------------------------------------------


def test_genuine_output_parses():
    parsed = parse_dgemm_output("Welcome to node07\n" + KERNEL_STDOUT, "node07")
    assert parsed.tool == "oddnode-dgemm" and parsed.valid
    assert parsed.measurements[0].value == 47.114
    assert parsed.configuration["blas_core"] == "SkylakeX" and parsed.configuration["blas_threads"] == 2


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("Segmentation fault\n", None, "not oddnode dgemm kernel output"),
        (KERNEL_STDOUT.replace("kernel v1", "kernel v9"), 1, "unsupported kernel version"),
        (KERNEL_STDOUT.replace("validation ok\n", ""), 20, "no validation line"),
        (KERNEL_STDOUT.split("result")[0], 17, "no result line"),
        (KERNEL_STDOUT.replace("result dgemm", "result sgemm"), 18, "unknown kernel 'sgemm'"),
        (KERNEL_STDOUT.replace("47.114", "fast"), 18, "expected a number"),
        (KERNEL_STDOUT.replace("# n: 200\n", ""), None, "lacks 'n'"),
        (KERNEL_STDOUT + "Bus error\n", 22, "unexpected line"),
    ],
)
def test_broken_output_is_a_parse_error_with_its_place(text, line, message):
    with pytest.raises(ParseError, match=message) as caught:
        parse_dgemm_output(text, "node07")
    assert caught.value.source == "node07" and caught.value.line == line


# --- HPL through hpcc -------------------------------------------------------------------


def test_hpcc_input_has_hpls_layout():
    """Our input and the one the HPCC fixtures were run with agree on every
    value but the problem size (line 6), block size (line 8) and PTRANS's."""
    ours = [line.split()[0] for line in hpcc_input(2000, 80).splitlines()]
    theirs = [line.split()[0] for line in (FIXTURES / "hpccinf_np1_N2000.txt").read_text().splitlines()]
    assert len(ours) == len(theirs) == 36
    assert ours[2:33] == theirs[2:33] and ours[5] == "2000" and ours[7] == "80"
    with pytest.raises(ValueError, match="nb"):
        hpcc_input(2000, 0)


def tool_report(**fields: object) -> str:
    """What the node runner prints for a tool's run."""
    report = {"runner_version": RUNNER_VERSION, "tool": "hpcc", "cpu_model": "Test CPU"}
    report.update(fields)
    return json.dumps(report) + "\n"


def ran(output: str | None, returncode: int = 0, stderr: str = "") -> str:
    return tool_report(tool_path="/usr/bin/hpcc", tool_version=None, returncode=returncode, stdout="",
                       stderr=stderr, collected={HPCC_OUTPUT: output})


def test_hpl_on_a_node_without_hpcc_is_unavailable():
    text = tool_report(error="not installed", detail="hpcc is not on PATH")
    with pytest.raises(ToolUnavailable, match="hpcc is not installed"):
        hpl_benchmark().parse(text, "node03")


def test_hpl_keeps_hpl_dgemm_and_fft_of_a_genuine_run():
    parsed = hpl_benchmark().parse(ran((FIXTURES / "hpccoutf_np1_N2000.txt").read_text()), "node03")
    assert parsed.valid and parsed.problems == []
    by_name = {m.benchmark: m for m in parsed.measurements}
    assert sorted(by_name) == ["compute.hpcc_dgemm", "compute.hpcc_fft", "compute.hpl"]
    hpl = by_name["compute.hpl"]
    assert hpl.unit == "GFLOP/s" and hpl.valid and hpl.value > 0
    assert hpl.parameters["n"] == 2000 and hpl.parameters["p"] == hpl.parameters["q"] == 1
    assert 0 < hpl.parameters["scaled_residual"] < HPL_THRESHOLD
    assert parsed.configuration["tool_path"] == "/usr/bin/hpcc"


def test_a_failed_hpl_residual_makes_the_run_invalid():
    genuine = (FIXTURES / "hpccoutf_np1_N2000.txt").read_text()
    assert genuine.count("...... PASSED") == 1
    failed = genuine.replace("...... PASSED", "...... FAILED")
    parsed = hpl_benchmark().parse(ran(failed), "node03")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    assert any("HPL: residual check failed" in p for p in parsed.problems)


def test_hpcc_without_its_output_file_is_a_parse_error():
    text = ran(None, returncode=1, stderr="HPCC: cannot read hpccinf.txt")
    with pytest.raises(ParseError, match="status 1 and wrote no hpccoutf.txt: HPCC: cannot read"):
        hpl_benchmark().parse(text, "node03")


def test_hpl_runs_for_real_through_hpcc(tmp_path):
    if shutil.which("hpcc") is None:
        pytest.skip("hpcc is not installed here")
    spec = hpl_benchmark(n=1000, nb=64, timeout=120)
    assert spec.stage == COMPUTE_STAGE and spec.name == "hpl"
    env = dict(_clean_env(), TMPDIR=str(tmp_path))
    parsed = spec.parse(on_this_node(spec.argv, env), "localhost")
    assert parsed.valid, parsed.problems
    hpl = next(m for m in parsed.measurements if m.benchmark == "compute.hpl")
    assert hpl.valid and hpl.value > 0 and hpl.parameters["n"] == 1000 and hpl.parameters["nb"] == 64
    assert 0 <= hpl.parameters["scaled_residual"] < HPL_THRESHOLD
    assert parsed.configuration["comm_world_procs"] == 1
    assert not list(tmp_path.glob("oddnode-hpcc-*"))  # hpcc's private directory is gone


# --- through the runner -----------------------------------------------------------------


def test_dgemm_spec_runs_on_the_local_node_through_the_runner(kernel_env, store, monkeypatch):
    # The local transport inherits this process's environment: a private build cache.
    for name in set(os.environ) - set(kernel_env):
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CACHE_HOME", kernel_env["XDG_CACHE_HOME"])
    spec = dgemm_benchmark(n=ORDER, ntimes=NTIMES)
    assert spec.stage == COMPUTE_STAGE and spec.name == "dgemm"
    node = local_node_name()
    summary = run_benchmark(store, Target([node], get_transport("local")), spec, repetitions=2, timeout=300)

    assert summary.per_node[node]["ok"] == 2, store.con.execute("SELECT detail FROM node_status").fetchall()
    rows = store.con.execute(
        "SELECT benchmark, metric, unit, count(*), bool_and(valid) FROM results GROUP BY ALL"
    ).fetchall()
    assert rows == [("compute.dgemm", "performance", "GFLOP/s", 2, True)]
    params = json.loads(store.con.execute("SELECT parameters FROM results LIMIT 1").fetchone()[0])
    assert params["n"] == ORDER and params["blas"] and params["compiler"] and params["cache_key"]
