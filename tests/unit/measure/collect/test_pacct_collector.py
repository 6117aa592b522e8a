"""The node side of process accounting: the marker that tells which PID
namespace a file accounts, the whole-file reading, the /proc sampler on a
scripted /proc, the collector's script run as a node runs it, and the
parsing, classifying and storing of what nodes answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.cli import FIXTURES
from oddnode.onnode import accounting_collector as node_collector, proc_sampler
from oddnode.measure.collect.accounting import (
    AccountingOutputError,
    classify,
    collect_processes,
    collector_argv,
    parse_collector_output,
    store_processes,
)
from oddnode.onnode.accounting_collector import ENCLOSING, OURS, ABSENT, find_marker, whole_file
from oddnode.onnode.proc_sampler import PF_KTHREAD, ProcSampler, tally_seen
from oddnode.core.model import CommandCount, NodeProcesses
from oddnode.reach.base import NodeResult, NodeStatus, Target
from support.outputs import pack
from support.clusters.accounting import AccountingCluster as ScriptedCluster, answer


# ---------------------------------------------------------------- the marker


def test_the_marker_tells_this_namespace_from_an_enclosing_one(tmp_path):
    me = os.getpid()
    path = tmp_path / "pacct"
    marker = ("oddmark-a1b2c3d", 4321)
    path.write_bytes(pack(comm=b"sed") + pack(comm=b"oddmark-a1b2c3d", pid=4321, ppid=me))
    assert find_marker(str(path), 0, marker) == OURS
    # Found, but numbered otherwise: the file is an enclosing namespace's (a host's, seen from a container).
    path.write_bytes(pack(comm=b"oddmark-a1b2c3d", pid=98765, ppid=98000))
    assert find_marker(str(path), 0, marker) == ENCLOSING
    # Another collector's marker with our very PIDs (a sibling namespace started alike) is not ours.
    path.write_bytes(pack(comm=b"oddmark-zzzzzzz", pid=4321, ppid=me))
    assert find_marker(str(path), 0, marker) == ABSENT
    # Records before the offset are not looked at: accounting into it stopped since.
    path.write_bytes(pack(comm=b"oddmark-a1b2c3d", pid=4321, ppid=me) + pack(comm=b"sed"))
    assert find_marker(str(path), 64, marker) == ABSENT


def test_markers_get_names_of_their_own_and_no_count():
    names = {node_collector.spawn_marker()[0] for _ in range(5)}
    assert len(names) == 5 and all(len(name) == 15 for name in names)
    assert node_collector.is_marker(read_one(pack(comm=b"oddmark-a1b2c3d")))
    assert not node_collector.is_marker(read_one(pack(comm=b"oddnode-daemon")))


def read_one(data):
    from oddnode.onnode.pacct import unpack_record

    return unpack_record(data, "x", 0)


def test_a_given_file_that_accounting_does_not_write_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(pack(comm=b"sed"))
    with pytest.raises(node_collector.CollectorError, match=r"did not record a process that ended here: accounting "
                                                              r"into it is off.*accton"):
        node_collector.collect(1.0, pacct=str(path))


def test_an_unreadable_given_file_is_named(tmp_path):
    with pytest.raises(node_collector.CollectorError, match="cannot read .*missing"):
        node_collector.collect(1.0, pacct=str(tmp_path / "missing"))


def test_a_whole_file_is_read_over_the_span_of_its_records(tmp_path):
    path = tmp_path / "pacct.0"
    path.write_bytes(pack(comm=b"sed", btime=1000, etime=100.0) + pack(comm=b"sed", btime=1006)
                     + pack(comm=b"cron", btime=1030, etime=500.0) + b"\0" * 10)
    out = whole_file(str(path), [])
    assert out["method"] == "pacct" and out["start"] == 1000 and out["seconds"] == 35.0
    assert out["commands"]["sed"] == {"executions": 2, "cpu_seconds": 0.0, "elapsed_seconds": 1.0,
                                      "bursts": 2, "parents": ["?"]}
    assert any("partial record (10 bytes)" in note for note in out["notes"])


def test_without_root_our_own_accounting_is_not_tried(monkeypatch):
    monkeypatch.setattr(node_collector.os, "geteuid", lambda: 1000)
    notes = []
    assert node_collector.own_interval(1.0, notes) is None
    assert notes == ["not root: acct(2) needs CAP_SYS_PACCT"]
    with pytest.raises(node_collector.CollectorError, match="kernel accounting is not available: not root"):
        node_collector.collect(0.1, method="acct", site_files=())


# ---------------------------------------------------------------- /proc


class FakeProc:
    """A /proc of stat files we write, and a clock we move."""

    def __init__(self, root):
        self.root = root
        self.now = 0.0
        (root / "stat").write_text("cpu  1 2 3\nbtime 1700000000\n")

    def put(self, pid, comm, start, ticks=0, flags=0x400100):
        fields = ["S", 1, pid, pid, 0, -1, flags, 0, 0, 0, 0, ticks, 0, 0, 0, 20, 0, 1, 0, start, 1, 1]
        (self.root / str(pid)).mkdir(exist_ok=True)
        (self.root / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(map(str, fields)) + "\n")

    def drop(self, pid):
        (self.root / str(pid) / "stat").unlink()
        (self.root / str(pid)).rmdir()

    def clock(self):
        return self.now


def test_the_sampler_counts_processes_started_while_it_watched(tmp_path):
    proc = FakeProc(tmp_path)
    proc.put(1, "init", 10, ticks=50)
    proc.put(50, "sshd", 20, ticks=100)
    proc.put(60, "kworker/0:1", 30, flags=PF_KTHREAD)
    sampler = ProcSampler(str(tmp_path), exclude={99}, clock=proc.clock)
    proc.put(99, "python3", 40)  # the sampler itself: excluded
    proc.put(200, "python3", 5000)  # forked, not yet exec'd
    proc.now = 0.01
    sampler.sample()
    proc.put(200, "sed", 5000, ticks=2)  # its exec, seen while it is young
    proc.put(201, "sh", 5050)
    proc.put(50, "sshd", 20, ticks=130)
    proc.now = 0.02
    sampler.sample()
    proc.drop(200)
    proc.put(201, "sh", 7000)  # ended and its PID reused within one period
    proc.now = 0.03
    sampler.sample()
    counts = tally_seen(sampler.finish(), 1_700_000_000, 100)
    assert counts["sed"] == {"executions": 1, "cpu_seconds": 0.02, "elapsed_seconds": 0.0, "bursts": 1,
                             "parents": ["init"]}
    assert counts["sh"]["executions"] == 2 and counts["sh"]["bursts"] == 2  # starts 50.5 s and 70 s
    assert counts["sshd"] == {"executions": 0, "cpu_seconds": 0.3, "elapsed_seconds": 0.0, "bursts": 0,
                              "parents": []}
    assert "init" not in counts and "kworker/0:1" not in counts and "python3" not in counts


def test_a_process_too_old_to_exec_keeps_its_first_name(tmp_path):
    proc = FakeProc(tmp_path)
    sampler = ProcSampler(str(tmp_path), clock=proc.clock)
    proc.put(300, "bash", 100)
    sampler.sample()
    proc.now = proc_sampler.YOUNG + 0.1
    proc.put(300, "vim", 100)  # not re-read: a process that old renames itself rarely
    sampler.sample()
    assert "bash" in tally_seen(sampler.finish(), 0, 100)


# ---------------------------------------------------------------- the collector's script


def run_collector(*arguments):
    argv = collector_argv(*arguments, interpreter=sys.executable)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_the_script_runs_as_on_a_node_and_says_short_commands_are_missed():
    done = run_collector(0.3, None, "proc")
    assert done.returncode == 0, done.stderr
    report = parse_collector_output("cn-a17", done.stdout)
    assert report.method == "proc" and report.source == "/proc" and 0.25 <= report.seconds < 5
    assert any("missed" in note for note in report.notes)
    assert json.loads(done.stdout)["missed_short_lived"] is True


def test_the_script_reads_a_whole_file():
    done = run_collector(0, str(FIXTURES / "pacct" / "v3_x86_64.pacct"))
    assert done.returncode == 0, done.stderr
    report = parse_collector_output("gpu003", done.stdout)
    assert report.method == "pacct" and report.commands["true"].executions == 3
    assert report.commands["sh"].executions == 5 and report.commands["python3*"].executions == 1


def test_the_script_names_a_file_of_another_version(tmp_path):
    path = tmp_path / "v2"
    path.write_bytes(pack(version=2))
    done = run_collector(0, str(path))
    assert done.returncode == 2
    assert done.stderr.strip().endswith(f"oddnode accounting: {path} at byte 0 (record 0): a version 2 record, not 3: "
                                        "the kernel was built without CONFIG_BSD_PROCESS_ACCT_V3, whose records "
                                        "oddnode reads")


def test_seconds_are_checked_before_anything_runs():
    with pytest.raises(ValueError, match="0 only with --pacct"):
        collector_argv(0)
    with pytest.raises(ValueError, match="unknown accounting method 'sar'"):
        collector_argv(5, method="sar")


# ---------------------------------------------------------------- the admin's side


@pytest.mark.parametrize("stdout, problem", [
    ("", "not JSON"),
    ("Welcome to cn-a17\n{\"collector_version\": 1", "not valid JSON"),
    ("[1, 2]", "not JSON"),
    (json.dumps({"collector_version": 9}), "collector_version is 9, expected 1"),
    (answer({}, method="sar"), "unknown accounting method 'sar'"),
    (answer({"sed": (-1, 1)}), "executions of 'sed' is not a number >= 0: -1"),
    (answer({}, seconds="long"), "seconds is not a number >= 0"),
])
def test_bad_answers_name_the_node_and_what_is_wrong(stdout, problem):
    with pytest.raises(AccountingOutputError, match=problem) as caught:
        parse_collector_output("cn-a17", stdout)
    assert str(caught.value).startswith("cn-a17: ")


def test_a_login_banner_before_the_answer_is_ignored():
    report = parse_collector_output("r01n01", "Last login: yesterday\n" + answer({"sed": (4, 2)}))
    assert report.commands == {"sed": CommandCount(4, 0.5, 1.0, 2)}


@pytest.mark.slow
def test_every_node_at_once_one_bad_node_costs_only_itself(store):
    cluster = ScriptedCluster({
        "gpu003": answer({"sed": (40, 30)}),
        "gpu004": answer({"sed": (2, 2)}),
        "gpu005": NodeResult("gpu005", NodeStatus.FAILED, "",
                             "oddnode accounting: /var/log/account/pacct at byte 0 (record 0): a version 2 record",
                             2, 1.0),
        "gpu006": NodeResult("gpu006", NodeStatus.UNREACHABLE, "", "ssh: connect: No route to host", None, 0.1),
        "gpu007": "garbage",
    })
    nodes = ["gpu003", "gpu004", "gpu005", "gpu006", "gpu007"]
    result = collect_processes(cluster, nodes, seconds=30, pacct="/var/log/account/pacct")
    assert cluster.timeout == 90 and "--pacct=/var/log/account/pacct" in cluster.argv
    assert sorted(result.reports) == ["gpu003", "gpu004"]
    assert result.reasons == {"gpu005": "/var/log/account/pacct at byte 0 (record 0): a version 2 record",
                              "gpu006": "unreachable: ssh: connect: No route to host",
                              "gpu007": "the collector's output is not JSON: 'garbage'"}
    run_id = store_processes(store, Target(nodes, cluster), result, "oddnode processes")
    dataset = store.load_dataset()
    assert dataset.processes == result.reports and dataset.processes["gpu003"].commands["sed"].executions == 40
    assert {node: trouble.status for node, trouble in dataset.node_trouble.items()} == {
        "gpu005": "failed", "gpu006": "unreachable", "gpu007": "failed"}
    assert store.load_processes(run_id) == result.reports


def test_the_latest_run_is_the_one_analysed(store):
    first = {"cn-1": NodeProcesses("cn-1", 60.0, "proc", {"sed": CommandCount(1, 0.0, 0.0, 1)})}
    second = {"cn-2": NodeProcesses("cn-2", 10.0, "acct", {}, notes=("a note",), start=5.0)}
    for reports in (first, second):
        with store.transaction():
            store.add_process_counts(store.new_run("oddnode processes"), reports.values())
    assert store.load_dataset().processes == second


def test_classify_counts_a_node_without_result_as_unreachable():
    result = classify({}, ["cn-a17"], 60.0)
    assert result.reasons == {"cn-a17": "unreachable: the transport returned no result"}


def test_a_site_file_of_another_version_found_on_its_own_is_passed_over(tmp_path, monkeypatch):
    path = tmp_path / "pacct"
    path.write_bytes(pack(version=2))
    monkeypatch.setattr(node_collector.os, "geteuid", lambda: 1000)  # and no accounting of our own
    monkeypatch.setattr(node_collector, "_aligned_size", lambda path: 0)  # as if the v2 record were the marker's
    out = node_collector.collect(0.05, site_files=(str(path),))
    assert out["method"] == "proc"
    assert out["notes"][0] == f"{path} at byte 0 (record 0): a version 2 record, not 3: the kernel was built " \
                              "without CONFIG_BSD_PROCESS_ACCT_V3, whose records oddnode reads: not used"
