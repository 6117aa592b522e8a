"""A step's options are described once, on their fields: the check's step
flags and the step-option flags of the standalone commands, their help,
defaults and checks, are made from those descriptions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from oddnode.app.cli.root import build_app
from oddnode.app.cli.common import positive_seconds, seconds_or_zero
from oddnode.measure import catalog
from oddnode.measure.steps import Step, StepOutcome, check_flag, option, option_help, register_step, shown_default


def check_parameters(app: typer.Typer) -> dict:
    """The check's options by their longest flag."""
    return {max(p.opts, key=len): p for p in typer.main.get_command(app).commands["check"].params}


# Every flag ``oddnode check`` had before its step flags were made from the
# options' fields (and --memory-max-seconds, added since), and its default,
# in the order its help listed them.
CHECK_FLAGS_BEFORE = [
    ("--nodes", None), ("--exclude", None), ("--hostfile", None), ("--transport", None), ("--ssh-config", None),
    ("--fanout", None), ("--user", None), ("--connect-timeout", None), ("--timeout", None), ("--testbed", False),
    ("--db", Path("oddnode.duckdb")), ("--expect", None), ("--plan", None), ("--set", None), ("--show-plan", False),
    ("--stages", None), ("--skip", None), ("--with", None), ("--repetitions", None), ("--continue", False),
    ("--resume", False), ("--benchmark-timeout", None), ("--memory-elements", None), ("--memory-ntimes", None),
    ("--memory-min-seconds", None), ("--memory-max-seconds", None), ("--noise-seconds", None), ("--threads", None), ("--dgemm-n", None),
    ("--hpl-n", None), ("--command", None), ("--parser", None), ("--output-file", None),
    ("--command-timeout", None), ("--disk-dir", None), ("--disk-dirs", None), ("--disk-size", None), ("--disk-engine", None),
    ("--html", Path("oddnode-report.html")), ("--patterns", None), ("--sizes", None), ("--seconds-per-size", None),
    ("--set-size", None), ("--bisection-seconds", None), ("--json", False), ("--junit", None), ("--drain", False),
    ("--drain-max", None), ("--dry-run", False), ("--wide", False), ("--max-minutes", None), ("--topology", None), ("--alpha", 0.0001),
    ("--min-effect", 0.01), ("--quiet", False), ("--verbose", False),
]
# The step defaults their help said, and the checks of the duration flags.
HELP_DEFAULTS = {
    "--memory-elements": "memory.elements, default 4x this machine's last-level cache",
    "--memory-ntimes": "memory.ntimes, default 10", "--memory-min-seconds": "memory.min_loop_seconds, default 0.0",
    "--memory-max-seconds": "memory.max_seconds, default 0.0",
    "--noise-seconds": "noise.seconds, default 10.0", "--threads": "hpl.threads; default the node's",
    "--dgemm-n": "dgemm.n, default 6000", "--hpl-n": "hpl.n, default 10000", "--disk-dir": "disk.directory, default /var/tmp",
    "--disk-dirs": "(disk.dirs)", "--disk-size": f"disk.size, default {4 * 1024**3}",
    "--disk-engine": "disk.engine, default auto", "--patterns": "pairs.patterns, default sort,cut,fold,shuffle",
    "--sizes": "scale.sizes; default 0, 1 B to 4 MiB", "--seconds-per-size": "default 0.2",
    "--set-size": "sets.size, default 8", "--bisection-seconds": "bisection.seconds, default 2.0",
    "--command": "command.command, default none", "--command-timeout": "command.timeout, default 540.0",
}
CALLBACKS = {"--memory-min-seconds": seconds_or_zero, "--memory-max-seconds": seconds_or_zero, "--noise-seconds": positive_seconds,
             "--seconds-per-size": positive_seconds, "--bisection-seconds": positive_seconds,
             "--timeout": positive_seconds, "--benchmark-timeout": positive_seconds,
             "--command-timeout": positive_seconds}


def test_every_flag_the_check_had_is_there_with_its_default_and_its_check():
    parameters = check_parameters(build_app())
    assert sorted((flag, p.default) for flag, p in parameters.items()) == sorted(CHECK_FLAGS_BEFORE, key=str)
    for flag, said in HELP_DEFAULTS.items():
        assert said in " ".join(parameters[flag].help.split()), flag
    for flag, callback in CALLBACKS.items():
        assert parameters[flag].callback.__wrapped__ is callback, flag  # typer wraps callbacks


