"""The ``slurm`` transport: one ``srun`` step inside the current allocation.

One task runs on each node, through a small fixed shell script of ours that
brackets the program's output with markers naming the node and giving its
exit status. ``srun --label`` prefixes each output line with the task id, so
one srun command yields separate per-node output and exit codes.

srun cuts an output line longer than its buffer (1 KiB) into several, each
labelled, with no sign of where it cut: a program's one-line JSON report
would come back with newlines inside it.  So the wrapper passes the
program's standard output through a loop that cuts every line into pieces
of at most PIECE bytes (``fold -b``) and marks each: ``+`` for a piece the
next line continues, ``|`` for a line's last piece; the parser joins them
again.  The shell's ``read`` takes what arrives as it arrives and each line
goes out whole, so a task cut at the timeout still gives what it wrote.
A newline the wrapper adds after the program's output ends its last line
either way, and the parser takes it off again: the output arrives exactly.
Standard error, which people read, passes as it is.

The wrapper names the node by ``$SLURMD_NODENAME``, which slurmstepd sets in
every task's environment to the node's Slurm NodeName (the name used in
``--nodelist``); only where it is unset does it fall back to ``hostname -s``.
The program's argv reaches the wrapper as positional parameters and runs as
``"$@"``: no argument is ever pasted into, or re-read by, a shell.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

from oddnode.core.nodes import NodeNameError, fold, is_node_name, validate_node_name
from oddnode.core.order import natural_sorted
from oddnode.reach.base import NodeResult, NodeStatus, TransportError, register_transport
from oddnode.reach.local import TimedLine, decode, run_process_group, stop_process_groups

# The environment variable slurmstepd sets to the node's Slurm NodeName.
NODE_NAME_VARIABLE = "SLURMD_NODENAME"

# The marker's prefix; each run adds a random suffix so that no program output
# can pass for a marker by accident.
MARKER = "oddnode-task"

# $0 of the wrapper, as ps shows it on the nodes.
WRAPPER_NAME = "oddnode-srun-wrapper"

# Bytes of one piece of an output line: with srun's label, well under its
# 1 KiB buffer.
PIECE = 900
CONTINUED, LAST = "+", "|"
# The fixed wrapper: $1 is the marker, the rest is the program's argv.  The
# program's stdout, and the newline after it, go through the loop (see the
# module's docstring); the exit status comes back through fd 4 of the
# command substitution, as a POSIX shell has no pipefail; the program itself
# gets neither fd 3 nor fd 4, so that a child it leaves behind cannot hold
# the substitution open.
WRAPPER_SCRIPT = f"""\
marker=$1
shift
node=${{SLURMD_NODENAME:-$(hostname -s)}}
printf '%s begin %s\\n' "$marker" "$node"
exec 3>&1
rc=$( {{ {{ "$@" 3>&- 4>&-; status=$?; printf '\\n'; printf '%s' "$status" >&4; }} |
  while IFS= read -r line; do
    printf '%s\\n' "$line" | fold -b -w {PIECE} | sed '$!s/^/{CONTINUED}/;$s/^/{LAST}/'
  done >&3; }} 4>&1 )
printf '%s end %s %s\\n' "$marker" "$node" "${{rc:-1}}"
exit "${{rc:-1}}"
"""

# Seconds srun gets after SIGTERM, once cut at the timeout, to cancel its step
# on the nodes before it is killed.
DEFAULT_GRACE = 10.0

# srun --label prefixes "<task id>: ", the id right-aligned to the width of the
# largest one (" 7: " among 10 or more tasks).
_LABELLED = re.compile(r"^ *(\d+): (.*)$", re.DOTALL)


def srun_time_limit(timeout: float) -> int:
    """srun's --time in minutes: a minute past our own timeout, so that Slurm
    ends the step should oddnode itself die before cutting it."""
    return math.ceil(timeout / 60) + 1


def srun_command(
    nodes: Sequence[str],
    argv: Sequence[str],
    timeout: float,
    *,
    marker: str = MARKER,
    srun: str = "srun",
) -> list[str]:
    """The one srun command that runs argv once on each node, wrapped.

    ``--kill-on-bad-exit=0`` and ``--wait=0``: a node that fails or finishes
    early must not end the others. ``--unbuffered`` is left out on purpose:
    since Slurm 20.11 it runs tasks on a pseudo-terminal, which rewrites
    newlines and was never meant to be combined with ``--label``; the wrapper's
    own markers are written with printf, unbuffered, anyway.
    """
    names = list(dict.fromkeys(validate_node_name(node) for node in nodes))
    if not names:
        raise TransportError("srun needs at least one node")
    if not argv:
        raise TransportError("nothing to run: empty argv")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, not {timeout}")
    count = len(names)
    return [
        srun,
        f"--nodes={count}",
        f"--ntasks={count}",
        "--ntasks-per-node=1",
        f"--nodelist={fold(names)}",
        "--kill-on-bad-exit=0",
        "--wait=0",
        f"--time={srun_time_limit(timeout)}",
        # Other steps may use the same CPUs: the wrapper only waits, and what
        # it starts may start steps of its own (mpirun's daemons through srun).
        "--overlap",
        "--label",
        "/bin/sh",
        "-c",
        WRAPPER_SCRIPT,
        WRAPPER_NAME,
        marker,
        *argv,
    ]


def timed_lines(text: str, at: float = 0.0) -> tuple[TimedLine, ...]:
    """Text split into lines as a reader sees them, all arriving at ``at``:
    the parser's input shape for output that was not timed."""
    return tuple(TimedLine(at, line.encode("utf-8")) for line in text.splitlines(keepends=True))


