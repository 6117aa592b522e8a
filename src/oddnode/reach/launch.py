"""How MPI ranks start, in one place: the launch lines of our MPI kernels
(Open MPI's ``mpirun``, and srun's under Slurm, below), the names of the
launchers we recognise in a user's command and how each passes environment
variables to the ranks (the sweep's and the profiler's).

Open MPI (4.1, ob1 over the TCP BTL) never blocks while it waits for a
message: a rank polls ``opal_progress`` in a loop.  On a real cluster, one
rank per node, that polling is what gives the lowest latency, so nothing is
added there.  Where a node's CPU time is capped (the testbed's CFS quota,
1.25 ms per 10 ms period with 8 nodes on 2 CPUs) a polling rank spends its
quota at the start of each period and is then stopped for the rest of it:
one round trip per period, a 0 B latency of 5 ms at best and 12-16 ms as a
median, and 1 MiB at 9-10 of the 12.5 MB/s that 100 Mbit/s links carry.
Measured on the testbed (docs/testbed.md#mpi-on-the-testbed), only
``mpi_yield_when_idle`` changed that; ``btl_tcp_progress_thread``, ``btl
tcp,self``, ``btl ^vader``, ``pml ob1``, ``btl_tcp_if_include`` /
``oob_tcp_if_include eth0`` and ``--bind-to none`` did not.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from oddnode.reach.base import TransportError


def mpirun_options(rsh_agent: str | None = None, yield_when_idle: bool = False) -> list[str]:
    """The options, beyond the ranks and hosts, for one mpirun launch.

    ``yield_when_idle`` (for nodes whose CPUs are capped or shared, such as
    the testbed's): ``--mca mpi_yield_when_idle 1``, a ``sched_yield()``
    in every idle turn of the progress loop.  Where other tasks want the
    CPU the rank gives it up in small slices instead of spending its quota
    in one block, so a message waits tens of microseconds for its receiver,
    not the rest of a quota period: on the testbed the median 0 B latency
    fell from 12-20 ms to 0.1-0.3 ms with several pairs at once (5 ms, the
    period's half, stays the floor of a lone pair on idle CPUs, but no longer
    13-16 ms), and 1 MiB rose to 11-12 MB/s at 100 Mbit/s (unshaped: 32 to
    230 MB/s).  It costs about 1 us in 5 where a rank has a CPU to itself
    (two ranks on this machine, no quota), so it is off by default: real
    clusters with one rank per node keep polling's latency.  (Open MPI turns
    it on by itself only when a node's slots are oversubscribed.)

    ``rsh_agent``: the command mpirun reaches the other nodes with
    (``--mca plm_rsh_agent``, e.g. ``ssh -F FILE`` for a cluster's own ssh
    configuration); by default its own (ssh).  Always last, so that the
    command's tail names how the nodes are reached."""
    options: list[str] = []
    if yield_when_idle:
        options += ["--mca", "mpi_yield_when_idle", "1"]
    if rsh_agent:
        options += ["--mca", "plm_rsh_agent", rsh_agent]
    return options


# Open MPI refuses to run as root unless its launcher's environment allows
# it; for other users these change nothing.
OPEN_MPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _check_launch_host(host: str) -> None:
    # A leading dash would read as an option, a comma splits the host list,
    # and blanks are never a host name.
    if not host or host.startswith("-") or "," in host or any(c.isspace() for c in host):
        raise ValueError(f"host {host!r} cannot go into an MPI launcher's host list")


def mpirun_line(ranks: int, hosts: Sequence[str] | None = None, *, slots: int | None = None,
                map_by: str | None = None, bind_to: str | None = None, rsh_agent: str | None = None,
                yield_when_idle: bool = False) -> list[str]:
    """Open MPI's mpirun for ``ranks`` ranks, the launch line our MPI kernels
    run after: ``-np``, ``--bind-to``, ``--host`` (each of ``hosts`` with
    ``:slots`` when given; none: mpirun takes them from its allocation or
    default hostfile), ``--map-by``, then mpirun_options."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"mpirun starts one or more ranks, not {ranks!r}")
    line = [MPIRUN, "-np", str(ranks)]
    if bind_to is not None:
        line += ["--bind-to", bind_to]
    if hosts is not None:
        for host in hosts:
            _check_launch_host(host)
        line += ["--host", ",".join(host if slots is None else f"{host}:{slots}" for host in hosts)]
    if map_by is not None:
        line += ["--map-by", map_by]
    return line + mpirun_options(rsh_agent, yield_when_idle)


# --- srun as the launcher of our MPI kernels ------------------------------------------
#
# Inside a Slurm allocation the ranks may be started by srun itself, one task
# per node, instead of by mpirun's daemons: Slurm's MPI plugin (PMIx or PMI2)
# then hands every rank its place in the job.  It needs a plugin that both
# Slurm and Open MPI have: Debian's Slurm 22.05 has pmix (pmix_v4) and pmi2,
# its Open MPI 4.1 a PMIx client (ext3x) and no PMI2 one, so there srun
# launches with --mpi=pmix.

AUTO, MPIRUN, SRUN = "auto", "mpirun", "srun"
LAUNCHERS = (AUTO, MPIRUN, SRUN)

# Open MPI 4's components of its "pmix" framework that speak PMIx to the
# launcher (its own copy, or an external libpmix) and the one that speaks
# Slurm's PMI2 (built with --with-pmi).
OMPI_PMIX_CLIENTS = ("pmix3x", "pmix2x", "ext4x", "ext3x", "ext2x", "ext1x")
OMPI_PMI2_CLIENT = "s2"

# The command a node answers with: what srun offers, then what Open MPI was
# built with (between them a line of our own).
PROBE_SEPARATOR = "oddnode-ompi-info"
PROBE_ARGV = ["sh", "-c", f"srun --mpi=list 2>&1; echo {PROBE_SEPARATOR}; ompi_info 2>&1"]

_OMPI_COMPONENT = re.compile(r"MCA pmix: (\w+)|^mca:pmix:(\w+):", re.MULTILINE)
_PMIX_VERSION = re.compile(r"^pmix_v(\d+)$")


def check_launcher(name: str) -> str:
    """``name`` if it is a launcher's (auto, mpirun, srun); ValueError naming them otherwise."""
    if name not in LAUNCHERS:
        raise ValueError(f"unknown MPI launcher {name!r}: one of {', '.join(LAUNCHERS)}")
    return name


def srun_mpi_types(text: str) -> set[str]:
    """The MPI plugin types ``srun --mpi=list`` names (pmix, pmi2,
    pmix_v4, …), from its output of Slurm 20 to 23: a header line, one
    type a line (with or without an ``srun:`` prefix), and the specific
    PMIx versions on a line of their own, comma-separated."""
    types: set[str] = set()
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("srun:"):
            line = line[len("srun:"):].strip()
        name, colon, versions = line.partition(":")
        if colon and "pmix" in name:  # specific pmix plugin versions available: pmix_v3,pmix_v4
            types.update(v.strip() for v in versions.split(",") if _PMIX_VERSION.match(v.strip()))
        elif re.fullmatch(r"[a-z][a-z0-9_]*", line) and line not in ("none",):
            types.add(line)
    return types


def ompi_pmix_components(text: str) -> set[str]:
    """The components of Open MPI's pmix framework that ``ompi_info`` (plain
    or ``--parsable``) lists: ext3x, s2, flux, …"""
    return {a or b for a, b in _OMPI_COMPONENT.findall(text)}


def srun_mpi_plugin(srun_list: str, ompi_info: str) -> str | None:
    """The ``--mpi`` plugin srun should start Open MPI's ranks with: pmix
    (or the newest pmix_vN when srun names no plain pmix) when Open MPI
    has a PMIx client, else pmi2 when it has Slurm's PMI2 client; None
    when they share no plugin."""
    offered = srun_mpi_types(srun_list)
    components = ompi_pmix_components(ompi_info)
    if components & set(OMPI_PMIX_CLIENTS):
        if "pmix" in offered:
            return "pmix"
        versions = sorted((int(m[1]) for v in offered if (m := _PMIX_VERSION.match(v))), reverse=True)
        if versions:
            return f"pmix_v{versions[0]}"
    if OMPI_PMI2_CLIENT in components and "pmi2" in offered:
        return "pmi2"
    return None


def split_probe(text: str) -> tuple[str, str]:
    """PROBE_ARGV's output as (srun --mpi=list's, ompi_info's)."""
    srun_part, _, ompi_part = text.partition(PROBE_SEPARATOR)
    return srun_part, ompi_part


def why_no_plugin(srun_list: str, ompi_info: str) -> str:
    """Why srun cannot launch Open MPI's ranks here, in words."""
    offered = sorted(srun_mpi_types(srun_list)) or ["none (is srun here, and SLURM_CONF set?)"]
    clients = sorted(ompi_pmix_components(ompi_info) & {*OMPI_PMIX_CLIENTS, OMPI_PMI2_CLIENT})
    return (f"srun offers MPI plugins {', '.join(offered)}; Open MPI's PMI clients: "
            f"{', '.join(clients) or 'none (is ompi_info on the PATH?)'}; they share neither PMIx nor PMI2")


@dataclass(frozen=True)
class MpiLauncher:
    """How a set's ranks start: ``mpirun`` (its daemons, over ssh or
    Slurm) or ``srun`` with the Slurm MPI ``plugin`` both sides have."""

    name: str = MPIRUN
    plugin: str | None = None

    def __post_init__(self) -> None:
        if self.name not in (MPIRUN, SRUN):
            raise ValueError(f"a resolved MPI launcher is {MPIRUN} or {SRUN}, not {self.name!r}")
        if (self.name == SRUN) != (self.plugin is not None):
            raise ValueError("srun, and only srun, launches with an MPI plugin")

    @property
    def parameters(self) -> dict[str, str]:
        """What each stored result says of its launch."""
        return {"launcher": self.name, **({"mpi_plugin": self.plugin} if self.plugin else {})}


def resolve_launcher(choice: str, transport: str, probe: Callable[[], str]) -> MpiLauncher:
    """The launcher ``choice`` (auto, mpirun, srun) means under ``transport``:
    srun needs the slurm transport and a plugin that ``probe()``
    (PROBE_ARGV's output on a node) shows srun and Open MPI to share; auto
    takes srun where it may, else mpirun.  ValueError when srun is asked
    for under another transport; TransportError when this allocation's
    srun and Open MPI share no plugin."""
    check_launcher(choice)
    if choice == MPIRUN:
        return MpiLauncher(MPIRUN)
    if transport != "slurm":
        if choice == SRUN:
            raise ValueError(f"--launcher srun starts the ranks as a Slurm job step: it needs --transport slurm "
                             f"inside an allocation, not the {transport} transport")
        return MpiLauncher(MPIRUN)
    srun_list, ompi_info = split_probe(probe())
    plugin = srun_mpi_plugin(srun_list, ompi_info)
    if plugin is not None:
        return MpiLauncher(SRUN, plugin)
    if choice == SRUN:
        raise TransportError(f"--launcher srun: {why_no_plugin(srun_list, ompi_info)}; use --launcher mpirun")
    return MpiLauncher(MPIRUN)


def srun_line(nodes: Sequence[str], plugin: str, *, yield_when_idle: bool = False,
                  time_limit: int | None = None, srun: str = "srun") -> list[str]:
    """srun for one rank on each node, rank i on ``nodes[i]``: the launch
    line of our MPI kernels under Slurm.

    ``--distribution=arbitrary`` with the ordered ``--nodelist`` places the
    ranks in the nodes' order, not Slurm's (a shuffled set's neighbours stay
    its own).  ``--overlap``: the node runner that starts it is a step of
    the same allocation on the first node.  ``--kill-on-bad-exit=1``: a rank
    that dies ends its set's others, which would otherwise wait for it until
    the timeout.  ``yield_when_idle`` reaches the ranks as Open MPI's
    environment variable (no mpirun to take ``--mca``).  ``time_limit``
    (minutes): Slurm ends the step should the runner die before it."""
    names = list(nodes)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"srun launches one rank on each of distinct nodes, not {names}")
    for name in names:
        if not name or name.startswith("-") or "," in name or any(c.isspace() for c in name):
            raise ValueError(f"node name {name!r} cannot go into srun's --nodelist")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", plugin):
        raise ValueError(f"MPI plugin {plugin!r} is not a plugin name (pmix, pmix_v4, pmi2)")
    export = srun_export("ALL", {"OMPI_MCA_mpi_yield_when_idle": "1"} if yield_when_idle else {})
    line = [srun, f"--nodes={len(names)}", f"--ntasks={len(names)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(names)}", "--distribution=arbitrary", f"--mpi={plugin}", "--overlap",
            "--kill-on-bad-exit=1", export]
    if time_limit is not None:
        line.append(f"--time={time_limit}")
    return line


