"""Switchbench's three plots in the report: read from what the runners
stored, each present with its data and absent without it."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from oddnode.judge.analysis import analyze
from oddnode.measure.pair.switchbench import run_alltoall, run_chain, run_streams
from oddnode.readings.switchbench import chain_scaling
from oddnode.core.model import Dataset
from oddnode.report import switchbench as report
from oddnode.report.html import render_report
from oddnode.report.interconnect import FIGURE_SOURCES, SWITCH_BENCHMARKS, figure_sources
from oddnode.report.plots import chain_figure, phase_figure, stream_pairs_figure
from oddnode.core.nodes import fold
from oddnode.store import open_store
from oddnode.reach.base import Target
from support.clusters.switchbench import ALLTOALL, CHAIN, NODES, STREAMS, SwitchCluster, TWELVE

TITLES = ("Daisy chain: aggregate throughput against chain length", "Pairwise streaming: sort",
          "All-to-all: minimum bandwidth per phase")


@pytest.fixture(scope="module")
def switched(tmp_path_factory):
    """A store with a chain over 8 nodes (the switch full at 5 hops), sorted
    streams with a weak node05, and an all-to-all where node03 receives slowly."""
    path = tmp_path_factory.mktemp("switchbench") / "s.duckdb"
    with open_store(path) as store:
        chain = run_chain(store, Target(NODES, SwitchCluster()), 1, options=CHAIN)
        streams = run_streams(store, Target(TWELVE, SwitchCluster(weak="node05")), "sort", 1, options=STREAMS)
        alltoall = run_alltoall(store, Target(NODES[:4], SwitchCluster(slow="node03")), 1, options=ALLTOALL)
        dataset = store.load_dataset()
    return dataset, chain, streams, alltoall


def test_the_three_sources_are_registered():
    assert {"switchbench.chain", "switchbench.stream", "switchbench.alltoall"} <= set(FIGURE_SOURCES)


@pytest.mark.slow
def test_chain_scaling_is_read_from_the_store_with_the_runners_saturation(switched):
    dataset, chain, _, _ = switched
    scaling = chain_scaling(dataset)
    assert scaling is not None and scaling.nodes == "node[01-08]" and scaling.unit == "MB/s"
    assert scaling.aggregate == pytest.approx(chain.best_aggregate())
    assert scaling.saturation == chain.saturation == 6


@pytest.mark.slow
def test_stream_pairs_are_read_per_pattern_and_the_weak_pair_is_slow(switched):
    dataset, _, streams, _ = switched
    (sort,) = report.stream_pairs(dataset)
    assert sort.pattern == "sort" and len(sort.labels) == 6 and sort.failed == []
    assert dict(zip(sort.labels, sort.total)) == pytest.approx(streams.best_per_pair())
    assert sort.slow() == ["node05-node06"]


def test_alltoall_phases_are_read_with_total_and_aggregate(switched):
    dataset, _, _, alltoall = switched
    (phases,) = report.alltoall_phases(dataset)
    best = alltoall.best()
    assert phases.nodes == "node[01-04]" and phases.min_bandwidth == alltoall.phase_min_bandwidth()
    assert phases.total_seconds == pytest.approx(best.total_seconds)
    assert phases.aggregate == pytest.approx(best.aggregate_bandwidth)


def test_a_later_smaller_alltoall_keeps_its_phases_apart_from_an_earlier_one(tmp_path):
    # Results accumulate set by set: each node set keeps its newest run's phases.
    with open_store(tmp_path / "a.duckdb") as store:
        run_alltoall(store, Target(NODES, SwitchCluster()), 1, options=ALLTOALL)
        run_alltoall(store, Target(NODES[:3], SwitchCluster(slow="node02")), 1, options=ALLTOALL)
        smaller, whole = report.alltoall_phases(store.load_dataset())
    assert smaller.nodes == "node[01-03]" and smaller.min_bandwidth == {1: 200.0, 2: 200.0}
    assert whole.nodes == fold(NODES) and sorted(whole.min_bandwidth) == list(range(1, len(NODES)))


def switch_figures(dataset):
    """The figures of the report's Switch benchmarks heading."""
    return [f for section, figures in figure_sources(dataset) if section == SWITCH_BENCHMARKS for f in figures]


@pytest.mark.slow
def test_every_figure_with_its_data(switched):
    dataset, *_ = switched
    figures = switch_figures(dataset)
    assert [f.title for f in figures] == list(TITLES)
    chain, stream, alltoall = figures
    assert "stops scaling at k = 6" in chain.caption and chain.svg.startswith("<svg")
    assert "node05-node06" in stream.caption and "50%" in stream.caption
    assert "node[01-04]: every phase at 200 MB/s" in alltoall.caption  # node03 receives slowly from everyone


