"""A CPU cgroup per testbed node, so that each node has its own, equal,
share of the machine's CPUs, as identical machines would.

Without them every process gets an equal slice, whichever node it lives in:
a competing process inside one node takes CPU time from all nodes alike and
no node stands out; and a node that runs while the others wait gets the
whole machine, so its best run looks better than theirs.  Each node's group
is capped at CPUs / nodes (a CFS bandwidth quota): a node never runs faster
than its share, whoever else is busy, and a competing process inside it
takes from that share alone, as it would on a real cluster.

cgroup v1 (a ``cpu`` controller mount) and v2 (``cpu`` enabled at the root
of the unified hierarchy) both work.  The groups are made directly under
the hierarchy's root, where root may always create them, named after the
testbed's state directory, and recorded so that `down` removes them.  Where
neither is usable the testbed still works, without per-node CPU shares, and
says so.
"""

from __future__ import annotations

import errno
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
# How long `remove` waits for the kernel to let go of a group whose last
# process just ended (a dying task stays a member until it is reaped).
REMOVE_WAIT_S = 5.0
# The quota's accounting period.  Short, so that a node's throttling is spread
# evenly over a benchmark's timed loops (tens of milliseconds) instead of
# stopping it for one long stretch; not so short that throttling costs much.
PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # the kernel refuses a quota below 1 ms
# The part of the machine's CPUs the nodes share; the rest is the host's (the
# admin's oddnode, ssh clients, the kernel's own work, and on a virtual
# machine the time its hypervisor keeps).  The quotas must bind: were the
# nodes given all of it, any host work would take its time from whichever
# nodes were running and their results would scatter by 15-30%; at three
# quarters, on a 2-vCPU virtual machine, one of 8 nodes still ran 30-40%
# faster than the others in each check; at half, memory rates of 8 nodes
# scatter by 1-4% and none stands out.  (Below MIN_QUOTA_US per node, with
# more than 5 nodes a CPU, the quotas stop binding.)
NODES_SHARE = 0.5


@dataclass(frozen=True)
class CpuHierarchy:
    """A mounted cgroup hierarchy with the cpu controller."""

    version: int  # 1 or 2
    mount: Path


def find_cpu_hierarchy(mountinfo: Path = MOUNTINFO) -> CpuHierarchy | None:
    """The v1 ``cpu`` mount if there is one, else the v2 mount whose root
    offers ``cpu``; None when neither exists."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    unified = None
    for line in lines:
        # mountinfo: id parent major:minor root mountpoint options ... - fstype source superoptions
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        mount, fstype, superoptions = Path(fields[4]), tail[0], tail[2].split(",")
        if fstype == "cgroup" and "cpu" in superoptions:
            return CpuHierarchy(1, mount)
        if fstype == "cgroup2" and unified is None and fields[3] == "/":
            unified = mount
    if unified is not None:
        try:
            if "cpu" in (unified / "cgroup.controllers").read_text().split():
                return CpuHierarchy(2, unified)
        except OSError:
            pass
    return None


def group_name(state_dir: Path) -> str:
    """The testbed's group: one per state directory, recognisably ours."""
    return "oddnode-testbed-" + hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]


def group_path(state_dir: Path) -> Path | None:
    """Where the testbed's group is (or would be) on this machine."""
    hierarchy = find_cpu_hierarchy()
    return None if hierarchy is None else hierarchy.mount / group_name(state_dir)


def node_quota_us(cpus: int, nodes: int) -> int:
    """CPU time a node may use per PERIOD_US: its equal share of the part of
    the CPUs left to nodes."""
    return max(MIN_QUOTA_US, int(PERIOD_US * cpus * NODES_SHARE) // max(nodes, 1))


def available_cpus() -> int:
    return len(os.sched_getaffinity(0))


def create(state_dir: Path, nodes: list[str]) -> tuple[dict[str, str] | None, str | None]:
    """Make the testbed's group and a group per node, capped at its share;
    return ({node: path}, None), or (None, why not) when this machine cannot."""
    hierarchy = find_cpu_hierarchy()
    if hierarchy is None:
        return None, "no cgroup hierarchy with the cpu controller is mounted"
    base = hierarchy.mount / group_name(state_dir)  # = group_path(state_dir)
    try:
        if hierarchy.version == 2:
            _enable_cpu(hierarchy.mount)
        base.mkdir(exist_ok=True)
        if hierarchy.version == 2:
            _enable_cpu(base)
        quota = node_quota_us(available_cpus(), len(nodes))
        paths = {}
        for node in nodes:
            (base / node).mkdir(exist_ok=True)
            _cap(hierarchy.version, base / node, quota)
            paths[node] = str(base / node)
    except OSError as err:
        remove_tree(str(base))
        return None, f"cannot create CPU cgroups under {hierarchy.mount}: {err.strerror or err}"
    return paths, None


def _enable_cpu(group: Path) -> None:
    """Give the children of a v2 group the cpu controller."""
    control = group / "cgroup.subtree_control"
    if "cpu" not in control.read_text().split():
        control.write_text("+cpu")


def _cap(version: int, group: Path, quota_us: int) -> None:
    if version == 1:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota_us))
    else:
        (group / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")


def join(group: str) -> None:
    """Move the calling process into `group` (for a child between fork and
    exec: everything it starts stays there)."""
    with open(os.path.join(group, "cgroup.procs"), "w") as procs:
        procs.write(str(os.getpid()))


def members(group: str) -> list[int]:
    """PIDs in a group; empty when it is gone."""
    try:
        return [int(pid) for pid in Path(group, "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove(groups: list[str]) -> list[str]:
    """Remove the groups (children before their parent); return those that
    remain, with why."""
    left = []
    for group in groups:
        deadline = time.monotonic() + REMOVE_WAIT_S
        while True:
            try:
                os.rmdir(group)
                break
            except FileNotFoundError:
                break
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() > deadline:
                    left.append(f"{group} ({err.strerror})")
                    break
                time.sleep(0.05)
    return left


def remove_tree(base: str) -> list[str]:
    """Remove the testbed's group and the node groups in it (each a
    subdirectory: a cgroup's own entries are files)."""
    try:
        children = [str(child) for child in Path(base).iterdir() if child.is_dir()]
    except FileNotFoundError:
        return []
    except OSError as err:
        return [f"{base} ({err.strerror})"]
    return remove(children + [base])
