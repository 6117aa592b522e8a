"""The OS-noise kernel (``noise.c``): fixed work quanta on every CPU of
every node at once, the time the operating system took from them (lost
fraction, detours and their sizes), and the dominant period of that lost
time (the spectrum of the FTQ series); its argv and the check's noise step.
The parser of its output, the spectrum included, is
``oddnode.parsers.oddnode_noise``.

A node whose lost time stands out is what seaborg's old nodes were:
identical in every serial benchmark, slower in every synchronising code,
because something on them interrupted the CPUs every few tens of
milliseconds (docs/kernels.md#how-to-read-a-noise-spectrum).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oddnode.measure.benchmarks import BenchmarkSpec, parse_kernel_run
from oddnode.reach.jobs import DEFAULT_TIMEOUT, runner_argv
from oddnode.readings.noise_series import NOISE
from oddnode.parsers.base import ParsedOutput
from oddnode.parsers.oddnode_noise import NOISE_SERIES, parse_noise_output
from oddnode.measure.steps import NodeBenchmark, option

NOISE_STAGE = "noise"
DEFAULT_SECONDS = 10.0
# 10 us quanta: a clock read (20-50 ns) costs well under 1% of one, and a
# 1 us timer interrupt lengthens one by 10%, clear of its own jitter.
DEFAULT_QUANTUM_NS = 10_000
# Detours printed at most per node (about 25 bytes each, kept in the store
# with every run): 20,000 hold a 10 s run with 100 detours a second on each
# of 20 CPUs; beyond, each CPU's list is cut and the spectrum is taken over
# the part of the run that every CPU's list covers.
DEFAULT_EVENTS = 20_000
# Bounds of the kernel's options (noise.c checks them too).
SECONDS_RANGE = (0.1, 3600.0)
QUANTUM_RANGE = (100, 100_000_000)
MAX_EVENTS = 10_000_000
DUTY_RANGE = (0.001, 1.0)
# pthreads: in libc from glibc 2.34 on, which keeps an empty stub to link.
NOISE_LDLIBS = ("-lpthread",)


def _parse_noise_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report, then the noise kernel's stdout inside it."""
    return parse_kernel_run(text, source, "noise", parse_noise_output)


# --- the argv and the step --------------------------------------------------------


def noise_kernel_argv(
    seconds: float = DEFAULT_SECONDS,
    quantum_ns: int = DEFAULT_QUANTUM_NS,
    cpus: Sequence[int] | None = None,
    events: int = DEFAULT_EVENTS,
    duty: float = 1.0,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that runs the noise kernel on a node: ``seconds`` of quanta
    of ``quantum_ns`` on every CPU the kernel may use, or on ``cpus``, each
    thread working ``duty`` of the time (below 1: in bursts at random
    moments, so that the kernel stays within a CPU quota)."""
    low, high = SECONDS_RANGE
    if not low <= seconds <= high:
        raise ValueError(f"seconds must be {low:g} to {high:g}, got {seconds:g}")
    low_q, high_q = QUANTUM_RANGE
    if not low_q <= quantum_ns <= high_q:
        raise ValueError(f"quantum_ns must be {low_q} to {high_q}, got {quantum_ns}")
    if not 0 <= events <= MAX_EVENTS:
        raise ValueError(f"events must be 0 to {MAX_EVENTS}, got {events}")
    low_d, high_d = DUTY_RANGE
    if not low_d <= duty <= high_d:
        raise ValueError(f"duty must be {low_d:g} to {high_d:g}, got {duty:g}")
    args = ["-s", f"{seconds:g}", "-q", str(quantum_ns), "-e", str(events)]
    if duty < 1.0:
        args += ["-d", f"{duty:g}"]
    if cpus is not None:
        if not cpus or any(cpu < 0 for cpu in cpus) or len(set(cpus)) != len(cpus):
            raise ValueError(f"cpus must be distinct CPU numbers >= 0, got {list(cpus)}")
        args += ["-c", ",".join(str(cpu) for cpu in cpus)]
    # The node runner's own limit never cuts a long run short: the warm-up,
    # the calibration and the output take seconds beyond the measurement.
    timeout = max(timeout, 2.0 * seconds + 60.0)
    return runner_argv("noise", args, cflags=cflags, defines=defines, ldlibs=NOISE_LDLIBS,
                       timeout=timeout, interpreter=interpreter)


# Under a CPU quota (a container, the testbed's nodes) the kernel's threads
# together use this share of a node's quota.  A burst's window is at least
# as long as a burst over this share, so that the bursts in any stretch of
# time the length of the quota's period never take the whole quota (one
# burst per window, never bunched); the rest, 40%, is the node's headroom:
# what else runs there (its daemons, its agents) may use it before the node
# is throttled and its kernel threads lose time.
CAPPED_USE = 0.6


def capped_noise_options(cpu_share: float, cpus: int) -> dict[str, Any]:
    """The noise step's options for nodes capped at ``cpu_share`` CPUs'
    worth of time, with ``cpus`` CPUs each: a duty that makes the kernel's
    threads (one per CPU) use CAPPED_USE of it."""
    if not cpu_share > 0 or cpus < 1:
        raise ValueError(f"a node's CPU share must be > 0 and its CPUs >= 1, got {cpu_share:g} and {cpus}")
    low, high = DUTY_RANGE
    return {"duty": round(min(high, max(low, CAPPED_USE * cpu_share / cpus)), 4)}


@dataclass(frozen=True)
class NoiseOptions:
    """The noise kernel's options: ``seconds`` measured on every CPU at once,
    quanta of ``quantum_ns``, ``cpus`` the CPUs to measure (None: every CPU
    the kernel may use on each node), at most ``events`` detours kept per node."""

    seconds: float = option(DEFAULT_SECONDS, help="Seconds the noise kernel measures, on every CPU of every node at once",
                            check="seconds")
    quantum_ns: int = DEFAULT_QUANTUM_NS
    cpus: tuple[int, ...] | None = None
    events: int = DEFAULT_EVENTS
    duty: float = 1.0


class NoiseStep(NodeBenchmark):
    """The OS-noise kernel on every CPU of every node at once."""

    name = "noise"
    stage = NOISE_STAGE
    options = NoiseOptions
    series = (NOISE,)
    summary = "time the OS takes from fixed work quanta on every CPU, its detours and their period"

    def spec(self, options: NoiseOptions) -> BenchmarkSpec:
        return BenchmarkSpec(
            name=self.name,
            stage=self.stage,
            argv=noise_kernel_argv(options.seconds, options.quantum_ns, options.cpus, options.events, options.duty),
            parse=_parse_noise_run,
            series=NOISE_SERIES,
            synchronized=True,
        )


def noise_benchmark(*args, **options) -> BenchmarkSpec:
    """The noise kernel as a benchmark, with NoiseOptions' fields."""
    return NoiseStep().spec(NoiseOptions(*args, **options))
