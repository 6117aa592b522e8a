"""Bringing a testbed up, looking at it and taking it down."""

from __future__ import annotations

import datetime
import json
import os
import pwd
import shutil
import signal
import sys
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oddnode.core.nodes import fold
from oddnode.testbed import cgroups, config, network
from oddnode.testbed import slurm as testbed_slurm
from oddnode.testbed._state import LOCK_FILE, State, locked, read_state, require_state, write_state
from oddnode.testbed._system import (
    SSHD,
    SYS_NET,
    TestbedError,
    alive,
    children_by_parent,
    find_in_pid_namespace,
    kill,
    link_exists,
    netns_exists,
    netns_inode,
    pid_namespace,
    ports_open,
    process_table,
    record,
    record_of,
    require_root,
    require_tools,
    run,
    spawn,
    tail,
    wait_gone,
)
from oddnode.testbed.faults import fault_lines, node_env, undo_faults
from oddnode.core.topology import format_topology

DEFAULT_STATE_DIR = Path("/run/oddnode/testbed")
DEFAULT_NODES = 8  # enough for every pair pattern and two leaf switches
TOPOLOGY_FILE = "topology"  # in the state directory, when nodes hang from several leaves
NODE_INIT = Path(__file__).with_name("node_init.py")
START_WAIT_S = 30.0  # for every node's init and sshd, plus START_WAIT_PER_NODE_S per node
START_WAIT_PER_NODE_S = 0.5
NUMA_SYSFS = "/sys/devices/system/node"  # one directory per NUMA node: nodeN/meminfo
STOP_WAIT_S = 10.0

OnCreated = Callable[[str, str], None]
# Root's shell start-up files, replaced in every node (see _write_files).
SHELL_STARTUP_FILES = tuple(Path(pwd.getpwuid(0).pw_dir) / name for name in (".bashrc", ".profile", ".bash_profile"))


@dataclass(frozen=True)
class Testbed:
    """A running testbed: its nodes and what an ssh client needs to reach them."""

    __test__ = False  # not a pytest test class

    nodes: list[str]
    addresses: dict[str, str]
    ssh_config: Path
    known_hosts: Path
    identity: Path
    state_dir: Path
    # Why the nodes share the CPUs as plain processes (no per-node CPU
    # cgroups on this machine), or None when each node has its own share.
    cpu_sharing: str | None = None
    # Leaf switch -> its nodes when there are several leaves, and their
    # topology file (see oddnode.core.topology); else empty and None.
    leaves: dict[str, list[str]] = field(default_factory=dict)
    topology: Path | None = None
    link_rate: int | None = None  # bits per second of every node's link, None: unshaped
    slurm_conf: Path | None = None  # the slurm.conf of its Slurm, None: no Slurm (see oddnode.testbed.slurm)
    names: config.Names = config.Names()  # its number's names and addresses (see oddnode.testbed.config)
    # Further network -> node -> its address there (the nodes name each other NODE-NETWORK on it).
    networks: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def nodeset(self) -> str:
        return fold(self.nodes)

    @classmethod
    def load(cls, state_dir: Path = DEFAULT_STATE_DIR) -> Testbed:
        require_root()
        state_dir = Path(state_dir).absolute()
        state = require_state(state_dir)
        if not state["complete"]:
            raise TestbedError(f"the testbed in {state_dir} did not finish coming up: "
                               f"{_down_command(state_dir)} removes what it created")
        return cls(
            nodes=list(state["nodes"]),
            addresses={node: entry["address"] for node, entry in state["nodes"].items()},
            ssh_config=state_dir / "ssh_config",
            known_hosts=state_dir / "known_hosts",
            identity=state_dir / "id_ed25519",
            state_dir=state_dir,
            cpu_sharing=state.get("cpu_sharing"),
            leaves={leaf["name"]: list(leaf["nodes"]) for leaf in state.get("leaves") or []},
            topology=state_dir / TOPOLOGY_FILE if state.get("leaves") else None,
            link_rate=state.get("link_rate"),
            slurm_conf=testbed_slurm.conf_path(state_dir) if state.get("slurm") else None,
            names=config.names_of(state),
            networks=network_addresses(state),
        )

    def ssh_argv(self, node: str, *command: str) -> list[str]:
        """argv that runs `command` on `node` with the testbed's ssh configuration."""
        return ["ssh", "-F", str(self.ssh_config), node, *command]


@dataclass(frozen=True)
class NodeState:
    """One node as `status` found it."""

    name: str
    address: str
    netns: bool  # its network namespace exists
    init: bool  # PID 1 of its namespaces runs
    sshd: bool  # its recorded sshd runs
    port_open: bool  # port 22 of its address accepts connections
    faults: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.netns and self.init and self.sshd and self.port_open

    @property
    def condition(self) -> str:
        if not self.netns:
            return "network namespace missing"
        if not self.init:
            return "not running"
        if not self.sshd:
            return "sshd stopped"
        if not self.port_open:
            return "sshd not answering"
        return "ready"


