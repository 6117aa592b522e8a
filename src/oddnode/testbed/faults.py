"""Faults injected into one testbed node, recorded so that they can be undone.

- `fault_file`: a file replaced by a bind mount in that node's mount namespace
  only (an old BIOS date, less memory in /proc/meminfo, SMT switched on).
- `fault_process`: a competing process inside the node, bounded by `timeout`.
- `stop_sshd` / `start_sshd`: the node stops (and resumes) answering ssh.
- `fault_link` / `fault_uplink`: a node's link, or a leaf switch's uplink,
  shaped to a lower rate in both directions (tc tbf); `fault_delay`: a
  node's link delays every packet (tc netem, where the kernel has it);
  `fault_linecard`: a leaf acts as a line card whose ports share one
  shaped fabric link, for their traffic between themselves too.

`clear_faults` undoes them all; `oddnode testbed down` too.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from oddnode.testbed import config, network
from oddnode.testbed._state import State, locked, node_entry, require_running, require_state, write_state
from oddnode.testbed._system import (
    NODE_ENV,
    TestbedError,
    alive,
    find_in_pid_namespace,
    kill,
    link_exists,
    pid_namespace,
    ports_open,
    record,
    require_root,
    run,
    tail,
    wait_gone,
)

# Shapings of a leaf switch rather than of one node's link.
_LEAF_KINDS = ("uplink", "linecard")
MAX_FAULT_PROCESSES = 64  # competing processes at once, over the whole testbed
SSHD_WAIT_S = 15.0


def node_env(state_dir: Path) -> dict[str, str]:
    """Environment of processes started in a node: the testbed's bin/ (oddnode-hog) on PATH."""
    return {**NODE_ENV, "PATH": f"{state_dir / 'bin'}:{NODE_ENV['PATH']}"}


def _nsenter(init: Mapping[str, int], *namespaces: str) -> list[str]:
    """argv prefix that runs a command in some of a node's namespaces. mount(8)
    and umount(8) read /proc/self/mountinfo: they need the node's PID namespace
    as well as its mount namespace, whose /proc is the node's."""
    return ["nsenter", f"--target={init['pid']}", *(f"--{kind}" for kind in namespaces), "--"]


def start_in_node(state_dir: Path, init: Mapping[str, int], argv: Sequence[str], log: Path,
                  cgroup: str | None) -> dict[str, int]:
    """Start `argv` inside a node (in its CPU cgroup, when it has one) as a
    child of the node's init, which reaps it; return the record of its PID
    as the root namespace sees it."""
    # sh runs inside the node: it starts argv in the background, prints its PID
    # (as the node numbers it) and exits, so the node's init adopts argv.
    script = 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!'
    done = run([*_nsenter(init, "mount", "uts", "net", "pid"), "/bin/sh", "-c", script, "oddnode-start",
                str(log), *argv], env=node_env(state_dir), timeout=30, cgroup=cgroup)
    printed = done.stdout.split()
    proc = find_in_pid_namespace(pid_namespace(init["pid"]), int(printed[-1])) if printed else None
    if proc is None:
        raise TestbedError(f"`{' '.join(argv)}` ended at once inside the node: {tail(log)}")
    return record(proc)


def _fault_source(state_dir: Path, node: str, path: str) -> Path:
    return state_dir / "faults" / node / quote(path, safe="")


def _unmount(init: Mapping[str, int], path: str) -> None:
    done = run([*_nsenter(init, "mount", "pid"), "umount", path], check=False, timeout=30)
    if done.returncode != 0 and "not mounted" not in done.stderr:
        raise TestbedError(f"cannot undo the replacement of {path}: {done.stderr.strip()}")


def fault_file(state_dir: Path, node: str, path: str, content: str | bytes) -> None:
    """Replace the file `path`, as seen by `node` alone, with `content` (written as given).

    A read-only bind mount in the node's mount namespace: a fresh ssh session
    into that node sees it; other nodes and the host do not. The file must
    exist in the node (e.g. /sys/class/dmi/id/bios_date, /proc/meminfo,
    /sys/devices/system/cpu/smt/control).
    """

    def write(source: Path) -> None:
        source.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        source.chmod(0o444)

    _replace(state_dir, node, path, write)


