"""``--json`` of ``oddnode pairs``, ``bisection``, ``matrix`` and
``switchbench chain|stream|alltoall`` on scripted clusters: stdout is one
JSON document whose runs, tables and findings carry the values the runs
stored, and the human lines go to stderr."""

from __future__ import annotations

import json
import statistics

import pytest

from support.cli import invoke
from oddnode.judge.analysis import analyze
from oddnode.core.nodes import expand
from oddnode.store import open_store

GPUS = expand("gpu[003-014]")  # twelve nodes: a pattern has six pairs
CN = expand("cn-a[11-18]")
SIZES = (0, 1, 64, 4096, 65536)
SIZE_OPTION = ["--sizes", ",".join(map(str, SIZES)), "--seconds-per-size", 0.02, "--port", 6211]


def parsed(result, status: int | None = None) -> dict:
    """The document on stdout; nothing else is there.  The exit status is
    ``status``, else 1 exactly when a finding is a warning or worse."""
    document = json.loads(result.stdout)
    assert set(document) >= {"command", "runs", "findings"}
    problems = any(f["severity"] in ("warning", "error") for f in document["findings"])
    assert result.exit_code == (status if status is not None else int(problems)), result.output
    return document


def best(db, benchmark: str, metric: str) -> dict[str, float]:
    with open_store(db) as store:
        return dict(store.con.execute("SELECT label, value FROM best WHERE benchmark = ? AND metric = ?",
                                      [benchmark, metric]).fetchall())


@pytest.mark.slow
def test_pairs_json_has_each_patterns_runs_every_pairs_latency_and_bandwidth_and_the_weak_node(scripted, tmp_path):
    from support.clusters.pairs import PairCluster

    scripted(PairCluster(weak="gpu005"), GPUS)
    db = tmp_path / "p.duckdb"
    result = invoke("pairs", "--patterns", "sort,cut", "-r", 2, *SIZE_OPTION, "--json", "--db", db)
    document = parsed(result)
    assert document["command"] == "pairs" and list(document["runs"]) == ["sort", "cut"]
    assert "pingpong" not in result.stderr and "sort" in result.stderr and "cut" in result.stderr
    sort = document["runs"]["sort"]
    assert sort["pattern"] == "sort" and sort["repetitions"] == 2 and isinstance(sort["run_id"], int)
    assert sort["per_pair"]["gpu003-gpu004"] == {"ok": 2, "invalid": 0, "failed": 0}
    assert [plan["repetition"] for plan in sort["plans"]] == [1, 2]
    assert sort["plans"][0]["pairs"] == [f"{a}-{b}" for a, b in zip(GPUS[::2], GPUS[1::2])]
    assert document["runs"]["cut"]["plans"][0]["pairs"][0] == "gpu003-gpu009"
    tables = {t["pattern"]: t for t in document["patterns"]}
    assert set(tables) == {"sort", "cut"}
    cut = tables["cut"]
    assert cut["benchmark"] == "pingpong.cut" and cut["bandwidth_unit"] == "MB/s" and cut["latency_unit"] == "us"
    assert [row["size"] for row in cut["sizes"]] == list(SIZES)
    stored_bw = best(db, "pingpong.cut", "bandwidth.65536")
    stored_lat = best(db, "pingpong.cut", "latency.0")
    per_pair = {p["pair"]: p for p in cut["pairs"]}
    assert set(per_pair) == set(stored_bw) and len(per_pair) == 6
    for label, value in stored_bw.items():
        assert per_pair[label]["bandwidth"]["65536"] == pytest.approx(value)
        assert per_pair[label]["latency"]["0"] == pytest.approx(stored_lat[label])
    largest = cut["sizes"][-1]
    assert largest["n"] == 6 and largest["bandwidth"]["median"] == pytest.approx(statistics.median(stored_bw.values()))
    assert largest["bandwidth"]["min"] == pytest.approx(min(stored_bw.values()))
    # The slowest pair is the weak node's, a tenth of the others.
    assert "gpu005" in cut["slowest"][0]["pair"] and cut["slowest"][0]["percent_of_median"] < 20
    weak = [f for f in document["findings"] if f["kind"] == "weak-pair-member"]
    assert [f["nodes"] for f in weak] == ["gpu005"]
    with open_store(db) as store:
        expected = [f.kind for f in analyze(store.load_dataset()).findings
                    if f.kind in ("weak-pair-member", "weak-group", "oversubscription", "slow-link",
                                  "link-contention")]
    assert [f["kind"] for f in document["findings"]] == expected


