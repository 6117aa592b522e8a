"""The ``local`` transport: this machine is the cluster, as a single node.

It also holds the one piece of process handling the other subprocess-based
transports share: run an argv in its own process group, with a timeout that
ends the whole group (and only that group).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from oddnode.core.nodes import validate_node_name
from oddnode.reach.base import NodeResult, NodeStatus, TransportError, register_transport

# Seconds a process group gets between SIGTERM and SIGKILL once cut at the
# timeout: enough for a benchmark to remove its temporary files.
DEFAULT_GRACE = 1.0

# Exit status a shell gives a command it cannot find or run (POSIX 2.8.2);
# the local transport reports the same, so a missing program reads alike
# whichever transport ran it.
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126


@dataclass(frozen=True)
class TimedLine:
    """One chunk of output up to and including its newline, and when it arrived
    (``time.monotonic()``); the last chunk of a stream may lack the newline."""

    at: float
    data: bytes


@dataclass(frozen=True)
class ProcessOutcome:
    """How a process group run ended, with every byte it wrote."""

    stdout: tuple[TimedLine, ...]
    stderr: tuple[TimedLine, ...]
    returncode: int | None  # None when cut at the timeout before it exited
    timed_out: bool
    started: float  # time.monotonic() when it was started
    ended: float  # when it exited, or when it was cut

    @property
    def duration(self) -> float:
        return self.ended - self.started

    @property
    def stdout_text(self) -> str:
        return decode(b"".join(line.data for line in self.stdout))

    @property
    def stderr_text(self) -> str:
        return decode(b"".join(line.data for line in self.stderr))


def decode(data: bytes) -> str:
    """Tool output as text; bytes that are not UTF-8 become U+FFFD, never an error."""
    return data.decode("utf-8", errors="replace")


def _collect(stream: IO[bytes], into: list[TimedLine]) -> None:
    with stream:
        for data in iter(stream.readline, b""):
            into.append(TimedLine(time.monotonic(), data))


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # every member has already exited
        os.killpg(pgid, signum)


# Seconds between two looks at a running command for a stop asked from
# another thread (stop_process_groups): how late such a stop can start.
STOP_POLL = 0.1

# The stop event of every run_process_group under way, in any thread.
_running: set[threading.Event] = set()
_running_lock = threading.Lock()


def stop_process_groups() -> int:
    """Ask every run_process_group under way to end its process group now,
    as at its timeout (each ends its own: only the thread that reaps a
    leader signals its group).  Returns how many were asked."""
    with _running_lock:
        for stop in _running:
            stop.set()
        return len(_running)


def _exited(pid: int) -> bool:
    """Whether the child has exited, leaving it unreaped (its id stays ours)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _wait_done(pid: int, readers: list[threading.Thread], deadline: float, stop: threading.Event) -> bool:
    """Wait until the command and every holder of its pipes have exited
    (True), or the deadline passes or a stop is asked (False)."""
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        alive = [reader for reader in readers if reader.is_alive()]
        if alive:
            alive[0].join(min(left, STOP_POLL))
        elif _exited(pid):
            return True
        else:
            stop.wait(min(left, STOP_POLL))
    return False


def _end_group(proc: subprocess.Popen, readers: list[threading.Thread], grace: float) -> None:
    """SIGTERM to the process group, SIGKILL after ``grace`` seconds (even
    when a second interrupt cuts the grace short), then reap the leader.
    The leader is unreaped until then (at worst a zombie), so the group id
    still names this group: no need to ask whether anyone is left."""
    pgid = proc.pid  # start_new_session: the child leads its own group
    try:
        _signal_group(pgid, signal.SIGTERM)
        grace_end = time.monotonic() + grace
        # An interrupt can come while the readers start: one not yet
        # running has nothing to wait for (and join() would refuse it).
        for reader in (r for r in readers if r.is_alive()):
            reader.join(max(0.0, grace_end - time.monotonic()))
    finally:
        _signal_group(pgid, signal.SIGKILL)
        proc.wait()


