"""The benchmark runner: repetitions on all nodes, each stored as it ends,
troubles per node and repetition, nothing lost."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Sequence

import duckdb
import pytest

from support.kernels import openmp_problem
from oddnode.reach.jobs import PREPARE_OPTION, RUNNER_VERSION, parse_tool_output
from oddnode.core.model import Direction
from oddnode.parsers.base import Measurement, ParsedOutput
from oddnode.measure.benchmarks import BenchmarkSpec
from oddnode.measure.node.memory import MEMORY_STAGE, memory_benchmark
from oddnode.measure.runner import MIN_LEAD, run_benchmark
from oddnode.store import SCHEMA_VERSION, open_store
from oddnode.reach import get_transport
from oddnode.reach.base import NodeResult, NodeStatus, Target
from oddnode.reach.local import local_node_name
from support.outputs import KERNEL_STDOUT, ok, prepared_report, runner_report

KERNELS = ("copy", "scale", "add", "triad")


def scaled(factor: float) -> str:
    """The genuine output with every triad rate scaled, to tell repetitions apart."""
    return KERNEL_STDOUT.replace("result triad 28985.227", f"result triad {28985.227 * factor:.3f}")


def start_options(argv: Sequence[str]) -> list[str]:
    return [arg for arg in argv if arg.startswith("--start-at=")]


class FakeTransport:
    """Gives back scripted results, one dict per repetition; raises what it is
    given instead of a dict (an interrupt).  A prepare call (build and stop)
    is answered apart and counted in ``prepared``."""

    name = "fake"

    def __init__(self, script: list[dict[str, NodeResult] | BaseException]):
        self.script = list(script)
        self.calls: list[tuple[list[str], float]] = []
        self.prepared = 0
        self.starts: list[list[str]] = []

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float) -> dict[str, NodeResult]:
        if PREPARE_OPTION in argv:
            assert not self.calls, "a benchmark is prepared before its first repetition"
            self.prepared += 1
            return {node: ok(node, prepared_report()) for node in nodes}
        self.calls.append((list(nodes), timeout))
        self.starts.append(start_options(argv))
        step = self.script[len(self.calls) - 1]
        if isinstance(step, BaseException):
            raise step
        return step


NODES = ["node01", "node02", "node03"]


def three_repetitions() -> list[dict[str, NodeResult]]:
    """node02 unreachable in repetition 2, node03 prints garbage in repetition 1."""
    reps = []
    for rep in (1, 2, 3):
        reps.append({node: ok(node, runner_report(scaled(1 + rep / 100 + i / 10))) for i, node in enumerate(NODES)})
    reps[1]["node02"] = NodeResult("node02", NodeStatus.UNREACHABLE, "", "ssh: connect to host node02: No route",
                                   255, 0.1)
    reps[0]["node03"] = ok("node03", "Segmentation fault\n")
    return reps


def test_fake_cluster_keeps_every_repetition_and_every_trouble(store):
    transport = FakeTransport(three_repetitions())
    progress: list[tuple[int, int]] = []
    spec = memory_benchmark(elements=2_000_000, ntimes=3)
    summary = run_benchmark(store, Target(NODES, transport), spec, repetitions=3, timeout=42,
                            on_progress=lambda done, total: progress.append((done, total)))

    assert progress == [(1, 3), (2, 3), (3, 3)]
    # Built once, then every repetition on every node (nobody dropped after a
    # failure), each with one start time, given time for its wait.
    assert transport.prepared == 1
    assert transport.calls == [(NODES, 42 + MIN_LEAD)] * 3
    assert all(len(options) == 1 for options in transport.starts)
    assert summary.repetitions == 3
    assert summary.per_node["node01"]["ok"] == 3
    assert summary.per_node["node02"]["ok"] == 2 and summary.per_node["node02"]["unreachable"] == 1
    assert summary.per_node["node03"]["ok"] == 2 and summary.per_node["node03"]["failed"] == 1
    assert len(store.runs()) == 1

    rows = store.con.execute("""
        SELECT label, repetition, count(*), bool_and(valid), count(value) FROM results
        WHERE run_id = ? GROUP BY ALL ORDER BY 1, 2""", [summary.run_id]).fetchall()
    assert rows == [
        ("node01", 1, 4, True, 4), ("node01", 2, 4, True, 4), ("node01", 3, 4, True, 4),
        ("node02", 1, 4, True, 4), ("node02", 3, 4, True, 4),
        ("node03", 1, 4, False, 0), ("node03", 2, 4, True, 4), ("node03", 3, 4, True, 4),
    ]
    failed = store.con.execute("""
        SELECT benchmark, parameters, raw_ref FROM results WHERE label = 'node03' AND repetition = 1
        ORDER BY benchmark""").fetchall()
    assert [b for b, _, _ in failed] == sorted(f"memory.{k}" for k in KERNELS)
    assert "not a kernel runner report" in json.loads(failed[0][1])["error"]
    assert failed[0][2] == f"raw:{MEMORY_STAGE}:node03:1"

    params = json.loads(store.con.execute(
        "SELECT parameters FROM results WHERE label = 'node01' AND repetition = 1 AND benchmark = 'memory.triad'"
    ).fetchone()[0])
    assert params["threads"] == 2 and params["threads_counted"] == 2 and params["proc_bind"] == "spread"
    assert params["compiler"] == "cc (GCC) 12.2.0" and params["cache_key"] == "0123456789abcdef" * 4

    statuses = store.con.execute(
        "SELECT node, status, detail FROM node_status WHERE run_id = ? AND status <> 'ok' ORDER BY node",
        [summary.run_id]).fetchall()
    assert [(node, status) for node, status, _ in statuses] == [("node02", "unreachable"), ("node03", "failed")]
    assert statuses[0][2].startswith("repetition 2: ssh: connect")
    assert statuses[1][2].startswith("repetition 1:")
    assert store.con.execute("SELECT count(*) FROM node_status WHERE status = 'ok'").fetchone()[0] == 7

    raw = store.con.execute("SELECT count(*), count(DISTINCT label) FROM raw_outputs").fetchone()
    assert raw == (9, 3)
    assert store.con.execute(
        "SELECT stdout FROM raw_outputs WHERE label = 'node03' AND repetition = 1").fetchone()[0] == "Segmentation fault\n"

    triad = next(s for s in store.load_series() if s.benchmark == "memory.triad")
    best = dict(zip(triad.labels, triad.values))
    # Best = max over valid repetitions; repetition 3 is the fastest wherever it ran.
    assert best == pytest.approx({node: round(28985.227 * (1 + 3 / 100 + i / 10), 3) for i, node in enumerate(NODES)})
    assert dict(zip(triad.labels, triad.repetitions)) == {"node01": 3, "node02": 2, "node03": 2}
    assert {(f.label, f.repetition) for f in store.load_failures()} == {("node03", 1)}


def test_a_late_node_is_recorded_and_the_next_start_leaves_more_time(store):
    class SlowToStart(FakeTransport):
        """Runners start 4 s after sending; node02's is ready 2.5 s after the start."""

        def run(self, nodes, argv, *, timeout):
            answer = super().run(nodes, argv, timeout=timeout)
            if PREPARE_OPTION in argv:
                return answer
            (option,) = start_options(argv)
            start_at = float(option.partition("=")[2])
            launched = time.time() + 4.0
            return {node: ok(node, runner_report(start={
                "at": start_at, "launched": launched, "arrived": start_at + (2.5 if node == "node02" else -0.1)}))
                for node in nodes}

    transport = SlowToStart([{}, {}])
    run_benchmark(store, Target(NODES, transport), memory_benchmark(2_000_000, 3), repetitions=2, timeout=42)

    late = store.con.execute("""SELECT label, repetition, any_value(json_extract(parameters, '$.start_late_s'))::DOUBLE
                                FROM results GROUP BY ALL ORDER BY 1, 2""").fetchall()
    assert late == [(node, rep, 2.5 if node == "node02" else 0.0) for node in NODES for rep in (1, 2)]
    # Prepared runners report no start: the first lead is the least; the
    # second is 1.5 x the 4 s the runners took to start, plus 0.5 s.
    first, second = (timeout - 42 for _, timeout in transport.calls)
    assert first == MIN_LEAD
    assert second == pytest.approx(1.5 * 4.0 + 0.5, abs=0.2)


