"""The memory kernel built and run for real on this machine through the node
runner (the argv a transport would send), its cache, its validation, its
errors; the array-length decision on synthetic cache topologies; the parser
on genuine and broken output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oddnode.reach.jobs import (
    PREPARE_OPTION,
    kernel_source,
    parse_runner_output,
    runner_argv,
    start_option,
    start_timing,
    with_runner_options,
)
from oddnode.measure.node.memory import MIN_ELEMENTS, default_elements, last_level_cache_bytes, memory_kernel_argv
from oddnode.parsers.oddnode_memory import MEMORY_KERNELS, parse_memory_output
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError, get_parser

ELEMENTS = 2_000_000
NTIMES = 3


def _check_openmp(tmp: Path) -> str | None:
    """Why the kernel cannot be built here, or None when `cc -fopenmp` works."""
    if shutil.which("cc") is None:
        return "no 'cc' on PATH"
    source = tmp / "omp_check.c"
    source.write_text("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
    built = subprocess.run(
        ["cc", "-fopenmp", "-o", str(tmp / "omp_check"), str(source)], capture_output=True, text=True
    )
    if built.returncode != 0:
        return f"'cc -fopenmp' cannot build an OpenMP program: {built.stderr.strip()[:200]}"
    return None


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """An environment whose build cache is private to this module's tests."""
    tmp = tmp_path_factory.mktemp("memory_kernel")
    problem = _check_openmp(tmp)
    if problem:
        pytest.skip(f"the memory kernel needs a C compiler with OpenMP: {problem}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    return env


def run_argv(argv: list[str], env: dict[str, str]):
    completed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return parse_runner_output("localhost", completed.stdout)


def with_interpreter(argv: list[str]) -> list[str]:
    """The same argv run by this interpreter: the runner is stdlib-only."""
    return [sys.executable] + argv[1:]


@pytest.fixture(scope="module")
def first_two_runs(kernel_env):
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES))
    return run_argv(argv, kernel_env), run_argv(argv, kernel_env)


# --- the real kernel ----------------------------------------------------------------


def test_kernel_runs_validates_and_reports_four_bandwidths(first_two_runs):
    report = first_two_runs[0]
    assert report.built is True and report.build_seconds > 0
    assert report.returncode == 0, report.stderr
    assert report.flags[:3] == ["-O3", "-march=native", "-fopenmp"]
    assert report.compiler and report.cpu_model and len(report.cache_key) == 64

    parsed = parse_memory_output(report.stdout, "localhost")
    assert parsed.valid and parsed.problems == []
    assert [m.benchmark for m in parsed.measurements] == [f"memory.{k}" for k in MEMORY_KERNELS]
    for measurement in parsed.measurements:
        assert measurement.metric == "bandwidth"
        assert measurement.unit == "MB/s" and measurement.direction is Direction.HIGHER
        assert measurement.value > 0 and measurement.valid
        params = measurement.parameters
        assert params["elements"] == ELEMENTS and params["ntimes"] == NTIMES
        assert params["proc_bind"] == "spread"
        assert 0 < params["min_time_s"] <= params["avg_time_s"] <= params["max_time_s"]
    config = parsed.configuration
    assert config["elements"] == ELEMENTS
    assert config["bytes_per_array"] == ELEMENTS * 8
    assert config["threads_counted"] == len(os.sched_getaffinity(0))
    assert parsed.measurements[0].parameters["threads"] == config["threads_counted"]
    assert config["proc_bind"] == "spread"
    assert config["timer_granularity_ns"] > 0
    assert config["cflags"] == "-O3 -march=native -fopenmp"
    assert len(config["thread_cpus"].split(",")) == config["threads_counted"]


def test_second_run_reuses_the_cached_build(first_two_runs):
    first, second = first_two_runs
    assert second.built is False and second.build_seconds is None
    assert second.cache_key == first.cache_key
    assert parse_memory_output(second.stdout, "localhost").valid


def test_a_changed_flag_rebuilds(kernel_env, first_two_runs):
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES, cflags=["-funroll-loops"]))
    report = run_argv(argv, kernel_env)
    assert report.built is True
    assert report.cache_key != first_two_runs[0].cache_key
    assert "-funroll-loops" in report.flags
    parsed = parse_memory_output(report.stdout, "localhost")
    assert parsed.valid and "-funroll-loops" in parsed.configuration["cflags"]


def test_thread_count_is_set_and_read_back(kernel_env):
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES, threads=1, proc_bind="close"))
    parsed = parse_memory_output(run_argv(argv, kernel_env).stdout, "localhost")
    assert parsed.configuration["threads_counted"] == 1
    assert parsed.configuration["proc_bind"] == "close"
    assert all(m.parameters["threads"] == 1 for m in parsed.measurements)


