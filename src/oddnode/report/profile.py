"""An MPI profile for people: a summary line, time by call, the call x
message-size histogram (the case study's chart of Alltoall time by size),
the ranks (folded to the slowest and fastest few), the reader's notes; the
list of stored profiles; and the plot of time by size and by rank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.text import Text

from oddnode.readings.profile import (
    ZERO_BUCKET,
    Bucket,
    CallStats,
    Profile,
    bucket_label,
    communication_share,
    histogram,
    imbalance,
    span_label,
    startup_time,
    time_by_call,
    to_json,
)
from oddnode.report.terminal import WIDE_NOTE, fit_columns, fixed_table, print_views, table_width
from oddnode.store import StoredProfile

if TYPE_CHECKING:
    from oddnode.report import documents

# Rows of the histogram: the calls that hold most time; the rest are summed
# into one row, so that a code with 40 call names still reads at a glance.
HISTOGRAM_CALLS = 8
# Ranks listed whole up to this many; above it, the FOLD_RANKS with the most
# compute time and the FOLD_RANKS with the least (the imbalance's two ends).
MAX_RANK_ROWS = 16
FOLD_RANKS = 5
# Folding the size columns stops at 2^6 buckets a column: [1,64), [64,4K), [4K,256K), ...
MAX_FOLD = 64
OTHER_CALLS = "other calls"
ALL_CALLS = "all calls"


# -- numbers -------------------------------------------------------------------


def duration(seconds: float | None) -> str:
    """A time with three significant digits in s, ms or µs."""
    if seconds is None:
        return "-"
    magnitude = abs(seconds)
    if magnitude >= 1 or magnitude == 0:
        return f"{seconds:.3g} s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def percent(share: float | None) -> str:
    """A share (0..1) in percent, one decimal; tiny non-zero shares as <0.1."""
    if share is None:
        return "-"
    if 0 < share < 0.0005:
        return "<0.1"
    return f"{share * 100:.1f}"




def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def mpi_total(profile: Profile) -> float:
    """The time in MPI over all ranks: what the source reports per rank
    (the calls' sum where it reports none), never less than the calls' sum,
    so that no call holds more than 100%."""
    calls = sum(stats.time for stats in histogram(profile).values())
    return max(sum(rank.time_in_mpi for rank in profile.ranks), calls)


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


# -- the summary ---------------------------------------------------------------


def mean_cpu(profile: Profile) -> float | None:
    """The mean CPU utilisation of the ranks that measured it (1.0: one CPU busy)."""
    measured = [rank.cpu for rank in profile.ranks if rank.cpu is not None]
    return sum(measured) / len(measured) if measured else None


def summary_line(profile: Profile, profile_id: int | None = None) -> str:
    """Ranks, hosts, wall time, communication share, imbalance, CPU."""
    hosts = {rank.host for rank in profile.ranks if rank.host}
    wall = max((rank.wall for rank in profile.ranks), default=0.0)
    parts = [_count(len(profile.ranks), "rank") + (f" on {_count(len(hosts), 'host')}" if hosts else ""),
             f"wall {duration(wall)}"]
    share = communication_share(profile)
    if share is not None:
        parts.append(f"{percent(share)}% of it in MPI")
    ratio = imbalance(profile)
    if ratio is not None:
        parts.append(f"imbalance {ratio:.2f} (max/mean compute)")
    cpu = mean_cpu(profile)
    if cpu is not None:
        parts.append(f"CPU {cpu * 100:.0f}% (mean)")
    startup = startup_time(profile)
    if startup is not None:
        parts.append(f"start-up {duration(startup)} a rank in MPI_Init (not counted)")
    head = f"Profile {profile_id} ({profile.tool})" if profile_id is not None else f"Profile ({profile.tool})"
    return f"{head}: " + ", ".join(parts)


# -- time by call ----------------------------------------------------------------


def call_rows(profile: Profile) -> list[dict[str, str]]:
    """One row per call, the most time first: calls, total, share of MPI, mean, max."""
    cells: dict[str, CallStats] = {}
    for (call, _), stats in histogram(profile).items():
        cells.setdefault(call, CallStats()).add(stats.count, stats.time, stats.max_time, stats.bytes)
    total = mpi_total(profile)
    rows = []
    for call in time_by_call(profile):
        stats = cells[call]
        rows.append({"call": call, "calls": str(stats.count), "time": duration(stats.time),
                     "% of MPI": percent(_share(stats.time, total)),
                     "mean": duration(stats.time / stats.count) if stats.count else "-",
                     "max": duration(stats.max_time)})
    return rows


def calls_view(profile: Profile, width: int | None = None) -> RenderableType | None:
    rows = call_rows(profile)
    if not rows:
        return None
    shown, widths, left_out = fit_columns(list(rows[0]), rows, width, ("mean", "calls", "max"))
    caption = f"Left out to fit: {', '.join(left_out)}. {WIDE_NOTE}" if left_out else None
    return fixed_table("Time by MPI call (all ranks)", caption, shown, widths, rows, ("call",))


# -- the call x size histogram ----------------------------------------------------


def _groups(buckets: Sequence[Bucket], fold: int) -> list[tuple[str, tuple[Bucket, ...]]]:
    """Columns of buckets: 0 B and unknown size alone, sized buckets ``fold``
    at a time, aligned ([2^(g*fold), 2^((g+1)*fold)) for group g)."""
    groups: dict[Any, list[Bucket]] = {}
    for bucket in buckets:
        key = bucket if bucket is None or bucket == ZERO_BUCKET or fold == 1 else ("g", bucket // fold)
        groups.setdefault(key, []).append(bucket)
    columns = []
    for key, members in groups.items():
        if isinstance(key, tuple):
            low, high = 1 << (key[1] * fold), 1 << ((key[1] + 1) * fold)
            label = span_label(low, high)
        else:
            label = bucket_label(key)
        columns.append((label, tuple(members)))
    return columns


def histogram_rows(profile: Profile, fold: int = 1, calls: int = HISTOGRAM_CALLS) -> list[dict[str, str]]:
    """Rows of the histogram: the ``calls`` calls with most time, the rest
    in one row, then all calls; cells are the share of MPI time (%) in each
    size column; empty where no call of that size took time."""
    cells = histogram(profile)
    buckets = sorted({bucket for (_, bucket), stats in cells.items() if stats.time > 0},
                     key=lambda b: 1 << 62 if b is None else b)
    columns = _groups(buckets, fold)
    total = mpi_total(profile)
    order = list(time_by_call(profile))
    # A lone leftover call gets its own row rather than an 'other calls (1)'.
    named = order if len(order) <= calls + 1 else order[:calls]
    others = [call for call in order if call not in named]

    def row(name: str, members: Sequence[str]) -> dict[str, str]:
        out = {"call": name}
        for label, group in columns:
            time = sum(cells[(call, bucket)].time for call in members for bucket in group if (call, bucket) in cells)
            out[label] = percent(_share(time, total)) if time > 0 else ""
        return out

    rows = [row(call, [call]) for call in named]
    if others:
        rows.append(row(f"{OTHER_CALLS} ({len(others)})", others))
    rows.append(row(ALL_CALLS, order))
    return rows


def _natural_width(rows: Sequence[dict[str, str]]) -> int:
    return table_width([max(len(column), *(len(row[column]) for row in rows)) for column in rows[0]])


def histogram_view(profile: Profile, width: int | None = None) -> RenderableType | None:
    """The histogram fitted to ``width``: neighbouring size buckets fold
    together (2, 4, 8, … at a time) until it fits; if even one column of
    sizes does not, the columns with least time are left out."""
    if not any(stats.time > 0 for stats in histogram(profile).values()):
        return None
    fold, rows = 1, histogram_rows(profile)
    while width is not None and _natural_width(rows) > width and fold < MAX_FOLD:
        fold *= 2
        rows = histogram_rows(profile, fold)
    columns = list(rows[0])
    by_time = sorted(columns[1:], key=lambda c: float(rows[-1][c].lstrip("<") or 0))
    shown, widths, left_out = fit_columns(columns, rows, width, by_time)
    notes = []
    if fold > 1:
        notes.append(f"Sizes folded {fold} buckets a column to fit.")
    if left_out:
        notes.append(f"Left out to fit: {', '.join(left_out)}.")
    caption = " ".join([*notes, WIDE_NOTE]) if notes else None
    styles = [None] * (len(rows) - 1) + ["bold"]
    return fixed_table("Share of MPI time (%) by call and message size (bytes)", caption, shown, widths, rows,
                       ("call",), styles)


# -- the ranks ----------------------------------------------------------------------


def _rank_row(rank) -> dict[str, str]:
    return {"rank": str(rank.rank), "host": rank.host or "-", "wall": duration(rank.wall),
            "MPI": duration(rank.time_in_mpi), "compute": duration(rank.compute_time),
            "CPU %": "-" if rank.cpu is None else f"{rank.cpu * 100:.0f}"}


def rank_view(profile: Profile, width: int | None = None, wide: bool = False) -> RenderableType | None:
    """Per rank: wall, MPI and compute time, CPU; above MAX_RANK_ROWS ranks
    (and not ``wide``) the ones with most and least compute time."""
    if not profile.ranks:
        return None
    ranks = list(profile.ranks)
    folded = 0
    if len(ranks) > MAX_RANK_ROWS and not wide:
        by_compute = sorted(ranks, key=lambda r: (-r.compute_time, r.rank))
        folded = len(ranks) - 2 * FOLD_RANKS
        ranks = by_compute[:FOLD_RANKS] + by_compute[-FOLD_RANKS:]
    rows = [_rank_row(rank) for rank in ranks]
    styles: list[str | None] = [None] * len(rows)
    if folded:
        rows.insert(FOLD_RANKS, {column: "" for column in rows[0]} | {"rank": "…", "host": f"{folded} more"})
        styles.insert(FOLD_RANKS, "dim")
    shown, widths, left_out = fit_columns(list(rows[0]), rows, width, ("CPU %", "wall", "host"))
    notes = []
    if folded:
        notes.append(f"The {FOLD_RANKS} ranks with most and least compute time of {len(profile.ranks)}.")
    if left_out:
        notes.append(f"Left out to fit: {', '.join(left_out)}.")
    caption = " ".join([*notes, WIDE_NOTE]) if notes else None
    return fixed_table("Ranks" + (" (most compute first)" if folded else ""), caption, shown, widths, rows,
                       ("rank", "host"), styles)


# -- the whole report ----------------------------------------------------------------


def note_lines(profile: Profile) -> list[Text]:
    """The reader's notes and the records it skipped, dimmed."""
    lines = [Text(f"note: {note}", style="dim") for note in profile.notes]
    if profile.skipped:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(profile.skipped.items()))
        lines.append(Text(f"records not read: {kinds}", style="dim"))
    return lines