def test_an_unsynchronized_benchmark_is_neither_prepared_nor_held(store):
    transport = FakeTransport([{node: ok(node, runner_report()) for node in NODES}])
    spec = dataclasses.replace(memory_benchmark(2_000_000, 3), synchronized=False)
    run_benchmark(store, Target(NODES, transport), spec, repetitions=1, timeout=42)
    assert transport.prepared == 0 and transport.starts == [[]] and transport.calls == [(NODES, 42)]


def test_compile_error_and_failed_validation_are_kept(store):
    invalid = KERNEL_STDOUT.replace("validation ok", "validation failed triad 1.0e-03")
    transport = FakeTransport([{
        "node01": ok("node01", runner_report(error="compile failed", detail="memory.c:1: error: boom")),
        "node02": ok("node02", runner_report(invalid)),
    }])
    summary = run_benchmark(store, Target(["node01", "node02"], transport), memory_benchmark(2_000_000, 3),
                            repetitions=1)
    assert summary.per_node["node01"]["failed"] == 1 and summary.per_node["node02"]["invalid"] == 1
    detail = store.con.execute("SELECT detail FROM node_status WHERE node = 'node01'").fetchone()[0]
    assert "compile failed" in detail and "boom" in detail
    rows = store.con.execute(
        "SELECT label, count(*), bool_or(valid), count(value) FROM results GROUP BY label ORDER BY label").fetchall()
    assert rows == [("node01", 4, False, 0), ("node02", 4, False, 4)]
    assert store.load_series() == []


