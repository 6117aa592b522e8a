"""The affinity sampler on real processes of this machine: busy processes
pinned with sched_setaffinity in the child (two on CPU 0 while the cpuset
grants more: oversubscribed; one on each CPU: healthy), a free one pushed
between CPUs by pinned hogs that take turns (unpinned); selection by
command name and by a Slurm job (a fake scontrol); the shipped script on
Python 3.6; lstopo against sysfs.

Every child is bounded in time (it stops by itself after CHILD_SECONDS)
and killed by its PID in a finally.  The findings are judged on what the
sampler saw, so other load on this shared machine changes the numbers but
not the verdicts: pinned threads cannot move, and free ones only count as
misplaced when the CPUs they could take were idle."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli import oddnode
from oddnode.measure.collect.affinity import parse_sampler_output, sampler_argv
from oddnode.readings.affinity import node_affinity_from_json
from oddnode.onnode.cpu_topology import parse_hwloc_xml, read_sysfs
from oddnode.findings.affinity import oversubscribed_cores, remote_memory, unpinned
from support.kernels import OLD_PYTHONS

# Every test samples processes competing for CPUs over time: timing-sensitive.
pytestmark = pytest.mark.timing

CHILD_SECONDS = 30
# A busy child: pinned to the CPUs given ("free": left as it is), named by
# its comm, optionally holding a touched array of MiB, spinning until its deadline.
CHILD = r'''
import os, sys, time
cpus, name, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
if cpus != "free":
    os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
with open("/proc/self/comm", "w") as comm:
    comm.write(name)
data = bytearray(mib << 20)
for i in range(0, len(data), 4096):
    data[i] = 1
end = time.monotonic() + float(sys.argv[4])
while time.monotonic() < end:
    pass
'''
# A hog that takes turns with another: busy on its CPU for PHASE seconds, asleep for the next.
HOG = r'''
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
phase, first = float(sys.argv[2]), int(sys.argv[3])
end = time.monotonic() + float(sys.argv[4])
start = time.monotonic()
while time.monotonic() < end:
    now = time.monotonic()
    if int((now - start) / phase) % 2 == first:
        time.sleep(0.005)
'''

# Two hogs a CPU at a time: the CPU they take holds three busy tasks, and
# the free process, the only one that may leave, is moved to the other
# whatever else this shared machine runs on both; PHASE seconds each turn,
# ten times the load balancer's interval on a busy CPU.
HOGS = 2
PHASE = 0.4

needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or not {0, 1} <= os.sched_getaffinity(0), reason="needs CPUs 0 and 1")


class Children:
    """Busy children started here and killed by PID, whatever happens."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, cpus: str, name: str = "oddnode-busy", mib: int = 0) -> int:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, cpus, name, str(mib), str(CHILD_SECONDS)])
        self.procs.append(proc)
        return proc.pid

    def hog(self, cpu: int, phase: float, first: int) -> None:
        self.procs.append(subprocess.Popen([sys.executable, "-c", HOG, str(cpu), str(phase), str(first),
                                            str(CHILD_SECONDS)]))

    def settle(self, name: str = "oddnode-busy", count: int | None = None) -> None:
        """Wait (2 s at most) until the children have named themselves."""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            named = [p for p in self.procs if _comm(p.pid) == name]
            if len(named) >= (count if count is not None else len(self.procs)):
                return
            time.sleep(0.02)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


@pytest.fixture
def children():
    made = Children()
    try:
        yield made
    finally:
        made.stop()


def sample(argv: list[str], env: dict | None = None):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return parse_sampler_output("cn-a17", done.stdout)


@needs_two_cpus
def test_two_busy_processes_pinned_to_cpu_0_are_oversubscribed(children):
    pids = [children.start("0"), children.start("0")]
    children.settle()
    report = sample(sampler_argv(pids=pids, seconds=2))
    assert {p.cpus_allowed for p in report.processes} == {(0,)}
    found = oversubscribed_cores({"cn-a17": report})
    assert len(found) == 1, [t.runs for p in report.processes for t in p.threads]
    (shared,) = found[0].evidence["per_node"]["cn-a17"]["shared"]
    assert shared["cpus"] == "0" and {t["pid"] for t in shared["threads"]} == set(pids) and shared["bound"]
    assert "1" in shared["idle_cpus"]
    assert unpinned({"cn-a17": report}) == []  # pinned: they cannot move


@needs_two_cpus
def test_one_busy_process_on_each_cpu_is_healthy(children):
    pids = [children.start("0"), children.start("1")]
    children.settle()
    report = sample(sampler_argv(pids=pids, seconds=2))
    assert oversubscribed_cores({"cn-a17": report}) == [] and unpinned({"cn-a17": report}) == []
    assert remote_memory({"cn-a17": report}) == []


