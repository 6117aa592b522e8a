"""The report of set results: terminal views fitted to their width with every
cell whole, the JSON of everything printed, the HTML section and its figures,
on a scripted store of set and scale runs (our names and a site's own)."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from matplotlib.figure import Figure
from rich.console import Console

from oddnode.judge.analysis import analyze
from oddnode.core.model import Dataset, Direction, LabelKind
from oddnode.core.nodes import fold
from oddnode.report.html import render_report
from oddnode.report.plots import ordering_spread_figure, scaling_figure
from oddnode.report.sets import (
    LEFT_OUT_FIRST,
    MAX_FAILED_MEMBERS,
    failed_members_view,
    has_set_results,
    ordering_table_view,
    print_sets,
    scaling_view,
    sets_json,
    sets_section,
    shown_metrics,
    variability_ratio,
)
from oddnode.report.terminal import number, print_analysis
from oddnode.readings.sets import ordering_table
from oddnode.readings.partition import scale_counts, scale_plans, set_plans
from oddnode.readings.sets_series import SCALE, SETS, set_series
from oddnode.store import ResultBatch, open_store

SIZES = (0, 8, 65536, 4194304)
SET_SIZE = 4
REPETITIONS = 6
NODES = 32  # 8 sets a repetition: enough for the weak-member rule at its default alpha
WIDTHS = (60, 80, 120)


def our_names(n: int) -> list[str]:
    return [f"node{i:02d}" for i in range(1, n + 1)]


def site_names(n: int) -> list[str]:
    return [f"cn-{i:04d}" for i in range(1, n + 1)]


def _add_run(batch: ResultBatch, family: str, ordering: str, repetition: int, members, slowdown: float,
             rng: np.random.Generator, failed: bool = False) -> None:
    """The rows one set run stores: sendrecv and allreduce at every size
    (time, and bandwidth where the message carries data), barrier's time."""
    label = fold(members)
    parameters = {"members": list(members), "nodes": len(members), "ordering": ordering}
    for benchmark in ("sendrecv", "allreduce", "barrier"):
        name = set_series(family, benchmark, ordering)
        for size in (0,) if benchmark == "barrier" else SIZES:
            us = (2.0 + size / 1e4) * slowdown * rng.normal(1.0, 0.01)
            batch.add(name, label, None if failed else us, metric="time" if benchmark == "barrier" else f"time.{size}",
                      unit="us", direction=Direction.LOWER, label_kind=LabelKind.SET, repetition=repetition,
                      valid=not failed, parameters=parameters)
            if benchmark != "barrier" and size:
                batch.add(name, label, None if failed else size / us, metric=f"bandwidth.{size}", unit="MB/s",
                          direction=Direction.HIGHER, label_kind=LabelKind.SET, repetition=repetition,
                          valid=not failed, parameters=parameters)


def scripted_store(nodes: list[str], weak: str | None = None, failing: str | None = None, sets: bool = True,
                   scale: bool = True, memory: bool = True):
    """Set runs of sets of 4 in both orderings (shuffled sets slower and
    more variable: they cross switches), ``weak`` slowing every set it is
    in and ``failing`` failing them; scale runs whose shuffled curve falls
    with the node count; the nodes' memory bandwidth, ``weak``'s poor."""
    rng = np.random.default_rng(7)
    store = open_store(":memory:")
    if sets:
        for ordering in ("sorted", "shuffled"):
            run = store.new_run("oddnode sets", nodes=nodes)
            batch = ResultBatch()
            for plan in set_plans(nodes, SET_SIZE, ordering, REPETITIONS):
                for members in plan.sets:
                    slowdown = 1.0 if ordering == "sorted" else rng.uniform(1.0, 1.5)
                    slowdown *= 2.5 if weak in members else 1.0
                    _add_run(batch, SETS, ordering, plan.repetition, members, slowdown, rng,
                             failed=failing in members)
            store.add_results(run, batch)
    if scale:
        for ordering in ("sorted", "shuffled"):
            run = store.new_run("oddnode scale", nodes=nodes)
            batch = ResultBatch()
            for repetition, count, members in scale_plans(nodes, scale_counts(len(nodes)), ordering, 3):
                _add_run(batch, SCALE, ordering, repetition, members,
                         1.0 if ordering == "sorted" else 1.0 + count / 4, rng)
            store.add_results(run, batch)
    if memory:
        run = store.new_run("oddnode check", nodes=nodes)
        batch = ResultBatch()
        for node in nodes:
            batch.add("memory.triad", node, 900.0 if node == weak else rng.normal(1800.0, 10.0),
                      metric="bandwidth", unit="MB/s", label_kind=LabelKind.NODE, repetition=1)
        store.add_results(run, batch)
    return store


