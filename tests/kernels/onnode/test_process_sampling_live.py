"""The inventory probe samples a busy process for real: a CPU share is
measured, so the test runs alone (timing), never beside other tests."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from oddnode.findings.processes import is_persistent, parse_sampled
from oddnode.measure.collect.inventory import collect
from oddnode.onnode.node_probe import SNAPSHOTS
from oddnode.reach.local import LocalTransport

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the probe reads Linux's /proc")


@linux_only
@pytest.mark.timing
def test_the_probe_samples_a_busy_process_for_real(tmp_path):
    """A busy loop under its own name beside the probe: seen in every
    snapshot, with CPU time."""
    busy = tmp_path / "oddbusy"
    busy.symlink_to(Path(sys.executable).resolve())
    loop = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass\n"
    hog = subprocess.Popen([str(busy), "-c", loop])
    try:
        time.sleep(0.2)  # let it start
        report = collect(LocalTransport(), ["localhost"], timeout=60).reports["localhost"]
    finally:
        hog.kill()
        hog.wait()
    facts = report.facts
    assert facts["process.oddbusy"] == "running"
    seen, taken, window, cpu = parse_sampled(facts["process_seen.oddbusy"])
    assert (seen, taken) == (SNAPSHOTS, SNAPSHOTS)
    assert 1.9 <= window < 10 and cpu > 0.2 * window  # it had at least a fifth of a CPU on a shared machine
    assert is_persistent(facts["process_seen.oddbusy"])
