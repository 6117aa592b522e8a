"""The testbed's Slurm configuration, as written for a controller on this
machine and a slurmd in every node (the daemons themselves run in
tests/testbed/reach/test_slurm_testbed.py)."""

from __future__ import annotations

from pathlib import Path

from oddnode.testbed.config import MAX_INSTANCES, Names
from oddnode.testbed.slurm import CONTROLLER_PORT, NODE_PORT, cgroup_conf_text, cgroup_version, slurm_conf_text
from oddnode.testbed.slurm import ports as slurm_ports


def conf(**overrides) -> dict[str, str]:
    text = slurm_conf_text(**{"controller": "build-host-7", "nodes": {"cn-a17": "10.77.0.11", "gpu003": "10.77.0.12"},
                              "cpus": 2, "directory": Path("/run/bed/slurm"),
                              "munge_socket": Path("/run/bed/slurm/munge/munge.socket"), **overrides})
    settings: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and not line.startswith(("NodeName=", "PartitionName=")):
            key, _, value = line.partition("=")
            assert key not in settings, f"{key} set twice"
            settings[key] = value
    settings["nodes"] = "\n".join(line for line in text.splitlines() if line.startswith("NodeName="))
    settings["partition"] = "\n".join(line for line in text.splitlines() if line.startswith("PartitionName="))
    return settings


def test_the_controller_is_this_machine_on_the_core_bridge_on_ports_of_its_own():
    settings = conf()
    assert settings["SlurmctldHost"] == "build-host-7(10.77.0.1)"
    assert (settings["SlurmctldPort"], settings["SlurmdPort"]) == (str(CONTROLLER_PORT), str(NODE_PORT))
    assert {CONTROLLER_PORT, NODE_PORT}.isdisjoint({6817, 6818})  # a Slurm of this machine's own keeps its ports
    assert settings["AuthInfo"] == "socket=/run/bed/slurm/munge/munge.socket"


def test_a_second_testbed_has_its_controller_on_its_own_bridge_address_and_ports():
    first, third = conf(), conf(names=Names(2))
    assert third["SlurmctldHost"] == "build-host-7(10.77.2.1)"
    ports = {int(first["SlurmctldPort"]), int(first["SlurmdPort"]), int(third["SlurmctldPort"]),
             int(third["SlurmdPort"]), *(port for number in range(MAX_INSTANCES) for port in slurm_ports(Names(number)))}
    assert len(ports) == 2 * MAX_INSTANCES  # no two testbeds share a port


def test_every_node_is_named_with_its_address_and_the_partition_holds_them_all():
    settings = conf()
    assert settings["nodes"].splitlines() == [
        "NodeName=cn-a17 NodeAddr=10.77.0.11 CPUs=2 RealMemory=512 State=UNKNOWN",
        "NodeName=gpu003 NodeAddr=10.77.0.12 CPUs=2 RealMemory=512 State=UNKNOWN"]
    assert "Nodes=ALL Default=YES" in settings["partition"]


def test_each_node_keeps_its_own_spool_pid_and_log_and_the_plugins_work_in_namespaces():
    settings = conf()
    for key in ("SlurmdSpoolDir", "SlurmdPidFile", "SlurmdLogFile"):
        assert settings[key].startswith("/run/bed/slurm/nodes/%n/"), key
    assert settings["ProctrackType"] == "proctrack/linuxproc" and settings["TaskPlugin"] == "task/none"
    assert settings["ReturnToService"] == "2"


def write_mountinfo(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text("22 1 0:21 / /proc rw,nosuid - proc proc rw\n" + line + "\n")
    return path


def test_the_cgroup_plugin_follows_the_machine_s_hierarchy(tmp_path):
    hybrid = write_mountinfo(tmp_path, "25 22 0:23 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755")
    assert cgroup_version(hybrid) == 1
    unified = write_mountinfo(tmp_path, "25 22 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw")
    assert cgroup_version(unified) == 2
    assert "CgroupPlugin=cgroup/v1" in cgroup_conf_text(1) and "IgnoreSystemd=yes" in cgroup_conf_text(2)