@dataclass(frozen=True)
class TestbedStatus:
    """What `status` found in a state directory."""

    __test__ = False  # not a pytest test class

    state_dir: Path
    up: bool  # a testbed is recorded there
    complete: bool = False  # its `up` finished
    names: config.Names = config.Names()  # its number's names and addresses
    bridge: bool = False
    nodes: tuple[NodeState, ...] = field(default_factory=tuple)
    cpu_sharing: str | None = None  # see Testbed.cpu_sharing
    leaves: tuple[tuple[str, str], ...] = ()  # (leaf, its node set), when there are several
    link_rate: int | None = None
    slurm: tuple[tuple[str, str], ...] | None = None  # (Slurm state, its nodes folded); None: no Slurm
    networks: tuple[tuple[str, str, str, bool], ...] = ()  # further networks: (name, switch, subnet, switch exists)

    @property
    def addresses(self) -> dict[str, str]:
        return {node.name: node.address for node in self.nodes}

    @property
    def ok(self) -> bool:
        return self.up and self.complete and self.bridge and all(node.ok for node in self.nodes)

    def summary(self) -> str:
        if not self.up:
            return f"no testbed is up in {self.state_dir}"
        names = [node.name for node in self.nodes]
        lines = [f"testbed in {self.state_dir}: {len(names)} nodes {fold(names)}, "
                 f"switch {self.names.bridge} {self.names.host_address}/{config.PREFIXLEN}"
                 f"{'' if self.bridge else ' (missing)'}"]
        if self.leaves:
            lines.append("  leaf switches under it: " + ", ".join(f"{leaf} {members}" for leaf, members in self.leaves)
                         + f" (topology file {self.state_dir / TOPOLOGY_FILE})")
        if self.link_rate:
            lines.append(f"  every node's link shaped to {network.format_rate(self.link_rate)}")
        for name, bridge, subnet, exists in self.networks:
            lines.append(f"  network {name}: switch {bridge} {subnet}{'' if exists else ' (missing)'}, "
                         f"every node on it as NODE-{name} (interface {config.network_interface(name)})")
        if not self.complete:
            lines.append(f"  incomplete: `up` did not finish; {_down_command(self.state_dir)} removes it")
        elif self.cpu_sharing:
            lines.append(f"  CPUs shared by all nodes' processes alike ({self.cpu_sharing}): "
                         "a competing process slows every node, not its own")
        else:
            lines.append("  CPUs shared between nodes as equals (a CPU cgroup per node)")
        by_condition: dict[str, list[str]] = {}
        for node in self.nodes:
            by_condition.setdefault(node.condition, []).append(node.name)
        for condition, members in by_condition.items():
            lines.append(f"  {condition}: {fold(members)}")
        faulty = [node for node in self.nodes if node.faults]
        if faulty:
            lines.append("  faults:")
            lines += [f"    {node.name}: {'; '.join(node.faults)}" for node in faulty]
        if self.slurm is not None:
            states = ", ".join(f"{state} {members}" for state, members in self.slurm) or "no answer from slurmctld"
            lines.append(f"  Slurm: partition {testbed_slurm.PARTITION} ({states}); "
                         f"export SLURM_CONF={testbed_slurm.conf_path(self.state_dir)}")
        if self.complete and names:
            lines.append(f"ssh -F {self.state_dir / 'ssh_config'} {names[0]}")
        return "\n".join(lines)


def _down_command(state_dir: Path) -> str:
    suffix = "" if state_dir == DEFAULT_STATE_DIR else f" --state-dir {state_dir}"
    return f"`oddnode testbed down{suffix}`"


def _is_blank(state_dir: Path) -> bool:
    """Empty, or holding only what an `up` that died before its first record leaves."""
    return all(entry.name == LOCK_FILE or entry.name.startswith(".state.json.")
               for entry in state_dir.iterdir())


# -- up ------------------------------------------------------------------------