def profile_views(profile: Profile, width: int | None = None, wide: bool = False,
                  profile_id: int | None = None) -> list[RenderableType]:
    """Everything the report prints, in order (``width`` None or ``wide``: nothing is fitted)."""
    fit = None if wide else width
    views: list[RenderableType] = [Text(summary_line(profile, profile_id))]
    if profile.command:
        views.append(Text(f"command: {profile.command}", style="dim"))
    for view in (calls_view(profile, fit), histogram_view(profile, fit), rank_view(profile, fit, wide)):
        if view is not None:
            views.append(view)
    if not profile.ranks:
        views.append(Text("The profile holds no ranks."))
    views.extend(note_lines(profile))
    return views


def print_profile(console: Console, profile: Profile, profile_id: int | None = None, wide: bool = False) -> None:
    views = profile_views(profile, console.width, wide, profile_id)
    # The summary and command lines go together, the notes at the end together.
    head = [v for v in views if isinstance(v, Text) and not v.plain.startswith(("note:", "records not read"))]
    tail = [v for v in views if isinstance(v, Text) and v not in head]
    tables = [v for v in views if not isinstance(v, Text)]
    for line in head:
        console.print(line, highlight=False)
    console.print()
    print_views(console, tables, wide)
    for line in tail:
        console.print(line, highlight=False)


