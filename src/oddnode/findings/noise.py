"""noisy-node: a node on which the operating system takes more of the
CPUs' time than on the others (seaborg's node asymmetry).

The noise step stores, per node, the share of its CPUs' time lost to
detours (``noise.lost_fraction``) and how often they come
(``noise.detour_rate``).  A node is noisy when either is on the worse side
by the population rules every single-node series is judged by
(population.py: an outlier, or the smaller mode when that mode is the worse
one).  The finding says what the noise looks like, from the parameters of
the node's repetitions: its period (the spectrum of its lost time) and its
detours ("every 20 ms, 1.2 ms detours"), beside the other nodes' period.

Serial benchmarks barely notice such noise; codes that synchronise wait at
every step for the rank that was interrupted, so they lose in proportion to
their concurrency.  The outlier rule names the same node on the same series:
problems.py shows those findings as this one's symptoms, and a
``process-asymmetry`` finding on the node (what spawns the interruptions)
as the cause of both (related.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from oddnode.findings.population import analyse
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.readings.noise_series import DETOUR_RATE, LOST_FRACTION, NOISE
from oddnode.core.model import Dataset, Finding, LabelKind, Series, Severity
from oddnode.core.nodes import fold
from oddnode.core.order import natural_key

KIND = "noisy-node"
# The series whose worse side makes a node noisy: how much time the OS
# takes, and how often it interrupts.  (The longest detour is judged by the
# outlier rule alone: one long hiccup is not a pattern.)
JUDGED = (LOST_FRACTION, DETOUR_RATE)
# How many nodes a message spells out; the evidence lists all.
MESSAGE_NODES = 5
# Two periods within this fraction of each other are one: nodes that share
# a period are named in one finding, and a noisy node's period is "the
# others'" when within it.
SAME_PERIOD = 0.1


def is_noise_series(subject: str) -> bool:
    """Whether a finding's subject is one of the noise step's series."""
    return subject.split(":", 1)[0].startswith(f"{NOISE}.")


@dataclass(frozen=True)
class NodeNoise:
    """What a node's repetitions say about its noise (medians over them)."""

    period_ms: float | None  # the dominant period; None unless half of the repetitions found one
    share: float | None  # its share of the lost time's spectral power
    detour_us: float | None  # half of the lost time is in detours at least this long
    detour_median_us: float | None  # the median detour, however little it lost
    detour_max_us: float | None
    repetitions: int
    # Every period half of the repetitions found, (period_ms, share), the
    # strongest first: the dominant one and those beside it.
    periods: tuple[tuple[float, float], ...] = ()


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.median(values)) if values else None


def _components(repetition: dict[str, Any]) -> list[tuple[float, float]]:
    """A repetition's periodic components (period_ms, share); the dominant
    one alone for results stored before the components were kept."""
    found = repetition.get("periods")
    if isinstance(found, list):
        return [(float(c["period_ms"]), float(c.get("share") or 0.0)) for c in found
                if isinstance(c, dict) and isinstance(c.get("period_ms"), (int, float))]
    period = repetition.get("period_ms")
    return [(float(period), float(repetition.get("period_share") or 0.0))] if isinstance(period, (int, float)) else []


def _recurring(repetitions: list[dict[str, Any]]) -> tuple[tuple[float, float], ...]:
    """The periods (within SAME_PERIOD of each other) that at least half of
    the repetitions found, each with its median period and share, the
    strongest first."""
    clusters: list[list[tuple[float, float, int]]] = []  # (period, share, repetition)
    found = [(period, share, index) for index, repetition in enumerate(repetitions)
             for period, share in _components(repetition)]
    for period, share, index in sorted(found, key=lambda item: -item[1]):
        for cluster in clusters:
            if _same(float(np.median([c[0] for c in cluster])), period):
                cluster.append((period, share, index))
                break
        else:
            clusters.append([(period, share, index)])
    kept = [(float(np.median([c[0] for c in cluster])), float(np.median([c[1] for c in cluster])))
            for cluster in clusters if len({c[2] for c in cluster}) * 2 >= len(repetitions)]
    return tuple(sorted(kept, key=lambda item: -item[1]))


def node_noise(repetitions: list[dict[str, Any]]) -> NodeNoise:
    """A node's periods and detours over its repetitions: the periods that
    at least half of them found (medians), the strongest its dominant one."""
    periods = _recurring(repetitions) if repetitions else ()
    return NodeNoise(
        period_ms=periods[0][0] if periods else None,
        share=periods[0][1] if periods else None,
        periods=periods,
        # Older outputs without the lost-weighted median: the plain one.
        detour_us=_median([r.get("detour_lost_median_us", r.get("detour_median_us")) for r in repetitions]),
        detour_median_us=_median([r.get("detour_median_us") for r in repetitions]),
        detour_max_us=max((r["detour_max_us"] for r in repetitions
                           if isinstance(r.get("detour_max_us"), (int, float))), default=None),
        repetitions=len(repetitions),
    )


def figure(value: float) -> str:
    """Two significant digits, never an exponent: 1.2, 20, 850, 12000."""
    return f"{float(f'{value:.2g}'):g}"


def duration(microseconds: float) -> str:
    """A short time in words, to two digits: '850 us', '1.2 ms', '2.5 s'."""
    if microseconds < 999.5:
        return f"{figure(microseconds)} us"
    if microseconds < 999.5e3:
        return f"{figure(microseconds / 1e3)} ms"
    return f"{figure(microseconds / 1e6)} s"


