"""Interrupts stop the nodes too: SIGINT or SIGTERM to oddnode ends what the
repetition under way runs (through the local transport, the node runner and
the ssh transport's wrapper on the node), oddnode exits 130 or 143, and a
resumed check never takes the interrupted repetition's numbers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from oddnode.app.check import resumable_check, run_check
from oddnode.store import open_store
from oddnode.reach.base import NodeStatus, Target, Terminated, interrupt_status
from support.clusters.check import NODES, ScriptedCluster, kernel_stdout, plan
from support.processes import alive

# Seconds a process may take to go once oddnode was told to stop: the local
# grace (1 s) and a margin for a loaded machine.
GONE_WITHIN = 8.0
# Seconds to wait for the long command to have started.
STARTED_WITHIN = 30.0

# oddnode's own main() (its signal handlers, its exit statuses) with a
# command that runs ARGV through a transport: what `oddnode check` does in
# a repetition, without building a kernel.
ODDNODE = """\
import sys
import oddnode.main as cli
from oddnode.reach import get_transport

def app():
    transport = get_transport({transport!r}, **{options!r})
    transport.run({nodes!r}, {argv!r}, timeout=120)
    sys.exit(0)

cli.app = app
cli.main()
"""

# A stand-in for ssh that plays the node here: the remote command line split
# into words as sshd's shell would, with FAKE_NODE naming the node (exec: the
# "ssh client" is the command on the "node", so killing the client leaves
# only what the command started; the remote side sees its stdin close).
FAKE_SSH = """\
#!{python}
import os, sys
os.execvpe("sh", ["sh", "-c", sys.argv[-1]], dict(os.environ, FAKE_NODE=sys.argv[-2]))
"""


def wait_for(predicate, within: float) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def recorded_pids(files: list[Path]) -> list[int]:
    """The PIDs the long commands wrote once started, waiting for them."""
    assert wait_for(lambda: all(f.exists() and f.read_text().strip() for f in files), STARTED_WITHIN), \
        "the long command never started"
    return [int(f.read_text()) for f in files]


def start_oddnode(tmp_path: Path, transport: str, argv: list[str], nodes: list[str], **options) -> subprocess.Popen:
    script = tmp_path / "oddnode_run.py"
    script.write_text(ODDNODE.format(transport=transport, options=options, nodes=nodes, argv=argv))
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # a signal to it reaches it alone, as `kill PID` would


def stop(oddnode: subprocess.Popen, signum: int) -> int:
    oddnode.send_signal(signum)
    try:
        oddnode.wait(GONE_WITHIN + 5)
    except subprocess.TimeoutExpired:
        oddnode.kill()
        pytest.fail("oddnode did not exit after the signal")
    return oddnode.returncode


def cleanup(pids: list[int]) -> None:
    """Kill, by their recorded PIDs, whatever a failing test left running."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def long_command(pid_file: Path) -> list[str]:
    """A command that records its PID, then sleeps (in the same process) for a minute."""
    return ["sh", "-c", f"echo $$ > {pid_file}; exec sleep 60"]


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_the_local_process_group_and_exits_128_plus_the_signal(tmp_path, signum, status):
    pid_file = tmp_path / "sleep.pid"
    # The sleep is a grandchild: it goes because its whole process group does.
    argv = ["sh", "-c", f"sh -c 'echo $$ > {pid_file}; exec sleep 60' & wait"]
    oddnode = start_oddnode(tmp_path, "local", argv, [])
    pids = recorded_pids([pid_file])
    try:
        assert stop(oddnode, signum) == status
        assert wait_for(lambda: not alive(pids[0]), GONE_WITHIN), "the command outlived oddnode"
    finally:
        cleanup(pids)


