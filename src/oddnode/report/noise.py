"""The noise step's results as the analysis shows them: per node the share
of the CPUs' time its OS took, its detour rate and longest detour, and what
the spectra of its repetitions found (the dominant period of its lost time
and that period's share of the spectral power, the other recurring periods,
how long its detours are)."""

from __future__ import annotations

from typing import Any

from oddnode.core.model import Dataset
from oddnode.core.nodes import expand
from oddnode.core.order import natural_key
from oddnode.findings.noise import KIND, duration, node_noise, node_series
from oddnode.readings.noise_series import DETOUR_MAX, DETOUR_RATE, LOST_FRACTION
from oddnode.report import documents
from oddnode.report.terminal import report_number

# Rows the report's table shows at most, the most lost time first (the
# nodes the findings name always); the JSON keeps every node.
MAX_ROWS = 30

READING = (
    "lost: the share of the CPUs' time the OS took from the noise kernel (best repetition); detours: how many "
    "a second on one CPU, and the longest; period: the dominant period of the lost time, found in at least half "
    "of the repetitions' spectra, with its share of the spectral power (a daemon or a timer on a fixed period "
    "shows as one); half of the lost time is in detours at least as long as the last column says."
)


def _values(dataset: Dataset, name: str) -> dict[str, float]:
    series = node_series(dataset, name)
    return {} if series is None else dict(zip(series.labels.tolist(), series.values.tolist()))


def noise_json(dataset: Dataset) -> documents.NoiseSection:
    """Every node the noise step measured (empty ``nodes`` when none)."""
    lost, rate, longest = (_values(dataset, name) for name in (LOST_FRACTION, DETOUR_RATE, DETOUR_MAX))
    details = dataset.details.get(LOST_FRACTION, {})
    nodes: dict[str, documents.NoiseNode] = {}
    for node in sorted(set(lost) | set(details), key=natural_key):
        noise = node_noise(details.get(node, []))
        nodes[node] = {
            "lost_pct": lost.get(node), "detour_rate": rate.get(node), "detour_max_us": longest.get(node),
            "period_ms": noise.period_ms, "period_share": noise.share,
            "periods": [{"period_ms": period, "share": share} for period, share in noise.periods],
            "detour_us": noise.detour_us, "detour_median_us": noise.detour_median_us,
            "repetitions": noise.repetitions}
    return {"nodes": nodes}


def _cell(value: float | None, unit: str = "") -> str:
    return "—" if value is None else f"{report_number(value)}{unit}"


def noise_section(analysis) -> dict[str, Any] | None:
    """The HTML report's "OS noise" section: how to read it and a row per
    node, the most lost time first (at most MAX_ROWS, and every node a
    noisy-node finding names, marked); None without noise results."""
    nodes = noise_json(analysis.dataset)["nodes"]
    if not nodes:
        return None
    flagged = {node for f in analysis.findings if f.kind == KIND for node in expand(f.nodes)}
    order = sorted(nodes, key=lambda n: (-(nodes[n]["lost_pct"] or 0.0), natural_key(n)))
    shown = [n for n in order[:MAX_ROWS]] + [n for n in order[MAX_ROWS:] if n in flagged]
    rows = []
    for node in shown:
        n = nodes[node]
        period = "none" if n["period_ms"] is None else f"{report_number(n['period_ms'])} ms"
        rows.append([node, _cell(n["lost_pct"], " %"), _cell(n["detour_rate"]),
                     "—" if n["detour_max_us"] is None else duration(n["detour_max_us"]), period,
                     "—" if n["period_share"] is None else f"{n['period_share']:.0%}",
                     "—" if n["detour_us"] is None else duration(n["detour_us"])])
    return {"reading": READING, "columns": ["node", "lost", "detours/s", "longest detour", "period",
                                            "period's share", "half the lost time in detours of"],
            "rows": rows, "flagged": sorted(flagged, key=natural_key),
            "more": max(0, len(nodes) - len(shown))}