@pytest.mark.timing  # the loop's time: a pass calibrated while the machine was busy runs shorter after
def test_a_minimum_loop_time_repeats_each_pass_and_keeps_the_values(kernel_env):
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES, threads=1, min_loop_seconds=0.05))
    parsed = parse_memory_output(run_argv(argv, kernel_env).stdout, "localhost")
    assert parsed.valid  # the passes are idempotent: one pass's values, validated as such
    assert parsed.configuration["min_loop_seconds"] == 0.05
    passes = parsed.configuration["passes"].split()
    assert passes[0::2] == list(MEMORY_KERNELS) and all(int(count) >= 1 for count in passes[1::2])
    for m in parsed.measurements:
        # A timed loop of several passes: about 0.05 s, far above one pass.
        assert m.parameters["min_loop_seconds"] == 0.05 and m.parameters["passes"] == parsed.configuration["passes"]
        assert m.parameters["min_time_s"] > 0.01


def test_a_time_budget_cuts_the_loops_and_iterations_and_keeps_the_values(kernel_env):
    # Unbounded, loops of 60 s would make this run last 8 minutes at least.
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, 10, threads=1, min_loop_seconds=60, max_seconds=0.5))
    started = time.monotonic()
    parsed = parse_memory_output(run_argv(argv, kernel_env).stdout, "localhost")
    assert time.monotonic() - started < 120
    assert parsed.valid  # the values of the iterations that ran, validated as such
    assert parsed.configuration["max_seconds"] == 0.5 and parsed.configuration["iterations_run"] == 2
    for m in parsed.measurements:
        assert m.parameters["iterations_run"] == 2 and m.parameters["max_seconds"] == 0.5
        # A cut loop's time is scaled to the passes it was given: the rate is per pass.
        assert m.parameters["min_time_s"] > 10 and m.value > 0


def test_a_time_budget_the_run_fits_in_cuts_nothing(kernel_env):
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES, threads=1, max_seconds=3600))
    parsed = parse_memory_output(run_argv(argv, kernel_env).stdout, "localhost")
    assert parsed.valid and parsed.configuration["iterations_run"] == NTIMES


def test_a_corrupted_element_fails_validation(kernel_env):
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES, defines=["ODDNODE_CORRUPT_ELEMENT=12345"]))
    report = run_argv(argv, kernel_env)
    assert report.returncode == 0  # the kernel ran; judging it is the parser's job
    assert report.stdout.rstrip().splitlines()[-1].startswith("validation failed triad ")
    parsed = parse_memory_output(report.stdout, "localhost")
    assert not parsed.valid
    assert all(not m.valid for m in parsed.measurements)
    assert len(parsed.problems) == 1
    assert "triad" in parsed.problems[0] and "1.000000e-06" in parsed.problems[0]
    assert parsed.configuration["validation_error"] == pytest.approx(1e-6, rel=1e-3)
    assert parsed.configuration["corrupt_element"] == 12345


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["-n", "0"], "-n wants"),
        (["-n", "12abc"], "-n wants"),
        (["-t", "1"], "-t wants"),
        (["-m", "61"], "-m wants seconds, 0-60"),
        (["-m", "soon"], "-m wants seconds, 0-60"),
        (["-s", "-1"], "-s wants seconds, 0-86400"),
        (["-s", "later"], "-s wants seconds, 0-86400"),
        (["--bogus"], "unknown option"),
        (["-n", "1000", "extra"], "unexpected argument"),
    ],
)
def test_bad_arguments_exit_2(kernel_env, args, complaint):
    report = run_argv(with_interpreter(runner_argv("memory", args)), kernel_env)
    assert report.returncode == 2
    assert complaint in report.stderr and "usage:" in report.stderr
    assert report.stdout == ""


def test_python_side_refuses_bad_arguments():
    with pytest.raises(ValueError, match="elements"):
        memory_kernel_argv(0)
    with pytest.raises(ValueError, match="ntimes"):
        memory_kernel_argv(ELEMENTS, ntimes=1)
    with pytest.raises(ValueError, match="threads"):
        memory_kernel_argv(ELEMENTS, threads=0)
    with pytest.raises(ValueError, match="min_loop_seconds"):
        memory_kernel_argv(ELEMENTS, min_loop_seconds=-1)
    with pytest.raises(ValueError, match="max_seconds"):
        memory_kernel_argv(ELEMENTS, max_seconds=-1)


def test_a_compile_error_is_a_clean_runner_error(kernel_env):
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES, defines=["1NOT_AN_IDENTIFIER"]))
    completed = subprocess.run(argv, capture_output=True, text=True, env=kernel_env, timeout=300)
    assert completed.returncode == 0
    assert "Traceback" not in completed.stdout + completed.stderr
    with pytest.raises(ParseError, match="compile failed") as caught:
        parse_runner_output("node7", completed.stdout)
    assert "macro names must be identifiers" in str(caught.value) or "1NOT_AN_IDENTIFIER" in str(caught.value)
    assert caught.value.source == "node7"


