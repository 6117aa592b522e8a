"""The testbed: a virtual cluster of network namespaces with sshd, on this machine.

The pure parts (names, addresses, configuration texts, meminfo rewriting, the
root check) run everywhere; the rest brings up 8 real nodes and needs root,
iproute2, util-linux and openssh-server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from oddnode import testbed as tb
from oddnode.testbed import cgroups, config
from oddnode.testbed._system import alive, read_proc
from support.testbed import needs_root, running_testbed

# -- without root ----------------------------------------------------------------

MEMINFO = textwrap.dedent("""\
    MemTotal:       16000000 kB
    MemFree:         8000000 kB
    MemAvailable:   12000000 kB
    Buffers:          100000 kB
    HugePages_Total:       0
    Hugepagesize:       2048 kB
""")


def test_node_names_addresses_and_link_names():
    assert config.node_names(8) == [f"node0{i}" for i in range(1, 9)]
    assert config.node_names(100)[0] == "node001" and config.node_names(100)[-1] == "node100"
    assert config.Names().node_address(1) == "10.77.0.11"
    assert config.Names().node_address(config.MAX_NODES) == "10.77.0.210"
    with pytest.raises(ValueError):
        config.node_names(config.MAX_NODES + 1)
    with pytest.raises(ValueError):
        config.node_names(4, prefix="Bad Prefix")
    host_end, node_end = config.Names().veth_names(200, 200)
    assert (host_end, node_end) == ("odd-v200h", "odd-v200n")
    last = config.Names(config.MAX_INSTANCES - 1)
    assert max(map(len, (*last.veth_names(200, 200), last.bridge, last.probe_name() + "p"))) <= 15  # IFNAMSIZ - 1


def test_meminfo_with_total_scales_free_and_available_and_keeps_the_layout():
    text = config.meminfo_with_total(4_000_000, MEMINFO)
    lines = text.splitlines()
    assert lines[0] == "MemTotal:        4000000 kB"
    assert lines[1] == "MemFree:         2000000 kB"
    assert lines[2] == "MemAvailable:    3000000 kB"
    assert lines[3:] == MEMINFO.splitlines()[3:]
    assert config.real_memory_total_kib(text) == 4_000_000
    assert config.real_memory_total_kib(tb.meminfo_with_total(123456)) == 123456  # this machine's text


def test_client_and_server_configurations():
    addresses = {"node01": "10.77.0.11", "node02": "10.77.0.12"}
    client = config.ssh_config_text(addresses, identity=Path("/s/id_ed25519"), known_hosts=Path("/s/known_hosts"))
    assert "Host node01\n    HostName 10.77.0.11\n" in client
    for line in ("User root", "IdentityFile /s/id_ed25519", "IdentitiesOnly yes", "UserKnownHostsFile /s/known_hosts",
                 "StrictHostKeyChecking yes", "BatchMode yes", "ConnectTimeout 5", "LogLevel ERROR",
                 "GlobalKnownHostsFile /dev/null"):
        assert f"    {line}\n" in client
    known = config.known_hosts_text(addresses, {"node01": "ssh-ed25519 AAAA1 node01\n", "node02": "ssh-ed25519 AAAA2"})
    assert known.splitlines() == ["node01,10.77.0.11 ssh-ed25519 AAAA1", "node02,10.77.0.12 ssh-ed25519 AAAA2"]
    server = config.sshd_config_text(address="10.77.0.11", host_key=Path("/s/k"), authorized_keys=Path("/s/a"),
                                     pid_file=Path("/s/p"))
    for line in ("ListenAddress 10.77.0.11", "Port 22", "HostKey /s/k", "AuthorizedKeysFile /s/a",
                 "PermitRootLogin prohibit-password", "PasswordAuthentication no", "UsePAM no", "StrictModes no",
                 "PidFile /s/p", "UseDNS no", "Subsystem sftp internal-sftp"):
        assert line in server.splitlines()
    assert "PerSourcePenalties" not in server  # unknown to OpenSSH before 9.8
    assert config.sshd_version("OpenSSH_9.2p1 Debian-2+deb12u3, OpenSSL 3.0.15") == (9, 2)
    assert config.root_account_locked("root:!:19000:0:99999:7:::\n") is True
    assert config.root_account_locked("root:*:19000:0:99999:7:::\n") is False


def test_hog_argv_is_named_and_bounded():
    argv = tb.hog_argv(seconds=5, megabytes=8)
    assert argv[0] == "oddnode-hog"
    assert argv[-3:] == ["8", "5", "0"]  # 0 workers: one per CPU
    with pytest.raises(ValueError):
        tb.hog_argv(workers=-1)
    with pytest.raises(ValueError):
        tb.hog_argv(seconds=0)
    with pytest.raises(ValueError):
        tb.hog_argv(seconds=config.MAX_FAULT_SECONDS + 1)


def test_daemon_argv_is_named_and_bounded():
    argv = tb.daemon_argv(seconds=5, period_ms=20)
    assert argv[0] == "oddnode-daemon"
    assert argv[-3:-1] == ["20", "5"]
    assert json.loads(argv[-1])[0][0] == "basename"
    for bad in (dict(period_ms=0.5), dict(period_ms=70_000), dict(seconds=0), dict(commands=[])):
        with pytest.raises(ValueError):
            tb.daemon_argv(**bad)


def test_the_daemon_spawns_every_period_and_never_in_a_burst(tmp_path):
    """Run here, without a testbed: each round appends a line; a round never
    starts before its deadline, so 0.6 s at 50 ms give at most 12 rounds, and
    the daemon ends by its own bound."""
    log = tmp_path / "rounds"
    argv = tb.daemon_argv(seconds=0.6, period_ms=50, commands=[["sh", "-c", f"echo x >> {log}"]])
    done = subprocess.run([sys.executable, *argv[1:]], timeout=30)
    assert done.returncode == 0
    rounds = len(log.read_text().splitlines())
    assert 1 <= rounds <= 12


def test_every_entry_point_needs_root(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    calls = [
        lambda: tb.up(2, tmp_path),
        lambda: tb.down(tmp_path),
        lambda: tb.status(tmp_path),
        lambda: tb.Testbed.load(tmp_path),
        lambda: tb.fault_file(tmp_path, "node01", "/proc/meminfo", "x"),
        lambda: tb.fault_process(tmp_path, "node01", ["true"], 1),
        lambda: tb.fault_daemon(tmp_path, "node01", 20, 1),
        lambda: tb.stop_sshd(tmp_path, "node01"),
        lambda: tb.start_sshd(tmp_path, "node01"),
        lambda: tb.clear_faults(tmp_path),
    ]
    for call in calls:
        with pytest.raises(tb.TestbedError, match="the testbed needs root: "):
            call()


# -- with root: 8 real nodes ------------------------------------------------------

@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 8)


def ssh(bed: tb.Testbed, node: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(bed.ssh_argv(node, command), capture_output=True, text=True, timeout=30)


def on_all(bed: tb.Testbed, command: str) -> dict[str, subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=len(bed.nodes)) as pool:
        return dict(zip(bed.nodes, pool.map(lambda node: ssh(bed, node, command), bed.nodes)))


def _state(bed: tb.Testbed) -> dict:
    return json.loads((bed.state_dir / "state.json").read_text())


@needs_root
def test_each_node_has_its_own_capped_cpu_share(bed):
    if bed.cpu_sharing is not None:
        pytest.skip(f"no per-node CPU cgroups here: {bed.cpu_sharing}")
    state = _state(bed)
    groups = {node: entry["cgroup"] for node, entry in state["nodes"].items()}
    assert len(set(groups.values())) == 8
    assert all(Path(group).parent == Path(state["cgroup"]) for group in groups.values())
    for node, group in groups.items():
        seen = ssh(bed, node, "cat /proc/self/cgroup").stdout
        assert Path(group).name in seen and node in seen  # an ssh session runs in its node's group
    quota = cgroups.node_quota_us(cgroups.available_cpus(), 8)
    limits = [(Path(g) / "cpu.cfs_quota_us").read_text().strip() if (Path(g) / "cpu.cfs_quota_us").exists()
              else (Path(g) / "cpu.max").read_text().split()[0] for g in groups.values()]
    assert limits == [str(quota)] * 8


@needs_root
def test_every_node_answers_ssh_with_its_own_hostname(bed):
    assert bed.nodeset == "node[01-08]"
    subnet = bed.names.host_address.rsplit(".", 1)[0]
    assert bed.addresses["node01"] == f"{subnet}.11" and bed.addresses["node08"] == f"{subnet}.18"
    results = on_all(bed, "hostname")
    assert {node: (r.returncode, r.stdout.strip()) for node, r in results.items()} == {
        node: (0, node) for node in bed.nodes}


@needs_root
def test_a_node_sees_only_its_own_processes_address_and_links(bed):
    results = on_all(bed, "ps -e -o pid=,comm=; echo --; ip -o -4 addr show; echo --; ls /sys/class/net")
    for node, result in results.items():
        assert result.returncode == 0, result.stderr
        processes, addresses, links = result.stdout.split("--\n")
        lines = processes.split("\n")
        assert lines[0].split() == ["1", "oddnode-init"]
        assert len(processes.splitlines()) < 12  # init, sshd and this session: not the host's hundreds
        assert sorted(line.split()[3] for line in addresses.splitlines()) == [
            f"{bed.addresses[node]}/24", "127.0.0.1/8"]
        assert links.split() == ["eth0", "lo"]


@needs_root
def test_nodes_reach_each_other_by_name(bed):
    result = ssh(bed, "node01", "timeout 5 bash -c 'exec 3<>/dev/tcp/node02/22; head -c 8 <&3'")
    assert result.stdout == "SSH-2.0-", result.stderr


@needs_root
@pytest.mark.skipif(Path("/sys/class/dmi").exists(), reason="the host has a DMI table, which nodes keep")
def test_nodes_get_a_synthetic_dmi_table_when_the_host_has_none(bed):
    results = on_all(bed, "cat /sys/class/dmi/id/bios_date /sys/class/dmi/id/bios_vendor /sys/class/dmi/id/product_name")
    assert {r.stdout for r in results.values()} == {"01/15/2025\noddnode testbed\noddnode virtual node\n"}
    assert not Path("/sys/class/dmi").exists()  # the host is left as it was


@needs_root
@pytest.mark.skipif(not Path("/sys/devices/system/node/node0/meminfo").exists(), reason="no NUMA nodes in sysfs")
def test_every_node_keeps_the_numa_memory_the_host_had_when_the_testbed_came_up(bed):
    """A node's hardware does not change between two checks, even where the
    host's kernel grows a NUMA node's memory as it is first used."""
    kept = (bed.state_dir / "nodes" / "node01" / "node0-meminfo").read_text()
    shown = on_all(bed, "cat /sys/devices/system/node/node0/meminfo")
    mounted = on_all(bed, "grep -c ' /sys/devices/system/node/node0/meminfo ' /proc/self/mountinfo")
    for node in bed.nodes:
        assert (shown[node].stdout, mounted[node].stdout.strip()) == (kept, "1"), node


@needs_root
def test_fault_file_shows_on_that_node_only(bed):
    host_meminfo = Path("/proc/meminfo").read_text()
    tb.fault_file(bed.state_dir, "node03", "/sys/class/dmi/id/bios_date", "09/02/2004\n")
    tb.fault_file(bed.state_dir, "node03", "/proc/meminfo", tb.meminfo_with_total(1_000_000))
    try:
        results = on_all(bed, "cat /sys/class/dmi/id/bios_date; head -1 /proc/meminfo")
        assert results["node03"].stdout.split() == ["09/02/2004", "MemTotal:", "1000000", "kB"]
        for node in bed.nodes:
            if node != "node03":
                assert results[node].stdout.split()[0] != "09/02/2004"
                assert results[node].stdout.split()[2] == host_meminfo.split()[1]
        assert Path("/proc/meminfo").read_text().split()[1] == host_meminfo.split()[1]
        assert "node03: /sys/class/dmi/id/bios_date replaced; /proc/meminfo replaced" in tb.status(bed.state_dir).summary()
    finally:
        tb.clear_faults(bed.state_dir)
    assert ssh(bed, "node03", "head -1 /proc/meminfo").stdout.split()[1] == host_meminfo.split()[1]
    assert _state(bed)["mounts"] == []


@needs_root
def test_fault_process_runs_in_that_node_only_and_ends(bed):
    def hogs(node: str) -> int:
        return ssh(bed, node, "ps -e -o comm=").stdout.split().count("oddnode-hog")

    # Long enough to be seen: an ssh session into a node runs on the node's
    # CPU share, which the hog itself is using.
    short = tb.fault_process(bed.state_dir, "node05", tb.hog_argv(seconds=8, megabytes=8, workers=1), 8)
    assert (hogs("node05"), hogs("node06")) == (1, 0)
    record = next(p for p in _state(bed)["processes"] if p["pid"] == short)
    deadline = time.monotonic() + 20
    while alive(record) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(record) and hogs("node05") == 0  # ended by its own bound

    long = tb.fault_process(bed.state_dir, "node05", tb.hog_argv(seconds=60, megabytes=8, workers=3), 60)
    deadline = time.monotonic() + 10
    while hogs("node05") < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert hogs("node05") == 3
    if bed.cpu_sharing is None:  # the hog's workers take from node05's CPU share alone
        group = _state(bed)["nodes"]["node05"]["cgroup"]
        in_group = {read_proc(pid).comm for pid in cgroups.members(group) if read_proc(pid)}
        assert "oddnode-hog" in in_group and "sshd" in in_group
    tb.clear_faults(bed.state_dir)
    assert hogs("node05") == 0  # every worker: the whole process group is killed
    assert read_proc(long) is None or read_proc(long).state == "Z"


@needs_root
def test_the_daemon_spawns_its_commands_in_its_node_only(bed):
    """Fork after fork inside node04: its PIDs climb by hundreds a second
    while node03's stand still."""
    def last_pid(node: str) -> int:
        return int(ssh(bed, node, "sh -c 'echo $$'").stdout.strip())

    tb.fault_daemon(bed.state_dir, "node04", period_ms=10, seconds=30)
    try:
        before = {node: last_pid(node) for node in ("node03", "node04")}
        time.sleep(2)
        after = {node: last_pid(node) for node in ("node03", "node04")}
        assert "oddnode-daemon" in ssh(bed, "node04", "ps -e -o comm=").stdout.split()
        # Each ssh session forks a handful of processes; the daemon three per round.
        assert after["node04"] - before["node04"] > 100
        assert after["node03"] - before["node03"] < 50
    finally:
        tb.clear_faults(bed.state_dir)
    assert "oddnode-daemon" not in ssh(bed, "node04", "ps -e -o comm=").stdout.split()


