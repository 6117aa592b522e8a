"""Switchbench's three plots in the report, read from the stored series
alone: the daisy chain's aggregate throughput against its length (where the
switch stops scaling), every streaming pair's throughput, and the
all-to-all's minimum bandwidth per phase.  Each figure is absent when the
store holds no such results."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from oddnode.readings.interconnect_series import ALLTOALL as ALLTOALL_BENCHMARK
from oddnode.readings.interconnect_series import STREAM
from oddnode.findings.pairs import SLOW_LINK_FRACTION
from oddnode.readings.switchbench import MIN_HOP_GAIN, chain_scaling, finite_items, set_members
from oddnode.core.model import Dataset, LabelKind, Series
from oddnode.report.interconnect import SWITCH_BENCHMARKS, InterconnectFigure, interconnect_figures
from oddnode.report.plots import chain_figure, figure_to_svg, phase_figure, stream_pairs_figure

# The series the Switchbench runners store (oddnode.measure.pair.switchbench).
STREAM_PREFIX = f"{STREAM}."
STREAM_METRICS = ("bandwidth.client_to_server", "bandwidth.server_to_client")
MIN_PHASE_PREFIX = "bandwidth.min_phase."
# A streaming pair below this share of the median pair is drawn as slow:
# the all-pairs matrix's bound for a slow link, whatever the others' spread.
SLOW_PAIR_FRACTION = SLOW_LINK_FRACTION


@dataclass
class StreamPairs:
    """One streaming pattern: per pair the best rate each way, and the pairs
    that gave no valid result."""

    pattern: str
    labels: list[str]
    client_to_server: np.ndarray
    server_to_client: np.ndarray
    unit: str
    failed: list[str] = field(default_factory=list)

    @property
    def total(self) -> np.ndarray:
        return np.nan_to_num(self.client_to_server) + np.nan_to_num(self.server_to_client)

    def slow(self, fraction: float = SLOW_PAIR_FRACTION) -> list[str]:
        """The pairs below ``fraction`` of the median pair, slowest first."""
        total = self.total
        median = float(np.median(total)) if total.size else 0.0
        order = np.argsort(total, kind="stable")
        return [self.labels[i] for i in order if total[i] < fraction * median]


@dataclass
class AllToAllPhases:
    """One all-to-all node set: the minimum bandwidth of each phase (MB/s),
    its total time (s) and aggregate throughput (MB/s) where stored."""

    nodes: str
    min_bandwidth: dict[int, float]
    unit: str
    total_seconds: float | None = None
    aggregate: float | None = None


def stream_pairs(dataset: Dataset) -> list[StreamPairs]:
    """Per streaming pattern in the store, every pair's best rate each way."""
    by_pattern: dict[str, dict[str, Series]] = {}
    for s in dataset.series:
        if s.benchmark.startswith(STREAM_PREFIX) and s.label_kind is LabelKind.PAIR and s.metric in STREAM_METRICS:
            by_pattern.setdefault(s.benchmark[len(STREAM_PREFIX):], {})[s.metric] = s
    found = []
    for pattern, metrics in sorted(by_pattern.items()):
        rates = {metric: dict(finite_items(series)) for metric, series in metrics.items()}
        labels = sorted(set().union(*rates.values()))
        if not labels:
            continue
        forth, back = (np.array([rates.get(metric, {}).get(label, np.nan) for label in labels])
                       for metric in STREAM_METRICS)
        failed = sorted({f.label for f in dataset.failures
                         if f.benchmark == STREAM_PREFIX + pattern and f.label not in labels})
        unit = next(iter(metrics.values())).unit
        found.append(StreamPairs(pattern, labels, forth, back, unit, failed))
    return found


def alltoall_phases(dataset: Dataset) -> list[AllToAllPhases]:
    """Per all-to-all node set (each its newest run), the minimum bandwidth
    of every phase with the run's total time and aggregate."""
    sets = {s.metric: s for s in dataset.series if s.benchmark == ALLTOALL_BENCHMARK
            and s.label_kind is LabelKind.SET}
    phases: dict[str, dict[int, float]] = {}
    unit = "MB/s"
    for metric, series in sets.items():
        index = metric[len(MIN_PHASE_PREFIX):]
        if metric.startswith(MIN_PHASE_PREFIX) and index.isdigit():
            unit = series.unit
            for label, value in finite_items(series):
                phases.setdefault(label, {})[int(index)] = value
    # Each metric keeps each node set's newest run; the node sets shown are
    # the aggregate's, and a set of N nodes has N-1 phases.
    aggregate = sets.get("bandwidth.aggregate")
    latest = {label for label, _ in finite_items(aggregate)} if aggregate is not None else set(phases)
    found = []
    for label in sorted(latest & set(phases)):
        members = set_members(label)
        last = len(members) - 1 if members else max(phases[label])
        by_phase = {phase: value for phase, value in sorted(phases[label].items()) if phase <= last}
        extra = {metric: dict(finite_items(sets[metric])).get(label) if metric in sets else None
                 for metric in ("time.total", "bandwidth.aggregate")}
        found.append(AllToAllPhases(label, by_phase, unit, extra["time.total"], extra["bandwidth.aggregate"]))
    return found


