"""The inventory probe run for real on this machine, its output parsed and
checked against what Python reads directly, and collection through a fake
transport that loses no node."""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oddnode.measure.collect.inventory import (
    InventoryResult,
    ProbeOutputError,
    ProbeReport,
    derive_facts,
    parse_dmidecode_memory,
    parse_probe_output,
    probe_argv,
    probe_source,
)
from oddnode.measure.collect.inventory import collect
from oddnode.onnode.node_probe import PROBE_VERSION
from oddnode.reach import NodeResult, NodeStatus
from support.cli import FIXTURES
from support.kernels import OLD_PYTHONS

CORE_FACTS = ("cpu_model", "cpu_threads", "memory_total_kb", "kernel", "os", "arch")

linux_only = pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="the probe reads Linux's /proc and /sys")


def run_probe(argv: list[str]) -> dict:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, "the probe prints exactly one line"
    return json.loads(lines[0])


def meminfo_total_kb() -> str:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return line.split()[1]
    raise AssertionError("no MemTotal in /proc/meminfo")


# ---------------------------------------------------------------- the probe, for real


@linux_only
def test_probe_runs_locally_and_matches_what_python_reads():
    data = run_probe(probe_argv(sys.executable))
    assert data["probe_version"] == PROBE_VERSION
    assert data["hostname"] == platform.node()
    assert isinstance(data["elapsed"], float) and data["elapsed"] < 30
    facts = data["facts"]
    for key in CORE_FACTS:
        assert facts.get(key), f"{key} missing from {sorted(facts)}"
    assert all(isinstance(value, str) for value in facts.values())
    assert all(isinstance(note, str) for note in data["notes"])
    assert "probe_seconds" not in facts and "elapsed" not in facts
    assert int(facts["cpu_threads"]) == os.cpu_count()
    assert facts["memory_total_kb"] == meminfo_total_kb()
    assert facts["kernel"] == platform.release()
    assert facts["arch"] == platform.machine()
    assert facts["kernel_cmdline"] == Path("/proc/cmdline").read_text().strip()
    if "cpu_cores" in facts:
        assert 1 <= int(facts["cpu_cores"]) <= int(facts["cpu_threads"])
    assert facts.get("smt") in {"on", "off", "forceoff", "notsupported", "notimplemented"}
    assert len(facts["cpu_flags_digest"]) == 12 or "cpu_flags_digest" not in facts
    for key in facts:
        per_item = ("process.", "process_seen.", "nic.", "disk.", "ib.", "lib.", "gpu.")
        assert key == key.lower() or key.startswith(per_item), key
        assert " " not in key


@linux_only
def test_probe_keeps_itself_out_of_the_process_facts(tmp_path):
    """The probe's own python and its parent shell are excluded by pid; kernel
    threads never appear; command names are sanitised."""
    python = tmp_path / "oddprobe-py"
    shell = tmp_path / "oddprobe-sh"
    python.symlink_to(Path(sys.executable).resolve())
    shell.symlink_to(shutil.which("sh"))
    argv = probe_argv(str(python))
    script = " ".join(shlex.quote(arg) for arg in argv) + "; true"  # "; true": the shell stays the parent
    data = run_probe([str(shell), "-c", script])
    processes = {key for key in data["facts"] if key.startswith("process.")}
    assert "process.oddprobe-py" not in processes
    assert "process.oddprobe-sh" not in processes
    assert processes, "a running system has user-space processes"
    for key in processes:
        assert data["facts"][key] == "running"
        comm = key[len("process."):]
        assert comm and all(c.isalnum() or c in "_.-" for c in comm), key
    assert not any(key.startswith(("process.kworker", "process.ksoftirqd", "process.kthreadd")) for key in processes)


@linux_only
def test_probe_runs_without_site_and_environment():
    """`python3 -S -E`: no site-packages, no PYTHON* variables: stdlib only."""
    argv = probe_argv(sys.executable)
    data = run_probe([argv[0], "-S", "-E", *argv[1:]])
    for key in CORE_FACTS:
        assert data["facts"].get(key)


