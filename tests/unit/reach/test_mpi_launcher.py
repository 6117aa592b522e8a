"""srun as the launcher of our MPI kernels: which Slurm MPI plugin srun and
Open MPI share (from their genuine listings), the launch line, what srun
says of a failed rank, and set runs through a scripted Slurm that stores
how their ranks started."""

from __future__ import annotations

import json

import pytest

from oddnode.reach.launch import (
    PROBE_ARGV,
    PROBE_SEPARATOR,
    MpiLauncher,
    check_launcher,
    ompi_pmix_components,
    resolve_launcher,
    srun_line as srun_launcher,
    srun_mpi_plugin,
    srun_mpi_types,
    srun_node_reasons,
    why_no_plugin,
)
from oddnode.measure.set.jobs import srun_launch_reasons
from oddnode.measure.set.runner import SetsOptions, run_sets
from oddnode.store import open_store
from oddnode.reach.base import NodeResult, NodeStatus, Target, TransportError

from support.outputs import runner_report
from support.clusters.sets import SIZES, SetCluster, job_spec, set_output

# `srun --mpi=list` of Debian's Slurm 22.05 (slurm-wlm 22.05.8), as printed.
SRUN_22_05 = """\
MPI plugin types are...
\tpmix
\tnone
\tcray_shasta
\tpmi2
specific pmix plugin versions available: pmix_v4
"""
# Slurm 20.11's form: every line prefixed, the PMIx versions among the types.
SRUN_20_11 = """\
srun: MPI types are...
srun: cray_shasta
srun: pmix_v3
srun: none
srun: pmi2
"""
# `ompi_info` of Debian's Open MPI 4.1.4: its pmix framework's components.
OMPI_DEBIAN = """\
                 Package: Debian OpenMPI
                Open MPI: 4.1.4
                MCA pmix: ext3x (MCA v2.1.0, API v2.0.0, Component v4.1.4)
                MCA pmix: isolated (MCA v2.1.0, API v2.0.0, Component v4.1.4)
                MCA pmix: flux (MCA v2.1.0, API v2.0.0, Component v4.1.4)
                 MCA ess: pmi (MCA v2.1.0, API v3.0.0, Component v4.1.4)
"""
# An Open MPI built --with-pmi against Slurm's libpmi2 and no PMIx (--parsable).
OMPI_PMI2_ONLY = 'mca:pmix:s2:version:"mca:2.1.0"\nmca:pmix:s1:version:"mca:2.1.0"\nmca:pmix:isolated:version:"x"\n'

SITE = ["cn-a17", "gpu003", "cn-a02", "gpu010"]


def probe_output(srun_list: str = SRUN_22_05, ompi_info: str = OMPI_DEBIAN) -> str:
    return f"{srun_list}{PROBE_SEPARATOR}\n{ompi_info}"


def test_the_plugin_is_the_one_srun_and_open_mpi_share():
    assert srun_mpi_types(SRUN_22_05) == {"pmix", "cray_shasta", "pmi2", "pmix_v4"}
    assert ompi_pmix_components(OMPI_DEBIAN) == {"ext3x", "isolated", "flux"}
    assert srun_mpi_plugin(SRUN_22_05, OMPI_DEBIAN) == "pmix"
    # No plain pmix: the newest version srun names.
    assert srun_mpi_plugin(SRUN_20_11, OMPI_DEBIAN) == "pmix_v3"
    assert srun_mpi_plugin(SRUN_22_05, OMPI_PMI2_ONLY) == "pmi2"
    # Debian's Open MPI has no PMI2 client: Slurm's pmi2 alone is no use to it.
    only_pmi2 = "MPI plugin types are...\n\tnone\n\tpmi2\n"
    assert srun_mpi_plugin(only_pmi2, OMPI_DEBIAN) is None
    assert "srun offers MPI plugins pmi2; Open MPI's PMI clients: ext3x" in why_no_plugin(only_pmi2, OMPI_DEBIAN)
    # srun not found, nor ompi_info: nothing shared, and said so.
    missing = "sh: 1: srun: not found\n"
    assert srun_mpi_plugin(missing, "sh: 1: ompi_info: not found\n") is None
    assert "none (is ompi_info on the PATH?)" in why_no_plugin(missing, "")


def test_the_launch_line_places_one_rank_a_node_in_the_sets_order():
    assert srun_launcher(SITE, "pmix", time_limit=7) == [
        "srun", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1", "--nodelist=cn-a17,gpu003,cn-a02,gpu010",
        "--distribution=arbitrary", "--mpi=pmix", "--overlap", "--kill-on-bad-exit=1", "--export=ALL", "--time=7"]
    # Yielding idle ranks reach them as Open MPI's variable: no mpirun to take --mca.
    line = srun_launcher(SITE[:2], "pmix_v4", yield_when_idle=True)
    assert "--export=ALL,OMPI_MCA_mpi_yield_when_idle=1" in line and "--mpi=pmix_v4" in line
    assert not any(word.startswith("--time") for word in line)