@dataclass
class _Task:
    """What one srun task said, gathered from the labelled lines."""

    node: str | None = None
    begun_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


def unwrap_stdout(lines: Sequence[str], *, ended: bool) -> str:
    """The program's standard output from the wrapper's marked pieces; of a
    task that ``ended``, less the newline the wrapper added after it."""
    parts = []
    for line in lines:
        if line.startswith(CONTINUED):
            parts.append(line[1:])
        elif line.startswith(LAST):
            parts.append(line[1:] + "\n")
        else:  # not the wrapper's (an srun message on the task's stdout): as it came
            parts.append(line + "\n")
    text = "".join(parts)
    return text[:-1] if ended and text.endswith("\n") else text


def _line_text(line: TimedLine) -> str:
    text = decode(line.data)
    if text.endswith("\n"):
        text = text[:-1]
    return text


def parse_srun_output(
    nodes: Sequence[str],
    stdout: Sequence[TimedLine],
    stderr: Sequence[TimedLine],
    *,
    marker: str,
    timed_out: bool = False,
    started: float = 0.0,
    ended: float = 0.0,
) -> dict[str, NodeResult]:
    """Per-node results from the labelled output of one wrapped srun step.

    Tasks map to nodes through their begin markers, not through task ids, so
    Slurm's task placement does not matter. A node that never printed a begin
    marker is UNREACHABLE, with srun's own messages as the reason; one that
    began but never reported its exit status is TIMEOUT when srun was cut at
    the timeout, FAILED otherwise. Durations run from the begin marker to the
    end marker (or the cut), as their lines arrived.
    """
    begin = re.compile(rf"^{re.escape(marker)} begin (\S+)$")
    end = re.compile(rf"^{re.escape(marker)} end (\S+) (\d+)$")
    tasks: dict[int, _Task] = {}
    srun_messages: list[str] = []

    for line in stdout:
        labelled = _LABELLED.match(_line_text(line))
        if labelled is None:
            srun_messages.append(_line_text(line))
            continue
        task = tasks.setdefault(int(labelled[1]), _Task())
        text = labelled[2]
        if task.node is None and (found := begin.match(text)):
            task.node, task.begun_at = found[1], line.at
        elif task.exit_code is None and (found := end.match(text)):
            task.exit_code, task.ended_at = int(found[2]), line.at
        else:
            task.stdout.append(text)
    for line in stderr:
        labelled = _LABELLED.match(_line_text(line))
        if labelled is None:
            srun_messages.append(_line_text(line))
        else:
            tasks.setdefault(int(labelled[1]), _Task()).stderr.append(labelled[2])

    by_node: dict[str, _Task] = {}
    strays: list[str] = []
    for task_id, task in sorted(tasks.items()):
        if task.node is None:
            continue
        if task.node in nodes and task.node not in by_node:
            by_node[task.node] = task
        else:
            strays.append(
                f"oddnode: task {task_id} reported node {task.node!r}, which was not asked for "
                f"or reported twice (does ${NODE_NAME_VARIABLE} reach the tasks?)"
            )

    results: dict[str, NodeResult] = {}
    for node in dict.fromkeys(nodes):
        task = by_node.get(node)
        if task is None or task.begun_at is None:
            why = "timed out before its task started" if timed_out else "its task never started"
            reason = [line for line in srun_messages if node in line] or srun_messages
            results[node] = NodeResult(
                node=node,
                status=NodeStatus.UNREACHABLE,
                stdout="",
                stderr="".join(f"{line}\n" for line in [*reason, *strays, f"oddnode: srun: {why}"]),
                exit_code=None,
                duration=max(0.0, ended - started),
            )
            continue
        task_stderr = "".join(f"{line}\n" for line in task.stderr)
        if task.exit_code is not None and task.ended_at is not None:
            status = NodeStatus.OK if task.exit_code == 0 else NodeStatus.FAILED
            results[node] = NodeResult(
                node=node,
                status=status,
                stdout=unwrap_stdout(task.stdout, ended=True),
                stderr=task_stderr,
                exit_code=task.exit_code,
                duration=max(0.0, task.ended_at - task.begun_at),
            )
            continue
        if timed_out:
            status, note = NodeStatus.TIMEOUT, []
        else:
            status = NodeStatus.FAILED
            note = [line for line in srun_messages if node in line]
            note.append("oddnode: srun: the task ended without reporting its exit status")
        results[node] = NodeResult(
            node=node,
            status=status,
            stdout=unwrap_stdout(task.stdout, ended=False),
            stderr=task_stderr + "".join(f"{line}\n" for line in note),
            exit_code=None,
            duration=max(0.0, ended - task.begun_at),
        )
    return results


