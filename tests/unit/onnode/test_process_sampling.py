"""Processes sampled over the probe, not caught in one instant: the probe's
parsing of /proc, its summary of several snapshots, the facts it writes and
their reading by the inconsistent-fact rule (a command seen once is
information, one that stays or burns CPU a warning).  The probe run for
real with a busy process beside it is in the kernel tier (timing)."""

from __future__ import annotations

import pytest

from oddnode.judge.analysis import analyze
from oddnode.findings import find_all
from oddnode.findings.processes import SEEN_BRIEFLY, is_persistent, parse_sampled
from oddnode.onnode.node_probe import (
    PF_KTHREAD,
    parse_stat,
    process_facts,
    read_snapshot,
    summarise_snapshots,
)
from oddnode.core.model import Dataset, Severity
from support.series import memory



def stat_line(pid: int, comm: str, ppid: int, ticks: int = 0, start: int = 1000, flags: int = 0x400100) -> str:
    """A /proc/<pid>/stat line as Linux 6 writes it: utime holds the ticks."""
    fields = ["S", ppid, pid, pid, 0, -1, flags, 120, 0, 0, 0, ticks, 0, 0, 0, 20, 0, 1, 0, start, 7_000_000, 800]
    return f"{pid} ({comm}) " + " ".join(map(str, fields)) + " 0" * 30 + "\n"


# ---------------------------------------------------------------- parsing /proc


def test_parse_stat_reads_comm_ppid_flags_ticks_and_start():
    assert parse_stat(stat_line(4242, "slurmd", 1, ticks=57, start=3131)) == ("slurmd", 1, 0x400100, 57, 3131)
    # A comm may hold spaces and parentheses: the fields start after the last ')'.
    assert parse_stat(stat_line(7, "tmux: (server)", 1))[0] == "tmux: (server)"
    stime = "12 (x) S 1 12 12 0 -1 4194560 0 0 0 0 3 4 0 0 20 0 1 0 99 0 0"
    assert parse_stat(stime) == ("x", 1, 4194560, 7, 99)  # utime + stime
    for text in ("", "12 x S 1", "12 (x) S", "12 (x) S one 2 3"):
        assert parse_stat(text) is None, text


def test_read_snapshot_skips_kernel_threads_and_what_is_no_process(tmp_path):
    for pid, line in {
        1: stat_line(1, "systemd", 0),
        2: stat_line(2, "kthreadd", 0, flags=0),
        35: stat_line(35, "kworker/0:1", 2, flags=PF_KTHREAD | 0x40),
        900: stat_line(900, "slurmd", 1, ticks=12, start=500),
        901: "garbage",
    }.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(line)
    (tmp_path / "self").mkdir()
    (tmp_path / "902").mkdir()  # ended between listing and reading
    processes, denied = read_snapshot(str(tmp_path))
    assert processes == {(1, 1000): ("systemd", 0, 0), (900, 500): ("slurmd", 1, 12)}
    assert denied == 0


# ---------------------------------------------------------------- several snapshots


PROBE, SHELL = 5000, 4999


def snapshot(*processes: tuple[int, str, int, int], start: dict[int, int] | None = None) -> dict:
    """(pid, comm, ppid, ticks) -> {(pid, start): (comm, ppid, ticks)}."""
    start = start or {}
    return {(pid, start.get(pid, 100)): (comm, ppid, ticks) for pid, comm, ppid, ticks in processes}


def sampled() -> list[dict]:
    """Five snapshots: sshd idle throughout, a hog busy throughout, a cron job
    seen once (started after the first snapshot), the probe, its shell and
    its child (a query tool) in each."""
    own = [(SHELL, "bash", 1, 0), (PROBE, "python3", SHELL, 0), (5001, "ethtool", PROBE, 0)]
    snapshots = []
    for index in range(5):
        others = [(800, "sshd", 1, 40), (1200, "stress-ng", 1, 1000 + 45 * index)]
        if index == 2:
            others.append((6000, "run-parts", 1, 3))
        snapshots.append(snapshot(*own, *others))
    return snapshots


def test_snapshots_count_sightings_and_cpu_and_leave_the_probe_out():
    summary = summarise_snapshots(sampled(), PROBE, SHELL)
    assert summary == {"sshd": (5, 0), "stress-ng": (5, 180), "run-parts": (1, 3)}


def test_a_reused_pid_is_another_process():
    first = snapshot((700, "sleep", 1, 5), start={700: 100})
    later = snapshot((700, "sleep", 1, 2), start={700: 400})  # same pid, started later: its 2 ticks all count
    assert summarise_snapshots([first, later], PROBE, SHELL) == {"sleep": (2, 2)}