@dataclass(frozen=True)
class ProbeOptions:
    """A step's one option, described where it is declared."""

    width: int = option(3, help="Bytes each probe sends")
    wait: float = option(1.5, help="Seconds between probes", check="seconds")


class ProbeStep(Step):
    name = "probe"
    stage = "memory"
    options = ProbeOptions
    series = ("probe",)

    def run(self, context, options) -> StepOutcome:
        return StepOutcome()


@pytest.fixture
def probe_step(monkeypatch):
    """The probe step registered, and the check exposing its options, as the catalog does."""
    register_step(ProbeStep)
    monkeypatch.setattr(catalog, "CHECK_FLAGS", [*catalog.CHECK_FLAGS, check_flag("probe.width"),
                                                 check_flag("probe.wait")])
    yield
    catalog.STEPS.remove(ProbeStep.name)


def show_plan(app: typer.Typer, *arguments: str):
    result = CliRunner().invoke(app, ["check", "--show-plan", *arguments])
    return result, (yaml.safe_load(result.stdout) if result.exit_code == 0 else None)


@pytest.mark.slow
def test_a_new_step_s_options_become_check_flags_with_their_help_default_and_check(probe_step):
    assert option_help(ProbeOptions, "width").help == "Bytes each probe sends"
    assert shown_default(ProbeOptions, "width") == "3"
    app = build_app()
    parameters = check_parameters(app)
    assert parameters["--probe-width"].help == "Bytes each probe sends (probe.width, default 3)."
    assert parameters["--probe-wait"].callback.__wrapped__ is positive_seconds
    _, plan = show_plan(app, "--probe-width", "7")
    assert plan["steps"]["probe"]["width"] == 7
    _, plan = show_plan(app, "--set", "probe.width=9")
    assert plan["steps"]["probe"]["width"] == 9
    _, plan = show_plan(app)
    assert plan["steps"]["probe"] == {"width": 3, "wait": 1.5}
    result, _ = show_plan(app, "--probe-wait", "0")
    assert result.exit_code == 2 and "--probe-wait must be" in result.output


def test_a_shared_flag_sets_the_option_of_every_step_it_names():
    _, plan = show_plan(build_app(), "--with", "scale", "--threads", "2", "--sizes", "0,64", "--seconds-per-size", "0.5")
    steps = plan["steps"]
    assert [steps[step]["threads"] for step in ("memory", "dgemm", "hpl")] == [2, 2, 2]
    assert [steps[step]["sizes"] for step in ("pairs", "sets", "scale")] == [[0, 64]] * 3
    assert [steps[step]["seconds_per_size"] for step in ("pairs", "sets", "scale")] == [0.5] * 3


def test_the_pairs_and_bisection_commands_take_their_step_options_flags_from_the_fields():
    from oddnode.measure.pair.pairs import PingPongOptions, StreamOptions

    commands = typer.main.get_command(build_app()).commands
    for command, options, names in (("pairs", PingPongOptions, ("seconds_per_size", "port")),
                                    ("bisection", StreamOptions, ("message_size", "seconds", "both", "port"))):
        parameters = {p.name: p for p in commands[command].params}
        for name in names:
            assert parameters[name].help == f"{option_help(options, name).help}."
            assert parameters[name].default == getattr(options(), name)
    sizes = {p.name: p for p in commands["pairs"].params}["sizes"]
    assert sizes.default is None and "(default 0, 1 B to 4 MiB by powers of two)" in sizes.help


