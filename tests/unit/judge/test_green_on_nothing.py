"""Never green on nothing: a store with nothing to judge is not ready, a
failed import leaves no store behind, and the Prometheus textfile carries
the verdict of an analysis, not of the absence of one."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.cli import invoke
from oddnode.judge.analysis import NO_DATA, analyze
from oddnode.core.model import Dataset
from oddnode.report.junit import structure_problems
from oddnode.store import CHECK_SOURCE, open_store

NODES = [f"node{i:02d}" for i in range(1, 9)]
FAILING = "node03"
FAILED_RUNS = 23


def node_ok(text: str) -> dict[str, float]:
    """node -> its oddnode_node_ok value, as Prometheus parses the file."""
    return {sample.labels["node"]: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "oddnode_node_ok"}


def results_directory(path, failed: bool = True):
    """STAB results: a plot file of 8 alike nodes, and a failed file with
    FAILED_RUNS failed runs of one of them."""
    path.mkdir()
    (path / "plot.stream").write_text("".join(f"{100 + i % 3} {node}\n" for i, node in enumerate(NODES)))
    if failed:
        (path / "failed").write_text("".join(f"stream.x86.{FAILING}.{run}\n" for run in range(1, FAILED_RUNS + 1)))
    return path


@pytest.fixture
def empty_store(tmp_path):
    path = tmp_path / "empty.duckdb"
    open_store(path).close()
    return path


# -- the analysis ---------------------------------------------------------------------------


def test_an_analysis_of_nothing_is_not_ready_when_data_is_required():
    analysis = analyze(Dataset(), require_data=True)
    assert not analysis.ready and not analysis.judged and analysis.verdict == "no data"
    assert [f.kind for f in analysis.findings] == [NO_DATA]
    assert analysis.to_json()["verdict"] == "no data"
    # One stage of a check may hold nothing of its own: no finding there.
    assert analyze(Dataset()).findings == []


@pytest.mark.slow
def test_analyze_of_an_empty_store_is_not_ready(empty_store):
    for fail_on in ("warning", "never"):  # never: exit 0 only when it could judge
        result = invoke("analyze", "--db", empty_store, "--fail-on", fail_on)
        assert result.exit_code == 1, result.output
        assert "NO DATA" in result.text and "nothing to judge" in result.text and "READY:" not in result.text
    printed = invoke("analyze", "--db", empty_store, "--json")
    assert printed.exit_code == 1
    document = json.loads(printed.stdout)
    assert document["ready"] is False and document["verdict"] == "no data"


@pytest.mark.slow
def test_runs_with_nothing_judged_are_not_ready(tmp_path):
    store = tmp_path / "s.duckdb"
    with open_store(store) as opened:  # a run that declared its nodes and stored nothing
        opened.new_run("oddnode run stream", nodes=NODES)
    result = invoke("analyze", "--db", store, "--json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["verdict"] == "no data"


@pytest.mark.slow
def test_junit_of_an_empty_store_is_not_all_green(empty_store, tmp_path):
    report = tmp_path / "junit.xml"
    result = invoke("analyze", "--db", empty_store, "--junit", report)
    assert result.exit_code == 1, result.output
    document = report.read_bytes()
    assert structure_problems(document) == []
    suite = ET.fromstring(document).find("testsuite")
    cases = suite.findall("testcase")
    failed = [case for case in cases if case.find("failure") is not None]
    assert [case.get("name") for case in failed] == [NO_DATA]
    assert "nothing to judge" in failed[0].find("failure").get("message")
    assert all(case.find("skipped") is not None for case in cases if case not in failed)
    assert int(suite.get("failures")) == 1 and int(suite.get("skipped")) == len(cases) - 1


@pytest.mark.slow
def test_a_store_with_results_is_judged_as_before(tmp_path):
    store = tmp_path / "s.duckdb"
    assert invoke("import", "stab", results_directory(tmp_path / "r", failed=False), "--db", store).exit_code == 0
    result = invoke("analyze", "--db", store, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == "ready"


# -- a failed import ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_failed_import_leaves_no_store(tmp_path):
    store = tmp_path / "s.duckdb"
    result = invoke("import", "stab", tmp_path / "nonexistent", "--db", store)
    assert result.exit_code == 2, result.output
    assert os.listdir(tmp_path) == []
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": [1, 2]')
    result = invoke("import", "fio", bad, "--label", "node01", "--db", store)
    assert result.exit_code == 2, result.output
    assert os.listdir(tmp_path) == ["bad.json"]
    assert invoke("analyze", "--db", store).exit_code == 2  # no store: said so, not judged


@pytest.mark.slow
def test_a_failed_import_leaves_an_existing_store_as_it_was(tmp_path):
    store = tmp_path / "s.duckdb"
    assert invoke("import", "stab", results_directory(tmp_path / "r"), "--db", store).exit_code == 0
    with open_store(store, read_only=True) as opened:
        runs = opened.con.execute("SELECT count(*) FROM runs").fetchone()
    result = invoke("import", "stab", tmp_path / "nonexistent", "--db", store)
    assert result.exit_code == 2 and store.exists()
    with open_store(store, read_only=True) as opened:
        assert opened.con.execute("SELECT count(*) FROM runs").fetchone() == runs


# -- the Prometheus textfile ----------------------------------------------------------------


def test_a_store_never_analysed_does_not_call_a_failing_node_ok(tmp_path):
    store = tmp_path / "s.duckdb"
    assert invoke("import", "stab", results_directory(tmp_path / "r"), "--db", store).exit_code == 0
    result = invoke("export", "prometheus", "-", "--db", store)
    assert result.exit_code == 0, result.output
    ok = node_ok(result.stdout)
    assert ok[FAILING] == 0
    assert all(ok[node] == 1 for node in NODES if node != FAILING)
    stamps = [line for line in result.stdout.splitlines() if line.startswith("oddnode_analysis_timestamp_seconds ")]
    assert len(stamps) == 1 and float(stamps[0].split()[1]) > 0


def test_nodes_only_checked_with_nothing_to_judge_are_not_ok(tmp_path):
    store = tmp_path / "s.duckdb"
    with open_store(store) as opened:
        opened.new_run("oddnode check", source=CHECK_SOURCE, nodes=NODES)
    result = invoke("export", "prometheus", "-", "--db", store)
    assert result.exit_code == 0, result.output
    ok = node_ok(result.stdout)
    assert set(ok) == set(NODES) and not any(ok.values())


def test_an_empty_store_exports_no_verdict(empty_store, tmp_path):
    result = invoke("export", "prometheus", tmp_path / "x.prom", "--db", empty_store)
    assert result.exit_code == 2 and "nothing to export" in result.text
    assert not (tmp_path / "x.prom").exists()
