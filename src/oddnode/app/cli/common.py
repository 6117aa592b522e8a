"""What every command family shares: the consoles and how much they say,
one error handler, the options that pick the nodes and the store, and the
target and topology those options make."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import os
import sys
import typing
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, Iterator, Mapping, Optional, Protocol, Sequence

import typer
from rich.console import Console

from oddnode.core.connection import DEFAULT_CONNECT_TIMEOUT, DEFAULT_FANOUT, Connection
from oddnode.core.defaults import STORE_PATH
from oddnode.report import WIDE

if TYPE_CHECKING:
    from oddnode.report import documents

# -- output ------------------------------------------------------------------


def make_console(stderr: bool = False) -> Console:
    """A console fitted to the terminal; written to a file or a pipe, with
    no COLUMNS to say a width, lines are never wrapped, so that grep finds a
    whole finding on one line and tables keep every column."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or "COLUMNS" in os.environ:
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=WIDE, soft_wrap=True)


console = make_console()
err_console = make_console(stderr=True)


class Verbosity(IntEnum):
    """-q: the verdict, the problems and errors; -v: every note and where results are kept."""

    QUIET = 0
    NORMAL = 1
    VERBOSE = 2


@dataclass
class OutputSettings:
    verbosity: Verbosity = Verbosity.NORMAL


output = OutputSettings()


def quiet() -> bool:
    return output.verbosity is Verbosity.QUIET


QuietOption = Annotated[bool, typer.Option(
    "-q", "--quiet", help="Only the verdict, the problems and errors: no progress, run notes or statistics tables.")]
VerboseOption = Annotated[bool, typer.Option(
    "-v", "--verbose", help="Every run note and step detail too, and where the results are stored.")]


def set_verbosity(quiet: bool, verbose: bool) -> None:
    """-q or -v, given before the command or after it (both: an error)."""
    if quiet and verbose:
        raise fail("-q and -v ask for opposite things: give one")
    output.verbosity = Verbosity.QUIET if quiet else Verbosity.VERBOSE if verbose else Verbosity.NORMAL


def with_verbosity(command: Callable) -> Callable:
    """``command`` taking -q/-v after its name too (a script or clush line
    puts them there), as the command line takes them before it."""
    if getattr(command, "oddnode_verbosity", False):
        return command
    signature = inspect.signature(command, eval_str=True)
    hints = typing.get_type_hints(command, include_extras=True)
    added = {"oddnode_quiet": QuietOption, "oddnode_verbose": VerboseOption}

    @functools.wraps(command)
    def verbosity_given(*args, oddnode_quiet: bool = False, oddnode_verbose: bool = False, **options):
        if oddnode_quiet or oddnode_verbose:
            set_verbosity(oddnode_quiet or output.verbosity is Verbosity.QUIET,
                          oddnode_verbose or output.verbosity is Verbosity.VERBOSE)
        return command(*args, **options)

    verbosity_given.__signature__ = signature.replace(parameters=[
        *signature.parameters.values(),
        *(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=False)
          for name, annotation in added.items())])
    verbosity_given.__annotations__ = {**hints, **added}
    verbosity_given.oddnode_verbosity = True
    return verbosity_given


def verbose() -> bool:
    return output.verbosity is Verbosity.VERBOSE


def inform(*objects: Any, out: Console | None = None, **options: Any) -> None:
    """Print a run summary, a note or a table of statistics: not with -q."""
    if not quiet():
        (out or console).print(*objects, **options)


def detail(*objects: Any, out: Console | None = None, **options: Any) -> None:
    """Print what only -v shows: every step's details, where results are kept."""
    if verbose():
        (out or console).print(*objects, **options)


