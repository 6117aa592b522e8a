"""Benchmark targets end to end: `check --expect`, `baseline --targets` and
`analyze --expect` on a scripted cluster, and their JSON against the schema."""

from __future__ import annotations

import json

import pytest

from support.cli import invoke, write
from oddnode.report.schema import validate

NODES = [f"r07n{i:02d}" for i in range(1, 9)]


@pytest.fixture
def checked(tmp_path, monkeypatch):
    """A memory check of eight nodes, every one at half the speed of the scripted cluster."""
    from oddnode.app.cli import check as check_cli
    from oddnode.reach.base import Target
    from support.clusters.check import ScriptedCluster

    monkeypatch.setattr(check_cli, "selected_target",
                        lambda *args: Target(NODES, ScriptedCluster(speed={node: 0.5 for node in NODES})))

    def check(*options):
        return invoke("check", "-w", "r07n[01-08]", "--stages", "memory", "-r", "3", "--set",
                      "memory.elements=2000000", "--set", "memory.ntimes=3", "--json", "--db",
                      tmp_path / "c.duckdb", "--html", tmp_path / "report.html", *options)

    return check


def triad_median(db) -> float:
    rows = json.loads(invoke("stats", "memory.triad:bandwidth", "--json", "--db", db).stdout)
    return rows[0]["median"]


@pytest.mark.slow
def test_check_and_analyze_name_every_node_below_a_target_and_baseline_targets_hold(tmp_path, checked):
    plain = checked()
    assert plain.exit_code == 0, plain.output  # relative to the median, half speed everywhere is ready
    db = tmp_path / "c.duckdb"
    median = triad_median(db)
    strict = write(tmp_path / "site.yaml", f"benchmarks:\n  memory.triad:bandwidth: {{min: {2 * median / 1000} GB/s}}\n")
    result = checked("--expect", strict)
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    validate(document, "analysis")
    (finding,) = [f for f in document["findings"] if f["kind"] == "below-target"]
    assert finding["nodes"] == "r07n[01-08]" and finding["evidence"]["shortfall"] == pytest.approx(0.5, abs=0.05)

    shown = invoke("analyze", "--expect", strict, "--db", db)
    assert "below-target" in shown.output and "all 8 miss it" in " ".join(shown.output.split())
    analyzed = invoke("analyze", "--expect", strict, "--json", "--db", db)
    validate(json.loads(analyzed.stdout), "analysis")
    assert analyzed.exit_code == 1 and "below-target" in analyzed.stdout

    targets = tmp_path / "targets.yaml"
    written = invoke("baseline", "-o", tmp_path / "b.yaml", "--targets", targets, "--db", db)
    assert written.exit_code == 0, written.output
    assert "memory.triad" in targets.read_text()
    again = invoke("analyze", "--expect", targets, "--json", "--db", db, "--fail-on", "never")
    assert again.exit_code == 0 and not [f for f in json.loads(again.stdout)["findings"]
                                         if f["kind"] in ("below-target", "above-target")]


def test_a_target_no_step_writes_is_refused_before_the_nodes_run(tmp_path, checked):
    bad = write(tmp_path / "site.yaml", "benchmarks:\n  strem.triad: {min: 5}\n")
    result = checked("--expect", bad)
    assert result.exit_code == 2 and "site.yaml:2: benchmarks: strem.triad: no check step" in result.output
    assert "Traceback" not in result.output and "diagnostics" not in result.output


@pytest.mark.slow
def test_a_misspelt_metric_of_a_stage_that_ran_is_noted(tmp_path, checked):
    misspelt = write(tmp_path / "site.yaml", "benchmarks:\n  memory.tirad:bandwidth: {min: 5}\n")
    result = checked("--expect", misspelt)
    assert result.exit_code == 0, result.output
    assert "site.yaml:2: benchmarks: memory.tirad:bandwidth: no series of that name was measured" in " ".join(
        result.output.split())


@pytest.mark.slow
def test_a_unit_the_measured_series_cannot_take_is_said_and_the_check_kept(tmp_path, checked):
    wrong = write(tmp_path / "site.yaml", "benchmarks:\n  memory.triad:bandwidth: {min: 5 us}\n")
    result = checked("--expect", wrong)
    assert result.exit_code == 0, result.output
    assert "site.yaml:2: benchmarks: memory.triad:bandwidth: min '5 us': us cannot be converted" in " ".join(
        result.output.split())


@pytest.mark.slow
def test_analyze_refuses_an_unknown_series_in_one_line(tmp_path):
    from oddnode.app.synth import generate

    generate(tmp_path / "cluster", nodes=40)
    bad = write(tmp_path / "site.yaml", "benchmarks:\n  c.ppc65: {min: 5 GB/s}\n")
    result = invoke("analyze", tmp_path / "cluster", "--expect", bad)
    assert result.exit_code == 2 and "benchmarks: c.ppc65: no series named 'c.ppc65'" in result.output
    assert "Traceback" not in result.output
    wrong = write(tmp_path / "wrong.yaml", "benchmarks:\n  spp.sort.lat.0: {max: 3 MB/s}\n")
    result = invoke("analyze", tmp_path / "cluster", "--expect", wrong)
    assert result.exit_code == 2 and "wrong.yaml:2: benchmarks: spp.sort.lat.0: max '3 MB/s'" in result.output
    fine = write(tmp_path / "fine.yaml", "benchmarks:\n  spp.sort.lat.0: {max: 1 s}\n  c.ppc64: {min: 1 MB/s}\n")
    result = invoke("analyze", tmp_path / "cluster", "--expect", fine, "--json")
    assert not [f for f in json.loads(result.stdout)["findings"] if f["kind"].endswith("-target")]


def test_an_empty_store_is_no_data_not_a_target_error(tmp_path):
    from oddnode.store import open_store

    db = tmp_path / "empty.duckdb"
    with open_store(db):
        pass
    targets = write(tmp_path / "site.yaml", "benchmarks:\n  memory.triad:bandwidth: {min: 5}\n")
    result = invoke("analyze", "--expect", targets, "--json", "--db", db)
    assert result.exit_code == 1 and json.loads(result.stdout)["verdict"] == "no data"