@pytest.mark.parametrize(("nodes", "plugin", "problem"), [
    (["cn-a17", "cn-a17"], "pmix", "distinct"),
    ([], "pmix", "distinct"),
    (["cn-a17", "-w"], "pmix", "cannot go into"),
    (["cn-a17", "a,b"], "pmix", "cannot go into"),
    (["cn-a17"], "pmix --x", "not a plugin name"),
])
def test_the_launch_line_refuses_what_srun_would_misread(nodes, plugin, problem):
    with pytest.raises(ValueError, match=problem):
        srun_launcher(nodes, plugin)


def test_auto_takes_srun_only_under_slurm_where_a_plugin_is_shared():
    def never() -> str:
        raise AssertionError("probed where no probe was needed")

    assert resolve_launcher("mpirun", "slurm", never) == MpiLauncher("mpirun")
    assert resolve_launcher("auto", "ssh", never) == MpiLauncher("mpirun")
    assert resolve_launcher("auto", "slurm", probe_output) == MpiLauncher("srun", "pmix")
    assert resolve_launcher("srun", "slurm", probe_output).parameters == {"launcher": "srun", "mpi_plugin": "pmix"}
    nothing = lambda: probe_output("MPI plugin types are...\n\tnone\n", OMPI_DEBIAN)  # noqa: E731
    assert resolve_launcher("auto", "slurm", nothing) == MpiLauncher("mpirun")
    with pytest.raises(TransportError, match="share neither PMIx nor PMI2; use --launcher mpirun"):
        resolve_launcher("srun", "slurm", nothing)
    with pytest.raises(ValueError, match="needs --transport slurm inside an allocation, not the ssh transport"):
        resolve_launcher("srun", "ssh", never)
    with pytest.raises(ValueError, match="unknown MPI launcher 'pbsdsh'"):
        check_launcher("pbsdsh")


def test_srun_names_the_node_of_each_failed_rank():
    # srun's own words after a rank died on gpu003 and the others were killed.
    stderr = ("[gpu003:00050] OPAL ERROR: Unreachable in file ext3x_client.c at line 112\n"
              "srun: error: gpu003: task 1: Exited with exit code 1\n"
              "srun: error: task 3 launch failed: Unspecified error\n"
              "srun: error: cn-a17: task 0: Killed\n"
              "srun: error: cn-a17: task 0: Exited with exit code 137\n"
              "srun: error: cn-b99: task 5: Killed\n")
    assert srun_node_reasons(stderr, SITE) == {"gpu003": "failed: srun: task 1: Exited with exit code 1",
                                               "cn-a17": "failed: srun: task 0: Killed"}
    report = runner_report("", returncode=1, stderr=stderr)
    assert srun_launch_reasons(report, SITE) == srun_node_reasons(stderr, SITE)
    assert srun_launch_reasons("not json\n", SITE) == {} and srun_launch_reasons("", SITE) == {}


class SlurmSetCluster(SetCluster):
    """SetCluster under the slurm transport: it answers the launcher probe
    with genuine listings and reads a set's members from srun's node list;
    a set with a ``dies`` member gets srun's report of that rank's exit."""

    name = "slurm"

    def __init__(self, probe: str = probe_output(), dies=(), **kwargs):
        super().__init__(**kwargs)
        self.probe, self.dies, self.probed = probe, set(dies), 0
        self.launch_lines: list[list[str]] = []

    def run(self, nodes, argv, *, timeout):
        if list(argv) == PROBE_ARGV:
            self.probed += 1
            return {n: NodeResult(n, NodeStatus.OK, self.probe, "", 0, 0.2) for n in nodes}
        return super().run(nodes, argv, timeout=timeout)

    def members(self, spec: dict) -> list[str]:
        line = spec["launcher"]
        assert line[0] == "srun", line
        self.launch_lines.append(line)
        return next(w for w in line if w.startswith("--nodelist=")).split("=", 1)[1].split(",")

    def run_each(self, commands, *, timeout):
        dying = {node: argv for node, argv in commands.items() if self.dies & set(self.members(job_spec(argv)))}
        results = super().run_each({n: a for n, a in commands.items() if n not in dying}, timeout=timeout)
        for node, argv in dying.items():
            members = self.members(job_spec(argv))
            stderr = "".join(f"srun: error: {m}: task {members.index(m)}: Exited with exit code 1\n"
                             for m in members if m in self.dies)
            results[node] = NodeResult(node, NodeStatus.OK, runner_report(set_output(members, 1.0)[:40],
                                                                          returncode=1, stderr=stderr), "", 0, 1.0)
        return results


