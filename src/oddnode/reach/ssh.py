"""The ``ssh`` transport: ClusterShell's Task and ssh worker, with fan-out.

Host keys are checked as the user's ssh configuration says (oddnode never
turns checking off), and ``BatchMode=yes`` makes a missing key or password
prompt fail at once instead of waiting for a keyboard.  ClusterShell's own
``clush.conf`` ([Main] fanout, connect_timeout, ssh_user, ssh_path,
ssh_options) gives the defaults that oddnode's options do not set. Node names reach
ClusterShell as a NodeSet and ssh as a host argument, after validation; the
remote command line is our own argv, quoted with shlex.
"""

from __future__ import annotations

import configparser
import math
import re
import shlex
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ClusterShell.CLI.Config import ClushConfig, ClushConfigError
from ClusterShell.Defaults import config_paths
from ClusterShell.Event import EventHandler
from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet
from ClusterShell.Task import task_self, task_terminate

from oddnode.core.config import ConfigError
from oddnode.core.connection import DEFAULT_CONNECT_TIMEOUT, DEFAULT_FANOUT
from oddnode.core.nodes import validate_node_name
from oddnode.reach.base import NodeResult, NodeStatus, TransportError, register_transport

# ssh exits 255 when it fails itself, and also passes on a remote 255; these
# messages on stderr tell the first kind apart: the node was never reached.
SSH_CONNECTION_ERRORS = (
    "Connection refused",
    "Connection timed out",
    "Connection reset",
    "Connection closed by",
    "No route to host",
    "Network is unreachable",
    "Could not resolve hostname",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Host key verification failed",
    "Permission denied",
    "kex_exchange_identification",
)
SSH_FAILURE_EXIT = 255

_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")

# ClusterShell runs a whole node set through one ssh client when the command
# contains this placeholder (Worker/Exec.py), so it must never appear in ours.
_HOSTS_PLACEHOLDERS = ("%hosts", "%{hosts}")


# coreutils timeout exits 124 when it cut the command, 137 (128 + SIGKILL)
# when the command ignored SIGTERM for the grace seconds.  A program that
# itself exits 124 reads as a timeout too.
REMOTE_TIMEOUT_EXITS = (124, 137)
REMOTE_KILL_GRACE = 5  # seconds between SIGTERM and SIGKILL on the node

# What runs on the node: "$1" (seconds) is the limit of the command "$2"...
# It runs under coreutils timeout, which leads a process group of its own and
# ends the whole group at the limit (SIGTERM, then SIGKILL after the grace),
# or as soon as it gets SIGTERM itself.  That SIGTERM comes from a watcher on
# the ssh session's standard input, which oddnode holds open: when oddnode is
# interrupted or killed, or the connection drops, sshd closes it, the watcher
# reads its end, and the command stops at once instead of running on unseen.
# The command reads /dev/null; the watcher is stopped when the command ends.
REMOTE_WRAPPER = ('exec 3<&0 </dev/null; limit=$1; shift; '
                  f'timeout --kill-after={REMOTE_KILL_GRACE} "$limit" "$@" & command=$!; '
                  '{ cat <&3 >/dev/null 2>&1; kill -TERM "$command" 2>/dev/null; } & watcher=$!; exec 3<&-; '
                  'wait "$command"; status=$?; kill "$watcher" 2>/dev/null; exit "$status"')
# $0 of the wrapper, as ps shows it on the nodes.
REMOTE_WRAPPER_NAME = "oddnode-ssh"

# Seconds an interrupted run waits for ClusterShell to end its ssh clients.
ABORT_WAIT = 5.0


def classify(exit_code: int | None, stderr: str, *, timed_out: bool = False) -> NodeStatus:
    """How a node fared, from what ssh gave back."""
    if timed_out:
        return NodeStatus.TIMEOUT
    if exit_code is None:
        return NodeStatus.UNREACHABLE
    if exit_code == SSH_FAILURE_EXIT and any(message in stderr for message in SSH_CONNECTION_ERRORS):
        return NodeStatus.UNREACHABLE
    return NodeStatus.OK if exit_code == 0 else NodeStatus.FAILED


