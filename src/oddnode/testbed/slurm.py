"""A real Slurm on the testbed (``up(..., slurm=True)``): a controller on this
machine and a slurmd in every node, so that ``--transport slurm``, ``srun``,
``salloc`` and ``sbatch`` run against Slurm itself, not a stand-in.

- munged runs on this machine with the testbed's own key and socket
  (``STATE/slurm/munge/``).  Slurm's daemons and commands find it through
  ``AuthInfo=socket=...``: a Unix socket is a file, and the nodes see this
  machine's files.
- slurmctld runs on this machine as ``SlurmctldHost=<its hostname>(10.77.N.1)``,
  its address on the core bridge, on ports of its own (CONTROLLER_PORT,
  NODE_PORT), so that a Slurm this machine already runs is left alone.
- In every node its init starts ``slurmd -D -N NODE`` after sshd: the
  node's network, UTS, mount and PID namespaces, its own spool, PID and log
  files (``%n`` in slurm.conf).
- slurmd wants a cgroup hierarchy even with ``proctrack/linuxproc`` and
  ``task/none``.  A node's /sys is its network namespace's own sysfs,
  without this machine's cgroup mounts, so the machine's /sys/fs/cgroup is
  bound (recursively) at ``STATE/slurm/cgroup`` before the nodes start, and
  each node's init binds that over its own /sys/fs/cgroup.  cgroup.conf
  names the machine's hierarchy: ``cgroup/v1`` on v1 and hybrid machines
  (there a cgroup2 mount inside a node fails: "Hybrid mode is not
  supported"), ``cgroup/v2`` on unified ones.
- Everything is recorded in ``state["slurm"]``; `down` ends slurmctld and
  munged by their records and undoes the bind; each slurmd ends with its
  node's PID namespace.

With ``SLURM_CONF=STATE/slurm/slurm.conf`` in the environment (``testbed
status`` prints it), Slurm's commands on this machine talk to the testbed's
cluster: ``sinfo``, ``salloc -N4``, ``srun -N2 hostname``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oddnode.testbed import config
from oddnode.testbed._system import NODE_ENV, TestbedError, alive, kill, record_of, run, spawn, tail, wait_gone

SLURM_DIR = "slurm"
CONF_FILE = "slurm.conf"
# Ports of testbed 0's controller and nodes: not Slurm's defaults (6817,
# 6818), which a Slurm of this machine's own may hold.  Testbed N's are
# these plus 2N (see ports), so that testbeds side by side each have a Slurm.
CONTROLLER_PORT = 26817
NODE_PORT = 26818
CLUSTER_NAME = "oddnode-testbed"
PARTITION = "testbed"
# Memory a node offers jobs (MB): a little, as every node shares this machine's.
NODE_MEMORY_MB = 512
# How long `up` waits for the controller, then for every node to be idle.
CONTROLLER_WAIT_S = 30.0
NODES_WAIT_S = 60.0
STOP_WAIT_S = 10.0

# Tool -> the Debian package that has it.
TOOLS = {
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "srun": "slurm-client",
    "scontrol": "slurm-client",
    "sinfo": "slurm-client",
}


def require_tools() -> None:
    missing = sorted({package for tool, package in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        raise TestbedError(f"the testbed's Slurm needs {', '.join(missing)}: apt-get install slurm-wlm munge")


def slurm_dir(state_dir: Path) -> Path:
    return Path(state_dir) / SLURM_DIR


def conf_path(state_dir: Path) -> Path:
    return slurm_dir(state_dir) / CONF_FILE


def environment(state_dir: Path) -> dict[str, str]:
    """What Slurm's commands need in their environment to reach the testbed's cluster."""
    return {"SLURM_CONF": str(conf_path(state_dir))}


def cgroup_version(mountinfo: Path = Path("/proc/self/mountinfo")) -> int:
    """2 when /sys/fs/cgroup is the unified hierarchy itself, else 1 (v1 or hybrid)."""
    for line in mountinfo.read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields = before.split()
        if len(fields) > 4 and fields[4] == "/sys/fs/cgroup":
            return 2 if after.split()[:1] == ["cgroup2"] else 1
    return 1


def ports(names: config.Names) -> tuple[int, int]:
    """The controller's and the nodes' ports of testbed `names`."""
    return CONTROLLER_PORT + 2 * names.number, NODE_PORT + 2 * names.number


def slurm_conf_text(*, controller: str, nodes: Mapping[str, str], cpus: int, directory: Path,
                    munge_socket: Path, names: config.Names = config.Names()) -> str:
    """slurm.conf of the testbed `names`: one controller on this machine,
    one partition of every node, plugins that work inside namespaces."""
    controller_port, node_port = ports(names)
    node_lines = "\n".join(f"NodeName={node} NodeAddr={address} CPUs={cpus} RealMemory={NODE_MEMORY_MB} "
                           "State=UNKNOWN" for node, address in nodes.items())
    return f"""\
