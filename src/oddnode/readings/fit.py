"""Latency and bandwidth from ping-pong times: the least-squares line
t(L) = a + b·L through the one-way times t (microseconds) of messages of L
bytes, as in the NCSA notes.  Latency is a, bandwidth 1/b; the observed vs
fitted table shows where one line stops describing the network.

The points come from any stored series with a time or a bandwidth per
message size (``sized_times``): our ping-pong patterns (``pingpong.sort``,
one label per pair, the median over pairs by default) and imported IMB,
OSU and NetPIPE runs."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from oddnode.core.model import Series
from oddnode.core.units import canonical_unit

# b is in us/byte, so 1/b is in bytes/us, and 1 byte/us = 10^6 bytes/s: the
# bandwidth 1/b is in MB/s with MB = 10^6 bytes, with no factor to apply.

# A fit is poor when a size in its range is further than this from the line,
# relative to the observed time.  Repeated ping-pong times of a healthy network
# agree within a few percent and one protocol regime is a straight line within
# that; 10% off means one line is the wrong model there, most often because the
# MPI library switches protocol (eager to rendezvous) inside the range.
MAX_RELATIVE_ERROR = 0.10
# Two lines, one each side of a size, name a switch point when they leave at
# most this share of the one line's sum of squared relative residuals ...
SWITCH_RESIDUAL_SHARE = 0.25
# ... and each side has at least this many different sizes: two sizes fit any
# line exactly, so a side that small would always look perfect.
SWITCH_MIN_SIZES = 3


@dataclass(frozen=True)
class FitRow:
    """One measured point beside the line."""

    size: int  # bytes
    observed_us: float
    fitted_us: float
    relative_error: float  # (fitted - observed) / observed
    in_range: bool = True  # False: outside the fitted size range, shown for comparison


@dataclass
class LinearFit:
    """t(L) = latency + L / bandwidth over a size range, and how well it fits."""

    latency_us: float
    bandwidth_mb_s: float | None  # MB = 10^6 bytes; None when time does not grow with size
    slope_us_per_byte: float
    size_range: tuple[int, int]  # the smallest and largest size fitted
    points: int  # points fitted (every repetition of a size counts)
    rows: list[FitRow]  # every point given, sorted by size
    max_relative_error: float  # over the fitted range
    poor: bool
    reason: str | None  # why the fit is poor, and what to do
    switch: SwitchPoint | None = None  # where two lines fit much better, when poor
    # The coefficient of determination of the weighted fit, 1 - SS_res / SS_tot
    # with both sums weighted by 1/t^2 as the fit is (statsmodels' WLS R^2);
    # NaN when every fitted time is the same.
    r_squared: float = math.nan

    @property
    def failing_sizes(self) -> list[int]:
        """The fitted sizes further than MAX_RELATIVE_ERROR off the line: where it fails."""
        return sorted({row.size for row in self.rows
                       if row.in_range and abs(row.relative_error) > MAX_RELATIVE_ERROR})

    def to_json(self) -> dict:
        """The fit as plain JSON data (switch point included)."""
        document = {
            "latency_us": self.latency_us, "bandwidth_mb_s": self.bandwidth_mb_s,
            "slope_us_per_byte": self.slope_us_per_byte, "r_squared": _json_number(self.r_squared),
            "size_range": list(self.size_range), "points": self.points,
            "max_relative_error": self.max_relative_error, "max_allowed_error": MAX_RELATIVE_ERROR,
            "failing_sizes": self.failing_sizes, "poor": self.poor, "reason": self.reason,
            "rows": [{"size": row.size, "observed_us": row.observed_us, "fitted_us": row.fitted_us,
                      "relative_error": row.relative_error, "fitted": row.in_range} for row in self.rows],
            "switch": None,
        }
        if self.switch is not None:
            document["switch"] = {"last_below": self.switch.last_below, "first_above": self.switch.first_above,
                                  "residual_share": self.switch.residual_share,
                                  "below": self.switch.below.to_json(), "above": self.switch.above.to_json()}
        return document

    def describe(self) -> str:
        bandwidth = "no bandwidth" if self.bandwidth_mb_s is None else f"bandwidth {self.bandwidth_mb_s:.4g} MB/s"
        low, high = self.size_range
        return (f"latency {self.latency_us:.4g} us, {bandwidth} over {low}-{high} bytes "
                f"({self.points} points, largest error {self.max_relative_error:.1%})")


@dataclass
class SwitchPoint:
    """A split of the size range where one line each side fits far better than one line."""

    last_below: int  # the largest size of the lower line
    first_above: int  # the smallest size of the upper line
    below: LinearFit
    above: LinearFit
    residual_share: float  # the two lines' squared relative residuals over the one line's

    def describe(self) -> str:
        return f"between {self.last_below} and {self.first_above} bytes"


def _points(sizes: Sequence[float], times_us: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Sizes and times as float arrays sorted by size, after checking them."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    if s.ndim != 1 or t.ndim != 1 or len(s) != len(t):
        raise ValueError(f"sizes and times must be two lists of the same length, got shapes {s.shape} and {t.shape}")
    if np.isnan(s).any():
        raise ValueError(f"a size is NaN (position {int(np.flatnonzero(np.isnan(s))[0])})")
    if not np.isfinite(s).all() or (s < 0).any() or (s != np.round(s)).any():
        bad = s[~np.isfinite(s) | (s < 0) | (s != np.round(s))][0]
        raise ValueError(f"sizes are whole, non-negative numbers of bytes, got {bad}")
    if np.isnan(t).any():
        raise ValueError(f"the time at {s[np.isnan(t)][0]:.0f} bytes is NaN")
    if not np.isfinite(t).all() or (t <= 0).any():
        index = int(np.flatnonzero(~np.isfinite(t) | (t <= 0))[0])
        raise ValueError(f"times must be positive and finite, got {t[index]} us at {s[index]:.0f} bytes")
    order = np.argsort(s, kind="stable")
    return s[order], t[order]


def _line(s: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """a and b minimising the sum of ((t - a - b·s) / t)^2."""
    # Sizes scaled to at most 1 keep the two columns of the design matrix of
    # comparable size, so that lstsq recovers b to full precision.
    scale = float(s.max()) or 1.0
    design = np.column_stack([1.0 / t, (s / scale) / t])
    (a, b_scaled), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    return float(a), float(b_scaled) / scale


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


def _r_squared(t: np.ndarray, fitted: np.ndarray) -> float:
    """R^2 of the fit weighted by w = 1/t^2, as _line minimises it: the
    weighted residual sum over the weighted spread about the weighted mean."""
    weights = 1.0 / t**2
    mean = float(np.sum(weights * t) / np.sum(weights))
    total = float(np.sum(weights * (t - mean) ** 2))
    if total <= 0.0:
        return math.nan
    return 1.0 - float(np.sum(weights * (t - fitted) ** 2)) / total


def _range_text(min_size: float | None, max_size: float | None) -> str:
    def text(size: float) -> str:
        return str(int(size)) if float(size).is_integer() else f"{size:g}"

    if min_size is None and max_size is None:
        return "given"
    if max_size is None:
        return f"from {text(min_size)} bytes on"
    if min_size is None:
        return f"up to {text(max_size)} bytes"
    return f"from {text(min_size)} to {text(max_size)} bytes"


def _fit(s: np.ndarray, t: np.ndarray, min_size: float | None, max_size: float | None,
         look_for_switch: bool) -> LinearFit:
    low = -np.inf if min_size is None else min_size
    high = np.inf if max_size is None else max_size
    if low > high:
        raise ValueError(f"min_size {min_size} is above max_size {max_size}")
    inside = (s >= low) & (s <= high)
    count = int(inside.sum())
    where = _range_text(min_size, max_size)
    if count < 2:
        raise ValueError(f"{count} point{'' if count == 1 else 's'} {where}: a line needs at least 2")
    if np.unique(s[inside]).size < 2:
        raise ValueError(f"every point {where} has the size {s[inside][0]:.0f} bytes: a line needs two sizes")
    a, b = _line(s[inside], t[inside])
    fitted = a + b * s
    relative = (fitted - t) / t
    rows = [FitRow(int(size), float(obs), float(fit), float(rel), bool(used))
            for size, obs, fit, rel, used in zip(s, t, fitted, relative, inside)]
    errors = np.where(inside, np.abs(relative), -1.0)
    worst = int(np.argmax(errors))
    max_error = float(errors[worst])

    reasons = []
    if a < 0:
        reasons.append(f"negative latency ({a:.3g} us): the range has no size small enough to show the latency, "
                       "start it lower")
    if b <= 0:
        reasons.append(f"the time does not grow with the size (slope {b:.3g} us/byte), so no bandwidth can be "
                       "read: the range holds only latency-bound sizes, end it higher")
    switch = None
    if max_error > MAX_RELATIVE_ERROR:
        text = (f"{int(s[worst])} bytes is {max_error:.0%} off the line (observed {t[worst]:.4g} us, "
                f"fitted {fitted[worst]:.4g} us): the times do not follow one line")
        if look_for_switch:
            switch = _switch_point(s[inside], t[inside], float(np.sum(relative[inside] ** 2)))
        if switch is not None:
            text += (f"; one line up to {switch.last_below} bytes and another from {switch.first_above} bytes "
                     "fit well: the MPI library likely switches protocol (eager to rendezvous) "
                     f"{switch.describe()}, fit each side on its own")
        else:
            text += ("; a protocol switch (eager to rendezvous) inside the range may cause this: "
                     "fit each side of it on its own")
        reasons.append(text)
    low_size, high_size = int(s[inside].min()), int(s[inside].max())
    return LinearFit(
        latency_us=a,
        bandwidth_mb_s=1.0 / b if b > 0 else None,
        slope_us_per_byte=b,
        size_range=(low_size, high_size),
        points=count,
        rows=rows,
        max_relative_error=max_error,
        poor=bool(reasons),
        reason="; ".join(reasons) if reasons else None,
        switch=switch,
        r_squared=_r_squared(t[inside], fitted[inside]),
    )


def fit_latency_bandwidth(
    sizes: Sequence[float],
    times_us: Sequence[float],
    min_size: float | None = None,
    max_size: float | None = None,
) -> LinearFit:
    """The line t(L) = a + b·L through one-way times (us) of L-byte messages
    with min_size <= L <= max_size: latency a us, bandwidth 1/b MB/s.

    Weighted least squares with weights 1/t: it minimises the relative
    residuals, so that a 1 us error at 8 bytes counts as much as a 1 ms error
    at 4 MiB.  Plain least squares over sizes spanning several decades is
    ruled by the largest messages and leaves the latency to their noise.
    Repetitions of a size are separate points.  The fit is poor, with a
    reason, when a size is more than MAX_RELATIVE_ERROR off the line (with the
    switch point where two lines fit, if find_switch_point finds one), when
    the latency comes out negative or the slope not positive.
    """
    s, t = _points(sizes, times_us)
    return _fit(s, t, min_size, max_size, look_for_switch=True)


def _switch_point(s: np.ndarray, t: np.ndarray, one_line_residual: float) -> SwitchPoint | None:
    """The best split of sorted points into two lines, if it fits far better and well."""
    distinct = np.unique(s)
    if one_line_residual <= 0.0 or distinct.size < 2 * SWITCH_MIN_SIZES:
        return None
    best: SwitchPoint | None = None
    for k in range(SWITCH_MIN_SIZES, distinct.size - SWITCH_MIN_SIZES + 1):
        below = s <= distinct[k - 1]
        lower = _fit(s[below], t[below], None, None, look_for_switch=False)
        upper = _fit(s[~below], t[~below], None, None, look_for_switch=False)
        residual = sum(row.relative_error ** 2 for row in (*lower.rows, *upper.rows))
        share = residual / one_line_residual
        if best is None or share < best.residual_share:
            best = SwitchPoint(int(distinct[k - 1]), int(distinct[k]), lower, upper, share)
    if best is None or best.residual_share > SWITCH_RESIDUAL_SHARE:
        return None
    if best.below.max_relative_error > MAX_RELATIVE_ERROR or best.above.max_relative_error > MAX_RELATIVE_ERROR:
        return None
    return best


def find_switch_point(
    sizes: Sequence[float],
    times_us: Sequence[float],
    min_size: float | None = None,
    max_size: float | None = None,
) -> SwitchPoint | None:
    """Where to split the size range so that a line each side fits far better
    than one line (a protocol switch, eager to rendezvous), or None.

    Every split with SWITCH_MIN_SIZES different sizes or more each side is
    tried; the best counts when it leaves at most SWITCH_RESIDUAL_SHARE of the
    one line's squared relative residuals and both sides fit within
    MAX_RELATIVE_ERROR.
    """
    s, t = _points(sizes, times_us)
    one = _fit(s, t, min_size, max_size, look_for_switch=False)
    inside = np.array([row.in_range for row in one.rows])
    residual = sum(row.relative_error ** 2 for row in one.rows if row.in_range)
    return _switch_point(s[inside], t[inside], residual)


def fit_table(fit: LinearFit) -> str:
    """The fit as plain text: its line, then observed vs fitted time at every size."""
    lines = [fit.describe(), "(MB = 10^6 bytes; error = (fitted - observed) / observed)", ""]
    lines.append(f"{'bytes':>12}  {'observed us':>12}  {'fitted us':>12}  {'error':>8}")
    for row in fit.rows:
        line = (f"{row.size:>12}  {row.observed_us:>12.3f}  {row.fitted_us:>12.3f}  "
                f"{round(row.relative_error * 100, 1) + 0.0:>+7.1f}%")  # + 0.0 turns -0.0 into 0.0
        lines.append(line if row.in_range else line + "  (not fitted)")
    lines += ["", f"r^2 = {fit.r_squared:.6f} (weighted by 1/time^2, as fitted)"]
    failing = fit.failing_sizes
    if failing:
        lines.append(f"the line fails at {sizes_text(failing)} bytes (more than {MAX_RELATIVE_ERROR:.0%} off)")
    else:
        lines.append(f"the line holds at every fitted size (within {MAX_RELATIVE_ERROR:.0%})")
    if fit.poor:
        lines += [f"poor fit: {fit.reason}"]
    if fit.switch is not None:
        lines += [f"  up to {fit.switch.last_below} bytes: {fit.switch.below.describe()}",
                  f"  from {fit.switch.first_above} bytes: {fit.switch.above.describe()}"]
    return "\n".join(lines) + "\n"


def sizes_text(sizes: Sequence[int], shown: int = 12) -> str:
    """Sizes as a short list: the first ``shown``, then how many more."""
    text = ", ".join(str(size) for size in sizes[:shown])
    return text + (f" and {len(sizes) - shown} more" if len(sizes) > shown else "")


# --- the points of a stored series -------------------------------------------------

# Where a series' one-way times come from, in order of preference: a time
# per size (our ping-pong's, IMB's t[usec], OSU's latency, NetPIPE's), IMB's
# t_avg (Sendrecv, Exchange), else the bandwidth, as bytes / (MB/s) = us
# (1 MB/s = 1 byte/us).  From a streaming bandwidth (osu_bw) that time is a
# message's share of the stream, and the line's a a per-message overhead
# rather than a latency.
TIME_QUANTITIES = ("latency", "t_avg", "bandwidth")
_US = canonical_unit("us")
_MB_PER_S = canonical_unit("MB/s")
_SIZED = re.compile(r"^([A-Za-z_]+)\.(\d+)$")


@dataclass(frozen=True)
class SizedTimes:
    """A series' one-way time per message size: one label's, or the median
    over its labels at each size."""

    benchmark: str
    quantity: str  # the metric stem the times come from (TIME_QUANTITIES)
    label: str | None  # the one label asked for; None: the median over labels
    labels: tuple[str, ...]  # every label of the series
    sizes: np.ndarray  # bytes, ascending
    times_us: np.ndarray
    counts: np.ndarray  # labels behind each size's time
    label_kind: str = "node"
    notes: tuple[str, ...] = field(default=())
    # Over the labels at each size (the median's spread): the fastest and
    # the slowest one-way time, and whose the slowest is.
    fastest_us: np.ndarray | None = None
    slowest_us: np.ndarray | None = None
    slowest_labels: tuple[str, ...] = field(default=())

    def slowest(self) -> tuple[str, int, float] | None:
        """The label furthest behind the median at any size: (label, size,
        its time over the median's); None for one label's times."""
        if self.slowest_us is None or len(self.labels) < 2 or not len(self.sizes):
            return None
        behind = self.slowest_us / self.times_us
        at = int(np.argmax(behind))
        return self.slowest_labels[at], int(self.sizes[at]), float(behind[at])

    def describe(self) -> str:
        source = f"{self.quantity}.<bytes>" + (" as bytes / bandwidth" if self.quantity == "bandwidth" else "")
        if self.label is not None:
            whose = self.label
        elif len(self.labels) == 1:
            whose = self.labels[0]
        else:
            whose = f"median over {len(self.labels)} {self.label_kind}s"
        return f"{self.benchmark}: {whose}, times from {source}"


def _sized_series(series: Iterable[Series]) -> dict[str, dict[str, dict[int, Series]]]:
    """benchmark -> quantity -> size -> series, for the metrics named <quantity>.<bytes>."""
    found: dict[str, dict[str, dict[int, Series]]] = {}
    for s in series:
        match = _SIZED.match(s.metric)
        if match and match.group(1) in TIME_QUANTITIES:
            found.setdefault(s.benchmark, {}).setdefault(match.group(1), {})[int(match.group(2))] = s
    return found


def _usable(quantity: str, by_size: dict[int, Series]) -> dict[int, Series]:
    """The sizes that give a time: a bandwidth at 0 bytes gives none."""
    return {size: s for size, s in by_size.items() if size > 0 or quantity != "bandwidth"}


def fittable_benchmarks(series: Iterable[Series]) -> dict[str, tuple[str, ...]]:
    """Benchmark -> the quantities it has at two sizes or more, preferred first."""
    found = {}
    for benchmark, quantities in sorted(_sized_series(series).items()):
        usable = tuple(q for q in TIME_QUANTITIES if len(_usable(q, quantities.get(q, {}))) >= 2)
        if usable:
            found[benchmark] = usable
    return found


def sized_times(series: Iterable[Series], benchmark: str, quantity: str | None = None,
                label: str | None = None) -> SizedTimes:
    """The one-way times per size of a stored benchmark (``pingpong.sort``,
    ``imb.pingpong``, ``osu.latency``, ``netpipe.tcp``): ``label``'s, or the
    median over its labels; from ``quantity`` (latency, t_avg, bandwidth),
    by default the first it has.  KeyError naming the fittable benchmarks
    (or the labels, or the quantities) when the name is not one of them."""
    series = list(series)
    sized = _sized_series(series)
    fittable = fittable_benchmarks(series)
    if benchmark not in fittable:
        known = ", ".join(fittable) or "none"
        why = ("it has no time or bandwidth at two message sizes or more" if any(s.benchmark == benchmark
                                                                                    for s in series)
               else "no benchmark of that name in the store")
        raise KeyError(f"{benchmark!r} cannot be fitted: {why} (benchmarks with a time per message size: {known})")
    if quantity is None:
        quantity = fittable[benchmark][0]
    elif quantity not in fittable[benchmark]:
        raise KeyError(f"{benchmark} has no {quantity!r} at two message sizes or more "
                       f"(it has: {', '.join(fittable[benchmark])})")
    by_size = _usable(quantity, sized[benchmark][quantity])
    unit = _US if quantity != "bandwidth" else _MB_PER_S
    for size, s in by_size.items():
        if s.unit != unit:
            raise ValueError(f"{s.name} is in {s.unit or 'no unit'}, not {unit}: its times cannot be fitted")
    labels = tuple(sorted({str(lab) for s in by_size.values() for lab in s.labels}))
    if label is not None and label not in labels:
        raise KeyError(f"{benchmark} has no label {label!r} (its labels: {sizes_text(list(labels), 20)})")
    sizes, times, counts, notes = [], [], [], []
    fastest, slowest, slowest_labels = [], [], []
    for size in sorted(by_size):
        s = by_size[size]
        keep = np.isfinite(s.values) & (s.values > 0)
        if label is not None:
            keep &= s.labels == label
        values = s.values[keep]
        if values.size == 0:
            continue
        # A bandwidth of MB/s is bytes per microsecond: bytes / it is microseconds.
        values = values if quantity != "bandwidth" else size / values
        sizes.append(size)
        times.append(float(np.median(values)))
        counts.append(int(values.size))
        fastest.append(float(values.min()))
        slowest.append(float(values.max()))
        slowest_labels.append(str(s.labels[keep][int(np.argmax(values))]))
    if label is None and counts and min(counts) < len(labels):
        short = [str(size) for size, count in zip(sizes, counts) if count < len(labels)]
        notes.append(f"{len(short)} sizes lack some labels (the median is over those present): "
                     f"{sizes_text(short)} bytes")
    kind = next(iter(by_size.values())).label_kind.value
    return SizedTimes(benchmark, quantity, label, labels, np.array(sizes, dtype=np.int64),
                      np.array(times, dtype=float), np.array(counts, dtype=np.int64), kind, tuple(notes),
                      np.array(fastest, dtype=float), np.array(slowest, dtype=float), tuple(slowest_labels))


def fit_sized_times(points: SizedTimes, min_size: float | None = None, max_size: float | None = None) -> LinearFit:
    """fit_latency_bandwidth over a series' times (see sized_times); an error
    names the series when the range leaves too few points."""
    try:
        return fit_latency_bandwidth(points.sizes, points.times_us, min_size, max_size)
    except ValueError as err:
        sizes = ", ".join(str(int(size)) for size in points.sizes)
        raise ValueError(f"{points.benchmark}: {err} (its sizes: {sizes or 'none'})") from None
