"""A parameter sweep in the terminal and in figures: per series and message
size the median under every setting, the best setting, its change from the
default and its Holm-corrected p; a figure per series of the metric
against the setting, one line per message size."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from oddnode.report.terminal import fixed_table, natural_width, probability, report_number, table_width

if TYPE_CHECKING:
    from oddnode.report import documents
    from oddnode.judge.sweep import SeriesSweep, SizeRow, SweepAnalysis
    from oddnode.measure.sweep import SweepSummary

SERIES, BETTER, SIZE, BEST, CHANGE, P, MARK = "series", "better", "size", "best", "change", "p (Holm)", "sig"
DEFAULT, BEST_MEDIAN = "default", "best median"
_LEFT = (SERIES, BETTER, BEST)
# The series' names fold down to this many characters before a narrower
# layout is chosen; in the narrow layout (the default's and the best's
# medians instead of a column per setting) a narrow terminal then leaves
# out the direction first, the medians next, the p and the change last.
MIN_SERIES_WIDTH = 20
LEFT_OUT_FIRST = (BETTER, DEFAULT, BEST_MEDIAN, P, CHANGE)
# A figure's x axis names each swept value up to this many; beyond, the
# axis's own ticks.
MAX_TICKS = 12


def _value(value: float | None) -> str:
    """Four significant digits (whole numbers from 1000 up, never an
    exponent there): enough to tell settings apart at a glance."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _percent(change: float | None) -> str:
    if change is None or not math.isfinite(change):
        return "-"
    return f"{change * 100:+.1f}%"


def _size(row: SizeRow) -> str:
    """A row's message size; empty for a metric without one (its series names it)."""
    return "" if row.size is None else str(row.size)


def _series_name(s: SeriesSweep) -> str:
    unit = f" [{s.unit}]" if s.unit else ""
    return f"{s.benchmark} {s.family}{unit}"


def _common(analysis: SweepAnalysis, s: SeriesSweep, row: SizeRow, first: bool) -> dict[str, str]:
    test = row.best_test
    labels = analysis.labels
    return {
        SERIES: _series_name(s) if first else "",
        BETTER: (s.direction.value if first else ""),
        SIZE: _size(row),
        BEST: "-" if row.best is None else labels[row.best],
        CHANGE: "" if row.best == analysis.default else _percent(row.change),
        P: "" if test is None else probability(test.p_holm) if test.p_holm is not None else "too few",
        MARK: "*" if row.significant else "",
    }


def sweep_rows(analysis: SweepAnalysis, wide: bool, number: Callable[[float | None], str] = _value
               ) -> list[dict[str, str]]:
    """The table's rows: with ``wide``, a column per setting; else the
    default's median and the best's; medians written by ``number``."""
    labels = analysis.labels
    rows = []
    for s in analysis.series:
        for index, row in enumerate(s.rows):
            cells = _common(analysis, s, row, index == 0)
            if wide:
                medians = {labels[i]: number(m) for i, m in enumerate(row.medians)}
            else:
                medians = {DEFAULT: number(row.medians[analysis.default]),
                           BEST_MEDIAN: "-" if row.best is None else number(row.medians[row.best])}
            rows.append({SERIES: cells[SERIES], BETTER: cells[BETTER], SIZE: cells[SIZE], **medians,
                         **{k: cells[k] for k in (BEST, CHANGE, P, MARK)}})
    return rows


def _title(analysis: SweepAnalysis) -> str:
    data = analysis.data
    grid = data.grid
    swept = "; ".join(f"{p.name} = {', '.join(p.values)}" for p in grid.swept) or "no parameter swept"
    return f"Sweep {data.sweep_id} of {grid.step}: {swept} ({data.repetitions} rounds)"


def _caption(analysis: SweepAnalysis, left_out: Sequence[str], narrowed: bool) -> str:
    labels = analysis.labels
    parts = [f"Default: {labels[analysis.default]}. Medians over every repetition and "
             f"node, pair or set; best: the setting with the best median; change: best against the default; "
             f"p: Mann-Whitney over turns against the default, Holm-corrected over each series' sizes and "
             f"settings; * significant at alpha {analysis.alpha:g} (and a change of at least "
             f"{analysis.min_effect:.0%})."]
    if narrowed:
        parts.append("One column per setting does not fit: the default's and the best's medians shown.")
    if left_out:
        parts.append(f"{', '.join(left_out)} left out to fit.")
    if narrowed or left_out:
        parts.append("--wide shows them all.")
    fixed = [p for p in analysis.data.grid.parameters if not p.swept]
    if fixed:
        parts.append("Fixed: " + ", ".join(f"{p.name}={p.values[0]}" for p in fixed) + ".")
    return " ".join(parts)


def _styles(analysis: SweepAnalysis) -> list[str | None]:
    return ["green" if row.significant else None for s in analysis.series for row in s.rows]


