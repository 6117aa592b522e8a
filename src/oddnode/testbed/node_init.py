"""PID 1 of one testbed node (standard library only; runs inside the node).

The testbed starts it as::

    ip netns exec odd-node01 unshare --uts --mount --pid --fork --mount-proc \\
        --propagation private --kill-child -- oddnode-init -I -S node_init.py node.json

so it already lives in the node's network, UTS, mount and PID namespaces. It
names the node, configures its link, gives it its own view of a few files
(and a DMI table when the host has none), starts the node's sshd (and
its slurmd, on a testbed with Slurm: oddnode.testbed.slurm), then reaps
every process orphaned inside the node until it is killed. Killing it ends
every process of the node: it is the init of the node's PID namespace.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys

# mount(2) flags, from <sys/mount.h>.
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def mount(source: str, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    if _libc.mount(_bytes(source), _bytes(target), _bytes(fstype), flags, _bytes(data)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {source} on {target}: {os.strerror(code)}")


def _without_ipv6(interface: str) -> None:
    try:
        with open(f"/proc/sys/net/ipv6/conf/{interface}/disable_ipv6", "w") as knob:
            knob.write("1\n")
    except FileNotFoundError:  # no IPv6 in this kernel
        pass


def configure_network(node: dict) -> None:
    """eth0 with the node's address, each further network's interface (ib0)
    with its address there, lo up; no IPv6 on them (traffic stays on its
    testbed's subnets)."""
    veth = node["veth"]
    _without_ipv6(veth)
    # eth0 on every node, as on identical machines (an inventory compares names).
    commands = [
        f"link set {veth} name eth0",
        "link set lo up",
        f"addr add {node['address']}/{node['prefixlen']} dev eth0",
        "link set eth0 up",
    ]
    for link in node.get("links") or []:
        _without_ipv6(link["veth"])
        commands += [f"link set {link['veth']} name {link['interface']}",
                     f"addr add {link['address']}/{node['prefixlen']} dev {link['interface']}",
                     f"link set {link['interface']} up"]
    subprocess.run(["ip", "-batch", "-"], input="\n".join(commands) + "\n", text=True, check=True, timeout=30)


def synthesize_sys_class(staging: str, dmi: dict[str, str]) -> None:
    """Replace /sys/class, in this mount namespace only, by a tmpfs that holds a
    bind mount of every real /sys/class entry plus a synthetic dmi/id/."""
    mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m")
    for entry in sorted(os.listdir("/sys/class")):
        target = os.path.join(staging, entry)
        os.mkdir(target)
        # After `ip netns exec`, /sys belongs to the node's network namespace:
        # class/net lists the node's own interfaces.
        mount(os.path.join("/sys/class", entry), target, None, MS_BIND | MS_REC)
    dmi_id = os.path.join(staging, "dmi", "id")
    os.makedirs(dmi_id)
    for key, value in dmi.items():
        path = os.path.join(dmi_id, key)
        with open(path, "w") as out:
            out.write(value + "\n")
        os.chmod(path, 0o444)
    mount(staging, "/sys/class", None, MS_MOVE)
    mount("none", "/sys/class", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def bind_private_files(files: dict[str, str]) -> None:
    """The node's own /etc/hostname, /etc/hosts and login records (where the host has them)."""
    for target, source in files.items():
        if os.path.isfile(target):
            mount(source, target, None, MS_BIND)


def start_slurmd(slurm: dict, env: dict) -> None:
    """The node's slurmd, after the host's cgroup hierarchy (bound by the
    testbed at ``slurm["cgroup"]``) is put over this node's /sys/fs/cgroup:
    slurmd wants one, and the node's own sysfs has none mounted."""
    mount(slurm["cgroup"], "/sys/fs/cgroup", None, MS_BIND | MS_REC)
    subprocess.Popen(slurm["slurmd_argv"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     env={**env, "SLURM_CONF": slurm["conf"]}, start_new_session=True)


def reap_forever() -> None:
    """Reap orphans adopted by this init until killed (SIGCHLD blocked and waited
    for, so that none is missed between two waits)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        signal.sigtimedwait({signal.SIGCHLD}, 10.0)


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as config:
        node = json.load(config)
    # As PID 1 of its namespace it only gets signals it handles: let SIGTERM end the node.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    socket.sethostname(node["name"])
    configure_network(node)
    if node.get("sys_class"):
        synthesize_sys_class(node["sys_class"]["staging"], node["sys_class"]["dmi"])
    bind_private_files(node["private_files"])
    subprocess.Popen(node["sshd_argv"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     env=node["env"], start_new_session=True)
    print(f"{node['name']}: up, sshd started", flush=True)
    if node.get("slurm"):
        start_slurmd(node["slurm"], node["env"])
        print(f"{node['name']}: slurmd started", flush=True)
    reap_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
