"""Ctrl-C during `oddnode check` over ssh, and inside a Slurm allocation
through srun, on 4 real testbed nodes (root): nothing of the interrupted
repetition runs on in the nodes, and `check --resume` redoes that
repetition from scratch."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import oddnode as oddnode_package
from oddnode.store import open_store
from oddnode.testbed import _state, _system, slurm
from support.testbed import needs_root, running_testbed, slurm_testbed

pytestmark = [needs_root, slurm_testbed]  # its second testbed runs Slurm

NODES = 4
# A memory repetition of about 25 s on the testbed's shared CPUs: caught a
# second in, it would run on far longer than GONE_WITHIN if nothing stopped it.
MEMORY = ["--memory-elements", "2000000", "--memory-ntimes", "5", "--memory-min-seconds", "0.25", "--threads", "1"]
REPETITIONS = 2
# Seconds the nodes may take to be rid of the interrupted repetition: the
# wrapper's SIGTERM at once, its SIGKILL after REMOTE_KILL_GRACE (5 s).
GONE_WITHIN = 8.0
# Through Slurm: srun's SIGTERM reaches the tasks at once; srun itself gets
# SIGKILL 10 s later, and slurmstepd ends the step's last processes then.
GONE_WITHIN_SLURM = 20.0
STARTED_WITHIN = 60.0  # the first repetition builds the kernel on every node
SOURCE = Path(oddnode_package.__file__).resolve().parents[1]  # the src directory these tests import
HAS_SLURM = all(shutil.which(tool) for tool in slurm.TOOLS)


@pytest.fixture(scope="module", params=["ssh", pytest.param("slurm", marks=pytest.mark.skipif(
    not HAS_SLURM, reason="no Slurm (Debian: slurm-wlm, munge)"))])
def transport(request) -> str:
    """How the check reaches the nodes: over ssh, or inside an allocation."""
    return request.param


@pytest.fixture(scope="module")
def bed(transport, tmp_path_factory):
    yield from running_testbed(tmp_path_factory, NODES, slurm=transport == "slurm")


def in_allocation(bed, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """``salloc -N NODES ARGV`` as an administrator runs it, with the
    environment that reaches the testbed's Slurm and these tests' oddnode."""
    return ["salloc", f"-N{NODES}", *argv], {**os.environ, **slurm.environment(bed.state_dir),
                                             "PYTHONPATH": str(SOURCE)}


def node_namespaces(bed) -> dict[str, int]:
    """Each node's PID namespace (its init's), by node."""
    state = _state.require_state(bed.state_dir)
    return {node: _system.pid_namespace(_state.require_running(state, node)["pid"]) for node in bed.nodes}


def processes(namespaces: dict[str, int]) -> dict[str, set[tuple[int, int]]]:
    """The (PID, start time) of every live process inside each node."""
    found: dict[str, set[tuple[int, int]]] = {node: set() for node in namespaces}
    by_namespace = {namespace: node for node, namespace in namespaces.items()}
    for entry in _system.process_table():
        node = by_namespace.get(entry.pidns)
        if node is not None and entry.proc.state not in ("Z", "X"):
            found[node].add((entry.proc.pid, entry.proc.start))
    return found


def extra(now: dict[str, set[tuple[int, int]]], before: dict[str, set[tuple[int, int]]]) -> dict[str, int]:
    """How many processes each node runs beyond those it ran before the check."""
    return {node: len(now[node] - before[node]) for node in now if now[node] - before[node]}


def wait_for(predicate, within: float, step: float = 0.2):
    end = time.monotonic() + within
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def oddnode(*args: str) -> list[str]:
    return [sys.executable, "-m", "oddnode", *args]


def stored_repetitions(db) -> list[int]:
    try:
        with open_store(db, read_only=True) as store:
            return [r for (r,) in store.con.execute("SELECT DISTINCT repetition FROM raw_outputs ORDER BY 1")
                    .fetchall()]
    except Exception:  # the check holds the store while it writes
        return []


def start_check(bed, transport: str, db: Path, cwd: Path) -> tuple[subprocess.Popen, int]:
    """The check as a process, and the PID of oddnode itself (inside
    ``salloc`` through Slurm, as an administrator runs it there)."""
    options = ["--db", str(db), "--stages", "memory", "-r", str(REPETITIONS), *MEMORY]
    if transport == "ssh":
        argv, env = oddnode("check", "-w", bed.nodeset, "--transport", "ssh", "--ssh-config", str(bed.ssh_config),
                            *options), None
    else:
        argv, env = in_allocation(bed, oddnode("check", "--transport", "slurm", *options))
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                               start_new_session=True)  # the signal reaches oddnode alone, as `kill -INT PID` would
    if transport == "ssh":
        return process, process.pid
    # salloc's one child, once the allocation is granted.
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    child = wait_for(lambda: children.exists() and children.read_text().split(), 60)
    assert child, "salloc never started oddnode"
    return process, int(child[0])


def test_ctrl_c_stops_the_nodes_and_resume_redoes_the_repetition(bed, transport, tmp_path):
    namespaces = node_namespaces(bed)
    before = processes(namespaces)
    db = tmp_path / "check.duckdb"
    check, pid = start_check(bed, transport, db, tmp_path)  # its HTML report goes in tmp_path
    try:
        assert wait_for(lambda: 1 in stored_repetitions(db), STARTED_WITHIN), "repetition 1 was never stored"
        # Repetition 2 under way on every node.
        busy = wait_for(lambda: len(extra(processes(namespaces), before)) == NODES, 30, 0.1)
        assert busy, "repetition 2 never ran on every node"
        # Through Slurm the allocation's own processes count as busy too:
        # give srun the seconds it takes to start the repetition's tasks.
        time.sleep(1.0 if transport == "ssh" else 6.0)
        assert stored_repetitions(db) == [1], "caught too late: repetition 2 already ended"
        os.kill(pid, signal.SIGINT)
        _, err = check.communicate(timeout=60)
    finally:
        if check.poll() is None:
            check.kill()
            check.wait()
    assert check.returncode == 130, err
    assert f"stopped: memory repetition 2 of {REPETITIONS}" in " ".join(err.split())

    left = wait_for(lambda: not extra(processes(namespaces), before),
                    GONE_WITHIN if transport == "ssh" else GONE_WITHIN_SLURM)
    assert left, f"processes left in the nodes: {extra(processes(namespaces), before)}"
    assert stored_repetitions(db) == [1]  # nothing of the interrupted repetition

    resumed_at = time.time()
    argv, env = oddnode("check", "--resume", "--db", str(db)), None
    if transport == "slurm":
        argv, env = in_allocation(bed, argv)
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180)
    assert done.returncode in (0, 1), done.stderr
    with open_store(db, read_only=True) as store:
        rows = store.con.execute("""
            SELECT repetition, count(*), count(DISTINCT run_id) FROM raw_outputs GROUP BY 1 ORDER BY 1
        """).fetchall()
        assert rows == [(r, NODES, 1) for r in range(1, REPETITIONS + 1)]  # every node once per repetition
        duplicated = store.con.execute("""
            SELECT count(*) FROM (SELECT benchmark, metric, label, repetition FROM results
                                  WHERE benchmark LIKE 'memory.%' GROUP BY ALL HAVING count(*) > 1)
        """).fetchone()[0]
        assert duplicated == 0
        # Repetition 2 is the resumed run's own: its runners started after the resume did.
        for (stdout,) in store.con.execute("SELECT stdout FROM raw_outputs WHERE repetition = 2").fetchall():
            launched = json.loads(stdout.strip().splitlines()[-1])["start"]["launched"]
            assert launched >= resumed_at
