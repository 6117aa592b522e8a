"""What ``oddnode model`` prints: the calls it predicts, each placement's
predicted communication time, and as data and a figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import median
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from oddnode.readings.placement import PlacementVerdict, Selection, rank_placements, selection_json
from oddnode.readings.placement import Candidate, ModelRun, StoredModel, stored_models
from oddnode.report.terminal import fit_columns, fixed_table

CALL, SIZE, PER_RANK, TIME, SHARE, POINT = "call", "size", "calls/rank", "ms/rank", "% MPI", "measured as"
PLACEMENT, NODES, GROUPS, PREDICTED, RANGE, FACTOR = "placement", "nodes", "groups", "ms/rank", "range", "x best"
# Columns left out first when a table is too wide.
CELLS_LEFT_OUT = (SHARE, PER_RANK)
PLACEMENTS_LEFT_OUT = (RANGE, GROUPS)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


def cell_rows(selection: Selection) -> list[dict[str, str]]:
    """One row per predicted (call, size) cell, most time first."""
    total = sum(c.stats.time for c in selection.chosen + selection.left)
    return [{CALL: c.call, SIZE: c.bucket_label, PER_RANK: f"{c.calls_per_rank:.4g}",
             TIME: _ms(c.stats.time / selection.ranks),
             SHARE: f"{100 * c.stats.time / total:.3g}" if total > 0 else "-",
             POINT: c.point.label if c.point else "-"} for c in selection.chosen]


def cells_table(selection: Selection, width: int | None = None) -> Table:
    """The profile's cells the model predicts, fitted to ``width``."""
    rows = cell_rows(selection)
    columns = [CALL, SIZE, PER_RANK, TIME, SHARE, POINT]
    shown, widths, left_out = fit_columns(columns, rows, width, CELLS_LEFT_OUT)
    caption = (f"{100 * selection.coverage:.3g}% of the time in MPI ({_ms(selection.mpi_time_per_rank)} ms per "
               f"rank, {selection.ranks} ranks) is in these calls")
    if left_out:
        caption += f"; left out to fit: {', '.join(left_out)}"
    return fixed_table("Calls the model predicts", caption, shown, widths, rows, (CALL, SIZE, POINT))


def placement_rows(candidates: Sequence[Candidate], predictions: Mapping[str, Mapping[int, float]],
                   verdict: PlacementVerdict | None) -> list[dict[str, str]]:
    """Per placement its nodes and groups, its median prediction and
    range over the repetitions, and how many times the best's it takes."""
    rows = []
    for candidate in candidates:
        values = list(predictions.get(candidate.name, {}).values())
        factor = verdict.factor_against(candidate.name) if verdict else None
        rows.append({PLACEMENT: candidate.name, NODES: candidate.label,
                     GROUPS: "+".join(candidate.groups) or "-",
                     PREDICTED: _ms(median(values)) if values else "failed",
                     RANGE: f"{_ms(min(values))}-{_ms(max(values))}" if values else "-",
                     FACTOR: f"{factor:.3g}" if factor is not None else "-"})
    return rows


def placements_table(run: ModelRun, verdict: PlacementVerdict | None, repetitions: int,
                     width: int | None = None) -> Table:
    """Each placement's predicted time per rank in the predicted calls."""
    rows = placement_rows(run.candidates, run.predictions, verdict)
    columns = [PLACEMENT, NODES, GROUPS, PREDICTED, RANGE, FACTOR]
    shown, widths, left_out = fit_columns(columns, rows, width, PLACEMENTS_LEFT_OUT)
    caption = f"median and range over {repetitions} repetition{'s' if repetitions != 1 else ''}"
    if left_out:
        caption += f"; left out to fit: {', '.join(left_out)}"
    styles = ["green" if verdict and row[PLACEMENT] == verdict.best else None for row in rows]
    return fixed_table("Predicted communication per placement", caption, shown, widths, rows,
                       (PLACEMENT, NODES, GROUPS), styles)


def verdict_lines(selection: Selection, run: ModelRun, verdict: PlacementVerdict | None) -> list[Text]:
    """The best placement and the factor, and how the prediction compares
    with what the profile measured where it ran."""
    lines = []
    if verdict is None:
        lines.append(Text("fewer than two placements were measured: nothing to compare", style="yellow"))
        return lines
    lines.append(Text(f"best placement: {verdict.best} ({_ms(verdict.medians[verdict.best])} ms per rank); "
                      f"{verdict.worst} takes {verdict.factor:.3g}x as long"))
    profiled = selection.profiled_time()
    given = verdict.medians.get("given")
    if given is not None and profiled > 0:
        lines.append(Text(f"on the placement it ran on, the model predicts {_ms(given)} ms per rank in these calls; "
                          f"the profile measured {_ms(profiled)} ms ({given / profiled:.3g}x)", style="dim"))
    return lines