@pytest.fixture(scope="module", params=[our_names, site_names], ids=["node01", "cn-0001"])
def cluster(request):
    nodes = request.param(NODES)
    store = scripted_store(nodes, weak=nodes[6], failing=nodes[12])
    return nodes, store.load_dataset()


def rendered(renderable, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, legacy_windows=False).print(renderable)
    return out.getvalue()


def fits(text: str, width: int) -> None:
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width


def words(text: str) -> str:
    """The text without the table's rules and line breaks: what a caption says."""
    return " ".join(re.sub(r"[│┃]", " ", text).split())


# --- which metrics -----------------------------------------------------------------


def test_the_judged_metrics_are_the_latency_with_data_and_the_largest_bandwidth():
    metrics = ["bandwidth.8", "bandwidth.65536", "bandwidth.4194304", "time.0", "time.8", "time.65536"]
    assert shown_metrics(metrics) == ["bandwidth.4194304", "time.8"]
    assert shown_metrics(["time"]) == ["time"]
    assert shown_metrics(["time.0"]) == ["time.0"]
    # Unsized metrics (an application's) are all kept; a time-only benchmark shows both ends.
    assert shown_metrics(["rate", "time"]) == ["rate", "time"]
    assert shown_metrics(["time.0", "time.8", "time.1024"]) == ["time.8", "time.1024"]


# --- the ordering table --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_the_ordering_table_fits_with_every_cell_whole(cluster, width):
    _, dataset = cluster
    table = ordering_table_view(dataset, width)
    text = rendered(table, width)
    fits(text, width)
    shown = [column.header for column in table.columns]
    rows = [r for r in ordering_table(dataset).rows if r.family == SETS]
    judged = {"sendrecv": {"time.8", "bandwidth.4194304"}, "allreduce": {"time.8", "bandwidth.4194304"},
              "barrier": {"time"}}
    for row in rows:
        if row.metric not in judged[row.benchmark]:
            assert f" {row.metric} " not in text
            continue
        assert f"│   {row.metric} " in text, row.metric
        for d in (row.sorted, row.shuffled):
            assert f" {number(d.median)} " in text
            assert f" {d.variability_pct:.2f} " in text
            if "low" in shown:
                assert f" {number(d.low)} " in text
            if "high" in shown:
                assert f" {number(d.high)} " in text
        assert f" {variability_ratio(row):.2f} " in text
    for benchmark in judged:
        assert f" sets.{benchmark} " in text
    caption = words(text)
    assert "Left out: 10 other message sizes" in caption and "--wide shows them all" in caption
    left_out = [c for c in LEFT_OUT_FIRST if c not in shown]
    assert left_out == list(LEFT_OUT_FIRST[:len(left_out)])
    if width < 120:
        assert left_out and f"left out to fit {width} columns" in caption
    else:
        assert not left_out and "columns" not in caption


@pytest.mark.slow
def test_a_wide_terminal_puts_sorted_next_to_shuffled():
    dataset = scripted_store(our_names(NODES)).load_dataset()
    text = rendered(ordering_table_view(dataset, 200), 200)
    fits(text, 200)
    header = text.split("sets.")[0]
    for column in ("sorted median", "shuffled median", "sorted %var", "shuffled %var", "var ratio"):
        assert column in header
    line = next(line for line in text.split(" sets.sendrecv ")[1].splitlines() if "bandwidth.4194304" in line)
    row = next(r for r in ordering_table(dataset).rows
               if r.family == SETS and r.benchmark == "sendrecv" and r.metric == "bandwidth.4194304")
    # One line: the sorted median before the shuffled one, then the ratio.
    cells = [c.strip() for c in line.split("│") if c.strip()]
    assert cells.index(number(row.sorted.median)) < cells.index(number(row.shuffled.median))
    assert cells[-1] == f"{variability_ratio(row):.2f}"


