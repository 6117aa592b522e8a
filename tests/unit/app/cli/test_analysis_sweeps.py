"""``analyze`` judges every parameter sweep the store holds, as ``sweep
--stored`` does, and carries each in its JSON and its HTML report; a store
without a sweep, or a view of it from before the sweep, has no such section."""

from __future__ import annotations

import json

import pytest

from support.cli import invoke, write
from support.schema import schema_errors
from support.clusters.sweep import FIXED, NODES, TunableCluster

pytestmark = pytest.mark.slow

SWEEP = ("sweep", "memory", "--env", "MEMORY_POLICY=local,interleave", "--set", FIXED[0], "--set", FIXED[1],
         "-r", "4", "--seed", "1")


def test_analyze_carries_each_stored_sweep_as_sweep_stored_judges_it(tmp_path, scripted):
    scripted(TunableCluster(), NODES)
    db = tmp_path / "sweep.duckdb"
    assert invoke(*SWEEP, "--db", db).exit_code == 0
    stored = json.loads(invoke("sweep", "--stored", "latest", "--json", "--db", db).stdout)
    analysis = invoke("analyze", "--json", "--db", db)
    document = json.loads(analysis.stdout)
    (sweep,) = document["sweeps"]
    assert sweep == stored
    assert schema_errors(document, ("analysis",)) == []
    report = tmp_path / "report.html"
    assert invoke("analyze", "--db", db, "--html", report).exit_code in (0, 1)
    html = report.read_text(encoding="utf-8")
    section = html[html.index('<section id="sweeps">'):]
    section = section[:section.index("</section>")]
    assert "Sweep 1 of memory: MEMORY_POLICY = local, interleave (4 rounds)" in section
    assert "better than the default (local): interleave" in section and 'class="significant"' in section
    assert section.count("<svg") == 4  # a figure per series: copy, scale, add, triad
    assert '<a href="#sweeps">Sweeps</a>' in html


def test_a_store_or_a_view_without_a_sweep_has_no_sweep_section(tmp_path, scripted):
    scripted(TunableCluster(), NODES)
    db = tmp_path / "sweep.duckdb"
    plots = write(tmp_path / "results" / "plot.hpl", "".join(f"{100 + i} {node}\n" for i, node in enumerate(NODES)))
    assert invoke("analyze", plots.parent, "--db", db).exit_code in (0, 1)
    before = json.loads(invoke("analyze", "--json", "--db", db).stdout)
    assert "sweeps" not in before
    assert invoke(*SWEEP, "--db", db).exit_code == 0
    assert "sweeps" in json.loads(invoke("analyze", "--json", "--db", db).stdout)
    earlier = json.loads(invoke("analyze", "--json", "--db", db, "--run", 1).stdout)
    assert "sweeps" not in earlier
    report = tmp_path / "report.html"
    invoke("analyze", "--db", db, "--run", 1, "--html", report)
    assert 'id="sweeps"' not in report.read_text(encoding="utf-8")
