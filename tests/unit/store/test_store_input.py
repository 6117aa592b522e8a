"""A store is untrusted input: what is not one, or is damaged, or holds a
label that is not a node name, is one line and exit 2 (3 when it cannot be
opened now), never a traceback, a download or a shell."""

import os
import sqlite3
import time

import duckdb
import pytest

from support.cli import invoke, oddnode
from oddnode.core.model import LabelKind
from oddnode.core.nodes import label_kind
from oddnode.store import LabelError, ResultBatch, StoreError, check_label, open_store


def filled(path, labels=("node01", "node02", "node03")):
    """A store with one run of memory results on ``labels``."""
    with open_store(path) as store:
        batch = ResultBatch()
        for index, label in enumerate(labels):
            batch.add("memory", label, 1000.0 + index, label_kind=label_kind(label))
        with store.transaction():
            store.add_results(store.new_run("test", nodes=[label for label in labels if "[" not in label]), batch)
    return path


def one_line_error(result, *phrases):
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    for phrase in phrases:
        assert phrase in result.text, result.output


@pytest.mark.slow
def test_a_sqlite_file_is_named_fast_without_loading_an_extension(tmp_path):
    lite = tmp_path / "results.db"
    with sqlite3.connect(lite) as connection:
        connection.execute("CREATE TABLE t (a)")
    home = tmp_path / "home"
    home.mkdir()
    started = time.monotonic()
    result = oddnode("stats", "--db", lite, cwd=tmp_path, check=False, env={"HOME": str(home)})
    assert time.monotonic() - started < 10  # no DNS, no download
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "not an oddnode store (DuckDB) file" in result.stderr and "SQLite" in result.stderr
    assert not (home / ".duckdb").exists()


def test_every_connection_has_extension_autoloading_off(tmp_path):
    with open_store(tmp_path / "s.duckdb") as store:
        settings = store.con.execute("SELECT current_setting('autoinstall_known_extensions'), "
                                     "current_setting('autoload_known_extensions')").fetchall()
    assert settings == [(False, False)]


@pytest.mark.parametrize("content", [b"", os.urandom(20000), b"x" * 100])
def test_a_file_that_is_not_duckdb_is_named_before_duckdb_reads_it(tmp_path, content):
    path = tmp_path / "junk.duckdb"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="not an oddnode store \\(DuckDB\\) file"):
        open_store(path)
    assert path.read_bytes() == content  # untouched
    one_line_error(invoke("analyze", "--db", path), "not an oddnode store")


def test_a_directory_or_fifo_as_store_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_line_error(invoke("stats", "--db", tmp_path), "is a directory")
    one_line_error(invoke("stats", "--db", fifo), "not a regular file")
    one_line_error(invoke("import", "stab", tmp_path, "--db", fifo), "not a regular file")


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.001, 0.05, 0.5, 0.99])
def test_a_store_cut_short_is_damaged_with_what_to_do(tmp_path, fraction):
    whole = filled(tmp_path / "whole.duckdb", [f"node{i:04d}" for i in range(3000)]).read_bytes()
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(whole[:int(len(whole) * fraction)])
    for read_only in (True, False):
        with pytest.raises(StoreError, match="is damaged.*restore it from a copy, or start a new store with --db"):
            open_store(cut, read_only=read_only)
    one_line_error(invoke("stats", "--db", cut), "cut.duckdb is damaged")


def test_a_meta_table_without_schema_version_is_damaged(tmp_path):
    path = tmp_path / "s.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR)")
    with pytest.raises(StoreError, match="meta table holds no schema version"):
        open_store(path)
    one_line_error(invoke("stats", "--db", path), "no schema version")


@pytest.mark.parametrize("label, kind", [
    ("node01\n", "node"), ("@x';touch${IFS}/tmp/M;'", "set"), ("node[1-2],@rack1", "set"), ("[/bold]", "set"),
    ("[bold]", "set"), ("node 01", "node"), ("nodeA-[x", "pair"),
])
def test_labels_that_are_not_node_names_are_refused_on_the_way_in(tmp_path, label, kind):
    with open_store(tmp_path / "s.duckdb") as store:
        batch = ResultBatch()
        batch.add("memory", "node01", 1.0)
        batch.add("memory", label, 2.0, label_kind=LabelKind(kind))
        with pytest.raises(LabelError, match="label .* refused"):
            with store.transaction():
                store.add_results(store.new_run("test"), batch)
        assert store.runs() == []  # all or nothing
        with pytest.raises(LabelError, match="node name .* refused"):
            store.new_run("test", nodes=["node01", label])
        with pytest.raises(LabelError):
            store.add_facts(1, [(label, "cpu", "x")])


def test_node_pair_and_set_labels_pass(tmp_path):
    for label, kind in [("node01", "node"), ("cn-001.site", "node"), ("node01-node02", "pair"),
                        ("node[01-04,07],login1", "set")]:
        assert check_label(label, kind) == label
    filled(tmp_path / "s.duckdb", ["node01", "node[02-03]"])


