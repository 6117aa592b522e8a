"""An installed MPI application on a set, from a command template: hpcc on
two ranks of this machine through the node runner, its input file shipped
and its output file parsed, as ``oddnode sets --command`` runs it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from oddnode.measure.node.hpl import hpcc_input
from oddnode.measure.set.jobs import command_job

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("mpirun", "hpcc")),
    reason="no mpirun or hpcc (Debian: openmpi-bin, hpcc)")

# Both ranks on this machine, more ranks than cores allowed, over TCP as
# between two nodes.
TEMPLATE = "mpirun --oversubscribe -np {ranks} --host localhost:{ranks} --mca btl self,tcp hpcc"


def run_on_this_machine(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_hpcc_on_two_ranks_is_run_with_its_input_and_its_output_file_parsed(tmp_path):
    inputs = tmp_path / "hpccinf.txt"
    inputs.write_text(hpcc_input(400, 32, 1, 2))
    job = command_job(TEMPLATE, "hpcc", files=[f"hpccinf.txt={inputs}"], output="hpccoutf.txt", timeout=240)
    parsed = job.parse(run_on_this_machine(job.argv(["cn-0001", "cn-0002"])), "cn-[0001-0002]")
    assert parsed.valid, parsed.problems
    hpl = [m for m in parsed.measurements if "hpl" in m.benchmark.lower()]
    assert hpl and all(m.value > 0 for m in hpl)
    assert parsed.configuration["comm_world_procs"] == 2 and parsed.configuration["P"] * parsed.configuration["Q"] == 2


def test_an_application_that_writes_no_output_file_is_a_failed_run_saying_so(tmp_path):
    inputs = tmp_path / "hpccinf.txt"
    inputs.write_text(hpcc_input(400, 32, 1, 2))
    job = command_job("true", "hpcc", files=[f"hpccinf.txt={inputs}"], output="hpccoutf.txt")
    with pytest.raises(Exception, match="wrote no hpccoutf.txt"):
        job.parse(run_on_this_machine(job.argv(["a", "b"])), "set")
