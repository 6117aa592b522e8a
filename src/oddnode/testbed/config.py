"""Names, addresses and configuration files of a testbed: pure functions.

A machine holds up to MAX_INSTANCES testbeds side by side, numbered from 0;
each one's names and addresses are its `Names`.  Testbed 0's objects carry
the ``odd-`` prefix (namespace ``odd-node01``, bridge ``odd-br0``, veth
``odd-v01h``/``odd-v01n``) and its addresses are in 10.77.0.0/24: the bridge
has 10.77.0.1, nodes 10.77.0.11 up.  Testbed N (1 to 9) uses ``oddN-`` and
10.77.N.0/24, so its nodes are called the same but reach only each other.

A testbed may have further networks (a second fabric, as a cluster's
InfiniBand beside its Ethernet): network K (1, 2) is a switch of its own,
``odd-br1``, with no address of this machine on it, a veth per node
(``odd-n1v01h``/``odd-n1v01n``, the node's end named after the network,
``ib0``) and the addresses 10.(77+K).N.0/24; every node's /etc/hosts names
each node there ``node01-ib``.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PREFIXLEN = 24
FIRST_NODE_HOST = 11  # node01 is .11 of its testbed's subnet
MAX_NODES = 200  # .11 .. .210
MAX_INSTANCES = 10  # testbeds 0..9: 10.77.0.0/24 .. 10.77.9.0/24
SSH_PORT = 22
NODE_INTERFACE = "eth0"  # a node's end of its veth, as the node sees it
MAX_LEAVES = 99  # odd9-leaf99, odd9-u99c: within the 15 characters of an interface name
MAX_NETWORKS = 2  # networks beside the first: 10.78.N.0/24 and 10.79.N.0/24
# A further network's name: the suffix of node names there (node01-ib) and
# the stem of its interface on every node (ib0); letters and digits, short.
_NETWORK_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")

# The synthetic DMI table given to nodes when the host has none: identical on
# every node, as on a cluster of one model with one BIOS.
DMI_VALUES = {
    "bios_vendor": "oddnode testbed",
    "bios_version": "1.0",
    "bios_date": "01/15/2025",
    "bios_release": "1.0",
    "board_vendor": "oddnode testbed",
    "board_name": "oddnode virtual board",
    "board_version": "1.0",
    "product_name": "oddnode virtual node",
    "product_version": "1.0",
    "sys_vendor": "oddnode testbed",
    "chassis_vendor": "oddnode testbed",
    "chassis_type": "23",  # SMBIOS chassis type 23: rack mount chassis
}

_PREFIX = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
# State directories end up in ssh and sshd configuration files, which split on
# blanks and expand %, ~ and quotes: allow only characters that mean nothing there.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/+@:-]*$")


def check_prefix(prefix: str) -> str:
    if not _PREFIX.match(prefix):
        raise ValueError(f"invalid node prefix {prefix!r}: a lower-case letter, then letters, digits "
                         "or '-', at most 20 characters")
    return prefix


def check_node_count(count: int) -> int:
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"a testbed has 1 to {MAX_NODES} nodes, not {count}")
    return count


def check_networks(names: Sequence[str]) -> list[str]:
    """Further networks' names, checked: at most MAX_NETWORKS, distinct,
    each a lower-case letter then letters or digits (8 at most), not eth."""
    names = list(names)
    if len(names) > MAX_NETWORKS:
        raise ValueError(f"a testbed has at most {MAX_NETWORKS} further networks, not {len(names)}")
    for name in names:
        if not _NETWORK_NAME.match(name) or name == "eth":
            raise ValueError(f"invalid network name {name!r}: a lower-case letter, then letters or digits, "
                             "at most 8 characters, not eth (the first network's interfaces)")
    if len(set(names)) != len(names):
        raise ValueError(f"network names repeat: {', '.join(names)}")
    return names


def network_interface(name: str) -> str:
    """A node's interface on the network ``name``, as the node sees it (ib0)."""
    return f"{name}0"