# The oddnode testbed's Slurm, written by `oddnode testbed up --slurm`; removed by `down`.
ClusterName={CLUSTER_NAME}
SlurmctldHost={controller}({names.host_address})
SlurmctldPort={controller_port}
SlurmdPort={node_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={directory / "ctld"}
SlurmctldPidFile={directory / "slurmctld.pid"}
SlurmctldLogFile={directory / "slurmctld.log"}
SlurmdSpoolDir={directory / "nodes" / "%n" / "spool"}
SlurmdPidFile={directory / "nodes" / "%n" / "slurmd.pid"}
SlurmdLogFile={directory / "nodes" / "%n" / "slurmd.log"}
# The nodes share this machine's /tmp: every node's steps keep their
# temporary files (MPI's PMIx directories, spmix_appdir_UID_JOB.STEP) apart.
TmpFS={directory / "nodes" / "%n" / "tmp"}
SlurmctldDebug=info
SlurmdDebug=info
# Inside network, UTS, mount and PID namespaces: processes tracked by their
# parentage, tasks neither bound nor confined, nothing accounted.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
# A node that comes back after not answering is returned to service.
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
{node_lines}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def cgroup_conf_text(version: int) -> str:
    return f"""\
# The oddnode testbed's cgroup.conf: the machine's own hierarchy, bound into every node.
CgroupPlugin=cgroup/v{version}
CgroupMountpoint=/sys/fs/cgroup
IgnoreSystemd=yes
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
"""


def prepare(state_dir: Path, state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Write slurm.conf, cgroup.conf and the munge key; record the plan in
    ``state["slurm"]``; return each node's part of its init configuration."""
    require_tools()
    directory = slurm_dir(state_dir)
    munge_dir = directory / "munge"
    for path in (directory, munge_dir, directory / "ctld", directory / "cgroup"):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    for node in nodes:
        for part in ("spool", "tmp"):
            (directory / "nodes" / node / part).mkdir(parents=True, exist_ok=True)
    key = munge_dir / "munge.key"
    # 1024 random bytes, as mungekey writes by default; readable by root alone.
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400), "wb") as out:
        out.write(os.urandom(1024))
    socket_path = munge_dir / "munge.socket"
    controller = socket.gethostname().split(".")[0]
    conf_path(state_dir).write_text(slurm_conf_text(
        controller=controller, nodes={node: entry["address"] for node, entry in nodes.items()},
        cpus=os.cpu_count() or 1, directory=directory, munge_socket=socket_path, names=config.names_of(state)))
    (directory / "cgroup.conf").write_text(cgroup_conf_text(cgroup_version()))
    state["slurm"] = {"dir": str(directory), "controller": controller, "munge_socket": str(socket_path),
                      "cgroup_bind": None, "munged": None, "slurmctld": None}
    return {node: {"conf": str(conf_path(state_dir)), "cgroup": str(directory / "cgroup"),
                   "slurmd_argv": ["slurmd", "-D", "-N", node, "-f", str(conf_path(state_dir))]}
            for node in nodes}


def start_controller(state_dir: Path, state: dict[str, Any], save) -> None:
    """Bind the machine's cgroups for the nodes, then start munged and
    slurmctld, each recorded (``save()`` writes the state) before it is
    waited for."""
    slurm = state["slurm"]
    directory = Path(slurm["dir"])
    bind = directory / "cgroup"
    slurm["cgroup_bind"] = str(bind)
    save()
    run(["mount", "--rbind", "/sys/fs/cgroup", str(bind)])
    run(["mount", "--make-rslave", str(bind)])
    munge_dir = directory / "munge"
    argv = ["munged", "--foreground", "--force", f"--socket={slurm['munge_socket']}",
            f"--key-file={munge_dir / 'munge.key'}", f"--pid-file={munge_dir / 'munged.pid'}",
            f"--log-file={munge_dir / 'munged.log'}", f"--seed-file={munge_dir / 'munged.seed'}"]
    slurm["munged"] = _start(argv, munge_dir / "munged.out", "munged")
    save()
    _wait(lambda: Path(slurm["munge_socket"]).exists(), CONTROLLER_WAIT_S, "munged",
          slurm["munged"], munge_dir / "munged.log")
    argv = ["slurmctld", "-D", "-i", "-f", str(conf_path(state_dir))]
    slurm["slurmctld"] = _start(argv, directory / "slurmctld.out", "slurmctld")
    save()
    _wait(lambda: _answers(state_dir), CONTROLLER_WAIT_S, "slurmctld", slurm["slurmctld"],
          directory / "slurmctld.log")


