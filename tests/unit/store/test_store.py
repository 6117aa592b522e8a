import duckdb
import numpy as np
import pytest

from oddnode.core.model import Direction, LabelKind
from oddnode.store import SCHEMA_VERSION, ResultBatch, StoreError, open_store


def _batch(rows):
    batch = ResultBatch()
    for benchmark, label, value, kwargs in rows:
        batch.add(benchmark, label, value, **kwargs)
    return batch


def test_best_per_label_is_max_or_min_by_direction(store):
    rng = np.random.default_rng(3)
    values = rng.normal(100, 5, size=(6, 4))
    rows = []
    for node in range(6):
        for rep in range(4):
            rows.append(("bw", f"n{node}", values[node, rep], {"repetition": rep}))
            rows.append(("lat", f"n{node}", values[node, rep], {"repetition": rep, "direction": Direction.LOWER}))
    with store.transaction():
        store.add_results(store.new_run("test"), _batch(rows))
    series = {s.benchmark: s for s in store.load_series()}
    assert list(series["bw"].labels) == [f"n{i}" for i in range(6)]
    np.testing.assert_array_equal(series["bw"].values, values.max(axis=1))
    np.testing.assert_array_equal(series["lat"].values, values.min(axis=1))
    assert series["lat"].direction is Direction.LOWER
    assert list(series["bw"].repetitions) == [4] * 6


def test_invalid_repetitions_are_kept_but_never_best(store):
    rows = [("hpl", "n1", 10.0, {"repetition": 1}), ("hpl", "n1", 99.0, {"repetition": 2, "valid": False}),
            ("hpl", "n2", None, {"repetition": 1, "valid": False})]
    with store.transaction():
        store.add_results(store.new_run("test"), _batch(rows))
    (hpl,) = store.load_series()
    assert list(hpl.labels) == ["n1"] and list(hpl.values) == [10.0]
    failures = store.load_failures()
    assert [(f.label, f.repetition) for f in failures] == [("n1", 2), ("n2", 1)]
    assert store.con.execute("SELECT count(*) FROM results").fetchone()[0] == 3


def test_a_rerun_of_one_node_replaces_its_result_and_no_other(store):
    with store.transaction():
        store.add_results(store.new_run("first"), _batch([("s", "n1", 1.0, {}), ("s", "n2", 2.0, {})]))
    with store.transaction():
        store.add_results(store.new_run("second"), _batch([("s", "n1", 5.0, {})]))
    (s,) = store.load_series()
    assert list(s.labels) == ["n1", "n2"] and list(s.values) == [5.0, 2.0]
    assert store.load_failures() == []


def test_a_node_whose_rerun_failed_has_no_result_but_its_failure(store):
    with store.transaction():
        store.add_results(store.new_run("first"), _batch([("s", "n1", 1.0, {}), ("s", "n2", 2.0, {})]))
    with store.transaction():
        store.add_results(store.new_run("second"), _batch([("s", "n1", None, {"repetition": 1, "valid": False})]))
    (s,) = store.load_series()
    assert list(s.labels) == ["n2"]
    assert [(f.label, f.repetition) for f in store.load_failures()] == [("n1", 1)]
    # ... until it runs again.
    with store.transaction():
        store.add_results(store.new_run("third"), _batch([("s", "n1", 3.0, {})]))
    (s,) = store.load_series()
    assert list(s.labels) == ["n1", "n2"] and list(s.values) == [3.0, 2.0] and store.load_failures() == []


def test_failed_write_leaves_store_as_it_was(store):
    with store.transaction():
        store.add_results(store.new_run("ok"), _batch([("s", "n1", 1.0, {})]))
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.add_results(store.new_run("broken"), _batch([("s", "n1", 7.0, {})]))
            raise RuntimeError("import failed half way")
    assert len(store.runs()) == 1
    (s,) = store.load_series()
    assert list(s.values) == [1.0]


