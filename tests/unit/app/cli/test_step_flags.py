"""A step's options are described once, on their fields: the check's step
flags, their help, defaults and checks, are made from those descriptions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from oddnode.app.cli import build_app
from oddnode.app.cli.common import positive_seconds, seconds_or_zero
from oddnode.measure import catalog
from oddnode.measure.steps import Step, StepOutcome, check_flag, option, option_help, register_step, shown_default


def check_parameters(app: typer.Typer) -> dict:
    """The check's options by their longest flag."""
    return {max(p.opts, key=len): p for p in typer.main.get_command(app).commands["check"].params}


# Every flag ``oddnode check`` had before its step flags were made from the
# options' fields, and its default, in the order its help listed them.
CHECK_FLAGS_BEFORE = [
    ("--nodes", None), ("--exclude", None), ("--hostfile", None), ("--transport", None), ("--ssh-config", None),
    ("--fanout", None), ("--user", None), ("--connect-timeout", None), ("--timeout", None), ("--testbed", False),
    ("--db", Path("oddnode.duckdb")), ("--expect", None), ("--plan", None), ("--set", None), ("--show-plan", False),
    ("--stages", None), ("--skip", None), ("--with", None), ("--repetitions", None), ("--continue", False),
    ("--resume", False), ("--benchmark-timeout", None), ("--memory-elements", None), ("--memory-ntimes", None),
    ("--memory-min-seconds", None), ("--noise-seconds", None), ("--threads", None), ("--dgemm-n", None),
    ("--hpl-n", None), ("--command", None), ("--parser", None), ("--output-file", None),
    ("--command-timeout", None), ("--disk-dir", None), ("--disk-dirs", None), ("--disk-size", None), ("--disk-engine", None),
    ("--html", Path("oddnode-report.html")), ("--patterns", None), ("--sizes", None), ("--seconds-per-size", None),
    ("--set-size", None), ("--bisection-seconds", None), ("--json", False), ("--junit", None), ("--drain", False),
    ("--drain-max", None), ("--dry-run", False), ("--wide", False), ("--topology", None), ("--alpha", 0.0001),
    ("--min-effect", 0.01),
]
# The step defaults their help said, and the checks of the duration flags.
HELP_DEFAULTS = {
    "--memory-elements": "memory.elements, default 4x this machine's last-level cache",
    "--memory-ntimes": "memory.ntimes, default 10", "--memory-min-seconds": "memory.min_loop_seconds, default 0.0",
    "--noise-seconds": "noise.seconds, default 10.0", "--threads": "hpl.threads; default the node's",
    "--dgemm-n": "dgemm.n, default 6000", "--hpl-n": "hpl.n, default 10000", "--disk-dir": "disk.directory, default /var/tmp",
    "--disk-dirs": "(disk.dirs)", "--disk-size": f"disk.size, default {4 * 1024**3}",
    "--disk-engine": "disk.engine, default auto", "--patterns": "pairs.patterns, default sort,cut,fold,shuffle",
    "--sizes": "scale.sizes; default 0, 1 B to 4 MiB", "--seconds-per-size": "default 0.2",
    "--set-size": "sets.size, default 8", "--bisection-seconds": "bisection.seconds, default 2.0",
    "--command": "command.command, default none", "--command-timeout": "command.timeout, default 540.0",
}
CALLBACKS = {"--memory-min-seconds": seconds_or_zero, "--noise-seconds": positive_seconds,
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
