"""A sweep run on a scripted cluster whose memory kernel reads an
environment variable: every setting in every round, the variable reaching
the kernel's job, every run stored with its setting, the command line and
its JSON; and the store's sweep tables, upgraded into older stores."""

from __future__ import annotations

import json

import duckdb
import pytest

from support.cli import invoke
from oddnode.store import SCHEMA_VERSION, StoreError, open_store
from oddnode.judge.sweep import analyze_sweep, read_sweep
from oddnode.readings.sweep_grid import interleaved_order, make_grid
from oddnode.measure.sweep import run_sweep
from oddnode.reach.base import Target
from support.clusters.sweep import FIXED, NODES, TunableCluster


@pytest.mark.slow
def test_every_setting_runs_every_round_in_the_interleaved_order_with_its_environment(store):
    cluster = TunableCluster()
    grid = make_grid("memory", ["MEMORY_POLICY=local,interleave"], FIXED)
    done = []
    summary = run_sweep(store, Target(NODES, cluster), grid, 4, seed=2, command="oddnode sweep memory",
                        on_progress=lambda d, t: done.append((d, t)))
    assert done[-1] == (8, 8) and len(summary.turns) == 8
    order = interleaved_order(2, 4, seed=2)
    assert [[t.setting for t in summary.turns[i * 2:(i + 1) * 2]] for i in range(4)] == order
    assert [env.get("MEMORY_POLICY") for env in cluster.envs] == [
        grid.env(grid.settings[s])["MEMORY_POLICY"] for r in order for s in r]
    assert all(len(t.run_ids) == 1 for t in summary.turns)
    rows = store.con.execute("SELECT setting, round, position, parameters FROM sweep_runs WHERE sweep_id = ? "
                             "ORDER BY round, position", [summary.sweep_id]).fetchall()
    assert [(s, r, p) for s, r, p, _ in rows] == [(s, r + 1, p + 1) for r, o in enumerate(order)
                                                  for p, s in enumerate(o)]
    assert json.loads(rows[0][3])["options"] == {"elements": "2000000", "ntimes": "3"}
    commands = [c for (c,) in store.con.execute("SELECT command FROM runs ORDER BY id").fetchall()]
    assert commands[0] == "oddnode sweep memory"
    assert commands[1].startswith(f"oddnode sweep memory [sweep {summary.sweep_id} setting ")
    analysis = analyze_sweep(read_sweep(store, summary.sweep_id))
    triad = [s for s in analysis.series if s.benchmark == "memory.triad"][0]
    (row,) = triad.rows
    assert analysis.labels[row.best] == "interleave" and row.significant
    assert row.change == pytest.approx(0.5, abs=0.05) and row.counts == [12, 12]


@pytest.mark.slow
@pytest.mark.parametrize("default", ["local", "interleave"])
def test_the_analysis_judges_the_default_setting_not_whichever_ran_last(store, default):
    grid = make_grid("memory", ["MEMORY_POLICY=local,interleave"], FIXED, [f"MEMORY_POLICY={default}"])
    summary = run_sweep(store, Target(NODES, TunableCluster()), grid, 3, seed=1)
    judged = {run_id for turn in summary.turns if grid.label(grid.settings[turn.setting]) == default
              for run_id in turn.run_ids}
    (triad,) = [s for s in store.load_dataset().series if s.benchmark == "memory.triad"]
    runs = {run_id for (run_id,) in store.con.execute(
        "SELECT DISTINCT run_id FROM best WHERE benchmark = 'memory.triad'").fetchall()}
    assert len(triad) == len(NODES) and runs and runs <= judged
    assert max(runs) == max(judged)  # the default's newest round


@pytest.mark.slow
def test_identical_settings_are_no_different(store):
    grid = make_grid("memory", ["UNREAD_BY_THE_KERNEL=a,b"], FIXED)
    summary = run_sweep(store, Target(NODES, TunableCluster()), grid, 4, seed=0)
    analysis = analyze_sweep(read_sweep(store))
    assert analysis.data.sweep_id == summary.sweep_id and analysis.significant_rows() == []


