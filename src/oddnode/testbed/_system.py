"""The testbed's contact with the machine: privileges, commands and processes.

Every process the testbed touches is named by a record ``{"pid", "start"}``:
the PID plus its start time in clock ticks after boot, so that a PID reused by
an unrelated process after ours ended is never signalled.
"""

from __future__ import annotations

import errno
import os
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from oddnode.testbed import cgroups


class TestbedError(RuntimeError):
    """The testbed cannot do what was asked; the message says why and what to do."""

    __test__ = False  # not a pytest test class, whatever module imports it


SSHD = Path("/usr/sbin/sshd")
NETNS_DIR = Path("/run/netns")  # where `ip netns add` pins its namespaces
SYS_NET = Path("/sys/class/net")

# A clean environment for everything started inside a node: nothing of the
# caller's (virtual environment, agent sockets, locale) leaks into the nodes.
NODE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/root",
}

# Tool -> the Debian package that has it.
_TOOLS = {
    "ip": "iproute2",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "mount": "mount",
    "umount": "mount",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "timeout": "coreutils",
}


def require_root() -> None:
    if os.geteuid() != 0:
        raise TestbedError(
            "the testbed needs root: it creates network namespaces, veth links, a bridge, "
            "mounts and processes in other namespaces (run it as root, e.g. with sudo)"
        )