def converted_commands():
    """Every standalone command whose step options are flags made from the
    options' fields: its path, its options class and the options it takes."""
    from oddnode.app.cli import interconnect, numa, sets, sweep, sync
    from oddnode.measure.node.numa import NumaOptions
    from oddnode.measure.pair.matrix import MatrixOptions
    from oddnode.measure.pair.pairs import PairsOptions, StreamOptions
    from oddnode.measure.pair.switchbench import AllToAllOptions, ChainOptions, StreamsOptions
    from oddnode.measure.set.runner import ScaleOptions, SetBenchmarkOptions, SetsOptions
    from oddnode.measure.set.sync import SyncOptions

    return [(("pairs",), PairsOptions, interconnect.PAIRS_OPTIONS),
            (("bisection",), StreamOptions, interconnect.BISECTION_OPTIONS),
            (("matrix",), MatrixOptions, interconnect.MATRIX_OPTIONS),
            (("switchbench", "chain"), ChainOptions, interconnect.CHAIN_OPTIONS),
            (("switchbench", "stream"), StreamsOptions, interconnect.STREAMS_OPTIONS),
            (("switchbench", "alltoall"), AllToAllOptions, interconnect.ALLTOALL_OPTIONS),
            (("sets",), SetsOptions, sets.SET_OPTIONS), (("scale",), ScaleOptions, sets.SCALE_OPTIONS),
            (("sync",), SyncOptions, sync.SYNC_OPTIONS), (("numa",), NumaOptions, numa.NUMA_OPTIONS),
            (("sweep",), SetBenchmarkOptions, sweep.SWEEP_OPTIONS)]


def command_parameters(app: typer.Typer, path: tuple[str, ...]) -> dict:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {p.name: p for p in command.params}


# The flags each converted command had before, by option: their names and
# their defaults (None where the step's default is said in the help).
FLAGS_BEFORE = {
    "matrix": {"sizes": (["--sizes"], None), "seconds_per_size": (["--seconds-per-size"], 0.2),
               "port": (["--port"], 29170), "retest": (["--retest", "--no-retest"], True)},
    "switchbench chain": {"lengths": (["--lengths"], None), "message_size": (["--message-size"], 1 << 20),
                          "seconds": (["--seconds"], 2.0), "port": (["--port"], 29171)},
    "switchbench stream": {"message_size": (["--message-size"], 1 << 20), "seconds": (["--seconds"], 2.0),
                           "port": (["--port"], 29171)},
    "switchbench alltoall": {"message_size": (["--message-size"], 1 << 20), "warmup_passes": (["--warmup-passes"], 1),
                             "port": (["--port"], 29171)},
    "sets": {"benchmarks": (["--benchmarks"], None), "sizes": (["--sizes"], None),
             "seconds_per_size": (["--seconds-per-size"], 0.2), "command": (["--command"], None),
             "parser": (["--parser"], None), "command_timeout": (["--command-timeout"], 600.0),
             "files": (["--file"], None), "output": (["--output-file"], None)},
    "sync": {"counts": (["--sizes", "--counts"], None), "quantum_us": (["--quantum-us"], 1000),
             "iterations": (["--iterations"], 1000), "operation": (["--operation"], "allreduce"),
             "kernel": (["--kernel"], "auto"), "port": (["--port"], 29172)},
    "numa": {"memory": (["--memory", "--no-memory"], True), "pingpong": (["--pingpong", "--no-pingpong"], True),
             "mpi": (["--mpi", "--no-mpi"], True), "elements": (["--elements"], None), "ntimes": (["--ntimes"], 10),
             "threads": (["--threads"], None), "latency_bytes": (["--latency-bytes"], 8),
             "bandwidth_bytes": (["--bandwidth-bytes"], 4 << 20), "seconds_per_size": (["--seconds-per-size"], 0.5)},
    "sweep": {"command": (["--command"], None), "parser": (["--parser"], None)},
}
FLAGS_BEFORE["scale"] = {"counts": (["--counts"], None), **FLAGS_BEFORE["sets"]}


@pytest.mark.slow
@pytest.mark.parametrize("path, options, names", converted_commands(),
                         ids=[" ".join(path) for path, _, _ in converted_commands()])