def run_process_group(
    argv: Sequence[str],
    timeout: float,
    *,
    env: Mapping[str, str] | None = None,
    grace: float = DEFAULT_GRACE,
) -> ProcessOutcome:
    """Run argv (no shell) in a new session and collect its output.

    The process is the leader of a new process group. At the timeout, on an
    interrupt (KeyboardInterrupt, re-raised once the group is gone) or on
    stop_process_groups, that group, recorded by its id, gets SIGTERM, then
    SIGKILL after ``grace`` seconds: the command's children go with it,
    nothing else is touched. The leader is reaped only after the last
    signal, so its id cannot have been reused by then. Output written before
    the cut is kept.

    Raises OSError when argv cannot be started at all.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, not {timeout}")
    started = time.monotonic()
    deadline = started + timeout
    # Recorded before the start: a stop asked while the command starts is
    # not missed (the group is ended as soon as it exists).
    stop = threading.Event()
    with _running_lock:
        _running.add(stop)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    except BaseException:
        with _running_lock:
            _running.discard(stop)
        raise
    stdout: list[TimedLine] = []
    stderr: list[TimedLine] = []
    readers = [
        threading.Thread(target=_collect, args=(proc.stdout, stdout), daemon=True),
        threading.Thread(target=_collect, args=(proc.stderr, stderr), daemon=True),
    ]
    try:
        for reader in readers:
            reader.start()
        # Done means: the pipes are closed (the command and every child
        # holding them have exited) and the leader has exited.
        finished = _wait_done(proc.pid, readers, deadline, stop)
        ended = time.monotonic()
        if finished:
            proc.wait()
        else:
            _end_group(proc, readers, grace)
            for reader in readers:
                # A process that left the group with setsid() could still
                # hold a pipe; do not wait for it forever.
                reader.join(grace)
    except BaseException:  # an interrupt: the group goes before the interrupt goes on
        if proc.returncode is None:
            _end_group(proc, readers, grace)
        raise
    finally:
        with _running_lock:
            _running.discard(stop)

    return ProcessOutcome(
        stdout=tuple(stdout),
        stderr=tuple(stderr),
        returncode=proc.returncode if finished else None,
        timed_out=not finished,
        started=started,
        ended=ended,
    )


def local_node_name() -> str:
    """This machine's short host name, as a node name."""
    return validate_node_name(socket.gethostname().split(".")[0])


@register_transport("local")
class LocalTransport:
    """Runs the argv here, as the one node of the cluster.

    The node is called by this machine's short host name unless the caller
    names it; asking for more than one node is an error, not a silent repeat.
    """

    name = "local"

    def __init__(self, *, grace: float = DEFAULT_GRACE) -> None:
        self.grace = grace

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float) -> dict[str, NodeResult]:
        if len(nodes) > 1:
            raise TransportError(
                f"the local transport runs on this machine only, not on {len(nodes)} nodes; "
                "use the ssh or slurm transport for several nodes"
            )
        if not argv:
            raise TransportError("nothing to run: empty argv")
        node = validate_node_name(nodes[0]) if nodes else local_node_name()
        started = time.monotonic()
        try:
            outcome = run_process_group(argv, timeout, grace=self.grace)
        except FileNotFoundError as err:
            return {node: _not_started(node, argv, err, EXIT_NOT_FOUND, started)}
        except PermissionError as err:
            return {node: _not_started(node, argv, err, EXIT_NOT_EXECUTABLE, started)}
        if outcome.timed_out:
            status, exit_code = NodeStatus.TIMEOUT, None
        else:
            assert outcome.returncode is not None
            # A command killed by a signal reads as a shell shows it: 128 + signal.
            exit_code = outcome.returncode if outcome.returncode >= 0 else 128 - outcome.returncode
            status = NodeStatus.OK if exit_code == 0 else NodeStatus.FAILED
        return {
            node: NodeResult(
                node=node,
                status=status,
                stdout=outcome.stdout_text,
                stderr=outcome.stderr_text,
                exit_code=exit_code,
                duration=outcome.duration,
            )
        }


    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float) -> dict[str, NodeResult]:
        """This machine's one command (``commands`` names one node)."""
        if len(commands) > 1:
            raise TransportError(
                f"the local transport runs on this machine only, not on {len(commands)} nodes; "
                "use the ssh or slurm transport for several nodes"
            )
        ((node, argv),) = commands.items()
        return self.run([node], argv, timeout=timeout)


def _not_started(node: str, argv: Sequence[str], err: OSError, exit_code: int, started: float) -> NodeResult:
    """A program that could not be started: reported as a shell would, so it
    reads the same as on a remote node."""
    return NodeResult(
        node=node,
        status=NodeStatus.FAILED,
        stdout="",
        stderr=f"oddnode: cannot run {argv[0]!r}: {err.strerror}\n",
        exit_code=exit_code,
        duration=time.monotonic() - started,
    )