def up(nodes: int = DEFAULT_NODES, state_dir: Path = DEFAULT_STATE_DIR, prefix: str = "node", *,
       leaves: int = 1, link_rate: int | None = None, slurm: bool = False, instance: int = 0,
       networks: Sequence[str] = (), on_created: OnCreated | None = None) -> Testbed:
    """Bring up `nodes` virtual nodes (``node01``...) on this machine, each in its
    own network, UTS, mount and PID namespaces with its own sshd; with
    `leaves` > 1 they hang from that many leaf switches under the core one
    (see oddnode.testbed.network); `link_rate` (bits/s) shapes every node's link;
    `slurm` adds a Slurm controller on this machine and a slurmd in every
    node (see oddnode.testbed.slurm); `networks` names further networks, a
    switch each that every node is on as well (a second fabric, see
    oddnode.testbed.config).  `instance` numbers the testbed among
    those of this machine (its interface names and subnet, see
    oddnode.testbed.config.Names).

    Every object is recorded in ``state_dir/state.json`` before or as it is
    created; `on_created(kind, name)` is called after each (progress, tests).
    A failing `up` removes what it created; a killed one leaves it recorded
    for `down`.
    """
    require_root()
    require_tools()
    if slurm:
        testbed_slurm.require_tools()
    try:
        names = config.node_names(nodes, prefix)
        if leaves > config.MAX_LEAVES:
            raise ValueError(f"at most {config.MAX_LEAVES} leaves, not {leaves}")
        naming = config.Names(instance)
        networks = config.check_networks(networks)
        groups = network.leaf_groups(names, leaves)
        if leaves == 1:  # every node on the core switch
            groups = {}
        if link_rate is not None and not network.MIN_RATE_BPS <= link_rate <= network.MAX_RATE_BPS:
            raise ValueError(f"link rate {link_rate} bit/s is outside {network.format_rate(network.MIN_RATE_BPS)}"
                             f" to {network.format_rate(network.MAX_RATE_BPS)}")
    except ValueError as err:
        raise TestbedError(str(err)) from None
    state_dir = Path(state_dir).absolute()
    if not config.is_safe_path(state_dir):
        raise TestbedError(f"state directory {state_dir} has characters that ssh configuration files "
                           "would interpret: use letters, digits and . _ - + @ :")
    if read_state(state_dir) is not None:
        raise TestbedError(f"a testbed is already up in {state_dir}: {_down_command(state_dir)} first")
    if state_dir.exists() and not _is_blank(state_dir):
        raise TestbedError(f"{state_dir} is not empty: the testbed needs a directory of its own")
    _check_machine_free(naming, names, len(groups), len(networks))
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with locked(state_dir):
        if read_state(state_dir) is not None:
            raise TestbedError(f"a testbed is already up in {state_dir}: {_down_command(state_dir)} first")
        state = _initial_state(state_dir, naming, names, prefix, groups, link_rate, networks)
        state["slurm"] = {} if slurm else None
        write_state(state_dir, state)
        try:
            _build(state_dir, state, on_created or (lambda kind, name: None))
        except BaseException as err:
            try:
                teardown(state_dir, state)
            except TestbedError as cleanup:
                write_state(state_dir, state)
                raise TestbedError(f"testbed up failed ({err}) and removing what it had created failed "
                                   f"too ({cleanup}): {_down_command(state_dir)}") from err
            shutil.rmtree(state_dir, ignore_errors=True)
            raise
    return Testbed.load(state_dir)


def _check_machine_free(naming: config.Names, names: list[str], leaves: int, networks: int = 0) -> None:
    """Refuse to start over another testbed of the same number, leftovers or
    a network using its subnet."""
    if link_exists(naming.bridge):
        try:
            owner = (SYS_NET / naming.bridge / "ifalias").read_text().strip()
        except OSError:
            owner = ""
        where = f"state directory {owner}" if owner else "state directory unknown"
        remedy = _down_command(Path(owner)) if owner else f"`ip link delete {naming.bridge}`"
        raise TestbedError(f"another testbed is up on this machine (bridge {naming.bridge}, {where}): "
                           f"{remedy} first, or give this one another number (--instance)")
    leftovers = []
    for index, node in enumerate(names, start=1):
        namespace = naming.netns_name(node)
        if netns_exists(namespace):
            leftovers.append(f"ip netns delete {namespace}")
        host_ends = [naming.veth_names(index, len(names))[0]]
        host_ends += [naming.network_veth_names(k, index, len(names))[0] for k in range(1, networks + 1)]
        leftovers += [f"ip link delete {end}" for end in host_ends if link_exists(end)]
    leftovers += [f"ip link delete {bridge}" for k in range(1, networks + 1)
                  if link_exists(bridge := naming.network_bridge(k))]
    for index in range(1, leaves + 1):
        for link in (naming.leaf_bridge(index), naming.uplink_names(index)[0]):
            if link_exists(link):
                leftovers.append(f"ip link delete {link}")
    if leftovers:
        raise TestbedError("objects named like the testbed's exist but no state directory records them; "
                           "remove them with: " + "; ".join(leftovers))
    # (interface, address/prefix length) of every IPv4 address of this machine
    listing = run(["ip", "-o", "-4", "addr", "show"]).stdout.splitlines()
    owned = [(fields[1], fields[3]) for fields in map(str.split, listing) if len(fields) > 3]
    for subnet in naming.subnets(networks):
        used = [f"{interface} {address}" for interface, address in owned if naming.in_subnet(address, subnet)]
        routes = run(["ip", "-4", "route", "show", "root", subnet]).stdout.strip()
        if used or routes:
            detail = "; ".join(used) or routes.splitlines()[0]
            raise TestbedError(f"{subnet} is already in use on this machine ({detail}): "
                               "the testbed needs it for itself")


