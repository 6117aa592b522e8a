"""The report of set results (``oddnode sets``, ``oddnode scale``): STAB's
``anal`` of sorted next to shuffled sets and of packed next to striped, the
topology groups each packed and striped set spans, the nodes common to
failed set runs (``xcommon``), SCAB's scaling tables, their figures, the HTML section
and the JSON.

Read through the pure functions of ``oddnode.readings.sets``.  The terminal
views fit the width they are printed in as the statistics table does: every
cell whole, columns left out least wanted first and named in the caption,
``wide`` showing everything.  Each view is None when the store holds no set
results, so that reports without them are unchanged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from oddnode.findings.sets import LOSS_RATIO, judged_metric
from oddnode.core.model import Dataset, Direction, Finding
from oddnode.report.terminal import (WIDE_NOTE, fit_columns, fixed_table, natural_width, number, print_views, probability,
                                      report_number,
                                     table_width)
from oddnode.readings.sets import (
    FailedSetMembers,
    OrderingRow,
    PlacedSet,
    ScalingCurve,
    failed_set_members,
    failed_set_runs,
    member_correlations,
    ordering_table,
    placed_sets,
    runs_by_ordering,
    scaling_curves,
)
from oddnode.readings.sets_series import ORDERINGS, PACKED, SCALE, SETS, SHUFFLED, SORTED, STRIPED, set_series
from oddnode.stats.describe import Description

if TYPE_CHECKING:
    from oddnode.report import documents
    from oddnode.judge.analysis import Analysis

# Sized metrics (``time.<bytes>``) whose smallest message says most: the
# latency; of any other sized metric (``bandwidth.<bytes>``) the largest.
LATENCY_PREFIXES = ("time", "latency")
# How many nodes of a benchmark's failed set runs are listed; the rest are counted.
MAX_FAILED_MEMBERS = 10
# How many member correlations and slow sets the HTML report lists.
MAX_MEMBER_CORRELATIONS = 5
MAX_SLOW_SETS = 10
# How many sets of each packed or striped series the placement table lists
# unless wide; the rest are counted.
MAX_PLACED_SETS = 12
# The orderings the tables set side by side: the node list's own, and the
# topology's.  The second of each pair is the one expected to vary more.
PAIRS = ((SORTED, SHUFFLED), (PACKED, STRIPED))

READING = (
    "Sorted sets are neighbours in the cluster's list and sit on one switch: their spread is the hardware's own. "
    "Shuffled sets are drawn anew every repetition and cross switches: shuffled runs far more variable than sorted "
    "ones mean contention for the links between switches, and a shuffled curve falling with the node count while "
    "the sorted one holds means the uplinks are oversubscribed. A node in most of the slow or failed sets across "
    "reshuffles is a weak member. With a topology, packed sets fill one group (a leaf switch, a line card) before "
    "the next, as the usual job lands; striped sets take a node of every group in turn: striped runs slower or "
    "more variable than packed ones mean the links between the groups limit a job spread over them."
)

_NAME = "benchmark"
_INDENT = "  "  # a metric's row under its benchmark's line
_VALUES = ("runs", "median", "low", "high", "%var")
_RATIO = "var ratio"
_RATIO_NOTE = "var ratio: shuffled %var over sorted %var; %var = (high - low) / low × 100"
_GROUPS = "groups"
_PLACED_VALUES = ("runs", "median")


def _ratio_note(pair: tuple[str, str]) -> str:
    return f"var ratio: {pair[1]} %var over {pair[0]} %var; %var = (high - low) / low × 100"
# The stacked layout (one row per ordering) leaves these out first, least wanted first.
LEFT_OUT_FIRST = ("high", "low", "runs", "unit")
_LEFT = {_NAME, "unit", "node"}


# --- what is shown ------------------------------------------------------------------


def has_set_results(dataset: Dataset) -> bool:
    """Whether the store holds set or scale runs, valid or failed."""
    return bool(runs_by_ordering(dataset)) or bool(failed_set_runs(dataset))


def _family_name(family: str, benchmark: str) -> str:
    """A set benchmark as the tables name it, its orderings together: ``sets.sendrecv``."""
    return f"{family}.{benchmark}"


def _sized(metric: str) -> tuple[str, int] | None:
    prefix, _, size = metric.rpartition(".")
    return (prefix, int(size)) if prefix and size.isdigit() else None


def shown_metrics(metrics: Sequence[str]) -> list[str]:
    """The metrics of one benchmark a fitted table shows, in the given order:
    of sized ones, the latency at the smallest message that carries data
    (``time.1``; ``time.0`` only when nothing else) and the bandwidth at the
    largest, with the metric the set rules judge; every unsized metric."""
    keep = set()
    sizes: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for metric in metrics:
        sized = _sized(metric)
        if sized is None:
            keep.add(metric)
        else:
            sizes[sized[0]].append((sized[1], metric))
    for prefix, found in sizes.items():
        if prefix in LATENCY_PREFIXES:
            keep.add(min([s for s in found if s[0] > 0] or found)[1])
        else:
            keep.add(max(found)[1])
    judged = judged_metric(list(metrics))
    if judged is not None:
        keep.add(judged)
    return [m for m in metrics if m in keep]


def _set_rows(dataset: Dataset, pair: tuple[str, str] = PAIRS[0]) -> dict[str, list[OrderingRow]]:
    """The ``sets`` family's ordering rows per benchmark, in the analysis's
    order, of the benchmarks measured in either ordering of ``pair`` (the
    scale family's node counts set its values: its pooled spread means nothing)."""
    rows: dict[str, list[OrderingRow]] = defaultdict(list)
    for row in ordering_table(dataset).rows:
        if row.family == SETS and any(row.of(o) is not None for o in pair):
            rows[row.benchmark].append(row)
    return dict(rows)


def variability_ratio(row: OrderingRow, pair: tuple[str, str] = PAIRS[0]) -> float | None:
    """The second ordering's %variability over the first's (shuffled over
    sorted, striped over packed); None without both or with a first spread of 0."""
    first, second = row.of(pair[0]), row.of(pair[1])
    if first is None or second is None:
        return None
    a, b = first.variability_pct, second.variability_pct
    if not (math.isfinite(a) and math.isfinite(b)) or a <= 0:
        return None
    return b / a


def _pct(value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    return "inf" if math.isinf(value) else f"{value:.2f}"


def _ordering_cells(d: Description | None, shown: Callable[[float], str] = number) -> dict[str, str]:
    """An ordering's columns, its values `shown` (the terminal's digits unless told)."""
    if d is None:
        return dict.fromkeys(_VALUES, "-")
    return {"runs": str(d.n), "median": shown(d.median), "low": shown(d.low), "high": shown(d.high),
            "%var": _pct(d.variability_pct)}


def _ratio_cell(row: OrderingRow, pair: tuple[str, str] = PAIRS[0]) -> str:
    ratio = variability_ratio(row, pair)
    return "-" if ratio is None else f"{ratio:.2f}"


# --- fitting a table to the terminal -------------------------------------------------------


def _table(title: str, caption: str | None, shown: Sequence[str], widths: Mapping[str, int],
           rows: Sequence[Mapping[str, Any]], styles: Sequence[str | None] = ()) -> Table:
    return fixed_table(title, caption, shown, widths, rows, _LEFT, styles)


def _caption(parts: Sequence[str]) -> str | None:
    text = " ".join(p for p in parts if p)
    return text or None


# --- the ordering table -----------------------------------------------------------------


def _side_rows(rows: dict[str, list[OrderingRow]], metrics: dict[str, list[str]],
               pair: tuple[str, str] = PAIRS[0]) -> list[dict[str, str]]:
    """A line per benchmark, then per metric the pair's orderings side by side."""
    out = []
    columns = [_NAME, "unit", *(f"{o} {v}" for o in pair for v in _VALUES), _RATIO]
    for benchmark, found in rows.items():
        out.append(dict.fromkeys(columns, "") | {_NAME: _family_name(SETS, benchmark)})
        for row in found:
            if row.metric not in metrics[benchmark]:
                continue
            cells = {_NAME: _INDENT + row.metric, "unit": row.unit or "-", _RATIO: _ratio_cell(row, pair)}
            for ordering in pair:
                cells |= {f"{ordering} {k}": v for k, v in _ordering_cells(row.of(ordering)).items()}
            out.append(cells)
    return out


def _stacked_rows(rows: dict[str, list[OrderingRow]], metrics: dict[str, list[str]],
                  pair: tuple[str, str] = PAIRS[0]) -> list[dict[str, str]]:
    """A line per benchmark, under it a line per metric (its unit and the
    ratio), under that a row per ordering: the names stay short enough for
    a narrow terminal."""
    out = []
    columns = [_NAME, "unit", *_VALUES, _RATIO]
    for benchmark, found in rows.items():
        out.append(dict.fromkeys(columns, "") | {_NAME: _family_name(SETS, benchmark)})
        for row in found:
            if row.metric not in metrics[benchmark]:
                continue
            out.append(dict.fromkeys(columns, "") | {_NAME: _INDENT + row.metric, "unit": row.unit or "-",
                                                     _RATIO: _ratio_cell(row, pair)})
            for ordering in pair:
                out.append({_NAME: 2 * _INDENT + ordering, "unit": "", **_ordering_cells(row.of(ordering)),
                            _RATIO: ""})
    return out


def ordering_table_view(dataset: Dataset, width: int | None = None, wide: bool = False,
                        pair: tuple[str, str] = PAIRS[0]) -> Table | None:
    """STAB's anal of the set runs, sorted next to shuffled (``pair``: packed
    next to striped): per benchmark and metric, over every repetition of
    every set of each ordering, runs, median, low, high and %variability,
    and the ratio of the second ordering's %variability to the first's.
    None without set runs of either ordering.

    Fitted to ``width`` (None: every column at full width): the orderings
    side by side where that fits, else a line per metric and a row per
    ordering under it, with the columns there is no room for left out
    (high, low, runs, unit) and named in the caption; a name too long for
    what is left folds onto a second line.  Of a benchmark's many message
    sizes only the latency at the smallest and the bandwidth at the largest
    are shown unless ``wide``, which shows every metric and every column
    side by side."""
    rows = _set_rows(dataset, pair)
    if not rows:
        return None
    every = {b: [r.metric for r in found] for b, found in rows.items()}
    metrics = every if wide else {b: shown_metrics(m) for b, m in every.items()}
    hidden = sum(len(every[b]) - len(metrics[b]) for b in rows)
    notes = [_ratio_note(pair) + "."]
    if hidden:
        notes.append(f"Left out: {hidden} other message sizes (latency shown at the smallest message, bandwidth "
                     "at the largest).")
    title = f"Node sets: every run of every set, {pair[0]} against {pair[1]}"
    side = _side_rows(rows, metrics, pair)
    if wide or width is None or table_width([natural_width(c, side, True) for c in side[0]]) <= width:
        shown, widths, _ = fit_columns(list(side[0]), side, None if wide else width)
        return _table(title, _caption([*notes, WIDE_NOTE if hidden else ""]), shown, widths, side, _styles(side))
    stacked = _stacked_rows(rows, metrics, pair)
    shown, widths, left_out = fit_columns(list(stacked[0]), stacked, width, LEFT_OUT_FIRST)
    if left_out:
        notes.append(f"{', '.join(c for c in stacked[0] if c in left_out)} left out to fit {width} columns.")
    if hidden or left_out:
        notes.append(WIDE_NOTE)
    return _table(title, _caption(notes), shown, widths, stacked, _styles(stacked))


def _styles(rows: Sequence[Mapping[str, str]]) -> list[str | None]:
    """Bold for a benchmark's line (a name and nothing else)."""
    return ["bold" if not row[_NAME].startswith(_INDENT) and not any(v for k, v in row.items() if k != _NAME)
            else None for row in rows]


# --- where packed and striped sets land ----------------------------------------------------


def judged_placed_sets(dataset: Dataset) -> dict[str, list[PlacedSet]]:
    """Per sets benchmark, its packed and striped sets in the metric the set
    rules judge (the bandwidth at the largest size, time for barrier)."""
    by_benchmark: dict[str, dict[str, list[PlacedSet]]] = defaultdict(lambda: defaultdict(list))
    for placed in placed_sets(dataset):
        by_benchmark[placed.benchmark][placed.metric].append(placed)
    out = {}
    for benchmark, metrics in by_benchmark.items():
        metric = judged_metric(list(metrics))
        if metric is not None:
            out[benchmark] = metrics[metric]
    return out


def groups_text(groups: Sequence[str]) -> str:
    """The groups a set spans as a column shows them: ``leaf1+leaf2``."""
    return "+".join(groups) or "-"


def placed_sets_view(dataset: Dataset, width: int | None = None, wide: bool = False,
                     limit: int = MAX_PLACED_SETS) -> Table | None:
    """Per sets benchmark, every packed and every striped set with the
    topology groups it spans, its runs and their median in the judged
    metric: how the usual job shapes land on the switches.  The first
    ``limit`` sets of each ordering unless ``wide``.  None without packed or
    striped runs."""
    judged = judged_placed_sets(dataset)
    if not judged:
        return None
    columns = ("set", _GROUPS, *_PLACED_VALUES)
    rows: list[dict[str, str]] = []
    styles: list[str | None] = []
    more = 0
    for benchmark, found in judged.items():
        first = found[0]
        rows.append(dict.fromkeys(columns, "") | {"set": f"{_family_name(SETS, benchmark)}: {first.metric} "
                                                         f"({first.unit or '-'}, {_better(first.direction)})"})
        styles.append("bold")
        for ordering in (PACKED, STRIPED):
            sets = [p for p in found if p.ordering == ordering]
            if not sets:
                continue
            spans = sorted(len(p.groups) for p in sets)
            many = f"{spans[0]} to {spans[-1]} groups" if spans[-1] != spans[0] else \
                f"{spans[0]} group{'' if spans[0] == 1 else 's'}"
            rows.append(dict.fromkeys(columns, "") | {
                "set": f"{_INDENT}{ordering}: {len(sets)} set{'' if len(sets) == 1 else 's'}, {many} each"})
            styles.append(None)
            shown_sets = sets if wide else sets[:limit]
            more += len(sets) - len(shown_sets)
            for p in shown_sets:
                rows.append({"set": 2 * _INDENT + p.label, _GROUPS: groups_text(p.groups),
                             "runs": str(len(p.values)), "median": number(p.median)})
                styles.append(None)
            if len(sets) > len(shown_sets):
                rows.append(dict.fromkeys(columns, "") | {"set": f"{2 * _INDENT}{len(sets) - len(shown_sets)} "
                                                                 "more sets"})
                styles.append("dim")
    # The benchmarks' lines fold in the set column before a column goes.
    bodies = [row for row, style in zip(rows, styles) if style != "bold"]
    needed = {c: natural_width(c, bodies, False) for c in columns}
    if wide or width is None or table_width(list(needed.values())) <= width:
        shown, left_out = list(columns), []
        room = None if wide or width is None else width - table_width([needed[c] for c in columns[1:]]) - 3
        widths = {**needed, "set": natural_width("set", rows, False) if room is None
                  else min(natural_width("set", rows, False), room)}
    else:
        shown, widths, left_out = fit_columns(columns, bodies, width, ("runs",))
        # The groups fold too, after the names: never below their header.
        room = width - table_width([widths[c] for c in shown if c != _GROUPS]) - 3
        widths[_GROUPS] = max(min(widths[_GROUPS], room), len(_GROUPS))
    notes = ["groups: the topology groups the set's nodes hang from; (ungrouped): nodes the topology does not "
             "place; -: no topology recorded. Packed and striped sets are the same every repetition."]
    if left_out:
        notes.append(f"{', '.join(left_out)} left out to fit {width} columns.")
    if more:
        notes.append(f"{more} more sets not listed. {WIDE_NOTE}")
    return fixed_table("Packed and striped sets: where each lands", _caption(notes), shown, widths, rows,
                       {"set", _GROUPS}, styles)


# --- STAB's xcommon over failed set runs -------------------------------------------------


def _folded_failures(found: Sequence[FailedSetMembers]) -> list[tuple[list[str], FailedSetMembers]]:
    """Benchmarks whose failed set runs hold the same nodes as often, as one:
    one kernel run gives every benchmark of it, and fails for all at once."""
    folded: dict[tuple, tuple[list[str], FailedSetMembers]] = {}
    for f in found:
        folded.setdefault((f.runs, f.counts), ([], f))[0].append(f"{f.family}.{f.benchmark}")
    return list(folded.values())


def failed_members_view(dataset: Dataset, width: int | None = None,
                        limit: int = MAX_FAILED_MEMBERS) -> Table | None:
    """Per benchmark, the nodes of its failed set runs by how many of them
    each is in, and that share of the failed runs; the first ``limit`` and
    how many more.  Benchmarks with the same counts (one kernel run gives
    them all) are one list.  None without failed set runs."""
    found = failed_set_members(dataset)
    if not found:
        return None
    columns = ("node", "failed runs", "share")
    rows: list[dict[str, str]] = []
    styles: list[str | None] = []
    for names, f in _folded_failures(found):
        rows.append({"node": f"{', '.join(names)}: {f.runs} failed set run{'' if f.runs == 1 else 's'}",
                     "failed runs": "", "share": ""})
        styles.append("bold")
        for node, count in f.counts[:limit]:
            rows.append({"node": _INDENT + node, "failed runs": str(count), "share": f"{count / f.runs:.0%}"})
            styles.append(None)
        if len(f.counts) > limit:
            rows.append({"node": f"{_INDENT}{len(f.counts) - limit} more nodes", "failed runs": "", "share": ""})
            styles.append("dim")
    # The benchmarks' lines wrap in the node column before any header does.
    others = {c: natural_width(c, rows, False) for c in columns[1:]}
    names = max(len(row["node"]) for row, style in zip(rows, styles) if style != "bold")
    room = None if width is None else width - table_width(list(others.values())) - 3
    if room is not None and names <= room:
        shown, widths = list(columns), {"node": min(natural_width("node", rows, False), room), **others}
    else:
        shown, widths, _ = fit_columns(columns, rows, width)
    caption = "share: of the benchmark's failed set runs, those the node was in."
    return _table("Nodes common to failed set runs", caption, shown, widths, rows, styles)


# --- SCAB's scaling ------------------------------------------------------------------------


def _goodness(value: float, higher_is_better: bool) -> float:
    return value if higher_is_better else (1.0 / value if value else math.nan)


def scaling_ratio(sorted_point, shuffled_point, higher_is_better: bool) -> float | None:
    """How fast the shuffled median is against the sorted one (for time: sorted over shuffled)."""
    if sorted_point is None or shuffled_point is None:
        return None
    a = _goodness(sorted_point.median, higher_is_better)
    b = _goodness(shuffled_point.median, higher_is_better)
    return b / a if a and math.isfinite(a) and math.isfinite(b) else None


def judged_curves(dataset: Dataset) -> dict[str, dict[str, ScalingCurve]]:
    """Per scale benchmark, its curves (ordering -> curve) of the metric the
    scaling rule judges: the bandwidth at the largest size, time for barrier."""
    by_benchmark: dict[str, dict[str, dict[str, ScalingCurve]]] = defaultdict(lambda: defaultdict(dict))
    for curve in scaling_curves(dataset):
        by_benchmark[curve.benchmark][curve.metric][curve.ordering] = curve
    out = {}
    for benchmark, metrics in by_benchmark.items():
        metric = judged_metric(list(metrics))
        if metric is not None:
            out[benchmark] = dict(sorted(metrics[metric].items(), key=lambda item: ORDERINGS.index(item[0])))
    return out


def scaling_points(curves: Mapping[str, ScalingCurve]) -> list[dict[str, Any]]:
    """Per node count, the sorted and shuffled medians and their ratio (None where not measured)."""
    first = next(iter(curves.values()))
    counts = sorted({c for curve in curves.values() for c in curve.counts})
    points = []
    for count in counts:
        a = curves[SORTED].at(count) if SORTED in curves else None
        b = curves[SHUFFLED].at(count) if SHUFFLED in curves else None
        points.append({"nodes": count, SORTED: a.median if a else None, SHUFFLED: b.median if b else None,
                       "ratio": scaling_ratio(a, b, first.higher_is_better)})
    return points


def _better(direction: Direction) -> str:
    return "higher is better" if direction is Direction.HIGHER else "lower is better"


def scaling_view(dataset: Dataset, width: int | None = None) -> Group | None:
    """Per scale benchmark, a table of node counts against the sorted and
    the shuffled median of the judged metric and their ratio; a ratio below
    the scaling-loss bound in red.  None without scale runs."""
    judged = judged_curves(dataset)
    if not judged:
        return None
    tables = []
    columns = ("nodes", SORTED, SHUFFLED, "shuffled/sorted")
    for benchmark, curves in judged.items():
        first = next(iter(curves.values()))
        points = scaling_points(curves)
        rows = [{"nodes": str(p["nodes"]), SORTED: number(p[SORTED]) if p[SORTED] is not None else "-",
                 SHUFFLED: number(p[SHUFFLED]) if p[SHUFFLED] is not None else "-",
                 "shuffled/sorted": f"{p['ratio']:.2f}" if p["ratio"] is not None else "-"} for p in points]
        shown, widths, _ = fit_columns(columns, rows, width)
        runs = max((pt.n for curve in curves.values() for pt in curve.points), default=0)
        title = (f"{_family_name(SCALE, benchmark)}: {first.metric} ({first.unit or '-'}, "
                 f"{_better(first.direction)}), median of up to {runs} repetitions")
        # The ratios below the scaling-loss bound in red.
        marked = [row | {"shuffled/sorted": Text(row["shuffled/sorted"], style="bold red")}
                  if p["ratio"] is not None and p["ratio"] < LOSS_RATIO else row for row, p in zip(rows, points)]
        tables.append(_table(title, None, shown, widths, marked))
    caption = Text(f"shuffled/sorted: how fast the shuffled set runs against the sorted one (for a time, sorted "
                   f"over shuffled); in red below {LOSS_RATIO:g}, the scaling-loss rule's bound.", style="dim")
    return Group(*tables, caption)


# --- the terminal ---------------------------------------------------------------------------


def set_views(dataset: Dataset, width: int | None = None, wide: bool = False) -> list[RenderableType]:
    """The terminal views of the set results that exist: the ordering table,
    the nodes common to failed set runs, the scaling tables."""
    width = None if wide else width
    views = [*(ordering_table_view(dataset, width, wide, pair) for pair in PAIRS),
             placed_sets_view(dataset, width, wide), failed_members_view(dataset, width), scaling_view(dataset, width)]
    return [view for view in views if view is not None]


def print_sets(console: Console, dataset: Dataset, wide: bool = False) -> bool:
    """Print the set views fitted to the console (``wide``: everything,
    however wide); whether there was anything to print."""
    return print_views(console, set_views(dataset, console.width, wide), wide)


# --- JSON ------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Plain JSON: numpy scalars as numbers, NaN and infinities as null."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def sets_json(dataset: Dataset) -> documents.SetTables:
    """The set results as data, for ``--json``: the ordering table (with
    each row's shuffled/sorted %variability ratio), the nodes common to
    failed set runs, the member correlations, the scaling curves, the
    scaling tables of the judged metrics, and every packed and striped set
    with the groups it spans.  NaN and infinities are null."""
    table = ordering_table(dataset)
    rows = []
    for row in table.rows:
        ratios = {"variability_ratio": variability_ratio(row)}
        if any(row.of(o) is not None for o in PAIRS[1]):
            ratios["striped_variability_ratio"] = variability_ratio(row, PAIRS[1])
        rows.append(row.to_json() | ratios)
    scaling = []
    for benchmark, curves in judged_curves(dataset).items():
        first = next(iter(curves.values()))
        scaling.append({"benchmark": benchmark, "metric": first.metric, "unit": first.unit,
                        "direction": first.direction.value, "loss_ratio": LOSS_RATIO,
                        "points": scaling_points(curves)})
    return _plain({
        "ordering_table": rows,
        "failed_members": [f.to_json() for f in failed_set_members(dataset)],
        "member_correlations": [c.to_json() for c in member_correlations(dataset)],
        "scaling_curves": [c.to_json() for c in scaling_curves(dataset)],
        "scaling": scaling,
        "placed_sets": [p.to_json() for p in placed_sets(dataset)],
    })


# --- the HTML report -------------------------------------------------------------------


def _html_ordering_row(row: OrderingRow) -> dict[str, Any]:
    return {"benchmark": _family_name(row.family, row.benchmark), "metric": row.metric,
            "unit": row.unit or "-", "direction": row.direction.value,
            SORTED: _ordering_cells(row.sorted, report_number), SHUFFLED: _ordering_cells(row.shuffled, report_number),
            "ratio": _ratio_cell(row)}


def _findings_of(findings: Sequence[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


def _spread_figures(dataset: Dataset, findings: Sequence[Finding]) -> list[dict[str, str]]:
    """Per sets benchmark, every run of its judged metric in both orderings,
    with what the set-contention rule said of it."""
    from oddnode.report.plots import figure_to_svg, ordering_spread_figure  # matplotlib: the HTML report only

    grouped: dict[str, dict[str, dict]] = defaultdict(dict)
    for (_, benchmark, metric), orderings in runs_by_ordering(dataset, SETS).items():
        grouped[benchmark][metric] = orderings
    figures = []
    contention = _findings_of(findings, "set-contention")
    for benchmark, metrics in grouped.items():
        metric = judged_metric(list(metrics))
        orderings = metrics[metric]
        first = next(iter(orderings.values()))
        values = {o: orderings[o].values for o in ORDERINGS if o in orderings}
        name = _family_name(SETS, benchmark)
        svg = figure_to_svg(ordering_spread_figure(values, f"{name}: every run, {(' against ' if len(values) == 2 else ', ').join(values)}",
                                                   first.metric, first.unit))
        said = [f.message for f in contention if f.subject.startswith(set_series(SETS, benchmark, SHUFFLED) + ":")]
        figures.append({"title": f"{name}: {metric}", "caption": "; ".join(said), "svg": svg})
    return figures


def _slow_sets(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """The weak members the set rule named, one block per node however many
    benchmarks named it (one node slows all its sets' benchmarks): the
    strongest finding's message and the slow or failed runs of its evidence,
    the other benchmarks listed."""
    by_node: dict[str, list[Finding]] = defaultdict(list)
    for f in _findings_of(findings, "weak-set-member"):
        by_node[f.nodes].append(f)
    found = []
    for node, named in by_node.items():
        strongest = min(named, key=lambda f: (f.evidence.get("p", 1.0), f.subject))
        runs = strongest.evidence.get("slow_sets", [])
        found.append({
            "node": node, "subject": strongest.subject, "message": strongest.message, "remedy": strongest.remedy,
            "also": [f.subject for f in named if f is not strongest],
            "runs": [{"set": r.get("set", ""), "ordering": str(r.get("series", "")).rpartition(".")[2],
                      "repetition": r.get("repetition") if r.get("repetition") is not None else "-",
                      "value": "failed" if r.get("failed") else report_number(r.get("value")),
                      "median": report_number(r.get("median"))} for r in runs[:MAX_SLOW_SETS]],
            "more": max(0, len(runs) - MAX_SLOW_SETS),
        })
    return found


def sets_section(analysis: Analysis) -> dict[str, Any] | None:
    """The HTML report's "Node sets" section: how to read sorted against
    shuffled, the ordering table (the shown metrics, then the others folded
    away), the spread of every run, the weak members and their slow sets,
    the nodes common to failed set runs, the strongest member correlations,
    and per scale benchmark its table and curve.  None without set results."""
    from oddnode.report.plots import figure_to_svg, scaling_figure  # matplotlib: the HTML report only

    dataset, findings = analysis.dataset, analysis.findings
    if not has_set_results(dataset):
        return None
    rows = _set_rows(dataset)
    shown = {b: set(shown_metrics([r.metric for r in found])) for b, found in rows.items()}
    every = [r for found in rows.values() for r in found]
    ordering_rows = [_html_ordering_row(r) for r in every if r.metric in shown[r.benchmark]]
    other_rows = [_html_ordering_row(r) for r in every if r.metric not in shown[r.benchmark]]
    failed = [{"benchmark": ", ".join(names), "runs": f.runs,
               "rows": [{"node": node, "count": count, "share": f"{count / f.runs:.0%}"}
                        for node, count in f.counts[:MAX_FAILED_MEMBERS]],
               "more": max(0, len(f.counts) - MAX_FAILED_MEMBERS)}
              for names, f in _folded_failures(failed_set_members(dataset))]
    correlations = [{"set_series": c.set_series, "node_series": c.node_series, "n": c.correlation.n,
                     "rho": f"{c.correlation.spearman_r:.2f}", "p_rho": probability(c.correlation.spearman_p),
                     "r": f"{c.correlation.pearson_r:.2f}", "p": probability(c.correlation.pearson_p)}
                    for c in member_correlations(dataset)[:MAX_MEMBER_CORRELATIONS]]
    losses = _findings_of(findings, "scaling-loss")
    scaling = []
    for benchmark, curves in judged_curves(dataset).items():
        first = next(iter(curves.values()))
        name = _family_name(SCALE, benchmark)
        points = [{"nodes": p["nodes"],
                   SORTED: report_number(p[SORTED]), SHUFFLED: report_number(p[SHUFFLED]),
                   "ratio": f"{p['ratio']:.2f}" if p["ratio"] is not None else "—",
                   "loss": p["ratio"] is not None and p["ratio"] < LOSS_RATIO} for p in scaling_points(curves)]
        svg = figure_to_svg(scaling_figure(
            {o: [(p.nodes, p.median, p.low, p.high) for p in c.points] for o, c in curves.items()},
            f"{name}: {first.metric} against the node count", first.metric, first.unit))
        said = [f.message for f in losses if f.subject.startswith(set_series(SCALE, benchmark, SHUFFLED) + ":")]
        scaling.append({"benchmark": name, "metric": first.metric, "unit": first.unit or "-",
                        "better": _better(first.direction), "points": points, "svg": svg,
                        "finding": "; ".join(said)})
    return {
        "reading": READING,
        "ratio_note": _RATIO_NOTE,
        "loss_ratio": f"{LOSS_RATIO:g}",
        "ordering_rows": ordering_rows,
        "other_rows": other_rows,
        "spreads": _spread_figures(dataset, findings),
        "weak": _slow_sets(findings),
        "failed": failed,
        "correlations": correlations,
        "scaling": scaling,
    }
