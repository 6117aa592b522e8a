"""``oddnode processes`` on a scripted cluster: the asymmetry-ratio table
and the findings it prints, the run it stores, groups by an inventory fact
and by a topology file, its JSON, and one-line errors."""

from __future__ import annotations

import json

import pytest

from support.cli import invoke, write
from oddnode.measure.collect import accounting as collect
from oddnode.onnode import accounting_collector as node_collector
from oddnode.app.cli import processes as cli
from oddnode.report import processes as report
from oddnode.store import open_store
from oddnode.reach.base import NodeResult, NodeStatus
from support.clusters.accounting import use_scripted_cluster
from support.clusters.accounting import NODES, background


@pytest.fixture
def cluster(monkeypatch):
    return lambda answers: use_scripted_cluster(monkeypatch, cli, answers)


def test_a_daemon_on_one_node_is_named_with_its_ratio_table(cluster, tmp_path):
    db = tmp_path / "s.duckdb"
    answers = {node: background() for node in NODES}
    answers["cn-b02"] = background({"basename": (3000, 12), "sed": (3000, 12), "sh": (3004, 12)})
    scripted = cluster(answers)
    result = invoke("processes", "--seconds", 60, "--db", db)
    assert result.exit_code == 1, result.output  # a finding
    assert "--seconds=60" in scripted.argv and scripted.timeout == 120
    assert "cn-a[10-13],cn-b[01-04]: kernel accounting, oddnode's own" in result.text
    assert "Asymmetry ratios (8 nodes, 60 s)" in result.text
    assert "cn-b02 runs commands far more often than the other nodes" in result.text
    assert "basename (only here)" in result.text and "sh 751×" in result.text
    with open_store(db, read_only=True) as store:
        stored = store.load_dataset().processes
    assert sorted(stored) == sorted(NODES) and stored["cn-b02"].commands["basename"].executions == 3000


def test_a_healthy_cluster_says_so(cluster, tmp_path):
    cluster({node: background() for node in NODES})
    result = invoke("processes", "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 0
    assert "No command runs markedly more often on one node than on the rest." in result.text
    assert "No node or group runs commands far more often than the others." in result.text


@pytest.mark.slow
def test_old_against_new_nodes_by_bios_date(cluster, tmp_path):
    db = tmp_path / "s.duckdb"
    old = NODES[:4]
    with open_store(db) as store, store.transaction():
        store.add_facts(store.new_run("inventory"), [(n, "bios_date", "09/02/2004" if n in old else "01/15/2025")
                                                     for n in NODES[:-1]])
    cluster({node: background({"lssrc": (300, 12)} if node in old else {}) for node in NODES})
    result = invoke("processes", "--groups", "bios_date", "--json", "--db", db)
    assert result.exit_code == 1, result.output  # a finding
    document = json.loads(result.stdout)
    node_table, group_table = document["tables"]
    assert group_table["grouped_by"] == "bios_date" and group_table["left_out"] == {"cn-b04": "in no group"}
    assert set(group_table["units"]) == {"01/15/2025", "09/02/2004"}
    (finding,) = document["findings"]
    assert finding["nodes"] == "cn-a[10-13]" and finding["evidence"]["unit"] == "09/02/2004"
    assert document["nodes"]["cn-a10"]["commands"]["lssrc"]["executions"] == 300
    assert "cn-b04: in no group of bios_date" in result.stderr


def test_groups_from_a_topology_file(cluster, tmp_path):
    topology = write(tmp_path / "racks", "rack-a cn-a[10-13]\nrack-b cn-b[01-04]\n")
    cluster({node: background({"spget_sy": (500, 12)} if node.startswith("cn-b") else {}) for node in NODES})
    result = invoke("processes", "--groups-file", topology, "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 1, result.output  # a finding
    assert f"group rack-b (cn-b[01-04], grouped by {topology})" in result.text
    assert "per node" in result.text


def test_a_node_that_fails_is_named_with_why(cluster, tmp_path):
    answers = {node: background() for node in NODES}
    answers["cn-a11"] = NodeResult("cn-a11", NodeStatus.FAILED, "", "oddnode accounting: /var/log/account/pacct "
                                   "at byte 0 (record 0): a version 2 record, not 3", 2, 1.0)
    cluster(answers)
    result = invoke("processes", "--pacct", "/var/log/account/pacct", "--db", tmp_path / "s.duckdb")
    assert "failed: cn-a11: /var/log/account/pacct at byte 0 (record 0): a version 2 record, not 3" in result.text
    assert "7 of 8 nodes accounted" in result.text


@pytest.mark.parametrize("arguments, message", [
    (["--groups", "bios_date", "--groups-file", "x"], "--groups and --groups-file both make groups: give one"),
    (["--groups", "bios_datum"], "no node has the inventory fact 'bios_datum' in the store"),
    (["--seconds", "0"], "0 only with --pacct"),
    (["--method", "sar"], "unknown accounting method 'sar'"),
    (["--alpha", "0.5"], "alpha 0.5 is outside"),
])
def test_bad_options_are_one_line_and_nothing_runs(cluster, tmp_path, arguments, message):
    scripted = cluster({node: background() for node in NODES})
    result = invoke("processes", *arguments, "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 2 and message in result.text
    assert scripted.argv is None


def test_the_commands_defaults_are_the_librarys():
    assert cli.DEFAULT_SECONDS == node_collector.DEFAULT_SECONDS
    assert cli.DEFAULT_MARGIN == collect.DEFAULT_MARGIN
    assert cli.DEFAULT_TOP == report.TOP
