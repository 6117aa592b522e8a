"""What runs on a set of nodes: our MPI collectives kernel, or an installed
MPI application (NPB, HPL through hpcc, a site's own) from a command
template.

A job is started on the set's first node and launches one rank on every
member in the set's order (our kernel: with Open MPI's mpirun, or under
Slurm with srun itself, see reach/launch.py); that node's output is the
set's result.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from oddnode.measure.benchmarks import DETAIL_CHARS
from oddnode.measure.set import collectives
from oddnode.reach.jobs import last_json_object, parse_tool_output, tool_argv
from oddnode.reach.launch import (
    AUTO,
    OPEN_MPI_ROOT_ENV,
    PROBE_ARGV,
    SRUN,
    MpiLauncher,
    resolve_launcher,
    srun_line,
    srun_node_reasons,
)
from oddnode.core.model import DEFAULT_METRIC, Direction
from oddnode.parsers.base import ParsedOutput, ParseError, get_parser
from oddnode.reach.base import NodeStatus, Target, TransportError
from oddnode.reach.slurm import srun_time_limit
from oddnode.core.units import canonical_unit

# The benchmark our collectives kernel's job is stored under in run records
# (its measurements keep their own names: sendrecv, allreduce, …).
COLLECTIVES = "collectives"
# Seconds an application's run may take on a set, unless told.
DEFAULT_COMMAND_TIMEOUT = 600.0
# The words a command template may hold, each replaced per set.
TEMPLATE_FIELDS = ("hosts", "ranks", "first", "hostfile")
# The hostfile a template's {hostfile} names: written into the run's private
# directory on the first node, one member a line with one slot.
HOSTFILE = "hostfile"
# Seconds a node has to say which MPI plugins srun and Open MPI offer.
PROBE_SECONDS = 60.0
# Seconds an srun-launched set may run beyond the largest set's
# measurements before Slurm ends its step (the runner's own timeout comes
# first; this is for a runner that died).
SRUN_STEP_SLACK = 300.0


@dataclass(frozen=True)
class SetJob:
    """What runs on a set: ``argv(members)`` on the first member, launching
    every member's rank in the given order; ``parse`` reads that node's
    output; ``expected`` are the (benchmark, metric, unit, direction) rows
    a failed set is recorded under; ``build`` prepares the job on every
    node (None: nothing to build); ``run_seconds`` bounds one run of the
    largest set.  ``rank_argvs``, for a job with no launcher of its own
    (our TCP kernels): member -> the argv of its rank, every member started
    at once by the transport; the first member's output is still the set's.
    ``parameters`` go into every stored result (how the ranks started);
    ``launch_reasons(first's output, members)``: member -> what the
    launcher said of its rank, for a failed set.  ``rounds_argv(nodes,
    rounds)``, for a job that can (our collectives kernel under mpirun):
    one launch on the first of ``nodes`` with a rank on each, running every
    set of several rounds in turn (``rounds``: each round's sets, each its
    members), its output one section per set (plan_sections)."""

    name: str
    argv: Callable[[Sequence[str]], list[str]]
    parse: Callable[[str, str], ParsedOutput]
    expected: tuple[tuple[str, str, str, Direction], ...]
    run_seconds: float
    build: list[str] | None = None
    rank_argvs: Callable[[Sequence[str]], dict[str, list[str]]] | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    launch_reasons: Callable[[str, Sequence[str]], dict[str, str]] | None = None
    rounds_argv: Callable[[Sequence[str], Sequence[Sequence[Sequence[str]]]], list[str]] | None = None

    def commands(self, members: Sequence[str]) -> dict[str, list[str]]:
        """Node -> argv of one run on a set: its first member's, or every member's rank."""
        if self.rank_argvs is not None:
            return self.rank_argvs(members)
        return {members[0]: self.argv(members)}


def mpi_rsh_agent(target: Target) -> str | None:
    """The command mpirun reaches the other members with: ssh with the
    transport's own configuration file when it has one (the testbed's),
    else mpirun's default (ssh with the user's configuration)."""
    config = getattr(target.transport, "ssh_config", None)
    return f"ssh -F {shlex.quote(str(config))}" if config is not None else None


def mpi_launcher(target: Target, choice: str = AUTO) -> MpiLauncher:
    """The launcher ``choice`` (auto, mpirun, srun) means on this target:
    under the slurm transport its first node says which MPI plugins srun
    and Open MPI share (reach/launch.py resolve_launcher)."""

    def probe() -> str:
        first = target.nodes[0]
        try:
            result = target.transport.run([first], PROBE_ARGV, timeout=PROBE_SECONDS).get(first)
        except TransportError as error:
            raise TransportError(f"cannot ask {first} which MPI plugins srun offers: {error}") from None
        if result is None or result.status not in (NodeStatus.OK, NodeStatus.FAILED):
            why = result.stderr.strip() if result is not None else "no result"
            raise TransportError(f"cannot ask {first} which MPI plugins srun offers: {why}")
        return result.stdout

    return resolve_launcher(choice, target.transport.name, probe)


def srun_launch_reasons(report: str, members: Sequence[str]) -> dict[str, str]:
    """Member -> what srun said of its rank, from the node runner's report
    of a set's run (srun's messages are the run's standard error)."""
    stderr = (last_json_object(report) or {}).get("stderr")
    return srun_node_reasons(stderr, members) if isinstance(stderr, str) else {}


