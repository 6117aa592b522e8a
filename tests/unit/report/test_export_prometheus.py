"""oddnode export prometheus: the verdict per node in node_exporter's
textfile format, parsed back with prometheus_client."""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.cli import invoke
from oddnode.core.units import canonical_units
from oddnode.judge.analysis import analyze
from oddnode.core.atomic import OutputUnwritable
from oddnode.report.prometheus import UNIT_SUFFIXES, prometheus_text, write_textfile
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_newest_result_in_base_units_and_each_pair_and_set_once(db):
    with open_store(db, read_only=True) as store:
        found = samples(verdict_text(store, written=1_700_000_000.0))
    # The newest run wins over the older, higher one; its best repetition, in bytes per second.
    assert value(found, "oddnode_node_result_bytes_per_second", node="cn-a17", benchmark="stream",
                 metric="triad") == 5100e6
    assert value(found, "oddnode_node_result_bytes_per_second", node="gpu010", metric="triad") == 5109e6
    assert value(found, "oddnode_node_result_ratio", node="gpu007", benchmark="noise", metric=ODD_METRIC) == 0.005
    # A pair is one sample naming both ends, a set one sample naming its nodes: a sum counts each once.
    assert [(s.labels, s.value) for s in found["oddnode_pair_result_seconds"]] == [
        ({"pair": "gpu003-gpu004", "node_a": "gpu003", "node_b": "gpu004", "benchmark": "pingpong.cut",
          "metric": "latency"}, 2.5e-6)]
    assert [(s.labels, s.value) for s in found["oddnode_set_result_seconds"]] == [
        ({"nodes": "gpu[003-006]", "benchmark": "sets.allreduce.sorted", "metric": "value"}, 41e-6)]
    # One quantity per metric: no unit label, and no family mixes a bandwidth with a time.
    assert all("unit" not in s.labels for family in found.values() for s in family)
    assert not [name for name in found if name.startswith("oddnode_result")]


def test_a_pair_or_set_gives_its_members_a_verdict(tmp_path):
    """A store of pair results alone: each end of a pair is judged by it."""
    nodes = ["sp-01", "sp-02", "sp-03", "sp-04"]
    with open_store(tmp_path / "pairs.duckdb") as store:
        batch = ResultBatch()
        for pair, latency in (("sp-01-sp-02", 3.0), ("sp-03-sp-04", 3.1)):
            batch.add("pingpong.cut", pair, latency, metric="latency", unit="us", direction=Direction.LOWER,
                      label_kind=LabelKind.PAIR)
        store.add_results(store.new_run("oddnode pairs", nodes=nodes), batch)
        found = samples(verdict_text(store, written=1.0))
    assert [value(found, "oddnode_node_ok", node=node) for node in nodes] == [1, 1, 1, 1]
    assert value(found, "oddnode_pair_result_seconds", node_a="sp-01", node_b="sp-02") == 3e-6


# Prometheus' naming rules as `promtool check metrics` lints them: base units
# only, units spelled out, no suffix a histogram or summary owns, no type in
# the name, snake case without colons (those are for recording rules).
NOT_BASE_UNITS = ("milliseconds", "microseconds", "nanoseconds", "minutes", "hours", "days", "bits",
                  "kilobytes", "megabytes", "gigabytes", "kibibytes", "mebibytes", "gibibytes", "percent",
                  "celsius_millidegrees")
ABBREVIATIONS = ("ms", "us", "ns", "sec", "secs", "min", "mins", "kb", "mb", "gb", "kib", "mib", "gib",
                 "mbit", "gbit", "mops", "gups", "iops", "pct", "perc")


def lint(text: str) -> list[str]:
    problems = []
    families = list(text_string_to_metric_families(text))
    helped = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    for family in families:
        name, words = family.name, family.name.split("_")
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            problems.append(f"{name}: not snake case, or a colon")
        if family.type == "counter" or name.endswith("_total"):
            problems.append(f"{name}: a gauge named like a counter")
        if words[-1] in ("count", "sum", "bucket"):
            problems.append(f"{name}: a histogram's or summary's suffix")
        if "gauge" in words or "metric" in words:
            problems.append(f"{name}: its type in its name")
        problems += [f"{name}: non-base unit {unit}" for unit in NOT_BASE_UNITS if unit in words]
        problems += [f"{name}: abbreviated unit {unit}" for unit in ABBREVIATIONS if unit in words]
        if name not in helped:
            problems.append(f"{name}: no HELP")
    return problems


@pytest.mark.slow
def test_every_metric_follows_prometheus_naming_for_every_unit_a_result_can_have(tmp_path):
    units = [unit for unit in canonical_units() if unit]
    with open_store(tmp_path / "units.duckdb") as store:
        batch = ResultBatch()
        for unit in units:
            for node in ("n1", "n2"):
                batch.add(f"bench {unit}", node, 2.0, unit=unit)
            batch.add(f"pair {unit}", "n1-n2", 2.0, unit=unit, label_kind=LabelKind.PAIR)
            batch.add(f"set {unit}", "n[1-2]", 2.0, unit=unit, label_kind=LabelKind.SET)
        store.add_results(store.new_run("import", nodes=["n1", "n2"]), batch)
        text = verdict_text(store, written=1.0)
    assert lint(text) == []
    found = samples(text)
    for unit in units:  # every result is there, once per population
        for population in ("node", "pair", "set"):
            hits = [s for name, family in found.items() if name.startswith(f"oddnode_{population}_result")
                    for s in family if s.labels["benchmark"] == f"{population if population != 'node' else 'bench'} {unit}"]
            assert len(hits) == (2 if population == "node" else 1), (unit, population, hits)
    assert set(found) >= {f"oddnode_node_result_{suffix}" for suffix in UNIT_SUFFIXES.values()}
    assert value(found, "oddnode_node_result_seconds", node="n1", benchmark="bench ms") == 0.002
    assert value(found, "oddnode_node_result_bytes_per_second", node="n1", benchmark="bench Gbit/s") == 2.5e8
    assert value(found, "oddnode_node_result", node="n1", benchmark="bench count") == 2.0


def test_the_lint_finds_what_promtool_would():
    text = ("# HELP oddnode_result_milliseconds x\n# TYPE oddnode_result_milliseconds gauge\n"
            "oddnode_result_milliseconds 1\n# HELP oddnode_latency_us x\n# TYPE oddnode_latency_us gauge\n"
            "oddnode_latency_us 1\n# HELP oddnode_runs_count x\n# TYPE oddnode_runs_count gauge\noddnode_runs_count 1\n")
    assert len(lint(text)) == 3


def test_a_result_in_a_unit_oddnode_does_not_know_is_left_out(tmp_path):
    with open_store(tmp_path / "s.duckdb") as store:
        batch = ResultBatch()
        batch.add("site bench", "n1", 2.0, unit="furlongs/fortnight")
        batch.add("stream", "n1", 2.0, metric="triad", unit="GB/s")
        store.add_results(store.new_run("import", nodes=["n1"]), batch)
        found = samples(verdict_text(store, written=1.0))
    assert [s.labels["benchmark"] for name, family in found.items() if "_result" in name for s in family] == ["stream"]


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
