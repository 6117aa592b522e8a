"""What the tests that bring up a real testbed share."""

from __future__ import annotations

import os
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


def _other_testbed() -> str | None:
    """The state directory of a testbed already up on this machine, if any."""
    bridge = Path("/sys/class/net") / config.BRIDGE
    if not bridge.exists():
        return None
    return (bridge / "ifalias").read_text().strip() or "unknown state directory"


def running_testbed(tmp_path_factory, nodes: int, **options):
    """A fixture body: a testbed of `nodes` nodes (`options`: leaves,
    link_rate), torn down whatever happens."""
    other = _other_testbed()
    if other:
        pytest.skip(f"another testbed is up on this machine ({other}): `oddnode testbed down` it first")
    state_dir = tmp_path_factory.mktemp("testbed")
    try:
        yield tb.up(nodes, state_dir, **options)
    finally:
        tb.down(state_dir)


@pytest.fixture
def clean(bed):
    """Every test starts from, and leaves, a testbed without faults (``bed``:
    the module's own testbed fixture)."""
    tb.clear_faults(bed.state_dir)
    yield bed
    tb.clear_faults(bed.state_dir)