def is_safe_path(path: Path) -> bool:
    return bool(_SAFE_PATH.match(str(path)))


def digits(count: int) -> int:
    """Zero padding of node numbers: node01..node99, node001..node200."""
    return 2 if count <= 99 else 3


def node_names(count: int, prefix: str = "node") -> list[str]:
    width = digits(check_node_count(count))
    return [f"{check_prefix(prefix)}{index:0{width}d}" for index in range(1, count + 1)]


@dataclass(frozen=True)
class Names:
    """The names and addresses of testbed `number` of this machine: every
    interface, namespace and address it creates is derived here, so that
    testbeds with different numbers never share one."""

    number: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.number < MAX_INSTANCES:
            raise ValueError(f"a testbed number is 0 to {MAX_INSTANCES - 1}, not {self.number}")

    @property
    def prefix(self) -> str:
        """What every object's name starts with: ``odd-``, ``odd1-``... (at
        most 5 characters, so that the longest name, ``odd9-v200h``, keeps
        well within an interface name's 15)."""
        return "odd-" if self.number == 0 else f"odd{self.number}-"

    @property
    def bridge(self) -> str:
        """The core switch."""
        return f"{self.prefix}br0"

    @property
    def subnet(self) -> str:
        return f"10.77.{self.number}.0/{PREFIXLEN}"

    @property
    def host_address(self) -> str:
        """This machine's address on the core switch."""
        return f"10.77.{self.number}.1"

    def node_address(self, index: int) -> str:
        """Address of the node numbered `index` (1-based)."""
        return f"10.77.{self.number}.{_node_host(index)}"

    def subnets(self, networks: int = 0) -> list[str]:
        """The first network's subnet, then those of `networks` further ones."""
        return [self.subnet] + [self.network_subnet(k) for k in range(1, networks + 1)]

    def in_subnet(self, address: str, subnet: str | None = None) -> bool:
        """`address` (with or without its prefix length) is in `subnet`, by
        default the first network's."""
        return ipaddress.ip_interface(address).ip in ipaddress.ip_network(subnet or self.subnet)

    def netns_name(self, node: str) -> str:
        return f"{self.prefix}{node}"

    def veth_names(self, index: int, count: int) -> tuple[str, str]:
        """Host end and node end of a node's veth pair (at most 10 of the 15 characters allowed)."""
        number = f"{index:0{digits(count)}d}"
        return f"{self.prefix}v{number}h", f"{self.prefix}v{number}n"

    def leaf_bridge(self, index: int) -> str:
        _check_leaf(index)
        return f"{self.prefix}leaf{index}"

    def uplink_names(self, index: int) -> tuple[str, str]:
        """Core end and leaf end of leaf `index`'s uplink veth pair."""
        _check_leaf(index)
        return f"{self.prefix}u{index}c", f"{self.prefix}u{index}l"

    def linecard_name(self, index: int) -> str:
        """The ifb device that carries everything leaf `index`'s nodes send when
        the leaf acts as a line card with one fabric link."""
        _check_leaf(index)
        return f"{self.prefix}lc{index}"

    def network_bridge(self, network: int) -> str:
        """The switch of further network ``network`` (1-based)."""
        _check_network(network)
        return f"{self.prefix}br{network}"

    def network_subnet(self, network: int) -> str:
        _check_network(network)
        return f"10.{77 + network}.{self.number}.0/{PREFIXLEN}"

    def network_address(self, network: int, index: int) -> str:
        """Address of the node numbered `index` on further network ``network``."""
        _check_network(network)
        return f"10.{77 + network}.{self.number}.{_node_host(index)}"

    def network_veth_names(self, network: int, index: int, count: int) -> tuple[str, str]:
        """Host end and node end of a node's veth pair on further network ``network``."""
        _check_network(network)
        number = f"{index:0{digits(count)}d}"
        return f"{self.prefix}n{network}v{number}h", f"{self.prefix}n{network}v{number}n"

    def probe_name(self) -> str:
        """A short-lived interface made to see whether the kernel offers netem."""
        return f"{self.prefix}netem"


