"""The noise step's results in the analysis: analyze --json's ``noise``
(every node, valid against the schema) and the HTML report's OS noise
section, the noisy node first and marked."""

from __future__ import annotations

import numpy as np
import pytest

from oddnode.judge.analysis import analyze
from oddnode.core.model import Dataset
from oddnode.report.html import render_report
from oddnode.report.noise import MAX_ROWS, noise_json
from oddnode.report.schema import validate
from support.noise_data import REPETITIONS, TICK_MS, noise_cluster

NODES = [f"cn-b{i:03d}" for i in range(1, 41)]
DAEMON = {"lost": 2.6, "rate": 1050.0, "period_ms": 20.0, "detour_us": 1200.0}


def test_every_node_with_its_period_and_detours_in_the_json():
    dataset = noise_cluster(NODES, np.random.default_rng(1), {"cn-b007": DAEMON})
    nodes = noise_json(dataset)["nodes"]
    assert list(nodes) == NODES
    noisy = nodes["cn-b007"]
    assert noisy["period_ms"] == pytest.approx(20.0) and noisy["lost_pct"] == pytest.approx(2.6, rel=0.05)
    assert noisy["detour_us"] == pytest.approx(1200, rel=0.05) and noisy["repetitions"] == REPETITIONS
    assert noisy["periods"][0]["period_ms"] == pytest.approx(20.0)
    healthy = [n for name, n in nodes.items() if name != "cn-b007" and n["period_ms"] is not None]
    assert healthy and all(n["period_ms"] == pytest.approx(TICK_MS, rel=0.01) for n in healthy)
    assert noise_json(Dataset())["nodes"] == {}


@pytest.mark.slow
def test_analyze_json_and_the_report_carry_the_noise(tmp_path):
    from oddnode.app.cli.common import analysis_document

    analysis = analyze(noise_cluster(NODES, np.random.default_rng(1), {"cn-b007": DAEMON}))
    assert [(f.kind, f.nodes) for f in analysis.findings if f.kind == "noisy-node"] == [("noisy-node", "cn-b007")]
    document = analysis_document(analysis)
    validate(document, "analysis")
    assert set(document["noise"]["nodes"]) == set(NODES)
    html = render_report(analysis)
    section = html.split('<section id="noise">')[1].split("</section>")[0]
    rows = section.split("<tr")[2:]
    assert len(rows) == MAX_ROWS and 'class="sev-warning"><td class="">cn-b007</td>' in rows[0]
    assert "20.0 ms" in rows[0] and f"{len(NODES) - MAX_ROWS} more nodes" in section
    assert '<section id="noise">' not in render_report(analyze(Dataset()))
