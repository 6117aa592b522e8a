"""oddnode's MPI profiler, built with mpicc by the node runner and preloaded
by Open MPI's mpirun into our demo application on this machine: every
rank's call counts equal those the application counted itself, its bytes
what its options imply, its wall time and time in MPI within 10% of the
application's own; a Sendrecv of a known size lands in its bucket; an
application that dies before MPI_Finalize leaves no profile and says so."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from oddnode.reach.jobs import kernel_source
from oddnode.measure.profile.demo_app import parse_demo_app_output
from oddnode.readings.profile import size_bucket
from oddnode.measure.profile.profiler import WRAPPED_CALLS, ProfilerError, build_profiler_library, run_profiled
from support.kernels import local_launcher

# The profile's times are compared with the application's own, within 10%.
pytestmark = pytest.mark.timing

# An MPI program that leaves without MPI_Finalize, as a crashed one.
DYING_APP = r"""
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    exit(3);
}
"""


@pytest.fixture(scope="module")
def mpi_dir(tmp_path_factory):
    """A private build cache (XDG_CACHE_HOME) and the demo application built there."""
    missing = [tool for tool in ("mpicc", "mpirun") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} on PATH (Debian: openmpi-bin, libopenmpi-dev)")
    tmp = tmp_path_factory.mktemp("mpi_profiler")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp / "cache"))
        for name, value in {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}.items():
            patch.setenv(name, value)
        (tmp / "demo.c").write_text(kernel_source("mpi_demo_app"))
        (tmp / "dying.c").write_text(DYING_APP)
        for name in ("demo", "dying"):
            subprocess.run(["mpicc", "-O2", "-o", str(tmp / name), str(tmp / f"{name}.c"), "-lm"], check=True)
        yield tmp


def profiled_demo(tmp: Path, ranks: int, capfd, *options: str):
    """A profiled run of the demo application and what it printed."""
    run = run_profiled([*local_launcher(ranks), str(tmp / "demo"), *options], work_dir=tmp, timeout=300)
    app = parse_demo_app_output(capfd.readouterr().out, "demo")
    return run, app


def test_the_library_builds_once_in_the_cache(mpi_dir):
    library = build_profiler_library()
    assert library.name == "libmpi_profiler.so" and library.is_absolute()
    assert str(library).startswith(str(mpi_dir / "cache"))
    assert build_profiler_library() == library


def test_counts_and_bytes_equal_the_applications_own(mpi_dir, capfd):
    # 3000-byte halos: bucket 11 ([2048, 4096)), not a power of two.
    run, app = profiled_demo(mpi_dir, 3, capfd, "-n", "17", "-w", "20", "-h", "3000", "-a", "4", "-A", "100")
    assert run.returncode == 0 and app.valid
    profile = run.profile
    assert profile.tool == "oddnode" and len(profile.ranks) == 3 and "demo" in profile.command
    for rank, mine in zip(profile.ranks, app.ranks, strict=True):
        counted: dict[str, int] = {}
        for (call, _), stats in rank.calls.items():
            counted[call] = counted.get(call, 0) + stats.count
        wrapped = {call: count for call, count in mine.calls.items() if call in WRAPPED_CALLS}
        assert counted == wrapped, rank.rank  # equal, and nothing the application did not call
        sendrecv = rank.calls[("MPI_Sendrecv", size_bucket(3000))]
        assert size_bucket(3000) == 11 and sendrecv.count == 34 and sendrecv.bytes == 34 * 3000
        alltoall = rank.calls[("MPI_Alltoall", size_bucket(100))]
        assert alltoall.count == 17 // 4 and alltoall.bytes == 4 * 100
        assert rank.calls[("MPI_Allreduce", 3)].bytes == 8  # one 64-bit word
        assert rank.calls[("MPI_Barrier", None)].bytes == 0
        assert rank.calls[("MPI_Finalize", None)].count == 1
        assert rank.host and rank.cpu is not None and rank.cpu >= 0


def test_wall_and_mpi_time_agree_with_the_application_within_ten_percent(mpi_dir, capfd):
    # About 1-2 s of compute and exchanges, so that the few ms of set-up and
    # report outside the application's own timing stay below 10%.
    run, app = profiled_demo(mpi_dir, 2, capfd, "-n", "300", "-w", "1000", "-h", "1048576", "-a", "10")
    assert run.returncode == 0 and app.valid
    for rank, mine in zip(run.profile.ranks, app.ranks, strict=True):
        assert mine.wall_s > 0.5
        assert rank.wall == pytest.approx(mine.wall_s, rel=0.10)
        # The calls the application times itself (its loop's exchanges and
        # the final allreduce) against its own communication time, and every
        # call's time plus the application's time outside MPI against the
        # wall time: both within 10% of the wall (the barrier before the loop
        # and the gathers after it are outside the application's clock).
        # 1 MiB halos make communication a good part of the run.
        assert mine.comm_s > 0.1 * mine.wall_s, mine
        timed = sum(stats.time for (call, _), stats in rank.calls.items()
                    if call in ("MPI_Sendrecv", "MPI_Alltoall", "MPI_Allreduce"))
        assert abs(timed - mine.comm_s) <= 0.10 * mine.wall_s, (timed, mine)
        assert abs(rank.time_in_mpi + mine.compute_s + mine.other_s - rank.wall) <= 0.10 * rank.wall, (rank, mine)


def test_an_application_that_dies_before_finalize_gives_a_profiler_error(mpi_dir):
    before = set(mpi_dir.glob("oddnode-profile-*"))
    with pytest.raises(ProfilerError, match=r"ended \(status [1-9]\d*\) before MPI_Finalize") as caught:
        run_profiled([*local_launcher(2), str(mpi_dir / "dying")], work_dir=mpi_dir, timeout=120)
    assert str(mpi_dir) in str(caught.value)
    assert set(mpi_dir.glob("oddnode-profile-*")) == before


def test_a_single_process_run_gets_the_library_in_its_environment(mpi_dir, capfd):
    # The demo refuses to run as one rank, but it calls MPI_Finalize: a profile of one rank.
    run = run_profiled([str(mpi_dir / "demo")], work_dir=mpi_dir, timeout=120)
    assert run.returncode == 3
    assert [r.rank for r in run.profile.ranks] == [0]
    assert {call for call, _ in run.profile.ranks[0].calls} == {"MPI_Init", "MPI_Finalize"}
    assert "LD_PRELOAD" not in os.environ or "mpi_profiler" not in os.environ["LD_PRELOAD"]