@pytest.mark.slow
def test_pairs_over_a_network_name_its_series_and_the_network(scripted, tmp_path):
    from support.clusters.pairs import PairCluster

    cluster = scripted(PairCluster(weak="gpu005", hosts={f"{node}.ib": node for node in GPUS}), GPUS)
    result = invoke("pairs", "--patterns", "sort,cut", "-r", 2, *SIZE_OPTION, "--network", "ib={node}.ib", "--json",
                    "--db", tmp_path / "p.duckdb")
    document = parsed(result)
    assert [(t["benchmark"], t["pattern"], t["network"]) for t in document["patterns"]] == [
        ("pingpong.sort@ib", "sort", "ib"), ("pingpong.cut@ib", "cut", "ib")]
    assert [f["nodes"] for f in document["findings"] if f["kind"] == "weak-pair-member"] == ["gpu005"]
    assert cluster.hosts_used <= {f"{node}.ib" for node in GPUS}
    # The run lines (on stderr beside the document) name the network as the series do.
    assert "sort@ib: 6 pairs, 2 repetitions" in result.stderr and "cut@ib: 6 pairs" in result.stderr


@pytest.mark.parametrize("network, said", [("ib", "NAME=TEMPLATE"), ("ib={node}`reboot`", "template")])
def test_a_network_that_is_not_a_name_and_template_is_refused(scripted, tmp_path, network, said):
    from support.clusters.pairs import PairCluster

    cluster = scripted(PairCluster(), GPUS[:4])
    result = invoke("pairs", "--patterns", "sort", *SIZE_OPTION, "--network", network, "--db", tmp_path / "p.duckdb")
    assert result.exit_code == 2 and said in result.text and cluster.rounds == []
    mpi = invoke("pairs", "--kernel", "mpi", "--network", "ib={node}-ib", "--db", tmp_path / "p.duckdb")
    assert mpi.exit_code == 2 and "TCP kernel" in mpi.text


@pytest.mark.slow
def test_pairs_without_json_prints_no_document(scripted, tmp_path):
    from support.clusters.pairs import PairCluster

    scripted(PairCluster(), GPUS[:4])
    result = invoke("pairs", "--patterns", "sort", "-r", 1, *SIZE_OPTION, "--db", tmp_path / "p.duckdb")
    assert result.exit_code == 0 and "Pair patterns" in result.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


@pytest.mark.slow
def test_bisection_json_has_the_figures_and_each_cut_pair(scripted, tmp_path):
    from support.clusters.bisection import BisectionCluster as SwitchCluster

    scripted(SwitchCluster(link=1000.0, capacity=2000.0), CN)
    result = invoke("bisection", "-r", 2, "--message-size", 65536, "--seconds", 0.3, "--json",
                    "--db", tmp_path / "b.duckdb")
    document = parsed(result)
    assert "demonstrated 2000 MB/s" in " ".join(result.stderr.split())
    assert "demonstrated" not in result.stdout.split('"bisection"')[0]
    assert document["command"] == "bisection" and document["findings"] == []
    run = document["runs"]["bisection"]
    assert run["repetitions"] == 2 and run["message_size"] == 65536 and run["nodes"] == "cn-a[11-18]"
    assert run["pairs"] == ["cn-a11-cn-a15", "cn-a12-cn-a16", "cn-a13-cn-a17", "cn-a14-cn-a18"]
    assert run["per_pair"]["cn-a11-cn-a15"] == {"ok": 4, "invalid": 0, "failed": 0}
    assert run["sums"] == [pytest.approx(2000.0)] * 2
    table = document["bisection"]
    assert table["demonstrated"] == pytest.approx(2000.0) and table["full"] == pytest.approx(4000.0)
    assert table["single_pair"] == pytest.approx(1000.0) and table["fraction"] == pytest.approx(0.5)
    assert table["pairs"] == 4 and table["unit"] == "MB/s"
    assert {p["pair"]: (p["concurrent"], p["alone"]) for p in table["cut_pairs"]} == {
        label: (pytest.approx(500.0), pytest.approx(1000.0)) for label in run["pairs"]}


