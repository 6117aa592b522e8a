"""The NUMA report: matrices and the node table fitted to the terminal, the
1x1 case said, the flagged node's own matrices shown, the JSON, the HTML
section with its heatmaps; the command's defaults equal the library's."""

from __future__ import annotations

import json

from rich.console import Console

import pytest

from support.numa_data import load, store_cluster
from oddnode.judge.analysis import analyze
from oddnode.app.cli import numa as numa_cli
from oddnode.findings import find_all
from oddnode.measure.node import numa as numa_kernels
from oddnode.core.nodes import expand
from oddnode.report.html import render_report
from oddnode.report.numa import numa_json, print_numa


def rendered(dataset, findings=(), width=80, **options) -> str:
    console = Console(width=width, record=True, color_system=None)
    print_numa(console, dataset, findings, **options)
    return console.export_text()


@pytest.mark.slow
def test_views_fit_the_terminal_and_show_the_flagged_node(tmp_path):
    nodes = expand("cn-a[01-20]")
    dataset = load(store_cluster(tmp_path / "s.duckdb", nodes, numa_nodes=4, faults={"cn-a07": ("slow-memory", 2)}))
    findings = [f for f in find_all(dataset) if f.kind.startswith("numa")]
    for width in (60, 80, 120):
        text = rendered(dataset, findings, width)
        assert max(len(line) for line in text.splitlines()) <= width
    text = rendered(dataset, findings, 120)
    assert "NUMA triad bandwidth (MB/s), median of 20 nodes" in text
    assert "NUMA triad bandwidth (MB/s) on cn-a07" in text
    assert "on cn-a08" not in text
    assert "5 other nodes (median)" in text
    every = rendered(dataset, findings, 120, every_node=True)
    assert "on cn-a08" in every


def test_one_numa_node_is_the_1x1_case(tmp_path):
    dataset = load(store_cluster(tmp_path / "s.duckdb", ["vm"], numa_nodes=1))
    text = rendered(dataset)
    assert "vm: one NUMA node, the 1x1 case" in text
    assert "nothing remote to compare" in text
    assert numa_json(dataset)["one_numa_node"] == ["vm"]
    # One table of the one-cell matrices, each measure once, the sentence once.
    assert text.count("triad bandwidth") == 1 and text.count("1x1") == 1
    assert "cpu \\ mem" not in text


def test_many_one_numa_nodes_give_the_median_and_the_range_of_each_measure(tmp_path):
    nodes = expand("gpu[003-010]")
    dataset = load(store_cluster(tmp_path / "s.duckdb", nodes, numa_nodes=1))
    text = rendered(dataset, width=70)
    assert max(len(line) for line in text.splitlines()) <= 70
    assert "gpu[003-010]: one NUMA node" in text
    assert "median" in text and "lowest" in text and "highest" in text and "gpu003" not in text.split("median")[1]


def test_json_holds_every_matrix(tmp_path):
    nodes = expand("gpu[003-008]")
    document = numa_json(load(store_cluster(tmp_path / "s.duckdb", nodes)))
    triad = document["measures"]["numa.triad:bandwidth"]
    assert triad["unit"] == "MB/s" and triad["direction"] == "higher"
    assert set(triad["nodes"]) == set(nodes)
    assert len(triad["nodes"]["gpu003"]["matrix"]) == 2 and triad["median"]["ratio"] < 1
    json.dumps(document)


@pytest.mark.slow
def test_html_report_has_the_numa_section(tmp_path):
    nodes = expand("cn-a[01-12]")
    dataset = load(store_cluster(tmp_path / "s.duckdb", nodes, faults={"cn-a05": ("slow-link", 0)}))
    html = render_report(analyze(dataset, correlations=False))
    assert '<section id="numa">' in html and 'href="#numa"' in html
    section = html[html.index('<section id="numa">'):]
    assert section.count("<svg") >= 6  # three median heatmaps, three of cn-a05
    assert "sev-warning" in section.split("</table>")[0]


def test_command_defaults_are_the_librarys():
    assert numa_cli.DEFAULT_REPETITIONS == numa_kernels.DEFAULT_REPETITIONS
    assert numa_cli.DEFAULT_NTIMES == numa_kernels.DEFAULT_NTIMES
    assert numa_cli.DEFAULT_LATENCY_BYTES == numa_kernels.DEFAULT_LATENCY_BYTES
    assert numa_cli.DEFAULT_BANDWIDTH_BYTES == numa_kernels.DEFAULT_BANDWIDTH_BYTES
    assert numa_cli.DEFAULT_SECONDS_PER_SIZE == numa_kernels.DEFAULT_SECONDS_PER_SIZE