def collectives_job(target: Target, benchmarks: Sequence[str] = collectives.DEFAULT_BENCHMARKS,
                    sizes: Sequence[int] = collectives.DEFAULT_SIZES,
                    seconds_per_size: float = collectives.DEFAULT_SECONDS_PER_SIZE, *,
                    largest_set: int, rsh_agent: str | None = None, mpi_yield: bool = False,
                    launcher: MpiLauncher | None = None) -> SetJob:
    """Our collectives kernel on sets of at most ``largest_set`` of the
    target's nodes (``mpi_yield``: idle ranks yield their CPU, see
    reach/launch.py), its ranks started by ``launcher`` (default mpirun)."""
    launcher = launcher if launcher is not None else MpiLauncher()
    benchmarks = collectives.check_benchmarks(benchmarks)
    sizes = collectives.check_sizes(sizes)
    collectives.check_seconds_per_size(seconds_per_size)
    rsh_agent = rsh_agent if rsh_agent is not None else mpi_rsh_agent(target)
    expected = []
    for benchmark in benchmarks:
        for size in collectives.benchmark_sizes(benchmark, sizes):
            us, mbps = canonical_unit("us"), canonical_unit("MB/s")
            expected.append((benchmark, "time" if benchmark == "barrier" else f"time.{size}", us, Direction.LOWER))
            if benchmark != "barrier" and size > 0:
                expected.append((benchmark, f"bandwidth.{size}", mbps, Direction.HIGHER))

    seconds = collectives.run_seconds(benchmarks, sizes, seconds_per_size, ranks=largest_set)

    def argv(members: Sequence[str]) -> list[str]:
        if launcher.name == SRUN:
            assert launcher.plugin is not None
            line = srun_line(members, launcher.plugin, yield_when_idle=mpi_yield,
                             time_limit=srun_time_limit(seconds + SRUN_STEP_SLACK))
            return collectives.collectives_argv(members, benchmarks, sizes, seconds_per_size, launcher=line)
        return collectives.collectives_argv(members, benchmarks, sizes, seconds_per_size, rsh_agent=rsh_agent,
                                            yield_when_idle=mpi_yield)

    def rounds_argv(nodes: Sequence[str], rounds: Sequence[Sequence[Sequence[str]]]) -> list[str]:
        return collectives.collectives_argv(nodes, benchmarks, sizes, seconds_per_size, rsh_agent=rsh_agent,
                                            yield_when_idle=mpi_yield, rounds=rounds)

    # Every node builds the kernel: mpirun (or srun) starts each member's
    # rank from the same path, its own build's.
    nodes = target.nodes
    build = argv([nodes[0], nodes[-1]]) if len(nodes) >= 2 else None
    return SetJob(COLLECTIVES, argv, collectives.parse_collectives_run, tuple(expected), seconds, build,
                  parameters=launcher.parameters,
                  launch_reasons=srun_launch_reasons if launcher.name == SRUN else None,
                  rounds_argv=None if launcher.name == SRUN else rounds_argv)


def check_template(template: str) -> list[str]:
    """A command template's words; ValueError for an empty one, one that
    does not start with a program, or an unknown ``{field}``."""
    try:
        words = shlex.split(template)
    except ValueError as error:
        raise ValueError(f"command template {template!r}: {error}") from None
    if not words:
        raise ValueError("the command template is empty")
    if "{" in words[0]:
        raise ValueError(f"the command template must start with a program, not {words[0]!r}")
    for word in words:
        try:
            word.format(**dict.fromkeys(TEMPLATE_FIELDS, ""))
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"command template word {word!r}: unknown or malformed field {error} (fields: "
                             + ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS) + ")") from None
    return words


