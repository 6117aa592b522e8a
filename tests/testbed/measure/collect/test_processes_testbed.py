"""``oddnode processes`` on a real testbed (root): 8 nodes, each its own
PID namespace, where the collector turns kernel accounting on for the node
alone.  The daemon fault on one node (basename, sed and sh spawned every
20 ms) gives it a ratio of 10 or more for each of them and one
process-asymmetry finding naming it with that fingerprint, and no other
node a warning; with no fault, no process-asymmetry at all.

The interval is 45 s: nine 5-second periods, enough for one node of eight
to beat chance after the correction over nodes and commands
(docs/findings.md#process-asymmetry)."""

from __future__ import annotations

import json

import pytest

from support.cli import oddnode
from oddnode import testbed as tb
from support.testbed import clean, needs_root, running_testbed  # noqa: F401 (clean: a fixture)

pytestmark = needs_root

SECONDS = 45
DAEMON_NODE = "node05"
DAEMON_COMMANDS = ("basename", "sed", "sh")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 8)


def processes(bed, tmp_path) -> dict:
    """The command's JSON, run as a user runs it on the testbed; its exit
    status is 1 exactly when a finding is a warning or worse."""
    result = oddnode("processes", "--testbed", "--seconds", SECONDS, "--json", "--db", tmp_path / "p.duckdb",
                     cwd=tmp_path, env={"ODDNODE_TESTBED_DIR": str(bed.state_dir)}, check=False)
    document = json.loads(result.stdout)
    problems = [f for f in document["findings"] if f["severity"] in ("warning", "error")]
    assert result.returncode == (1 if problems else 0), (result.returncode, result.stderr)
    # Every node accounted by the kernel, in its own PID namespace.
    assert sorted(document["nodes"]) == bed.nodes and not document["unanswered"], document["unanswered"]
    assert {node["method"] for node in document["nodes"].values()} == {"acct"}
    return document


def test_a_daemon_on_one_node_is_its_fingerprint(clean, tmp_path):
    tb.fault_daemon(clean.state_dir, DAEMON_NODE, period_ms=20.0, seconds=SECONDS + 60)
    document = processes(clean, tmp_path)
    (table, *_) = document["tables"]
    ratios = {row["command"]: row["ratio"] for row in table["rows"] if row["unit"] == DAEMON_NODE}
    for command in DAEMON_COMMANDS:
        assert ratios[command] is None or ratios[command] >= 10, (command, ratios)  # None: the rest never ran it
    (finding,) = [f for f in document["findings"] if f["severity"] in ("warning", "error")]
    assert (finding["kind"], finding["nodes"]) == ("process-asymmetry", DAEMON_NODE)
    fingerprint = {entry["command"] for entry in finding["evidence"]["fingerprint"]}
    assert set(DAEMON_COMMANDS) <= fingerprint
    assert document["nodes"][DAEMON_NODE]["commands"]["basename"]["executions"] >= 5 * SECONDS


def test_a_healthy_testbed_has_no_process_asymmetry(clean, tmp_path):
    document = processes(clean, tmp_path)
    assert document["findings"] == []