@needs_root
def test_stop_sshd_makes_one_node_unreachable(bed):
    tb.stop_sshd(bed.state_dir, "node07")
    try:
        refused = ssh(bed, "node07", "hostname")
        assert refused.returncode == 255 and "refused" in refused.stderr
        assert ssh(bed, "node08", "hostname").stdout.strip() == "node08"
        found = {node.name: node for node in tb.status(bed.state_dir).nodes}
        assert not found["node07"].port_open and not found["node07"].sshd and found["node08"].ok
    finally:
        tb.start_sshd(bed.state_dir, "node07")
    assert ssh(bed, "node07", "hostname").stdout.strip() == "node07"


@needs_root
def test_status_and_a_second_up_refused(bed, tmp_path):
    found = tb.status(bed.state_dir)
    assert found.ok and found.addresses == bed.addresses
    assert "ready: node[01-08]" in found.summary()
    with pytest.raises(tb.TestbedError, match="oddnode testbed down"):
        tb.up(2, bed.state_dir, instance=bed.names.number)
    with pytest.raises(tb.TestbedError, match="another testbed is up.*another number"):
        tb.up(2, tmp_path / "other", instance=bed.names.number)
    assert not (tmp_path / "other").exists()


def _leftovers(names: config.Names) -> list[str]:
    """Namespaces and links of this machine named like testbed `names`' objects."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in netns.splitlines() if line.startswith(names.prefix)] + [
        line.split()[1] for line in links.splitlines() if line.split()[1].startswith(names.prefix)]


@needs_root
def test_down_leaves_nothing(bed):
    records = [entry[key] for entry in _state(bed)["nodes"].values() for key in ("unshare", "init", "sshd")]
    group = _state(bed)["cgroup"]
    tb.down(bed.state_dir)
    assert _leftovers(bed.names) == []
    assert group is None or not Path(group).exists()
    for rec in records:  # not even a zombie: `down` reaped what this process started
        proc = read_proc(rec["pid"])
        assert proc is None or proc.start != rec["start"], proc
    assert not bed.state_dir.exists()
    tb.down(bed.state_dir)  # idempotent
    assert not tb.status(bed.state_dir).up


_CRASHING_UP = """
import os, signal, sys
from pathlib import Path
from oddnode import testbed
kind, after = sys.argv[2], int(sys.argv[3])
seen = []
def on_created(created, name):
    seen.append(created)
    if seen.count(kind) == after:
        os.kill(os.getpid(), signal.SIGKILL)
