import json

import pytest

from support.cli import write
from oddnode.store.exports import ExportError, export_plot_files, export_tables
from oddnode.store.stab import InputError, import_stab, parse_failed_run
from oddnode.core.model import Direction, LabelKind
from oddnode.store import SCHEMA_VERSION


def _directory(tmp_path):
    d = tmp_path / "results"
    write(d / "plot.c.ppc64", "# STREAM C triad best per node\n2077.5 node001\n2069.0 node002 extra columns\n"
          "\n2031.4 node003\n")
    write(d / "plot.spp.sort.bw.4194304", "232.1 node001-node002\n87.6 node003-node004\n")
    write(d / "plot.lat", "5.1 node001\n5.3 node002\n")
    write(d / "units.csv", "benchmark,unit,direction\nc.ppc64,MB/s,higher\nspp.sort.bw.4194304,MB/s,higher\n"
          "lat,usec,lower\nxhpl.ppc64,GFLOP/s,higher\n")
    write(d / "inventory.csv", "node,key,value\nnode001,bios_date,10/21/2004\nnode002,bios_date,09/02/2004\n")
    write(d / "topology.csv", "node,group\nnode001,bc01\nnode002,bc01\nnode003,bc02\nnode004,bc02\n")
    write(d / "failed", "xhpl.ppc64.node483.3\n# comment\nxhpl.ppc64.node483.10\nbt.B.ppc64.node003.1\n")
    write(d / "notes.txt", "free text\n")
    return d


def test_directory_import_reads_every_file(store, tmp_path):
    summary = import_stab(store, [_directory(tmp_path)])
    assert summary.benchmarks == 5 and summary.results == 7 and summary.failures == 3
    assert summary.facts == 2 and summary.topology_nodes == 4
    assert summary.ignored == (str(tmp_path / "results" / "notes.txt"),)
    series = {s.benchmark: s for s in store.load_series()}
    c = series["c.ppc64"]
    assert (c.unit, c.direction, c.label_kind) == ("MB/s", Direction.HIGHER, LabelKind.NODE)
    assert list(c.labels) == ["node001", "node002", "node003"]
    assert list(c.values) == [2077.5, 2069.0, 2031.4]
    assert series["lat"].unit == "us" and series["lat"].direction is Direction.LOWER
    assert series["spp.sort.bw.4194304"].label_kind is LabelKind.PAIR
    failures = store.load_failures()
    assert {(f.benchmark, f.label, f.repetition) for f in failures} == {
        ("xhpl.ppc64", "node483", 3), ("xhpl.ppc64", "node483", 10), ("bt.B.ppc64", "node003", 1)}
    assert store.load_facts()["bios_date"]["node002"] == "09/02/2004"
    assert store.load_topology()["node004"] == "bc02"


def test_failed_run_names_keep_the_arch_in_the_benchmark():
    run = parse_failed_run("bt.B.ppc64.node483.4")
    assert (run.benchmark, run.arch, run.label, run.run) == ("bt.B.ppc64", "ppc64", "node483", 4)
    with pytest.raises(ValueError, match="benchmark.arch.node.run"):
        parse_failed_run("xhpl.node483.3")
    with pytest.raises(ValueError, match="not a whole number"):
        parse_failed_run("xhpl.ppc64.node483.x")


def test_single_file_with_benchmark_name_and_unit(store, tmp_path):
    f = write(tmp_path / "triad.txt", "100 n1\n101 n2\n")
    import_stab(store, [f], benchmark="triad", unit="GB/s")
    (s,) = store.load_series()
    assert (s.benchmark, s.unit) == ("triad", "GB/s")


def test_repeated_labels_as_repetitions(store, tmp_path):
    f = write(tmp_path / "plot.hpl", "10 n1\n12 n1\n11 n2\n")
    with pytest.raises(InputError, match=r"plot.hpl:2: label n1 repeated \(first on line 1\)"):
        import_stab(store, [f])
    import_stab(store, [f], repetitions=True)
    (s,) = store.load_series()
    assert list(s.values) == [12.0, 11.0] and list(s.repetitions) == [2, 1]


