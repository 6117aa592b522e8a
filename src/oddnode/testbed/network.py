"""The testbed's switches and links: leaf switches under a core switch, and
shaping a link's rate (tc tbf) or delay (tc netem) in both directions.

With one leaf (the default) every node's veth is plugged into the core
bridge ``odd-br0``.  With L leaves, nodes are split into L contiguous
groups; each group hangs from a leaf bridge ``odd-leafN``, joined to the
core by an uplink, a veth pair ``odd-uNc`` (core end) / ``odd-uNl`` (leaf
end).  Traffic between two nodes of one leaf stays on it; traffic between
leaves crosses two uplinks, as on a two-level fat tree.  A leaf made a line
card (``fault_linecard``) sends all its nodes' traffic, between themselves
too, through one shaped fabric link ``odd-lcN`` (an ifb device), as the line
cards of a chassis switch without local switching do.

A veth queues on the sending side only, so a link is shaped at both ends:
the root qdisc of each end limits what leaves through it.  A node's link:
its host end (towards the node) and its ``eth0`` inside its network
namespace (from the node).  An uplink: its core end (into the leaf) and its
leaf end (out of the leaf).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from oddnode.testbed import config
from oddnode.testbed._system import TestbedError, disable_ipv6, link_exists, run

# Token bucket depth: the bytes a shaped link may send at once.  At least
# 16 KiB, or 4 ms at the shaped rate: enough for the timer to refill the
# bucket between two ticks at any rate, small enough that a measurement of a
# second or more sees the rate and not the burst.
MIN_BURST_BYTES = 16 * 1024
BURST_SECONDS = 0.004
# How long a packet may wait in a shaped queue before it is dropped: TCP
# sees a bottleneck, not a black hole.
QUEUE_LATENCY_MS = 100
# Rates tc accepts, in bits per second: SI prefixes, as tc reads them.
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)?$", re.IGNORECASE)
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
MIN_RATE_BPS = 8_000  # 1 kB/s: below it ssh itself stalls
MAX_RATE_BPS = 10**12
MAX_DELAY_MS = 10_000.0
# What tc says when asked to delete the default qdisc of an unshaped device.
_NOT_SHAPED = ("No such file", "handle of zero")


def parse_rate(text: str) -> int:
    """A link rate in bits per second from tc's notation: ``100mbit``, ``1gbit``, ``500kbit``, ``8000``."""
    match = _RATE.match(text.strip())
    if not match:
        raise ValueError(f"not a rate: {text!r} (write e.g. 100mbit, 1gbit, 500kbit)")
    bits = round(float(match.group(1)) * _RATE_UNITS[(match.group(2) or "bit").lower()])
    if not MIN_RATE_BPS <= bits <= MAX_RATE_BPS:
        raise ValueError(f"rate {text!r} is outside {format_rate(MIN_RATE_BPS)} to {format_rate(MAX_RATE_BPS)}")
    return bits


def format_rate(bits: float) -> str:
    """Bits per second as tc and people write them: 100mbit, 1.5gbit."""
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if bits >= _RATE_UNITS[unit]:
            return f"{bits / _RATE_UNITS[unit]:g}{unit}"
    return f"{bits:g}bit"


def leaf_groups(nodes: Sequence[str], leaves: int) -> dict[str, list[str]]:
    """Leaf name -> its nodes: `leaves` contiguous groups whose sizes differ by at most one."""
    if not 1 <= leaves <= len(nodes):
        raise ValueError(f"{len(nodes)} nodes can hang from 1 to {len(nodes)} leaves, not {leaves}")
    size, extra = divmod(len(nodes), leaves)
    groups, start = {}, 0
    for index in range(1, leaves + 1):
        stop = start + size + (1 if index <= extra else 0)
        groups[config.leaf_name(index)] = list(nodes[start:stop])
        start = stop
    return groups