testbed.up(4, Path(sys.argv[1]), instance=int(sys.argv[4]), on_created=on_created)
"""


@needs_root
@pytest.mark.parametrize("kind", ["netns", "process"])
def test_down_cleans_a_half_finished_up(bed, tmp_path, kind):
    tb.down(bed.state_dir)  # its testbed number is free for the half-finished up
    state_dir = tmp_path / "half"
    crashed = subprocess.run([sys.executable, "-c", _CRASHING_UP, str(state_dir), kind, "2", str(bed.names.number)],
                             capture_output=True, text=True, timeout=60)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    state = json.loads((state_dir / "state.json").read_text())
    assert not state["complete"]
    assert {bed.names.netns_name("node01"), bed.names.netns_name("node02")} <= set(_leftovers(bed.names))
    started = [entry["unshare"] for entry in state["nodes"].values() if entry["unshare"]]
    assert len(started) == (2 if kind == "process" else 0)
    with pytest.raises(tb.TestbedError, match="did not finish coming up"):
        tb.Testbed.load(state_dir)
    tb.down(state_dir)
    assert _leftovers(bed.names) == []
    assert not any(alive(rec) for rec in started)
    assert not state_dir.exists()


def test_cpu_hierarchy_is_found_in_mountinfo(tmp_path):
    v1 = tmp_path / "v1"
    v1.write_text(
        "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
    )
    assert cgroups.find_cpu_hierarchy(v1) == cgroups.CpuHierarchy(1, Path("/sys/fs/cgroup/cpu,cpuacct"))
    unified = tmp_path / "cgroup2"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    v2 = tmp_path / "v2"
    v2.write_text(f"30 25 0:26 / {unified} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    assert cgroups.find_cpu_hierarchy(v2) == cgroups.CpuHierarchy(2, unified)
    (unified / "cgroup.controllers").write_text("memory pids\n")
    assert cgroups.find_cpu_hierarchy(v2) is None
    assert cgroups.find_cpu_hierarchy(tmp_path / "missing") is None


def test_node_quota_is_an_equal_share_never_below_the_kernel_minimum():
    share = cgroups.NODES_SHARE
    assert cgroups.node_quota_us(2, 4) == int(cgroups.PERIOD_US * 2 * share) // 4
    assert cgroups.node_quota_us(16, 8) == int(cgroups.PERIOD_US * 16 * share) // 8
    assert cgroups.node_quota_us(2, 1000) == cgroups.MIN_QUOTA_US