# Any command of the real command line: click turns an interrupt into
# "Aborted!" and status 1, which main() gives back as the signal's status.
ANY_COMMAND = """\
import sys, time
import oddnode.main as cli

@cli.app.command("nap")
def nap() -> None:
    open({ready!r}, "w").write("1")
    time.sleep(60)

sys.argv = ["oddnode", "nap"]
cli.main()
"""


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_every_command_exits_with_the_signal_s_status_not_findings(tmp_path, signum, status):
    ready = tmp_path / "ready"
    script = tmp_path / "nap.py"
    script.write_text(ANY_COMMAND.format(ready=str(ready)))
    oddnode = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    assert wait_for(ready.exists, STARTED_WITHIN)
    assert stop(oddnode, signum) == status


@pytest.mark.slow
def test_the_node_runner_ends_the_tool_it_started_in_a_session_of_its_own(tmp_path):
    from oddnode.reach.jobs import tool_argv

    pid_file = tmp_path / "tool.pid"
    # The runner starts a tool (fio, hpcc) in its own session, out of reach
    # of a signal to the runner's process group: the runner must end it.
    argv = tool_argv("sh", ["-c", f"echo $$ > {pid_file}; exec sleep 60"], interpreter=sys.executable)
    oddnode = start_oddnode(tmp_path, "local", argv, [])
    pids = recorded_pids([pid_file])
    try:
        assert stop(oddnode, signal.SIGTERM) == 143
        assert wait_for(lambda: not alive(pids[0]), GONE_WITHIN), "the tool outlived the runner"
    finally:
        cleanup(pids)


def test_a_stop_from_another_thread_ends_the_group_as_a_timeout_would(tmp_path):
    """The slurm transport runs several srun steps from a pool's threads; an
    interrupt reaches the main thread only, which stops them all."""
    import threading

    from oddnode.reach.local import run_process_group, stop_process_groups

    pid_file = tmp_path / "sleep.pid"
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(run_process_group(long_command(pid_file), 120)))
    worker.start()
    pids = recorded_pids([pid_file])
    try:
        assert stop_process_groups() == 1
        worker.join(GONE_WITHIN)
        assert not worker.is_alive() and outcome[0].timed_out and outcome[0].returncode is None
        assert not alive(pids[0])
        assert stop_process_groups() == 0  # none left under way
    finally:
        cleanup(pids)


def test_an_interrupt_while_the_output_readers_start_ends_the_group_and_goes_on(tmp_path, monkeypatch):
    """SIGINT can land in Thread.start() of the second output reader, the
    command already running: the interrupt goes on (no error about a
    thread not started) and the command's group is gone."""
    import threading

    from oddnode.reach.local import run_process_group

    pid_file = tmp_path / "sleep.pid"
    start = threading.Thread.start
    starts = []

    def interrupted_second_start(thread):
        starts.append(thread)
        if len(starts) == 2:
            recorded_pids([pid_file])  # the command is running by then
            raise KeyboardInterrupt
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", interrupted_second_start)
    with pytest.raises(KeyboardInterrupt):
        run_process_group(long_command(pid_file), 120, grace=1.0)
    pids = recorded_pids([pid_file])
    try:
        assert wait_for(lambda: not alive(pids[0]), GONE_WITHIN)
    finally:
        cleanup(pids)


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ssh = bin_dir / "ssh"
    ssh.write_text(FAKE_SSH.format(python=sys.executable))
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    config = tmp_path / "ssh_config"
    config.write_text("# oddnode test\n")
    return config


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)])
def test_the_command_on_each_ssh_node_ends_with_its_ssh_client(tmp_path, fake_ssh, signum, status):
    """Even oddnode killed outright leaves nothing running on the nodes: the
    ssh sessions' stdin closes, and the wrapper on the node ends the command."""
    nodes = ["n1", "n2"]
    argv = ["sh", "-c", f"echo $$ > {tmp_path}/$FAKE_NODE.pid; exec sleep 60"]
    oddnode = start_oddnode(tmp_path, "ssh", argv, nodes, ssh_config=str(fake_ssh))
    pids = recorded_pids([tmp_path / f"{node}.pid" for node in nodes])
    try:
        assert stop(oddnode, signum) == status
        assert wait_for(lambda: not any(map(alive, pids)), GONE_WITHIN), "a node's command outlived oddnode"
    finally:
        cleanup(pids)