def tbf_qdisc(rate_bps: int) -> list[str]:
    """tc arguments of a token bucket at `rate_bps` (after ``root``)."""
    burst = max(MIN_BURST_BYTES, int(rate_bps / 8 * BURST_SECONDS))
    return ["tbf", "rate", f"{rate_bps}bit", "burst", str(burst), "latency", f"{QUEUE_LATENCY_MS}ms"]


def netem_qdisc(delay_ms: float, rate_bps: int | None = None) -> list[str]:
    """tc arguments of a fixed one-way delay, at `rate_bps` when the link has
    a rate (after ``root``)."""
    rate = ["rate", f"{rate_bps}bit"] if rate_bps else []
    return ["netem", "delay", f"{delay_ms:g}ms", *rate]


def _in_namespace(netns: str | None, argv: list[str]) -> list[str]:
    return argv if netns is None else ["ip", "netns", "exec", netns, *argv]


def set_qdisc(ends: Sequence[tuple[str | None, str]], qdisc: Sequence[str] | None) -> None:
    """Give each (network namespace or None for the host, device) end the root
    qdisc `qdisc`, or back the default (None)."""
    for netns, device in ends:
        if qdisc is None:
            done = run(_in_namespace(netns, ["tc", "qdisc", "del", "dev", device, "root"]), check=False)
            # Deleting the default qdisc fails harmlessly: that end was not shaped.
            if done.returncode != 0 and not any(text in done.stderr for text in _NOT_SHAPED):
                raise TestbedError(f"cannot unshape {device}: {done.stderr.strip()}")
        else:
            done = run(_in_namespace(netns, ["tc", "qdisc", "replace", "dev", device, "root", *qdisc]), check=False)
            if done.returncode != 0:
                raise TestbedError(f"cannot shape {device} with `tc qdisc replace ... {' '.join(qdisc)}`: "
                                   f"{done.stderr.strip()}")


@functools.cache
def netem_available(names: config.Names) -> str | None:
    """None when this kernel can delay packets (sch_netem), else why not
    (found with a probe link named after the testbed `names`)."""
    probe = names.probe_name()
    try:
        run(["ip", "link", "add", probe, "type", "veth", "peer", "name", probe + "p"])
    except TestbedError as err:
        return f"cannot make a probe link: {err}"
    try:
        done = run(["tc", "qdisc", "add", "dev", probe, "root", *netem_qdisc(1)], check=False)
        return None if done.returncode == 0 else done.stderr.strip() or f"tc exited {done.returncode}"
    finally:
        run(["ip", "link", "delete", probe], check=False)


def node_link_ends(entry: Mapping[str, Any], network: str | None = None) -> list[tuple[str | None, str]]:
    """Both ends of a node's link: its host end, and eth0 in its namespace;
    on the further network ``network``, its veth's host end there and its
    interface there (ib0)."""
    if network is None:
        return [(None, entry["veth"][0]), (entry["netns"], config.NODE_INTERFACE)]
    return [(None, entry["links"][network]["veth"][0]), (entry["netns"], config.network_interface(network))]


def link_is_up(entry: Mapping[str, Any], network: str | None = None) -> bool:
    """The node's link (on ``network``) is recorded and exists."""
    veth = entry.get("veth") if network is None else ((entry.get("links") or {}).get(network) or {}).get("veth")
    return bool(veth) and link_exists(veth[0])