@interconnect_figures("switchbench.chain", SWITCH_BENCHMARKS)
def chain_figures(dataset: Dataset) -> list[InterconnectFigure]:
    """Aggregate throughput against the chain's length."""
    chain = chain_scaling(dataset)
    if chain is None:
        return []
    lengths = sorted(chain.aggregate)
    if chain.saturation is not None:
        verdict = (f"the switch stops scaling at k = {chain.saturation}: the aggregate grew by less than "
                   f"{MIN_HOP_GAIN:g} of a hop per node added.")
    elif len(lengths) < 2:
        verdict = "one chain length only: nothing to say about scaling."
    else:
        verdict = f"the aggregate grew with every node added, up to k = {lengths[-1]}."
    caption = (f"A TCP stream forwarded through the first k nodes of {chain.nodes}: k-1 hops cross the switch "
               f"at once, so the aggregate is (k-1) × the end-to-end rate (best repetition); {verdict}")
    svg = figure_to_svg(chain_figure(chain.aggregate, chain.saturation, f"daisy chain of {chain.nodes}",
                                     chain.unit))
    return [InterconnectFigure("Daisy chain: aggregate throughput against chain length", caption, svg)]


@interconnect_figures("switchbench.stream", SWITCH_BENCHMARKS)
def stream_figures(dataset: Dataset) -> list[InterconnectFigure]:
    """Per streaming pattern, every pair's throughput both ways, slowest first."""
    figures = []
    for pattern in stream_pairs(dataset):
        slow = pattern.slow()
        median = float(np.median(pattern.total))
        caption = (f"{len(pattern.labels)} pairs streaming both ways at once (best repetition), slowest "
                   f"first; median pair {median:.4g} {pattern.unit}.")
        if slow:
            caption += (f" In red, below {SLOW_PAIR_FRACTION:.0%} of the median: {', '.join(slow[:8])}"
                        + (f" and {len(slow) - 8} more" if len(slow) > 8 else "") + ".")
        if pattern.failed:
            caption += f" No valid result: {', '.join(pattern.failed)}."
        svg = figure_to_svg(stream_pairs_figure(pattern.labels, pattern.client_to_server, pattern.server_to_client,
                                                f"pairwise streaming, {pattern.pattern}", set(slow),
                                                unit=pattern.unit))
        figures.append(InterconnectFigure(f"Pairwise streaming: {pattern.pattern}", caption, svg))
    return figures


@interconnect_figures("switchbench.alltoall", SWITCH_BENCHMARKS)
def alltoall_figures(dataset: Dataset) -> list[InterconnectFigure]:
    """The all-to-all's minimum bandwidth per phase."""
    found = [a for a in alltoall_phases(dataset) if a.min_bandwidth]
    if not found:
        return []
    parts = []
    for a in found:
        worst = min(a.min_bandwidth, key=lambda phase: a.min_bandwidth[phase])
        low = a.min_bandwidth[worst]
        text = (f"{a.nodes}: every phase at {low:.4g} {a.unit}" if low == max(a.min_bandwidth.values())
                else f"{a.nodes}: lowest in phase {worst} ({low:.4g} {a.unit})")
        if a.total_seconds is not None:
            text += f", total {a.total_seconds:.4g} s"
        if a.aggregate is not None:
            text += f", aggregate {a.aggregate:.4g} {a.unit}"
        parts.append(text)
    caption = ("In phase i every node sends to node (self+i) mod N and receives from (self-i) mod N, with a "
               "barrier between phases; the lowest receive bandwidth over the nodes (best repetition). A dip is a "
               "permutation the switch cannot carry. " + "; ".join(parts) + ".")
    svg = figure_to_svg(phase_figure({a.nodes: a.min_bandwidth for a in found}, "all-to-all: minimum bandwidth "
                                     "per phase", found[0].unit))
    return [InterconnectFigure("All-to-all: minimum bandwidth per phase", caption, svg)]
