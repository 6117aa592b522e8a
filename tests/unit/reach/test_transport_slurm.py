"""The slurm transport: the srun command it builds, the parser of srun's
labelled output, and whole runs through a fake srun that behaves like
``srun --label`` (one task per node, ``SLURMD_NODENAME`` set in each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oddnode.core.nodes import NodeNameError
from oddnode.reach import NodeStatus, TransportError, get_transport, python_command
from oddnode.reach.local import TimedLine
from oddnode.reach.slurm import (
    MAX_CONCURRENT_STEPS,
    PIECE,
    WRAPPER_NAME,
    WRAPPER_SCRIPT,
    allocation_nodes,
    parse_srun_output,
    srun_command,
    timed_lines,
)

from support.processes import alive

# A stand-in for srun: parses the options oddnode gives, starts the program
# once per node of --nodelist with SLURMD_NODENAME set (as slurmstepd does),
# all at once, and relabels every output line "<task id>: " as --label does,
# padding ids to the widest, cutting a line longer than srun's 1 KiB buffer
# into labelled pieces as srun does. Nodes listed in FAKE_SRUN_DOWN never
# start a task.
FAKE_SRUN = """\
#!{python}
import json, os, subprocess, sys, threading
from ClusterShell.NodeSet import NodeSet

if os.environ.get("FAKE_SRUN_LOG"):
    with open(os.environ["FAKE_SRUN_LOG"], "w") as log:
        json.dump(sys.argv, log)
args = sys.argv[1:]
options = {{}}
while args and args[0].startswith("-"):
    key, _, value = args.pop(0).partition("=")
    options[key] = value
assert "--label" in options, "fake srun only emulates --label"
nodes = list(NodeSet(options["--nodelist"]))
assert len(nodes) == int(options["--nodes"]) == int(options["--ntasks"])
down = set(filter(None, os.environ.get("FAKE_SRUN_DOWN", "").split(",")))
width = len(str(len(nodes) - 1))
lock = threading.Lock()

def relay(stream, out, label):
    for line in iter(stream.readline, b""):
        with lock:
            for start in range(0, len(line), 1024):
                piece = line[start:start + 1024]
                out.write(label + piece + (b"" if piece.endswith(b"\\n") else b"\\n"))
            out.flush()

tasks, relays = [], []
for task_id, node in enumerate(nodes):
    if node in down:
        sys.stderr.write(f"srun: error: Task launch for StepId=42.0 failed on node {{node}}: "
                         "Communication connection failure\\n")
        sys.stderr.flush()
        continue
    label = f"{{task_id:>{{width}}}}: ".encode()
    proc = subprocess.Popen(args, env=dict(os.environ, SLURMD_NODENAME=node), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tasks.append((task_id, node, proc))
    for stream, out in ((proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)):
        relays.append(threading.Thread(target=relay, args=(stream, out, label)))
        relays[-1].start()
for relay_thread in relays:
    relay_thread.join()
worst = 1 if down else 0
for task_id, node, proc in tasks:
    rc = proc.wait()
    if rc:
        sys.stderr.write(f"srun: error: {{node}}: task {{task_id}}: Exited with exit code {{rc}}\\n")
    worst = max(worst, rc)
sys.exit(worst)
"""

ECHO_ARGS = "import json, sys; print(json.dumps(sys.argv[1:]))"


@pytest.fixture
def fake_srun(tmp_path, monkeypatch):
    """Put the fake srun first on PATH; returns the file it logs its argv to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN.format(python=sys.executable))
    srun.chmod(0o755)
    log = tmp_path / "srun-argv.json"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SRUN_LOG", str(log))
    monkeypatch.delenv("FAKE_SRUN_DOWN", raising=False)
    return log


def slurm(**options):
    return get_transport("slurm", **options)


# -- the command ------------------------------------------------------------


def test_srun_command_is_exactly_as_expected():
    argv = ["python3", "-c", "print(1)"]
    assert srun_command(["node001", "node002", "node003"], argv, 30, marker="m") == [
        "srun",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--nodelist=node[001-003]",
        "--kill-on-bad-exit=0",
        "--wait=0",
        "--time=2",
        "--overlap",
        "--label",
        "/bin/sh",
        "-c",
        WRAPPER_SCRIPT,
        WRAPPER_NAME,
        "m",
        "python3",
        "-c",
        "print(1)",
    ]


def test_srun_command_folds_and_deduplicates_nodes():
    command = srun_command(["node007", "login1", "node001", "node002", "node001"], ["true"], 600)
    assert "--nodelist=login1,node[001-002,007]" in command
    assert "--nodes=4" in command and "--ntasks=4" in command
    assert "--time=11" in command  # ten minutes, plus one of margin


