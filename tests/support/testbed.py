"""What the tests that bring up a real testbed share."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from oddnode import testbed as tb
from oddnode.testbed import config


_TOOLS = ("ip", "unshare", "nsenter", "ssh", "ssh-keygen", "timeout", "mount")
_MISSING = [tool for tool in _TOOLS if shutil.which(tool) is None] + (
    [] if Path("/usr/sbin/sshd").exists() else ["sshd (apt-get install openssh-server)"])
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or bool(_MISSING),
    reason="the testbed needs root, ip, unshare, nsenter and sshd"
    + (f" (missing: {', '.join(_MISSING)})" if _MISSING else " (not root)"),
)


# The modules whose testbeds run Slurm share one pytest-xdist worker: every
# testbed's slurmd names its cgroups after its node (node01...), which
# testbeds side by side would share.
slurm_testbed = pytest.mark.xdist_group("slurm")


def session_instance() -> int:
    """The testbed number of this test session: pytest-xdist's worker number
    (gw0 is 0, gw1 is 1...), so that workers each bring up their own
    testbeds side by side; 0 without workers."""
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    number = int(worker.group(1)) if worker else 0
    if number >= config.MAX_INSTANCES:
        pytest.fail(f"a machine holds {config.MAX_INSTANCES} testbeds: run the testbed tier with fewer workers")
    return number


def _other_testbed(names: config.Names) -> str | None:
    """The state directory of a testbed of the same number already up on
    this machine, if any."""
    bridge = Path("/sys/class/net") / names.bridge
    if not bridge.exists():
        return None
    return (bridge / "ifalias").read_text().strip() or "unknown state directory"


def running_testbed(tmp_path_factory, nodes: int, **options):
    """A fixture body: a testbed of `nodes` nodes (`options`: leaves,
    link_rate, slurm) numbered for this session, torn down whatever happens."""
    instance = session_instance()
    other = _other_testbed(config.Names(instance))
    if other:
        pytest.skip(f"another testbed is up on this machine ({other}): `oddnode testbed down` it first")
    state_dir = tmp_path_factory.mktemp("testbed")
    try:
        yield tb.up(nodes, state_dir, instance=instance, **options)
    finally:
        tb.down(state_dir)


@pytest.fixture
def clean(bed):
    """Every test starts from, and leaves, a testbed without faults (``bed``:
    the module's own testbed fixture)."""
    tb.clear_faults(bed.state_dir)
    yield bed
    tb.clear_faults(bed.state_dir)