SLURM_SITE = [f"cn-a{i:02d}" for i in range(1, 9)]


def test_sets_under_slurm_keep_mpirun_unless_asked():
    cluster = SlurmSetCluster()
    SetsOptions(sizes=SIZES, seconds_per_size=0.05).job(Target(SLURM_SITE, cluster), 4)
    assert cluster.probed == 0  # mpirun by default: nothing to ask the nodes


def test_sets_under_slurm_start_their_ranks_with_srun_and_store_so(tmp_path):
    cluster = SlurmSetCluster()
    target = Target(SLURM_SITE, cluster)
    job = SetsOptions(sizes=SIZES, seconds_per_size=0.05, mpi_yield=True, launcher="auto").job(target, 4)
    assert cluster.probed == 1
    with open_store(tmp_path / "sets.duckdb") as store:
        summary = run_sets(store, target, job, "sorted", 2, size=4)
        assert summary.count("ok") == 4
        rows = store.con.execute("SELECT DISTINCT parameters FROM results WHERE benchmark LIKE 'sets.%'").fetchall()
    assert rows and all(json.loads(p)["launcher"] == "srun" and json.loads(p)["mpi_plugin"] == "pmix"
                        for (p,) in rows)
    # The build runs on every node (srun starts each rank from the same path), the launch only on the first.
    assert cluster.prepared == [SLURM_SITE]
    line = cluster.launch_lines[-1]
    assert "--mpi=pmix" in line and "--export=ALL,OMPI_MCA_mpi_yield_when_idle=1" in line
    assert not any("mpirun" in word or "--mca" == word for word in line)


def test_a_set_whose_srun_rank_failed_names_that_member(tmp_path):
    cluster = SlurmSetCluster(dies={"cn-a06"})
    target = Target(SLURM_SITE, cluster)
    job = SetsOptions(sizes=SIZES, seconds_per_size=0.05, launcher="srun").job(target, 4)
    with open_store(tmp_path / "sets.duckdb") as store:
        summary = run_sets(store, target, job, "sorted", 1, size=4)
        assert summary.count("failed") == 1 and summary.count("ok") == 1
        (parameters,) = store.con.execute("""SELECT DISTINCT parameters FROM results
                                              WHERE benchmark = 'sets.sendrecv.sorted' AND NOT valid""").fetchone()
        status = store.con.execute("SELECT status, detail FROM node_status WHERE node = 'cn-a06'").fetchall()
    reasons = json.loads(parameters)["member_reasons"]
    assert reasons == {"cn-a06": "failed: srun: task 1: Exited with exit code 1"}
    assert status and all(s == "failed" and "cn-a[05-08]" in d for s, d in status)


def test_srun_asked_for_where_it_cannot_launch_is_refused_before_any_run():
    nothing = SlurmSetCluster(probe=probe_output("MPI plugin types are...\n\tnone\n"))
    with pytest.raises(TransportError, match="share neither"):
        SetsOptions(launcher="srun").job(Target(SLURM_SITE, nothing), 4)
    # auto falls back on mpirun there.
    job = SetsOptions(sizes=SIZES, seconds_per_size=0.05).job(Target(SLURM_SITE, nothing), 4)
    assert job.parameters == {"launcher": "mpirun"}
    assert job_spec(job.argv(SLURM_SITE[:2]))["launcher"][0] == "mpirun"
    with pytest.raises(ValueError, match="names its own launcher"):
        SetsOptions(command="mpirun -np {ranks} bt.B.x", parser="npb", launcher="srun")
    with pytest.raises(ValueError, match="unknown MPI launcher"):
        SetsOptions(launcher="mpiexec")


def test_an_srun_the_runner_starts_does_not_label_the_ranks_output(monkeypatch):
    # The transport's `srun --label` hands its task SLURM_LABELIO=1; a nested
    # srun would take it as its own and prefix the ranks' lines with "0: ".
    from oddnode.onnode import node_runner

    task = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "13", "SLURM_JOB_NODELIST": "cn-a[01-08]",
            "SLURM_STEP_ID": "2", "SLURM_LABELIO": "1", "SLURM_CONF": "/etc/slurm/slurm.conf"}
    monkeypatch.setattr(node_runner.os, "environ", task)
    env = node_runner.process_environment({})
    assert "SLURM_LABELIO" not in env and env["SLURM_JOB_ID"] == "13" and env["SLURM_CONF"] == task["SLURM_CONF"]