def profile_json(profile: Profile, profile_id: int | None) -> documents.Profile:
    """The profile's JSON (profile.model.to_json) with its id in the store."""
    return {"id": profile_id, **to_json(profile), "mpi_total": mpi_total(profile), "mean_cpu": mean_cpu(profile)}


def profiles_section(analysis) -> list[dict[str, Any]] | None:
    """The HTML report's "MPI profiles" section: per stored profile (the
    analysis' profiles) its summary, command, time by call, the call x
    message-size histogram, its figure and notes; None without one."""
    from oddnode.report.plots import figure_to_svg  # matplotlib: the HTML report only

    sections = []
    for profile_id, profile in analysis.profiles:
        calls, sizes = call_rows(profile), histogram_rows(profile) if profile.ranks else []
        sections.append({
            "summary": summary_line(profile, profile_id), "command": profile.command,
            "calls": {"columns": list(calls[0]), "rows": [list(row.values()) for row in calls]} if calls else None,
            "sizes": {"columns": list(sizes[0]), "rows": [list(row.values()) for row in sizes]} if sizes else None,
            "figure": figure_to_svg(profile_figure(profile)) if profile.ranks else None,
            "notes": [line.plain for line in note_lines(profile)],
        })
    return sections or None


# -- the list of profiles ----------------------------------------------------------------