def _initial_state(state_dir: Path, naming: config.Names, names: list[str], prefix: str,
                   groups: dict[str, list[str]], link_rate: int | None, networks: Sequence[str] = ()) -> State:
    nodes: dict[str, dict[str, Any]] = {}
    for index, node in enumerate(names, start=1):
        node_dir = state_dir / "nodes" / node
        nodes[node] = {
            "index": index,
            "address": naming.node_address(index),
            "dir": str(node_dir),
            "netns": None,  # names are filled in just before each object is created
            "veth": None,
            "unshare": None,
            "init": None,
            "sshd": None,
            "sshd_stopped": False,
            "cgroup": None,  # its CPU cgroup's directory, when the machine allows one
            "sshd_argv": [str(SSHD), "-D", "-f", str(node_dir / "sshd_config"), "-E", str(node_dir / "sshd.log")],
            # per further network its address there and its veth pair (filled in as it is created)
            "links": {name: {"address": naming.network_address(k, index), "veth": None}
                      for k, name in enumerate(networks, start=1)},
        }
    return {
        "schema": 1,
        "state_dir": str(state_dir),
        "prefix": prefix,
        "instance": naming.number,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "complete": False,
        "bridge": None,
        "nodes": nodes,
        "mounts": [],
        "processes": [],
        "cgroup": None,  # the testbed's CPU cgroup, parent of the nodes' ones
        "cpu_sharing": None,  # why nodes share CPUs as plain processes, when they do
        # Leaf switches (none: every node on the core bridge); bridge and uplink
        # names are filled in just before each is created.
        "leaves": [{"index": index, "name": name, "nodes": members, "bridge": None, "uplink": None}
                   for index, (name, members) in enumerate(groups.items(), start=1)],
        # Further networks: a switch each (its name filled in just before it is created).
        "networks": [{"index": k, "name": name, "bridge": None} for k, name in enumerate(networks, start=1)],
        "link_rate": link_rate,  # bits/s of every node's link, None: unshaped
        "shaped": [],  # link faults in force: {"kind": "link"|"uplink"|"delay", "target", ...}
    }


def _build(state_dir: Path, state: State, on_created: OnCreated) -> None:
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    per_node_slurm = testbed_slurm.prepare(state_dir, state) if state.get("slurm") is not None else {}
    write_state(state_dir, state)
    _write_files(state_dir, config.names_of(state), nodes, per_node_slurm, state.get("networks") or [])
    if state["leaves"]:
        groups = {node: leaf["name"] for leaf in state["leaves"] for node in leaf["nodes"]}
        (state_dir / TOPOLOGY_FILE).write_text(format_topology(groups))
    _create_network(state_dir, state, on_created)
    _create_cgroups(state_dir, state, on_created)
    if per_node_slurm:
        testbed_slurm.start_controller(state_dir, state, lambda: write_state(state_dir, state))
        on_created("slurm", "controller")
    _start_nodes(state_dir, state, on_created)
    if per_node_slurm:
        testbed_slurm.wait_for_nodes(state_dir, list(nodes))
        on_created("slurm", "nodes")
    state["complete"] = True
    write_state(state_dir, state)