@pytest.mark.slow
def test_no_figure_without_switchbench_data(tmp_path):
    from support.clusters.bisection import OPTIONS as BISECTION_OPTIONS
    from support.clusters.bisection import BisectionCluster

    from oddnode.measure.pair.bisection import run_bisection

    assert figure_sources(Dataset()) == []
    with open_store(tmp_path / "b.duckdb") as store:
        run_bisection(store, Target(NODES, BisectionCluster()), 1, options=BISECTION_OPTIONS)
        dataset = store.load_dataset()
    assert figure_sources(dataset) == []
    assert 'id="switch-benchmarks"' not in render_report(analyze(dataset))


@pytest.mark.slow
def test_each_figure_is_absent_without_its_own_data(tmp_path):
    with open_store(tmp_path / "c.duckdb") as store:
        run_chain(store, Target(NODES[:4], SwitchCluster()), 1, options=CHAIN)
        only_chain = store.load_dataset()
    assert [f.title for f in switch_figures(only_chain)] == [TITLES[0]]
    assert "grew with every node added, up to k = 4" in switch_figures(only_chain)[0].caption
    with open_store(tmp_path / "d.duckdb") as store:  # every chain failed: nothing to plot
        run_chain(store, Target(NODES[:3], SwitchCluster(down={"node01"})), 1, options=CHAIN)
        assert figure_sources(store.load_dataset()) == []


@pytest.mark.slow
def test_the_report_shows_the_switch_benchmarks_section(switched):
    dataset, *_ = switched
    html = render_report(analyze(dataset))
    section = html[html.index('id="switch-benchmarks"'):]
    assert all(title in section for title in TITLES)
    assert section.count("<svg") >= 3


def test_chain_figure_marks_the_saturation_point():
    axes = chain_figure({2: 1000.0, 3: 2000.0, 4: 2100.0}, 4, "chain").axes[0]
    assert [line.get_label() for line in axes.get_lines() if not line.get_label().startswith("_")] == [
        "scaling by one hop per node", "aggregate", "stops scaling at k = 4"]
    (marker,) = [line for line in axes.get_lines() if line.get_label() == "stops scaling at k = 4"]
    assert list(marker.get_xdata()) == [4] and list(marker.get_ydata()) == [2100.0]
    unmarked = chain_figure({2: 1000.0, 3: 2000.0}, None, "chain").axes[0]
    assert not any("stops" in line.get_label() for line in unmarked.get_lines())
    with pytest.raises(ValueError):
        chain_figure({}, None, "chain")


def test_stream_figure_sorts_slowest_first_and_colours_the_slow_pairs():
    labels = ["a-b", "c-d", "e-f"]
    axes = stream_pairs_figure(labels, np.array([1000.0, 100.0, 900.0]), np.array([1000.0, 100.0, 950.0]),
                               "sort", slow={"c-d"}).axes[0]
    assert [t.get_text() for t in axes.get_xticklabels()] == ["c-d", "e-f", "a-b"]
    bars = axes.patches
    heights = [bar.get_height() for bar in bars[:3]]
    assert heights == [100.0, 900.0, 1000.0]  # the client-to-server part, in plotted order
    reds = [bar.get_facecolor() for bar in bars[:3]]
    assert reds[0] != reds[1] and reds[1] == reds[2]
    many = [f"n{i:03d}-n{i + 1:03d}" for i in range(100)]
    crowded = stream_pairs_figure(many, np.arange(100.0) + 1, np.arange(100.0) + 1, "t", slow={many[50]}).axes[0]
    assert len(crowded.get_xticklabels()) <= 6 and many[50] in [t.get_text() for t in crowded.get_xticklabels()]


def test_phase_figure_marks_a_dip_only():
    axes = phase_figure({"node[01-08]": {1: 900.0, 2: 200.0, 3: 880.0}}, "phases").axes[0]
    dips = [line for line in axes.get_lines() if line.get_marker() == "v"]
    assert len(dips) == 1 and list(dips[0].get_xdata()) == [2]
    flat = phase_figure({"node[01-04]": {1: 500.0, 2: 500.0}}, "phases").axes[0]
    assert not [line for line in flat.get_lines() if line.get_marker() == "v"]
    with pytest.raises(ValueError):
        phase_figure({}, "phases")


@pytest.mark.slow
def test_the_report_does_not_load_the_runners():
    """The report reads the store; the pure saturation rule lives apart from the runner."""
    code = ("import sys, oddnode.report.html; "
            "print(sorted(m for m in sys.modules if m.startswith('oddnode.measure')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_chromium_renders_the_three_plots(switched, tmp_path):
    from support.browser import chromium

    from oddnode.report.html import write_report

    dataset, *_ = switched
    page = write_report(analyze(dataset), tmp_path / "r.html")
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile").stdout
    section = dom[dom.index('id="switch-benchmarks"'):]
    assert all(title in section for title in TITLES) and section.count("<svg") >= 3
