"""The exact MPI launch lines every caller of ours produces: mpirun's for
the ping-pong, the collectives, the sync kernel, the demo application and
the NUMA ping-pong, srun's for a set under Slurm, and the ways the sweep
and the profiler pass environment variables through a launcher.  Nodes run
these lines; a change of one word changes what runs there."""

from __future__ import annotations

import pytest

from oddnode.measure import sweep
from oddnode.measure.node.numa import numa_mpi_argv
from oddnode.measure.pair.mpi_pingpong import mpi_ping_argv
from oddnode.measure.profile.demo_app import demo_app_argv
from oddnode.measure.profile.profiler import profiled_argv
from oddnode.measure.set.collectives import collectives_argv
from oddnode.measure.set.jobs import collectives_job
from oddnode.measure.set.mpi_sync import sync_argv
from oddnode.reach.base import Target
from oddnode.reach.jobs import decode_job, runner_argv, tool_argv
from oddnode.reach.launch import MpiLauncher

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
YIELD = ["--mca", "mpi_yield_when_idle", "1"]
AGENT = ["--mca", "plm_rsh_agent", "ssh -F c"]


def job_of(argv: list[str]) -> dict:
    return decode_job(argv[-1])


@pytest.mark.parametrize(("argv", "launcher"), [
    (lambda: mpi_ping_argv("a", "b"), ["mpirun", "-np", "2", "--host", "a,b", "--map-by", "node"]),
    (lambda: mpi_ping_argv("a", "b", rsh_agent="ssh -F c", yield_when_idle=True),
     ["mpirun", "-np", "2", "--host", "a,b", "--map-by", "node", *YIELD, *AGENT]),
    (lambda: collectives_argv(["a", "b", "c"]), ["mpirun", "-np", "3", "--host", "a,b,c", "--map-by", "node"]),
    (lambda: collectives_argv(["a", "b", "c"], rsh_agent="ssh -F c", yield_when_idle=True, hostfile=True),
     ["mpirun", "-np", "3", "--map-by", "node", *YIELD, *AGENT]),
    (lambda: sync_argv(["a", "b", "c"], yield_when_idle=True),
     ["mpirun", "-np", "3", "--host", "a,b,c", "--map-by", "node", *YIELD]),
    (lambda: demo_app_argv(["a", "b"], rsh_agent="ssh -F c"),
     ["mpirun", "-np", "2", "--host", "a,b", "--map-by", "node", *AGENT]),
    (lambda: numa_mpi_argv([0, 3]), ["mpirun", "-np", "2", "--bind-to", "none", "--host", "localhost:2"]),
])
def test_each_mpirun_caller_makes_its_line(argv, launcher):
    job = job_of(argv())
    assert job["launcher"] == launcher
    assert job["env"] == ROOT_ENV and job["compiler"] == "mpicc"


def test_the_demo_applications_environment_follows_open_mpis_own():
    assert list(job_of(demo_app_argv(["a", "b"], env={"X": "1"}))["env"].items()) == [*ROOT_ENV.items(), ("X", "1")]


class _Slurm:
    name = "slurm"


def test_a_sets_job_launches_with_mpirun_or_srun():
    target = Target(["a", "b", "c", "d"], _Slurm())
    by_mpirun = collectives_job(target, largest_set=4, rsh_agent="ssh", mpi_yield=True, launcher=MpiLauncher())
    assert job_of(by_mpirun.argv(["a", "c", "b"]))["launcher"] == [
        "mpirun", "-np", "3", "--host", "a,c,b", "--map-by", "node", *YIELD, "--mca", "plm_rsh_agent", "ssh"]
    by_srun = collectives_job(target, largest_set=4, mpi_yield=True, launcher=MpiLauncher("srun", "pmix"))
    assert job_of(by_srun.argv(["a", "c", "b"]))["launcher"] == [
        "srun", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--nodelist=a,c,b", "--distribution=arbitrary",
        "--mpi=pmix", "--overlap", "--kill-on-bad-exit=1", "--export=ALL,OMPI_MCA_mpi_yield_when_idle=1",
        "--time=13"]
    assert job_of(by_srun.build)["launcher"][:5] == [
        "srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=a,d"]