def test_facts_say_running_and_add_the_sampling_only_where_it_tells_something():
    summary = summarise_snapshots(sampled(), PROBE, SHELL)
    facts = process_facts(summary, 5, 2.01, 100)
    assert facts == {
        "process.sshd": "running",
        "process.stress-ng": "running",
        "process.run-parts": "running",
        "process_seen.stress-ng": "5/5 snapshots in 2.0 s, 1.80 s CPU",
        "process_seen.run-parts": "1/5 snapshots in 2.0 s, 0.03 s CPU",
    }
    assert parse_sampled(facts["process_seen.run-parts"]) == (1, 5, 2.0, 0.03)


@pytest.mark.parametrize(
    "text, persistent",
    [
        (None, True),  # seen in every snapshot and idle, or an older probe's single snapshot
        ("5/5 snapshots in 2.0 s, 1.80 s CPU", True),
        ("3/5 snapshots in 2.0 s, 0.00 s CPU", True),
        ("2/5 snapshots in 2.0 s, 0.00 s CPU", False),
        ("1/5 snapshots in 2.0 s, 0.03 s CPU", False),
        ("1/5 snapshots in 2.0 s, 0.40 s CPU", True),  # short but busy: a fifth of a CPU
        ("whatever a site wrote", True),
    ],
)
def test_persistence_is_most_snapshots_or_a_tenth_of_a_cpu(text, persistent):
    assert is_persistent(text) is persistent


# ---------------------------------------------------------------- the rule


def names(n: int) -> list[str]:
    return [f"r01n{i:02d}" for i in range(1, n + 1)]


def inventory(nodes: list[str], extra: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    facts = {"process.sshd": dict.fromkeys(nodes, "running"), "kernel": dict.fromkeys(nodes, "6.1")}
    facts.update(extra)
    return facts


def rule_findings(facts):
    return {f.subject: f for f in find_all(Dataset(facts=facts), rules=["inconsistent-fact"])}


def test_a_command_seen_in_one_snapshot_is_information():
    nodes = names(16)
    found = rule_findings(inventory(nodes, {
        "process.run-parts": {"r01n03": "running"},
        "process_seen.run-parts": {"r01n03": "1/5 snapshots in 2.0 s, 0.02 s CPU"},
    }))
    cron = found["process.run-parts"]
    assert cron.severity is Severity.INFO and cron.nodes == "r01n03"
    assert cron.evidence["minority"] == {SEEN_BRIEFLY: "r01n03"}
    assert cron.message == "run-parts was seen briefly on r01n03 (r01n03: 1/5 snapshots in 2.0 s, 0.02 s CPU) only"
    assert "passing through" in cron.remedy


def test_a_command_that_persists_on_a_node_is_a_warning():
    nodes = names(16)
    found = rule_findings(inventory(nodes, {
        "process.oddnode-hog": {"r01n05": "running"},
        "process_seen.oddnode-hog": {"r01n05": "5/5 snapshots in 2.0 s, 1.98 s CPU"},
        "process.timeout": {"r01n05": "running"},  # seen in every snapshot, idle: no process_seen key
        "process.backup": {"r01n07": "running", "r01n09": "running"},
        "process_seen.backup": {"r01n07": "1/5 snapshots in 2.0 s, 0.45 s CPU",
                                "r01n09": "1/5 snapshots in 2.0 s, 0.00 s CPU"},
    }))
    assert {key: (f.severity, f.nodes) for key, f in found.items()} == {
        "process.oddnode-hog": (Severity.WARNING, "r01n05"),
        "process.timeout": (Severity.WARNING, "r01n05"),
        "process.backup": (Severity.WARNING, "r01n[07,09]"),  # busy on r01n07
    }
    assert found["process.oddnode-hog"].message == "oddnode-hog runs on r01n05 only"
    assert found["process.backup"].message.startswith("backup runs on r01n07 only; seen briefly on r01n09 (")


def test_a_daemon_seen_briefly_on_one_node_is_not_said_to_be_missing():
    nodes = names(8)
    found = rule_findings(inventory(nodes, {"process_seen.sshd": {"r01n02": "1/5 snapshots in 2.0 s, 0.00 s CPU"}}))
    assert found["process.sshd"].severity is Severity.INFO
    assert found["process.sshd"].message == ("sshd runs on every node but r01n02, which saw it only briefly "
                                             "(r01n02: 1/5 snapshots in 2.0 s, 0.00 s CPU)")


def test_only_the_steady_command_is_linked_to_the_slow_results():
    nodes = names(16)
    facts = inventory(nodes, {
        "process.stress-ng": {"r01n05": "running", "r01n09": "running"},
        "process_seen.stress-ng": {"r01n05": "5/5 snapshots in 2.0 s, 1.90 s CPU",
                                   "r01n09": "1/5 snapshots in 2.0 s, 0.00 s CPU"},
    })
    dataset = Dataset(series=[memory(nodes, {"r01n05": 0.4, "r01n09": 0.4})], facts=facts)
    (outlier,) = [f for f in analyze(dataset, correlations=False).findings if f.kind == "outlier"]
    assert outlier.nodes == "r01n[05,09]"
    assert outlier.evidence["competing_processes"] == {"r01n05": ["stress-ng"]}