def test_concurrent_first_runs_share_one_build(kernel_env, tmp_path):
    env = dict(kernel_env, XDG_CACHE_HOME=str(tmp_path / "shared-cache"))
    argv = with_interpreter(memory_kernel_argv(ELEMENTS, NTIMES, threads=1))
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    reports = [parse_runner_output("n", run.communicate(timeout=300)[0]) for run in runs]
    assert all(parse_memory_output(r.stdout, "n").valid for r in reports)
    assert reports[0].cache_key == reports[1].cache_key
    (build_dir,) = (tmp_path / "shared-cache" / "oddnode" / "kernels").iterdir()
    assert sorted(p.name for p in build_dir.iterdir()) == ["memory", "memory.c"]  # no temporaries left


def test_prepare_builds_and_runs_nothing(kernel_env, tmp_path):
    env = dict(kernel_env, XDG_CACHE_HOME=str(tmp_path / "cache"))
    argv = with_interpreter(with_runner_options(memory_kernel_argv(ELEMENTS, NTIMES), PREPARE_OPTION))
    report = json.loads(subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300).stdout)
    assert report["prepared"] is True and report["built"] is True
    assert "stdout" not in report and "returncode" not in report
    assert start_timing(json.dumps(report)).start_at is None
    (build_dir,) = (tmp_path / "cache" / "oddnode" / "kernels").iterdir()
    assert (build_dir / "memory").exists()


@pytest.mark.timing
def test_a_start_time_holds_the_run_until_then(kernel_env, first_two_runs):
    start_at = time.time() + 2.0
    argv = with_interpreter(with_runner_options(memory_kernel_argv(ELEMENTS, NTIMES), start_option(start_at)))
    completed = subprocess.run(argv, capture_output=True, text=True, env=kernel_env, timeout=300)
    finished = time.time()
    timing = start_timing(completed.stdout)
    assert timing.start_at == pytest.approx(start_at, abs=1e-3)
    assert timing.launched <= timing.arrived < start_at < finished
    assert timing.late == 0.0
    assert parse_memory_output(parse_runner_output("n", completed.stdout).stdout, "n").valid


@pytest.mark.parametrize(("option", "complaint"), [
    ("--start-at=soon", "could not convert"),
    (f"--start-at={10**12}", "more than 3600 s ahead"),
    ("--frobnicate", "unknown option"),
])
def test_bad_runner_options_are_a_clean_error(kernel_env, option, complaint):
    argv = with_interpreter(with_runner_options(memory_kernel_argv(ELEMENTS, NTIMES), option))
    completed = subprocess.run(argv, capture_output=True, text=True, env=kernel_env, timeout=300)
    with pytest.raises(ParseError, match=complaint):
        parse_runner_output("n", completed.stdout)


def test_runner_options_go_before_the_job():
    argv = memory_kernel_argv(ELEMENTS, NTIMES)
    with_options = with_runner_options(argv, PREPARE_OPTION, start_option(12.0))
    assert with_options[-1] == argv[-1] and with_options[:5] == argv[:5]
    assert with_options[5:7] == [PREPARE_OPTION, "--start-at=12.000"]
    with pytest.raises(ValueError, match="no -c"):
        with_runner_options(["fio", "job.fio"], PREPARE_OPTION)


# --- how long the arrays must be -------------------------------------------------


@pytest.mark.parametrize(
    ("llc_bytes", "elements"),
    [
        (0, MIN_ELEMENTS),  # cache unknown: the floor
        (8 * 1024**2, MIN_ELEMENTS),  # 4 x 8 MiB = 4 Mi doubles, under the floor
        (32 * 1024**2, 16 * 1024**2),  # 4 x 32 MiB / 8 bytes
        (105 * 1024**2, 55_050_240),
        (2 * 256 * 1024**2, 256 * 1024**2),  # two sockets of 256 MiB L3
        (1_000_000_003, 500_000_002),  # rounded up, never down
    ],
)
def test_default_elements(llc_bytes, elements):
    assert default_elements(llc_bytes) == elements
    assert default_elements(llc_bytes) * 8 >= 4 * llc_bytes


def _cache(root: Path, cpu: int, index: int, level: int, kind: str, size: str, shared: str) -> None:
    directory = root / f"cpu{cpu}" / "cache" / f"index{index}"
    directory.mkdir(parents=True)
    for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
        (directory / name).write_text(f"{value}\n")