def test_a_step_with_too_few_nodes_or_a_bad_setting_runs_nothing(store):
    with pytest.raises(ValueError, match="the pairs step needs 2 nodes or more, got 1"):
        run_sweep(store, Target(["cn-a17"], TunableCluster()), make_grid("pairs", ["A=1,2"]), 2)
    with pytest.raises(ValueError, match="setting '-5'.*elements"):
        run_sweep(store, Target(NODES, TunableCluster()), make_grid("memory", (), ["memory.elements=1000|-5"]), 2)
    assert store.sweeps() == []


def test_the_sweep_tables_are_added_to_an_older_store(tmp_path):
    path = tmp_path / "v6.duckdb"
    open_store(path).close()
    con = duckdb.connect(str(path))
    con.execute("DROP TABLE sweeps")
    con.execute("DROP TABLE sweep_runs")
    con.execute("ALTER TABLE process_counts DROP COLUMN parents")  # schema 9's
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    with open_store(path) as store:
        assert store.con.execute("SELECT value FROM meta").fetchall()[0][0] == str(SCHEMA_VERSION) == "10"
        with pytest.raises(StoreError, match="no sweep in .*: run oddnode sweep first"):
            store.load_sweep()
        with store.transaction():
            run = store.new_run("oddnode sweep", source="sweep")
            store.start_sweep(run, "memory", {"step": "memory", "parameters": []}, 3, 0)
        assert store.sweeps()[0][3:] == ("memory", 3, 0)
        with pytest.raises(StoreError, match=rf"no sweep 99 in .* \(its sweeps: {run}\)"):
            store.load_sweep(99)


# -- the command line ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_command_runs_a_sweep_and_prints_its_json(tmp_path, scripted):
    scripted(TunableCluster(), NODES)
    db = tmp_path / "cli.duckdb"
    result = invoke("sweep", "memory", "--env", "MEMORY_POLICY=local,interleave", "--set", FIXED[0], "--set",
                    FIXED[1], "-r", "3", "--seed", "1", "--json", "--db", db)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["run"]["repetitions"] == 3 and len(document["run"]["turns"]) == 6
    triad = [s for s in document["analysis"]["series"] if s["benchmark"] == "memory.triad"][0]
    assert triad["rows"][0]["best"] == "interleave" and triad["rows"][0]["change"] > 0.4
    table = invoke("sweep", "--stored", "latest", "--db", db)
    assert table.exit_code == 0 and "Sweep 1 of memory: MEMORY_POLICY = local, interleave (3 rounds)" in table.text
    listed = invoke("sweep", "--list", "--json", "--db", db)
    assert [row["step"] for row in json.loads(listed.stdout)] == ["memory"]
    figures = invoke("sweep", "--stored", "1", "--plot", tmp_path / "figures", "--db", db)
    assert figures.exit_code == 0 and "4 figures written to" in figures.text


@pytest.mark.parametrize("args, message", [
    (["--env", "A=1,2"], "name the step to sweep"),
    (["memory", "--command", "mpirun x"], "--command needs --parser"),
    (["pairs", "--command", "mpirun x", "--parser", "imb"], "--command runs on sets of nodes"),
    (["memory", "--set", "memory.threads=1|x"], "setting 'x': memory.threads: wants a whole number"),
    (["memory", "--env", "A=1,2", "--stored", "latest"], "--stored judges a stored sweep: STEP, --env"),
    (["nosuch", "--env", "A=1,2"], "no step named 'nosuch'"),
])
def test_the_command_refuses_what_it_cannot_run(tmp_path, scripted, args, message):
    scripted(TunableCluster(), NODES)
    result = invoke("sweep", *args, "--db", tmp_path / "x.duckdb")
    assert result.exit_code == 2 and message in result.text, result.output