def require_tools() -> None:
    if not SSHD.exists():
        raise TestbedError(
            f"the testbed runs OpenSSH's server on every node but {SSHD} is missing: "
            "apt-get install openssh-server"
        )
    missing = sorted({package for tool, package in _TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise TestbedError(f"the testbed needs more tools: apt-get install {' '.join(missing)}")


def _joiner(cgroup: str | None):
    """A preexec_fn that puts the child in `cgroup` before it runs anything."""
    return None if cgroup is None else (lambda: cgroups.join(cgroup))


def run(argv: Sequence[str], *, input: str | None = None, timeout: float = 30.0, check: bool = True,
        env: Mapping[str, str] | None = None, cgroup: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a short command to completion (bounded by `timeout`), raising
    TestbedError on failure; in `cgroup` when given, with all it starts."""
    try:
        done = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                              timeout=timeout, env=dict(env) if env is not None else None,
                              preexec_fn=_joiner(cgroup))
    except subprocess.TimeoutExpired:
        raise TestbedError(f"`{shlex.join(argv)}` took longer than {timeout:g} s") from None
    if check and done.returncode != 0:
        detail = done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}"
        raise TestbedError(f"`{shlex.join(argv)}` failed: {detail}")
    return done


# Processes started by this Python process: kept so that they are reaped (and
# leave no zombie) when `down` runs in the same process, as in the tests.
_children: dict[int, subprocess.Popen[bytes]] = {}


def spawn(argv: Sequence[str], log: IO[bytes], env: Mapping[str, str],
          cgroup: str | None = None) -> subprocess.Popen[bytes]:
    """Start a long-lived process in its own session, output to `log`; in
    `cgroup` when given, with all it starts."""
    child = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             env=dict(env), start_new_session=True, preexec_fn=_joiner(cgroup))
    _children[child.pid] = child
    return child


def reap_children() -> None:
    for pid, child in list(_children.items()):
        if child.poll() is not None:
            del _children[pid]


@dataclass(frozen=True)
class Proc:
    """One line of the process table, as the root PID namespace sees it."""

    pid: int
    ppid: int
    comm: str
    state: str  # R, S, D, Z...
    start: int  # clock ticks after boot


@dataclass(frozen=True)
class NsProc:
    """A process with the namespaces it lives in."""

    proc: Proc
    pidns: int  # inode of its PID namespace
    netns: int  # inode of its network namespace
    nspid: int  # its PID inside its own (innermost) PID namespace


def read_proc(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm is in parentheses and may itself contain spaces and parentheses.
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 of proc(5): state; ppid is field 4, starttime field 22.
    return Proc(pid=pid, ppid=int(fields[1]), comm=comm, state=fields[0], start=int(fields[19]))


def _ns_inode(pid: int, kind: str) -> int:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return 0


def _innermost_pid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except OSError:
        pass
    return 0


def process_table() -> list[NsProc]:
    """Every process with its namespaces (one pass over /proc)."""
    table = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        proc = read_proc(pid)
        if proc is None:
            continue
        table.append(NsProc(proc, _ns_inode(pid, "pid"), _ns_inode(pid, "net"), _innermost_pid(pid)))
    return table


def record(proc: Proc) -> dict[str, int]:
    return {"pid": proc.pid, "start": proc.start}


def record_of(pid: int) -> dict[str, int] | None:
    proc = read_proc(pid)
    return record(proc) if proc is not None else None


def alive(rec: Mapping[str, int] | None) -> bool:
    """Whether the recorded process still runs (a zombie has ended)."""
    if not rec:
        return False
    proc = read_proc(rec["pid"])
    return proc is not None and proc.start == rec["start"] and proc.state not in ("Z", "X")


def kill(rec: Mapping[str, int] | None, sig: int = signal.SIGKILL, *, group: bool = False) -> bool:
    """Signal a recorded process (or its process group) if it is still the same process."""
    if not alive(rec):
        return False
    assert rec is not None
    try:
        if group:
            os.killpg(rec["pid"], sig)
        else:
            os.kill(rec["pid"], sig)
    except ProcessLookupError:
        return False
    return True


def wait_gone(recs: Iterable[Mapping[str, int] | None], timeout: float) -> list[Mapping[str, int]]:
    """Wait until the recorded processes have ended; return those still running at `timeout`."""
    pending = [rec for rec in recs if rec]
    deadline = time.monotonic() + timeout
    while True:
        reap_children()
        pending = [rec for rec in pending if alive(rec)]
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(0.02)


def pid_namespace(pid: int) -> int:
    return _ns_inode(pid, "pid")


def netns_inode(name: str) -> int:
    """Inode of a named network namespace (0 when it is gone)."""
    try:
        return (NETNS_DIR / name).stat().st_ino
    except OSError:
        return 0


def link_exists(name: str) -> bool:
    """Whether a network interface of that name exists in our (root) network namespace."""
    return (SYS_NET / name).exists()


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def disable_ipv6(interface: str) -> None:
    """No IPv6 on a testbed link: its only traffic is on its testbed's subnet (no link-local
    addresses, router solicitations or multicast reports)."""
    try:
        Path(f"/proc/sys/net/ipv6/conf/{interface}/disable_ipv6").write_text("1\n")
    except FileNotFoundError:  # IPv6 is not compiled in or disabled at boot
        pass


def ports_open(addresses: Mapping[str, str], port: int = 22, timeout: float = 1.0) -> dict[str, bool]:
    """Which addresses accept a TCP connection on `port`, tried all at once."""
    result = {name: False for name in addresses}
    selector = selectors.DefaultSelector()
    try:
        for name, address in addresses.items():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            code = sock.connect_ex((address, port))
            if code == 0:
                result[name] = True
                sock.close()
            elif code == errno.EINPROGRESS:
                selector.register(sock, selectors.EVENT_WRITE, name)
            else:
                sock.close()
        deadline = time.monotonic() + timeout
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for key, _ in selector.select(remaining):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                result[key.data] = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                selector.unregister(sock)
                sock.close()
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()
    return result


def find_in_pid_namespace(pidns: int, nspid: int) -> Proc | None:
    """The process that has PID `nspid` inside the PID namespace `pidns`, as the root namespace sees it."""
    for name in os.listdir("/proc"):
        if name.isdigit() and _ns_inode(int(name), "pid") == pidns and _innermost_pid(int(name)) == nspid:
            return read_proc(int(name))
    return None


def children_by_parent() -> dict[int, list[Proc]]:
    """Every running process, grouped by parent PID (one pass over /proc)."""
    children: dict[int, list[Proc]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            proc = read_proc(int(name))
            if proc is not None:
                children.setdefault(proc.ppid, []).append(proc)
    return children


def tail(path: Path, lines: int = 8) -> str:
    """The last lines of a log, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"