def ssh_options(ssh_config: Path | None = None, site_options: str | None = None) -> list[str]:
    """The ssh options oddnode adds: its configuration file and batch mode,
    then clush.conf's ssh_options.

    ssh keeps the first value it is given for an option, so batch mode cannot
    be undone by the site's options; nothing here weakens host key checking.
    ClusterShell adds ConnectTimeout, the user and its own forwarding options
    after these.
    """
    options = []
    if ssh_config is not None:
        options += ["-F", str(ssh_config)]
    options.append("-oBatchMode=yes")
    if site_options:
        options += shlex.split(site_options)
    return options


@dataclass(frozen=True)
class ClushSettings:
    """What ClusterShell's clush.conf sets in its [Main] section (None: not set),
    and the files it was read from, lowest precedence first."""

    fanout: int | None = None
    connect_timeout: float | None = None
    ssh_user: str | None = None
    ssh_path: str | None = None
    ssh_options: str | None = None
    files: tuple[str, ...] = ()


class _ClushFiles(ClushConfig):
    """ClusterShell's reader without its built-in defaults, so that a key
    the files do not set reads as unset (and oddnode's default applies)."""

    MAIN_DEFAULTS: dict[str, str] = {}


_NO_OVERRIDES = SimpleNamespace(quiet=False, verbose=False, debug=False, fanout=None, user=None, options=None,
                                connect_timeout=None, command_timeout=None, whencolor=None, maxrc=None, option=[])


def read_clush_conf(filename: str | Path | None = None) -> ClushSettings:
    """clush.conf as clush reads it: ``filename`` alone (clush --conf), else
    ClusterShell's own list in increasing precedence (/etc/clustershell,
    ~/.local/etc/clustershell, the Python prefix's etc/clustershell,
    $XDG_CONFIG_HOME/clustershell, then $CLUSTERSHELL_CFGDIR), with the
    clush.conf.d parts its confdir names.  Only [Main] is read: clush's
    modes (-m) are a clush option."""
    try:
        parsed = _ClushFiles(_NO_OVERRIDES, str(filename) if filename is not None else None)
    except (configparser.Error, ClushConfigError) as err:
        files = [str(filename)] if filename is not None else config_paths("clush.conf")
        raise ConfigError(" or ".join(files), f"not a valid clush.conf: {err}") from None
    where = ", ".join(parsed.parsed) or "clush.conf"
    main = parsed.MAIN_SECTION

    def value(key: str, kind: Callable[[str], Any]) -> Any:
        if not parsed.has_option(main, key):
            return None
        try:
            return kind(parsed.get(main, key))
        except (ValueError, configparser.Error) as err:
            raise ConfigError(where, f"[{main}] {key} = {parsed.get(main, key, raw=True)!r} is not a valid value "
                                     f"({err})", key=key) from None

    fanout, timeout = value("fanout", int), value("connect_timeout", float)
    if fanout is not None and fanout < 1:
        raise ConfigError(where, f"[{main}] fanout must be at least 1, not {fanout}", key="fanout")
    user = value("ssh_user", str) or None
    if user is not None and not _USER.match(user):
        raise ConfigError(where, f"[{main}] ssh_user {user!r} is not a user name", key="ssh_user")
    # connect_timeout 0 means "no timeout" to clush; oddnode keeps its own then.
    return ClushSettings(fanout=fanout, connect_timeout=timeout if timeout and timeout > 0 else None,
                         ssh_user=user, ssh_path=value("ssh_path", str) or None,
                         ssh_options=value("ssh_options", str) or None, files=tuple(parsed.parsed))


def _quote(arg: str) -> str:
    """shlex.quote, except that no '%' is followed by a letter or '{' in the
    result: '%' ends a single-quoted piece and the next one carries on
    ('%''hosts' is %hosts to the shell), so ClusterShell sees no placeholder."""
    if "%" not in arg:
        return shlex.quote(arg)
    return "'" + arg.replace("'", "'\"'\"'").replace("%", "%''") + "'"


# sshd hands the command line to the user's shell as one argument (sh -c
# LINE), and Linux refuses any one argument of 32 pages or more
# (MAX_ARG_STRLEN, 131072 bytes with its NUL): ssh then exits 255, unexplained.
MAX_REMOTE_COMMAND = 131072 - 1