def test_interrupt_keeps_finished_repetitions(tmp_path):
    path = tmp_path / "interrupted.duckdb"
    script: list = three_repetitions()[:2] + [KeyboardInterrupt()]
    with open_store(path) as store:
        with pytest.raises(KeyboardInterrupt):
            run_benchmark(store, Target(NODES, FakeTransport(script)), memory_benchmark(2_000_000, 3), repetitions=3)
    with open_store(path, read_only=True) as store:
        reps = store.con.execute("SELECT DISTINCT repetition FROM results ORDER BY 1").fetchall()
        assert reps == [(1,), (2,)]
        assert store.con.execute("SELECT DISTINCT repetition FROM raw_outputs ORDER BY 1").fetchall() == reps
        assert len(store.runs()) == 1
        assert {s.benchmark for s in store.load_series()} == {f"memory.{k}" for k in KERNELS}


def test_store_upgrades_from_schema_2_with_raw_outputs_and_checks(tmp_path):
    path = tmp_path / "v2.duckdb"
    open_store(path).close()
    con = duckdb.connect(str(path))
    for table in ("raw_outputs", "checks", "check_steps", "run_nodes", "process_nodes", "process_counts",
                  "sweeps", "sweep_runs"):
        # what schemas 3 to 7 added
        con.execute(f"DROP TABLE {table}")
    con.execute("ALTER TABLE best DROP COLUMN spread")
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()
    with open_store(path) as store:
        version = store.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        assert version == str(SCHEMA_VERSION) == "10"
        with store.transaction():
            store.add_raw_output(1, "memory", "n1", 1, "out", "err")
            store.start_check(7, {"nodes": ["n1"]}, {"stages": ["memory"]})
            store.add_check_step(7, "memory", 1, 3)
        assert store.con.execute("SELECT * FROM raw_outputs").fetchall() == [(1, "memory", "n1", 1, "out", "err")]
        assert store.latest_check() == (7, "running", {"nodes": ["n1"]}, {"stages": ["memory"]})
        assert store.check_steps(7) == {"memory": (1, 3, 1)}