def test_srun_command_leaves_out_unbuffered():
    # srun -u runs tasks on a pseudo-terminal since Slurm 20.11.
    command = srun_command(["node1"], ["true"], 5)
    assert "--unbuffered" not in command and "-u" not in command


@pytest.mark.parametrize("bad", ["node1;reboot", "-w", "node[1-2]", "a b", ""])
def test_srun_command_refuses_bad_node_names(bad):
    with pytest.raises(NodeNameError):
        srun_command([bad], ["true"], 5)


def test_srun_command_refuses_nothing_to_do():
    with pytest.raises(TransportError):
        srun_command([], ["true"], 5)
    with pytest.raises(TransportError):
        srun_command(["node1"], [], 5)


# -- the wrapper, run by a real /bin/sh -----------------------------------------


def run_wrapper(argv, env):
    return subprocess.run(["/bin/sh", "-c", WRAPPER_SCRIPT, WRAPPER_NAME, "mark", *argv],
                          capture_output=True, text=True, env=env, check=False)


def encoded(text: str, ended: bool = True) -> list[str]:
    """The lines the wrapper prints for this output: each line in pieces of
    PIECE bytes, "+" before a continued one, "|" before a line's last; the
    newline it adds after a program that ended."""
    lines = []
    for line in (text + "\n" if ended else text).splitlines():
        while len(line) > PIECE:
            lines.append("+" + line[:PIECE])
            line = line[PIECE:]
        lines.append("|" + line)
    return lines


def labelled(task, text: str, ended: bool = True) -> str:
    """A task's output as srun --label relays the wrapper's lines."""
    return "".join(f"{task}: {line}\n" for line in encoded(text, ended))


def test_wrapper_names_the_node_from_slurmd_nodename():
    done = run_wrapper(["sh", "-c", "echo out; exit 3"], env={"PATH": os.environ["PATH"], "SLURMD_NODENAME": "cn042"})
    assert done.returncode == 3
    assert done.stdout == "mark begin cn042\n" + "".join(f"{line}\n" for line in encoded("out\n")) + \
        "mark end cn042 3\n"


def test_wrapper_keeps_long_lines_whole_in_short_encoded_ones():
    report = '{"facts": "' + "x" * 5000 + '"}'  # one line of 5 KiB, as the probe's JSON
    done = run_wrapper(["printf", "%s", report], env={"PATH": os.environ["PATH"], "SLURMD_NODENAME": "gpu003"})
    lines = done.stdout.splitlines()
    assert lines[0] == "mark begin gpu003" and lines[-1] == "mark end gpu003 0" and done.returncode == 0
    assert lines[1:-1] == encoded(report) and all(len(line) <= PIECE + 1 for line in lines[1:-1])


@pytest.mark.slow
def test_wrapper_gives_the_program_s_status_even_when_it_leaves_a_child_behind():
    # The child keeps the program's output open, so the wrapper ends with it.
    done = run_wrapper(["sh", "-c", "sleep 2 & echo started; exit 7"], env={"PATH": os.environ["PATH"]})
    assert done.returncode == 7 and done.stdout.splitlines()[-1].endswith(" 7")


def test_wrapper_falls_back_to_hostname_s():
    short = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    done = run_wrapper(["true"], env={"PATH": os.environ["PATH"]})
    assert done.stdout.splitlines()[0] == f"mark begin {short}"


# -- the parser ---------------------------------------------------------------


def test_parse_labelled_output_per_node():
    stdout = (
        " 1: M begin node002\n"
        " 0: M begin node001\n"
        + labelled(" 0", "first\nsecond\n\n")
        + labelled(" 1", "no newline at end")
        + " 1: M end node002 5\n"
        " 0: M end node001 0\n"
    )
    stderr = " 1: complaint\nsrun: error: node002: task 1: Exited with exit code 5\n"
    results = parse_srun_output(["node001", "node002"], timed_lines(stdout), timed_lines(stderr), marker="M")
    assert results["node001"].status is NodeStatus.OK
    assert results["node001"].stdout == "first\nsecond\n\n"
    assert results["node001"].stderr == ""
    assert results["node002"].status is NodeStatus.FAILED
    assert results["node002"].exit_code == 5
    assert results["node002"].stdout == "no newline at end"
    assert results["node002"].stderr == "complaint\n"


def test_parse_durations_run_from_begin_to_end_marker():
    stdout = [
        TimedLine(10.0, b"0: M begin node001\n"),
        TimedLine(10.5, labelled(0, "work\n").encode()),
        TimedLine(12.5, b"0: M end node001 0\n"),
    ]
    results = parse_srun_output(["node001"], stdout, [], marker="M", started=9.0, ended=13.0)
    assert results["node001"].duration == pytest.approx(2.5)