def fault_hang(state_dir: Path, node: str, path: str) -> None:
    """Make reading `path` hang on `node` alone, as on a stuck file system:
    the file is replaced by a named pipe that nobody ever writes."""
    _replace(state_dir, node, path, lambda source: os.mkfifo(source, 0o444))


def _replace(state_dir: Path, node: str, path: str, create: Callable[[Path], None]) -> None:
    """Bind-mount a source made by `create` over `path` in the node's mount namespace."""
    require_root()
    state_dir = Path(state_dir).absolute()
    if not path.startswith("/") or ".." in Path(path).parts:
        raise TestbedError(f"a fault file needs an absolute path without '..', not {path!r}")
    with locked(state_dir):
        state = require_state(state_dir)
        init = require_running(state, node)
        for earlier in [m for m in state["mounts"] if m["node"] == node and m["path"] == path]:
            _unmount(init, path)
            state["mounts"].remove(earlier)
        source = _fault_source(state_dir, node, path)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.unlink(missing_ok=True)
        create(source)
        mount = {"node": node, "path": path, "source": str(source)}
        state["mounts"].append(mount)  # recorded before it is done: `down` then undoes it whatever happens
        write_state(state_dir, state)
        done = run([*_nsenter(init, "mount", "pid"), "mount", "--bind", "-o", "ro", str(source), path],
                   check=False, timeout=30)
        if done.returncode != 0:
            state["mounts"].remove(mount)
            write_state(state_dir, state)
            raise TestbedError(f"cannot replace {path} on {node}: {done.stderr.strip()}")


def fault_process(state_dir: Path, node: str, argv: Sequence[str], seconds: float) -> int:
    """Start `argv` inside `node` (its network, hostname, mounts and PIDs) for at
    most `seconds` (`timeout`, then SIGKILL 5 s later); return its PID as the
    host numbers it. `hog_argv()` gives a CPU and memory-bandwidth hog."""
    require_root()
    state_dir = Path(state_dir).absolute()
    if not argv:
        raise TestbedError("fault_process needs a command")
    if not 0 < seconds <= config.MAX_FAULT_SECONDS:
        raise TestbedError(f"a competing process runs 0 to {config.MAX_FAULT_SECONDS} s, not {seconds}")
    with locked(state_dir):
        state = require_state(state_dir)
        init = require_running(state, node)
        state["processes"] = [p for p in state["processes"] if alive(p)]
        if len(state["processes"]) >= MAX_FAULT_PROCESSES:
            raise TestbedError(f"{MAX_FAULT_PROCESSES} competing processes already run: "
                               "`oddnode testbed fault clear` first")
        log = state_dir / "faults" / node / f"process-{time.time_ns()}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        # timeout makes itself a process group leader: killing the group ends the command's children too.
        rec = start_in_node(state_dir, init, ["timeout", "--kill-after=5", f"{seconds:g}", *argv], log,
                            node_entry(state, node).get("cgroup"))
        state["processes"].append({**rec, "node": node, "argv": list(argv), "seconds": seconds,
                                   "until": time.time() + seconds, "log": str(log)})
        write_state(state_dir, state)
        return rec["pid"]


def fault_daemon(state_dir: Path, node: str, period_ms: float = 20.0, seconds: float = 600.0) -> int:
    """Start, inside `node`, a daemon that spawns short-lived commands
    (`config.DAEMON_COMMANDS`) every `period_ms` for `seconds`, like a
    monitoring subsystem's scripts; return its PID as the host numbers it."""
    try:
        argv = config.daemon_argv(seconds, period_ms)
    except ValueError as err:
        raise TestbedError(str(err)) from None
    return fault_process(state_dir, node, argv, seconds)


