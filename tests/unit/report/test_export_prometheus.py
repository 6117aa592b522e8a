"""oddnode export prometheus: the verdict per node in node_exporter's
textfile format, parsed back with prometheus_client."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.cli import invoke
from oddnode.judge.analysis import analyze
from oddnode.core.atomic import OutputUnwritable
from oddnode.report.prometheus import escape_label_value, prometheus_text, write_textfile
from oddnode.core.model import Direction, Finding, LabelKind, Severity
from oddnode.store import CHECK_SOURCE, ResultBatch, open_store

GPUS = [f"gpu{i:03d}" for i in range(3, 11)]
NODES = ["cn-a17", "r01-n07", *GPUS]
ODD_METRIC = 'size "4\\096"'  # a quote and a backslash, escaped in the label value


def finding(kind: str, severity: Severity, nodes: str) -> Finding:
    return Finding(kind, severity, "stream:triad", nodes, f"{kind} on {nodes}", {}, "look at it")


def fill(path) -> None:
    with open_store(path) as store:
        old = ResultBatch()
        for i, node in enumerate(NODES):
            old.add("stream", node, 9000.0 + i, metric="triad", unit="MB/s", repetition=1)
        store.add_results(store.new_run("oddnode run stream", nodes=NODES), old)
        new = ResultBatch()
        for i, node in enumerate(NODES):
            new.add("stream", node, 5000.0 + i, metric="triad", unit="MB/s", repetition=1)
            new.add("stream", node, 5100.0 + i, metric="triad", unit="MB/s", repetition=2)
            new.add("noise", node, 0.5, metric=ODD_METRIC, unit="%", direction=Direction.LOWER)
        new.add("pingpong.cut", "gpu003-gpu004", 2.5, metric="latency", unit="us",
                direction=Direction.LOWER, label_kind=LabelKind.PAIR)
        new.add("sets.allreduce.sorted", "gpu[003-006]", 41.0, unit="us", direction=Direction.LOWER,
                label_kind=LabelKind.SET)
        store.add_results(store.new_run("oddnode check", nodes=NODES), new)
        store.record_findings("oddnode analyze", [finding("dead", Severity.ERROR, "gpu010")])
        store.record_findings("oddnode analyze", [
            finding("slow-node", Severity.WARNING, "gpu[003-005]"),
            finding("slow-node", Severity.WARNING, "gpu004"),
            finding("noisy", Severity.INFO, "cn-a17"),
            finding("bimodal", Severity.INFO, ""),  # about the population: no node
        ])
        store.new_run("oddnode check", source=CHECK_SOURCE, nodes=NODES)
        store.new_run("oddnode check", source=CHECK_SOURCE, nodes=["cn-a17", "gpu003"])


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "s.duckdb"
    fill(path)
    return path


def verdict_text(store, written: float) -> str:
    """The textfile as the command writes it: the verdict of an analysis made now."""
    return prometheus_text(store, analyze(store.load_dataset(), require_data=True), written=written)


def samples(text: str) -> dict[str, list]:
    """Family name -> its samples, as prometheus_client parses the text."""
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(found: dict[str, list], family: str, **labels: str) -> float:
    hits = [s.value for s in found[family] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (family, labels, hits)
    return hits[0]


def test_findings_per_node_kind_and_severity(db):
    with open_store(db, read_only=True) as store:
        found = samples(verdict_text(store, written=1_700_000_000.0))
    assert value(found, "oddnode_findings", node="gpu004", kind="slow-node", severity="warning") == 2
    assert value(found, "oddnode_findings", node="gpu005", kind="slow-node", severity="warning") == 1
    assert value(found, "oddnode_findings", node="gpu006", kind="slow-node", severity="warning") == 0
    assert value(found, "oddnode_findings", node="cn-a17", kind="noisy", severity="info") == 1
    # Only the latest analysis counts: the older one's "dead" is gone.
    assert not [s for s in found["oddnode_findings"] if s.labels["kind"] == "dead"]
    assert value(found, "oddnode_node_findings", node="gpu004") == 2
    assert value(found, "oddnode_node_findings", node="gpu010") == 0
    assert value(found, "oddnode_node_ok", node="gpu004") == 0
    assert value(found, "oddnode_node_ok", node="gpu003") == 0
    assert value(found, "oddnode_node_ok", node="cn-a17") == 1  # info only
    assert value(found, "oddnode_node_ok", node="gpu010") == 1
    assert value(found, "oddnode_node_ok", node="r01-n07") == 1
    assert {s.labels["node"] for s in found["oddnode_node_ok"]} == set(NODES)


def test_newest_result_and_members_of_pairs_and_sets(db):
    with open_store(db, read_only=True) as store:
        found = samples(verdict_text(store, written=1_700_000_000.0))
    # The newest run wins over the older, higher one; its best repetition.
    assert value(found, "oddnode_result", node="cn-a17", benchmark="stream", metric="triad") == 5100.0
    assert value(found, "oddnode_result", node="gpu010", benchmark="stream", metric="triad") == 5109.0
    assert value(found, "oddnode_result", node="r01-n07", benchmark="stream", metric="triad",
                 unit="MB/s", label="r01-n07", population="node") == 5101.0
    for node in ("gpu003", "gpu004"):
        assert value(found, "oddnode_result", node=node, benchmark="pingpong.cut", label="gpu003-gpu004",
                     population="pair", unit="us") == 2.5
    assert {s.labels["node"] for s in found["oddnode_result"] if s.labels["population"] == "set"} == \
        {"gpu003", "gpu004", "gpu005", "gpu006"}
    assert value(found, "oddnode_result", node="gpu005", benchmark="sets.allreduce.sorted",
                 label="gpu[003-006]") == 41.0
    assert value(found, "oddnode_result", node="gpu007", benchmark="noise", metric=ODD_METRIC) == 0.5


def test_check_times_and_written_time(db):
    with open_store(db, read_only=True) as store:
        started = {node: when for node, when in store.latest_run_per_node(CHECK_SOURCE).items()}
        found = samples(verdict_text(store, written=1_700_000_000.0))
    assert value(found, "oddnode_textfile_written_timestamp_seconds") == 1_700_000_000.0
    stamps = {s.labels["node"]: s.value for s in found["oddnode_last_check_timestamp_seconds"]}
    assert set(stamps) == set(NODES)
    assert stamps["cn-a17"] == started["cn-a17"].replace(tzinfo=timezone.utc).timestamp()
    assert stamps["cn-a17"] >= stamps["gpu010"]  # checked again later
    assert abs(stamps["gpu010"] - datetime.now(timezone.utc).timestamp()) < 600


def test_label_values_are_escaped():
    assert escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_every_family_has_help_and_type(db):
    with open_store(db, read_only=True) as store:
        text = verdict_text(store, written=1.0)
    assert 'metric="size \\"4\\\\096\\""' in text
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert names == {line.split()[2] for line in text.splitlines() if line.startswith("# HELP")}
    assert {line.split("{")[0].split()[0] for line in text.splitlines() if not line.startswith("#")} <= names


def test_write_replaces_atomically(tmp_path, monkeypatch):
    target = tmp_path / "oddnode.prom"
    target.write_text("old\n")
    write_textfile("oddnode_x 1\n", target)
    assert target.read_text() == "oddnode_x 1\n"
    assert os.listdir(tmp_path) == ["oddnode.prom"]

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OutputUnwritable, match="No space left"):
        write_textfile("oddnode_x 2\n", target)
    assert target.read_text() == "oddnode_x 1\n"  # the old file stays whole
    assert os.listdir(tmp_path) == ["oddnode.prom"]  # no temporary left behind


def test_command_writes_file_and_stdout(db, tmp_path):
    target = tmp_path / "prom" / "oddnode.prom"
    target.parent.mkdir()
    target.write_text("stale\n")
    result = invoke("export", "prometheus", target, "--db", db)
    assert result.exit_code == 0, result.output
    assert value(samples(target.read_text()), "oddnode_node_ok", node="gpu005") == 0
    assert os.listdir(target.parent) == ["oddnode.prom"]
    printed = invoke("export", "prometheus", "-", "--db", db)
    assert printed.exit_code == 0, printed.output
    assert value(samples(printed.stdout), "oddnode_findings", node="gpu004", kind="slow-node",
                 severity="warning") == 2


def test_command_errors(tmp_path):
    missing = invoke("export", "prometheus", tmp_path / "x.prom", "--db", tmp_path / "none.duckdb")
    assert missing.exit_code == 2 and "no results store" in missing.text
    open_store(tmp_path / "empty.duckdb").close()
    empty = invoke("export", "prometheus", tmp_path / "x.prom", "--db", tmp_path / "empty.duckdb")
    assert empty.exit_code == 2 and "nothing to export" in empty.text
    assert not (tmp_path / "x.prom").exists()
