"""A parameter sweep on a real testbed (root), from the command line: an
Open MPI setting that only one value of makes the ranks fast is found, and
settings that change nothing are told apart from nothing.

The fault is one that real clusters have: ranks on CPUs they do not own.
Open MPI's ranks poll for messages (they never block), which is fastest
when each has a core to itself.  Where a rank shares its CPU -- more ranks
than cores, a cpuset narrower than the job, a node's CPU time capped -- a
polling rank spends its share spinning while its partner waits for the
CPU, and a message waits for the next time slice.  The testbed's nodes are
capped (a CFS quota of a quarter of a CPU each, docs/testbed.md#mpi-on-the-testbed):
a two-rank Sendrecv there takes about 6 ms at 0 B.  ``mpi_yield_when_idle``
makes an idle rank give up its CPU (``sched_yield``) instead, and the same
call takes about 50 us.  Swept as the environment variable
``OMPI_MCA_mpi_yield_when_idle=0,1`` -- which must reach the rank mpirun
starts on the other node (``-x``) to help -- the sweep must name 1 as best
at every size with significance.  A control variable that nothing reads,
swept over two values with the ranks yielding, must give no significant
difference.

Four nodes in two sets of two, sorted only, the Sendrecv chain at 0 B
and 64 KiB, 0.05 s a size: a round of two settings takes about 7 s.  The
two sets of a turn share the host's CPUs and its time, so the turns are
the repetitions: six rounds let six turns against six reach p = 2/924
(Holm over three tests: 0.0065), for the control as much as for the
setting that matters, so that the control's test can fail.
"""

from __future__ import annotations

import json
import shutil

import pytest

from support.cli import oddnode
from support.testbed import needs_root, running_testbed

pytestmark = [needs_root, pytest.mark.skipif(
    shutil.which("mpicc") is None or shutil.which("mpirun") is None,
    reason="no mpicc or mpirun (Debian: openmpi-bin, libopenmpi-dev)")]

LINK_RATE = 100 * 10**6  # bits/s
# Fixed options of the sets step: one Sendrecv chain per set of two, both
# sets at once; 0 B (latency alone) and 64 KiB (a few packets).
SETS = ("--set", "sets.size=2", "--set", "sets.orderings=sorted", "--set", "sets.benchmarks=sendrecv",
        "--set", "sets.sizes=0,65536", "--set", "sets.seconds_per_size=0.3")
YIELD = "OMPI_MCA_mpi_yield_when_idle"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running_testbed(tmp_path_factory, 4, link_rate=LINK_RATE)


def sweep(bed, tmp_path, *args) -> dict:
    """``oddnode sweep sets --testbed ... --json``: its document; every set run valid."""
    result = oddnode("sweep", "sets", "--testbed", *SETS, *args, "--json", "--db", tmp_path / "sweep.duckdb",
                     cwd=tmp_path, env={"ODDNODE_TESTBED_DIR": str(bed.state_dir)})
    document = json.loads(result.stdout)
    notes = [note for turn in document["run"]["turns"] for note in turn["notes"] if "set runs" in note]
    assert notes and all("0 invalid, 0 failed" in note for note in notes), notes
    assert all(s["failed"] == 0 for s in document["analysis"]["settings"])
    return document


def rows(document: dict) -> dict[tuple[str, int], dict]:
    return {(s["family"], row["size"]): row for s in document["analysis"]["series"] for row in s["rows"]}


def test_the_setting_that_lets_ranks_yield_their_capped_cpus_is_best_at_every_size(bed, tmp_path):
    document = sweep(bed, tmp_path, "--env", f"{YIELD}=0,1", "-r", "6", "--plot", tmp_path / "figures")
    found = rows(document)
    assert set(found) == {("time", 0), ("time", 65536), ("bandwidth", 65536)}
    for key, row in found.items():
        assert row["best"] == "1" and row["significant"], (key, row)
    # The polling ranks wait for their quota: several times slower at 0 B.
    assert found[("time", 0)]["change"] < -0.5
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == [
        "sets.sendrecv.sorted-bandwidth.png", "sets.sendrecv.sorted-time.png"]


def test_settings_that_change_nothing_differ_in_nothing(bed, tmp_path):
    document = sweep(bed, tmp_path, "--env", "ODDNODE_SWEEP_CONTROL=a,b", "--env", f"{YIELD}=1", "-r", "6")
    found = rows(document)
    assert all(row["tests"]["b"]["p_holm"] is not None for row in found.values()), found  # it could fail
    assert [row for row in found.values() if row["significant"]] == []
    assert {s["setting"] for s in document["analysis"]["settings"]} == {"a", "b"}