def stop_sshd(state_dir: Path, node: str) -> None:
    """Make `node` refuse ssh connections: its sshd (by recorded PID) is stopped."""
    require_root()
    state_dir = Path(state_dir).absolute()
    with locked(state_dir):
        state = require_state(state_dir)
        stop_node_sshd(state, node)
        write_state(state_dir, state)


def start_sshd(state_dir: Path, node: str) -> None:
    """Start `node`'s sshd again (nothing to do when it runs) and wait until it answers."""
    require_root()
    state_dir = Path(state_dir).absolute()
    with locked(state_dir):
        state = require_state(state_dir)
        try:
            start_node_sshd(state_dir, state, node)
        finally:
            write_state(state_dir, state)


def _shaped_rate(rate: int | None, divisor: float | None, base: int | None, what: str) -> int:
    """The rate a link fault gives: `rate` itself, or `base` / `divisor`."""
    if (rate is None) == (divisor is None):
        raise TestbedError("a link fault takes a rate or a divisor of the link's rate, one of the two")
    if divisor is not None:
        if not divisor > 1:
            raise TestbedError(f"a slower link divides its rate by more than 1, not {divisor:g}")
        if base is None:
            raise TestbedError(f"{what} is not shaped (`oddnode testbed up --link-rate RATE` shapes every "
                               "node's link): give the fault a rate")
        rate = round(base / divisor)
    if not network.MIN_RATE_BPS <= rate <= network.MAX_RATE_BPS:
        raise TestbedError(f"rate {rate} bit/s is outside {network.format_rate(network.MIN_RATE_BPS)} "
                           f"to {network.format_rate(network.MAX_RATE_BPS)}")
    return rate


def _record_shaping(state: State, kind: str, target: str, **what) -> None:
    """Replace any earlier shaping of the same link by this one (a node's
    link is shaped, or delayed, once; a leaf's uplink and its fabric link
    each once)."""
    def link(kind: str) -> str:
        return kind if kind in _LEAF_KINDS else "node"

    state["shaped"] = [s for s in state.get("shaped", []) if link(s["kind"]) != link(kind) or s["target"] != target
                       or s.get("network") != what.get("network")]
    state["shaped"].append({"kind": kind, "target": target, **what})


def _leaf(state: State, name: str) -> dict:
    leaves = state.get("leaves") or []
    if not leaves:
        raise TestbedError("this testbed has no leaf switches (`oddnode testbed up --leaves N` makes them)")
    for leaf in leaves:
        if leaf["name"] == name:
            return leaf
    raise TestbedError(f"no leaf {name!r} in this testbed: its leaves are "
                       + ", ".join(leaf["name"] for leaf in leaves))


def fault_link(state_dir: Path, node: str, rate: int | None = None, *, divisor: float | None = None,
               on: str | None = None) -> int:
    """Shape `node`'s link, both ways, to `rate` bits/s, or to the testbed's
    link rate / `divisor`; its link on the further network `on` when given;
    return the rate."""
    require_root()
    state_dir = Path(state_dir).absolute()
    with locked(state_dir):
        state = require_state(state_dir)
        require_running(state, node)
        entry = node_entry(state, node)
        if on is not None and on not in (entry.get("links") or {}):
            known = ", ".join(net["name"] for net in state.get("networks") or []) or "none"
            raise TestbedError(f"no network {on!r} in this testbed (its further networks: {known})")
        what = f"{node}'s link" + (f" on {on}" if on else "")
        rate = _shaped_rate(rate, divisor, state.get("link_rate"), what)
        network.set_qdisc(network.node_link_ends(entry, on), network.tbf_qdisc(rate))
        _record_shaping(state, "link", node, rate=rate, **({"network": on} if on else {}))
        write_state(state_dir, state)
        return rate


def fault_uplink(state_dir: Path, leaf: str, rate: int | None = None, *, divisor: float | None = None) -> int:
    """Shape leaf switch `leaf`'s uplink, both ways, to `rate` bits/s, or to
    its non-blocking rate (its nodes' link rates added up) / `divisor`;
    return the rate."""
    require_root()
    state_dir = Path(state_dir).absolute()
    with locked(state_dir):
        state = require_state(state_dir)
        entry = _leaf(state, leaf)
        rate = _shaped_rate(rate, divisor, network.uplink_rate(state, entry), f"{leaf}'s uplink")
        network.set_qdisc(network.uplink_ends(entry), network.tbf_qdisc(rate))
        _record_shaping(state, "uplink", leaf, rate=rate)
        write_state(state_dir, state)
        return rate