@pytest.mark.parametrize("name, text, message", [
    ("plot.a", "2077 node1\nabc node2\n", r"plot.a:2: value 'abc' is not a number"),
    ("plot.a", "2077 node1\nnan node2\n", r"plot.a:2: value 'nan' is not finite"),
    ("plot.a", "inf node2\n", r"plot.a:1: value 'inf' is not finite"),
    ("plot.a", "# only a comment\n\n", r"plot.a: no results"),
    ("plot.a", "", r"plot.a: no results"),
    ("plot.a", "1 node1\n2\n", r"plot.a:2: no label"),
    ("plot.a", "1 node;rm\n", r"plot.a:1: invalid node name"),
    ("plot.a", "1 node[1-\n", r"plot.a:1: invalid node set"),
    ("units.csv", "benchmark,unit,direction\na,furlongs,higher\n", r"units.csv:2: unknown unit 'furlongs'"),
    ("units.csv", "a,MB/s,sideways\n", r"units.csv:1: direction 'sideways'"),
    ("units.csv", "a,MB/s\n", r"units.csv:1: expected 3 columns"),
    ("inventory.csv", "node,key,value\nn1,bios,1\nn1,bios,2\n", r"inventory.csv:3: n1 bios given twice"),
    ("inventory.csv", "bad node,bios,1\n", r"inventory.csv:1: invalid node name"),
    ("topology.csv", "n1,rack1\nn1,rack2\n", r"topology.csv:2: n1 placed in a group twice"),
    ("failed", "xhpl.ppc64.node483.3\nbogus\n", r"failed:2: 'bogus' is not benchmark.arch.node.run"),
])
@pytest.mark.slow
def test_bad_input_names_file_and_line_and_writes_nothing(store, tmp_path, name, text, message):
    d = tmp_path / "results"
    write(d / "plot.good", "1.0 n1\n2.0 n2\n")
    write(d / name, text)
    with pytest.raises(InputError, match=message):
        import_stab(store, [d])
    assert store.runs() == []
    assert store.con.execute("SELECT count(*) FROM results").fetchone()[0] == 0


def test_binary_file_and_empty_directory_and_missing_path(store, tmp_path):
    binary = tmp_path / "plot.bin"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputError, match="not a text file"):
        import_stab(store, [binary])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="nothing to import"):
        import_stab(store, [empty])
    with pytest.raises(InputError, match="no such file"):
        import_stab(store, [tmp_path / "absent"])


@pytest.mark.slow
def test_plot_export_round_trip(store, tmp_path, tmp_path_factory):
    import_stab(store, [_directory(tmp_path)])
    out = tmp_path / "exported"
    written = export_plot_files(store, out)
    assert (out / "plot.c.ppc64").read_text().splitlines()[1:] == [
        "2031.4 node003", "2069.0 node002", "2077.5 node001"]
    from oddnode.store import open_store
    with open_store(tmp_path_factory.mktemp("again") / "s.duckdb") as again:
        import_stab(again, [out])
        before = {s.name: (list(s.labels), list(s.values), s.unit, s.direction) for s in store.load_series()}
        after = {s.name: (list(s.labels), list(s.values), s.unit, s.direction) for s in again.load_series()}
    assert after == before
    assert len(written) == len(before) + 1
    with pytest.raises(ExportError, match="no results for nosuch"):
        export_plot_files(store, out, ["nosuch"])


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_table_export_has_every_table(store, tmp_path, fmt):
    import_stab(store, [_directory(tmp_path)])
    out = tmp_path / fmt
    export_tables(store, out, fmt)
    import duckdb
    con = duckdb.connect()
    reader = {"csv": "read_csv_auto", "parquet": "read_parquet", "json": "read_json_auto"}[fmt]
    n = con.execute(f"SELECT count(*) FROM {reader}('{out / ('results.' + fmt)}')").fetchone()[0]
    assert n == 10  # 7 values + 3 failed runs
    facts = con.execute(f"SELECT count(*) FROM {reader}('{out / ('facts.' + fmt)}')").fetchone()[0]
    assert facts == 2
    declared = con.execute(f"SELECT count(*) FROM {reader}('{out / ('run_nodes.' + fmt)}')").fetchone()[0]
    assert declared == store.con.execute("SELECT count(*) FROM run_nodes").fetchall()[0][0] > 0
    assert json.loads((out / "schema.json").read_text())["schema_version"] == SCHEMA_VERSION
    # Every table of the store, none left out (sweeps, process accounting,
    # profiles); the meta table's schema version is schema.json's.
    tables = {name for (name,) in store.con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()} - {"meta"}
    assert {path.name.removesuffix(f".{fmt}") for path in out.glob(f"*.{fmt}")} - {"schema"} == tables
    with pytest.raises(ExportError, match="unknown export format"):
        export_tables(store, out, "xml")


