"""Shared fixtures and helpers, and the test tiers.

The suite has three tiers, one directory each, marked by it: ``unit``
(pure Python, seconds: ``make test-fast``), ``kernels`` (builds and runs
our C kernels and installed tools on this machine) and ``testbed`` (builds
a virtual cluster of network namespaces; root, minutes).
"""

from __future__ import annotations

import sys
import importlib.util
import json
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


def tier_of(path: Path) -> str:
    """A test file's tier: the first directory below tests/."""
    return path.relative_to(Path(__file__).parent).parts[0]


def pytest_collection_modifyitems(items):
    """Mark every test with its tier, and keep each testbed module on one
    pytest-xdist worker (``--dist loadgroup``): its testbed is brought up
    once, on that worker's own testbed number (support.testbed), and its
    tests run one after the other as they were written to."""
    for item in items:
        tier = tier_of(Path(item.fspath))
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if tier == "testbed" and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(Path(item.fspath).stem))


# -- every --json document a unit test makes follows the schema ---------------------------------

# The modules of ours that hold the JSON printer, found again only when a
# module has been imported since (a scan of every module before each of
# thousands of tests took seconds): ((modules loaded, printer), holders).
_holders: tuple[tuple[int, int], list] = ((0, 0), [])


def _modules_holding(printer) -> list:
    global _holders
    key = (len(sys.modules), id(printer))
    if _holders[0] != key:
        _holders = (key, [module for module in list(sys.modules.values())
                          if module is not None and module.__name__.startswith("oddnode.")
                          and getattr(module, "print_json", None) is printer])
    return _holders[1]


@pytest.fixture(autouse=True)
def json_documents_follow_the_schema(request, monkeypatch):
    """Check every document a unit test's command prints with --json (through
    print_json, the one JSON printer) against the schema's definition of the
    command's document; a document it refuses fails the test."""
    if tier_of(Path(request.node.path)) != "unit" or importlib.util.find_spec("jsonschema") is None:
        yield
        return
    import oddnode.app.cli  # noqa: F401 (every command module, holding its print_json)
    from oddnode.app.cli import common
    from oddnode.report.schema import DOCUMENTS
    from support.schema import documents_printed_by_caller, schema_errors

    original = common.print_json
    refused: list[str] = []

    def print_checked_json(document):
        original(document)
        names = documents_printed_by_caller()
        printed = json.loads(json.dumps(common.finite_json(document), default=common.json_default))
        problems = schema_errors(printed, DOCUMENTS if names is None else names)
        if names != () and problems:
            refused.append("\n".join(problems[:20]))

    for module in _modules_holding(original):
        monkeypatch.setattr(module, "print_json", print_checked_json)
    yield
    if refused:
        pytest.fail("a --json document the schema refuses:\n" + "\n\n".join(refused), pytrace=False)
