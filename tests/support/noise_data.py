"""Stored results of the noise step on synthetic clusters with a known
truth: healthy nodes, and nodes whose OS takes more of their time."""

from __future__ import annotations

import numpy as np

from oddnode.core.model import Dataset, Direction, LabelKind, Series
from oddnode.readings.noise_series import DETOUR_MAX, DETOUR_RATE, LOST_FRACTION

REPETITIONS = 3
TICK_MS = 4.0  # the period every healthy node shows: a 250 Hz timer tick


def node_series(benchmark: str, unit: str, values: dict[str, list[float]]) -> Series:
    """A lower-is-better node series: the best (least) of each node's repetitions."""
    labels = sorted(values)
    best = np.array([min(values[label]) for label in labels])
    spread = np.array([(max(v) - min(v)) / max(abs(max(v)), abs(min(v))) for v in (values[l] for l in labels)])
    return Series(benchmark=benchmark, metric="value", unit=unit, direction=Direction.LOWER,
                  label_kind=LabelKind.NODE, labels=np.array(labels, dtype=object), values=best,
                  repetitions=np.full(len(labels), REPETITIONS, dtype=np.int64), spread=spread)


def noise_cluster(nodes: list[str], rng: np.random.Generator, noisy: dict[str, dict] | None = None) -> Dataset:
    """The noise step's three series and their parameters on healthy nodes:
    2% lost, 1000 detours/s of 5 us, the timer tick's period on most nodes
    and none found on some; ``noisy`` node -> lost %, rate, period_ms, detour_us."""
    noisy = noisy or {}
    lost, rate, longest, details = {}, {}, {}, {}
    for node in nodes:
        fault = noisy.get(node)
        reps = []
        for _ in range(REPETITIONS):
            if fault:
                entry = {"lost": fault["lost"] * rng.normal(1, 0.01), "rate": fault["rate"] * rng.normal(1, 0.01),
                         "period_ms": fault.get("period_ms"), "detour_us": fault["detour_us"] * rng.normal(1, 0.02),
                         "max_us": fault["detour_us"] * 3}
            else:
                entry = {"lost": rng.normal(2.0, 0.03), "rate": rng.normal(1000, 15),
                         "period_ms": TICK_MS * rng.normal(1, 0.001) if rng.random() < 0.8 else None,
                         "detour_us": rng.normal(5.0, 0.2), "max_us": rng.normal(300, 10)}
            reps.append(entry)
        lost[node] = [r["lost"] for r in reps]
        rate[node] = [r["rate"] for r in reps]
        longest[node] = [r["max_us"] for r in reps]
        details[node] = [{"period_ms": r["period_ms"], "period_share": 0.3 if r["period_ms"] else 0.0,
                          **({"periods": fault["periods"]} if fault and "periods" in fault else {}),
                          "detour_lost_median_us": r["detour_us"], "detour_median_us": min(r["detour_us"], 3.0),
                          "detour_max_us": r["max_us"], "detours": 10000,
                          "cpus": 16, "seconds": 10.0} for r in reps]
    return Dataset(series=[node_series(LOST_FRACTION, "%", lost), node_series(DETOUR_RATE, "1/s", rate),
                           node_series(DETOUR_MAX, "us", longest)],
                   details={LOST_FRACTION: details})
