"""The parser of our OS-noise kernel's output (``noise.c``, tool name
``oddnode-noise``): each CPU's lost time and detours, read strictly, and the
dominant period of the node's lost time (the spectrum of its FTQ series).

A node whose lost time stands out is what seaborg's old nodes were:
identical in every serial benchmark, slower in every synchronising code,
because something on them interrupted the CPUs every few tens of
milliseconds (docs/kernels.md#how-to-read-a-noise-spectrum).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from oddnode.core.model import Direction
from oddnode.core.units import canonical_unit
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.parsers.kernel_output import number, read_kernel_output, whole
from oddnode.readings.noise_series import DETOUR_MAX, DETOUR_RATE, LOST_FRACTION

PERCENT = canonical_unit("%")
PER_SECOND = canonical_unit("1/s")
MICROSECONDS = canonical_unit("us")
NOISE_SERIES = (
    (LOST_FRACTION, "value", PERCENT, Direction.LOWER),
    (DETOUR_RATE, "value", PER_SECOND, Direction.LOWER),
    (DETOUR_MAX, "value", MICROSECONDS, Direction.LOWER),
)

# The columns the kernel names in its "# cpu_columns" and "# detour_columns"
# lines; output with other columns is another version's.
CPU_COLUMNS = ("cpu", "observed_cpu", "quanta", "elapsed_ns", "baseline_ns", "threshold_ns", "lost_ns",
               "lost_fraction", "detours", "median_ns", "max_ns", "events", "complete_ns", "wakeups",
               "wake_baseline_ns")
DETOUR_COLUMNS = ("cpu", "offset_ns", "lost_ns")
_INT_KEYS = {"cpus", "quantum_ns", "work_steps", "calibrated_quantum_ns", "timer_granularity_ns",
             "timer_cost_ns", "event_limit", "events_cut", "burst_ns", "window_ns"}
_FLOAT_KEYS = {"seconds", "warmup_seconds", "duty"}
_CPU_LINE = re.compile(r"^cpu\s")
_DETOUR_LINE = re.compile(r"^detour\s")
_END_LINE = re.compile(r"^end\s")


# --- the spectrum -------------------------------------------------------------

# Width of one bin of the FTQ series (the lost time per bin).  0.5 ms puts
# the Nyquist limit at 1000 Hz, so that periods from 2.5 ms show two
# harmonics (see MIN_HARMONICS) -- a 250 Hz timer tick's 4 ms among them --
# and keeps a 10 s run to 20,000 bins: an FFT of a millisecond.
BIN_SECONDS = 0.0005
# A period is claimed only when the window holds at least this many of its
# cycles (periods up to 0.5 s in a 10 s run): with fewer, its harmonics
# crowd the lowest frequencies, where slow drifts of the load (a job
# starting) also put their power, and neither stands out from the other.
MIN_CYCLES = 20
# Family-wise chance that a spectrum of pure noise shows a peak called
# significant.  Under noise each frequency's power over the local noise
# level is exponential with mean 1, so over M frequencies the largest
# exceeds ln(M / alpha) with probability about alpha.
PEAK_ALPHA = 1e-3
# Noise level: the lower quartile of the power in blocks of NOISE_BLOCK
# frequencies, over -ln(3/4) (the lower quartile of an exponential with
# mean 1).  A quartile rather than the median: a long period's harmonics
# are dense (a 1 s period puts a peak every 10 bins of a 10 s run) and may
# fill half a block, but seldom three quarters.  256 values put the
# quartile within 13% of the level (its standard error), and a block is
# narrow enough to follow a spectrum that falls with frequency.
NOISE_QUANTILE = 0.25
NOISE_BLOCK = 256
# Half-width, in frequency bins, of the band around the j-th harmonic whose
# power counts as the period's: the Hann window's main lobe is 2 bins each
# side, and the fundamental's frequency, interpolated between bins, is
# known to about a tenth of a bin, an error that the j-th harmonic has j
# times over.
PEAK_HALF_BINS = 2.0
HARMONIC_DRIFT_BINS = 0.1
# The fundamental is the significant peak whose harmonics hold the most
# power in excess of HARMONIC_PENALTY times the noise expected in their
# bands (up to its last harmonic with a significant peak).  Its subharmonic
# f/2, when significant at all, holds the same peaks plus a band of noise at
# each odd multiple, about 1x the noise against a cost of 2x; its harmonic
# 2f loses the odd multiples' peaks; a lone peak elsewhere has one band
# where the fundamental's comb has many.  (A 20 ms daemon peaks at 50, 100,
# 150 Hz...: its harmonics can outweigh its fundamental.)
HARMONIC_PENALTY = 2.0
# A harmonic m*f (m >= 2) of the best candidate f that holds this share of
# its excess power is the dominant comb instead: f's own lines between are
# then a weaker pattern beside it, sought next on its own (the beat of a
# 7 ms daemon with a 4 ms timer tick repeats every 28 ms, a 7 ms daemon
# delayed once in 16 rounds every 112 ms; a 20 ms daemon under a 10 ms
# throttle leaves the throttle's comb dominant).  Two thirds: a single
# comb's harmonic 2f holds at most half of f's excess (the even lines of a
# flat comb), less when the comb fades.
DOMINANT_SHARE = 2.0 / 3.0
# At most this many components are sought: the dominant one, and what
# differs from the other nodes' is usually among the next two.
MAX_COMPONENTS = 3
# A period is claimed only when at least two of its harmonics have
# significant peaks.  Periodic detours make a comb; a lone peak is what
# chance, or a slow beat of the load, gives: over 2,000 synthetic series of
# random detours (sparse long ones among many short), lone peaks passed the
# threshold in 13 and no comb of two did.  The shortest period claimed is
# thus 2.5 ms, whose second harmonic is the last below the Nyquist limit.
MIN_HARMONICS = 2


@dataclass(frozen=True)
class Periodicity:
    """The dominant period of a series of lost time per bin: its length, the
    share of the series' spectral power at its harmonics, and how far its
    fundamental stands above the noise; ``period_s`` None when no peak is
    significant."""

    period_s: float | None
    share: float  # power at the fundamental and its harmonics / all power but the mean's
    significance: float  # the fundamental's power over the local noise level
    threshold: float  # the level a peak had to exceed, ln(M / alpha)
    harmonics: int  # harmonics below the Nyquist frequency whose peaks are significant
    window_s: float
    bin_s: float

    def to_json(self) -> dict[str, Any]:
        """As a result's parameters keep it."""
        return {"period_ms": None if self.period_s is None else self.period_s * 1e3, "period_share": self.share,
                "period_significance": self.significance, "period_threshold": self.threshold,
                "period_harmonics": self.harmonics, "spectrum_window_s": self.window_s,
                "spectrum_bin_ms": self.bin_s * 1e3}