def test_last_level_cache_sums_instances_of_the_highest_level(tmp_path):
    # Two sockets of two cores: private L1d/L1i/L2, one L3 per socket.
    for cpu in range(4):
        socket_cpus = "0-1" if cpu < 2 else "2-3"
        _cache(tmp_path, cpu, 0, 1, "Data", "48K", str(cpu))
        _cache(tmp_path, cpu, 1, 1, "Instruction", "32K", str(cpu))
        _cache(tmp_path, cpu, 2, 2, "Unified", "2048K", str(cpu))
        _cache(tmp_path, cpu, 3, 3, "Unified", "105M", socket_cpus)
    (tmp_path / "cpufreq").mkdir()  # not a cpuN directory
    assert last_level_cache_bytes(tmp_path) == 2 * 105 * 1024**2


def test_last_level_cache_ignores_instruction_caches_and_reads_nothing_as_zero(tmp_path):
    _cache(tmp_path, 0, 0, 1, "Data", "32K", "0")
    _cache(tmp_path, 0, 1, 2, "Instruction", "64K", "0")
    assert last_level_cache_bytes(tmp_path) == 32 * 1024
    assert last_level_cache_bytes(tmp_path / "missing") == 0


def test_last_level_cache_of_this_machine_is_plausible():
    if not Path("/sys/devices/system/cpu/cpu0/cache").is_dir():
        pytest.skip("no cache information in /sys on this machine")
    assert last_level_cache_bytes() >= 32 * 1024


# --- parsing ------------------------------------------------------------------------

GOOD = """\
# oddnode memory kernel v1
# elements: 2000000
# bytes_per_element: 8
# bytes_per_array: 16000000
# ntimes: 3
# threads_requested: 2
# threads_counted: 2
# proc_bind: spread
# places: 2
# thread_cpus: 0,1
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 37
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp
# scalar: 0.41421356237309503
# warning: copy best time 5.000e-07 s is only 13 timer ticks (< 20); increase -n for a trustworthy rate
result copy 23542.845 0.001373403 0.001359224 0.001387583
result scale 24801.607 0.001427223 0.001290239 0.001564206
result add 28333.612 0.002063857 0.001694101 0.002433613
result triad 28985.227 0.001703753 0.001656016 0.001751491
# tolerance: 5.329e-15
# max_relative_error: a(triad) 0.000e+00 b(scale) 0.000e+00 c(add) 0.000e+00
validation ok
"""


def test_parse_genuine_output():
    parsed = parse_memory_output(GOOD, "n1")
    assert parsed.tool == "oddnode-memory" and parsed.valid
    triad = parsed.measurements[3]
    assert triad.benchmark == "memory.triad" and triad.value == pytest.approx(28985.227)
    assert triad.parameters["min_time_s"] == pytest.approx(0.001656016)
    assert parsed.configuration["timer_granularity_ns"] == 37
    assert parsed.configuration["timer_warnings"][0].startswith("copy best time")


def test_registered_parser_wraps_it():
    assert get_parser("oddnode-memory")(GOOD, "n1") == parse_memory_output(GOOD, "n1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not oddnode memory kernel output"),
        ("Segmentation fault\n", "not oddnode memory kernel output"),
        (GOOD.replace("v1", "v9"), "unsupported kernel version"),
        (GOOD.split("result add")[0], "no result line for add, triad"),
        (GOOD.replace("validation ok\n", ""), "no validation line"),
        (GOOD.replace("result scale 24801.607", "result scale fast"), "expected a number"),
        (GOOD.replace("validation ok", "validation maybe"), "unexpected line"),
        (GOOD.replace("# threads_counted: 2\n", ""), "threads_counted"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse_memory_output(text, "n1")


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "no output"),
        ("Welcome to node1\nhello\n", "not a kernel runner report"),
        ('{"runner_version": 2, "built": true}', "runner version 2"),
        ('{"runner_version": 1, "built": true}', "incomplete"),
        ('{"runner_version": 1, "error": "no compiler", "detail": "cc: not found"}', "no compiler"),
    ],
)
def test_runner_output_errors(stdout, message):
    with pytest.raises(ParseError, match=message):
        parse_runner_output("n1", stdout)


@pytest.mark.parametrize("kernel", ["memory", "dgemm", "disk", "pingpong"])
def test_the_source_sent_to_nodes_holds_the_shared_header(kernel):
    source = kernel_source(kernel)
    assert '#include "' not in source  # one self-contained file: the header is pasted in
    assert "static inline long long timer_granularity_ns(void)" in source
    assert source.count("static inline double now_seconds(void)") == 1


@pytest.mark.parametrize("kernel", ["pingpong", "alltoall"])
def test_the_network_kernels_carry_the_shared_network_header(kernel):
    source = kernel_source(kernel)
    assert '#include "' not in source
    assert source.count("static inline int connect_until(") == 1
    assert source.count("static inline long long parse_count(") == 1