def create_linecard(leaf: Mapping[str, Any], host_ends: Sequence[str], rate_bps: int, alias: str) -> None:
    """Make a leaf act as a chassis line card without local switching: all
    its nodes send, to each other as to the rest, goes through one fabric
    link of ``rate_bps``.  Every node's host end redirects what arrives from
    its node (its ingress) to one ifb device, whose root qdisc shapes the
    sum; the ifb hands each packet back to the bridge as if it came from
    that port.  The ifb is named by the caller's record first."""
    device = leaf["linecard"]
    run(["ip", "link", "add", device, "type", "ifb"])
    run(["ip", "link", "set", device, "alias", alias, "up"])
    set_qdisc([(None, device)], tbf_qdisc(rate_bps))
    for end in host_ends:
        run(["tc", "qdisc", "replace", "dev", end, "handle", "ffff:", "ingress"])
        # u32 matching any packet (0/0 at offset 0): the one classifier
        # every kernel with tc has; mirred hands the packet to the ifb.
        run(["tc", "filter", "add", "dev", end, "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0",
             "0", "action", "mirred", "egress", "redirect", "dev", device])


def remove_linecard(leaf: Mapping[str, Any], host_ends: Sequence[str]) -> None:
    """Undo create_linecard: the ports' ingress redirection, then the ifb."""
    for end in host_ends:
        if link_exists(end):
            run(["tc", "qdisc", "del", "dev", end, "handle", "ffff:", "ingress"], check=False)
    if link_exists(leaf["linecard"]):
        run(["ip", "link", "delete", leaf["linecard"]], check=False)


def uplink_ends(leaf: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """Both ends of a leaf's uplink (both in the host's namespace)."""
    return [(None, leaf["uplink"][0]), (None, leaf["uplink"][1])]


def base_qdisc(state: Mapping[str, Any]) -> list[str] | None:
    """What an unfaulted node link carries: the testbed's link rate, if it has one."""
    rate = state.get("link_rate")
    return tbf_qdisc(rate) if rate else None


def uplink_rate(state: Mapping[str, Any], leaf: Mapping[str, Any]) -> int | None:
    """A non-blocking uplink's rate: its nodes' link rates added up (None: links unshaped)."""
    rate = state.get("link_rate")
    return rate * len(leaf["nodes"]) if rate else None


def add_switch(bridge: str, owner: str, address: str | None = None) -> None:
    """A bridge, up, with this machine's ``address`` on it when given; its
    alias names its testbed's state directory (``owner``), for the message
    of an `up` from another one."""
    run(["ip", "link", "add", bridge, "type", "bridge"])
    disable_ipv6(bridge)
    if address is not None:
        run(["ip", "addr", "add", address, "dev", bridge])
    run(["ip", "link", "set", bridge, "alias", owner, "up"])


def plug(state: Mapping[str, Any], namespace: str, ends: Sequence[str], switch: str) -> None:
    """A node's veth pair (host end, node end in ``namespace``) into
    ``switch``, both ends shaped to the testbed's link rate."""
    host_end, node_end = ends
    run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end, "netns", namespace])
    disable_ipv6(host_end)
    run(["ip", "link", "set", host_end, "master", switch, "up"])
    set_qdisc([(None, host_end), (namespace, node_end)], base_qdisc(state))


def create_leaves(state: dict[str, Any], save, on_created) -> None:
    """Leaf bridges and their uplinks to the core bridge, each recorded (by
    `save()`) before it is made."""
    names = config.names_of(state)
    for leaf in state["leaves"]:
        leaf["bridge"] = names.leaf_bridge(leaf["index"])
        save()
        add_switch(leaf["bridge"], state["state_dir"])
        on_created("bridge", leaf["bridge"])
        core_end, leaf_end = names.uplink_names(leaf["index"])
        leaf["uplink"] = [core_end, leaf_end]
        save()
        run(["ip", "link", "add", core_end, "type", "veth", "peer", "name", leaf_end])
        for end, bridge in ((core_end, names.bridge), (leaf_end, leaf["bridge"])):
            disable_ipv6(end)
            run(["ip", "link", "set", end, "master", bridge, "up"])
        on_created("veth", core_end)


def switch_of(state: Mapping[str, Any], node: str) -> str:
    """The bridge a node's host end is plugged into."""
    for leaf in state.get("leaves") or []:
        if node in leaf["nodes"]:
            return leaf["bridge"]
    return config.names_of(state).bridge