def ftq_series(starts: np.ndarray, lost: np.ndarray, spans: np.ndarray, window: float,
               bin_width: float = BIN_SECONDS) -> np.ndarray:
    """Lost time per bin of ``bin_width`` seconds over [0, window): each
    detour's lost time spread evenly over the quantum that held it, from
    ``starts`` for ``spans`` seconds (where in the quantum it struck is not
    known; a long detour fills its quantum).  Detours of all CPUs add up."""
    count = int(math.floor(window / bin_width + 1e-9))
    if count < 1:
        return np.zeros(0)
    starts = np.asarray(starts, dtype=np.float64)
    lost = np.asarray(lost, dtype=np.float64)
    spans = np.maximum(np.asarray(spans, dtype=np.float64), 1e-12)
    edges = np.arange(count + 1) * bin_width
    rate = lost / spans
    # Lost time before t: the sum over detours of rate * (clip(t, a, b) - a)
    # = [t R(a <= t) - sum(rate a | a <= t)] - [t R(b <= t) - sum(rate b | b <= t)],
    # each term a cumulative sum over the detours sorted by a or by b.
    cumulative = _ramp(edges, starts, rate) - _ramp(edges, starts + spans, rate)
    return np.diff(cumulative)


def _ramp(edges: np.ndarray, at: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """sum(rate * max(0, edge - at)) at every edge."""
    order = np.argsort(at, kind="stable")
    at, rate = at[order], rate[order]
    rates = np.concatenate(([0.0], np.cumsum(rate)))
    moments = np.concatenate(([0.0], np.cumsum(rate * at)))
    before = np.searchsorted(at, edges, side="right")
    return edges * rates[before] - moments[before]


def _noise_level(power: np.ndarray) -> np.ndarray:
    """The local noise level of every frequency: its block's lower quartile
    of the power over -ln(3/4)."""
    blocks = -(-len(power) // NOISE_BLOCK)
    padded = np.full(blocks * NOISE_BLOCK, np.nan)
    padded[: len(power)] = power
    quartiles = np.nanquantile(padded.reshape(blocks, NOISE_BLOCK), NOISE_QUANTILE, axis=1)
    return np.repeat(quartiles / -math.log(1.0 - NOISE_QUANTILE), NOISE_BLOCK)[: len(power)]


def _interpolated(power: np.ndarray, k: int) -> float:
    """The peak's frequency between bins: the vertex of the parabola through
    the log powers at k-1, k, k+1 (exact for a Gaussian-shaped peak, which
    the Hann window's main lobe nearly is)."""
    if k <= 0 or k >= len(power) - 1:
        return float(k)
    a, b, c = (math.log(max(p, 1e-300)) for p in power[k - 1: k + 2])
    denominator = a - 2.0 * b + c
    return k + (0.5 * (a - c) / denominator if denominator < 0 else 0.0)


def _bands(f0: float, high: int) -> tuple[np.ndarray, np.ndarray]:
    """[start, stop) of the band around each harmonic of f0 (in bins) below ``high``."""
    order = np.arange(1, int((high - 1) / f0) + 1)
    centres = f0 * order
    half = PEAK_HALF_BINS + HARMONIC_DRIFT_BINS * order
    start = np.clip(np.floor(centres - half).astype(np.int64), 1, high)
    stop = np.clip(np.ceil(centres + half).astype(np.int64) + 1, 1, high)
    return start, np.maximum(start, stop)


def periodic_components(series: np.ndarray, bin_width: float = BIN_SECONDS,
                        alpha: float = PEAK_ALPHA) -> tuple[Periodicity, ...]:
    """The periodic components of a series of lost time per bin, from its
    Hann-windowed periodogram, strongest share first (at most
    MAX_COMPONENTS; none when no peak is significant).

    Each component is a comb: among the significant peaks (power above
    ln(M / alpha) times the local noise level) not yet explained, the one
    whose harmonics hold the most power beyond HARMONIC_PENALTY times their
    noise -- or a harmonic of it that holds DOMINANT_SHARE of that, the
    simpler description -- with MIN_HARMONICS significant harmonics or more.
    Its harmonics' bands are then explained, and the next is sought among
    the peaks left."""
    values = np.asarray(series, dtype=np.float64)
    n = len(values)
    if n < 2 * (MIN_CYCLES + NOISE_BLOCK) or not np.all(np.isfinite(values)):
        return ()
    x = values - values.mean()
    if not np.any(x):
        return ()
    window = n * bin_width
    power = np.abs(np.fft.rfft(x * np.hanning(n))) ** 2
    power[0] = 0.0
    low, high = MIN_CYCLES, len(power)  # frequencies k / window, k in [low, high)
    total = float(power.sum())
    level = _noise_level(power)
    ratio = np.divide(power, level, out=np.zeros_like(power), where=level > 0)
    ratio[:low] = 0.0
    threshold = math.log((high - low) / alpha)
    above = ratio > threshold
    # Candidates: the significant local maxima (one per peak, not its flanks).
    inner = np.zeros_like(above)
    inner[1:-1] = above[1:-1] & (ratio[1:-1] >= ratio[:-2]) & (ratio[1:-1] >= ratio[2:])
    peaks = np.flatnonzero(inner)
    if len(peaks) == 0 or total <= 0:
        return ()
    explained = np.zeros(high, dtype=bool)
    components = []
    for _ in range(MAX_COMPONENTS):
        candidates = [(int(k), _interpolated(power, int(k))) for k in peaks if not explained[k]]
        if not candidates:
            break
        # Sums over the bins not yet explained, as cumulative sums: a band's
        # is a difference of two.
        free = ~explained
        power_sum = np.concatenate(([0.0], np.cumsum(power * free)))
        noise_sum = np.concatenate(([0.0], np.cumsum(level * free)))
        significant_sum = np.concatenate(([0], np.cumsum(above & free)))

        def score(f0: float) -> tuple[float, int]:
            """Power beyond the penalty in f0's bands, up to its last one
            with a significant peak (beyond, they hold noise only, which
            would cost a low candidate more than a high one), and how many
            of its bands have one."""
            start, stop = _bands(f0, high)
            live = np.flatnonzero(significant_sum[stop] > significant_sum[start])
            if not len(live):
                return -math.inf, 0
            start, stop = start[: live[-1] + 1], stop[: live[-1] + 1]
            excess = power_sum[stop] - power_sum[start] - HARMONIC_PENALTY * (noise_sum[stop] - noise_sum[start])
            return float(np.sum(excess)), len(live)

        scored = {k: (f0, *score(f0)) for k, f0 in candidates}
        best = max(scored, key=lambda k: scored[k][1])
        f0, best_score, harmonics = scored[best]
        if not best_score > 0:
            break
        # A harmonic of the best that holds nearly all of its excess is the
        # dominant comb; the best's own lines between are a weaker pattern
        # (a beat of two sources, a daemon under a faster throttle), found
        # next if it holds on its own.
        for k, (f1, other, count) in sorted(scored.items(), key=lambda item: -item[1][0]):
            multiple = round(f1 / f0)
            if multiple >= 2 and abs(f1 - multiple * f0) <= PEAK_HALF_BINS + HARMONIC_DRIFT_BINS * multiple \
                    and other >= DOMINANT_SHARE * best_score:
                best, f0, best_score, harmonics = k, f1, other, count
                break
        if harmonics < MIN_HARMONICS:
            break
        start, stop = _bands(f0, high)
        bands = np.zeros(high + 1, dtype=np.int64)  # close harmonics' bands overlap: each bin once
        np.add.at(bands, start, 1)
        np.add.at(bands, stop, -1)
        inside = (np.cumsum(bands)[:high] > 0) & free
        components.append(Periodicity(period_s=window / f0, share=min(1.0, float(power[inside].sum()) / total),
                                      significance=float(ratio[best]), threshold=threshold, harmonics=harmonics,
                                      window_s=window, bin_s=bin_width))
        explained |= inside
    return tuple(sorted(components, key=lambda c: -c.share))


def dominant_period(series: np.ndarray, bin_width: float = BIN_SECONDS, alpha: float = PEAK_ALPHA) -> Periodicity:
    """The strongest periodic component of a series of lost time per bin
    (see periodic_components), or one with no period when there is none."""
    found = periodic_components(series, bin_width, alpha)
    if found:
        return found[0]
    n = len(series)
    significant = n >= 2 * (MIN_CYCLES + NOISE_BLOCK)
    threshold = math.log((n // 2 + 1 - MIN_CYCLES) / alpha) if significant else math.inf
    return Periodicity(None, 0.0, 0.0, threshold, 0, n * bin_width, bin_width)


# --- the kernel's output ----------------------------------------------------------


@dataclass(frozen=True)
class CpuNoise:
    """One CPU's line of the kernel's output."""

    cpu: int
    observed_cpu: int  # where its thread found itself at the end (-1: unknown)
    quanta: int
    elapsed_ns: int  # the time it wanted the CPU: the whole run with a duty of 1
    baseline_ns: int
    threshold_ns: int
    lost_ns: int
    lost_fraction: float
    detours: int
    median_ns: int
    max_ns: int
    events: int  # detours printed
    complete_ns: int  # its printed detours are all those before this offset
    wakeups: int  # bursts it slept before (0 with a duty of 1)
    wake_baseline_ns: int  # its usual lateness on waking (0 with a duty of 1)


@dataclass(frozen=True)
class NoiseOutput:
    """One run of the noise kernel, read: its header, its CPUs and the
    detours it printed (arrays aligned, offsets from the earliest CPU's start)."""

    configuration: dict[str, Any]
    cpus: tuple[CpuNoise, ...]
    detour_cpu: np.ndarray  # int64
    detour_offset_ns: np.ndarray  # int64
    detour_lost_ns: np.ndarray  # int64
    warnings: tuple[str, ...]

    @property
    def elapsed_ns(self) -> int:
        return sum(c.elapsed_ns for c in self.cpus)

    @property
    def lost_fraction(self) -> float:
        """Lost time over all CPUs' elapsed time."""
        elapsed = self.elapsed_ns
        return sum(c.lost_ns for c in self.cpus) / elapsed if elapsed else 0.0

    @property
    def detour_rate(self) -> float:
        """Detours per second of one CPU."""
        elapsed = self.elapsed_ns
        return sum(c.detours for c in self.cpus) / (elapsed * 1e-9) if elapsed else 0.0

    @property
    def detour_max_ns(self) -> int:
        return max((c.max_ns for c in self.cpus), default=0)

    @property
    def detour_median_ns(self) -> float:
        """The median detour: over the printed detours when none was cut,
        else the CPUs' medians weighted by their detour counts."""
        if not self.configuration.get("events_cut") and len(self.detour_lost_ns) == sum(c.detours for c in self.cpus):
            return float(np.median(self.detour_lost_ns)) if len(self.detour_lost_ns) else 0.0
        weights = np.array([c.detours for c in self.cpus], dtype=np.float64)
        if not weights.sum():
            return 0.0
        medians = np.array([c.median_ns for c in self.cpus], dtype=np.float64)
        order = np.argsort(medians)
        cumulative = np.cumsum(weights[order])
        return float(medians[order][np.searchsorted(cumulative, cumulative[-1] / 2.0)])

    @property
    def detour_lost_median_ns(self) -> float:
        """The length that splits the lost time in halves: half of it is in
        detours at least this long (over the printed detours).  Unlike the
        plain median, not set by a crowd of microsecond interrupts that
        hold little of the lost time: it is the size of the detours that
        matter ("every 20 ms, 1.2 ms detours")."""
        lost = np.sort(self.detour_lost_ns)
        if not len(lost):
            return 0.0
        cumulative = np.cumsum(lost)
        return float(lost[np.searchsorted(cumulative, cumulative[-1] / 2.0)])

    @property
    def complete_ns(self) -> int:
        """The part of the run every CPU's printed detours cover."""
        return min((c.complete_ns for c in self.cpus), default=0)

    def series(self, bin_width: float = BIN_SECONDS) -> np.ndarray:
        """The node's FTQ series: lost seconds per bin, all CPUs added, over
        the part of the run that every CPU's printed detours cover."""
        baseline = {c.cpu: c.baseline_ns for c in self.cpus}
        window = self.complete_ns * 1e-9
        keep = self.detour_offset_ns < self.complete_ns
        base = np.array([baseline[int(c)] for c in self.detour_cpu[keep]], dtype=np.float64)
        lost = self.detour_lost_ns[keep].astype(np.float64)
        return ftq_series(self.detour_offset_ns[keep] * 1e-9, lost * 1e-9, (lost + base) * 1e-9, window, bin_width)

    def periodicity(self, bin_width: float = BIN_SECONDS) -> Periodicity:
        """The dominant period of the node's lost time."""
        return dominant_period(self.series(bin_width), bin_width)

    def components(self, bin_width: float = BIN_SECONDS) -> tuple[Periodicity, ...]:
        """The periodic components of the node's lost time, strongest first."""
        return periodic_components(self.series(bin_width), bin_width)


def _columns(configuration: dict[str, Any], header_lines: dict[str, int], key: str, expected: tuple[str, ...],
             source: str) -> None:
    found = tuple(str(configuration.get(key, "")).split())
    if found != expected:
        raise ParseError(source, header_lines.get(key), f"noise kernel output names its {key} {found!r}, "
                                                         f"expected {expected!r}")


def read_noise_output(text: str, source: str) -> NoiseOutput:
    """The noise kernel's output, read strictly: ParseError naming the line
    for anything that is not what the kernel writes, and for output cut
    short (no ``end`` line, or one whose counts disagree with the lines)."""
    output = read_kernel_output(text, source, "noise", int_keys=_INT_KEYS, float_keys=_FLOAT_KEYS)
    configuration = output.configuration
    for key in ("cpus", "seconds", "quantum_ns", "timer_granularity_ns", "event_limit"):
        if key not in configuration:
            raise ParseError(source, None, f"noise kernel header lacks {key!r}")
    cpus: list[CpuNoise] = []
    detours: list[tuple[int, int, int]] = []
    end: tuple[int, int] | None = None
    cpu_lines: dict[int, int] = {}
    for lineno, line in output.lines:
        if end is not None:
            raise ParseError(source, lineno, f"noise kernel output goes on after its end line: {line[:80]!r}")
        fields = line.split()
        if _DETOUR_LINE.match(line):
            if len(fields) != 1 + len(DETOUR_COLUMNS):
                raise ParseError(source, lineno, f"a detour line has {len(fields) - 1} fields, expected "
                                                 f"{len(DETOUR_COLUMNS)}: {line[:80]!r}")
            cpu, offset, lost = (whole(f, source, lineno) for f in fields[1:])
            if cpu not in cpu_lines:
                raise ParseError(source, lineno, f"a detour on CPU {cpu}, which has no cpu line")
            detours.append((cpu, offset, lost))
        elif _CPU_LINE.match(line):
            if "cpu_columns" not in configuration:
                raise ParseError(source, lineno, "a cpu line before the header's cpu_columns")
            _columns(configuration, output.header_lines, "cpu_columns", CPU_COLUMNS, source)
            if len(fields) != 1 + len(CPU_COLUMNS):
                raise ParseError(source, lineno, f"a cpu line has {len(fields) - 1} fields, expected "
                                                 f"{len(CPU_COLUMNS)}: {line[:80]!r}")
            values: dict[str, Any] = {}
            for name, field in zip(CPU_COLUMNS, fields[1:]):
                if name == "lost_fraction":
                    values[name] = number(field, source, lineno)
                else:
                    values[name] = whole(field, source, lineno, minimum=-1 if name == "observed_cpu" else 0)
            entry = CpuNoise(**values)
            if entry.cpu in cpu_lines:
                raise ParseError(source, lineno, f"CPU {entry.cpu} has a second cpu line")
            if entry.lost_ns > entry.elapsed_ns or entry.events > entry.detours or entry.max_ns > entry.lost_ns:
                raise ParseError(source, lineno, f"CPU {entry.cpu}'s numbers contradict each other "
                                                 f"(lost {entry.lost_ns} of {entry.elapsed_ns} ns, "
                                                 f"{entry.events} of {entry.detours} detours printed)")
            cpu_lines[entry.cpu] = lineno
            cpus.append(entry)
        elif _END_LINE.match(line):
            if len(fields) != 3:
                raise ParseError(source, lineno, f"malformed end line: {line[:80]!r}")
            end = (whole(fields[1], source, lineno), whole(fields[2], source, lineno))
        else:
            raise ParseError(source, lineno, f"unexpected line in noise kernel output: {line[:80]!r}")
    if end is None:
        raise ParseError(source, output.line_count, "truncated noise kernel output: no end line")
    if detours:
        _columns(configuration, output.header_lines, "detour_columns", DETOUR_COLUMNS, source)
    if end != (len(cpus), len(detours)) or len(cpus) != configuration["cpus"]:
        raise ParseError(source, output.line_count,
                         f"truncated noise kernel output: the end line counts {end[0]} CPUs and {end[1]} detours, "
                         f"the header {configuration['cpus']} CPUs, the output has {len(cpus)} cpu lines and "
                         f"{len(detours)} detour lines")
    printed = {entry.cpu: entry.events for entry in cpus}
    counted: dict[int, int] = {}
    for cpu, _, _ in detours:
        counted[cpu] = counted.get(cpu, 0) + 1
    for entry in cpus:
        if counted.get(entry.cpu, 0) != printed[entry.cpu]:
            raise ParseError(source, cpu_lines[entry.cpu],
                             f"CPU {entry.cpu} says it printed {printed[entry.cpu]} detours; "
                             f"{counted.get(entry.cpu, 0)} detour lines follow")
    array = np.array(detours, dtype=np.int64).reshape(-1, 3)
    return NoiseOutput(configuration, tuple(cpus), array[:, 0], array[:, 1], array[:, 2], tuple(output.warnings))


def parse_noise_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of our noise kernel: the node's lost fraction, detour
    rate and largest detour, with the dominant period of its lost time and
    the detour distribution in their parameters; ParseError if the output is
    not ours or is cut short.  A run is invalid when a thread did not stay
    on its CPU."""
    run = read_noise_output(text, source)
    configuration = dict(run.configuration)
    problems = [f"CPU {c.cpu}'s thread ended on CPU {c.observed_cpu}: it was not pinned"
                for c in run.cpus if c.observed_cpu != c.cpu]
    series = run.series()
    components = periodic_components(series)
    periodicity = components[0] if components else dominant_period(series)
    worst = max(run.cpus, key=lambda c: c.lost_fraction)
    if run.warnings:
        configuration["warnings"] = list(run.warnings)
    parameters: dict[str, Any] = {
        "cpus": len(run.cpus),
        "seconds": configuration["seconds"],
        "quantum_ns": configuration["quantum_ns"],
        "baseline_ns": int(np.median([c.baseline_ns for c in run.cpus])),
        "threshold_ns": int(np.median([c.threshold_ns for c in run.cpus])),
        "detours": sum(c.detours for c in run.cpus),
        "detour_median_us": run.detour_median_ns / 1e3,
        "detour_lost_median_us": run.detour_lost_median_ns / 1e3,
        "detour_max_us": run.detour_max_ns / 1e3,
        "worst_cpu": worst.cpu,
        "worst_cpu_lost_pct": worst.lost_fraction * 100.0,
        **periodicity.to_json(),
        # Every component, the dominant first: what differs from the other
        # nodes' may be the second (a daemon beside a common timer tick).
        "periods": [{"period_ms": c.period_s * 1e3, "share": c.share, "harmonics": c.harmonics}
                    for c in components],
        "events_cut": int(configuration.get("events_cut", 0)),
    }
    valid = not problems
    values = (run.lost_fraction * 100.0, run.detour_rate, run.detour_max_ns / 1e3)
    measurements = [Measurement(benchmark=name, metric=metric, value=value, unit=unit, direction=direction,
                                valid=valid, parameters=parameters)
                    for (name, metric, unit, direction), value in zip(NOISE_SERIES, values)]
    configuration["threads_counted"] = len(run.cpus)
    return ParsedOutput(tool="oddnode-noise", measurements=measurements, valid=valid, problems=problems,
                        configuration=configuration)