def _start(argv: list[str], log_path: Path, name: str) -> dict[str, int]:
    with open(log_path, "ab") as log:
        child = spawn(argv, log, NODE_ENV, None)
    rec = record_of(child.pid)
    if rec is None:
        raise TestbedError(f"{name} did not start: {tail(log_path)}")
    return rec


def _wait(ready, timeout: float, name: str, rec: dict[str, int], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if not alive(rec):
            raise TestbedError(f"{name} stopped while starting: {tail(log)}")
        if time.monotonic() >= deadline:
            raise TestbedError(f"{name} did not answer within {timeout:g} s: {tail(log)}")
        time.sleep(0.2)


def scontrol(state_dir: Path, *args: str, timeout: float = 15.0) -> subprocess.CompletedProcess:
    """``scontrol ARGS`` against the testbed's controller."""
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=timeout,
                          env={**NODE_ENV, **environment(state_dir)})


HEALTH_CHECK_KEYS = ("HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState")


def enable_health_check(state_dir: Path, program: Path | None, interval: int = 60) -> None:
    """Have every slurmd run ``program`` every ``interval`` seconds, as a
    site's slurm.conf does (None: no health check), and make the daemons
    read it (``scontrol reconfigure``)."""
    path = conf_path(state_dir)
    lines = [line for line in path.read_text().splitlines() if not line.startswith(HEALTH_CHECK_KEYS)]
    if program is not None:
        lines += [f"HealthCheckProgram={program}", f"HealthCheckInterval={interval}", "HealthCheckNodeState=ANY"]
    path.write_text("\n".join(lines) + "\n")
    done = scontrol(state_dir, "reconfigure", timeout=60)
    if done.returncode != 0:
        raise TestbedError(f"scontrol reconfigure: {done.stderr.strip() or done.stdout.strip()}")


def _answers(state_dir: Path) -> bool:
    try:
        return scontrol(state_dir, "ping").returncode == 0
    except subprocess.TimeoutExpired:
        return False


def node_states(state_dir: Path) -> dict[str, str]:
    """Every node's state as Slurm has it (``idle``, ``down*``, ``drained``...)."""
    done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=15,
                          env={**NODE_ENV, **environment(state_dir)})
    states = {}
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) == 2:
            states[fields[0]] = fields[1]
    return states


def wait_for_nodes(state_dir: Path, nodes: list[str]) -> None:
    """Until Slurm has every node idle (its slurmd registered)."""
    deadline = time.monotonic() + NODES_WAIT_S
    while True:
        states = node_states(state_dir)
        waiting = sorted(node for node in nodes if states.get(node) != "idle")
        if not waiting:
            return
        if time.monotonic() >= deadline:
            said = ", ".join(f"{node} {states.get(node, 'unknown')}" for node in waiting)
            logs = slurm_dir(state_dir) / "nodes" / waiting[0] / "slurmd.log"
            raise TestbedError(f"Slurm nodes not idle after {NODES_WAIT_S:g} s ({said}); "
                               f"{waiting[0]}'s slurmd log: {tail(logs)}")
        time.sleep(0.5)


def stop(state: dict[str, Any]) -> list[str]:
    """End slurmctld and munged by their records and undo the cgroup bind;
    what could not be undone, said."""
    slurm = state.get("slurm")
    if not slurm:
        return []
    problems = []
    daemons = [slurm.get(name) for name in ("slurmctld", "munged") if slurm.get(name)]
    for rec in daemons:
        kill(rec, signal.SIGTERM)
    for rec in wait_gone(daemons, STOP_WAIT_S):
        kill(rec, signal.SIGKILL)
    left = wait_gone(daemons, 2.0)
    if left:
        problems.append(f"Slurm daemons {', '.join(str(rec['pid']) for rec in left)} do not end")
    bind = slurm.get("cgroup_bind")
    if bind and os.path.ismount(bind):
        run(["umount", "-R", bind], check=False)
        if os.path.ismount(bind):
            run(["umount", "-R", "-l", bind], check=False)
        if os.path.ismount(bind):
            problems.append(f"{bind} could not be unmounted")
    if not problems:
        slurm.update(munged=None, slurmctld=None, cgroup_bind=None)
    return problems