def model_view(selection: Selection, run: ModelRun, repetitions: int, notes: Sequence[str],
               width: int | None = None) -> Group:
    verdict = rank_placements(run.predictions)
    parts: list[Any] = [cells_table(selection, width), Text(""),
                        placements_table(run, verdict, repetitions, width), *verdict_lines(selection, run, verdict)]
    parts += [Text(note, style="dim") for note in notes]
    parts += [Text(problem, style="red") for problem in run.problems]
    return Group(*parts)


def _placement_json(candidate: Candidate, predictions: Mapping[str, Mapping[int, float]]) -> dict[str, Any]:
    return {"name": candidate.name, "aliases": list(candidate.aliases), "members": list(candidate.members),
            "groups": list(candidate.groups),
            "predictions_s": {str(r): v for r, v in predictions.get(candidate.name, {}).items()}}


def _verdict_json(verdict: PlacementVerdict | None) -> dict[str, Any]:
    return {"best": verdict.best if verdict else None, "factor": verdict.factor if verdict else None,
            "medians_s": verdict.medians if verdict else {}}


def model_document(selection: Selection, run: ModelRun, notes: Sequence[str], profile_id: int | None) -> dict:
    """The model run as JSON-ready data."""
    return {
        "profile_id": profile_id, "run_id": run.run_id, "selection": selection_json(selection),
        "placements": [_placement_json(c, run.predictions) | {
                           "measured_s": {str(r): {p.label: t for p, t in times.items()}
                                          for r, times in run.measured.get(c.name, {}).items()}}
                       for c in run.candidates],
        **_verdict_json(rank_placements(run.predictions)), "notes": list(notes), "problems": list(run.problems),
    }


def stored_model_json(model: StoredModel) -> dict[str, Any]:
    """A stored model's predictions as JSON-ready data (formats.md#analysis-json)."""
    return {"profile_id": model.profile_id, "metric": model.metric,
            "placements": [_placement_json(c, model.predictions) for c in model.candidates],
            **_verdict_json(rank_placements(model.predictions))}


def stored_models_json(dataset) -> list[dict[str, Any]]:
    """Every stored model's predictions, for the analysis' JSON."""
    return [stored_model_json(model) for model in stored_models(dataset)]


def placement_section(analysis) -> list[dict[str, Any]] | None:
    """The HTML report's "Placement model" section: per stored model its
    table of placements (as `oddnode model` prints it) and its verdict;
    None without any."""
    models = stored_models(analysis.dataset)
    if not models:
        return None
    columns = [PLACEMENT, NODES, GROUPS, PREDICTED, RANGE, FACTOR]
    section = []
    for model in models:
        verdict = rank_placements(model.predictions)
        rows = placement_rows(model.candidates, model.predictions, verdict)
        runs = sorted({len(values) for values in model.predictions.values()})
        section.append({
            "title": f"Profile {model.profile_id if model.profile_id is not None else '(from a file)'}: predicted "
                     f"communication per placement",
            "columns": columns, "rows": [[row[c] for c in columns] for row in rows],
            "best": verdict.best if verdict else None,
            "caption": f"ms per rank in the predicted calls: median and range over "
                       f"{'-'.join(map(str, (runs[0], runs[-1]) if len(runs) > 1 else runs))} repetitions",
            "verdict": (f"best placement: {verdict.best}; {verdict.worst} takes {verdict.factor:.3g}x as long"
                        if verdict else "fewer than two placements were measured: nothing to compare")})
    return section


def model_figure(selection: Selection, run: ModelRun, candidates: Sequence[Candidate]):
    """Per placement, the predicted time per rank split by the calls it
    comes from (median over repetitions of each point's time)."""
    from matplotlib.figure import Figure

    from oddnode.report.plots import FIGURE_DPI, FIGURE_SIZE_INCHES

    figure = Figure(figsize=FIGURE_SIZE_INCHES, dpi=FIGURE_DPI, layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    names = [c.name for c in candidates if run.measured.get(c.name)]
    bottoms = [0.0] * len(names)
    for index, cell in enumerate(selection.chosen):
        heights = []
        for name in names:
            times = [t[cell.point] for t in run.measured[name].values() if cell.point in t]
            heights.append(1e3 * cell.calls_per_rank * median(times) if times else 0.0)
        axes.bar(names, heights, bottom=bottoms, color=f"C{index % 10}",
                 label=f"{cell.call} {cell.bucket_label}")
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for position, name in enumerate(names):
        values = [1e3 * v for v in run.predictions.get(name, {}).values()]
        if values:
            axes.plot([position] * len(values), values, "k.", markersize=4)
    axes.set_ylabel("predicted time in MPI per rank [ms]")
    axes.set_title("predicted communication per placement, by call and message size; dots: repetitions",
                   fontsize=8)
    if selection.chosen:
        axes.legend(fontsize=6, loc="best")
    return figure