def sweep_table(analysis: SweepAnalysis, width: int | None = None) -> Table:
    """The sweep's table fitted to ``width`` (None: every setting's column,
    however wide): a column per setting when they fit (the series' names
    folded down to MIN_SERIES_WIDTH), else the default's and the best's
    medians, leaving columns out as LEFT_OUT_FIRST says until they fit."""
    rows = sweep_rows(analysis, wide=True)
    columns = list(rows[0]) if rows else [SERIES, BETTER, SIZE, *analysis.labels, BEST, CHANGE, P, MARK]
    shown, widths, left_out = _fit(columns, rows, width, ())
    narrowed = not shown
    if narrowed:
        rows = sweep_rows(analysis, wide=False)
        shown, widths, left_out = _fit(list(rows[0]), rows, width, LEFT_OUT_FIRST)
    # Units ([us]) and values are text, not markup: fixed_table prints them as they are.
    return fixed_table(_title(analysis), _caption(analysis, left_out, narrowed), shown, widths,
                       rows, _LEFT, _styles(analysis))


def _fit(columns: list[str], rows: list[dict[str, str]], width: int | None, droppable: Sequence[str]
         ) -> tuple[list[str], dict[str, int], list[str]]:
    """The columns shown, their widths and those left out: the series'
    names fold (down to MIN_SERIES_WIDTH) once the ``droppable`` columns
    needed to make room have gone, in order; with none droppable, no
    columns when they do not fit (the caller chooses a narrower layout)."""
    if width is None or not rows:
        return columns, {c: natural_width(c, rows, False) for c in columns}, []
    shown, left_out = list(columns), []
    series = natural_width(SERIES, rows, False)
    for column in (None, *droppable):
        if column is not None:
            if column not in shown:
                continue
            shown.remove(column)
            left_out.append(column)
        others = {c: natural_width(c, rows, True) for c in shown[1:]}
        room = width - table_width(list(others.values())) - 3
        if room >= min(series, MIN_SERIES_WIDTH):
            return shown, {SERIES: min(series, room), **others}, left_out
    if not droppable:
        return [], {}, left_out
    # Nothing left to leave out: the names fold as far as their header.
    return shown, {SERIES: max(room, len(SERIES)), **others}, left_out


def best_lines(analysis: SweepAnalysis) -> list[Text]:
    """One line per series: the settings found significantly better than the
    default, and at which sizes; or that none was."""
    labels = analysis.labels
    lines = []
    for s in analysis.series:
        by_setting: dict[int, list[str]] = {}
        for row in s.rows:
            if row.significant and row.best is not None:
                by_setting.setdefault(row.best, []).append(_size(row))
        if by_setting:
            found = "; ".join(labels[i] + (f" at {', '.join(sizes)} B" if any(sizes) else "")
                              for i, sizes in by_setting.items())
            lines.append(Text.assemble((f"{s.benchmark} {s.family}: ", "bold"), (f"better than the default "
                                                                                 f"({labels[analysis.default]}): ",
                                                                                 ""), (found, "green")))
    # Rows whose best setting the test could not judge: too few repetitions
    # for even the most extreme ranks to reach alpha.
    untold = [row for s in analysis.series for row in s.rows
              if row.best_test is not None and row.best_test.p_holm is None and row.best != analysis.default]
    if not lines:
        if untold and len(untold) == sum(1 for s in analysis.series for row in s.rows
                                         if row.best is not None and row.best != analysis.default):
            smallest = min(row.best_test.smallest_p for row in untold)
            lines.append(Text(f"Too few repetitions to tell any setting from the default "
                              f"({labels[analysis.default]}) at alpha {analysis.alpha:g}: the smallest p-value "
                              f"they can give is {smallest:.2g}; run more rounds (-r): nodes measured in the same turn share its time and count once."))
        else:
            lines.append(Text(f"No setting differs significantly from the default ({labels[analysis.default]}) "
                              f"at alpha {analysis.alpha:g}"
                              + (f" ({len(untold)} of the rows had too few repetitions to judge)." if untold
                                 else ".")))
    return lines


def empty_line(analysis: SweepAnalysis) -> str:
    """What a sweep that stored nothing shows instead of its table."""
    return f"Sweep {analysis.data.sweep_id} stored no results."


def sweep_view(analysis: SweepAnalysis, width: int | None = None) -> Group:
    """The table, then the best settings in words."""
    if not analysis.series:
        return Group(Text(empty_line(analysis)))
    return Group(sweep_table(analysis, width), *best_lines(analysis))


def run_line(summary: SweepSummary) -> str:
    """What a sweep ran, in one line."""
    runs = sum(len(t.run_ids) for t in summary.turns)
    return (f"sweep {summary.sweep_id}: {summary.grid.step}, {summary.grid.size} settings x "
            f"{summary.repetitions} rounds, {runs} runs stored")


def sweep_document(analysis: SweepAnalysis, summary: SweepSummary | None = None) -> documents.Sweep:
    """The JSON of ``oddnode sweep --json``: the analysis, and what ran when it just did."""
    document = {"format": "oddnode-sweep", "version": 1, "analysis": analysis.to_json()}
    if summary is not None:
        document["run"] = summary.to_json()
    return document