def _write_files(state_dir: Path, naming: config.Names, nodes: dict[str, dict[str, Any]],
                 per_node_slurm: dict[str, dict[str, Any]], networks: Sequence[Mapping[str, Any]] = ()) -> None:
    """Keys, ssh client and server configurations, and each node's init
    configuration (with its slurmd's, on a testbed with Slurm)."""
    # sshd's privilege separation directory (Debian creates it at boot only when ssh.service runs).
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    bin_dir = state_dir / "bin"
    bin_dir.mkdir()
    # Links to the interpreter: a process started through one has that name (comm)
    # in a node's process list: oddnode-init as PID 1, oddnode-hog and oddnode-daemon as faults.
    interpreter = os.path.realpath(sys.executable)
    for name in ("oddnode-init", config.HOG_NAME, config.DAEMON_NAME):
        (bin_dir / name).symlink_to(interpreter)

    identity = state_dir / "id_ed25519"
    keygens = [["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "oddnode-testbed", "-f", str(identity)]]
    for node, entry in nodes.items():
        Path(entry["dir"]).mkdir(parents=True)
        keygens.append(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node,
                        "-f", str(Path(entry["dir"]) / "ssh_host_ed25519_key")])
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda argv: run(argv, timeout=60), keygens))

    addresses = {node: entry["address"] for node, entry in nodes.items()}
    authorized_keys = state_dir / "authorized_keys"
    authorized_keys.write_text(identity.with_suffix(".pub").read_text())
    host_keys = {node: (Path(entry["dir"]) / "ssh_host_ed25519_key.pub").read_text() for node, entry in nodes.items()}
    (state_dir / "known_hosts").write_text(config.known_hosts_text(addresses, host_keys))
    (state_dir / "ssh_config").write_text(config.ssh_config_text(
        addresses, identity=identity, known_hosts=state_dir / "known_hosts"))
    hosts = config.hosts_text(addresses, network_addresses({"nodes": nodes, "networks": networks}))

    version = config.sshd_version(run([str(SSHD), "-V"], check=False).stderr)
    use_pam = config.root_account_locked(Path("/etc/shadow").read_text())
    synthetic_dmi = not Path("/sys/class/dmi").exists()
    # Each NUMA node's meminfo as it reads now, for every node to keep: a
    # virtual machine whose kernel initialises its memory lazily
    # (deferred_init) grows a NUMA node's MemTotal as memory is first used,
    # so nodes probed minutes apart would report different hardware, which
    # real nodes never do between two checks.
    numa_meminfo = {str(path): path.read_text() for path in sorted(Path(NUMA_SYSFS).glob("node[0-9]*/meminfo"))}
    for node, entry in nodes.items():
        node_dir = Path(entry["dir"])
        (node_dir / "sshd_config").write_text(config.sshd_config_text(
            address=entry["address"], host_key=node_dir / "ssh_host_ed25519_key",
            authorized_keys=authorized_keys, pid_file=node_dir / "sshd.pid",
            use_pam=use_pam, per_source_penalties=version >= (9, 8)))
        (node_dir / "hostname").write_text(node + "\n")
        (node_dir / "hosts").write_text(hosts)
        private_files = {"/etc/hosts": str(node_dir / "hosts"), "/etc/hostname": str(node_dir / "hostname")}
        for record_file in ("/var/log/wtmp", "/var/log/btmp", "/var/log/lastlog"):
            own = node_dir / Path(record_file).name
            own.touch(mode=0o644)
            private_files[record_file] = str(own)
        # The host's root shell start-up files are the host's: a node's sessions
        # start with a plain shell, as on a freshly installed machine.  (One that
        # runs a tool per login, such as pyenv's rehash under a lock, would
        # otherwise make every node's sessions queue on the host's lock files.)
        for startup in SHELL_STARTUP_FILES:
            own = node_dir / startup.name
            own.write_text(f"# {node}: the testbed node's own {startup.name}, empty\n")
            private_files[str(startup)] = str(own)
        for path, text in numa_meminfo.items():
            own = node_dir / f"{Path(path).parent.name}-meminfo"
            own.write_text(text)
            private_files[path] = str(own)
        sys_class = None
        if synthetic_dmi:
            (node_dir / "sys-class").mkdir()
            sys_class = {"staging": str(node_dir / "sys-class"), "dmi": config.DMI_VALUES}
        _, node_end = naming.veth_names(entry["index"], len(nodes))
        init_config = {
            "name": node,
            "address": entry["address"],
            "prefixlen": config.PREFIXLEN,
            "veth": node_end,
            "links": [{"veth": naming.network_veth_names(net["index"], entry["index"], len(nodes))[1],
                       "interface": config.network_interface(net["name"]),
                       "address": entry["links"][net["name"]]["address"]} for net in networks],
            "sys_class": sys_class,
            "private_files": private_files,
            "sshd_argv": entry["sshd_argv"],
            "slurm": per_node_slurm.get(node),
            "env": node_env(state_dir),
        }
        (node_dir / "node.json").write_text(json.dumps(init_config, indent=1) + "\n")