def test_facts_latest_value_wins_and_topology_is_latest_map(store):
    with store.transaction():
        run = store.new_run("a")
        store.add_facts(run, [("n1", "bios", "1.0"), ("n2", "bios", "1.0")])
        store.set_topology(run, {"n1": "rack1", "n2": "rack1"})
    with store.transaction():
        run = store.new_run("b")
        store.add_facts(run, [("n2", "bios", "1.1")])
        store.set_topology(run, {"n1": "rack2"})
    assert store.load_facts() == {"bios": {"n1": "1.0", "n2": "1.1"}}
    assert store.load_topology() == {"n1": "rack2"}


def test_a_fact_a_node_no_longer_reports_is_gone(store):
    with store.transaction():
        store.add_facts(store.new_run("a"), [("n1", "process.httpd", "running"), ("n1", "kernel", "6.1")])
    with store.transaction():
        store.add_facts(store.new_run("b"), [("n1", "kernel", "6.1")])
    assert store.load_facts() == {"kernel": {"n1": "6.1"}}


def test_pair_labels_name_their_members(store):
    with store.transaction():
        store.add_results(store.new_run("t"), _batch([
            ("pp", "cn-001-cn-002", None, {"valid": False, "label_kind": LabelKind.PAIR, "repetition": 1})]))
    (failure,) = store.load_failures()
    assert failure.members == ("cn-001", "cn-002")


def test_schema_version_recorded_and_newer_store_refused(tmp_path):
    path = tmp_path / "s.duckdb"
    open_store(path).close()
    con = duckdb.connect(str(path))
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    con.execute("UPDATE meta SET value = ? WHERE key='schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    with pytest.raises(StoreError, match="newer than this oddnode"):
        open_store(path)


def test_foreign_duckdb_file_and_missing_store_refused(tmp_path):
    foreign = tmp_path / "other.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE t (x INT)")
    con.close()
    with pytest.raises(StoreError, match="not an oddnode results store"):
        open_store(foreign)
    with pytest.raises(StoreError, match="no results store"):
        open_store(tmp_path / "absent.duckdb", read_only=True)


def test_version_1_store_is_upgraded_in_place_even_when_opened_read_only(tmp_path):
    from oddnode.store import _SCHEMA_V1

    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    con.execute(_SCHEMA_V1)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO results VALUES (1, 'b', 'value', '', 'higher', 'n1', 'node', 1, 2.0, true, NULL, NULL)")
    con.close()
    with open_store(path, read_only=True) as store:
        assert store.con.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
        assert store.load_node_status() == {}
        assert store.con.execute("SELECT count(*) FROM results").fetchone()[0] == 1


def test_node_status_keeps_the_latest_trouble_per_stage(store):
    with store.transaction():
        run = store.new_run("check")
        store.add_node_status(run, "inventory", [("n1", "ok", None), ("n2", "unreachable", "Connection refused")])
    assert {n: s.status for n, s in store.load_node_status().items()} == {"n2": "unreachable"}
    with store.transaction():
        run = store.new_run("check")
        store.add_node_status(run, "inventory", [("n1", "timeout", "cut at 30 s"), ("n2", "ok", None)])
    trouble = store.load_node_status()
    assert list(trouble) == ["n1"] and trouble["n1"].detail == "cut at 30 s"


def test_spread_is_the_span_of_a_labels_repetitions_relative_to_its_larger_end(store):
    rows = [("fft", "n1", v, {"repetition": r}) for r, v in enumerate([7.4, 1.0, 1.04], 1)]
    rows += [("fft", "n2", 1.0, {"repetition": 1}), ("fft", "n3", -2.0, {"repetition": 1}),
             ("fft", "n3", -1.0, {"repetition": 2})]
    rows += [("plot", "n1", 3.0, {}), ("plot", "n2", 4.0, {})]  # no repetition numbers: no spread
    with store.transaction():
        store.add_results(store.new_run("test"), _batch(rows))
    series = {s.benchmark: s for s in store.load_series()}
    np.testing.assert_allclose(series["fft"].spread[[0, 2]], [(7.4 - 1.0) / 7.4, 0.5])
    assert np.isnan(series["fft"].spread[1])  # one repetition
    assert series["plot"].spread is None