def template_argv(words: Sequence[str], members: Sequence[str]) -> list[str]:
    """The template's words for one set: {hosts} the members comma-separated,
    {ranks} their number, {first} the first, {hostfile} a hostfile of them."""
    fields = {"hosts": ",".join(members), "ranks": str(len(members)), "first": members[0], "hostfile": HOSTFILE}
    return [word.format(**fields) for word in words]


def read_input_files(specs: Sequence[str]) -> dict[str, str]:
    """``NAME=PATH`` pairs as the files a command's run directory gets: the
    text of PATH (read here, on the machine that runs oddnode) under NAME."""
    files = {}
    for spec in specs:
        name, equals, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if not (equals and name and path) or "/" in name or name in (".", ".."):
            raise ValueError(f"an input file is NAME=PATH with a plain file NAME (hpccinf.txt=./hpl/hpccinf.txt), "
                             f"not {spec!r}")
        if name == HOSTFILE:
            raise ValueError(f"{HOSTFILE!r} is the hostfile oddnode writes for {{hostfile}}: name the file otherwise")
        try:
            files[name] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"input file {name}: cannot read {path}: {error}") from None
    return files


def _application_parser(tool: str, parser: str, output: str | None) -> Callable[[str, str], ParsedOutput]:
    """The node runner's report of an application's run, its stdout (or the
    file ``output`` it wrote) read by the registered ``parser``: a failed
    verification is an invalid result (the parser's), a non-zero exit
    status too."""
    parse_output = get_parser(parser)

    def parse(text: str, source: str) -> ParsedOutput:
        report = parse_tool_output(source, text)
        said = (report.stderr.strip() or report.stdout.strip())[:DETAIL_CHARS]
        written = report.stdout if output is None else report.collected.get(output)
        if written is None or not written.strip():
            what = "printed nothing" if output is None else f"wrote no {output}"
            raise ParseError(source, None, f"{tool} exited with status {report.returncode} and {what}: "
                                           f"{said or 'no message'}")
        where = source if output is None else f"{source}:{output}"
        try:
            parsed = parse_output(written, where)
        except ParseError as problem:
            if report.returncode != 0:
                raise ParseError(source, None, f"{tool} exited with status {report.returncode}: "
                                               f"{said or problem.detail}") from None
            raise
        if report.returncode == 0:
            return parsed
        problems = [*parsed.problems, f"{tool} exited with status {report.returncode}: {said or 'no message'}"]
        return ParsedOutput(parsed.tool, [replace(m, valid=False) for m in parsed.measurements], False, problems,
                            parsed.configuration)

    return parse


def command_job(template: str, parser: str, *, name: str | None = None, timeout: float = DEFAULT_COMMAND_TIMEOUT,
                files: Sequence[str] = (), output: str | None = None) -> SetJob:
    """An installed application on every set from a command template
    (``mpirun -np {ranks} --host {hosts} bt.B.x``), its output read by one
    of oddnode's parsers (``npb``, ``hpcc``, ``imb``, …).  ``files``
    (``NAME=PATH``) go into the run's directory on the first node (hpcc's
    ``hpccinf.txt``); ``output`` names the file the application writes its
    results to (hpcc's ``hpccoutf.txt``) when not its standard output.  A
    set whose run gives nothing is recorded under ``name`` (default the
    parser's)."""
    words = check_template(template)
    get_parser(parser)  # an unknown parser is refused before any run
    if not 0 < timeout <= collectives.MAX_SECONDS_PER_SIZE:
        raise ValueError(f"the command timeout must be > 0 and <= {collectives.MAX_SECONDS_PER_SIZE:g} s, "
                         f"got {timeout!r}")
    inputs = read_input_files(files)
    if output is not None and ("/" in output or not output.strip() or output == HOSTFILE):
        raise ValueError(f"the output file is a plain file name in the run's directory, not {output!r}")
    name = name or parser

    def argv(members: Sequence[str]) -> list[str]:
        argv_words = template_argv(words, members)
        hostfile = "".join(f"{node} slots=1\n" for node in members)
        return tool_argv(argv_words[0], argv_words[1:], files={**inputs, HOSTFILE: hostfile},
                         collect=[output] if output else [], env=OPEN_MPI_ROOT_ENV, timeout=timeout)

    return SetJob(name, argv, _application_parser(words[0], parser, output),
                  ((name, DEFAULT_METRIC, "", Direction.HIGHER),), timeout)