def _node_host(index: int) -> int:
    """The last byte of the node numbered `index` (1-based), on every network."""
    if not 1 <= index <= MAX_NODES:
        raise ValueError(f"node index {index} outside 1..{MAX_NODES}")
    return FIRST_NODE_HOST + index - 1


def _check_network(network: int) -> None:
    if not 1 <= network <= MAX_NETWORKS:
        raise ValueError(f"further networks are numbered 1 to {MAX_NETWORKS}, not {network}")


def names_of(state: Mapping[str, object]) -> Names:
    """The names of the testbed a state records (states written before
    testbeds were numbered are testbed 0's)."""
    number = state.get("instance", 0)
    return Names(number if isinstance(number, int) else 0)


def leaf_name(index: int) -> str:
    """The topology's name of leaf switch `index` (1-based)."""
    return f"leaf{index}"


def _check_leaf(index: int) -> None:
    if not 1 <= index <= MAX_LEAVES:
        raise ValueError(f"leaf index {index} outside 1..{MAX_LEAVES}")


def sshd_config_text(*, address: str, host_key: Path, authorized_keys: Path, pid_file: Path,
                     use_pam: bool = False, per_source_penalties: bool = False) -> str:
    """One node's sshd configuration."""
    lines = [
        "# oddnode testbed node sshd (generated)",
        f"ListenAddress {address}",
        f"Port {SSH_PORT}",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {authorized_keys}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        f"UsePAM {'yes' if use_pam else 'no'}",
        # The state directory is root's, keys included; sshd's owner checks would refuse a temp dir.
        "StrictModes no",
        f"PidFile {pid_file}",
        "UseDNS no",
        # Start refusing unauthenticated connections at 256, well above a fan-out
        # of 32-64 connections to one node at once.
        "MaxStartups 256:30:512",
        "MaxSessions 64",
        "LoginGraceTime 30",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "Subsystem sftp internal-sftp",
        "LogLevel INFO",
    ]
    if per_source_penalties:
        # OpenSSH >= 9.8 penalises a source address that opens many connections;
        # every connection to a node comes from the host's address on the core switch.
        lines.append("PerSourcePenalties no")
    return "\n".join(lines) + "\n"


def ssh_config_text(addresses: Mapping[str, str], *, identity: Path, known_hosts: Path) -> str:
    """Client configuration: node names resolve through it, host keys are checked."""
    lines = ["# oddnode testbed (generated): ssh -F this_file node01", ""]
    for node, address in addresses.items():
        lines += [f"Host {node}", f"    HostName {address}", ""]
    lines += [
        "Host *",
        "    User root",
        f"    IdentityFile {identity}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {known_hosts}",
        "    GlobalKnownHostsFile /dev/null",
        "    StrictHostKeyChecking yes",
        "    UpdateHostKeys no",
        "    BatchMode yes",
        "    ConnectTimeout 5",
        "    AddressFamily inet",
        # All nodes share this machine's cores: the hybrid post-quantum key
        # exchange that OpenSSH prefers costs about 0.1 s of CPU per side and
        # connection, several times the probe itself.  curve25519 is the
        # classic strong exchange and costs next to nothing.
        "    KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org",
        "    LogLevel ERROR",
    ]
    return "\n".join(lines) + "\n"


def known_hosts_text(addresses: Mapping[str, str], host_keys: Mapping[str, str]) -> str:
    """Each node's host key under its name and its address (``node01,10.77.0.11 ssh-ed25519 ...``)."""
    lines = []
    for node, address in addresses.items():
        key_type, key = host_keys[node].split()[:2]
        lines.append(f"{node},{address} {key_type} {key}")
    return "\n".join(lines) + "\n"


