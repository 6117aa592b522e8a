"""A virtual cluster on one Linux machine (as root), for the demo and the tests.

``up(nodes=8)`` builds nodes ``node01``..``node08`` (three digits past 99, at
most 200). Each node is

- a network namespace ``odd-node01`` whose ``eth0`` (a veth pair
  ``odd-v01h``/``odd-v01n``) has 10.77.0.11/24 and is plugged into the bridge
  ``odd-br0`` (the virtual switch), which has 10.77.0.1/24 in the root
  namespace; nothing is routed anywhere else, and the links carry no IPv6;
- a process tree started with ``ip netns exec odd-node01 unshare --uts
  --mount --pid --fork --mount-proc --propagation private``: its own hostname,
  mounts and PIDs (``ps -e`` inside a node lists that node's processes only).
  PID 1 is ``oddnode-init`` (node_init.py), which reaps orphans, and which
  starts Debian's ``sshd -D`` on the node's address with the testbed's keys.

That is testbed 0; ``up(..., instance=N)`` builds testbed N (1 to 9) beside
it, its objects named ``oddN-...`` and its addresses in 10.77.N.0/24 (see
oddnode.testbed.config.Names), so that several test sessions can each have
one on the same machine.

The state directory (default /run/oddnode/testbed) holds ``ssh_config``
(``ssh -F STATE/ssh_config node01 hostname`` prints node01; host keys are
checked against ``known_hosts``, which names each node by name and address),
the client key ``id_ed25519``, per-node sshd configurations and logs, and
``state.json``, where every namespace, link, process and mount is recorded
before or as it is created. ``down`` removes exactly what is recorded, by
name and by PID (PID plus start time), also after a crashed ``up``.

Each node also sees its own /etc/hostname, an /etc/hosts that names every
node, and its own login records (wtmp, btmp, lastlog), so that nothing a node
does writes into the host's.

DMI: machines without /sys/class/dmi (virtual machines like this one, CI
runners) would give every node an inventory without a BIOS date. There, each
node's init builds, in the node's mount namespace only, a tmpfs holding one
directory per entry of the node's /sys/class, each a bind mount of the real
one (so /sys/class/net still lists the node's own interfaces), adds
``dmi/id/`` with bios_vendor, bios_version, bios_date, board_name,
product_name, sys_vendor and a few more (the same plausible values on every
node), and moves that tmpfs over /sys/class, read-only. A host that has
/sys/class/dmi keeps it, and so do its nodes.

Switches: ``up(nodes, leaves=L)`` hangs the nodes from L leaf bridges
``odd-leaf1``... joined to ``odd-br0`` by uplinks, and writes the topology
file ``STATE/topology``; ``link_rate`` shapes every node's link as a NIC's
speed would (see oddnode.testbed.network).

Faults (`fault_file`, `fault_process`, `fault_daemon`, `stop_sshd`, `fault_link`,
`fault_delay`) change one node only, `fault_uplink` one leaf's uplink,
`fault_linecard` one leaf's switching (a line card with one fabric link); all
are recorded, so that `clear_faults` and `down` undo them.

Every entry point needs root and raises TestbedError("the testbed needs
root: ...") otherwise.
"""

from oddnode.testbed._system import TestbedError
from oddnode.testbed.config import (
    MAX_FAULT_SECONDS,
    MAX_INSTANCES,
    MAX_NODES,
    Names,
    daemon_argv,
    hog_argv,
    meminfo_with_total,
    node_names,
    real_memory_total_kib,
)
from oddnode.testbed.faults import (
    clear_faults,
    fault_daemon,
    fault_delay,
    fault_file,
    fault_hang,
    fault_link,
    fault_linecard,
    fault_process,
    fault_uplink,
    start_sshd,
    stop_sshd,
)
from oddnode.testbed.lifecycle import DEFAULT_STATE_DIR, NodeState, Testbed, TestbedStatus, down, status, up
from oddnode.testbed.network import format_rate, parse_rate

__all__ = [
    "DEFAULT_STATE_DIR",
    "MAX_FAULT_SECONDS",
    "MAX_INSTANCES",
    "MAX_NODES",
    "Names",
    "NodeState",
    "Testbed",
    "TestbedError",
    "TestbedStatus",
    "clear_faults",
    "down",
    "fault_daemon",
    "fault_delay",
    "fault_linecard",
    "fault_file",
    "fault_hang",
    "fault_link",
    "fault_process",
    "fault_uplink",
    "daemon_argv",
    "format_rate",
    "hog_argv",
    "meminfo_with_total",
    "node_names",
    "parse_rate",
    "real_memory_total_kib",
    "start_sshd",
    "status",
    "stop_sshd",
    "up",
]