def _linecard_ends(state: State, leaf: Mapping) -> list[str]:
    return [node_entry(state, node)["veth"][0] for node in leaf["nodes"] if node_entry(state, node).get("veth")]


def fault_linecard(state_dir: Path, leaf: str, rate: int | None = None, *, divisor: float | None = None) -> int:
    """Make leaf switch `leaf` a line card without local switching: all its
    nodes send (to each other too) shares one fabric link of `rate` bits/s,
    or of its non-blocking rate / `divisor`; return the rate.  Its uplink
    keeps its own shaping.  Needs the kernel's ifb device and tc's mirred."""
    require_root()
    state_dir = Path(state_dir).absolute()
    with locked(state_dir):
        state = require_state(state_dir)
        entry = _leaf(state, leaf)
        rate = _shaped_rate(rate, divisor, network.uplink_rate(state, entry), f"{leaf}'s fabric link")
        ends = _linecard_ends(state, entry)
        if entry.get("linecard"):
            network.remove_linecard(entry, ends)
        entry["linecard"] = config.names_of(state).linecard_name(entry["index"])
        write_state(state_dir, state)  # recorded before it exists: `down` removes it whatever happens next
        try:
            network.create_linecard(entry, ends, rate, str(state_dir))
        except TestbedError as err:
            network.remove_linecard(entry, ends)
            entry["linecard"] = None
            write_state(state_dir, state)
            raise TestbedError(f"{leaf}: cannot make it a line card (the kernel needs the ifb device and tc's "
                               f"u32 and mirred): {err}") from None
        _record_shaping(state, "linecard", leaf, rate=rate)
        write_state(state_dir, state)
        return rate


def fault_delay(state_dir: Path, node: str, milliseconds: float) -> None:
    """Delay every packet on `node`'s link by `milliseconds`, each way (the
    link keeps the testbed's rate).  Needs the kernel's netem qdisc."""
    require_root()
    if not 0 < milliseconds <= network.MAX_DELAY_MS:
        raise TestbedError(f"a delay is 0 to {network.MAX_DELAY_MS:g} ms, not {milliseconds:g}")
    state_dir = Path(state_dir).absolute()
    with locked(state_dir):
        state = require_state(state_dir)
        why_not = network.netem_available(config.names_of(state))
        if why_not is not None:
            raise TestbedError(f"this kernel cannot delay packets: tc's netem qdisc (module sch_netem) is "
                               f"missing ({why_not}); `modprobe sch_netem` where the module exists")
        require_running(state, node)
        network.set_qdisc(network.node_link_ends(node_entry(state, node)),
                          network.netem_qdisc(milliseconds, state.get("link_rate")))
        _record_shaping(state, "delay", node, milliseconds=milliseconds)
        write_state(state_dir, state)


def clear_faults(state_dir: Path) -> None:
    """Undo every fault: competing processes killed, files restored, sshd running again."""
    require_root()
    state_dir = Path(state_dir).absolute()
    with locked(state_dir):
        state = require_state(state_dir)
        try:
            undo_faults(state_dir, state, restart_sshd=True)
        finally:
            write_state(state_dir, state)


def stop_node_sshd(state: State, node: str) -> None:
    entry = node_entry(state, node)
    sshd = entry.get("sshd")
    if kill(sshd, signal.SIGTERM) and wait_gone([sshd], 5.0):
        kill(sshd, signal.SIGKILL)
        if wait_gone([sshd], 5.0):
            raise TestbedError(f"{node}: sshd (pid {sshd['pid']}) does not stop")
    entry["sshd"] = None
    entry["sshd_stopped"] = True