def test_json_export_holds_no_nan_or_infinity(store, tmp_path):
    from oddnode.store import ResultBatch

    batch = ResultBatch()
    batch.add("memory", "node01", float("inf"))
    batch.add("memory", "node02", 5.0)
    with store.transaction():
        store.add_results(store.new_run("test"), batch)
    export_tables(store, tmp_path / "out", "json")
    text = (tmp_path / "out" / "results.json").read_text()
    assert sorted((row["value"] is None, row["valid"]) for row in json.loads(text)) == [(False, True), (True, False)]
    assert "Infinity" not in text and "NaN" not in text


def test_nodes_file_is_the_declared_node_list_in_its_order(store, tmp_path):
    d = tmp_path / "results"
    write(d / "plot.triad", "1.0 cn-0003\n2.0 cn-0001\n")
    write(d / "topology.csv", "cn-0001,leaf1\ncn-0009,leaf2\n")
    # A host file's slots, a folded set, comments and a node listed twice.
    write(d / "nodes", "# compute partition\ncn-0003 slots=64\ncn-[0001-0002]  # rack 1\n\ncn-0003\n")
    summary = import_stab(store, [d])
    assert summary.declared_nodes == 4
    assert store.load_declared_nodes() == ["cn-0003", "cn-0001", "cn-0002", "cn-0009"]


def test_bad_node_list_entry_names_file_and_line(store, tmp_path):
    d = tmp_path / "results"
    write(d / "plot.triad", "1.0 n1\n")
    write(d / "nodes", "n1\nn[2-\n")
    with pytest.raises(InputError, match=r"nodes:2: invalid node set"):
        import_stab(store, [d])
    assert store.runs() == []


MESSY = ("# value\thost\tjob\r\n"
         "  2077.5\t\tnode001   12345  2026-11-01\r\n"
         "\r\n"
         "2069.0 node002\r\n"
         "# a comment between results\r\n"
         "1.5e3    node003 \r\n")


@pytest.mark.parametrize("text", [MESSY, MESSY.replace("\r\n", "\n"), MESSY.replace("node002", "nöde002")])
def test_bulk_parse_reads_what_the_line_reader_reads(store, tmp_path, text):
    """Tabs, runs of spaces, CRLF, extra columns and comments, clean or with
    non-ASCII text (which the line reader takes over): the same values,
    labels and line numbers."""
    path = tmp_path / "plot.triad"
    path.write_bytes(text.encode("utf-8"))
    if "ö" in text:
        with pytest.raises(InputError, match=r"plot.triad:4: invalid node name"):
            import_stab(store, [path])
        return
    import_stab(store, [path])
    rows = store.con.execute("SELECT label, value, raw_ref FROM results ORDER BY label").fetchall()
    assert rows == [("node001", 2077.5, f"{path}:2"), ("node002", 2069.0, f"{path}:4"),
                    ("node003", 1500.0, f"{path}:6")]


def test_a_series_of_several_metrics_exports_and_imports_back_as_it_was(store, tmp_path, tmp_path_factory):
    from oddnode.core.model import LabelKind
    from oddnode.store import ResultBatch, open_store

    batch = ResultBatch()
    for i, (pair, latency) in enumerate((("node01-node02", 6.1), ("node03-node04", 6.4), ("node05-node06", 9.8))):
        batch.add("pingpong.cut", pair, latency, metric="latency.0", unit="us", direction="lower",
                  label_kind=LabelKind.PAIR)
        batch.add("pingpong.cut", pair, 100.0 - i, metric="bandwidth.65536", unit="MB/s", label_kind=LabelKind.PAIR)
    with store.transaction():
        store.add_results(store.new_run("oddnode pairs"), batch)
    out = tmp_path / "exported"
    export_plot_files(store, out)
    assert (out / "plot.pingpong.cut:latency.0").is_file()
    with open_store(tmp_path_factory.mktemp("again") / "s.duckdb") as again:
        import_stab(again, [out])
        after = {(s.benchmark, s.metric): (list(s.labels), list(s.values), s.unit, s.direction, s.label_kind)
                 for s in again.load_series()}
    before = {(s.benchmark, s.metric): (list(s.labels), list(s.values), s.unit, s.direction, s.label_kind)
              for s in store.load_series()}
    assert after == before and ("pingpong.cut", "latency.0") in after