@needs_two_cpus
def test_a_free_process_pushed_between_cpus_is_unpinned(children):
    pid = children.start("free")
    for _ in range(HOGS):
        children.hog(0, PHASE, 0)  # busy on CPU 0 in odd phases ...
        children.hog(1, PHASE, 1)  # ... and on CPU 1 in even ones: the free process is moved to the other
    children.settle(count=1)
    report = sample(sampler_argv(pids=[pid], seconds=3))
    found = unpinned({"cn-a17": report})
    assert len(found) == 1, [t.runs for p in report.processes for t in p.threads]
    (moved,) = found[0].evidence["per_node"]["cn-a17"]["moved"]
    assert moved["pid"] == pid and moved["moves"] >= 1 and moved["cpus_allowed"] == "0-1"


def test_selection_by_command_name_with_memory_on_the_one_numa_node(children):
    pids = {children.start("free", "oddnode-aff-t", mib=96), children.start("free", "oddnode-aff-t")}
    children.settle("oddnode-aff-t")
    report = sample(sampler_argv(command="oddnode-aff-t", seconds=0.5))
    assert {p.pid for p in report.processes} == pids and report.selection == {"command": "oddnode-aff-t"}
    big = max(report.processes, key=lambda p: sum(p.memory_kb.values()))
    assert sum(big.memory_kb.values()) >= 96 * 1024 and set(big.memory_kb) <= {n.node for n in report.topology.numa_nodes}
    assert remote_memory({"cn-a17": report}) == []  # one NUMA node: everything is local


def test_selection_by_slurm_job_with_a_fake_scontrol(children, tmp_path):
    pid = children.start("free")
    fake = tmp_path / "scontrol"
    fake.write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'listpids 4711' ] || exit 1\n"
                    f"echo 'PID      JOBID    STEPID   LOCALID GLOBALID'\necho '{pid}     4711     0        0       0'\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ.get('PATH', '')}"}
    report = sample(sampler_argv(slurm_job="4711", seconds=0.3), env=env)
    assert [p.pid for p in report.processes] == [pid] and report.selection == {"slurm_job": "4711"}
    report = sample(sampler_argv(slurm_job="999", seconds=0.3), env=env)
    assert report.processes == () and any("scontrol listpids 999 exited 1" in note for note in report.notes)


def test_a_pid_that_is_gone_is_a_note():
    report = sample(sampler_argv(pids=[2 ** 22 + 1], seconds=0.2))
    assert report.processes == () and report.notes == (f"pid {2 ** 22 + 1}: no such process",)


@pytest.mark.skipif(not OLD_PYTHONS, reason="no Python 3.6 on this machine")
def test_the_shipped_sampler_runs_on_python_3_6():
    report = sample(sampler_argv(pids=[os.getpid()], seconds=0.2, interpreter=OLD_PYTHONS[0]))
    assert report.processes[0].pid == os.getpid() and len(report.topology.cpus) == os.cpu_count()


@pytest.mark.skipif(shutil.which("lstopo") is None, reason="hwloc's lstopo is not installed")
def test_lstopo_and_sysfs_agree_on_this_machine():
    hwloc = parse_hwloc_xml(subprocess.run(["lstopo", "--of", "xml"], capture_output=True, text=True,
                                           check=True).stdout)
    sysfs = read_sysfs("/sys")
    strip = lambda t: [(c["cpu"], c["package"], c["siblings"], c["numa"]) for c in t["cpus"]]  # noqa: E731
    assert strip(hwloc) == strip(sysfs)
    assert [n["cpus"] for n in hwloc["numa_nodes"]] == [n["cpus"] for n in sysfs["numa_nodes"]]
    report = sample(sampler_argv(seconds=0.1))
    assert report.topology.hwloc == "agrees"


@needs_two_cpus
def test_the_command_reports_the_pinned_pair(children, tmp_path):
    pids = [children.start("0"), children.start("0")]
    children.settle()
    done = oddnode("affinity", "--pid", ",".join(map(str, pids)), "--seconds", "2", "--json", cwd=tmp_path,
                   check=False)
    document = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr  # a warning: two busy processes share CPU 0
    (node,) = document["nodes"]
    assert node_affinity_from_json(node, document["nodes"][node]).processes[0].cpus_allowed == (0,)
    assert [f["kind"] for f in document["findings"]] == ["oversubscribed-core"]
    text = oddnode("affinity", "--pid", ",".join(map(str, pids)), "--seconds", "1", cwd=tmp_path, check=False).stdout
    assert "oversubscribed-core" in text and "NUMA nodes" in text and "Threads" in text


def test_the_inventory_reports_every_numa_node_as_the_affinity_report_does():
    from oddnode.measure.collect.inventory import parse_probe_output, probe_argv

    done = subprocess.run(probe_argv(), capture_output=True, text=True, timeout=120)
    facts = parse_probe_output("cn-a17", done.stdout).facts
    topology = sample(sampler_argv(seconds=0.1)).topology
    numa = {key: value for key, value in facts.items() if key.startswith("numa")}
    assert numa == topology.facts()  # numa_nodes, numa.N.cpus, numa.N.memory_kb, numa.N.distances