def test_wide_shows_every_metric_and_column_however_narrow_the_console(cluster):
    _, dataset = cluster
    out = io.StringIO()
    print_sets(Console(file=out, width=60, color_system=None), dataset, wide=True)
    text = out.getvalue()
    assert "…" not in text and "left out" not in text
    for metric in ("time.0", "time.65536", "bandwidth.8", "bandwidth.65536"):
        assert f" {metric} " in text
    assert max(len(line) for line in text.splitlines()) > 60


def test_no_set_runs_no_views():
    dataset = scripted_store(our_names(8), sets=False, scale=False).load_dataset()
    assert not has_set_results(dataset)
    assert ordering_table_view(dataset, 80) is None
    assert failed_members_view(dataset) is None
    assert scaling_view(dataset, 80) is None
    out = io.StringIO()
    assert print_sets(Console(file=out, width=80), dataset) is False and out.getvalue() == ""


# --- failed set runs -------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_the_node_in_every_failed_set_run_comes_first(cluster, width):
    nodes, dataset = cluster
    table = failed_members_view(dataset, width)
    text = rendered(table, width)
    fits(text, width)
    # One kernel run gives every benchmark: three benchmarks, one list.
    heading = words(text.split(nodes[12])[0])
    assert f"sets.allreduce, sets.barrier, sets.sendrecv: {2 * REPETITIONS} failed set runs" in heading
    first = next(line for line in text.splitlines() if re.search(r"│\s+\S+\s+│\s+\d+ │", line))
    assert f"│   {nodes[12]} " in first and f" {2 * REPETITIONS} │" in first and " 100% │" in first
    listed = [n for n in nodes if f"│   {n} " in text]
    assert len(listed) == MAX_FAILED_MEMBERS
    assert re.search(r"│   \d+ more nodes", text)


@pytest.mark.slow
def test_no_failed_set_run_no_table():
    dataset = scripted_store(our_names(12), weak="node03").load_dataset()
    assert failed_members_view(dataset) is None


# --- scaling ---------------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_the_scaling_tables_fit_and_give_the_ratio_per_node_count(cluster, width):
    nodes, dataset = cluster
    text = rendered(scaling_view(dataset, width), width)
    fits(text, width)
    for benchmark, metric in (("sendrecv", "bandwidth.4194304"), ("allreduce", "bandwidth.4194304"),
                              ("barrier", "time")):
        assert f"scale.{benchmark}: {metric}" in words(text)
    rows = re.findall(r"│\s+(\d+) │\s+(\S+) │\s+(\S+) │\s+(\S+) │", text)
    assert [int(r[0]) for r in rows] == scale_counts(len(nodes)) * 3
    # The shuffled sets' speed falls as 1 / (1 + count/4) of the sorted ones'.
    for count, _, _, ratio in rows:
        assert float(ratio) == pytest.approx(1 / (1 + int(count) / 4), abs=0.05)
    assert "below 0.5" in words(text)


def test_a_time_ratio_is_sorted_over_shuffled():
    dataset = scripted_store(our_names(16), sets=False, memory=False).load_dataset()
    data = sets_json(dataset)
    barrier = next(s for s in data["scaling"] if s["benchmark"] == "barrier")
    assert barrier["metric"] == "time" and barrier["direction"] == "lower"
    for point in barrier["points"]:
        assert point["shuffled"] > point["sorted"]  # slower
        assert point["ratio"] == pytest.approx(point["sorted"] / point["shuffled"])


# --- JSON ------------------------------------------------------------------------------


