"""The report of a comparison (``oddnode compare``): the table of changes
fitted to the terminal, regressions first; the notes that fold what is
alike (subjects with too few repetitions, subjects measured on one side
only, changes of consistency); the summary line; and one figure per
series, before against after."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from oddnode.judge.compare import Comparison, Consistency, Judgement, SeriesComparison, Verdict
from oddnode.core.model import LabelKind
from oddnode.core.nodes import NodeNameError, fold, label_members
from oddnode.core.order import natural_sorted
from oddnode.report.terminal import fit_columns, fixed_table, number, probability, table_width

# Subjects of one verdict in one series listed one by one up to this many;
# more are one folded row (a node set, or a count of pairs or sets).
MAX_SUBJECT_ROWS = 3
# Names a note lists before counting the rest.
MAX_NAMES = 6
_INDENT = "  "
_VERDICT_STYLE = {Verdict.REGRESSED: "bold red", Verdict.IMPROVED: "green", Verdict.TOO_FEW: "dim"}
# Group comparisons say better and worse: a group is not a before and after.
_GROUP_WORDS = {Verdict.REGRESSED: "worse", Verdict.IMPROVED: "better", Verdict.UNCHANGED: "alike",
                Verdict.TOO_FEW: "too few"}
_RUN_WORDS = {Verdict.REGRESSED: "regressed", Verdict.IMPROVED: "improved", Verdict.UNCHANGED: "unchanged",
              Verdict.TOO_FEW: "too few"}
SPREAD = "IQR/median"
# A narrow terminal loses these first, least wanted first.
LEFT_OUT_FIRST = (SPREAD, "unit", "before", "baseline", "after", "group median", "p (Holm)")
_LEFT = {"benchmark", "subject", "group", "unit", "verdict"}


def _words(comparison: Comparison) -> dict[Verdict, str]:
    return _GROUP_WORDS if comparison.mode == "groups" else _RUN_WORDS


def _percent(change: float | None) -> str:
    if change is None:
        return "-"
    if not math.isfinite(change):
        return "-"
    return f"{change * 100:+.1f}%"


def _spread_cell(before: float, after: float) -> str:
    if not (math.isfinite(before) or math.isfinite(after)):
        return "-"
    def pct(v: float) -> str:
        return f"{v * 100:.1f}" if math.isfinite(v) else "-"
    return f"{pct(before)}→{pct(after)}%"


def _headers(comparison: Comparison) -> tuple[str, ...]:
    if comparison.mode == "groups":
        return ("benchmark", "group", "unit", "baseline", "group median", "change", "p (Holm)", "verdict", SPREAD)
    return ("benchmark", "subject", "unit", "before", "after", "change", "p (Holm)", "verdict", SPREAD)


def _cells(comparison: Comparison, headers: Sequence[str], name: str, j: Judgement, unit: str,
           subject: str | None = None) -> dict[str, str]:
    words = _words(comparison)
    verdict = words[j.verdict]
    if j.reason and j.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) and j.p is None:
        verdict = f"{verdict} ({j.reason})"
    values = [name, subject if subject is not None else j.subject, unit if subject is not None else unit or "-",
              number(j.before), number(j.after),
              _percent(j.change), probability(j.p_holm) if j.p_holm is not None else "-", verdict,
              _spread_cell(j.spread_before, j.spread_after)]
    return dict(zip(headers, values))


def _folded_subjects(kind: LabelKind, judgements: Sequence[Judgement]) -> str:
    """Nodes folded into a node set; pairs and sets counted, with the node
    set of their members (the JSON and --all name each)."""
    labels = [j.subject for j in judgements]
    try:
        if kind is LabelKind.NODE:
            return fold(labels)
        members = fold({node for label in labels for node in label_members(label, kind)})
    except NodeNameError:
        members = ""
    word = {LabelKind.NODE: "nodes", LabelKind.PAIR: "pairs", LabelKind.SET: "sets"}[kind]
    return f"{len(labels)} {word}" + (f" of {members}" if members else "")


def _folded_row(comparison: Comparison, headers: Sequence[str], s: SeriesComparison,
                judgements: Sequence[Judgement]) -> dict[str, str]:
    """Many subjects of one verdict in one row: their folded names, the
    median of their medians, the range of their changes, the largest p."""
    changes = [j.change for j in judgements if j.change is not None and math.isfinite(j.change)]
    change = f"{min(changes) * 100:+.1f}..{max(changes) * 100:+.1f}%" if changes else "-"
    ps = [j.p_holm for j in judgements if j.p_holm is not None]
    cells = _cells(comparison, headers, "", judgements[0], "", _INDENT + _folded_subjects(s.subject_kind, judgements))
    cells |= {headers[3]: number(float(np.nanmedian([j.before for j in judgements]))),
              headers[4]: number(float(np.nanmedian([j.after for j in judgements]))),
              "change": change, "p (Holm)": f"≤ {probability(max(ps))}" if ps else "-",
              SPREAD: "", "unit": ""}
    return cells


def _worth_a_row(j: Judgement, comparison: Comparison) -> bool:
    """A subject listed without --all: one that changed, or one with too few
    repetitions to judge whose values before and after do not overlap at
    all by more than min-effect (the most its repetitions can show)."""
    if j.verdict in (Verdict.REGRESSED, Verdict.IMPROVED):
        return True
    big = j.change is not None and abs(j.change) > comparison.settings.min_effect
    return j.verdict is Verdict.TOO_FEW and j.separated and big


def comparison_rows(comparison: Comparison, every_subject: bool = False) -> tuple[list[dict[str, str]],
                                                                                    list[str | None]]:
    """The table's rows and their styles: per series its row as a whole,
    then its regressed and improved subjects (every subject with
    ``every_subject``), many of one verdict folded into one row."""
    headers = _headers(comparison)
    rows: list[dict[str, str]] = []
    styles: list[str | None] = []
    for s in comparison.series:
        rows.append(_cells(comparison, headers, s.name, s.overall, s.unit))
        styles.append(_VERDICT_STYLE.get(s.overall.verdict))
        for verdict in Verdict:
            chosen = [j for j in s.subjects if j.verdict is verdict and (every_subject or _worth_a_row(j, comparison))]
            if not chosen:
                continue
            chosen.sort(key=lambda j: -abs(j.change) if j.change is not None and math.isfinite(j.change) else -math.inf)
            if len(chosen) > MAX_SUBJECT_ROWS and not every_subject:
                rows.append(_folded_row(comparison, headers, s, chosen))
                styles.append(_VERDICT_STYLE.get(verdict))
                continue
            for j in chosen:
                rows.append(_cells(comparison, headers, "", j, "", _INDENT + j.subject))
                styles.append(_VERDICT_STYLE.get(verdict))
    return rows, styles


def comparison_table(comparison: Comparison, width: int | None = None, every_subject: bool = False) -> Table:
    """The changes, regressions first, fitted to ``width`` characters (None:
    every column at full width): columns left out least wanted first, named
    in the caption."""
    headers = _headers(comparison)
    rows, styles = comparison_rows(comparison, every_subject)
    shown, widths, left_out = fit_columns(headers, rows, width, LEFT_OUT_FIRST)
    # Before and after go together: one alone says nothing of the change.
    if (headers[3] in left_out) != (headers[4] in left_out):
        for column in (headers[3], headers[4]):
            if column in shown:
                shown.remove(column)
                left_out.append(column)
    # The subject column folds too (long node sets), before the names do.
    if width is not None and table_width(list(widths.values())) > width:
        subject = headers[1]
        room = width - table_width([widths[c] for c in shown if c != subject]) - 3
        widths[subject] = max(min(widths[subject], room), len(subject))
    caption = []
    if left_out:
        caption.append(f"{', '.join(c for c in headers if c in left_out)} left out to fit {width} columns; "
                       "--wide shows them all.")
    caption.append(_caption(comparison))
    title = _title(comparison)
    return fixed_table(title, " ".join(caption), shown, widths, rows, _LEFT, styles)


def _title(comparison: Comparison) -> str:
    if comparison.mode == "groups":
        return f"Groups against {comparison.baseline} (baseline)"
    return f"{comparison.other} against {comparison.baseline} (baseline)"


def _caption(comparison: Comparison) -> str:
    s = comparison.settings
    return (f"change: of the median, (after - before) / before (a series as a whole: the median of its subjects' "
            f"changes); a verdict needs p (Holm) ≤ {s.alpha:g} and a change over {s.min_effect:.1%}. {SPREAD}: the "
            "repetitions' spread before→after.")


# -- notes ----------------------------------------------------------------------------------------------


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def _fold_any(labels: Sequence[str], kind: LabelKind = LabelKind.NODE) -> str:
    """Node names folded into a node set; pairs and sets named (folding
    node sets together would read as one set)."""
    if kind is LabelKind.NODE:
        try:
            return fold(labels)
        except NodeNameError:
            pass
    return _names(list(labels))


def too_few_notes(comparison: Comparison) -> list[str]:
    """Subjects that could not be judged alone, folded by their numbers of
    repetitions over every series; then series that could not be judged at all."""
    by_sizes: dict[tuple[int, int, LabelKind], tuple[set[str], list[str], float]] = {}
    for s in comparison.series:
        for j in s.subjects:
            if j.verdict is Verdict.TOO_FEW:
                subjects, series, smallest = by_sizes.setdefault((j.n_before, j.n_after, s.subject_kind),
                                                                 (set(), [], j.smallest_p))
                subjects.add(j.subject)
                if s.name not in series:
                    series.append(s.name)
    notes = []
    tests = comparison.correction.tests + comparison.correction.untestable
    listed = any(_worth_a_row(j, comparison) for s in comparison.series for j in s.subjects
                 if j.verdict is Verdict.TOO_FEW)
    for (n, m, kind), (subjects, series, smallest) in by_sizes.items():
        notes.append(f"{_fold_any(natural_sorted(subjects), kind)}: {n} repetition{'s' if n != 1 else ''} before "
                     f"and {m} after in {len(series)} series: too few to judge one alone (the smallest p "
                     f"Mann–Whitney can give, {smallest:.2g}, cannot reach {comparison.settings.alpha:g} shared "
                     f"among {tests} tests); each series is judged over all its subjects together.")
    if listed:
        notes.append("Of those, the table lists the ones whose values before and after do not overlap at all.")
    whole = [s for s in comparison.series if s.overall.verdict is Verdict.TOO_FEW]
    if whole:
        unit = "groups" if comparison.mode == "groups" else "series"
        notes.append(f"Too few repetitions or nodes to judge these {unit} at all: "
                     f"{_names([_series_label(comparison, s) for s in whole])} "
                     "(more repetitions, -r, or more nodes per group would).")
    return notes


def _series_label(comparison: Comparison, s: SeriesComparison) -> str:
    return f"{s.name} ({s.against})" if comparison.mode == "groups" else s.name


def spread_notes(comparison: Comparison) -> list[str]:
    """Series whose repetitions scatter significantly more or less after."""
    notes = []
    for s in comparison.series:
        spread = s.spread
        if spread is None or spread.verdict not in (Consistency.MORE, Consistency.LESS):
            continue
        side = s.against if comparison.mode == "groups" else "after"
        notes.append(f"{_series_label(comparison, s)}: {spread.verdict.value} {side}: IQR/median "
                     f"{spread.before * 100:.2g}% → {spread.after * 100:.2g}% (Fligner–Killeen p "
                     f"{probability(spread.p_holm)}, Holm).")
    return notes


def one_side_notes(comparison: Comparison) -> list[str]:
    """Series and subjects measured on one side only, folded."""
    notes = []
    if comparison.only_in_baseline:
        notes.append(f"Only in {comparison.baseline}: {_names(comparison.only_in_baseline)}.")
    if comparison.only_in_other:
        notes.append(f"Only in {comparison.other}: {_names(comparison.only_in_other)}.")
    if comparison.same_run:
        notes.append(f"Read from the same run on both sides, not compared: {_names(comparison.same_run)}.")
    for side, attribute in (("before only", "only_before"), ("after only", "only_after")):
        folded: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for s in comparison.series:
            labels = getattr(s, attribute)
            if labels:
                folded[tuple(labels)].append(s.name)
        kinds = {s.name: s.subject_kind for s in comparison.series}
        for labels, names in folded.items():
            notes.append(f"{_fold_any(list(labels), kinds[names[0]])}: measured {side} in {_names(names)}: "
                         "not compared.")
    if comparison.mode == "groups" and comparison.ungrouped:
        notes.append(f"{_fold_any(comparison.ungrouped)}: in no group of {comparison.groups.source}: left out.")
    return notes


def summary_line(comparison: Comparison) -> Text:
    """One line: how many series regressed (named), improved, unchanged;
    subjects likewise; and the exit status it gives."""
    words = _words(comparison)
    counted = {v: [s for s in comparison.series if s.overall.verdict is v] for v in Verdict}
    unit = "comparisons" if comparison.mode == "groups" else "series"
    parts = []
    for verdict in (Verdict.REGRESSED, Verdict.IMPROVED):
        chosen = counted[verdict]
        if chosen:
            parts.append(f"{len(chosen)} {words[verdict]} ({_names([_series_label(comparison, s) for s in chosen])})")
    for verdict in (Verdict.UNCHANGED, Verdict.TOO_FEW):
        if counted[verdict]:
            parts.append(f"{len(counted[verdict])} {words[verdict]}")
    text = f"{len(comparison.series)} {unit}: " + ", ".join(parts)
    subjects = {v: sum(s.count(v) for s in comparison.series) for v in (Verdict.REGRESSED, Verdict.IMPROVED)}
    if any(subjects.values()):
        text += "; subjects: " + ", ".join(f"{n} {words[v]}" for v, n in subjects.items() if n)
    status = comparison.exit_status
    text += f". Exit status {status}" + (": something regressed." if status else ".")
    return Text(text, style="bold red" if status else "bold green")


def sides_lines(comparison: Comparison) -> list[str]:
    """What was compared with what."""
    if comparison.mode == "groups":
        groups = comparison.groups
        within = comparison.within.describe() if comparison.within else "the newest run of every series"
        lines = [f"Groups by {groups.source}, within {within}:"]
        for name, nodes in groups.members.items():
            mark = " (baseline)" if name == groups.baseline else ""
            lines.append(f"  {name}{mark}: {fold(nodes)}")
        return lines
    return [f"baseline: {comparison.baseline_selection.describe()}",
            f"after:    {comparison.other_selection.describe()}"]


def comparison_view(comparison: Comparison, width: int | None = None, every_subject: bool = False,
                    brief: bool = False) -> RenderableType:
    """The whole terminal report; ``brief`` (-q): the summary line alone."""
    parts: list[RenderableType] = []
    if not brief:
        parts += [Text(line) for line in sides_lines(comparison)]
        if comparison.series:
            parts.append(comparison_table(comparison, width, every_subject))
        notes = too_few_notes(comparison) + spread_notes(comparison) + one_side_notes(comparison)
        parts += [Text(note, style="dim") for note in notes]
    parts.append(summary_line(comparison))
    return Group(*parts)


# -- figures --------------------------------------------------------------------------------------------------

_COLOURS = {Verdict.REGRESSED: "tab:red", Verdict.IMPROVED: "tab:green", Verdict.UNCHANGED: "tab:gray",
            Verdict.TOO_FEW: "lightgray"}
# Beyond this many values a side's points are a fixed sample: the box
# still summarises every value.
MAX_POINTS = 2000


def comparison_figure(comparison: Comparison, s: SeriesComparison):
    """Before against after for one series: every value compared on each
    side as a box of its quartiles and its points (left), and, when the
    series has subjects, each subject's change, coloured by its verdict (right)."""
    from matplotlib.figure import Figure

    from oddnode.report.plots import FIGURE_DPI, FIGURE_SIZE_INCHES

    words = _words(comparison)
    with_subjects = bool(s.subjects)
    width, height = FIGURE_SIZE_INCHES
    figure = Figure(figsize=(width * (1.6 if with_subjects else 1.0), height), dpi=FIGURE_DPI, layout="constrained")
    axes = figure.add_subplot(1, 2 if with_subjects else 1, 1)
    sides = {"before" if comparison.mode == "runs" else comparison.baseline: s.before_values,
             "after" if comparison.mode == "runs" else s.against: s.after_values}
    drawn = {name: v[np.isfinite(v)] for name, v in sides.items()}
    positions = np.arange(1, len(drawn) + 1)
    nonempty = [v if v.size else np.array([np.nan]) for v in drawn.values()]
    axes.boxplot(nonempty, positions=positions, widths=0.5, showfliers=False, medianprops={"color": "black"})
    rng = np.random.default_rng(0)  # a fixed jitter: the same figure from the same results
    colours = ("tab:blue", _COLOURS[s.overall.verdict] if s.overall.verdict is not Verdict.UNCHANGED else "tab:orange")
    labels = []
    for position, (name, v), colour in zip(positions, drawn.items(), colours):
        points = v if v.size <= MAX_POINTS else rng.choice(v, MAX_POINTS, replace=False)
        axes.scatter(position + 0.33 + rng.uniform(-0.06, 0.06, points.size), points, s=7, alpha=0.55,
                     color=colour, edgecolors="none")
        labels.append(f"{name}\n{v.size} values")
    axes.set_xticks(positions, labels, fontsize=8)
    axes.set_xlim(0.5, len(drawn) + 0.9)
    axes.set_ylabel(f"{s.metric} [{s.unit}]" if s.unit else s.metric)
    j = s.overall
    p = f", p {probability(j.p_holm)}" if j.p_holm is not None else ""
    axes.set_title(f"{_series_label(comparison, s)}: {_percent(j.change)}{p}, {words[j.verdict]}", fontsize=9)
    if with_subjects:
        right = figure.add_subplot(1, 2, 2)
        ordered = sorted((j for j in s.subjects if j.change is not None and math.isfinite(j.change)),
                         key=lambda j: j.change)
        y = np.arange(len(ordered))
        right.scatter([j.change * 100 for j in ordered], y, s=12, c=[_COLOURS[j.verdict] for j in ordered])
        right.axvline(0, color="black", linewidth=0.8)
        better = "higher" if s.direction.value == "higher" else "lower"
        right.set_xlabel(f"change of the median [%] ({better} is better)")
        if len(ordered) <= 30:
            right.set_yticks(y, [j.subject for j in ordered], fontsize=6)
        else:
            right.set_yticks([])
            right.set_ylabel(f"{len(ordered)} subjects, sorted")
        right.set_title("per subject: red regressed, green improved, grey unchanged, light grey too few "
                        "repetitions", fontsize=8)
    return figure


def plot_file_name(comparison: Comparison, s: SeriesComparison) -> str:
    """A file name for a series' figure: its name (and group), with anything
    but letters, digits, dots, dashes and underscores made an underscore."""
    name = s.name if comparison.mode == "runs" else f"{s.name}-{s.against}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".png"


def write_plots(comparison: Comparison, directory: Path) -> list[Path]:
    """One PNG per series compared, in ``directory`` (made if missing, its parent never)."""
    from oddnode.core.atomic import output_directory
    from oddnode.report.plots import save_figure

    directory = output_directory(directory)
    written = []
    used: set[str] = set()
    for s in comparison.series:
        name = plot_file_name(comparison, s)
        stem, number_ = name[:-4], 2
        while name in used:  # two names alike once cleaned
            name, number_ = f"{stem}-{number_}.png", number_ + 1
        used.add(name)
        path = directory / name
        save_figure(comparison_figure(comparison, s), path)
        written.append(path)
    return written
