"""The command line's defaults are the library's: a default written out in
the command line (where importing its module would slow every start) must
equal the library's own."""

from __future__ import annotations

import typer

from oddnode.main import app


def default(*path: str, option: str):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return next(p.default for p in command.params if p.name == option)


def test_analyze_and_check_warn_as_readily_as_the_findings_do_by_default():
    from oddnode.findings import Sensitivity

    for command in ("analyze", "check"):
        assert default(command, option="alpha") == Sensitivity().alpha
        assert default(command, option="min_effect") == Sensitivity().min_effect


def test_inventory_waits_for_a_node_as_long_as_the_check_does():
    from oddnode.measure.plan import PROBE_TIMEOUT

    assert default("inventory", option="timeout") == PROBE_TIMEOUT


def test_interconnect_commands_use_the_runners_ports_sizes_and_seconds():
    from oddnode.measure.pair import pairs, pingpong, switchbench

    assert default("pairs", option="port") == default("matrix", option="port") == pairs.DEFAULT_PORT
    assert default("bisection", option="port") == pairs.DEFAULT_PORT
    assert default("pairs", option="seconds_per_size") == pingpong.DEFAULT_SECONDS_PER_SIZE
    assert default("bisection", option="message_size") == pingpong.DEFAULT_MESSAGE_SIZE
    for command in ("chain", "stream", "alltoall"):
        assert default("switchbench", command, option="port") == switchbench.DEFAULT_PORT
    assert default("switchbench", "alltoall", option="message_size") == switchbench.DEFAULT_ALLTOALL_MESSAGE
    assert default("switchbench", "alltoall", option="warmup_passes") == switchbench.DEFAULT_WARMUP_PASSES


def test_the_store_synth_and_testbed_defaults_are_their_modules():
    from oddnode.store import DEFAULT_PATH
    from oddnode.app.synth import CASE_STUDY_NODES, DEFAULT_SEED
    from oddnode.testbed.lifecycle import DEFAULT_NODES

    assert str(default("stats", option="db")) == DEFAULT_PATH
    assert (default("synth", option="nodes"), default("synth", option="seed")) == (CASE_STUDY_NODES, DEFAULT_SEED)
    assert default("testbed", "up", option="nodes") == DEFAULT_NODES


def test_stab_s_names_are_hidden_aliases_of_the_plain_ones():
    commands = typer.main.get_command(app).commands
    for stab, plain in (("anal", "stats"), ("dplot", "dist"), ("cplot", "correlate"), ("xcommon", "common")):
        assert commands[stab].callback.__wrapped__ is commands[plain].callback.__wrapped__, stab
        assert commands[stab].hidden, stab
        assert not commands[plain].hidden