def sweeps_section(analysis) -> list[dict[str, Any]] | None:
    """The HTML report's "Sweeps" section: per stored sweep (the analysis'
    judge_stored_sweeps) its title, its table with a column per setting,
    its best settings in words and a figure per series; None without one."""
    from oddnode.report.plots import figure_to_svg  # matplotlib: the HTML report only

    sections = []
    for sweep in analysis.sweeps:
        rows = sweep_rows(sweep, wide=True, number=lambda value: report_number(value, missing="-"))
        sections.append({
            "title": _title(sweep), "caption": _caption(sweep, (), False),
            "columns": list(rows[0]) if rows else [], "rows": [list(row.values()) for row in rows],
            "significant": [row.significant for s in sweep.series for row in s.rows],
            "lines": [line.plain for line in best_lines(sweep)] if sweep.series else [empty_line(sweep)],
            "figures": [figure_to_svg(sweep_figure(sweep, s)) for s in sweep.series],
        })
    return sections or None


def sweep_list_rows(sweeps: Sequence[tuple[Any, ...]]) -> list[dict[str, str]]:
    return [{"sweep": str(i), "started": f"{started:%Y-%m-%d %H:%M}" if started else "-", "step": step,
             "rounds": str(reps), "runs": str(runs), "command": command}
            for i, started, command, step, reps, runs in sweeps]


# -- figures ---------------------------------------------------------------------------------


def _numeric_axis(analysis: SweepAnalysis) -> np.ndarray | None:
    """The swept values as numbers when one parameter is swept and all its
    values are numbers: the figure's x axis is then that value."""
    swept = analysis.data.grid.swept
    if len(swept) != 1:
        return None
    try:
        values = np.array([float(v) for v in swept[0].values])
    except ValueError:
        return None
    return values if np.all(np.isfinite(values)) else None


def sweep_figure(analysis: SweepAnalysis, s: SeriesSweep):
    """The metric against the setting, one line per message size (the median
    of each setting); the best setting of each size ringed, filled where it
    beats the default significantly; the default dashed."""
    from matplotlib.figure import Figure

    from oddnode.report.plots import FIGURE_DPI, FIGURE_SIZE_INCHES, log_scale

    labels = analysis.labels
    grid = analysis.data.grid
    numeric = _numeric_axis(analysis)
    if numeric is not None:
        # One parameter: the settings are its values, in the grid's order.
        x = numeric
    else:
        x = np.arange(len(labels), dtype=float)
    figure = Figure(figsize=FIGURE_SIZE_INCHES, dpi=FIGURE_DPI, layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    colours = [f"C{i % 10}" for i in range(len(s.rows))]
    positive = True
    for row, colour in zip(s.rows, colours):
        y = np.array([np.nan if m is None else m for m in row.medians], dtype=float)
        positive &= bool(np.all(y[np.isfinite(y)] > 0))
        order = np.argsort(x, kind="stable")
        axes.plot(x[order], y[order], marker=".", color=colour, linewidth=1, label=_size(row))
        if row.best is not None:
            axes.scatter([x[row.best]], [y[row.best]], s=60, color=colour if row.significant else "none",
                         edgecolors=colour, zorder=3)
    axes.axvline(x[analysis.default], color="grey", linestyle="--", linewidth=0.8)
    if numeric is not None:
        name = grid.swept[0].name
        if np.all(x > 0) and x.max() / x.min() >= 100:
            log_scale(axes.xaxis)
        if len(x) <= MAX_TICKS:  # the swept values themselves, as typed
            axes.set_xticks(x, grid.swept[0].values, fontsize=7)
            axes.minorticks_off()
        axes.set_xlabel(name)
    else:
        axes.set_xticks(x, labels, fontsize=7, rotation=30 if max(map(len, labels)) > 8 else 0)
        axes.set_xlabel(", ".join(p.name for p in grid.swept) or "setting")
    values = [m for row in s.rows for m in row.medians if m is not None and math.isfinite(m)]
    if positive and values and max(values) / min(values) >= 100:
        log_scale(axes.yaxis)
    axes.set_ylabel(f"{s.family} [{s.unit}]" if s.unit else s.family)
    axes.set_title(f"{s.benchmark} {s.family}: median per setting; ringed: best, filled: significant; "
                   f"dashed: default", fontsize=8)
    if len(s.rows) > 1:
        axes.legend(title="size" if any(r.size is not None for r in s.rows) else None, fontsize=6,
                    title_fontsize=7, ncol=max(1, math.ceil(len(s.rows) / 12)), loc="best")
    return figure


def plot_name(s: SeriesSweep) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{s.benchmark}-{s.family}") + ".png"


def write_sweep_plots(analysis: SweepAnalysis, directory: Path) -> list[Path]:
    """One PNG per series of the sweep, in ``directory`` (made if missing, its parent never)."""
    from oddnode.core.atomic import output_directory
    from oddnode.report.plots import save_figure

    directory = output_directory(directory)
    written, used = [], set()
    for s in analysis.series:
        name, stem, number = plot_name(s), plot_name(s)[:-4], 2
        while name in used:
            name, number = f"{stem}-{number}.png", number + 1
        used.add(name)
        path = directory / name
        save_figure(sweep_figure(analysis, s), path)
        written.append(path)
    return written