def test_a_whole_series_copied_as_best_equals_the_grouped_best(store):
    rows = [(f"b{b}", f"n{i:02d}", float(i * b), {}) for b in range(3) for i in range(12)]
    rows += [("b1", "n99", None, {"valid": False})]
    with store.transaction():
        store.add_results(store.new_run("grouped"), _batch(rows))
    grouped = store.load_series()
    with store.transaction():
        store.add_results(store.new_run("copied"), _batch(rows), whole_series=True)
    copied = store.load_series()
    assert [s.name for s in copied] == [s.name for s in grouped]
    for a, b in zip(grouped, copied):
        assert list(a.labels) == list(b.labels) and list(a.repetitions) == list(b.repetitions)
        np.testing.assert_array_equal(a.values, b.values)
        assert a.spread is None and b.spread is None
    # The copy superseded the grouped run's best rows instead of adding to them.
    assert store.con.execute("SELECT count(*), min(run_id) FROM best").fetchall() == [(36, 2)]


def test_series_on_the_same_labels_share_one_label_array(store):
    rows = [(b, f"n{i}", float(i), {}) for b in ("x", "y") for i in range(5)] + [("z", "n1", 1.0, {})]
    with store.transaction():
        store.add_results(store.new_run("test"), _batch(rows))
    x, y, z = store.load_series()
    assert x.labels is y.labels and list(z.labels) == ["n1"]


def test_declared_nodes_are_the_union_of_every_runs_list_in_first_declared_order(store):
    with store.transaction():
        store.new_run("oddnode check -w r01n02,r01n01", nodes=["r01n02", "r01n01"])
        store.new_run("no list")
        store.new_run("oddnode pairs", nodes=["r01n01", "r02n01", "r01n02"])
    assert store.load_declared_nodes() == ["r01n02", "r01n01", "r02n01"]
    assert store.load_dataset().declared_nodes == ["r01n02", "r01n01", "r02n01"]
    assert store.con.execute("SELECT position, node FROM run_nodes WHERE run_id = 3 ORDER BY position").fetchall() \
        == [(1, "r01n01"), (2, "r02n01"), (3, "r01n02")]


def test_a_run_over_a_target_records_its_nodes_in_the_given_order(store):
    from oddnode.measure.runner import new_target_run
    from oddnode.reach.base import Target
    from oddnode.reach.local import LocalTransport

    new_target_run(store, Target(["cn-10", "cn-9", "cn-100"], LocalTransport()), "oddnode memory")
    assert store.load_declared_nodes() == ["cn-10", "cn-9", "cn-100"]


def test_a_node_rerun_alone_answers_for_itself_only(store):
    with store.transaction():
        run = store.new_run("first")
        store.add_node_status(run, "memory", [("n1", "ok", None), ("n2", "unreachable", "no route"),
                                              ("n3", "timeout", "cut at 60 s")])
    with store.transaction():
        store.add_node_status(store.new_run("rerun"), "memory", [("n2", "ok", None)])
    assert {node: trouble.status for node, trouble in store.load_node_status().items()} == {"n3": "timeout"}


def test_sets_and_their_details_accumulate_set_by_set(store):
    def sets(run, rows):
        batch = ResultBatch()
        for label, value in rows:
            batch.add("sets.chain", label, value, label_kind=LabelKind.SET, repetition=1)
        store.add_results(run, batch)

    with store.transaction():
        sets(store.new_run("first"), [("n[1-2]", 10.0), ("n[3-4]", 5.0)])
    with store.transaction():
        sets(store.new_run("again"), [("n[3-4]", 11.0)])
    (runs,) = store.load_set_runs()
    assert dict(zip(runs.labels.tolist(), runs.values.tolist())) == {"n[1-2]": 10.0, "n[3-4]": 11.0}