def allocation_nodes(environ: Mapping[str, str] = os.environ, *, scontrol: str = "scontrol") -> list[str]:
    """The nodes of the Slurm allocation this process runs in, in natural order.

    Read from ``SLURM_JOB_NODELIST`` (``SLURM_NODELIST`` on old Slurm), whose
    syntax ClusterShell's NodeSet expands; ``scontrol show hostnames`` is the
    fallback for anything NodeSet cannot parse. The count is checked against
    ``SLURM_JOB_NUM_NODES`` when Slurm gives it.
    """
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise TransportError(
            "not inside a Slurm allocation: SLURM_JOB_NODELIST is not set; "
            "run oddnode under salloc or sbatch, or name the nodes and use the ssh transport"
        )
    try:
        names = list(NodeSet(nodelist, resolver=RESOLVER_NOGROUP))
    except NodeSetException:
        names = []
    if not names or not all(is_node_name(name) for name in names):
        names = _scontrol_hostnames(nodelist, scontrol, environ)
    try:
        names = natural_sorted(validate_node_name(name) for name in names)
    except NodeNameError as err:
        raise TransportError(f"SLURM_JOB_NODELIST={nodelist!r}: {err}") from None
    expected = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES")
    if expected and expected.isdigit() and int(expected) != len(names):
        raise TransportError(
            f"SLURM_JOB_NODELIST={nodelist!r} expands to {len(names)} nodes "
            f"but SLURM_JOB_NUM_NODES is {expected}"
        )
    return names


def _scontrol_hostnames(nodelist: str, scontrol: str, environ: Mapping[str, str]) -> list[str]:
    try:
        done = subprocess.run(
            [scontrol, "show", "hostnames", nodelist],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(environ),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise TransportError(
            f"cannot expand SLURM_JOB_NODELIST={nodelist!r}: NodeSet cannot parse it "
            f"and '{scontrol} show hostnames' failed: {err}"
        ) from None
    if done.returncode != 0:
        raise TransportError(
            f"cannot expand SLURM_JOB_NODELIST={nodelist!r}: '{scontrol} show hostnames' "
            f"exited {done.returncode}: {done.stderr.strip()}"
        )
    return done.stdout.split()


# Job steps run_each may start at once (one per distinct argv): every one of
# them must run at the same time as the others, and slurmctld handles each
# step as a request of its own, so a pattern of thousands of pairs belongs in
# rounds, not in one call.
MAX_CONCURRENT_STEPS = 128


@register_transport("slurm")
class SlurmTransport:
    """Runs the argv once on each node with one srun step.

    With no nodes named, the whole allocation is used.
    """

    name = "slurm"

    def __init__(self, *, srun: str = "srun", grace: float = DEFAULT_GRACE) -> None:
        self.srun = srun
        self.grace = grace

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float) -> dict[str, NodeResult]:
        names = list(dict.fromkeys(nodes)) if nodes else allocation_nodes()
        for name in names:
            validate_node_name(name)
        if shutil.which(self.srun) is None:
            raise TransportError(f"{self.srun!r} not found on PATH: is Slurm installed here?")
        marker = f"{MARKER}-{secrets.token_hex(8)}"
        command = srun_command(names, argv, timeout, marker=marker, srun=self.srun)
        try:
            outcome = run_process_group(command, timeout, grace=self.grace)
        except OSError as err:
            raise TransportError(f"cannot start {self.srun!r}: {err}") from None
        return parse_srun_output(
            names,
            outcome.stdout,
            outcome.stderr,
            marker=marker,
            timed_out=outcome.timed_out,
            started=outcome.started,
            ended=outcome.ended,
        )

    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float) -> dict[str, NodeResult]:
        """One srun step per distinct argv, all steps at once."""
        groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for node, argv in commands.items():
            groups[tuple(argv)].append(node)
        if len(groups) > MAX_CONCURRENT_STEPS:
            raise TransportError(
                f"{len(groups)} different commands would need as many concurrent srun steps; "
                f"at most {MAX_CONCURRENT_STEPS} run at once: split the nodes into rounds"
            )
        results: dict[str, NodeResult] = {}
        with ThreadPoolExecutor(max_workers=len(groups) or 1) as pool:
            try:
                for answer in pool.map(lambda item: self.run(item[1], item[0], timeout=timeout), groups.items()):
                    results.update(answer)
            except BaseException:
                # An interrupt reaches this thread only: the steps' srun
                # clients, in the pool's threads, are told to end (srun then
                # cancels its step) before the pool is waited for.
                stop_process_groups()
                raise
        return {node: results[node] for node in commands}