@pytest.mark.slow
def test_bisection_json_says_null_when_no_repetition_streamed_every_pair(scripted, tmp_path):
    from support.clusters.bisection import BisectionCluster as SwitchCluster

    scripted(SwitchCluster(down={"cn-a16"}), CN[:7])
    document = parsed(invoke("bisection", "-r", 1, "--message-size", 65536, "--seconds", 0.3, "--json",
                             "--db", tmp_path / "b.duckdb"), status=1)  # a pair failed: that is the problem
    table = document["bisection"]
    assert table["demonstrated"] is None and table["fraction"] is None and table["sums"] == [None]
    assert document["runs"]["bisection"]["per_pair"]["cn-a13-cn-a16"]["failed"] == 2
    assert "cn-a17 sits out" in document["runs"]["bisection"]["notes"][0]


@pytest.mark.slow
def test_matrix_json_has_the_matrix_in_node_order_the_verdicts_and_the_slow_link(scripted, tmp_path):
    from support.clusters.matrix import MatrixCluster

    scripted(MatrixCluster(bad=[("cn-a12", "cn-a15")]), CN)
    topology = tmp_path / "topology"
    topology.write_text("leaf1 cn-a[11-14]\nleaf2 cn-a[15-18]\n")
    db = tmp_path / "m.duckdb"
    result = invoke("matrix", *SIZE_OPTION, "--topology", topology, "--json", "--db", db)
    document = parsed(result)
    assert "56 ordered pairs in 14 rounds" in " ".join(result.stderr.split())
    run = document["runs"]["matrix"]
    assert run["rounds"] == 14 and run["metric"] == "bandwidth.65536" and len(run["values"]) == 56
    assert run["verdicts"] == {"cn-a12-cn-a15": "bad-link", "cn-a15-cn-a12": "bad-link"}
    assert run["retests"] and all(len(r["pairs"]) <= r["concurrency"] for r in run["retests"])
    table = document["matrix"]
    assert table["nodes"] == CN and table["bandwidth_metric"] == "bandwidth.65536"
    assert table["latency_metric"] == "latency.0" and table["bandwidth_unit"] == "MB/s"
    assert table["limit"] == pytest.approx(run["limit"]) and table["verdicts"] == run["verdicts"]
    bandwidth, latency = table["bandwidth"], table["latency"]
    assert len(bandwidth) == 8 and all(len(row) == 8 for row in bandwidth)
    assert all(bandwidth[i][i] is None and latency[i][i] is None for i in range(8))
    stored = best(db, "pingpong.matrix", "bandwidth.65536")
    stored_latency = best(db, "pingpong.matrix", "latency.0")
    for i, a in enumerate(CN):
        for j, b in enumerate(CN):
            if a != b:
                assert bandwidth[i][j] == pytest.approx(stored[f"{a}-{b}"])
                assert latency[i][j] == pytest.approx(stored_latency[f"{a}-{b}"])
    # The bad link is a tenth of its row's others.
    assert bandwidth[1][4] < statistics.median(v for v in bandwidth[1] if v is not None) / 5
    (slow,) = [f for f in document["findings"] if f["kind"] == "slow-link"]
    assert slow["nodes"] == "cn-a[12,15]" and slow["severity"] == "warning"