def test_an_import_of_one_node_replaces_that_node_in_a_whole_imported_series(store, tmp_path):
    from oddnode.store.stab import import_stab

    first, rerun = tmp_path / "first", tmp_path / "rerun"
    first.mkdir()
    rerun.mkdir()
    (first / "plot.triad").write_text("100 cn-001\n60 cn-002\n101 cn-003\n")
    (rerun / "plot.triad").write_text("99 cn-002\n")
    import_stab(store, [first])
    import_stab(store, [rerun])
    (triad,) = store.load_series()
    assert dict(zip(triad.labels.tolist(), triad.values.tolist())) == {"cn-001": 100.0, "cn-002": 99.0,
                                                                       "cn-003": 101.0}
    history = store.node_history("cn-002")
    (series,) = history.series
    assert [run.value for run in series.runs] == [60.0, 99.0] and series.median_now == 100.0
    assert series.relative(60.0) == pytest.approx(-40.0)


def test_process_parents_are_stored_and_an_older_store_gains_their_column(tmp_path):
    from oddnode.core.model import CommandCount, NodeProcesses

    counted = NodeProcesses("cn-01", 20.0, "acct", {"sed": CommandCount(40, 0.2, 0.4, 4, ("sh", "cron"))})
    path = tmp_path / "p.duckdb"
    with open_store(path) as store, store.transaction():
        store.add_process_counts(store.new_run("oddnode processes"), [counted])
    with open_store(path) as store:
        assert store.load_processes()["cn-01"].commands["sed"].parents == ("sh", "cron")
    con = duckdb.connect(str(path))  # as schema 8 left it: no parents
    con.execute("ALTER TABLE process_counts DROP COLUMN parents")
    con.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    con.close()
    with open_store(path) as store:
        assert store.load_processes()["cn-01"].commands["sed"].parents == ()
        assert store.con.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)


def test_series_come_in_natural_order_message_sizes_as_numbers(store):
    batch = ResultBatch()
    for size in (1, 1024, 1048576, 128, 0):
        for node in ("cn-a17", "cn-a9"):
            batch.add("osu_latency", node, 2.0, metric=f"latency.{size}", unit="us", direction=Direction.LOWER)
    batch.add("hpl10", "cn-a9", 1.0, unit="GFLOP/s")
    batch.add("hpl9", "cn-a9", 1.0, unit="GFLOP/s")
    store.add_results(store.new_run("import", nodes=["cn-a17", "cn-a9"]), batch)
    assert [s.name for s in store.load_series()] == [
        "hpl9", "hpl10", *(f"osu_latency:latency.{size}" for size in (0, 1, 128, 1024, 1048576))]


@pytest.mark.slow
def test_affinity_samples_are_kept_per_node_and_an_older_store_gains_their_table(tmp_path):
    from support.affinity import bound_ranks, report

    path = tmp_path / "a.duckdb"
    with open_store(path) as store, store.transaction():
        store.add_affinity_samples(store.new_run("oddnode affinity"), {"cn-01": report(bound_ranks([0]))})
    con = duckdb.connect(str(path))  # as schema 9 left it: no affinity samples
    con.execute("DROP TABLE affinity_samples")
    con.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    con.close()
    with open_store(path) as store:
        assert store.load_affinity_samples() == {}
        with store.transaction():
            first = store.new_run("oddnode affinity")
            store.add_affinity_samples(first, {n: report(bound_ranks([0])) for n in ("cn-01", "cn-02")})
            store.add_affinity_samples(store.new_run("oddnode affinity -w cn-02"), {"cn-02": report(bound_ranks([1]))})
        samples = store.load_affinity_samples()
        assert store.con.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
    assert sorted(samples) == ["cn-01", "cn-02"]
    assert samples["cn-02"]["processes"][0]["threads"][0]["runs"] == [[1, 100]]
    assert samples["cn-01"]["processes"][0]["threads"][0]["runs"] == [[0, 100]]