def test_a_finished_ssh_command_returns_at_once_its_watcher_holding_nothing_open(tmp_path, fake_ssh):
    from oddnode.reach.ssh import SshTransport

    started = time.monotonic()
    results = SshTransport(ssh_config=fake_ssh).run(["n1", "n2"], ["sh", "-c", "echo done; exit 3"], timeout=30)
    assert time.monotonic() - started < 5
    assert {node: (r.status, r.stdout, r.exit_code) for node, r in results.items()} == {
        node: (NodeStatus.FAILED, "done\n", 3) for node in ("n1", "n2")}


def test_interrupts_read_as_the_shell_shows_a_signal():
    assert interrupt_status(KeyboardInterrupt()) == 130
    assert interrupt_status(Terminated()) == 143
    assert isinstance(Terminated(), KeyboardInterrupt)  # every `except KeyboardInterrupt` stops on SIGTERM too


# -- resuming ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_resumed_check_redoes_the_interrupted_repetition_with_nothing_of_it_kept(tmp_path):
    cluster = ScriptedCluster(interrupt_at=2)
    with open_store(tmp_path / "check.duckdb") as store:
        with pytest.raises(KeyboardInterrupt):
            run_check(store, Target(NODES, cluster), plan())
        check_id, described, stored_plan = resumable_check(store)
        cluster.interrupt_at = None
        run_check(store, Target(described["nodes"], cluster), stored_plan, resume=check_id)
        # The kernel calls were: 1 (stored), 2 (interrupted), then 3 and 4 on resume;
        # a triad from call 2 would be the one scaled by 1.002.
        triads = {round(value, 3) for (value,) in store.con.execute(
            "SELECT value FROM results WHERE benchmark = 'memory.triad' AND label = 'node01'").fetchall()}
        expected = {round(float(line.split()[2]), 3) for call in (1, 3, 4)
                    for line in kernel_stdout(1 + 0.001 * call).splitlines() if line.startswith("result triad")}
        assert triads == expected


def test_an_interrupt_while_a_repetition_is_stored_keeps_none_of_it(tmp_path, monkeypatch):
    from oddnode.store import Store

    cluster = ScriptedCluster()
    adding = Store.add_node_status

    def interrupted(self, run_id, step, statuses):
        if step == "memory" and cluster.kernel_calls == 2:
            raise Terminated()
        return adding(self, run_id, step, statuses)

    monkeypatch.setattr(Store, "add_node_status", interrupted)
    with open_store(tmp_path / "check.duckdb") as store:
        with pytest.raises(Terminated):
            run_check(store, Target(NODES, cluster), plan())
        assert store.con.execute("SELECT DISTINCT repetition FROM results WHERE benchmark LIKE 'memory.%'"
                                 ).fetchall() == [(1,)]
        assert store.con.execute("SELECT DISTINCT repetition FROM raw_outputs").fetchall() == [(1,)]


@pytest.mark.parametrize(("interrupt", "status"), [(KeyboardInterrupt(), 130), (Terminated(), 143)])
def test_check_says_what_it_stopped_and_exits_130_or_143(tmp_path, monkeypatch, interrupt, status):
    import oddnode.app.check
    from oddnode.main import app

    def run_check_interrupted(*args, **kwargs):
        raise interrupt

    monkeypatch.setattr(oddnode.app.check, "run_check", run_check_interrupted)
    db = tmp_path / "check.duckdb"
    result = CliRunner().invoke(app, ["check", "--transport", "local", "--db", str(db)])
    assert result.exit_code == status, result.output
    assert "stopped: the diagnostics stage on" in " ".join(result.output.split())
    assert "check --resume" in result.output