def list_rows(profiles: Sequence[StoredProfile]) -> list[dict[str, str]]:
    return [{"id": str(p.profile_id), "tool": p.tool, "created": p.created.strftime("%Y-%m-%d %H:%M"),
             "ranks": str(p.ranks), "hosts": str(p.hosts), "command": p.command or "-", "source": p.source}
            for p in profiles]


def list_view(profiles: Sequence[StoredProfile], width: int | None = None) -> RenderableType:
    rows = list_rows(profiles)
    if not rows:
        return Text("No profiles stored: run oddnode profile -- COMMAND, or oddnode import mpip|itc FILE.")
    shown, widths, left_out = fit_columns(list(rows[0]), rows, width, ("source", "created", "hosts"))
    # The id column is short: the command folds instead when the table is too wide.
    if width is not None and table_width(list(widths.values())) > width and "command" in widths:
        room = width - table_width([w for c, w in widths.items() if c != "command"]) - 3
        widths["command"] = max(room, len("command"))
    caption = f"Left out to fit: {', '.join(left_out)}. {WIDE_NOTE}" if left_out else None
    return fixed_table("Stored MPI profiles", caption, shown, widths, rows, ("tool", "command", "source", "created"))


def list_json(profiles: Sequence[StoredProfile]) -> documents.ProfileList:
    return [{"id": p.profile_id, "tool": p.tool, "source": p.source, "command": p.command,
             "created": p.created.isoformat(), "ranks": p.ranks, "hosts": p.hosts, "run_id": p.run_id}
            for p in profiles]


# -- the plot ---------------------------------------------------------------------------


def profile_figure(profile: Profile, calls: int = HISTOGRAM_CALLS):
    """Two panels: time by message-size bucket stacked by call (the case
    study's chart), and per rank compute and MPI time stacked."""
    from matplotlib.figure import Figure

    from oddnode.report.plots import FIGURE_DPI, FIGURE_SIZE_INCHES

    figure = Figure(figsize=(FIGURE_SIZE_INCHES[0] * 2, FIGURE_SIZE_INCHES[1]), dpi=FIGURE_DPI,
                    layout="constrained")
    by_size, by_rank = figure.subplots(1, 2, width_ratios=(3, 2))
    cells = histogram(profile)
    buckets = sorted({b for (_, b), s in cells.items() if s.time > 0}, key=lambda b: 1 << 62 if b is None else b)
    order = list(time_by_call(profile))
    named = order if len(order) <= calls + 1 else order[:calls]
    others = order[len(named):]
    series: list[tuple[str, Sequence[str]]] = [(call, [call]) for call in named]
    if others:
        series.append((f"{OTHER_CALLS} ({len(others)})", others))
    positions = list(range(len(buckets)))
    bottom = [0.0] * len(buckets)
    for name, members in series:
        heights = [sum(cells[(c, b)].time for c in members if (c, b) in cells) for b in buckets]
        by_size.bar(positions, heights, bottom=bottom, label=name)
        bottom = [low + h for low, h in zip(bottom, heights)]
    by_size.set_xticks(positions, [bucket_label(b) for b in buckets], rotation=60, fontsize=7)
    by_size.set_xlabel("message size (bytes)")
    by_size.set_ylabel("time in MPI, all ranks (s)")
    by_size.set_title("Time by message size", fontsize=9)
    if series:
        by_size.legend(fontsize=7)
    ranks = [r.rank for r in profile.ranks]
    compute = [r.compute_time for r in profile.ranks]
    mpi = [r.time_in_mpi for r in profile.ranks]
    by_rank.bar(ranks, compute, label="compute", color="tab:green")
    by_rank.bar(ranks, mpi, bottom=compute, label="MPI", color="tab:red")
    if len(ranks) <= 32:  # every rank's number under its bar, none between
        by_rank.set_xticks(ranks, [str(r) for r in ranks], fontsize=7)
    by_rank.set_xlabel("rank")
    by_rank.set_ylabel("time (s)")
    by_rank.set_title("Compute and MPI time per rank", fontsize=9)
    by_rank.legend(fontsize=7)
    return figure


def write_plot(profile: Profile, path) -> None:
    """The profile's figure as PNG or SVG (by the file's suffix)."""
    from oddnode.report.plots import save_figure

    save_figure(profile_figure(profile), path)
