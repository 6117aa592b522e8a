"""The administrator's loop: find the odd node, repair it, rerun it alone
into the cluster's store, judge again.  A rerun replaces that node's results
and no other's; -w/-x judge a part; history shows the node before and after."""

from __future__ import annotations

import json

import numpy as np
import pytest

from support.cli import oddnode, write

pytestmark = pytest.mark.slow

NODES = [f"r{rack:02d}n{slot:02d}" for rack in range(1, 4) for slot in range(1, 11)]
SLOW = "r02n04"
# What the analysis finds, and the repaired node's rerun: memory and BIOS.
FOUND = [("inconsistent-fact", SLOW), ("outlier", SLOW)]
REPAIRED = {"plot.triad": f"100.1 {SLOW}\n", "units.csv": "triad,GB/s,higher\n",
            "inventory.csv": f"{SLOW},BIOS Version,2.1\n"}


@pytest.fixture
def cluster(tmp_path):
    """A 30-node cluster's results under a site's own names: memory and HPL
    per node, a pair pattern, an inventory; ``SLOW`` at 60% memory bandwidth,
    with an older BIOS."""
    rng = np.random.default_rng(7)
    first = tmp_path / "first"
    first.mkdir()
    triad = {node: 60.0 if node == SLOW else 100 + rng.normal(0, 0.5) for node in NODES}
    write(first / "plot.triad", "".join(f"{value:.2f} {node}\n" for node, value in triad.items()))
    write(first / "plot.xhpl.amd64", "".join(f"{900 + rng.normal(0, 3):.1f} {node}\n" for node in NODES))
    write(first / "plot.pp_sort", "".join(f"{1000 + rng.normal(0, 5):.1f} {a}-{b}\n"
                                            for a, b in zip(NODES[0::2], NODES[1::2])))
    write(first / "units.csv", "triad,GB/s,higher\nxhpl.amd64,GFLOP/s,higher\npp_sort,MB/s,higher\n")
    write(first / "inventory.csv", "".join(f"{node},BIOS Version,{'1.9' if node == SLOW else '2.1'}\n"
                                           for node in NODES))
    store = tmp_path / "cluster.duckdb"
    oddnode("import", "stab", first, "--db", store, cwd=tmp_path)
    return store


def findings(store, tmp_path, *options) -> list[tuple[str, str]]:
    result = oddnode("analyze", "--db", store, "--json", *options, cwd=tmp_path, check=False)
    return [(f["kind"], f["nodes"]) for f in json.loads(result.stdout)["findings"]]


def rerun(tmp_path, store, name: str, files: dict[str, str]) -> None:
    directory = tmp_path / name
    directory.mkdir()
    for file, text in files.items():
        write(directory / file, text)
    oddnode("import", "stab", directory, "--db", store, cwd=tmp_path)


def test_a_repaired_node_rerun_alone_makes_the_cluster_ready(cluster, tmp_path):
    assert findings(cluster, tmp_path) == FOUND
    rerun(tmp_path, cluster, "repaired", REPAIRED)
    assert findings(cluster, tmp_path) == []
    stats = json.loads(oddnode("stats", "triad", "--db", cluster, "--json", cwd=tmp_path).stdout)
    assert stats[0]["n"] == len(NODES)


@pytest.mark.parametrize("files", [
    {"inventory.csv": "r01n01,BIOS Version,2.1\n"},
    {"plot.xhpl.amd64": "901 r01n01\n", "units.csv": "xhpl.amd64,GFLOP/s,higher\n"},
    {"plot.pp_sort": "1001 r01n01-r01n02\n", "units.csv": "pp_sort,MB/s,higher\n"},
], ids=["inventory", "node-benchmark", "pair"])
def test_a_rerun_of_one_node_changes_that_node_only_and_calls_no_other_missing(cluster, tmp_path, files):
    rerun(tmp_path, cluster, "one", files)
    assert findings(cluster, tmp_path) == FOUND


def test_a_rerun_that_fails_is_that_node_s_failure_not_the_cluster_s(cluster, tmp_path):
    rerun(tmp_path, cluster, "failed", {"failed": "xhpl.amd64.r01n03.1\n"})
    kinds = findings(cluster, tmp_path)
    assert set(FOUND) < set(kinds) and all(nodes in (SLOW, "r01n03") for _, nodes in kinds), kinds


