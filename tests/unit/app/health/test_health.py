"""oddnode health: Slurm node states read from scontrol's own output, the
drain and resume decisions (never another's drain), drain reasons cut to
a line, the baseline file, the checks, and the commands with a scontrol
that keeps its nodes in a file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.cli import invoke
from oddnode.app.health import checks
from oddnode.app.health.baseline import BaselineError, MemoryBaseline, baseline_from_store, baseline_text, read_baseline
from oddnode.onnode.slurm_node import (
    REASON_LIMIT,
    REASON_PREFIX,
    NodeState,
    SlurmError,
    drain_reason,
    parse_node_state,
    plan_actions,
)
from oddnode.findings.expectations import parse_expectations
from support.cli import FIXTURES as ALL_FIXTURES
from support.slurm import fake_slurm, nodes_of

FIXTURES = ALL_FIXTURES / "slurm"


# -- scontrol's output ------------------------------------------------------------


def test_an_idle_node_as_slurm_22_05_prints_it():
    state = parse_node_state((FIXTURES / "show_node_idle.txt").read_text())
    assert (state.node, state.state, state.reason, state.cpus_allocated) == ("node01", "IDLE", "", 0)
    assert state.address == "10.77.0.11"
    assert not state.drained and not state.busy


def test_a_drained_node_keeps_its_reason_and_who_set_it():
    state = parse_node_state((FIXTURES / "show_node_drained.txt").read_text())
    assert state.drained and state.drained_by_oddnode
    assert state.reason.startswith(REASON_PREFIX)
    assert state.reason_user == "root"


@pytest.mark.parametrize("words, drained, busy", [
    ("IDLE+DRAIN", True, False), ("MIXED+DRAIN", True, True), ("ALLOCATED", False, True),
    ("DOWN*+DRAIN", True, False), ("IDLE+NOT_RESPONDING", False, False), ("IDLE~", False, False),
])
def test_state_words(words, drained, busy):
    state = NodeState("gpu017", words)
    assert (state.drained, state.busy) == (drained, busy)


def test_a_record_without_a_node_is_an_error():
    with pytest.raises(SlurmError, match="no node record"):
        parse_node_state("Node cn-a17 not found\n")


# -- reasons ---------------------------------------------------------------------------


def test_a_reason_is_every_problem_when_they_fit():
    assert drain_reason(["memory_total_kb=18000000, expected 24684084", "eth0 is down"]) == (
        "oddnode: memory_total_kb=18000000, expected 24684084; eth0 is down")


def test_a_long_reason_counts_what_does_not_fit_and_stays_within_the_limit():
    problems = [f"lib.libfoo{i}.sha256=0123456789abcdef, expected fedcba9876543210" for i in range(6)]
    reason = drain_reason(problems)
    assert len(reason) <= REASON_LIMIT
    assert reason.startswith(REASON_PREFIX + problems[0])
    assert reason.endswith("more")
    kept = reason.count("expected")
    assert f"+{len(problems) - kept} more" in reason


def test_one_problem_too_long_is_cut_with_an_ellipsis():
    reason = drain_reason(["kernel_cmdline=" + "x" * 500])
    assert len(reason) == REASON_LIMIT and reason.endswith("...")


# -- what to do ------------------------------------------------------------------


def states(**words: tuple[str, str]) -> dict[str, NodeState]:
    return {node.replace("_", "-"): NodeState(node.replace("_", "-"), state, reason, "root" if reason else "")
            for node, (state, reason) in words.items()}


def test_a_node_with_a_problem_is_drained_and_the_healthy_ones_are_left():
    found = states(cn_a17=("IDLE", ""), cn_a18=("ALLOCATED", ""))
    actions = plan_actions(found, {"cn-a17": ["eth0 is down"]}, drain=True, resume=True)
    assert [(a.node, a.verb) for a in actions] == [("cn-a17", "drain")]
    assert actions[0].argv == ("scontrol", "update", "NodeName=cn-a17", "State=DRAIN",
                               "Reason=oddnode: eth0 is down")


def test_a_node_drained_by_someone_else_is_never_resumed_nor_its_reason_changed():
    found = states(gpu003=("IDLE+DRAIN", "fan replaced, burn-in pending"))
    assert [a.verb for a in plan_actions(found, {}, resume=True)] == ["leave"]
    assert [a.verb for a in plan_actions(found, {"gpu003": ["eth0 is down"]}, resume=True)] == ["leave"]
    # Even a reason that looks like ours but lacks the prefix is theirs.
    found = states(gpu003=("IDLE+DRAIN", "oddnode said so"))
    assert [a.verb for a in plan_actions(found, {}, resume=True)] == ["leave"]


def test_oddnode_resumes_its_own_drain_once_healthy_and_updates_a_changed_reason():
    ours = states(gpu003=("IDLE+DRAIN", "oddnode: eth0 is down"))
    assert [(a.verb, a.argv[-1]) for a in plan_actions(ours, {}, resume=True)] == [("resume", "State=RESUME")]
    assert plan_actions(ours, {}, resume=False) == []
    assert plan_actions(ours, {"gpu003": ["eth0 is down"]}, resume=True) == []
    changed = plan_actions(ours, {"gpu003": ["ib0 is down"]})
    assert [(a.verb, a.why) for a in changed] == [("drain", "oddnode: ib0 is down")]


# -- the baseline ---------------------------------------------------------------------


def test_the_memory_minimum_is_the_tolerance_or_five_robust_sigmas_below_the_median():
    tight = MemoryBaseline.from_values(np.array([100.0, 101, 99, 100, 100]), "MB/s", {}, tolerance=0.2)
    assert tight.minimum == pytest.approx(80.0)
    wide = MemoryBaseline.from_values(np.array([100.0, 110, 90, 100, 80, 120]), "MB/s", {}, tolerance=0.2)
    # MAD 10: 5 x 1.4826 x 10 = 74.1 below the median.
    assert wide.minimum == pytest.approx(100 - 5 * 1.4826 * 10)


def test_a_baseline_reads_back_as_written(tmp_path):
    from oddnode.app.health.baseline import Baseline

    text = "smt: off\nbios_version: 1.10\nmemory_total_kb: {min: 257000000}\n"
    written = Baseline(expect=parse_expectations(text), expect_text=text, source={"check": 4, "nodes": "cn-a[01-16]"},
                       memory=MemoryBaseline(181234.5, 812.3, 16, "MB/s", 144987.6, {"elements": 40_000_000}))
    path = tmp_path / "baseline.yaml"
    path.write_text(baseline_text(written))
    read = read_baseline(path)
    assert read.expect["smt"].accepts("off") and read.expect["bios_version"].accepts("1.10")
    assert read.expect["bios_version"].equals == "1.10"  # as written, not YAML's 1.1
    assert read.memory == written.memory
    assert read.source["nodes"] == "cn-a[01-16]"


@pytest.mark.parametrize("text, problem", [
    ("expect: |\n  smt: [on\n", "not valid YAML"),
    ("expect: {smt: off}\n", "the text of an expectations file"),
    ("memory:\n  triad: {median: fast, minimum: 1}\n", "memory.triad.median"),
    ("memory:\n  options: {blocks: 3}\n  triad: {median: 2, minimum: 1}\n", "memory.options"),
    ("nodes: cn-a17\n", "unknown key 'nodes'"),
    ("- a list\n", "a mapping"),
])
def test_a_bad_baseline_is_an_error_naming_the_file_and_key(tmp_path, text, problem):
    path = tmp_path / "site-baseline.yaml"
    path.write_text(text)
    with pytest.raises(BaselineError, match=str(path)) as err:
        read_baseline(path)
    assert problem in str(err.value)


def test_a_baseline_from_a_store_expects_the_majority_and_not_the_processes(tmp_path):
    from oddnode.store import open_store

    nodes = [f"cn-a{i:02d}" for i in range(1, 9)]
    with open_store(tmp_path / "s.duckdb", read_only=False) as store:
        with pytest.raises(BaselineError, match="holds no check"):
            baseline_from_store(store, "s.duckdb")
        store.start_check(1, {"nodes": nodes, "transport": "ssh"}, {"stages": [], "repetitions": 1})
        run = store.new_run("oddnode check", source="ssh", nodes=nodes)
        facts = [(node, "cpu_model", "AMD EPYC 9654") for node in nodes]
        facts += [(node, "smt", "off" if node != "cn-a03" else "on") for node in nodes]
        facts += [(node, "process.slurmd", "running") for node in nodes]
        store.add_facts(run, facts)
        baseline, text = baseline_from_store(store, "s.duckdb")
    assert baseline.expect["smt"].accepts("off") and not baseline.expect["smt"].accepts("on")
    assert "process.slurmd" not in baseline.expect
    assert baseline.memory is None
    path = tmp_path / "b.yaml"
    path.write_text(text)
    assert set(read_baseline(path).expect) == {"cpu_model", "smt"}


# -- the checks ---------------------------------------------------------------------


def test_facts_against_expectations_give_one_problem_per_key_with_a_short_reason():
    expected = parse_expectations("arch: x86_64\ncpu_cores: {min: 64}\nsmt: off\n", source="site.yaml")
    outcome = checks.check_facts("gpu017", {"arch": "x86_64", "cpu_cores": "32", "smt": "off"},
                                 [("site.yaml", expected)])
    assert outcome.status == checks.PROBLEM
    assert [p.reason for p in outcome.problems] == ["cpu_cores=32, must be at least 64"]
    assert "site.yaml" in outcome.problems[0].message


def memory_baseline(median=1000.0, minimum=800.0):
    return MemoryBaseline(median, 10.0, 8, "MB/s", minimum, {"elements": 1000})


def test_memory_below_the_minimum_is_a_problem_and_above_it_is_not():
    def measured(value):
        return lambda baseline: {"values": {"memory.triad": value}, "valid": True, "elements": 1000}

    assert checks.check_memory(memory_baseline(), measured(950.0)).status == checks.OK
    low = checks.check_memory(memory_baseline(), measured(420.0))
    assert low.status == checks.PROBLEM and low.problems[0].reason == "triad 420 MB/s < 800"
    wrong = checks.check_memory(memory_baseline(), lambda b: {"values": {}, "valid": False, "problems": ["a[3]"]})
    assert wrong.status == checks.PROBLEM and "wrong" in wrong.problems[0].reason
    busy = checks.check_memory(memory_baseline(), measured(1.0), busy="a job holds 64 CPUs")
    assert busy.status == checks.SKIPPED


def test_a_memory_run_the_time_budget_cut_says_so_and_is_judged_on_what_it_measured():
    def cut(value):
        return lambda baseline: {"values": {"memory.triad": value}, "valid": True, "elements": 1000,
                                 "iterations": 2, "ntimes": 3}

    low = checks.check_memory(memory_baseline(), cut(300.0))
    assert low.status == checks.PROBLEM and low.data["iterations"] == 2
    assert "2 of 3 iterations" in low.problems[0].message
    fine = checks.check_memory(memory_baseline(), cut(990.0))
    assert fine.status == checks.OK and "2 of 3 iterations" in fine.detail


def test_the_health_memory_run_has_a_time_budget_within_its_timeout():
    assert 0 < checks.HEALTH_MAX_SECONDS < checks.MEMORY_TIMEOUT / 2


def own_address() -> str | None:
    done = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True)
    for interface in json.loads(done.stdout or "[]"):
        for info in interface.get("addr_info", []):
            if not info["local"].startswith("127.") and interface.get("operstate") in ("UP", "UNKNOWN"):
                return info["local"]
    return None


def test_the_node_s_own_address_answers_and_another_s_does_not():
    address = own_address()
    if address is None:
        pytest.skip("no address but loopback here")
    assert checks.check_address("cn-a17", address).status == checks.OK
    elsewhere = checks.check_address("cn-a17", "192.0.2.17")  # TEST-NET-1: nobody's
    assert elsewhere.status == checks.PROBLEM and "192.0.2.17" in elsewhere.problems[0].message
    unknown = checks.check_address("no-such-node.invalid")
    assert unknown.status == checks.PROBLEM and "does not resolve" in unknown.problems[0].reason


# -- the commands, with a scontrol that keeps its nodes in a file -------------------------

@pytest.fixture
def slurm(tmp_path, monkeypatch):
    """A scontrol on PATH whose nodes live in a JSON file; returns that file."""
    return fake_slurm(tmp_path, monkeypatch, ("cn-a17", "cn-a18", "gpu003"))


@pytest.fixture
def expectations(tmp_path):
    """What this machine meets, and one expectation it cannot."""
    met = tmp_path / "met.yaml"
    met.write_text(f"arch: {__import__('platform').machine()}\n")
    unmet = tmp_path / "unmet.yaml"
    unmet.write_text("cpu_threads: {min: 100000}\n")
    return met, unmet


@pytest.mark.slow
def test_health_drains_its_node_for_a_problem_and_resumes_it_once_healthy(slurm, expectations):
    met, unmet = expectations
    result = invoke("health", "--node", "cn-a17", "--expect", str(unmet), "--drain", "--resume-when-healthy")
    assert result.exit_code == 1, result.output
    assert "cn-a17: cpu_threads must be at least 100000" in result.output
    node = nodes_of(slurm)["cn-a17"]
    assert node["state"] == "IDLE+DRAIN" and node["reason"].startswith("oddnode: cpu_threads=")
    assert nodes_of(slurm)["cn-a18"]["state"] == "IDLE"

    result = invoke("health", "--node", "cn-a17", "--expect", str(met), "--drain", "--resume-when-healthy")
    assert result.exit_code == 0, result.output
    assert "cn-a17: resumed" in result.output
    assert nodes_of(slurm)["cn-a17"]["state"] == "IDLE"


def test_health_leaves_a_node_drained_by_hand(slurm, expectations):
    met, unmet = expectations
    nodes = nodes_of(slurm)
    nodes["gpu003"].update(state="IDLE+DRAIN", reason="bad GPU 5, RMA 4411", user="alice")
    slurm.write_text(json.dumps(nodes))
    for expectation, status in ((met, 0), (unmet, 1)):
        result = invoke("health", "--node", "gpu003", "--expect", str(expectation), "--drain",
                        "--resume-when-healthy")
        assert result.exit_code == status, result.output
        assert "not by oddnode" in result.output or "reason is kept" in result.output
    assert nodes_of(slurm)["gpu003"]["reason"] == "bad GPU 5, RMA 4411"
    assert not Path(f"{slurm}.log").exists()


def test_health_dry_run_prints_the_command_and_changes_nothing(slurm, expectations):
    _, unmet = expectations
    result = invoke("health", "--node", "cn-a18", "--expect", str(unmet), "--drain", "--dry-run")
    assert result.exit_code == 1
    assert "would run: scontrol update NodeName=cn-a18 State=DRAIN 'Reason=oddnode: cpu_threads=" in result.output
    assert nodes_of(slurm)["cn-a18"]["state"] == "IDLE"


def test_health_json_is_one_document(slurm, expectations):
    _, unmet = expectations
    result = invoke("health", "--node", "cn-a18", "--expect", str(unmet), "--json")
    document = json.loads(result.stdout)
    assert document["node"] == "cn-a18" and document["healthy"] is False
    assert [c["name"] for c in document["checks"]] == ["facts", "memory", "address"]
    assert document["problems"][0]["finding"]["kind"] == "expectation"
    assert document["slurm_state"] == "IDLE"


def test_health_without_slurm_cannot_drain(tmp_path, monkeypatch, expectations):
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol anywhere
    met, _ = expectations
    result = invoke("health", "--node", "cn-a17", "--expect", str(met), "--drain")
    assert result.exit_code == 3
    assert "scontrol not found" in result.output


def test_health_needs_something_to_compare_with():
    result = invoke("health", "--node", "cn-a17")
    assert result.exit_code == 2 and "--baseline" in result.output


# -- check --drain ------------------------------------------------------------------


def problems_naming(*node_sets: str):
    from oddnode.findings.problems import group_problems
    from oddnode.core.model import Finding, Severity

    return group_problems([Finding("outlier", Severity.WARNING, "memory.triad", nodes, f"{nodes} is slow", {}, "")
                           for nodes in node_sets])


def test_a_check_drains_the_nodes_its_problems_name(slurm):
    from oddnode.app.cli.common import console
    from oddnode.app.cli.health import drain_for_check

    records = drain_for_check(problems_naming("cn-a17"), 8, dry_run=False, limit=None, out=console, check_id=12)
    assert [(r["node"], r["action"], r["done"]) for r in records] == [("cn-a17", "drain", True)]
    assert nodes_of(slurm)["cn-a17"]["reason"] == "oddnode: outlier [memory.triad] (check 12)"
    assert nodes_of(slurm)["cn-a18"]["state"] == "IDLE"


def test_a_check_drains_nothing_when_its_problems_name_too_many_nodes(slurm, capsys):
    from oddnode.app.cli.common import console
    from oddnode.app.cli.health import drain_for_check

    assert drain_for_check(problems_naming("cn-a17", "cn-a18", "gpu003"), 8, dry_run=False, limit=None,
                           out=console) == []
    assert "more than --drain-max 2" in capsys.readouterr().err.replace("\n", " ")
    assert all(node["state"] == "IDLE" for node in nodes_of(slurm).values())
    records = drain_for_check(problems_naming("cn-a17", "cn-a18", "gpu003"), 8, dry_run=True, limit=3, out=console)
    assert [r["command"].split()[2] for r in records] == ["NodeName=cn-a17", "NodeName=cn-a18", "NodeName=gpu003"]
    assert all(node["state"] == "IDLE" for node in nodes_of(slurm).values())


def test_a_node_slurm_does_not_know_stops_the_drain_with_its_name(slurm):
    import typer

    from oddnode.app.cli.common import console
    from oddnode.app.cli.health import drain_for_check

    with pytest.raises(typer.Exit) as stopped:
        drain_for_check(problems_naming("login1"), 8, dry_run=False, limit=None, out=console)
    assert stopped.value.exit_code == 3
