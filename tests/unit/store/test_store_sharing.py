"""A store that a long command holds only while it writes: another process
reads it in between, and a write waits for a reader to finish."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from oddnode.store import StoreError, lock_holder, open_store

READ = ("import sys; from oddnode.store import open_store; "
        "store = open_store(sys.argv[1], read_only=True, lock_wait=float(sys.argv[2])); "
        "print(store.con.execute('SELECT count(*) FROM runs').fetchall()[0][0]); "
        "import time; time.sleep(float(sys.argv[3]))")


def reader(path, lock_wait=0.5, hold_for=0.0, **options):
    return subprocess.run([sys.executable, "-c", READ, str(path), str(lock_wait), str(hold_for)],
                          capture_output=True, text=True, **options)


@pytest.mark.slow
def test_another_process_reads_between_the_writes_of_a_store_not_held(tmp_path):
    path = tmp_path / "check.duckdb"
    with open_store(path, hold=False) as store:
        with store.transaction():
            store.new_run("oddnode check")
        assert reader(path).stdout.strip() == "1"  # while the check is open, between its writes
        with store.transaction():
            store.new_run("oddnode check [memory]")
        assert reader(path).stdout.strip() == "2"


@pytest.mark.slow
def test_a_held_store_keeps_others_out_and_says_why(tmp_path):
    path = tmp_path / "held.duckdb"
    with open_store(path) as store:
        with store.transaction():
            store.new_run("oddnode import stab")
        result = reader(path)
        assert result.returncode != 0 and "another process has it open" in result.stderr
        assert "Traceback" in result.stderr  # the library raises; the command line says it in one line
    assert reader(path).stdout.strip() == "1"


@pytest.mark.slow
def test_a_write_waits_for_a_reader_to_finish(tmp_path):
    path = tmp_path / "wait.duckdb"
    with open_store(path, hold=False) as store:
        with store.transaction():
            store.new_run("oddnode check")
        slow = subprocess.Popen([sys.executable, "-c", READ, str(path), "5", "1.5"], stdout=subprocess.PIPE, text=True)
        assert slow.stdout.readline().strip() == "1"  # the reader holds the file now
        started = time.monotonic()
        with store.transaction():
            store.new_run("oddnode check [memory]")
        assert slow.wait() == 0 and time.monotonic() - started > 0.5
        store.lock_wait = 0.2
        blocking = subprocess.Popen([sys.executable, "-c", READ, str(path), "5", "3"], stdout=subprocess.PIPE, text=True)
        assert blocking.stdout.readline().strip() == "2"
        with pytest.raises(StoreError, match="another process has it open"):
            with store.transaction():
                store.new_run("never written")
        blocking.wait()
    with open_store(path, read_only=True) as store:
        assert store.con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 2


def test_a_store_in_memory_is_always_held():
    with open_store(":memory:", hold=False) as store:
        with store.transaction():
            store.new_run("oddnode analyze")
        assert store.con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 1


@pytest.mark.slow
def test_a_wait_for_the_lock_is_said_at_once_naming_the_process_that_holds_it(tmp_path):
    path = tmp_path / "busy.duckdb"
    with open_store(path) as store:
        with store.transaction():
            store.new_run("oddnode import stab")
    holder = subprocess.Popen([sys.executable, "-c", READ, str(path), "5", "1.5"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "1"  # the holder has the file now
    told = []
    with open_store(path, lock_wait=10, on_wait=told.append) as store:
        assert store.con.execute("SELECT count(*) FROM runs").fetchall()[0][0] == 1
    holder.wait()
    (message,) = told
    assert f"{path} is in use by python" in message and f"PID {holder.pid}" in message, message
    assert "waiting up to 10 s" in message
    # Free, the store is opened without a word.
    with open_store(path, on_wait=told.append):
        assert len(told) == 1


def test_lock_holder_reads_duckdbs_error_or_says_another_process():
    error = ('IO Error: Could not set lock on file "/data/x.duckdb": Conflicting lock is held in '
             '/usr/bin/python3.11 (PID 16722). See also https://duckdb.org/docs/current/connect/concurrency')
    assert lock_holder(error) == "python3.11, PID 16722"
    assert lock_holder("IO Error: Could not set lock on file: Resource temporarily unavailable") == "another process"