def test_the_sweep_exports_its_variables_through_open_mpis_launchers_only():
    runner = runner_argv("memory", ["-n", "1"], launcher=["mpirun", "-np", "2"])
    job = job_of(sweep.with_environment(runner, {"B": "2", "A": "1"}))
    assert job["launcher"] == ["mpirun", "-x", "A", "-x", "B", "-np", "2"]
    assert job_of(sweep.with_environment(runner, {"A": "1"}, mpi_export=False))["launcher"] == ["mpirun", "-np", "2"]
    tool = job_of(sweep.with_environment(tool_argv("/usr/bin/mpiexec", ["-n", "2", "x"]), {"A": "1"}))
    assert tool["tool"] == "/usr/bin/mpiexec" and tool["args"] == ["-x", "A", "-n", "2", "x"]
    assert job_of(sweep.with_environment(tool_argv("orterun", ["x"]), {"A": "1"}))["args"] == ["-x", "A", "x"]
    # Not one the sweep knows as Open MPI's: its job's argv stays as it was.
    assert job_of(sweep.with_environment(tool_argv("prterun", ["-n", "2", "x"]), {"A": "1"}))["args"] == [
        "-n", "2", "x"]
    assert job_of(sweep.with_environment(runner_argv("memory", [], launcher=["srun", "-N2"]),
                                         {"A": "1"}))["launcher"] == ["srun", "-N2"]


@pytest.mark.parametrize(("program", "argv", "env"), [
    ("orterun", ["orterun", "-x", "LD_PRELOAD=/c/l.so", "-x", "ODDNODE_PROFILE_OUTPUT=/w/p.txt", "-n", "2", "app"],
     ROOT_ENV),
    ("/usr/bin/prterun",
     ["/usr/bin/prterun", "-x", "LD_PRELOAD=/c/l.so", "-x", "ODDNODE_PROFILE_OUTPUT=/w/p.txt", "-n", "2", "app"],
     ROOT_ENV),
    ("mpiexec.hydra",
     ["mpiexec.hydra", "-genv", "LD_PRELOAD", "/c/l.so", "-genv", "ODDNODE_PROFILE_OUTPUT", "/w/p.txt", "-n", "2",
      "app"], {}),
    ("srun", ["srun", "--export=ALL,LD_PRELOAD=/c/l.so,ODDNODE_PROFILE_OUTPUT=/w/p.txt", "-n", "2", "app"], {}),
    ("./app", ["./app", "-n", "2", "app"], {"LD_PRELOAD": "/c/l.so", "ODDNODE_PROFILE_OUTPUT": "/w/p.txt"}),
])
def test_the_profiler_passes_its_variables_the_launchers_way(monkeypatch, program, argv, env):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    assert profiled_argv([program, "-n", "2", "app"], "/c/l.so", "/w/p.txt") == (argv, env)


def test_the_profiler_joins_the_users_own_srun_export(monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    assert profiled_argv(["srun", "-N", "2", "--export=NONE", "app"], "/c/l.so", "/w/p.txt") == (
        ["srun", "-N", "2", "--export=NONE,LD_PRELOAD=/c/l.so,ODDNODE_PROFILE_OUTPUT=/w/p.txt", "app"], {})


def test_the_builder_refuses_what_would_not_be_one_launch():
    from oddnode.reach.launch import mpirun_line

    for hosts in (["a,b"], ["-a"], ["a b"], [""]):
        with pytest.raises(ValueError, match="host list"):
            mpirun_line(2, hosts)
    with pytest.raises(ValueError, match="one or more ranks"):
        mpirun_line(0)


def test_srun_refuses_a_value_it_would_split():
    from oddnode.reach.launch import SLURM, LauncherError, pass_environment

    with pytest.raises(LauncherError, match="comma"):
        pass_environment(["srun", "app"], {"A": "x,y"}, SLURM)