def test_a_bulk_import_relation_is_checked_too(tmp_path):
    with open_store(tmp_path / "s.duckdb") as store:
        rows = store.con.sql("SELECT 'memory' AS benchmark, 'value' AS metric, '' AS unit, 'higher' AS direction, "
                             "'node01\n' AS label, 'node' AS label_kind, NULL AS repetition, 1.0 AS value, "
                             "true AS valid, NULL AS parameters, NULL AS raw_ref")
        with pytest.raises(LabelError, match="node01\\\\n"):
            with store.transaction():
                store.add_results(store.new_run("test"), rows, whole_series=True)


@pytest.mark.parametrize("label, kind, valid", [
    ("node02@x", "node", True), ("@x';touch${IFS}%s;'", "set", False), ("[/bold]", "set", True),
    ("node03\n", "node", False),
])
@pytest.mark.slow
def test_a_store_holding_a_bad_label_is_named_not_run(tmp_path, label, kind, valid):
    marker = tmp_path / "M"
    label = label.replace("%s", str(marker))
    path = filled(tmp_path / "s.duckdb")
    with duckdb.connect(str(path)) as connection:  # as an older oddnode or a hand would
        connection.execute("INSERT INTO results VALUES (1, 'memory', 'value', '', 'higher', ?, ?, 1, 5.0, ?, "
                           "NULL, NULL)", [label, kind, valid])
        connection.execute("INSERT INTO best VALUES (1, 'memory', 'value', '', 'higher', ?, ?, 5.0, 1, NULL)",
                           [label, kind])
    for command in ("stats", "analyze"):
        result = invoke(command, "--db", path)
        one_line_error(result, "stored by an older oddnode or by hand")
        assert repr(label)[:20] in result.output or "label" in result.output
    with open_store(path, read_only=True) as store, pytest.raises(LabelError):
        store.load_dataset()
    assert not marker.exists()


def test_a_store_holding_a_bad_node_name_in_facts_is_named(tmp_path):
    path = filled(tmp_path / "s.duckdb")
    with duckdb.connect(str(path)) as connection:
        connection.execute("INSERT INTO facts VALUES (1, '[red]node04', 'cpu', 'x')")
    one_line_error(invoke("analyze", "--db", path), "'[red]node04'")


@pytest.mark.slow
def test_a_block_that_fails_its_checksum_is_damaged_not_locked(tmp_path):
    whole = bytearray(filled(tmp_path / "whole.duckdb", [f"node{i:04d}" for i in range(3000)]).read_bytes())
    for block in (0, 1):  # the first block is read when opened, the second when the results are
        at = 3 * 4096 + block * 262144 + 1000  # past DuckDB's headers, into a block of 256 KiB
        damaged = bytearray(whole)
        damaged[at:at + 5000] = b"\x01" * 5000
        path = tmp_path / f"corrupt{block}.duckdb"
        path.write_bytes(damaged)
        with pytest.raises(StoreError, match="is damaged .*checksum.*restore it from a copy"):
            open_store(path, read_only=True).load_dataset()
        one_line_error(invoke("stats", "--db", path), "is damaged")


def test_a_repetition_number_past_the_column_is_refused_naming_it(tmp_path):
    with open_store(tmp_path / "s.duckdb") as store:
        batch = ResultBatch()
        batch.add("memory", "node01", None, repetition=2**31, valid=False)
        with pytest.raises(StoreError, match="repetition 2147483648 is not a whole number"):
            with store.transaction():
                store.add_results(store.new_run("test"), batch)


def test_a_store_in_a_missing_directory_cannot_be_opened_and_is_not_called_damaged(tmp_path):
    with pytest.raises(StoreError, match="cannot open results store") as raised:
        open_store(tmp_path / "absent" / "s.duckdb")
    assert "damaged" not in str(raised.value)


def test_a_stored_check_target_with_a_group_is_refused_before_it_reaches_a_resolver(tmp_path):
    with open_store(tmp_path / "s.duckdb") as store:
        store.start_check(1, {"nodes": ["node01", "@x';touch${IFS}/tmp/M;'"], "transport": "local"}, {})
        with pytest.raises(LabelError, match="check 1.*refused"):
            store.latest_check()


def test_a_value_that_is_not_finite_is_never_a_valid_result(tmp_path):
    with open_store(tmp_path / "s.duckdb") as store:
        batch = ResultBatch()
        for label, value in (("node01", 1000.0), ("node02", float("inf")), ("node03", float("nan"))):
            batch.add("memory", label, value)
        with store.transaction():
            store.add_results(store.new_run("test"), batch)
        valid = dict(store.con.execute("SELECT label, valid FROM results").fetchall())
        best = [label for (label,) in store.con.execute("SELECT label FROM best").fetchall()]
    assert valid == {"node01": True, "node02": False, "node03": False}
    assert best == ["node01"]
