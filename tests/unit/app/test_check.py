import json

import pytest

from support.cli import write
from oddnode.app.check import make_target, read_hostfile, select_nodes
from oddnode.core.nodes import NodeNameError
from oddnode.reach import UnknownTransportError


def test_nodes_from_options_hostfile_and_exclusions(tmp_path):
    hosts = write(tmp_path / "hosts", "# compute nodes\nnode[005-006]\nnode009  # spare\n\n")
    assert read_hostfile(hosts) == ["node005", "node006", "node009"]
    assert select_nodes("node[001-004]", "node002", hosts) == ["node001", "node003", "node004", "node005",
                                                               "node006", "node009"]
    assert select_nodes() == []
    # -w and -x given several times add up, as clush's do.
    assert select_nodes(["node[001-003]", "node009"], ["node002", "node003"]) == ["node001", "node009"]


def test_repeated_node_options_add_up_on_the_command_line(tmp_path):
    from support.cli import invoke

    shown = invoke("check", "-w", "cn-[01-04]", "-w", "cn-09", "-x", "cn-02", "-x", "cn-03", "--show-plan")
    assert shown.exit_code == 0, shown.output
    empty = invoke("check", "-w", "cn-[01-02]", "-x", "cn-01", "-x", "cn-02", "--show-plan")
    assert empty.exit_code == 2 and "no node left" in empty.output


def test_bad_node_names_are_refused_with_their_place(tmp_path):
    with pytest.raises(NodeNameError, match="invalid node set"):
        select_nodes("node[1-")
    with pytest.raises(NodeNameError, match=r"hosts:2: invalid node name"):
        read_hostfile(write(tmp_path / "hosts", "node1\nnode;reboot\n"))
    with pytest.raises(NodeNameError, match="cannot read host file"):
        read_hostfile(tmp_path / "absent")


def test_transport_choice():
    assert make_target([], None).transport.name == "local"
    assert make_target(["node01", "node02"], None).transport.name == "ssh"
    with pytest.raises(NodeNameError, match="needs nodes"):
        make_target([], "ssh")
    with pytest.raises(UnknownTransportError, match="no transport named 'rsh'"):
        make_target(["node01"], "rsh")


@pytest.mark.slow
def test_check_judges_the_nodes_checked_not_others_the_store_remembers(tmp_path):
    from oddnode.app.check import CheckPlan, run_check
    from oddnode.store import open_store

    target = make_target([], None)
    with open_store(tmp_path / "s.duckdb") as store:
        with store.transaction():
            store.add_facts(store.new_run("earlier"), [("ghost01", "kernel", "2.6.5-7.191-pseries64")])
        result = run_check(store, target, CheckPlan(stages=(), probe_timeout=60))
    assert list(result.inventory.reports) == target.nodes
    assert [f for f in result.analysis.findings if f.kind == "inconsistent-fact"] == []


def test_a_resumed_check_reaches_the_nodes_the_same_way(tmp_path):
    from oddnode.app.check import describe_target, described_target, make_target

    config = write(tmp_path / "ssh_config", "Host *\n  Port 2222\n")
    target = make_target(["node01", "node02"], "ssh", config, 16)
    description = describe_target(target)
    assert description == {"nodes": ["node01", "node02"], "transport": "ssh",
                           "ssh_config": str(config.absolute()), "fanout": 16,
                           "connect_timeout": target.transport.connect_timeout}
    again = described_target(json.loads(json.dumps(description)))  # as stored
    assert again.nodes == target.nodes and again.transport.name == "ssh"
    assert again.transport.ssh_config == config.absolute() and again.transport.fanout == 16
    local = describe_target(make_target([], "local"))
    assert local["transport"] == "local" and local["ssh_config"] is None
    assert described_target(local).transport.name == "local"