@pytest.mark.slow
def test_matrix_json_says_null_when_no_pair_gave_a_bandwidth(scripted, tmp_path):
    from support.clusters.matrix import MatrixCluster

    scripted(MatrixCluster(down=set(CN)), CN)
    result = invoke("matrix", *SIZE_OPTION, "--json", "--db", tmp_path / "m.duckdb")
    document = json.loads(result.stdout)  # the schema check every test makes holds it to the matrix document
    assert document["matrix"] is None
    run = document["runs"]["matrix"]
    assert run["values"] == {} and run["limit"] is None
    assert run["per_pair"] and all(counts["failed"] == 1 for counts in run["per_pair"].values())
    assert result.exit_code == 1  # failed pairs are a problem found, as in bisection


@pytest.mark.slow
def test_chain_json_has_every_length_and_where_the_switch_stops_scaling(scripted, tmp_path):
    from support.clusters.switchbench import PORT, SwitchCluster

    scripted(SwitchCluster(), GPUS[:8])
    result = invoke("switchbench", "chain", "-r", 2, "--message-size", 65536, "--seconds", 0.3, "--port", PORT,
                    "--json", "--db", tmp_path / "c.duckdb")
    document = parsed(result)
    assert "stops scaling at k = 6" in " ".join(result.stderr.split()) and "Daisy chain" not in result.output
    assert document["command"] == "switchbench chain"
    assert [(f["kind"], f["severity"]) for f in document["findings"]] == [("switch-saturation", "warning")]
    run = document["runs"]["chain"]
    assert run["repetitions"] == 2 and run["message_size"] == 65536 and run["saturation"] == 6
    assert len(run["points"]) == 14 and {p["repetition"] for p in run["points"]} == {1, 2}
    assert run["best_aggregate"] == {str(k): pytest.approx(min(1000.0 * (k - 1), 4000.0)) for k in range(2, 9)}
    table = document["chain"]
    assert table["saturation"] == 6 and table["hop_rate"] == pytest.approx(1000.0)
    rows = {row["length"]: row for row in table["lengths"]}
    assert sorted(rows) == list(range(2, 9))
    assert rows[6]["joined"] == "gpu008" and rows[6]["nodes"] == GPUS[:6]
    assert rows[6]["aggregate"] == pytest.approx(4000.0) and rows[6]["end_to_end"] == pytest.approx(800.0)
    assert rows[2]["gain_hops"] is None and rows[3]["gain_hops"] == pytest.approx(1.0)
    assert rows[6]["gain_hops"] == pytest.approx(0.0) and rows[6]["problem"] is None


@pytest.mark.slow
def test_stream_json_has_each_patterns_pairs_slowest_first_and_the_weak_node(scripted, tmp_path):
    from support.clusters.switchbench import PORT, SwitchCluster

    scripted(SwitchCluster(weak="gpu007"), GPUS)
    result = invoke("switchbench", "stream", "--patterns", "sort,cut,fold", "-r", 1, "--message-size", 65536,
                    "--seconds", 0.3, "--port", PORT, "--json", "--db", tmp_path / "s.duckdb")
    document = parsed(result)
    assert "Pairwise streaming" not in result.output and "sort" in result.stderr
    assert list(document["runs"]) == ["sort", "cut", "fold"]
    sort = document["runs"]["sort"]
    assert sort["repetitions"] == 1 and sort["message_size"] == 65536
    assert sort["per_pair"]["gpu007-gpu008"] == {"ok": 1, "invalid": 0, "failed": 0}
    rate = next(r for r in sort["rates"] if r["pair"] == "gpu007-gpu008")
    assert rate["client"] == "gpu007" and rate["server"] == "gpu008" and rate["valid"]
    assert rate["total"] == pytest.approx(rate["client_to_server"] + rate["server_to_client"])
    streams = {s["pattern"]: s for s in document["streams"]}
    table = streams["sort"]
    assert table["pairs"][0]["pair"] == "gpu007-gpu008" and table["pairs"][0]["percent_of_median"] < 20
    totals = [p["total"] for p in table["pairs"]]
    assert totals == sorted(totals) and len(totals) == 6
    assert table["median_total"] == pytest.approx(statistics.median(totals))
    assert table["pairs"][0]["total"] == pytest.approx(rate["total"])
    assert [f["nodes"] for f in document["findings"] if f["kind"] == "weak-pair-member"] == ["gpu007"]