# --- a launcher's name, and how it passes variables to its ranks ----------------------

OPEN_MPI, HYDRA, SLURM, SINGLETON = "openmpi", "hydra", "slurm", "singleton"
# Seconds `LAUNCHER --version` may take.
VERSION_TIMEOUT = 10.0
# Launchers that only Open MPI has; mpirun and mpiexec are also MPICH's and
# Intel MPI's (their --version tells); mpiexec.hydra is only theirs.
OPEN_MPI_LAUNCHERS = ("orterun", "prterun")
SHARED_LAUNCHERS = ("mpirun", "mpiexec")
HYDRA_LAUNCHERS = ("mpiexec.hydra",)
SRUN_LAUNCHER = "srun"
# The launchers a sweep's job takes for Open MPI's without asking them
# (``--mpi-export``, off for another MPI's launcher).
ASSUMED_OPEN_MPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun")


class LauncherError(ValueError):
    """A launcher's MPI cannot be told, or cannot pass a variable: what and why."""


@functools.lru_cache(maxsize=32)
def _version_kind(program: str) -> str:
    """OPEN_MPI or HYDRA, from ``program --version``; LauncherError when neither."""
    try:
        completed = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT,
                                   env={**os.environ, **OPEN_MPI_ROOT_ENV})
    except (OSError, subprocess.SubprocessError) as problem:
        raise LauncherError(f"cannot tell which MPI the launcher {program} belongs to: "
                            f"{program} --version: {problem}") from None
    text = completed.stdout + completed.stderr
    if "Open MPI" in text or "OpenRTE" in text or "PRRTE" in text:
        return OPEN_MPI
    if "HYDRA" in text.upper() or "Intel(R) MPI" in text or "MPICH" in text:
        return HYDRA
    raise LauncherError(f"cannot tell which MPI the launcher {program} belongs to: {program} --version says "
                        f"{text.strip()[:200]!r}, neither Open MPI nor MPICH/Intel MPI (Hydra)")