def progress_bars(*columns: Any, transient: bool = True):
    """Progress bars on stderr, where it is a terminal and not -q (elsewhere
    the heartbeat says how far a command is), so that stdout keeps the
    results and a --json document alone.  What is printed on stdout while
    the bars show goes above them when stdout is a terminal too; printed to
    a file or a pipe it goes there untouched."""
    from rich.progress import Progress

    return Progress(*columns, console=err_console, transient=transient,
                    disable=quiet() or not err_console.is_terminal,
                    redirect_stdout=console.is_terminal, redirect_stderr=True)


def progress_run(label: str, run: Callable[[Callable[[int, int], None]], Any]) -> Any:
    """Run ``run(on_progress)`` under a transient progress bar named
    ``label`` where stderr is a terminal, else with a progress line on
    stderr every 30 s (neither with -q)."""
    with progress_bars() as progress, heartbeat() as beat:
        task = progress.add_task(label, total=None)
        beat.update(label)

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)
            beat.update(done=done, total=total)

        return run(on_progress)


@contextmanager
def heartbeat():
    """A progress line on stderr every 30 s while the block runs, where
    stderr is a file or a pipe and not -q; else a heartbeat that says nothing."""
    from oddnode.app.cli.progress import Heartbeat

    if quiet() or err_console.is_terminal:
        yield Heartbeat(err_console)  # not started: its updates go nowhere
        return
    with Heartbeat(err_console) as beat:
        yield beat


def analysis_document(analysis) -> documents.Analysis:
    """An analysis as JSON data: its own document, and a section for each
    kind of result the store holds beyond the node series: the pair
    patterns, the set tables, the sync readings, the NUMA matrices, the
    noise per node, the process accounting's asymmetry tables, the affinity
    samples, each parameter sweep's analysis, each MPI profile and each
    placement model's predictions."""
    from oddnode.core.model import AFFINITY_DETAILS
    from oddnode.core.order import natural_key
    from oddnode.report.interconnect import pattern_tables
    from oddnode.report.interconnect_json import pattern_json
    from oddnode.report.numa import numa_json
    from oddnode.report.placement import stored_models_json
    from oddnode.report.sets import has_set_results, sets_json
    from oddnode.report.sync import sync_json
    from oddnode.readings.accounting import stored_tables
    from oddnode.report.noise import noise_json

    dataset = analysis.dataset
    document = analysis.to_json()
    if patterns := pattern_json(dataset, [table.benchmark for table in pattern_tables(dataset)]):
        document["pairs"] = patterns
    if has_set_results(dataset):
        document["sets"] = sets_json(dataset)
    sync = sync_json(dataset)
    if sync["nodes"] or sync["scaling"]:
        document["sync"] = sync
    numa = numa_json(dataset)
    if numa["measures"]:
        document["numa"] = numa
    noise = noise_json(dataset)
    if noise["nodes"]:
        document["noise"] = noise
    if tables := stored_tables(dataset.processes, dataset.topology):
        document["processes"] = {"tables": [table.to_json() for table in tables]}
    if samples := dataset.details.get(AFFINITY_DETAILS):
        document["affinity"] = {"nodes": {node: samples[node][-1] for node in sorted(samples, key=natural_key)}}
    if analysis.sweeps:
        from oddnode.report.sweep import sweep_document

        document["sweeps"] = [sweep_document(sweep) for sweep in analysis.sweeps]
    if analysis.profiles:
        from oddnode.report.profile import profile_json

        document["profiles"] = [profile_json(profile, profile_id) for profile_id, profile in analysis.profiles]
    if models := stored_models_json(dataset):
        document["models"] = models
    return document


def json_default(value):
    """numpy scalars as plain JSON numbers."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def finite_json(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by null: JSON has no
    such numbers, and a reader that meets ``NaN`` or ``Infinity`` fails."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    if type(value).__module__ == "numpy":
        return finite_json(json_default(value))
    return value


def print_json(document: Any) -> None:
    """A command's one JSON document on stdout, strict JSON."""
    typer.echo(json.dumps(finite_json(document), indent=2, allow_nan=False, default=json_default))


# -- exit statuses and errors -------------------------------------------------


