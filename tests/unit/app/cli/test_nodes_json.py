"""``inventory --json``, ``diagnose --json`` and ``common --json``: one JSON
document on stdout, checked key by key against what the scripted nodes
answered, the expectations file and the failed runs; notes on stderr."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from oddnode.app.cli import nodes as nodes_cli
from oddnode.main import app
from oddnode.reach.base import Target
from support.clusters.probe import BASE_FACTS, NODES, ProbeCluster


@pytest.fixture
def on_cluster(monkeypatch):
    """Run the node commands on a scripted cluster of NODES."""
    def use(cluster, nodes=NODES):
        monkeypatch.setattr(nodes_cli, "selected_target", lambda *args: Target(list(nodes), cluster))
        return cluster
    return use


def run(*args):
    """The command in this process, stdout and stderr apart."""
    try:
        runner = CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps them apart always
        runner = CliRunner()
    return runner.invoke(app, [str(a) for a in args])


def document(result) -> dict:
    """stdout parsed: it must be exactly one JSON document."""
    return json.loads(result.stdout)


@pytest.mark.slow
def test_inventory_json_has_every_nodes_facts_the_differences_and_the_silent_nodes(tmp_path, on_cluster):
    on_cluster(ProbeCluster(facts={"cn-a19": {"bios_version": "2.5.0"}, "cn-a20": {"bios_version": "2.5.0"}},
                            down=["cn-b01"], broken=["cn-a21"],
                            notes={"cn-a17": ["dmidecode: not permitted"], "cn-a18": ["dmidecode: not permitted"]}))
    db = tmp_path / "inv.duckdb"
    result = run("inventory", "--db", db, "--json")
    assert result.exit_code == 1, result.output  # a fact differs, and two nodes gave nothing
    doc = document(result)
    assert doc["answered"] == "cn-a[17-20]" and doc["nodes"] == "cn-a[17-21],cn-b01"
    assert sorted(doc["facts"]) == ["cn-a17", "cn-a18", "cn-a19", "cn-a20"]
    assert doc["facts"]["cn-a19"]["bios_version"] == "2.5.0"
    assert doc["facts"]["cn-a17"]["cpu_model"] == "AMD EPYC 7763"
    assert doc["differing"] == {"bios_version": {"2.5.0": "cn-a[19-20]", "2.7.3": "cn-a[17-18]"}}
    assert doc["unanswered"]["cn-b01"]["status"] == "unreachable"
    assert "No route to host" in doc["unanswered"]["cn-b01"]["reason"]
    assert doc["unanswered"]["cn-a21"]["status"] == "failed" and doc["unanswered"]["cn-a21"]["reason"]
    assert doc["skipped"] == {"dmidecode: not permitted": "cn-a[17-18]"}
    assert [(f["kind"], f["subject"]) for f in doc["findings"]] == [("inconsistent-fact", "bios_version")]
    # The run id is the run that stored these facts.
    from oddnode.store import open_store

    with open_store(db, read_only=True) as store:
        stored = {row[0] for row in store.con.execute("SELECT DISTINCT run_id FROM facts").fetchall()}
    assert stored == {doc["run_id"]}
    assert "4 of 6 nodes answered" in result.stderr and "cn-b01" in result.stderr


def test_inventory_json_of_identical_nodes_with_a_snapshot(tmp_path, on_cluster):
    on_cluster(ProbeCluster(), nodes=NODES[:3])
    snapshot = tmp_path / "expect.yaml"
    result = run("inventory", "--db", tmp_path / "inv.duckdb", "--json", "--snapshot", snapshot)
    assert result.exit_code == 0, result.output
    doc = document(result)
    assert doc["differing"] == {} and doc["unanswered"] == {} and doc["findings"] == []
    assert sorted(doc["facts"]) == ["cn-a17", "cn-a18", "cn-a19"]
    assert all(doc["facts"][node][key] == value for node in doc["facts"] for key, value in BASE_FACTS.items())
    assert "bios_version: 2.7.3" in snapshot.read_text()
    assert "expectations written to" in result.stderr


def test_inventory_without_json_prints_text(tmp_path, on_cluster):
    on_cluster(ProbeCluster(), nodes=NODES[:2])
    result = run("inventory", "--db", tmp_path / "inv.duckdb")
    assert result.exit_code == 0
    assert "Every fact has the same value" in result.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


@pytest.mark.slow
def test_diagnose_json_gives_every_expectations_verdict_per_node(tmp_path, on_cluster):
    on_cluster(ProbeCluster(facts={"cn-a19": {"bios_version": "2.5.0", "memory_total_kb": "263856012"}}),
               nodes=NODES[:5])
    db = tmp_path / "inv.duckdb"
    assert run("inventory", "--db", db).exit_code == 1  # a fact differs
    expect = tmp_path / "expect.yaml"
    expect.write_text("bios_version: 2.7.3\nkernel: {match: '6.1.*'}\nmemory_total_kb: {min: 500000000}\n"
                      "gpu_count: 4\n", encoding="utf-8")
    result = run("diagnose", "--expect", expect, "--db", db, "--json")
    assert result.exit_code == 1  # failures still exit 1
    doc = document(result)
    assert doc["ok"] is False and doc["nodes"] == "cn-a[17-21]" and doc["expectations"] == str(expect)
    checked = {c["key"]: c for c in doc["checked"]}
    assert list(checked) == ["bios_version", "gpu_count", "kernel", "memory_total_kb"]

    bios = checked["bios_version"]
    assert bios["verdict"] == "fail" and bios["expected"] == {"equals": "2.7.3"} and bios["wanted"] == "be 2.7.3"
    assert bios["failed"] == "cn-a19" and bios["passed"] == "cn-a[17-18,20-21]"
    assert bios["found"] == [{"value": "2.7.3", "nodes": "cn-a[17-18,20-21]", "count": 4, "pass": True},
                             {"value": "2.5.0", "nodes": "cn-a19", "count": 1, "pass": False}]
    assert checked["kernel"]["verdict"] == "pass" and checked["kernel"]["failed"] == ""
    assert checked["kernel"]["found"] == [{"value": "6.1.0-18-amd64", "nodes": "cn-a[17-21]", "count": 5,
                                           "pass": True}]
    memory = checked["memory_total_kb"]
    assert memory["expected"] == {"min": 500000000.0} and memory["failed"] == "cn-a19"
    gpus = checked["gpu_count"]
    assert gpus["found"] == [{"value": "(not reported)", "nodes": "cn-a[17-21]", "count": 5, "pass": False}]
    # Every failing verdict is a finding, and nothing else is.
    findings = {f["subject"]: f for f in doc["findings"]}
    assert set(findings) == {k for k, c in checked.items() if c["verdict"] == "fail"}
    assert findings["bios_version"]["nodes"] == "cn-a19" and findings["bios_version"]["severity"] == "error"
    assert findings["bios_version"]["evidence"]["violations"] == {"2.5.0": "cn-a19"}


@pytest.mark.slow
def test_diagnose_json_passes_with_exit_0(tmp_path, on_cluster):
    on_cluster(ProbeCluster(), nodes=NODES[:2])
    db = tmp_path / "inv.duckdb"
    assert run("inventory", "--db", db).exit_code == 0  # every fact alike
    expect = tmp_path / "expect.yaml"
    expect.write_text("kernel: 6.1.0-18-amd64\n", encoding="utf-8")
    result = run("-v", "diagnose", "--expect", expect, "--db", db, "--json")
    assert result.exit_code == 0
    doc = document(result)
    assert doc["ok"] is True and doc["findings"] == []
    assert doc["checked"][0]["verdict"] == "pass" and doc["checked"][0]["passed"] == "cn-a[17-18]"
    assert "findings recorded in" in result.stderr and "findings recorded" not in result.stdout


def test_common_json_counts_nodes_as_the_table(tmp_path):
    failed = tmp_path / "failed"
    failed.write_text("xhpl.x86_64.cn-a17.1\nxhpl.x86_64.cn-a17.3\nmpi.x86_64.gpu003-gpu009.2\n"
                      "stream.x86_64.gpu[003-004].1\n", encoding="utf-8")
    result = run("common", failed, "--json")
    assert result.exit_code == 0, result.output
    doc = document(result)
    assert doc["source"] == [str(failed)] and doc["failed_runs"] == 4
    # Most frequent first, ties by name: the table's order.
    assert doc["nodes"] == [{"node": "cn-a17", "failed_runs": 2}, {"node": "gpu003", "failed_runs": 2},
                            {"node": "gpu004", "failed_runs": 1}, {"node": "gpu009", "failed_runs": 1}]
    runs = {(r["benchmark"], r["label"], r["repetition"]): r for r in doc["runs"]}
    assert set(runs) == {("xhpl.x86_64", "cn-a17", 1), ("xhpl.x86_64", "cn-a17", 3),
                         ("mpi.x86_64", "gpu003-gpu009", 2), ("stream.x86_64", "gpu[003-004]", 1)}
    assert runs[("mpi.x86_64", "gpu003-gpu009", 2)]["label_kind"] == "pair"
    assert runs[("mpi.x86_64", "gpu003-gpu009", 2)]["nodes"] == "gpu[003,009]"
    assert runs[("stream.x86_64", "gpu[003-004]", 1)]["label_kind"] == "set"
    text = run("common", failed)
    assert text.exit_code == 0 and "gpu009" in text.stdout and not text.stdout.lstrip().startswith("{")


def test_common_json_reads_the_store(tmp_path):
    from oddnode.store import open_store

    db = tmp_path / "empty.duckdb"
    with open_store(db):
        pass
    result = run("common", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    assert document(result) == {"version": 1, "source": str(db), "failed_runs": 0, "nodes": [], "runs": []}