def launcher_kind(program: str) -> str:
    """How ``program`` passes variables to the ranks: OPEN_MPI (``-x``),
    HYDRA (``-genv``), SLURM (srun ``--export``) or SINGLETON (the program is
    the application).  mpirun and mpiexec are asked their ``--version``."""
    name = os.path.basename(program)
    if name == SRUN_LAUNCHER:
        return SLURM
    if name in OPEN_MPI_LAUNCHERS:
        return OPEN_MPI
    if name in HYDRA_LAUNCHERS:
        return HYDRA
    if name in SHARED_LAUNCHERS:
        return _version_kind(shutil.which(program) or program)
    return SINGLETON


def is_assumed_open_mpi(program: str) -> bool:
    """Whether ``program`` is a launcher taken for Open MPI's without asking it."""
    return os.path.basename(program) in ASSUMED_OPEN_MPI_LAUNCHERS


def export_names(line: Sequence[str], names: Sequence[str]) -> list[str]:
    """An Open MPI launch line that exports every one of ``names`` from the
    launcher's environment to the ranks: ``-x NAME`` after its program."""
    exported = [word for name in names for word in ("-x", name)]
    return [line[0], *exported, *line[1:]]


def srun_export(base: str, env: Mapping[str, str]) -> str:
    """srun's ``--export=`` word: ``base`` (ALL, or the user's own list)
    and ``NAME=VALUE`` for each variable; LauncherError for a value with a
    comma, which srun would split."""
    bad = [value for value in env.values() if "," in value]
    if bad:
        raise LauncherError(f"srun --export cannot pass a value with a comma: {' or '.join(bad)}")
    return "--export=" + ",".join([base, *(f"{name}={value}" for name, value in env.items())])


