"""A command that finds the results store in use says so on stderr at
once, naming the process that holds it, then goes on when it is free."""

from __future__ import annotations

import subprocess
import sys

import pytest

from oddnode.store import ResultBatch, open_store
from support.cli import oddnode

pytestmark = pytest.mark.slow

# Holds the store until told to let go (a line on its stdin).
HOLD = ("import sys; from oddnode.store import open_store; store = open_store(sys.argv[1]); "
        "store.con.execute('SELECT 1').fetchall(); print('held', flush=True); sys.stdin.readline(); store.close()")
ENV = {"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def test_stats_waits_for_the_store_and_says_who_holds_it(tmp_path):
    path = tmp_path / "busy.duckdb"
    batch = ResultBatch()
    for node, value in (("cn-0001", 10.0), ("cn-0002", 10.1)):
        batch.add("stream", node, value, unit="MB/s")
    with open_store(path) as store:
        store.add_results(store.new_run("test"), batch)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        stats = subprocess.Popen([sys.executable, "-m", "oddnode", "stats", "--db", str(path)], cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        said = stats.stderr.readline()  # at once: the holder lets go only after it
        holder.stdin.write("done\n")
        holder.stdin.flush()
        out, _ = stats.communicate(timeout=120)
    finally:
        holder.kill()
        holder.wait()
    assert said.startswith(f"waiting: results store {path} is in use by python"), said
    assert f"PID {holder.pid}" in said and "waiting up to 30 s" in said
    assert stats.returncode == 0 and "stream" in out
    # Free, the store is read without a word.
    assert oddnode("stats", "--db", path, cwd=tmp_path).stderr == ""