def test_a_command_s_step_option_flags_have_the_field_s_help_default_and_check(path, options, names):
    from oddnode.app.cli.step_flags import CALLBACKS as CHECK_CALLBACKS
    from oddnode.measure.steps import option_field

    parameters = command_parameters(build_app(), path)
    for name in names:
        flag, described, field = parameters[name], option_help(options, name), option_field(options, name)
        assert " ".join(flag.help.split()).startswith(described.help), (path, name)
        said = shown_default(options, name)
        if flag.default is None:  # a list, or an option whose default its value does not say
            assert field.default is None or isinstance(field.default, tuple), (path, name)
            assert said is None or f"(default {said})" in flag.help, (path, name)
        else:
            assert flag.default == field.default, (path, name)
        callback = getattr(flag.callback, "__wrapped__", None)
        assert callback is CHECK_CALLBACKS.get(described.check), (path, name)
    before = FLAGS_BEFORE.get(" ".join(path), {})
    for name, (flags, default) in before.items():
        assert [*parameters[name].opts, *parameters[name].secondary_opts] == flags, (path, name)
        assert parameters[name].default == default, (path, name)


@pytest.mark.slow
def test_a_command_s_flag_follows_its_field_when_the_field_changes(monkeypatch):
    import dataclasses
    import types

    from oddnode.measure.node.numa import NumaOptions
    from oddnode.measure.set.runner import SetBenchmarkOptions
    from oddnode.measure.steps import OPTION_METADATA, OptionHelp, option_field

    def redescribe(options, name, default, help):
        field = option_field(options, name)
        monkeypatch.setattr(field, "default", default)
        described = dataclasses.replace(field.metadata[OPTION_METADATA], help=help)
        monkeypatch.setattr(field, "metadata", types.MappingProxyType({OPTION_METADATA: described}))
        assert isinstance(described, OptionHelp)

    redescribe(NumaOptions, "ntimes", 12, "Iterations of the kernel")
    redescribe(SetBenchmarkOptions, "command_timeout", 90.0, "Seconds a command may run")
    app = build_app()
    ntimes = command_parameters(app, ("numa",))["ntimes"]
    assert (ntimes.default, ntimes.help) == (12, "Iterations of the kernel.")
    for command in ("sets", "scale", "sweep"):
        parameters = command_parameters(app, (command,))
        if command == "sweep":
            assert "command_timeout" not in parameters
        else:
            assert (parameters["command_timeout"].default, parameters["command_timeout"].help) == (
                90.0, "Seconds a command may run.")


@pytest.mark.slow
def test_flags_given_reach_the_options_a_command_builds(monkeypatch):
    """The values of the flags given, each parsed as its option's type, are
    what the command builds its options with; a value the options refuse is
    the command's one line, exit 2, as before."""
    from oddnode.app.cli import numa, sets

    app, runner, built = build_app(), CliRunner(), []

    def recording(options):
        def build(**values):
            built.append(options(**values))
            raise typer.Exit(7)  # before any node is reached
        return build

    monkeypatch.setattr(sets, "SetsOptions", recording(sets.SetsOptions))
    monkeypatch.setattr(numa, "NumaOptions", recording(numa.NumaOptions))
    result = runner.invoke(app, ["sets", "-k", "4", "--benchmarks", "sendrecv, alltoall", "--sizes", "0,64",
                                 "--command", "x", "--parser", "npb", "--file", "a=b,c", "--file", "d=e"])
    assert result.exit_code == 7, result.output
    result = runner.invoke(app, ["numa", "--no-mpi", "--threads", "2", "--seconds-per-size", "0.1"])
    assert result.exit_code == 7, result.output
    options = built[0]
    assert (options.size, options.benchmarks, options.sizes, options.command, options.files) == (
        4, ("sendrecv", "alltoall"), (0, 64), "x", ("a=b,c", "d=e"))
    assert options.seconds_per_size == 0.2 and options.command_timeout == 600.0  # the fields' defaults
    assert (built[1].memory, built[1].mpi, built[1].threads, built[1].seconds_per_size) == (True, False, 2, 0.1)
    monkeypatch.undo()
    for arguments, message in ((["sets", "--command", "x"], "a command template needs a parser"),
                               (["numa", "--no-memory", "--no-pingpong"], "nothing to run"),
                               (["sync", "--kernel", "bogus"], "kernel is one of auto, mpi, tcp"),
                               (["scale", "--counts", "2,x"], "node counts are whole numbers"),
                               (["switchbench", "chain", "--lengths", "2,x"], "chain lengths are whole numbers")):
        result = runner.invoke(app, arguments)
        assert result.exit_code == 2 and message in " ".join(result.output.replace("│", " ").split()), arguments