def pass_environment(line: Sequence[str], env: Mapping[str, str], kind: str) -> list[str]:
    """``line`` (a launcher's argv, kind from launcher_kind) with ``env``
    passed to every rank its launcher's way: ``-x NAME=VALUE`` (Open MPI),
    ``-genv NAME VALUE`` (Hydra), srun's ``--export`` (joining the user's
    own), after the program; a SINGLETON's line unchanged (the variables
    belong in its own environment)."""
    line = list(line)
    if kind == OPEN_MPI:
        return [line[0], *(word for name, value in env.items() for word in ("-x", f"{name}={value}")), *line[1:]]
    if kind == HYDRA:
        return [line[0], *(word for name, value in env.items() for word in ("-genv", name, value)), *line[1:]]
    if kind == SLURM:
        for index, word in enumerate(line[1:], start=1):
            if word.startswith("--export="):  # the user's own: ours joins it
                return [*line[:index], srun_export(word[len("--export="):], env), *line[index + 1:]]
        return [line[0], srun_export("ALL", env), *line[1:]]
    return line


# srun's word for a task that failed on a node: "srun: error: cn-a17: task 3: Exited with exit code 1".
_SRUN_TASK_ERROR = re.compile(r"^srun: error: (\S+): tasks? ([\d,\-]+): (.+)$")


def srun_node_reasons(stderr: str, members: Sequence[str]) -> dict[str, str]:
    """Member -> what srun said of its task, from srun's standard error:
    the first word about each member's task (exit status, signal, launch
    failure)."""
    reasons: dict[str, str] = {}
    for raw in stderr.splitlines():
        found = _SRUN_TASK_ERROR.match(raw.strip())
        if found and found[1] in members and found[1] not in reasons:
            reasons[found[1]] = f"failed: srun: task {found[2]}: {found[3].strip()}"
    return reasons