@pytest.mark.slow
def test_alltoall_json_has_the_phases_and_the_slowest_receiver(scripted, tmp_path):
    from support.clusters.switchbench import PORT, SwitchCluster

    scripted(SwitchCluster(slow="gpu005"), GPUS[:4])
    result = invoke("switchbench", "alltoall", "-r", 2, "--message-size", 100000, "--port", PORT, "--seed", 5,
                    "--json", "--db", tmp_path / "a.duckdb")
    document = parsed(result)
    assert "slowest receiver gpu005" in " ".join(result.stderr.split())
    run = document["runs"]["alltoall"]
    assert run["repetitions"] == 2 and run["seed"] == 5 and run["nodes"] == GPUS[:4]
    assert run["message_size"] == 100000 and set(run["per_node"]) == set(GPUS[:4])
    assert all(counts["ok"] == 2 for counts in run["per_node"].values())
    assert [r["repetition"] for r in run["per_repetition"]] == [1, 2]
    assert all(r["valid"] and len(r["phases"]) == 3 for r in run["per_repetition"])
    table = document["alltoall"]
    total = 3 * 1e-6 * 100000 / 500.0
    assert table["total_seconds"] == pytest.approx(total) and table["aggregate_bandwidth"] == pytest.approx(2000.0)
    assert [p["phase"] for p in table["phases"]] == [1, 2, 3]
    assert all(p["slowest_receiver"] == "gpu005" for p in table["phases"])
    assert [p["phase"] for p in table["phase_min_bandwidth"]] == [1, 2, 3]
    assert table["charged_nodes"] == [] and table["problems"] == []


@pytest.mark.slow
def test_alltoall_json_without_a_valid_repetition_charges_the_node(scripted, tmp_path):
    from support.clusters.switchbench import PORT, SwitchCluster

    scripted(SwitchCluster(down={"gpu004"}), GPUS[:4])
    result = invoke("switchbench", "alltoall", "-r", 1, "--message-size", 100000, "--port", PORT, "--json",
                    "--db", tmp_path / "a.duckdb")
    document = parsed(result, status=1)  # the charged node is the problem found
    assert "no repetition in which every node ran" in " ".join(result.stderr.split())
    table = document["alltoall"]
    assert table["charged_nodes"] == ["gpu004"] and table["total_seconds"] is None and table["phases"] == []
    assert table["problems"] and any("unreachable" in p for p in table["problems"])
    (repetition,) = document["runs"]["alltoall"]["per_repetition"]
    assert repetition["valid"] is False and repetition["phases"] == []


@pytest.mark.slow
def test_pairs_with_a_failed_pair_exit_1_and_with_no_pair_at_all_3(scripted, tmp_path):
    """As bisection and the matrix: a pair whose node never answered is a
    problem found even when no finding names it; nothing measured at all is
    a run that could not be made."""
    from support.clusters.pairs import PairCluster

    scripted(PairCluster(down={"gpu006"}), GPUS)
    result = invoke("pairs", "--patterns", "sort", "-r", 1, *SIZE_OPTION, "--json", "--db", tmp_path / "p.duckdb")
    document = parsed(result, status=1)
    assert document["runs"]["sort"]["per_pair"]["gpu005-gpu006"] == {"ok": 0, "invalid": 0, "failed": 1}
    assert document["runs"]["sort"]["per_pair"]["gpu003-gpu004"] == {"ok": 1, "invalid": 0, "failed": 0}
    scripted(PairCluster(down=set(GPUS)), GPUS)
    result = invoke("pairs", "--patterns", "sort", "-r", 1, *SIZE_OPTION, "--db", tmp_path / "q.duckdb")
    assert result.exit_code == 3 and "no pair gave a result" in result.text, result.output
