"""The names and addresses of testbeds side by side on one machine."""

from __future__ import annotations

import ipaddress
from itertools import combinations

import pytest

from oddnode.testbed.config import MAX_INSTANCES, MAX_LEAVES, MAX_NODES, Names, names_of

IFNAMSIZ = 16  # the kernel's limit on an interface name, its final NUL included


def every_object(names: Names, nodes: int = MAX_NODES, leaves: int = MAX_LEAVES) -> set[str]:
    """Every interface and namespace name testbed `names` can make."""
    objects = {names.bridge, names.probe_name(), names.probe_name() + "p"}
    for index in range(1, nodes + 1):
        objects |= {*names.veth_names(index, nodes), names.netns_name(f"node{index:03d}")}
    for index in range(1, leaves + 1):
        objects |= {names.leaf_bridge(index), *names.uplink_names(index), names.linecard_name(index)}
    return objects


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
    for one, other in combinations(everything, 2):
        assert not objects[one] & objects[other], (one, other)
        assert not ipaddress.ip_network(everything[one].subnet).overlaps(ipaddress.ip_network(everything[other].subnet))
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