def remote_command(argv: Sequence[str]) -> str:
    """The command line the remote shell runs: argv quoted, word by word;
    a TransportError when it is longer than a remote shell takes."""
    if not argv:
        raise TransportError("nothing to run: empty argv")
    command = " ".join(_quote(arg) for arg in argv)
    assert not any(placeholder in command for placeholder in _HOSTS_PLACEHOLDERS)
    size = len(command.encode("utf-8"))
    if size > MAX_REMOTE_COMMAND:
        raise TransportError(f"the command for the nodes is {size} bytes quoted ({argv[0]} ...); a remote shell "
                             f"takes one of at most {MAX_REMOTE_COMMAND} (Linux's MAX_ARG_STRLEN)")
    return command


class _Collector(EventHandler):
    """Gathers each node's output, exit code and timing from worker events."""

    def __init__(self) -> None:
        super().__init__()
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.exit_codes: dict[str, int | None] = {}
        self.output: dict[str, dict[str, list[bytes]]] = defaultdict(lambda: {"stdout": [], "stderr": []})
        self.timed_out: set[str] = set()
        self.closed_at: float | None = None

    def ev_pickup(self, worker: Any, node: str) -> None:
        self.started[str(node)] = time.monotonic()

    def ev_read(self, worker: Any, node: str, sname: str, msg: bytes) -> None:
        self.output[str(node)][sname].append(msg)

    def ev_hup(self, worker: Any, node: str, rc: int | None) -> None:
        self.ended[str(node)] = time.monotonic()
        self.exit_codes[str(node)] = rc

    def ev_close(self, worker: Any, timedout: bool) -> None:
        self.closed_at = time.monotonic()
        if timedout:
            self.timed_out |= {str(node) for node in worker.iter_keys_timeout()}


def _lines(chunks: list[bytes]) -> str:
    """ClusterShell hands over lines without their newlines; put them back."""
    return "".join(chunk.decode("utf-8", errors="replace") + "\n" for chunk in chunks)


