"""The probe's sensor readings: hwmon temperatures and fans, thermal zones,
the CPUs' throttling events, from a sysfs tree as a server shows it; they
are measurements, which the inconsistent-fact rule leaves alone."""

from __future__ import annotations

import pytest

from oddnode.core.model import Dataset
from oddnode.findings import find_all
from oddnode.findings.expectations import snapshot
from oddnode.onnode import node_probe


def put(root, path: str, text: str) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n")


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Two sockets' coretemp, a BMC's fans, an ACPI zone, four CPUs in two packages."""
    for index, (socket, package_c, core_c) in enumerate([(0, 61000, 58000), (1, 67000, 64000)]):
        device = tmp_path / f"devices/platform/coretemp.{socket}"
        device.mkdir(parents=True)
        chip = f"class/hwmon/hwmon{index + 2}"
        put(tmp_path, f"{chip}/name", "coretemp")
        (tmp_path / chip / "device").symlink_to(device)
        put(tmp_path, f"{chip}/temp1_input", str(package_c))
        put(tmp_path, f"{chip}/temp1_label", f"Package id {socket}")
        put(tmp_path, f"{chip}/temp2_input", str(core_c))
        put(tmp_path, f"{chip}/temp2_label", "Core 0")
    put(tmp_path, "class/hwmon/hwmon0/name", "ipmi_si")
    put(tmp_path, "class/hwmon/hwmon0/fan1_input", "8400")
    put(tmp_path, "class/hwmon/hwmon0/fan2_input", "garbage")
    put(tmp_path, "class/thermal/thermal_zone0/type", "acpitz")
    put(tmp_path, "class/thermal/thermal_zone0/temp", "27800")
    for cpu, package, core_events, package_events in [(0, 0, 3, 10), (1, 0, 0, 10), (2, 1, 1, 2), (3, 1, 0, 2)]:
        put(tmp_path, f"devices/system/cpu/cpu{cpu}/thermal_throttle/core_throttle_count", str(core_events))
        put(tmp_path, f"devices/system/cpu/cpu{cpu}/thermal_throttle/package_throttle_count", str(package_events))
        put(tmp_path, f"devices/system/cpu/cpu{cpu}/topology/physical_package_id", str(package))
    monkeypatch.setattr(node_probe, "SYSFS", str(tmp_path))
    return tmp_path


def test_every_reading_under_its_chip_and_label(server):
    facts, notes = {}, []
    node_probe.probe_sensors(facts, notes)
    assert facts == {
        "sensor.coretemp.0.Package_id_0_c": "61.0", "sensor.coretemp.0.Core_0_c": "58.0",
        "sensor.coretemp.1.Package_id_1_c": "67.0", "sensor.coretemp.1.Core_0_c": "64.0",
        "sensor.ipmi_si.fan1_rpm": "8400",
        "sensor.thermal.acpitz.thermal_zone0_c": "27.8",
        "sensor.cpu.core_throttle_events": "4", "sensor.cpu.package_throttle_events": "12",
    }
    assert notes == []


def test_a_machine_without_sensors_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(node_probe, "SYSFS", str(tmp_path))
    facts, notes = {}, []
    node_probe.probe_sensors(facts, notes)
    assert facts == {} and "no temperature, fan or throttling sensor" in notes[0]


def test_readings_that_differ_are_no_inconsistency_and_no_expectation():
    nodes = [f"cn{i:02d}" for i in range(1, 9)]
    facts = {"sensor.coretemp.0.Package_id_0_c": {n: str(45 + 3 * (i % 3)) for i, n in enumerate(nodes)},
             "sensor.cpu.core_throttle_events": {n: "0" for n in nodes} | {"cn03": "5121"},
             "cores": dict.fromkeys(nodes, "64")}
    assert find_all(Dataset(facts=facts)) == []
    written = snapshot(facts, nodes)
    assert "\nsensor." not in written and "\ncores: 64" in written
