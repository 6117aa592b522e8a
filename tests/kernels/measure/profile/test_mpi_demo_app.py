"""The MPI demo application, built with mpicc by the node runner and run as
two and three ranks on this machine by Open MPI's mpirun: every rank's MPI
calls equal the formula of its options, the data checked, an imbalance
seen in the last rank's compute time, a spoiling rank named, bad options
refused.  Timings are compared only as ratios of a 4-fold work difference."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from oddnode.reach.jobs import decode_job, encode_job
from oddnode.measure.profile.demo_app import (
    CORRUPT_RANK_VARIABLE,
    demo_app_argv,
    kernel_args,
    parse_demo_app_run,
    work_units_of,
)
from oddnode.parsers.oddnode_mpi_demo_app import expected_calls
from oddnode.parsers.base import ParseError
from support.kernels import local_launcher
from support.kernels import run_alone


@pytest.fixture(scope="module")
def mpi_env(tmp_path_factory):
    """A private build cache, where mpicc can build an MPI program."""
    missing = [tool for tool in ("mpicc", "mpirun") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} on PATH (Debian: openmpi-bin, libopenmpi-dev)")
    tmp = tmp_path_factory.mktemp("mpi_demo_app")
    return dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))


def local_argv(ranks: int, env: dict[str, str] | None = None, **options) -> list[str]:
    launcher = local_launcher(ranks) + (["-x", CORRUPT_RANK_VARIABLE] if env else [])
    return demo_app_argv([f"cn-a{17 + r}" for r in range(ranks)], launcher=launcher, env=env, **options)


@pytest.mark.parametrize("ranks, iterations, every", [(2, 20, 5), (3, 17, 4), (3, 6, 0)])
def test_every_rank_makes_the_calls_its_options_say_and_the_data_checks(mpi_env, ranks, iterations, every):
    run = parse_demo_app_run(run_alone(local_argv(ranks, iterations=iterations, work_units=50,
                                                  alltoall_every=every), mpi_env), "run")
    assert run.valid, run.problems
    assert len(run.ranks) == ranks
    formula = expected_calls(iterations, every)
    assert formula["MPI_Sendrecv"] == 2 * iterations and formula["MPI_Alltoall"] == (iterations // every if every
                                                                                      else 0)
    for rank in run.ranks:
        assert rank.calls == formula, rank
        assert rank.work_units == 50
        assert rank.wall_s > 0 and rank.compute_s > 0
        # The parts are the wall time but for the clock reads between them.
        assert rank.compute_s + rank.comm_s + rank.other_s <= rank.wall_s * 1.01


@pytest.mark.timing
def test_an_imbalance_makes_the_last_rank_compute_longer(mpi_env):
    # -i 3: the last rank does 4 times rank 0's work, far beyond what two
    # shared cores' noise can hide (a ratio, never an absolute time).
    run = parse_demo_app_run(run_alone(local_argv(3, iterations=20, work_units=300, imbalance=3.0), mpi_env), "imb")
    assert run.valid, run.problems
    assert [r.work_units for r in run.ranks] == [work_units_of(r, 3, 300, 3.0) for r in range(3)] == [300, 750, 1200]
    assert run.ranks[2].compute_s > 2.0 * run.ranks[0].compute_s
    # Rank 0 waits for the slow rank in its exchanges.
    assert run.ranks[0].comm_s > run.ranks[2].comm_s


def test_a_rank_that_spoils_its_messages_is_named(mpi_env):
    run = parse_demo_app_run(run_alone(local_argv(3, {CORRUPT_RANK_VARIABLE: "1"}, iterations=6, work_units=10,
                                                  alltoall_every=2), mpi_env), "corrupt")
    assert not run.valid
    text = "\n".join(run.problems)
    assert "halo: rank 2 received bad data from rank 1" in text
    assert "alltoall: rank 0 received bad data from rank 1" in text
    assert run.ranks[1].calls == expected_calls(6, 2)


@pytest.mark.parametrize("args, message", [
    (["-n", "0"], "-n wants iterations"),
    (["-w", "x"], "-w wants work units"),
    (["-h", "-1"], "-h wants halo bytes"),
    (["-A", "99999999999"], "-A wants alltoall bytes"),
    (["-i", "nan"], "-i wants an imbalance fraction"),
    (["-q", "1"], "unknown option"),
    (["-n"], "missing value"),
])
def test_the_kernel_refuses_bad_options_with_status_2(mpi_env, args, message):
    argv = local_argv(2)
    # The same job with the kernel's arguments replaced by bad ones.
    spec = decode_job(argv[-1])
    spec["args"] = args
    report = json.loads(subprocess.run(argv[:-1] + [encode_job(spec)], capture_output=True, text=True,
                                       env=mpi_env, timeout=120).stdout)
    assert report["returncode"] == 2, report
    assert message in report["stderr"] and "usage:" in report["stderr"]
    with pytest.raises(ParseError, match="exited with status 2"):
        parse_demo_app_run(json.dumps(report), "bad")


def test_help_prints_the_usage_and_exits_0(mpi_env):
    argv = local_argv(2)
    spec = decode_job(argv[-1])
    spec["args"] = ["--help"]
    report = json.loads(subprocess.run(argv[:-1] + [encode_job(spec)], capture_output=True, text=True,
                                       env=mpi_env, timeout=120).stdout)
    assert report["returncode"] == 0 and "-i IMBALANCE" in report["stderr"], report


def test_the_argv_builds_with_mpicc_and_carries_the_options():
    spec = decode_job(demo_app_argv(["cn-a17", "gpu007"], iterations=7, alltoall_every=3, imbalance=0.5)[-1])
    assert spec["kernel"] == "mpi_demo_app" and spec["compiler"] == "mpicc"
    assert spec["launcher"][:5] == ["mpirun", "-np", "2", "--host", "cn-a17,gpu007"]
    assert spec["args"] == kernel_args(7, alltoall_every=3, imbalance=0.5)
    assert '#include "oddnode_kernel.h"' not in spec["source"] and "mix64" in spec["source"]


@pytest.mark.parametrize("call, match", [
    (lambda: kernel_args(iterations=0), "iterations"),
    (lambda: kernel_args(halo_bytes=-1), "halo_bytes"),
    (lambda: kernel_args(imbalance=-0.5), "imbalance"),
    (lambda: kernel_args(alltoall_every=True), "alltoall_every"),
    (lambda: demo_app_argv(["cn-a17"]), "two or more nodes"),
])
def test_bad_arguments_are_refused_before_any_run(call, match):
    with pytest.raises(ValueError, match=match):
        call()