def test_the_json_holds_everything_printed_and_is_strict_json(cluster):
    nodes, dataset = cluster
    data = sets_json(dataset)
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text) == data
    assert set(data) == {"ordering_table", "failed_members", "member_correlations", "scaling_curves", "scaling",
                         "placed_sets"}
    row = next(r for r in data["ordering_table"] if r["family"] == SETS and r["benchmark"] == "sendrecv"
               and r["metric"] == "bandwidth.4194304")
    assert row["sorted"]["n"] == row["shuffled"]["n"] == (NODES // SET_SIZE - 1) * REPETITIONS  # one set failed
    assert row["variability_ratio"] == pytest.approx(
        row["shuffled"]["variability_pct"] / row["sorted"]["variability_pct"])
    failed = data["failed_members"][0]
    assert failed["runs"] == 2 * REPETITIONS and failed["counts"][nodes[12]] == 2 * REPETITIONS
    # The weak node's poor memory is the worst member of the slow sets.
    strongest = data["member_correlations"][0]
    assert strongest["node_series"] == "memory.triad:bandwidth" and abs(strongest["spearman_r"]) > 0.5
    curves = [c for c in data["scaling_curves"] if c["benchmark"] == "sendrecv" and c["metric"] == "time.8"]
    assert [c["ordering"] for c in curves] == ["sorted", "shuffled"]
    assert [p["nodes"] for p in curves[0]["points"]] == scale_counts(NODES)


def test_json_without_set_runs_is_empty_lists():
    dataset = scripted_store(our_names(8), sets=False, scale=False).load_dataset()
    assert sets_json(dataset) == {"ordering_table": [], "failed_members": [], "member_correlations": [],
                                  "scaling_curves": [], "scaling": [], "placed_sets": []}


# --- figures -----------------------------------------------------------------------------


def test_the_scaling_figure_has_a_log2_axis_of_node_counts_and_a_band_per_ordering():
    curves = {"shuffled": [(2, 60.0, 55.0, 65.0), (4, 40.0, 35.0, 45.0), (24, 10.0, 8.0, 12.0)],
              "sorted": [(2, 100.0, 95.0, 105.0), (4, 99.0, 97.0, 101.0), (24, 98.0, 90.0, 99.0)]}
    figure = scaling_figure(curves, "scale.sendrecv", "bandwidth.4194304", "MB/s")
    assert isinstance(figure, Figure)
    axes = figure.axes[0]
    assert axes.get_xscale() == "log" and axes.xaxis.get_transform().base == 2
    assert [t.get_text() for t in axes.get_xticklabels()] == ["2", "4", "24"]
    lines = [line for line in axes.get_lines() if line.get_label().endswith("band")]
    assert [line.get_label().split(":")[0] for line in lines] == ["sorted", "shuffled"]
    assert list(lines[1].get_ydata()) == [60.0, 40.0, 10.0]
    assert len(axes.collections) == 2  # the min-max bands
    assert "MB/s" in axes.get_ylabel()
    with pytest.raises(ValueError):
        scaling_figure({"sorted": []}, "empty", "time", "us")


def test_the_spread_figure_shows_every_run_sorted_first():
    rng = np.random.default_rng(1)
    values = {"shuffled": rng.normal(70.0, 10.0, 40), "sorted": rng.normal(100.0, 1.0, 40)}
    figure = ordering_spread_figure(values, "sets.sendrecv", "bandwidth.4194304", "MB/s")
    axes = figure.axes[0]
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert labels[0].startswith("sorted\n40 runs") and labels[1].startswith("shuffled\n40 runs")
    points = [c for c in axes.collections if len(c.get_offsets())]
    assert sorted(len(c.get_offsets()) for c in points) == [40, 40]
    with pytest.raises(ValueError):
        ordering_spread_figure({"sorted": np.array([np.nan])}, "empty", "time", "us")


# --- HTML and the analysis summary -------------------------------------------------------


@pytest.fixture(scope="module")
def site_report():
    nodes = site_names(NODES)
    dataset = scripted_store(nodes, weak=nodes[6], failing=nodes[12]).load_dataset()
    analysis = analyze(dataset, correlations=False)
    return nodes, analysis, render_report(analysis)


@pytest.mark.slow
def test_the_html_report_has_a_node_sets_section_with_its_plots(site_report):
    nodes, analysis, html = site_report
    assert '<a href="#node-sets">Node sets</a>' in html
    section = html.split('<section id="node-sets">')[1].split("</section>")[0]
    assert "their spread is the hardware&#39;s own" in section and "uplinks are oversubscribed" in section
    assert section.count('class="figure set-spread"') == 3  # sendrecv, allreduce, barrier
    assert section.count('id="scaling-scale.') == 3
    assert section.count("<svg") == 6
    # The ordering table, its other sizes folded away.
    assert "bandwidth.4194304" in section and "<details><summary>The other" in section
    # The weak member from its finding, the failing node from xcommon, the memory correlation.
    weak = [f for f in analysis.findings if f.kind == "weak-set-member"]
    assert nodes[6] in {f.nodes for f in weak}
    slow = section.split('id="sets-slow"')[1]
    # One block per weak node, however many benchmarks named it.
    assert slow.count('class="weak-member"') == 2
    block = slow.split(f"<code>{nodes[6]}</code>")[1].split("</div>")[0]
    assert "named as well in sets." in block and f"<code>{fold(nodes[4:8])}</code>" in block
    failures = section.split('class="set-failures"')[1]
    assert (f"<td><code>{nodes[12]}</code></td><td class=\"num\">{2 * REPETITIONS}</td><td class=\"num\">100%</td>"
            in failures)
    assert "memory.triad:bandwidth" in section.split('id="sets-members"')[1]
    # A shuffled/sorted ratio below the scaling-loss bound is marked.
    assert 'class="num flagged"' in section.split('id="sets-scaling"')[1]
    assert "scaling-loss:" in section


def test_no_set_runs_no_node_sets_section():
    dataset = scripted_store(our_names(12), sets=False, scale=False).load_dataset()
    analysis = analyze(dataset, correlations=False)
    assert sets_section(analysis) is None
    html = render_report(analysis)
    assert "node-sets" not in html and "Node sets" not in html
    assert 'id="correlations"' in html and 'id="failures"' in html


@pytest.mark.slow
@pytest.mark.parametrize("sets, scale", [(True, False), (False, True)], ids=["sets-only", "scale-only"])
def test_a_section_holds_what_was_run(sets, scale):
    dataset = scripted_store(our_names(16), sets=sets, scale=scale, memory=False).load_dataset()
    html = render_report(analyze(dataset, correlations=False))
    section = html.split('<section id="node-sets">')[1].split("</section>")[0]
    assert ('id="sets-orderings"' in section) is sets and ('class="figure set-spread"' in section) is sets
    assert ('id="sets-scaling"' in section) is scale
    assert section.count("<svg") == 3


def test_failed_set_runs_alone_still_get_their_section():
    nodes = our_names(8)
    store = open_store(":memory:")
    run = store.new_run("oddnode sets", nodes=nodes)
    batch = ResultBatch()
    for plan in set_plans(nodes, SET_SIZE, "sorted", 2):
        for members in plan.sets:
            _add_run(batch, SETS, "sorted", plan.repetition, members, 1.0, np.random.default_rng(0), failed=True)
    store.add_results(run, batch)
    analysis = analyze(store.load_dataset(), correlations=False)
    html = render_report(analysis)
    section = html.split('<section id="node-sets">')[1].split("</section>")[0]
    assert "4 failed set runs" in section and "<code>node01</code>" in section


@pytest.mark.parametrize("width", [60, 120])
def test_the_analysis_summary_shows_the_set_views_only_with_set_runs(site_report, width):
    _, analysis, _ = site_report
    out = io.StringIO()
    print_analysis(Console(file=out, width=width, color_system=None), analysis)
    text = out.getvalue()
    fits(text.split("Benchmark statistics")[1].split("strong significant correlations")[0], width)
    assert "Node sets: every run of every set" in text and "Nodes common to failed set runs" in text
    plain = analyze(Dataset(series=[s for s in analysis.dataset.series if s.label_kind is LabelKind.NODE]),
                    correlations=False)
    out = io.StringIO()
    print_analysis(Console(file=out, width=width, color_system=None), plain)
    assert "Node sets" not in out.getvalue()