def _create_network(state_dir: Path, state: State, on_created: OnCreated) -> None:
    """The core bridge with the host's address (10.77.N.1/24), the leaves
    under it, then per node a namespace and a veth pair into its switch,
    shaped to the link rate; then the further networks."""
    naming = config.names_of(state)
    state["bridge"] = naming.bridge
    write_state(state_dir, state)
    network.add_switch(naming.bridge, str(state_dir), f"{naming.host_address}/{config.PREFIXLEN}")
    on_created("bridge", naming.bridge)
    network.create_leaves(state, lambda: write_state(state_dir, state), on_created)
    count = len(state["nodes"])
    for node, entry in state["nodes"].items():
        namespace = naming.netns_name(node)
        entry["netns"] = namespace
        write_state(state_dir, state)
        run(["ip", "netns", "add", namespace])
        on_created("netns", namespace)
        entry["veth"] = list(naming.veth_names(entry["index"], count))
        write_state(state_dir, state)
        # The node's end is renamed eth0 by its init; its qdisc goes with it.
        network.plug(state, namespace, entry["veth"], network.switch_of(state, node))
        on_created("veth", entry["veth"][0])
    for net in state.get("networks") or []:
        _create_further_network(state_dir, state, net, on_created)


def _create_further_network(state_dir: Path, state: State, net: dict[str, Any], on_created: OnCreated) -> None:
    """A further network's switch (no address of this machine on it: the
    nodes alone talk there) and every node's veth pair into it, shaped to
    the link rate as the first network's."""
    naming = config.names_of(state)
    net["bridge"] = naming.network_bridge(net["index"])
    write_state(state_dir, state)
    network.add_switch(net["bridge"], str(state_dir))
    on_created("bridge", net["bridge"])
    count = len(state["nodes"])
    for entry in state["nodes"].values():
        link = entry["links"][net["name"]]
        link["veth"] = list(naming.network_veth_names(net["index"], entry["index"], count))
        write_state(state_dir, state)
        network.plug(state, entry["netns"], link["veth"], net["bridge"])
        on_created("veth", link["veth"][0])