# --- against the real kernel, on this machine ---------------------------------------


@pytest.mark.slow
def test_local_node_runs_the_real_kernel_three_times(store, tmp_path, monkeypatch):
    problem = openmp_problem(tmp_path)
    if problem:
        pytest.skip(f"the memory kernel needs a C compiler with OpenMP: {problem}")
    # The local transport inherits this process's environment: a private build cache.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in [k for k in os.environ if k.startswith("OMP_")]:
        monkeypatch.delenv(name)
    node = local_node_name()
    spec = memory_benchmark(elements=1_000_000, ntimes=3)
    summary = run_benchmark(store, Target([node], get_transport("local")), spec, repetitions=3, timeout=300)

    assert summary.per_node[node]["ok"] == 3, store.con.execute("SELECT detail FROM node_status").fetchall()
    rows = store.con.execute(
        "SELECT benchmark, count(*), bool_and(valid), count(DISTINCT repetition) FROM results GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert rows == [(f"memory.{k}", 3, True, 3) for k in sorted(KERNELS)]
    params = json.loads(store.con.execute("SELECT parameters FROM results LIMIT 1").fetchone()[0])
    assert params["elements"] == 1_000_000 and params["threads_counted"] >= 1
    assert params["compiler"] and params["cache_key"]
    assert (tmp_path / "cache" / "oddnode" / "kernels").is_dir()
    raw = store.con.execute("SELECT repetition, stdout FROM raw_outputs ORDER BY repetition").fetchall()
    assert [r for r, _ in raw] == [1, 2, 3]
    assert all(json.loads(stdout.strip().splitlines()[-1])["returncode"] == 0 for _, stdout in raw)
    best = store.con.execute("SELECT benchmark, count(*), min(repetitions) FROM best GROUP BY 1").fetchall()
    assert sorted(best) == [(f"memory.{k}", 1, 3) for k in sorted(KERNELS)]
    assert store.load_node_status() == {}


def _tool_spec() -> BenchmarkSpec:
    def parse(text: str, source: str) -> ParsedOutput:
        report = parse_tool_output(source, text)
        value = float(report.stdout)
        return ParsedOutput("fake", [Measurement("fake.rate", value, "GFLOP/s", Direction.HIGHER)], True)
    return BenchmarkSpec("fake", "compute", ["fake"], parse)


def _tool_report(node: str, installed: bool) -> NodeResult:
    report = {"runner_version": RUNNER_VERSION, "tool": "fake", "cpu_model": "Test CPU"}
    if installed:
        report.update(tool_path="/usr/bin/fake", tool_version=None, returncode=0, stdout="42.0\n", stderr="",
                      collected={})
    else:
        report.update(error="not installed", detail="fake is not on PATH")
    return ok(node, json.dumps(report) + "\n")


def test_a_tool_missing_everywhere_is_skipped_missing_on_one_node_is_its_trouble(store):
    nowhere = FakeTransport([{node: _tool_report(node, False) for node in NODES}])
    summary = run_benchmark(store, Target(NODES, nowhere), _tool_spec(), repetitions=1)
    assert summary.unavailable_everywhere
    assert store.load_node_status() == {}
    assert store.con.execute("SELECT count(*) FROM results").fetchone() == (0,)

    one_lacks = FakeTransport([{node: _tool_report(node, node != "node02") for node in NODES}])
    summary = run_benchmark(store, Target(NODES, one_lacks), _tool_spec(), repetitions=1)
    assert not summary.unavailable_everywhere and summary.per_node["node02"]["unavailable"] == 1
    trouble = store.load_node_status()
    assert set(trouble) == {"node02"}
    assert "fake is not installed on this node" in trouble["node02"].detail
    assert "ran on 2 other nodes" in trouble["node02"].detail
