"""The noise kernel built and run for real on this machine through the node
runner (short runs): its threads pinned one to a CPU, -c, the duty cycle,
the event limit and its cut, bad arguments; the parser on saved real
outputs (tests/fixtures/noise/) and on truncated or garbled ones, which
fail naming the line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from support.cli import FIXTURES
from oddnode.reach.jobs import parse_runner_output, runner_argv
from oddnode.measure.node.noise import NoiseStep, NoiseOptions, noise_kernel_argv
from oddnode.parsers.oddnode_noise import CPU_COLUMNS, parse_noise_output, read_noise_output
from oddnode.readings.noise_series import DETOUR_MAX, DETOUR_RATE, LOST_FRACTION
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError, get_parser

NOISE_FIXTURES = FIXTURES / "noise"
SECONDS = 0.5


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """An environment whose build cache is private to this module's tests."""
    if shutil.which("cc") is None:
        pytest.skip("the noise kernel needs a C compiler ('cc')")
    tmp = tmp_path_factory.mktemp("noise_kernel")
    return {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}


def run(argv: list[str], env: dict[str, str]):
    completed = subprocess.run([sys.executable] + argv[1:], capture_output=True, text=True, env=env, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return parse_runner_output("localhost", completed.stdout)


@pytest.fixture(scope="module")
def every_cpu(kernel_env):
    report = run(noise_kernel_argv(SECONDS), kernel_env)
    assert report.returncode == 0, report.stderr
    return report


# --- the real kernel ----------------------------------------------------------------


@pytest.mark.timing
def test_one_pinned_thread_per_cpu_and_three_series(every_cpu):
    assert every_cpu.flags[:3] == ["-O3", "-march=native", "-fopenmp"]
    run_ = read_noise_output(every_cpu.stdout, "localhost")
    allowed = sorted(os.sched_getaffinity(0))
    assert [c.cpu for c in run_.cpus] == allowed
    assert all(c.observed_cpu == c.cpu for c in run_.cpus)  # each stayed where it was pinned
    for cpu in run_.cpus:
        # Contiguous quanta: the measured time is the run's, the quanta fill it.
        assert cpu.elapsed_ns == pytest.approx(SECONDS * 1e9, rel=0.01)
        assert cpu.quanta * cpu.baseline_ns <= cpu.elapsed_ns
        assert cpu.threshold_ns >= max(1000, cpu.baseline_ns // 10)
        assert 0 <= cpu.lost_ns < cpu.elapsed_ns and cpu.wakeups == 0
    parsed = parse_noise_output(every_cpu.stdout, "localhost")
    assert parsed.valid and parsed.problems == []
    assert [(m.benchmark, m.unit, m.direction) for m in parsed.measurements] == [
        (LOST_FRACTION, "%", Direction.LOWER), (DETOUR_RATE, "1/s", Direction.LOWER),
        (DETOUR_MAX, "us", Direction.LOWER)]
    lost = parsed.measurements[0]
    assert lost.value == pytest.approx(100.0 * run_.lost_fraction)
    assert lost.parameters["cpus"] == len(allowed) and lost.parameters["seconds"] == SECONDS
    assert {"period_ms", "period_share", "detour_median_us", "detour_lost_median_us", "detour_max_us",
            "detours"} <= set(lost.parameters)
    config = parsed.configuration
    assert config["quantum_ns"] == 10_000 and config["timer_granularity_ns"] > 0
    assert config["timer_cost_ns"] < config["quantum_ns"] / 20  # the clock read costs under 5% of a quantum


def test_c_restricts_the_cpus(kernel_env):
    cpu = max(os.sched_getaffinity(0))
    run_ = read_noise_output(run(noise_kernel_argv(SECONDS, cpus=[cpu]), kernel_env).stdout, "localhost")
    assert run_.configuration["cpus"] == 1 and run_.configuration["cpu_list"] == str(cpu)
    assert [(c.cpu, c.observed_cpu) for c in run_.cpus] == [(cpu, cpu)]


@pytest.mark.timing
def test_a_duty_below_one_works_in_bursts_and_wants_that_share_of_the_time(kernel_env):
    cpu = max(os.sched_getaffinity(0))
    report = run(noise_kernel_argv(1.0, cpus=[cpu], duty=0.1), kernel_env)
    run_ = read_noise_output(report.stdout, "localhost")
    (entry,) = run_.cpus
    assert run_.configuration["duty"] == 0.1 and run_.configuration["burst_ns"] == 200_000
    assert entry.wakeups > 100 and entry.wake_baseline_ns > 0
    # About a tenth of the second wanted (bursts, plus each wake-up's lateness).
    assert 0.05e9 < entry.elapsed_ns < 0.3e9
    assert parse_noise_output(report.stdout, "localhost").valid


@pytest.mark.timing
def test_the_event_limit_cuts_each_cpus_detours_and_says_so(kernel_env):
    report = run(noise_kernel_argv(SECONDS, events=2 * len(os.sched_getaffinity(0))), kernel_env)
    run_ = read_noise_output(report.stdout, "localhost")
    for cpu in run_.cpus:
        assert cpu.events <= 2
    cut = [c for c in run_.cpus if c.events < c.detours]
    assert run_.configuration["events_cut"] == len(cut)
    for cpu in cut:
        assert cpu.complete_ns < cpu.elapsed_ns
        assert any(w.startswith(f"cpu {cpu.cpu}: {cpu.events} of {cpu.detours} detours printed") for w in run_.warnings)
    assert len(run_.series()) == int(run_.complete_ns * 1e-9 / 0.0005 + 1e-9)


@pytest.mark.parametrize(("args", "complaint"), [
    (["-s", "0"], "-s wants seconds"),
    (["-q", "50"], "-q wants nanoseconds"),
    (["-c", "1,1"], "-c wants a comma list"),
    (["-c", "1023"], "is not one this process may use"),
    (["-d", "2"], "-d wants a fraction"),
    (["-e", "-1"], "-e wants"),
    (["--bogus"], "unknown option"),
    (["-s", "1", "extra"], "unexpected argument"),
])
def test_bad_arguments_exit_2(kernel_env, args, complaint):
    report = run(runner_argv("noise", args, ldlibs=("-lpthread", "-lm")), kernel_env)
    assert report.returncode == 2
    assert complaint in report.stderr and report.stdout == ""


def test_python_side_refuses_bad_arguments():
    for kwargs, name in (({"seconds": 0}, "seconds"), ({"quantum_ns": 10}, "quantum_ns"), ({"events": -1}, "events"),
                         ({"cpus": []}, "cpus"), ({"cpus": [1, 1]}, "cpus"), ({"duty": 0}, "duty")):
        with pytest.raises(ValueError, match=name):
            noise_kernel_argv(**kwargs)
    with pytest.raises(ValueError, match="duty"):
        NoiseStep().check(NoiseOptions(duty=1.5))


def test_a_failed_run_is_a_parse_error_with_the_kernels_message(kernel_env):
    spec = NoiseStep().spec(NoiseOptions(seconds=SECONDS, cpus=(1023,)))
    completed = subprocess.run([sys.executable] + spec.argv[1:], capture_output=True, text=True, env=kernel_env)
    with pytest.raises(ParseError, match="noise kernel exited with status 2: error: -c: CPU 1023"):
        spec.parse(completed.stdout, "node07")


# --- the parser on saved real outputs -------------------------------------------------


def fixture(name: str) -> str:
    return (NOISE_FIXTURES / name).read_text(encoding="utf-8")


def test_the_parser_is_registered_for_imports():
    assert get_parser("oddnode-noise") is parse_noise_output


def test_a_saved_run_of_every_cpu():
    parsed = parse_noise_output(fixture("two_cpus.out"), "two_cpus.out")
    run_ = read_noise_output(fixture("two_cpus.out"), "two_cpus.out")
    assert parsed.valid and run_.configuration["cpus"] == 2 and len(run_.cpus) == 2
    assert run_.configuration["events_cut"] == 0
    assert len(run_.detour_lost_ns) == sum(c.detours for c in run_.cpus)
    assert run_.detour_median_ns == pytest.approx(np.median(run_.detour_lost_ns))
    lost = parsed.measurements[0]
    assert lost.value == pytest.approx(100.0 * sum(c.lost_ns for c in run_.cpus) / sum(c.elapsed_ns for c in run_.cpus))


def test_a_saved_run_whose_detours_were_cut():
    run_ = read_noise_output(fixture("cut.out"), "cut.out")
    assert run_.configuration["events_cut"] >= 1 and run_.warnings
    assert run_.complete_ns < max(c.elapsed_ns for c in run_.cpus)
    # Cut lists: the median comes from the CPUs' own histograms.
    assert run_.detour_median_ns in {float(c.median_ns) for c in run_.cpus} or run_.detour_median_ns > 0
    assert parse_noise_output(fixture("cut.out"), "cut.out").valid


def test_a_saved_run_with_an_injected_period():
    # bench/noise_kernel.py's injector: 1 ms stolen every 20 ms on the measured core.
    parsed = parse_noise_output(fixture("injected_20ms.out"), "injected_20ms.out")
    parameters = parsed.measurements[0].parameters
    assert parameters["period_ms"] == pytest.approx(20.0, rel=0.05)
    assert parameters["period_share"] > 0.1 and parameters["period_harmonics"] >= 2
    # Half of the lost time is in the injected 1 ms detours; the plain
    # median is the core's microsecond interrupts.
    assert parameters["detour_lost_median_us"] == pytest.approx(1000.0, rel=0.2)
    assert parameters["detour_median_us"] < 100.0


def test_a_saved_duty_cycled_run():
    run_ = read_noise_output(fixture("duty.out"), "duty.out")
    assert run_.configuration["duty"] < 1 and all(c.wakeups > 0 for c in run_.cpus)
    assert parse_noise_output(fixture("duty.out"), "duty.out").valid


@pytest.mark.parametrize("name", ["two_cpus.out", "cut.out", "duty.out"])
def test_truncated_outputs_name_the_place(name):
    text = fixture(name)
    lines = text.splitlines(keepends=True)
    banner = next(i for i, line in enumerate(lines) if line.startswith("# oddnode noise kernel"))
    first_cpu = next(i for i, line in enumerate(lines) if line.startswith("cpu "))
    last = len(lines) - 1
    for cut in sorted({banner + 3, first_cpu, first_cpu + 1, last - 1, last}):
        shortened = "".join(lines[:cut])
        with pytest.raises(ParseError) as error:
            parse_noise_output(shortened, name)
        assert error.value.source == name
        message = str(error.value)
        assert ("truncated" in message or "lacks" in message or "no end line" in message
                or "detour lines follow" in message), message


@pytest.mark.parametrize(("change", "expected"), [
    (lambda text: text.replace("\ncpu ", "\ncpu x", 1), "expected a whole number"),
    (lambda text: text.replace("\ndetour ", "\ndetour 0 12\ndetour ", 1), "a detour line has 2 fields"),
    (lambda text: text.replace("\nend ", "\ngarbage here\nend ", 1), "unexpected line in noise kernel output"),
    (lambda text: text.replace("# cpu_columns: cpu ", "# cpu_columns: processor ", 1), "names its cpu_columns"),
    (lambda text: text + "cpu 0 0 1 1 1 1 1 0.1 1 1 1 0 1 0 0\n", "goes on after its end line"),
    (lambda text: text.replace("# oddnode noise kernel v1", "# oddnode noise kernel v9", 1),
     "unsupported kernel version"),
    (lambda text: text.replace("# oddnode noise kernel v1", "# something else", 1), "not oddnode noise kernel output"),
])
def test_garbled_outputs_name_the_line(change, expected):
    text = change(fixture("two_cpus.out"))
    with pytest.raises(ParseError, match=expected) as error:
        parse_noise_output(text, "two_cpus.out")
    if "kernel output:" not in expected and "not oddnode" not in expected:
        assert error.value.line is not None


def test_a_cpu_line_that_contradicts_itself_is_refused():
    lines = fixture("two_cpus.out").splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("cpu "))
    fields = lines[index].split()
    fields[1 + CPU_COLUMNS.index("lost_ns")] = str(int(fields[1 + CPU_COLUMNS.index("elapsed_ns")]) + 1)
    lines[index] = " ".join(fields)
    with pytest.raises(ParseError, match="contradict") as error:
        parse_noise_output("\n".join(lines) + "\n", "two_cpus.out")
    assert error.value.line == index + 1


def test_a_thread_that_left_its_cpu_makes_the_run_invalid():
    lines = fixture("two_cpus.out").splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("cpu "))
    fields = lines[index].split()
    fields[2] = str(int(fields[1]) + 1)  # observed elsewhere
    lines[index] = " ".join(fields)
    parsed = parse_noise_output("\n".join(lines) + "\n", "two_cpus.out")
    assert not parsed.valid and "was not pinned" in parsed.problems[0]
    assert all(not m.valid for m in parsed.measurements)
