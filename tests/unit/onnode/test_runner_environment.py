"""What the node runner gives the programs it starts when it is itself a
task of a Slurm job step (the slurm transport): the job as the
allocation's shell sees it, not the step, so that an MPI program is not
taken for a rank srun launched and mpirun finds every node of the job."""

from __future__ import annotations

from oddnode.onnode import node_runner

# A task of `srun -N1 -w cn-a17 --overlap ...` inside `salloc -N4`, as
# slurmstepd sets its environment (values as Slurm 22.05 writes them).
STEP_TASK = {
    "PATH": "/usr/bin:/bin", "HOME": "/root",
    "SLURM_JOB_ID": "13", "SLURM_JOBID": "13", "SLURM_JOB_NODELIST": "cn-a[17-20]", "SLURM_JOB_NUM_NODES": "4",
    "SLURM_JOB_CPUS_PER_NODE": "64(x4)", "SLURM_NODELIST": "cn-a17", "SLURM_NNODES": "1",
    "SLURM_TASKS_PER_NODE": "1", "SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_STEP_NODELIST": "cn-a17",
    "SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
    "SLURM_NTASKS": "1", "SLURM_NPROCS": "1", "SLURM_TASK_PID": "4242", "SLURM_SRUN_COMM_PORT": "41000",
    "SLURM_LAUNCH_NODE_IPADDR": "10.1.0.1", "SLURM_CPU_BIND": "quiet,none", "PMI_FD": "7", "PMIX_RANK": "0",
    "SLURM_CONF": "/etc/slurm/slurm.conf",
}


def test_a_step_s_task_starts_programs_that_see_the_job_not_the_step(monkeypatch):
    monkeypatch.setattr(node_runner.os, "environ", dict(STEP_TASK))
    env = node_runner.process_environment({"OMP_NUM_THREADS": 8})
    assert not [name for name in env if name.startswith(("SLURM_STEP", "PMI_", "PMIX_", "SLURM_SRUN_COMM_"))]
    for gone in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASK_PID",
                 "SLURM_CPU_BIND", "SLURM_LAUNCH_NODE_IPADDR"):
        assert gone not in env, gone
    # mpirun's allocation: every node of the job, the job's slots.
    assert (env["SLURM_NODELIST"], env["SLURM_NNODES"], env["SLURM_TASKS_PER_NODE"]) == ("cn-a[17-20]", "4", "64(x4)")
    assert env["SLURM_JOB_ID"] == "13" and env["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert env["OMP_NUM_THREADS"] == "8" and env["PATH"] == "/usr/bin:/bin"


def test_outside_a_step_the_environment_is_the_runner_s_own(monkeypatch):
    allocation_shell = {name: value for name, value in STEP_TASK.items()
                        if not name.startswith(("SLURM_STEP", "PMI", "SLURM_SRUN"))}
    allocation_shell["SLURM_NODELIST"] = "cn-a[17-20]"
    monkeypatch.setattr(node_runner.os, "environ", dict(allocation_shell, SLURM_NNODES="4"))
    env = node_runner.process_environment({})
    assert env["SLURM_NNODES"] == "4" and env["SLURM_TASKS_PER_NODE"] == "1"  # nothing rewritten