@linux_only
@pytest.mark.skipif(not OLD_PYTHONS, reason="no Python 3.6 on this machine")
def test_probe_runs_on_python_3_6():
    data = run_probe(probe_argv(OLD_PYTHONS[0]))
    assert data["facts"]["memory_total_kb"] == meminfo_total_kb()
    assert int(data["facts"]["cpu_threads"]) == os.cpu_count()


def fake_tool(directory: Path, name: str, stdout: str, exit_code: int = 0) -> None:
    """A stand-in for a query tool this machine lacks (nvidia-smi, ethtool, dmidecode)."""
    script = directory / name
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{stdout}EOF\nexit {exit_code}\n")
    script.chmod(0o755)


def probe_with_tools(tmp_path: Path) -> dict:
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(probe_argv(sys.executable), capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


NVIDIA_SMI = (
    "NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, Enabled\n"
    "NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, Disabled\n"
)


@linux_only
def test_probe_reads_the_query_tools(tmp_path):
    fake_tool(tmp_path, "nvidia-smi", NVIDIA_SMI)
    fake_tool(tmp_path, "ethtool", "driver: mlx5_core\nversion: 6.1.0\nfirmware-version: 28.39.1002 (MT_0000000838)\n")
    fake_tool(tmp_path, "dmidecode", (FIXTURES / "dmidecode_t17.txt").read_text())
    data = probe_with_tools(tmp_path)
    facts = data["facts"]
    assert facts["gpu_count"] == "2"
    assert facts["gpu.0.model"] == "NVIDIA H100 80GB HBM3"
    assert facts["gpu.0.driver"] == "550.54.15"
    assert facts["gpu.0.memory"] == "81559 MiB"
    assert (facts["gpu.0.ecc"], facts["gpu.1.ecc"]) == ("Enabled", "Disabled")
    physical = [k for k, v in facts.items() if k.startswith("nic.") and k.endswith(".driver") and v != "virtual"]
    for key in physical:
        assert facts[key.replace(".driver", ".firmware")] == "28.39.1002 (MT_0000000838)"
    if os.geteuid() == 0:
        assert facts["dimm_count"] == "4" and facts["dimm_sizes"] == "1x16GB,3x32GB"
    else:
        assert "dimm_count" not in facts and any("needs root" in note for note in data["notes"])


@linux_only
def test_a_failing_tool_is_a_note_not_an_error(tmp_path):
    fake_tool(tmp_path, "nvidia-smi", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
              "driver.\n", exit_code=9)
    data = probe_with_tools(tmp_path)
    assert "gpu_count" not in data["facts"]
    assert any("nvidia-smi" in note and "exited 9" in note and "couldn't communicate" in note
               for note in data["notes"])
    assert data["facts"]["memory_total_kb"] == meminfo_total_kb()  # the other sections are unharmed


@linux_only
def test_one_broken_section_loses_only_itself(monkeypatch):
    from oddnode.onnode import node_probe

    def broken(facts, notes):
        facts["half_written"] = "x"
        raise OSError("disk on fire")

    monkeypatch.setattr(node_probe, "SECTIONS", (("broken", broken),) + node_probe.SECTIONS)
    data = node_probe.probe()
    assert "section broken failed: OSError: disk on fire" in data["notes"]
    for key in CORE_FACTS:
        assert data["facts"].get(key)


def test_probe_source_is_the_shipped_script():
    source = probe_source()
    assert "def main():" in source and '__name__ == "__main__"' in source
    compile(source, "node_probe.py", "exec")
    argv = probe_argv()
    assert argv[:4] == ["python3", "-E", "-S", "-c"]
    # ARG_MAX for one argument on Linux is 128 KiB: the whole probe must fit.
    assert len(argv[4]) < 128 * 1024


# ---------------------------------------------------------------- parsing the output


def probe_json(**changes) -> str:
    data = {
        "probe_version": PROBE_VERSION,
        "hostname": "node01",
        "facts": {"memory_total_kb": "263856012", "kernel": "6.1.0-18-amd64", "gpu.0.model": "H100",
                  "gpu.1.model": "H100"},
        "notes": ["dmidecode needs root: DIMM facts not reported"],
        "elapsed": 0.42,
    }
    data.update(changes)
    return json.dumps(data)


def test_parse_probe_output_adds_derived_facts():
    report = parse_probe_output("node01", probe_json())
    assert isinstance(report, ProbeReport)
    assert report.node == "node01" and report.hostname == "node01"
    assert report.elapsed == pytest.approx(0.42)
    assert report.notes == ["dmidecode needs root: DIMM facts not reported"]
    assert report.facts["memory_total_gib"] == "251.6"  # 263856012 / 2**20
    assert report.facts["gpu_count"] == "2"  # derived from gpu.<i>.* when the probe did not say


def test_gpu_count_is_left_alone_or_absent():
    assert derive_facts({"gpu_count": "0"})["gpu_count"] == "0"
    assert "gpu_count" not in derive_facts({"kernel": "6.1"})  # no nvidia-smi: not "0"


def test_parse_probe_output_skips_a_login_banner():
    report = parse_probe_output("node02", "Welcome to node02\nQuota: 10 GB\n" + probe_json())
    assert report.facts["kernel"] == "6.1.0-18-amd64"


@pytest.mark.parametrize(
    "stdout, problem",
    [
        ("", "printed nothing"),
        ("   \n", "printed nothing"),
        ("bash: line 1: syntax error\n", "not JSON"),
        (probe_json()[:60], "truncated"),
        ('{"probe_version": 1, "facts": {}} trailing}', "not valid JSON"),
        ("[1, 2]", "not JSON"),
        (probe_json(probe_version=2), "probe_version is 2, expected 1"),
        (json.dumps({"facts": {}}), "probe_version is None"),
        (probe_json(facts={"kernel": 6}), "'facts' is not an object of strings"),
        (probe_json(notes="none"), "'notes' is not a list"),
        (probe_json(elapsed="fast"), "'elapsed' is not a number"),
    ],
)
def test_parse_probe_output_rejects_bad_output_naming_the_node(stdout, problem):
    with pytest.raises(ProbeOutputError) as raised:
        parse_probe_output("node17", stdout)
    assert raised.value.node == "node17"
    assert str(raised.value).startswith("node17: ")
    assert problem in str(raised.value)


# ---------------------------------------------------------------- dmidecode


def test_dmidecode_type_17_counts_populated_slots_only():
    facts = parse_dmidecode_memory((FIXTURES / "dmidecode_t17.txt").read_text())
    assert facts == {
        "dimm_count": "4",
        "dimm_sizes": "1x16GB,3x32GB",  # 16384 MB is 16 GB
        "dimm_speed": "2933 MT/s",  # the configured speed, not the DIMMs' rating
        "dimm_layout": "A1,A2,B1,B2",
    }


def test_dmidecode_older_format_and_empty_board():
    older = (
        "Handle 0x0011, DMI type 17, 34 bytes\nMemory Device\n\tSize: 8192 MB\n\tLocator: DIMM_A1\n"
        "\tSpeed: 1600 MHz\n\tConfigured Clock Speed: 1333 MHz\n\n"
        "Handle 0x0012, DMI type 17, 34 bytes\nMemory Device\n\tSize: No Module Installed\n\tLocator: DIMM_A2\n\n"
        "Handle 0x0013, DMI type 17, 34 bytes\nMemory Device\n\tSize: 8192 MB\n\tLocator: DIMM_B1\n"
        "\tSpeed: 1600 MHz\n\tConfigured Clock Speed: 1600 MHz\n"
    )
    assert parse_dmidecode_memory(older) == {
        "dimm_count": "2",
        "dimm_sizes": "2x8GB",
        "dimm_speed": "1333 MHz,1600 MHz",
        "dimm_layout": "DIMM_A1,DIMM_B1",
    }
    assert parse_dmidecode_memory("# dmidecode 3.3\nNo SMBIOS nor DMI entry point found, sorry.\n") == {
        "dimm_count": "0"
    }


# ---------------------------------------------------------------- collect through any transport


class FakeTransport:
    """Prepared results per node, as a real transport would return them."""

    name = "fake"

    def __init__(self, results: dict[str, NodeResult], drop: tuple[str, ...] = ()) -> None:
        self.results = results
        self.drop = drop
        self.calls: list[tuple[list[str], list[str], float]] = []

    def run(self, nodes, argv, *, timeout):
        self.calls.append((list(nodes), list(argv), timeout))
        return {node: self.results[node] for node in nodes if node not in self.drop}


def result(node: str, status: NodeStatus, stdout: str = "", stderr: str = "", code: int | None = 0) -> NodeResult:
    return NodeResult(node=node, status=status, stdout=stdout, stderr=stderr, exit_code=code, duration=0.5)


def test_collect_classifies_every_node_and_loses_none():
    transport = FakeTransport(
        {
            "node01": result("node01", NodeStatus.OK, probe_json(hostname="node01")),
            "node02": result("node02", NodeStatus.UNREACHABLE, stderr="ssh: connect to host node02 port 22: No route",
                             code=None),
            "node03": result("node03", NodeStatus.FAILED, stderr="bash: python3: command not found", code=127),
            "node04": result("node04", NodeStatus.OK, "Segmentation fault\n"),
            "node05": result("node05", NodeStatus.TIMEOUT, code=None),
            "node06": result("node06", NodeStatus.OK, probe_json(hostname="node06")),
        },
        drop=("node07",),
    )
    nodes = [f"node{i:02d}" for i in range(1, 8)]
    inventory = collect(transport, nodes, timeout=20)
    assert isinstance(inventory, InventoryResult)
    assert transport.calls[0][0] == nodes and transport.calls[0][2] == 20
    assert transport.calls[0][1] == probe_argv()
    assert sorted(inventory.reports) == ["node01", "node06"]
    assert sorted(inventory.unreachable) == ["node02", "node07"]
    assert sorted(inventory.failed) == ["node03", "node04", "node05"]
    assert set(inventory.reports) | set(inventory.unreachable) | set(inventory.failed) == set(nodes)
    assert set(inventory.reasons) == {"node02", "node03", "node04", "node05", "node07"}
    assert "No route" in inventory.reasons["node02"]
    assert "no python3" in inventory.reasons["node03"]
    assert "not JSON" in inventory.reasons["node04"]
    assert "20 s" in inventory.reasons["node05"]
    assert "no result" in inventory.reasons["node07"]
    assert inventory.failed["node04"].stdout == "Segmentation fault\n"  # what the node said is kept
    facts = inventory.facts()
    assert facts["kernel"] == {"node01": "6.1.0-18-amd64", "node06": "6.1.0-18-amd64"}
    assert ("node01", "memory_total_gib", "251.6") in inventory.fact_rows()


@linux_only
def test_collect_runs_the_real_probe_through_a_local_transport():
    class LocalTransport:
        name = "local-test"

        def run(self, nodes, argv, *, timeout):
            done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
            status = NodeStatus.OK if done.returncode == 0 else NodeStatus.FAILED
            return {node: NodeResult(node, status, done.stdout, done.stderr, done.returncode, 0.0) for node in nodes}

    inventory = collect(LocalTransport(), ["localhost"], timeout=60)
    report = inventory.reports["localhost"]
    assert report.facts["memory_total_kb"] == meminfo_total_kb()
    assert float(report.facts["memory_total_gib"]) == pytest.approx(int(meminfo_total_kb()) / 2**20, abs=0.05)