def test_parse_node_that_never_started_is_unreachable_with_srun_s_reason():
    stdout = "0: M begin node001\n0: M end node001 0\n"
    stderr = "srun: error: Task launch for StepId=42.0 failed on node node002: Communication connection failure\n"
    results = parse_srun_output(["node001", "node002"], timed_lines(stdout), timed_lines(stderr), marker="M")
    assert results["node001"].ok
    assert results["node002"].status is NodeStatus.UNREACHABLE
    assert results["node002"].exit_code is None
    assert "Communication connection failure" in results["node002"].stderr


def test_parse_timeout_marks_unfinished_nodes():
    stdout = "0: M begin node001\n" + labelled(0, "") + "0: M end node001 0\n1: M begin node002\n" + \
        labelled(1, "halfway\n", ended=False)
    results = parse_srun_output(["node001", "node002", "node003"], timed_lines(stdout), (), marker="M",
                                timed_out=True)
    assert results["node001"].ok
    assert results["node002"].status is NodeStatus.TIMEOUT
    assert results["node002"].stdout == "halfway\n"
    assert results["node002"].exit_code is None
    assert results["node003"].status is NodeStatus.UNREACHABLE
    assert "timed out before its task started" in results["node003"].stderr


def test_parse_task_that_vanished_without_timeout_failed():
    stdout = "0: M begin node001\n" + labelled(0, "partial\n", ended=False)
    stderr = "srun: error: node001: task 0: Killed\n"
    result = parse_srun_output(["node001"], timed_lines(stdout), timed_lines(stderr), marker="M")["node001"]
    assert result.status is NodeStatus.FAILED
    assert result.exit_code is None
    assert "Killed" in result.stderr


def test_parse_ignores_markers_of_other_runs_and_reports_stray_nodes():
    stdout = (
        "0: OTHER end node001 0\n"  # looks like a marker, is program output
        "0: M begin node001\n" + labelled(0, "OTHER end node001 0\n") + "0: M end node001 0\n"
        "1: M begin elsewhere\n1: M end elsewhere 0\n"
    )
    results = parse_srun_output(["node001", "node002"], timed_lines(stdout), (), marker="M")
    assert results["node001"].ok
    assert "OTHER end node001 0" in results["node001"].stdout
    assert results["node002"].status is NodeStatus.UNREACHABLE
    assert "'elsewhere'" in results["node002"].stderr


# -- the allocation -------------------------------------------------------------


def test_allocation_nodes_expands_slurm_syntax():
    environ = {"SLURM_JOB_NODELIST": "node[001-004,007],login1", "SLURM_JOB_NUM_NODES": "6"}
    assert allocation_nodes(environ) == ["login1", "node001", "node002", "node003", "node004", "node007"]


def test_allocation_nodes_reads_the_old_variable_name():
    assert allocation_nodes({"SLURM_NODELIST": "cn[1-2]"}) == ["cn1", "cn2"]


def test_allocation_nodes_outside_an_allocation():
    with pytest.raises(TransportError, match=r"not inside a Slurm allocation.*SLURM_JOB_NODELIST"):
        allocation_nodes({})


def test_allocation_nodes_cross_checks_the_node_count():
    with pytest.raises(TransportError, match="SLURM_JOB_NUM_NODES is 5"):
        allocation_nodes({"SLURM_JOB_NODELIST": "node[1-4]", "SLURM_JOB_NUM_NODES": "5"})


def test_allocation_nodes_falls_back_to_scontrol(tmp_path):
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\n"
                        '[ "$1 $2" = "show hostnames" ] || exit 2\n'
                        'printf "gpu-a1\\ngpu-a2\\n"\n')
    scontrol.chmod(0o755)
    # NodeSet cannot parse an unclosed bracket; scontrol is asked instead.
    assert allocation_nodes({"SLURM_JOB_NODELIST": "gpu-a[1-2"}, scontrol=str(scontrol)) == ["gpu-a1", "gpu-a2"]


def test_allocation_nodes_reports_a_failing_scontrol(tmp_path):
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\necho 'scontrol: error: bad list' >&2\nexit 1\n")
    scontrol.chmod(0o755)
    with pytest.raises(TransportError, match="bad list"):
        allocation_nodes({"SLURM_JOB_NODELIST": "gpu-a[1-2"}, scontrol=str(scontrol))


# -- whole runs through the fake srun --------------------------------------------


