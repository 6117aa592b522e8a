"""Shared fixtures and helpers, and the test tiers.

The suite has three tiers, one directory each, marked by it: ``unit``
(pure Python, seconds: ``make test-fast``), ``kernels`` (builds and runs
our C kernels and installed tools on this machine) and ``testbed`` (builds
a virtual cluster of network namespaces; root, minutes).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# What tests share lives in the package tests/support, importable because
# pytest's default import mode puts this file's directory on sys.path; the
# store fixture every tier uses is registered here.
from support.store import store  # noqa: F401

TIERS = ("unit", "kernels", "testbed")
# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their
# environment, and the command line wraps its output to a COLUMNS it is
# given: a worker sees the environment a run in one process sees.
if "PYTEST_XDIST_WORKER" in os.environ:
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


@pytest.fixture
def scripted(monkeypatch):
    """Make the node commands run on a scripted cluster: returns the setter
    ``use(transport, nodes)``."""
    from oddnode.app.cli import interconnect
    from oddnode.reach.base import Target

    def use(transport, nodes):
        monkeypatch.setattr(interconnect, "selected_target", lambda *args: Target(list(nodes), transport))
        return transport

    return use


def pytest_collection_modifyitems(items):
    """Mark every test with its tier, the first directory below tests/."""
    tests = Path(__file__).parent
    for item in items:
        tier = Path(item.fspath).relative_to(tests).parts[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