def network_addresses(state: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Further network -> node -> its address there."""
    return {net["name"]: {node: entry["links"][net["name"]]["address"] for node, entry in state["nodes"].items()}
            for net in state.get("networks") or []}


def _further_host_ends(state: Mapping[str, Any]) -> list[str]:
    """The host ends of every node's veths on the further networks, as recorded."""
    return [link["veth"][0] for entry in state["nodes"].values() for link in (entry.get("links") or {}).values()
            if link.get("veth")]


def _create_cgroups(state_dir: Path, state: State, on_created: OnCreated) -> None:
    """A CPU cgroup per node, recorded before the nodes start in them."""
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    planned = cgroups.group_path(state_dir)
    state["cgroup"] = None if planned is None else str(planned)  # recorded first: `down` removes what exists
    write_state(state_dir, state)
    paths, why_not = cgroups.create(state_dir, list(nodes))
    if paths is None:
        state["cgroup"], state["cpu_sharing"] = None, why_not
    else:
        for node, path in paths.items():
            nodes[node]["cgroup"] = path
        on_created("cgroup", state["cgroup"])
    write_state(state_dir, state)


def _start_nodes(state_dir: Path, state: State, on_created: OnCreated) -> None:
    """Start every node's init, find its PID, then wait until every sshd answers."""
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    init_exe = state_dir / "bin" / "oddnode-init"
    for node, entry in nodes.items():
        node_dir = Path(entry["dir"])
        argv = ["ip", "netns", "exec", entry["netns"],
                "unshare", "--uts", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private",
                "--kill-child", "--", str(init_exe), "-I", "-S", str(NODE_INIT), str(node_dir / "node.json")]
        with open(node_dir / "init.log", "ab") as log:
            child = spawn(argv, log, node_env(state_dir), entry.get("cgroup"))
        entry["unshare"] = record_of(child.pid)
        write_state(state_dir, state)
        if entry["unshare"] is None:
            raise TestbedError(f"{node} did not start: {tail(node_dir / 'init.log')}")
        on_created("process", f"{node} {child.pid}")

    deadline = time.monotonic() + START_WAIT_S + START_WAIT_PER_NODE_S * len(nodes)
    pending = set(nodes)
    while pending:  # each unshare forks the node's init: find it among its children
        children = children_by_parent()
        for node in sorted(pending):
            entry = nodes[node]
            found = children.get(entry["unshare"]["pid"], [])
            if found:
                entry["init"] = record(found[0])
                pending.discard(node)
            elif not alive(entry["unshare"]):
                raise TestbedError(f"{node} did not start: {tail(Path(entry['dir']) / 'init.log')}")
        write_state(state_dir, state)
        _check_deadline(deadline, pending, "start", nodes)
        if pending:
            time.sleep(0.02)

    pending = set(nodes)
    while pending:
        for node, is_open in ports_open({node: nodes[node]["address"] for node in pending}, timeout=0.5).items():
            entry = nodes[node]
            node_dir = Path(entry["dir"])
            if not alive(entry["init"]):
                raise TestbedError(f"{node} stopped while starting: {tail(node_dir / 'init.log')}")
            if not is_open:
                continue
            try:
                nspid = int((node_dir / "sshd.pid").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # sshd listens but has not written its PID file yet
            proc = find_in_pid_namespace(pid_namespace(entry["init"]["pid"]), nspid)
            if proc is not None:
                entry["sshd"] = record(proc)
                pending.discard(node)
        write_state(state_dir, state)
        _check_deadline(deadline, pending, "answer on port 22", nodes)
        if pending:
            time.sleep(0.02)


def _check_deadline(deadline: float, pending: set[str], what: str, nodes: dict[str, dict[str, Any]]) -> None:
    if pending and time.monotonic() >= deadline:
        first = sorted(pending)[0]
        logs = tail(Path(nodes[first]["dir"]) / "init.log") + "\n" + tail(Path(nodes[first]["dir"]) / "sshd.log")
        raise TestbedError(f"{fold(pending)} did not {what} in time; {first}'s logs:\n{logs}")


# -- status --------------------------------------------------------------------

def _slurm_states(state_dir: Path) -> tuple[tuple[str, str], ...]:
    """(Slurm's state, its nodes folded) for every state a node is in; none when slurmctld does not answer."""
    try:
        states = testbed_slurm.node_states(state_dir)
    except (OSError, subprocess.SubprocessError):
        return ()
    by_state: dict[str, list[str]] = {}
    for node, node_state in states.items():
        by_state.setdefault(node_state, []).append(node)
    return tuple((node_state, fold(members)) for node_state, members in sorted(by_state.items()))


def status(state_dir: Path = DEFAULT_STATE_DIR) -> TestbedStatus:
    """Nodes, addresses and, per node: namespace present, init and sshd running, port 22 open."""
    require_root()
    state_dir = Path(state_dir).absolute()
    state = read_state(state_dir)
    if state is None:
        return TestbedStatus(state_dir=state_dir, up=False)
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    running = {node: entry for node, entry in nodes.items() if alive(entry.get("init"))}
    ports = ports_open({node: entry["address"] for node, entry in running.items()}, timeout=1.0)
    faults = fault_lines(state)
    names = config.names_of(state)
    return TestbedStatus(
        state_dir=state_dir,
        up=True,
        complete=state["complete"],
        names=names,
        bridge=link_exists(names.bridge),
        cpu_sharing=state.get("cpu_sharing"),
        leaves=tuple((leaf["name"], fold(leaf["nodes"])) for leaf in state.get("leaves") or []),
        link_rate=state.get("link_rate"),
        slurm=_slurm_states(state_dir) if state.get("slurm") else None,
        networks=tuple((net["name"], names.network_bridge(net["index"]), names.network_subnet(net["index"]),
                        link_exists(names.network_bridge(net["index"]))) for net in state.get("networks") or []),
        nodes=tuple(
            NodeState(
                name=node,
                address=entry["address"],
                netns=bool(entry["netns"]) and netns_exists(entry["netns"]),
                init=node in running,
                sshd=alive(entry.get("sshd")),
                port_open=ports.get(node, False),
                faults=tuple(line for line in faults.get(node, []) if line != "sshd stopped"),
            )
            for node, entry in nodes.items()
        ),
    )


# -- down ----------------------------------------------------------------------

def down(state_dir: Path = DEFAULT_STATE_DIR) -> None:
    """Remove everything the testbed in `state_dir` recorded, then the directory.

    Idempotent, and works on what a crashed `up` left. On failure the state
    is kept, so that `down` can be run again.
    """
    require_root()
    state_dir = Path(state_dir).absolute()
    if not state_dir.is_dir():
        return
    if read_state(state_dir) is None:
        if _is_blank(state_dir):
            shutil.rmtree(state_dir)
        return
    with locked(state_dir):
        state = read_state(state_dir)
        if state is not None:
            try:
                teardown(state_dir, state)
            finally:
                write_state(state_dir, state)
    shutil.rmtree(state_dir)
    if state_dir == DEFAULT_STATE_DIR:
        try:
            state_dir.parent.rmdir()  # /run/oddnode, made by `up`, unless something else uses it
        except OSError:
            pass


def teardown(state_dir: Path, state: State) -> None:
    """Kill recorded processes, undo recorded mounts, delete recorded links and
    namespaces; raise TestbedError naming whatever remains."""
    problems = []
    try:
        undo_faults(state_dir, state, restart_sshd=False)
    except TestbedError as err:
        problems.append(str(err))
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    # Killing the init of a PID namespace kills every process in it; its parent,
    # unshare, then reaps it and exits, and is reaped in turn by its own parent
    # (this process, when it ran `up`). Killing unshare first would leave the
    # init to a PID 1 that may be slow to reap it.
    inner = [entry[key] for entry in nodes.values() for key in ("init", "sshd") if entry.get(key)]
    if any(entry.get("unshare") and not entry.get("init") for entry in nodes.values()):
        # `up` stopped before it found these inits: they are their unshare's child.
        children = children_by_parent()
        inner += [record(proc) for entry in nodes.values() if entry.get("unshare") and not entry.get("init")
                  for proc in children.get(entry["unshare"]["pid"], []) if alive(entry["unshare"])]
    for rec in inner:
        kill(rec, signal.SIGKILL)
    outer = [entry["unshare"] for entry in nodes.values() if entry.get("unshare")]
    wait_gone(inner, STOP_WAIT_S)
    for rec in wait_gone(outer, 2.0):
        kill(rec, signal.SIGKILL)
    processes = inner + outer
    # A process in one of the testbed's network namespaces that no record names
    # (an `up` killed between starting a node and recording it) is the testbed's too.
    inodes = {netns_inode(entry["netns"]) for entry in nodes.values() if entry.get("netns")} - {0}
    if inodes:
        for proc in process_table():
            if proc.netns in inodes and proc.proc.state not in ("Z", "X"):
                kill(record(proc.proc), signal.SIGKILL)
                processes.append(record(proc.proc))
    left = wait_gone(processes, STOP_WAIT_S)
    if left:
        problems.append(f"processes {', '.join(str(p['pid']) for p in left)} do not end")
    problems += testbed_slurm.stop(state)  # after the nodes: no slurmd is left to call the controller

    commands = [f"link delete {end}" for end in _further_host_ends(state) if link_exists(end)]
    for entry in nodes.values():
        if entry.get("veth") and link_exists(entry["veth"][0]):
            commands.append(f"link delete {entry['veth'][0]}")  # takes the node end with it
        if entry.get("netns") and netns_exists(entry["netns"]):
            commands.append(f"netns delete {entry['netns']}")
    for leaf in state.get("leaves") or []:
        if leaf.get("linecard") and link_exists(leaf["linecard"]):
            commands.append(f"link delete {leaf['linecard']}")
        if leaf.get("uplink") and link_exists(leaf["uplink"][0]):
            commands.append(f"link delete {leaf['uplink'][0]}")  # takes the leaf end with it
        if leaf.get("bridge") and link_exists(leaf["bridge"]) and _bridge_is_ours(leaf["bridge"], state_dir):
            commands.append(f"link delete {leaf['bridge']}")
    bridges = [state.get("bridge")] + [net.get("bridge") for net in state.get("networks") or []]
    commands += [f"link delete {bridge}" for bridge in bridges
                 if bridge and link_exists(bridge) and _bridge_is_ours(bridge, state_dir)]
    if commands:
        run(["ip", "-force", "-batch", "-"], input="\n".join(commands) + "\n", check=False, timeout=60)
    remaining = [entry["veth"][0] for entry in nodes.values() if entry.get("veth") and link_exists(entry["veth"][0])]
    remaining += [end for end in _further_host_ends(state) if link_exists(end)]
    remaining += [entry["netns"] for entry in nodes.values() if entry.get("netns") and netns_exists(entry["netns"])]
    for leaf in state.get("leaves") or []:
        if leaf.get("uplink") and link_exists(leaf["uplink"][0]):
            remaining.append(leaf["uplink"][0])
        if leaf.get("bridge") and link_exists(leaf["bridge"]) and _bridge_is_ours(leaf["bridge"], state_dir):
            remaining.append(leaf["bridge"])
    remaining += [bridge for bridge in bridges if bridge and link_exists(bridge) and _bridge_is_ours(bridge, state_dir)]
    if remaining:
        problems.append(f"{', '.join(remaining)} could not be deleted")
    if state.get("cgroup"):
        stuck = cgroups.remove_tree(state["cgroup"]) if not left else []
        if stuck:
            problems.append(f"CPU cgroups {', '.join(stuck)} could not be removed")
    if problems:
        raise TestbedError("; ".join(problems) + f" (the state is kept: {_down_command(state_dir)} again)")
    for entry in nodes.values():
        entry.update(netns=None, veth=None, unshare=None, init=None, sshd=None, cgroup=None)
        for link in (entry.get("links") or {}).values():
            link["veth"] = None
    for net in state.get("networks") or []:
        net["bridge"] = None
    for leaf in state.get("leaves") or []:
        leaf.update(bridge=None, uplink=None)
    state["bridge"] = None
    state["cgroup"] = None


def _bridge_is_ours(bridge: str, state_dir: Path) -> bool:
    """A bridge whose alias names another state directory belongs to another testbed."""
    try:
        owner = (SYS_NET / bridge / "ifalias").read_text().strip()
    except OSError:
        owner = ""
    return owner in ("", str(state_dir))