def test_w_and_x_judge_a_part_of_the_store(cluster, tmp_path):
    assert findings(cluster, tmp_path, "-x", SLOW) == []
    assert findings(cluster, tmp_path, "-w", "r01n[01-10]") == []
    assert findings(cluster, tmp_path, "-w", "r02n[01-10]") == FOUND
    stats = json.loads(oddnode("stats", "--db", cluster, "--json", "-w", "r01n[01-10]", cwd=tmp_path).stdout)
    # The pairs of the rack: both members in it.
    assert {row["benchmark"]: row["n"] for row in stats} == {"xhpl.amd64": 10, "pp_sort": 5, "triad": 10}
    dist = json.loads(oddnode("dist", "triad", "--db", cluster, "--json", "-x", SLOW, cwd=tmp_path).stdout)
    assert dist["series"]["n"] == sum(row["count"] for row in dist["histogram"]["rows"]) == len(NODES) - 1
    nothing = oddnode("analyze", "--db", cluster, "-w", "x[1-2]", cwd=tmp_path, check=False)
    assert nothing.returncode == 2 and "no result, fact or failed run" in nothing.stderr
    empty = oddnode("stats", "--db", cluster, "-w", "r01n01", "-x", "r01n01", cwd=tmp_path, check=False)
    assert empty.returncode == 2 and "no node left" in empty.stderr


def test_history_shows_the_node_before_and_after_its_repair(cluster, tmp_path):
    findings(cluster, tmp_path)
    rerun(tmp_path, cluster, "repaired", REPAIRED)
    findings(cluster, tmp_path)
    document = json.loads(oddnode("history", SLOW, "--db", cluster, "--json", cwd=tmp_path).stdout)
    (triad,) = [s for s in document["results"] if s["benchmark"] == "triad"]
    assert [run["value"] for run in triad["runs"]] == [60.0, 100.1]
    assert triad["runs"][0]["vs_median_now_percent"] < -35 and abs(triad["runs"][1]["vs_median_now_percent"]) < 2
    (bios,) = document["facts"]
    assert bios["key"] == "BIOS Version" and [value["value"] for value in bios["values"]] == ["1.9", "2.1"]
    assert [[f["kind"] for f in analysis["findings"]] for analysis in document["analyses"]] == [
        ["inconsistent-fact", "outlier"], []]
    table = oddnode("history", SLOW, "--db", cluster, cwd=tmp_path).stdout
    assert "Results of r02n04" in table and "outlier" in table
    unknown = oddnode("history", "r09n09", "--db", cluster, cwd=tmp_path, check=False)
    assert unknown.returncode == 2 and "no result, fact or finding of r09n09" in unknown.stderr


def test_run_and_since_judge_an_earlier_view_or_the_recent_runs(cluster, tmp_path):
    rerun(tmp_path, cluster, "repaired", REPAIRED)
    history = json.loads(oddnode("history", SLOW, "--db", cluster, "--json", cwd=tmp_path).stdout)
    (triad,) = [s for s in history["results"] if s["benchmark"] == "triad"]
    before, after = triad["runs"]
    # As it was after the first import: the slow node as it was, every node judged.
    assert findings(cluster, tmp_path, "--run", before["run"]) == FOUND
    stats = json.loads(oddnode("stats", "triad", "--db", cluster, "--json", "--run", before["run"],
                               cwd=tmp_path).stdout)
    assert stats[0]["n"] == len(NODES) and stats[0]["low"] == 60.0
    assert findings(cluster, tmp_path, "--run", after["run"]) == []
    # The rerun's results alone: one node's.
    recent = json.loads(oddnode("stats", "triad", "--db", cluster, "--json", "--since", after["started"],
                                cwd=tmp_path).stdout)
    assert recent[0]["n"] == 1 and recent[0]["low"] == 100.1
    bad = oddnode("analyze", "--db", cluster, "--run", "0", cwd=tmp_path, check=False)
    assert bad.returncode == 2