def pattern(noise: NodeNoise) -> str:
    """The noise in words: 'every 20 ms, 1.2 ms detours'."""
    detours = f"{duration(noise.detour_us)} detours" if noise.detour_us else "detours"
    if noise.period_ms is None:
        return f"{detours}, no period"
    return f"every {duration(noise.period_ms * 1e3)}, {detours}"


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= SAME_PERIOD * max(a, b)


def _common_period(periods: list[float | None]) -> float | None:
    """The period most of the nodes share (within SAME_PERIOD), or None."""
    found = sorted(p for p in periods if p is not None)
    if len(found) * 2 <= len(periods):
        return None
    middle = float(np.median(found))
    near = [p for p in found if _same(p, middle)]
    return float(np.median(near)) if len(near) * 2 > len(periods) else None


def node_series(dataset: Dataset, name: str) -> Series | None:
    """The node series of that name, if the dataset has it."""
    for series in dataset.series:
        if series.label_kind is LabelKind.NODE and series.name == name:
            return series
    return None


@rule(KIND)
def noisy_nodes(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Nodes whose lost fraction or detour rate is on the worse side of the
    population (an outlier, or the smaller and worse mode), with the period
    and size of their detours; nodes that share a period are named together."""
    judged: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)  # node -> series -> how it stood out
    labels: set[str] = set()
    for name in JUDGED:
        series = node_series(dataset, name)
        if series is None:
            continue
        labels.update(series.labels.tolist())
        population = analyse(series, sensitivity)
        bad = population.bad_labels()
        if not len(bad):
            continue
        outliers = set(population.outliers(population.bad_side).tolist())
        rest = np.ones(len(series), dtype=bool)
        rest[bad] = False
        reference = float(np.nanmedian(series.values[rest])) if rest.any() else math.nan
        for index in bad.tolist():
            judged[str(series.labels[index])][name] = {
                "value": float(series.values[index]),
                "unit": series.unit,
                "median": reference,  # the other nodes'
                "how": "outlier" if index in outliers else "mode",
            }
    if not judged:
        return []
    details = dataset.details.get(LOST_FRACTION, {})
    noise = {node: node_noise(details.get(node, [])) for node in labels}
    others = [noise[node].period_ms for node in labels if node not in judged]
    common = _common_period(others)
    # Each noisy node's period: the strongest one the other nodes do not
    # share (a daemon's, beside the timer tick every node has), else its
    # dominant one.  One finding per period (within SAME_PERIOD).
    own = {node: next((p for p, _ in noise[node].periods if not _same(p, common)), noise[node].period_ms)
           for node in judged}
    groups: list[list[str]] = []
    for node in sorted(judged, key=natural_key):
        for members in groups:
            if _same(own[members[0]], own[node]):
                members.append(node)
                break
        else:
            groups.append([node])
    return [_finding(members, judged, noise, own, common) for members in groups]


def _finding(nodes: list[str], judged: dict[str, dict[str, dict[str, Any]]], noise: dict[str, NodeNoise],
             own: dict[str, float | None], common: float | None) -> Finding:
    folded = fold(nodes)
    periods = [own[node] for node in nodes]
    period = None if periods[0] is None else float(np.median(periods))
    detours = _median([noise[node].detour_us for node in nodes])
    words = pattern(NodeNoise(period, None, detours, None, None, 0))
    if common is not None and period is not None and _same(common, period):
        others = f"the other nodes have the same period, {duration(common * 1e3)}, with less lost time"
    elif common is not None:
        others = f"the other nodes: every {duration(common * 1e3)}"
    else:
        others = "the other nodes: no common period"

    def detail(node: str) -> str:
        parts = []
        for name, entry in judged[node].items():
            if name == LOST_FRACTION:
                parts.append(f"lost {figure(entry['value'])}% of its CPU time (others' median "
                             f"{figure(entry['median'])}%)")
            else:
                parts.append(f"{figure(entry['value'])} detours/s per CPU (others' median {figure(entry['median'])})")
        return f"{node} {', '.join(parts)}"

    details = first_few([detail(node) for node in nodes], MESSAGE_NODES)
    one = len(nodes) == 1
    if any(LOST_FRACTION in judged[node] for node in nodes):
        what = f"{'loses' if one else 'lose'} more CPU time to the operating system than the other nodes"
    else:
        what = f"{'is' if one else 'are'} interrupted by the operating system more often than the other nodes"
    message = f"{folded} {what}: {words} ({others}); {details}"
    per_node = {}
    for node in nodes:
        n = noise[node]
        per_node[node] = {
            **{name.removeprefix(f"{NOISE}."): entry for name, entry in judged[node].items()},
            "period_ms": own[node], "period_share": next((share for p, share in n.periods if p == own[node]), None),
            "dominant_period_ms": n.period_ms,
            "periods": [{"period_ms": p, "share": share} for p, share in n.periods], "detour_us": n.detour_us,
            "detour_median_us": n.detour_median_us, "detour_max_us": n.detour_max_us, "repetitions": n.repetitions,
        }
    when = f"every {duration(period * 1e3)}" if period is not None else "often"
    remedy = (f"Find what interrupts {folded} {when}: compare its process accounting with the other nodes' "
              f"(oddnode processes: the commands it runs far more often), its services, cron jobs, systemd timers "
              f"and monitoring agents, and its interrupts (/proc/interrupts); stop or move what differs and run "
              f"the noise step again. Synchronising parallel jobs wait for an interrupted rank at every step, "
              f"so such noise costs them in proportion to their concurrency.")
    return Finding(
        kind=KIND,
        severity=Severity.WARNING,
        subject=LOST_FRACTION,
        nodes=folded,
        message=message,
        evidence={"pattern": words, "period_ms": period, "detour_us": detours,
                  "others_period_ms": common, "nodes": per_node},
        remedy=remedy,
    )
