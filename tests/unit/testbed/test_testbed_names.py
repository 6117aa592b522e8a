"""The names and addresses of testbeds side by side on one machine, with
their further networks."""

from __future__ import annotations

import ipaddress
from itertools import combinations

import pytest

from oddnode.testbed.config import (
    MAX_INSTANCES,
    MAX_LEAVES,
    MAX_NETWORKS,
    MAX_NODES,
    Names,
    check_networks,
    hosts_text,
    names_of,
    network_interface,
)

IFNAMSIZ = 16  # the kernel's limit on an interface name, its final NUL included


def every_object(names: Names, nodes: int = MAX_NODES, leaves: int = MAX_LEAVES) -> set[str]:
    """Every interface and namespace name testbed `names` can make."""
    objects = {names.bridge, names.probe_name(), names.probe_name() + "p"}
    for index in range(1, nodes + 1):
        objects |= {*names.veth_names(index, nodes), names.netns_name(f"node{index:03d}")}
    for index in range(1, leaves + 1):
        objects |= {names.leaf_bridge(index), *names.uplink_names(index), names.linecard_name(index)}
    for network in range(1, MAX_NETWORKS + 1):
        objects.add(names.network_bridge(network))
        for index in range(1, nodes + 1):
            objects |= set(names.network_veth_names(network, index, nodes))
    return objects


def subnets(names: Names) -> list[ipaddress.IPv4Network]:
    return [ipaddress.ip_network(names.subnet)] + [ipaddress.ip_network(names.network_subnet(k))
                                                   for k in range(1, MAX_NETWORKS + 1)]


def test_testbed_zero_keeps_the_names_and_addresses_it_always_had():
    names = Names()
    assert (names.prefix, names.bridge, names.subnet, names.host_address) == ("odd-", "odd-br0", "10.77.0.0/24",
                                                                               "10.77.0.1")
    assert names.node_address(1) == "10.77.0.11" and names.netns_name("node01") == "odd-node01"
    assert names.veth_names(1, 8) == ("odd-v01h", "odd-v01n") and names.linecard_name(2) == "odd-lc2"


def test_no_two_testbeds_share_a_name_or_an_address_and_every_name_fits_an_interface():
    everything = {number: Names(number) for number in range(MAX_INSTANCES)}
    objects = {number: every_object(names) for number, names in everything.items()}
    for number, names in everything.items():
        assert max(map(len, objects[number])) < IFNAMSIZ
        network = ipaddress.ip_network(names.subnet)
        addresses = [names.host_address, *(names.node_address(index) for index in range(1, MAX_NODES + 1))]
        assert all(ipaddress.ip_address(address) in network for address in addresses)
        assert all(names.in_subnet(address) for address in addresses)
        assert len(set(addresses)) == len(addresses)
        for k in range(1, MAX_NETWORKS + 1):
            there = [names.network_address(k, index) for index in range(1, MAX_NODES + 1)]
            assert all(ipaddress.ip_address(a) in ipaddress.ip_network(names.network_subnet(k)) for a in there)
        assert not any(a.overlaps(b) for a, b in combinations(subnets(names), 2))
    for one, other in combinations(everything, 2):
        assert not objects[one] & objects[other], (one, other)
        assert not any(a.overlaps(b) for a in subnets(everything[one]) for b in subnets(everything[other]))
        assert not everything[one].in_subnet(everything[other].node_address(1))
    # No testbed's prefix starts another's names: a search for one testbed's objects finds only its own.
    for one, other in combinations(everything.values(), 2):
        assert not any(name.startswith(other.prefix) for name in objects[one.number])
        assert not any(name.startswith(one.prefix) for name in objects[other.number])


def test_a_number_outside_the_machines_range_is_refused():
    for number in (-1, MAX_INSTANCES):
        with pytest.raises(ValueError, match="testbed number"):
            Names(number)


def test_a_state_names_its_testbed_and_an_older_state_is_testbed_zero():
    assert names_of({"instance": 3}) == Names(3)
    assert names_of({"schema": 1, "nodes": {}}) == Names()


def test_a_further_network_has_its_own_switch_subnet_and_names_in_every_nodes_hosts():
    names = Names(2)
    assert (names.network_bridge(1), names.network_subnet(1), names.network_address(1, 3)) == \
        ("odd2-br1", "10.78.2.0/24", "10.78.2.13")
    assert names.network_veth_names(2, 7, 12) == ("odd2-n2v07h", "odd2-n2v07n") and network_interface("ib") == "ib0"
    hosts = hosts_text({"cn-a01": "10.77.2.11", "cn-a02": "10.77.2.12"},
                       {"ib": {"cn-a01": "10.78.2.11", "cn-a02": "10.78.2.12"}})
    assert hosts.splitlines()[-4:] == ["10.77.2.11\tcn-a01", "10.77.2.12\tcn-a02", "10.78.2.11\tcn-a01-ib",
                                       "10.78.2.12\tcn-a02-ib"]
    with pytest.raises(ValueError, match="numbered 1 to"):
        names.network_bridge(MAX_NETWORKS + 1)


@pytest.mark.parametrize("wanted, error", [
    (["ib", "ib"], "repeat"), (["ib", "myri", "opa"], "at most"), (["IB"], "invalid"), (["eth"], "invalid"),
    (["i-b"], "invalid"), (["infiniband"], "invalid"), (["ib;rm"], "invalid")])
def test_further_network_names_are_checked(wanted, error):
    with pytest.raises(ValueError, match=error):
        check_networks(wanted)
    assert check_networks(["ib", "myri2"]) == ["ib", "myri2"]