@register_transport("ssh")
class SshTransport:
    """Runs the argv on every node over ssh, ``fanout`` connections at a time.

    Options: ``ssh_config`` (passed as ``ssh -F``), ``fanout``,
    ``connect_timeout`` (seconds, rounded up: ssh takes whole seconds) and
    ``user`` (else ssh's configuration decides); ``clush``, clush.conf's
    settings, fills those not given and adds its ssh_path and ssh_options.
    """

    name = "ssh"

    def __init__(
        self,
        *,
        ssh_config: Path | str | None = None,
        fanout: int | None = None,
        connect_timeout: float | None = None,
        user: str | None = None,
        clush: ClushSettings | None = None,
    ) -> None:
        clush = clush or ClushSettings()
        fanout = fanout if fanout is not None else clush.fanout or DEFAULT_FANOUT
        connect_timeout = (connect_timeout if connect_timeout is not None
                           else clush.connect_timeout or DEFAULT_CONNECT_TIMEOUT)
        user = user if user is not None else clush.ssh_user
        if fanout < 1:
            raise TransportError(f"fanout must be at least 1, not {fanout}")
        if connect_timeout <= 0:
            raise TransportError(f"connect_timeout must be positive, not {connect_timeout}")
        if user is not None and not _USER.match(user):
            raise TransportError(f"invalid user name {user!r}")
        self.ssh_config = Path(ssh_config) if ssh_config is not None else None
        if self.ssh_config is not None and not self.ssh_config.is_file():
            raise TransportError(f"ssh configuration {str(self.ssh_config)!r} is not a file")
        self.fanout = fanout
        self.connect_timeout = connect_timeout
        self.user = user
        self.ssh_path = clush.ssh_path
        self.site_options = clush.ssh_options

    def task_info(self) -> dict[str, Any]:
        """The ClusterShell task settings this transport uses."""
        info: dict[str, Any] = {
            "fanout": self.fanout,
            "connect_timeout": math.ceil(self.connect_timeout),
            "ssh_options": shlex.join(ssh_options(self.ssh_config, self.site_options)),
        }
        if self.user is not None:
            info["ssh_user"] = self.user
        if self.ssh_path is not None:
            info["ssh_path"] = self.ssh_path
        return info

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float) -> dict[str, NodeResult]:
        return self.run_each({node: argv for node in nodes}, timeout=timeout)

    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float) -> dict[str, NodeResult]:
        names = list(dict.fromkeys(validate_node_name(node) for node in commands))
        if not names:
            raise TransportError("the ssh transport needs at least one node")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        client = shlex.split(self.ssh_path)[0] if self.ssh_path else "ssh"
        if shutil.which(str(Path(client).expanduser())) is None:
            raise TransportError(f"{client} not found" + (" (clush.conf's ssh_path)" if self.ssh_path else
                                                          " on PATH: install the OpenSSH client"))
        # ClusterShell can only kill the local ssh client: sshd would leave the
        # remote command running, disturbing what is measured next.  So the
        # node enforces the timeout itself (REMOTE_WRAPPER), and ends the
        # command when its ssh client goes; the local cut comes later, for
        # dead links only.
        limit = ["sh", "-c", REMOTE_WRAPPER, REMOTE_WRAPPER_NAME, str(math.ceil(timeout))]
        local_timeout = math.ceil(timeout) + REMOTE_KILL_GRACE + math.ceil(self.connect_timeout) + 2
        # Nodes given the same argv share one worker (one command line, built once).
        groups: dict[str, list[str]] = defaultdict(list)
        for node in names:
            groups[remote_command([*limit, *commands[node]])].append(node)
        jobs = [(NodeSet.fromlist(group, resolver=RESOLVER_NOGROUP), command) for command, group in groups.items()]
        collector = self._run_task(jobs, local_timeout)
        return {node: self._result(node, collector, timeout) for node in names}

    def _run_task(self, jobs: list[tuple[NodeSet, str]], timeout: float) -> _Collector:
        """Run each (nodes, command) in one ClusterShell task of its own, so
        that the fan-out bounds them all together, on a thread of its own, so
        that no state is shared with any other task_self()."""
        collector = _Collector()
        failure: list[BaseException] = []
        started: list[Any] = []  # the task, once its thread has it

        def body() -> None:
            task = task_self()
            started.append(task)
            try:
                for key, value in self.task_info().items():
                    task.set_info(key, value)
                # stdout and stderr are gathered by the handler; ClusterShell's
                # own message trees would only hold a second copy.
                task.set_default("stdout_msgtree", False)
                task.set_default("stderr_msgtree", False)
                for nodeset, command in jobs:
                    # stdin: the pipe to each ssh client stays open, for REMOTE_WRAPPER's watcher.
                    task.shell(command, nodes=nodeset, handler=collector, timeout=timeout, stderr=True, stdin=True)
                task.resume()
            except BaseException as err:  # handed to the caller's thread below
                failure.append(err)
            finally:
                task_terminate()

        thread = threading.Thread(target=body, name="oddnode-ssh", daemon=True)
        thread.start()
        try:
            thread.join()
        except BaseException:  # an interrupt: end the ssh clients, and so the commands on the nodes
            _abort(started, thread)
            raise
        if failure:
            raise TransportError(f"ClusterShell failed: {failure[0]}") from failure[0]
        return collector

    def _result(self, node: str, collector: _Collector, timeout: float) -> NodeResult:
        output = collector.output.get(node, {"stdout": [], "stderr": []})
        stdout, stderr = _lines(output["stdout"]), _lines(output["stderr"])
        started = collector.started.get(node)
        if node in collector.timed_out:
            end = collector.closed_at if collector.closed_at is not None else time.monotonic()
            # The worker closes once its last node is done; a node cut earlier
            # was cut at its own timeout.
            duration = min(end - started, timeout) if started is not None else timeout
            return NodeResult(node, NodeStatus.TIMEOUT, stdout, stderr, None, duration)
        if node not in collector.exit_codes or started is None:
            reason = stderr or "oddnode: ClusterShell gave no result for this node\n"
            return NodeResult(node, NodeStatus.UNREACHABLE, stdout, reason, None, 0.0)
        exit_code = collector.exit_codes[node]
        if exit_code in REMOTE_TIMEOUT_EXITS:
            return NodeResult(node, NodeStatus.TIMEOUT, stdout, stderr, None, min(collector.ended[node] - started,
                                                                                  timeout))
        status = classify(exit_code, stderr)
        duration = collector.ended[node] - started
        if status is NodeStatus.UNREACHABLE:
            return NodeResult(node, status, stdout, stderr, None, duration)
        return NodeResult(node, status, stdout, stderr, exit_code, duration)


def _abort(started: list[Any], thread: threading.Thread) -> None:
    """Abort an interrupted task from the caller's thread: ClusterShell
    kills the ssh clients it started (their recorded processes), which
    closes their sessions, and REMOTE_WRAPPER ends each node's command.
    A task that never started or already ended has nothing to abort."""
    if started and thread.is_alive():
        try:
            started[0].abort()
        finally:
            thread.join(ABORT_WAIT)