def start_node_sshd(state_dir: Path, state: State, node: str) -> None:
    entry = node_entry(state, node)
    if alive(entry.get("sshd")):
        return
    init = require_running(state, node)
    node_dir = Path(entry["dir"])
    entry["sshd"] = start_in_node(state_dir, init, entry["sshd_argv"], node_dir / "sshd.out", entry.get("cgroup"))
    entry["sshd_stopped"] = False
    deadline = time.monotonic() + SSHD_WAIT_S
    while not ports_open({node: entry["address"]}, timeout=0.5)[node]:
        if not alive(entry["sshd"]) or time.monotonic() >= deadline:
            raise TestbedError(f"{node}: sshd does not answer on {entry['address']}:22: "
                               f"{tail(node_dir / 'sshd.log')}")
        time.sleep(0.05)


def undo_faults(state_dir: Path, state: State, *, restart_sshd: bool) -> None:
    """Kill recorded competing processes, unmount recorded replacements, give
    shaped links back their rate and (when asked) restart stopped sshds. The
    state is updated; the caller writes it."""
    processes = state["processes"]
    for process in processes:
        kill(process, signal.SIGKILL, group=True)
    left = wait_gone(processes, 5.0)
    state["processes"] = [dict(p) for p in left]
    if left:
        raise TestbedError(f"competing processes {', '.join(str(p['pid']) for p in left)} do not stop")
    for mount in list(state["mounts"]):
        init = node_entry(state, mount["node"]).get("init")
        if alive(init):  # a node that is gone took its mount namespace, and the mount, with it
            _unmount(init, mount["path"])
        state["mounts"].remove(mount)
    for shaping in list(state.get("shaped") or []):
        if shaping["kind"] == "linecard":
            leaf = _leaf(state, shaping["target"])
            if leaf.get("linecard"):
                network.remove_linecard(leaf, _linecard_ends(state, leaf))
                leaf["linecard"] = None
        elif shaping["kind"] == "uplink":
            leaf = _leaf(state, shaping["target"])
            if leaf.get("uplink") and link_exists(leaf["uplink"][0]):
                network.set_qdisc(network.uplink_ends(leaf), None)
        else:
            entry, on = node_entry(state, shaping["target"]), shaping.get("network")
            if network.link_is_up(entry, on) and alive(entry.get("init")):
                network.set_qdisc(network.node_link_ends(entry, on), network.base_qdisc(state))
        state["shaped"].remove(shaping)
    if restart_sshd:
        for node, entry in state["nodes"].items():
            if entry.get("sshd_stopped") and alive(entry.get("init")):
                start_node_sshd(state_dir, state, node)


def fault_lines(state: State) -> dict[str, list[str]]:
    """Per node, the faults in force, in words."""
    lines: dict[str, list[str]] = {}
    for mount in state["mounts"]:
        lines.setdefault(mount["node"], []).append(f"{mount['path']} replaced")
    now = time.time()
    for process in state["processes"]:
        if alive(process):
            name = config.describe_argv(process["argv"])
            left = max(0, round(process["until"] - now))
            lines.setdefault(process["node"], []).append(
                f"competing process {name} (pid {process['pid']}, {left} s left)")
    for node, entry in state["nodes"].items():
        if entry.get("sshd_stopped"):
            lines.setdefault(node, []).append("sshd stopped")
    for shaping in state.get("shaped") or []:
        if shaping["kind"] == "delay":
            text = f"link delayed {shaping['milliseconds']:g} ms each way"
        elif shaping["kind"] == "linecard":
            text = f"line card: its nodes share one fabric link of {network.format_rate(shaping['rate'])}"
        else:
            on = f" on {shaping['network']}" if shaping.get("network") else ""
            text = f"{shaping['kind']}{on} shaped to {network.format_rate(shaping['rate'])}"
        if shaping["kind"] in _LEAF_KINDS:
            leaf = _leaf(state, shaping["target"])
            for node in leaf["nodes"]:
                lines.setdefault(node, []).append(f"{leaf['name']}'s {text}")
        else:
            lines.setdefault(shaping["target"], []).append(text)
    return lines

