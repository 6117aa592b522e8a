"""The options our MPI kernels add to mpirun."""

from __future__ import annotations


from oddnode.reach.jobs import decode_job
from oddnode.measure.pair.mpi_pingpong import mpi_ping_argv, mpirun_launcher
from oddnode.reach.launch import mpirun_options


def test_a_real_cluster_gets_nothing_added_and_capped_nodes_yield():
    assert mpirun_options() == []
    assert mpirun_options(yield_when_idle=True) == ["--mca", "mpi_yield_when_idle", "1"]
    # The rsh agent stays last, with or without yielding.
    assert mpirun_options("ssh -F cfg", yield_when_idle=True) == [
        "--mca", "mpi_yield_when_idle", "1", "--mca", "plm_rsh_agent", "ssh -F cfg"]


def test_the_ping_pong_launcher_passes_them_on():
    launcher = mpirun_launcher("node01", "node02", "ssh -F cfg", yield_when_idle=True)
    assert launcher[:7] == ["mpirun", "-np", "2", "--host", "node01,node02", "--map-by", "node"]
    assert launcher[7:] == mpirun_options("ssh -F cfg", True)
    # The runner's job (its last argument) carries the launcher.
    argv = mpi_ping_argv("node01", "node02", [0], 0.1, yield_when_idle=True)
    assert decode_job(argv[-1])["launcher"][7:] == ["--mca", "mpi_yield_when_idle", "1"]