def test_run_builds_the_expected_srun_argv(fake_srun):
    results = slurm().run(["node001", "node002", "node003"], ["true"], timeout=30)
    assert all(result.ok for result in results.values())
    logged = json.loads(fake_srun.read_text())
    assert Path(logged[0]).name == "srun"
    marker = logged[14]
    assert marker.startswith("oddnode-task-") and len(marker) > len("oddnode-task-")
    assert logged[1:] == srun_command(["node001", "node002", "node003"], ["true"], 30, marker=marker)[1:]


@pytest.mark.slow
def test_run_gives_per_node_output_and_exit_codes(fake_srun):
    script = (
        "import os, sys\n"
        "node = os.environ['SLURMD_NODENAME']\n"
        "print('hello from', node)\n"
        "print('warning on', node, file=sys.stderr)\n"
        "sys.exit(int(node[-1]) - 1)\n"
    )
    results = slurm().run(["node001", "node002", "node003"], python_command(script, sys.executable), timeout=30)
    assert sorted(results) == ["node001", "node002", "node003"]
    for number, node in enumerate(["node001", "node002", "node003"]):
        result = results[node]
        assert result.stdout == f"hello from {node}\n"
        assert result.stderr == f"warning on {node}\n"
        assert result.exit_code == number
        assert result.status is (NodeStatus.OK if number == 0 else NodeStatus.FAILED)
        assert result.duration >= 0


def test_run_node_whose_task_never_starts_is_unreachable(fake_srun, monkeypatch):
    monkeypatch.setenv("FAKE_SRUN_DOWN", "node002")
    results = slurm().run(["node001", "node002", "node003"], ["echo", "hi"], timeout=30)
    assert results["node001"].ok and results["node001"].stdout == "hi\n"
    assert results["node003"].ok
    assert results["node002"].status is NodeStatus.UNREACHABLE
    assert "node002" in results["node002"].stderr


def test_run_arguments_reach_the_program_unchanged(fake_srun, tmp_path):
    canary = tmp_path / "canary"
    args = ["a b", "'single'", '"double"', f"$(touch {canary})", f"`touch {canary}`", "*", "$HOME", "",
            "; echo injected", "%hosts", "line\nbreak"]
    results = slurm().run(["node1", "node2"], [sys.executable, "-c", ECHO_ARGS, *args], timeout=30)
    for result in results.values():
        assert result.ok, result
        assert json.loads(result.stdout) == args
    assert not canary.exists()


def test_run_uses_the_allocation_when_no_nodes_are_named(fake_srun, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_NODELIST", "cn[01-02]")
    monkeypatch.delenv("SLURM_JOB_NUM_NODES", raising=False)
    results = slurm().run([], ["true"], timeout=30)
    assert sorted(results) == ["cn01", "cn02"]


@pytest.mark.slow
def test_run_timeout_cuts_srun_and_marks_unfinished_nodes(fake_srun):
    script = (
        "import os, time\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(30 if os.environ['SLURMD_NODENAME'] == 'node002' else 0)\n"
    )
    started = time.monotonic()
    results = slurm(grace=1).run(["node001", "node002", "node003"], python_command(script, sys.executable),
                                 timeout=2)
    assert time.monotonic() - started < 5
    assert results["node001"].ok and results["node003"].ok
    slow = results["node002"]
    assert slow.status is NodeStatus.TIMEOUT
    assert slow.exit_code is None
    pid = int(slow.stdout.split()[0])  # output before the cut is kept
    deadline = time.monotonic() + 2
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_run_without_srun_is_a_transport_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TransportError, match="srun"):
        slurm().run(["node1"], ["true"], timeout=5)


def test_run_outside_an_allocation_without_nodes(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_NODELIST", raising=False)
    with pytest.raises(TransportError, match="not inside a Slurm allocation"):
        slurm().run([], ["true"], timeout=5)


def test_run_each_runs_one_step_per_distinct_command(fake_srun):
    script = "import os, sys\nprint(sys.argv[1], 'on', os.environ['SLURMD_NODENAME'])\n"
    commands = {node: [*python_command(script, sys.executable), word]
                for node, word in [("node001", "serve"), ("node002", "ping"), ("node003", "serve")]}
    results = slurm().run_each(commands, timeout=30)
    assert {node: r.stdout for node, r in results.items()} == {
        "node001": "serve on node001\n", "node002": "ping on node002\n", "node003": "serve on node003\n"}


def test_run_each_refuses_more_steps_than_run_at_once(fake_srun):
    commands = {f"node{i:04d}": ["echo", str(i)] for i in range(MAX_CONCURRENT_STEPS + 1)}
    with pytest.raises(TransportError, match="split the nodes into rounds"):
        slurm().run_each(commands, timeout=30)