def hosts_text(addresses: Mapping[str, str], networks: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """/etc/hosts as every node sees it: nodes resolve each other by name,
    and on each further network (name -> node -> address) as NODE-NAME."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", ""]
    lines += [f"{address}\t{node}" for node, address in addresses.items()]
    for name, members in (networks or {}).items():
        lines += [f"{address}\t{node}-{name}" for node, address in members.items()]
    return "\n".join(lines) + "\n"


def sshd_version(version_output: str) -> tuple[int, int]:
    """(major, minor) from `sshd -V` (or its usage text, on releases without -V)."""
    match = re.search(r"OpenSSH_(\d+)\.(\d+)", version_output)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def root_account_locked(shadow_text: str) -> bool:
    """Whether root's password field starts with '!', which sshd without PAM
    treats as a locked account and refuses even for key logins."""
    for line in shadow_text.splitlines():
        fields = line.split(":")
        if fields[0] == "root" and len(fields) > 1:
            return fields[1].startswith("!")
    return False


def meminfo_with_total(kib: int, text: str | None = None) -> str:
    """/proc/meminfo text with MemTotal set to `kib`, MemFree and MemAvailable
    scaled by the same ratio (so free <= available <= total still holds).

    `text` defaults to this machine's /proc/meminfo; the kernel's column
    layout is kept.
    """
    if kib <= 0:
        raise ValueError(f"MemTotal must be positive, not {kib}")
    if text is None:
        text = Path("/proc/meminfo").read_text()
    values = _meminfo_values(text)
    if "MemTotal" not in values:
        raise ValueError("no MemTotal line in the meminfo text")
    ratio = kib / values["MemTotal"]
    new = {"MemTotal": kib}
    if "MemFree" in values:
        new["MemFree"] = min(kib, round(values["MemFree"] * ratio))
    if "MemAvailable" in values:
        new["MemAvailable"] = max(new.get("MemFree", 0), min(kib, round(values["MemAvailable"] * ratio)))
    out = []
    for line in text.splitlines():
        match = _MEMINFO_LINE.match(line)
        if match and match.group(1) in new:
            label, padding_and_digits = match.group(1) + ":", match.group(2)
            out.append(f"{label}{str(new[match.group(1)]).rjust(len(padding_and_digits))}{match.group(4)}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


# "MemTotal:       24683300 kB": label, blanks+digits (kept as one field width), digits, unit.
_MEMINFO_LINE = re.compile(r"^(\w[\w()]*):(\s*(\d+))(\s*kB)?$")


def _meminfo_values(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        match = _MEMINFO_LINE.match(line)
        if match:
            values[match.group(1)] = int(match.group(3))
    return values


def real_memory_total_kib(text: str | None = None) -> int:
    """MemTotal of this machine in KiB (from /proc/meminfo)."""
    if text is None:
        text = Path("/proc/meminfo").read_text()
    return _meminfo_values(text)["MemTotal"]


def hog_script() -> str:
    """Python source of the competing process: copies a buffer over and over,
    loading the CPU and the memory bus, bounded by a deadline and a round count.
    It forks into as many workers as asked (0: one per CPU it may use), each
    bound to one of those CPUs in turn, all in its process group, so that
    killing the group ends them all."""
    return (
        "import os,sys,time\n"
        "size=int(sys.argv[1])<<20\n"
        "deadline=time.monotonic()+float(sys.argv[2])\n"
        "cpus=sorted(os.sched_getaffinity(0))\n"
        "workers=int(sys.argv[3]) or len(cpus)\n"
        "worker=0\n"
        "for i in range(1,workers):\n"
        "    if os.fork()==0:\n"
        "        worker=i\n"
        "        break\n"
        "os.sched_setaffinity(0,{cpus[worker%len(cpus)]})\n"
        # Non-zero bytes: a zero-filled buffer may be backed by the kernel's single
        # zero page and would then load no memory bandwidth.
        "src=bytearray(b'oddnode!')*(size//8)\n"
        "dst=bytearray(len(src))\n"
        "for _ in range(10**7):\n"
        "    dst[:]=src\n"
        "    if time.monotonic()>=deadline:\n"
        "        break\n"
    )


HOG_NAME = "oddnode-hog"
MAX_FAULT_SECONDS = 24 * 3600
MAX_HOG_WORKERS = 256

DAEMON_NAME = "oddnode-daemon"
# The commands the daemon spawns every period, as a monitoring subsystem's
# scripts do (seaborg's control workstation ran spget, lssrc, odmget,
# basename, ksh, sed): each a fork and an exec of a short-lived program.
DAEMON_COMMANDS = (("basename", "/etc/hostname"), ("sed", "-n", "1p", "/etc/hostname"),
                   ("sh", "-c", ":"))
# Periods from 1 ms (about the cost of one spawn) to a minute.
DAEMON_PERIOD_MS = (1.0, 60_000.0)


def hog_argv(seconds: float = 3600.0, megabytes: int = 64, workers: int = 0) -> list[str]:
    """argv of a CPU and memory-bandwidth hog for `fault_process`: `workers`
    processes (0: one per CPU of the node, a full competing load).

    It is Python's stdlib only, run by the testbed's ``oddnode-hog`` link to
    the interpreter (found on the PATH that `fault_process` gives), so that
    its process name (comm) in a node's process list is ``oddnode-hog``. It
    stops by itself after `seconds`; `fault_process` bounds it too.
    """
    if not 0 < seconds <= MAX_FAULT_SECONDS:
        raise ValueError(f"a hog runs 0 to {MAX_FAULT_SECONDS} s, not {seconds}")
    if not 1 <= megabytes <= 4096:
        raise ValueError(f"a hog copies 1 to 4096 MiB, not {megabytes}")
    if not 0 <= workers <= MAX_HOG_WORKERS:
        raise ValueError(f"a hog runs 0 (one per CPU) to {MAX_HOG_WORKERS} workers, not {workers}")
    return [HOG_NAME, "-I", "-S", "-c", hog_script(), str(megabytes), f"{seconds:g}", str(workers)]


def daemon_script() -> str:
    """Python source of the spawning daemon: every period, on deadlines fixed
    from its start (so that the period does not drift by the time the
    commands take), it runs each command (argv as JSON) and waits for it.  A
    round that overruns its period skips the deadlines it missed rather than
    spawning in a burst.  Bounded by a deadline and a round count."""
    return (
        "import json,subprocess,sys,time\n"
        "period=float(sys.argv[1])/1000.0\n"
        "start=time.monotonic()\n"
        "deadline=start+float(sys.argv[2])\n"
        "commands=json.loads(sys.argv[3])\n"
        "tick=0\n"
        "while tick<10**8:\n"
        "    for argv in commands:\n"
        "        subprocess.run(argv,stdin=subprocess.DEVNULL,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)\n"
        "    now=time.monotonic()\n"
        "    tick=max(tick+1,int((now-start)/period)+1)\n"
        "    wake=start+tick*period\n"
        "    if wake>=deadline:\n"
        "        break\n"
        "    time.sleep(max(0.0,wake-now))\n"
    )


def daemon_argv(seconds: float = 600.0, period_ms: float = 20.0,
                commands: Sequence[Sequence[str]] = DAEMON_COMMANDS) -> list[str]:
    """argv of a daemon for `fault_process` that spawns `commands` every
    `period_ms`: frequent short interruptions (OS noise) and a process
    accounting fingerprint on one node.  Python's stdlib only, run by the
    testbed's ``oddnode-daemon`` link to the interpreter (its comm)."""
    if not 0 < seconds <= MAX_FAULT_SECONDS:
        raise ValueError(f"a daemon runs 0 to {MAX_FAULT_SECONDS} s, not {seconds}")
    low, high = DAEMON_PERIOD_MS
    if not low <= period_ms <= high:
        raise ValueError(f"a daemon's period is {low:g} to {high:g} ms, not {period_ms:g}")
    if not commands or not all(commands):
        raise ValueError("a daemon needs at least one command, none empty")
    return [DAEMON_NAME, "-I", "-S", "-c", daemon_script(), f"{period_ms:g}", f"{seconds:g}",
            json.dumps([list(argv) for argv in commands])]


def describe_argv(argv: Sequence[str]) -> str:
    """A short name for a fault process in summaries."""
    return Path(argv[0]).name if argv else "?"