class ExitStatus(IntEnum):
    """What a command's exit status says, the same for every command (docs/commands.md#exit-statuses)."""

    READY = 0  # it ran, and nothing it found reaches a warning
    FINDINGS = 1  # it ran and found a problem: a finding at warning or above, a failed check, a regression
    USAGE = 2  # the command line, or a file it names, is wrong
    COULD_NOT_RUN = 3  # the nodes, the store, a tool or the testbed stopped it before it had a verdict


# The longest error message printed: one line of a terminal's scroll-back,
# however long the input it quotes.
ERROR_LIMIT = 1000


def fail(message: str, status: ExitStatus = ExitStatus.USAGE) -> typer.Exit:
    """Print the error, one line, its text never read as markup (it may
    quote input); the exit that ends the command (raise it)."""
    from rich.markup import escape

    text = " ".join(str(message).split())
    if len(text) > ERROR_LIMIT:
        text = text[:ERROR_LIMIT] + "..."
    err_console.print(f"[bold red]error:[/] {escape(text)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=int(status))


def could_not_run(message: str) -> typer.Exit:
    """``fail`` with the status of a command something outside it stopped."""
    return fail(message, ExitStatus.COULD_NOT_RUN)


def run_budget(max_minutes: float | None, estimates: list[Any], unknown: Sequence[str] = ()) -> Any:
    """A run's time budget: its estimate said on stderr (step by step), a
    plan that cannot fit in ``max_minutes`` refused (exit 2)."""
    from oddnode.measure.estimate import Budget, estimate_lines

    for line in estimate_lines(estimates, unknown) if estimates else ():
        inform(f"estimate: {line}", highlight=False, markup=False, out=err_console)
    with user_errors():
        budget = Budget(max_minutes, list(estimates), list(unknown))
        budget.refuse(estimates)
    return budget


def budget_stop(stopped: str, db: Path) -> typer.Exit:
    """The end of a run its budget stopped (exit 3), after what it did was shown."""
    return could_not_run(f"stopped: {stopped}; the rounds done are stored in {db}")


def exit_for_findings(findings: Iterable[Any], *, problems: bool = False) -> None:
    """End a command that judged something: exit 1 when a finding reaches
    a warning (or ``problems``, something else it counts as one: a node
    that never answered), else return and exit 0."""
    from oddnode.core.model import Severity

    if problems or any(f.severity.rank >= Severity.WARNING.rank for f in findings):
        raise typer.Exit(code=int(ExitStatus.FINDINGS))


def loaded_error(module: str, name: str) -> tuple[type[BaseException], ...]:
    """The exception class ``name`` of ``module`` when that module is loaded,
    else none: an error of a module never imported cannot have been raised,
    so a handler need not import the module (and what it loads) to catch it."""
    error = getattr(sys.modules.get(module), name, None)
    return (error,) if error is not None else ()


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the library's errors into one clear line: the input's, or a
    store that lacks what was asked (exit 2); a store that cannot be opened
    now, or a transport that cannot be used here (exit 3)."""
    from oddnode.core.inputs import InputError
    from oddnode.core.atomic import OutputUnwritable
    from oddnode.store.exports import ExportError
    from oddnode.core.nodes import NodeNameError
    from oddnode.store import StoreError, StoreUnavailable

    # The transports' error only where they were loaded: importing
    # oddnode.reach loads every transport and ClusterShell's Task, which
    # most commands (analyze) never use.  oddnode.app.synth's SynthError
    # is a ValueError.
    try:
        yield
    except (StoreUnavailable, OutputUnwritable, *loaded_error("oddnode.reach.base", "TransportError")) as err:
        raise could_not_run(str(err)) from None
    except (InputError, StoreError, ExportError, NodeNameError, KeyError, ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        raise fail(message) from None


@contextmanager
def testbed_errors() -> Iterator[None]:
    """The registered testbed's errors (not root, none up) in one line, exit 3;
    without a testbed, nothing to catch."""
    provider = loaded_testbed()
    errors = (provider.error,) if provider else ()
    try:
        yield
    except errors as err:
        raise could_not_run(str(err)) from None


# -- a cluster this machine built itself (--testbed) ---------------------------


@dataclass(frozen=True)
class VirtualCluster:
    """A running cluster this machine built itself, as --testbed reaches it."""

    nodeset: str  # its nodes, ClusterShell syntax
    ssh_config: Path  # the ssh client configuration that reaches them
    topology: Path | None  # its topology file; None when its nodes hang from one switch
    transport: str = "ssh"  # how its nodes are reached where --transport is not given


class VirtualClusterProvider(Protocol):
    """What --testbed needs of the layer that builds clusters on this machine
    (oddnode.testbed, above the command line): the entry point registers it."""

    # What it raises when it cannot (not root, no cluster up): one line, exit 3.
    error: type[Exception]

    def running(self) -> VirtualCluster:
        """The cluster up now, from its state directory ($ODDNODE_TESTBED_DIR
        or its default); ``error`` when none is."""

    def node_cpu_quota(self) -> tuple[float, int]:
        """How many CPUs each node may keep busy at once (its CPU quota), and
        the CPUs this machine gives the nodes: for the cluster up now, else
        for one of the default size."""


# What loads the --testbed provider (None in a command line built without
# the testbed), and the provider once loaded.
testbed_loader: Callable[[], VirtualClusterProvider] | None = None
testbed_provider: VirtualClusterProvider | None = None


def register_testbed(load: Callable[[], VirtualClusterProvider]) -> None:
    """Make the provider ``load()`` gives, when first asked for, the cluster
    every command's --testbed runs on."""
    global testbed_loader, testbed_provider
    testbed_loader, testbed_provider = load, None


def loaded_testbed() -> VirtualClusterProvider | None:
    """The --testbed provider, loaded now if it was not; None without one."""
    global testbed_provider
    if testbed_provider is None and testbed_loader is not None:
        testbed_provider = testbed_loader()
    return testbed_provider


def registered_testbed() -> VirtualClusterProvider:
    """The --testbed provider; a clear error (exit 3) when none is registered."""
    provider = loaded_testbed()
    if provider is None:
        raise could_not_run("--testbed: no testbed support is loaded in this command line "
                            "(the oddnode command loads it)")
    return provider


# -- the store ---------------------------------------------------------------

DEFAULT_DB = Path(STORE_PATH)
DbOption = Annotated[Path, typer.Option(
    "--db", envvar="ODDNODE_DB", help="Results store (DuckDB file; default: the configuration's store, else "
                                      "oddnode.duckdb).")]
JunitOption = Annotated[Optional[str], typer.Option(
    "--junit", metavar="FILE",
    help="Also write the results as JUnit XML for CI (a testcase per stage or rule, a failure per warning); "
         "'-': stdout.")]
WideOption = Annotated[bool, typer.Option(
    "--wide", help="Every column of the statistics table, however wide the lines get (default: fit the terminal).")]


def command_line() -> str:
    """This oddnode command as typed, stored with the runs it makes."""
    return " ".join(["oddnode", *sys.argv[1:]])


def say_waiting(message: str) -> None:
    """Say on stderr, as it begins, that the command waits for the store's
    lock and which process holds it (not with -q)."""
    if not quiet():
        err_console.print(f"waiting: {message}", markup=False, highlight=False)


def open_db(db: Path, read_only: bool = True, hold: bool = True):
    """The results store; ``hold=False`` (the commands that run on nodes
    for minutes) locks it only while writing, so others can read it.  A
    wait for another process's lock is said at once."""
    from oddnode.store import open_store

    return open_store(db, read_only=read_only, hold=hold, on_wait=say_waiting)


# -- the nodes ---------------------------------------------------------------

NodesOption = Annotated[Optional[list[str]], typer.Option(
    "-w", "--nodes", metavar="NODES", help="Nodes, ClusterShell syntax: node[001-484]; repeated, they add up.")]
ExcludeOption = Annotated[Optional[list[str]], typer.Option(
    "-x", "--exclude", metavar="NODES", help="Nodes to leave out; repeated, they add up.")]
HostfileOption = Annotated[Optional[Path], typer.Option("--hostfile", help="File of node names, one a line.")]
TransportOption = Annotated[Optional[str], typer.Option(
    "--transport", help="local, ssh or slurm (default: slurm inside an allocation for its nodes, else local "
                        "without nodes, ssh with).")]
SshConfigOption = Annotated[Optional[Path], typer.Option("--ssh-config", help="ssh client configuration file (-F).")]
FanoutOption = Annotated[Optional[int], typer.Option(
    "--fanout", help=f"ssh connections at once (default: clush.conf's fanout, else {DEFAULT_FANOUT}).")]
UserOption = Annotated[Optional[str], typer.Option(
    "-l", "--user", metavar="USER", help="Remote user for ssh (default: clush.conf's ssh_user, else ssh's own).")]


def positive_seconds(param: typer.CallbackParam, value: Optional[float]) -> Optional[float]:
    """The callback of every duration option: a finite number of seconds
    above 0 and at most a week (config.seconds), else one line naming the
    option and exit 2, before anything runs (nan, inf, 0 and -5 parse as floats)."""
    from oddnode.core.config import seconds

    if value is None:
        return None
    try:
        return seconds(value)
    except ValueError as err:
        raise fail(f"{max(param.opts, key=len)} must be {err}") from None


def positive_number(param: typer.CallbackParam, value: Optional[float]) -> Optional[float]:
    """The callback of a rate or factor option: finite and above 0."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise fail(f"{max(param.opts, key=len)} must be a finite number above 0, not {value!r}")
    return value


def seconds_or_zero(param: typer.CallbackParam, value: Optional[float]) -> Optional[float]:
    """positive_seconds, 0 allowed: for options whose 0 means none or all."""
    return value if value == 0 else positive_seconds(param, value)


ConnectTimeoutOption = Annotated[Optional[float], typer.Option(
    "--connect-timeout", metavar="SECONDS", callback=positive_seconds,
    help=("Seconds ssh may take to connect to a node "
          f"(default: clush.conf's connect_timeout, else {DEFAULT_CONNECT_TIMEOUT})."))]
TimeoutOption = Annotated[float, typer.Option(
    "--timeout", callback=positive_seconds, help="Seconds a node may take for a probe.")]
MaxMinutesOption = Annotated[Optional[float], typer.Option(
    "--max-minutes", metavar="MINUTES", callback=positive_seconds,
    help="A time budget: refuse a plan estimated to take longer, and stop after the round under way once it is "
         "spent (every round before it stored).")]
TestbedOption = Annotated[bool, typer.Option("--testbed", help="Run on the nodes of the running testbed.")]
TOPOLOGY_HELP = ("Topology, so that findings can name a group (leaf switch, chassis): a file of 'GROUP NODESET' "
                 "lines, Slurm's topology.conf or topology.yaml (its leaf switches), or '@[SOURCE:]PATTERN', "
                 "the ClusterShell groups that match (@rack*, @switch:*).")
TopologyOption = Annotated[Optional[Path], typer.Option(
    "--topology", help=f"{TOPOLOGY_HELP} With --testbed, the testbed's own by default.")]
StoredTopologyOption = Annotated[Optional[Path], typer.Option("--topology", help=TOPOLOGY_HELP)]
# How readily the finding rules warn (oddnode.findings.Sensitivity's
# defaults, written out so that the command line starts without scipy; a
# unit test keeps them equal).
DEFAULT_ALPHA = 1e-4
DEFAULT_MIN_EFFECT = 0.01
AlphaOption = Annotated[float, typer.Option(
    help="False-warning probability per rule and benchmark on a healthy cluster.")]
MinEffectOption = Annotated[float, typer.Option(
    help="Smallest deviation from the median worth a warning (fraction).")]


# The options a command that reaches nodes takes in place of its ``connection``
# parameter, in this order, made into one Connection (with_configuration).
CONNECTION_OPTIONS = {"transport": TransportOption, "ssh_config": SshConfigOption, "fanout": FanoutOption,
                      "user": UserOption, "connect_timeout": ConnectTimeoutOption}
# A command's ``connection`` parameter's default: the command line fills it.
FROM_OPTIONS = Connection()


def selected_target(nodes, exclude, hostfile, connection: Connection, testbed):
    """The nodes and transport a command runs on, from its options."""
    from oddnode.app.check import select_nodes

    chosen = select_nodes(nodes, exclude, hostfile)
    if testbed:
        bed = registered_testbed().running()
        chosen = chosen or select_nodes(bed.nodeset, exclude)
        connection = dataclasses.replace(connection, ssh_config=connection.ssh_config or bed.ssh_config,
                                         transport=connection.transport or bed.transport)
    from oddnode.reach.targets import reach

    return reach(connection, chosen)


# -- configuration files ------------------------------------------------------

# A command's parameter -> the configuration key that gives its default
# (oddnode.core.config.KEYS).  A parameter left unset (None, or --db's default)
# takes the key's value; with --testbed, the settings that say how to reach
# the site's nodes stay the testbed's.
CONFIGURED_PARAMETERS = {"db": "store", "ssh_config": "ssh_config", "fanout": "fanout", "transport": "transport",
                         "topology": "topology", "expect": "expectations", "user": "user",
                         "connect_timeout": "connect_timeout"}
SITE_ONLY = frozenset({"ssh_config", "transport", "topology", "user"})
# compare's --topology picks a comparison, not the cluster's topology: not configured.
TOPOLOGY_OPTIONS = (TopologyOption, StoredTopologyOption)


def splice_parameters(wrapper: Callable, signature: inspect.Signature, hints: Mapping[str, Any],
                      replacements: Mapping[str, Sequence[tuple[str, Any, Any]]],
                      added: Mapping[str, Any] | None = None) -> None:
    """Give ``wrapper`` a command's ``signature`` and type ``hints`` with each
    parameter named in ``replacements`` replaced, where it stands, by its
    (name, annotation, default) options, and the keyword-only parameters
    ``added`` (name -> annotation) last: how one typed parameter of a
    command (its connection, its step options, an option group) becomes
    the several options the command line shows."""
    added = dict(added or {})
    parameters = []
    for parameter in signature.parameters.values():
        if parameter.name in replacements:
            parameters += [inspect.Parameter(new, parameter.kind, annotation=annotation, default=default)
                           for new, annotation, default in replacements[parameter.name]]
        else:
            parameters.append(parameter)
    parameters += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
                   for name, annotation in added.items()]
    wrapper.__signature__ = signature.replace(parameters=parameters)
    wrapper.__annotations__ = {name: hint for name, hint in hints.items() if name not in replacements} | {
        new: annotation for options in replacements.values() for new, annotation, _ in options} | added


def with_configuration(command: Callable) -> Callable:
    """``command`` with its unset options filled from the configuration files,
    and, when it reaches nodes (it takes a ``connection: Connection``), the
    connection's options in that parameter's place, handed to it as one
    Connection; unchanged when it has no configurable option."""
    if getattr(command, "oddnode_configured", False):
        return command
    signature = inspect.signature(command, eval_str=True)
    names = set(signature.parameters)
    hints = typing.get_type_hints(command, include_extras=True)
    reaches_nodes = hints.get("connection") is Connection
    if not reaches_nodes and not names & set(CONFIGURED_PARAMETERS):
        return command
    added = {"oddnode_context": typer.Context}

    @functools.wraps(command)
    def configured(*args, oddnode_context: typer.Context, **options):
        from oddnode.core.config import ConfigError, load_settings

        try:
            settings = load_settings()
        except ConfigError as err:
            raise fail(str(err)) from None
        for name, key in CONFIGURED_PARAMETERS.items():
            if name not in options or (options.get("testbed") and name in SITE_ONLY):
                continue
            if name == "expect" and options.get("plan_file"):
                continue  # a plan file says which expectations it checks (or none)
            if name == "db":
                # --db's default is a path (analyze's: None, in memory when it imports files)
                unset = oddnode_context.get_parameter_source(name).name == "DEFAULT" and not options.get("paths")
            else:
                unset = options[name] is None and (name != "topology" or hints[name] in TOPOLOGY_OPTIONS)
            if unset and settings[key] is not None:
                options[name] = settings[key]
        if reaches_nodes:
            options["connection"] = Connection(**{name: options.pop(name) for name in CONNECTION_OPTIONS})
        return command(*args, **options)

    connection = [(name, annotation, None) for name, annotation in CONNECTION_OPTIONS.items()]
    splice_parameters(configured, signature, hints, {"connection": connection} if reaches_nodes else {}, added)
    configured.oddnode_configured = True
    return configured


def configure_commands(app: typer.Typer, wrapped: dict | None = None) -> None:
    """Give every command of ``app`` and its sub-apps its configuration defaults
    (with_configuration) and -q/-v (with_verbosity); a function registered
    under two names (an alias) keeps one wrapper."""
    wrapped = {} if wrapped is None else wrapped
    for info in app.registered_commands:
        if info.callback not in wrapped:
            configured = with_configuration(info.callback)
            # A command that hands unknown options on (profile's application) keeps -q/-v for it.
            passes_options_on = (info.context_settings or {}).get("ignore_unknown_options")
            wrapped[info.callback] = configured if passes_options_on else with_verbosity(configured)
        info.callback = wrapped[info.callback]
    for group in app.registered_groups:
        configure_commands(group.typer_instance, wrapped)


def read_topology(path: Optional[Path], testbed: bool = False) -> tuple[dict[str, str], str] | None:
    """Node -> group from a --topology value (a file or a ClusterShell group
    spec; the testbed's file when none is given), and its source: the path for
    oddnode's own file, slurm:PATH or clustershell:SPEC for the others."""
    if path is None and testbed:
        path = registered_testbed().running().topology
    if path is None:
        return None
    from oddnode.core.topology import load_topology  # its parsers only where a topology is given

    topology = load_topology(path)
    return topology.groups, topology.source


def save_topology(store, topology: tuple[dict[str, str], str] | None, declare: bool = True) -> None:
    """Record a topology in the store, so that the weak-group rule reads it;
    its nodes, in the file's order, are declared nodes of the cluster unless
    ``declare`` is false (a command that measures a few of them on purpose)."""
    if topology:
        groups, source = topology
        nodes = list(groups) if declare else []
        with store.transaction():
            store.set_topology(store.new_run(command_line(), source=f"topology:{source}", nodes=nodes), groups)


def message_sizes(text: str) -> tuple[int, ...]:
    """Message sizes in bytes from a comma-separated option."""
    try:
        sizes = tuple(int(word) for word in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"message sizes are whole numbers of bytes separated by commas, not {text!r}") from None
    if not sizes or min(sizes) < 0:
        raise typer.BadParameter(f"message sizes must be bytes >= 0, not {text!r}")
    return sizes


def node_counts(text: str) -> tuple[int, ...]:
    """Node counts from a comma-separated option (--counts)."""
    try:
        return tuple(int(word) for word in text.split(",") if word.strip())
    except ValueError:
        raise typer.BadParameter(f"node counts are whole numbers separated by commas, not {text!r}",
                                 param_hint="--counts") from None


def chain_lengths(text: str) -> tuple[int, ...]:
    """Chain lengths from a comma-separated option (--lengths)."""
    try:
        return tuple(int(word) for word in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"chain lengths are whole numbers separated by commas, not {text!r}") from None
