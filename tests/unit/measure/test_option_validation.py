"""Durations, counts and sizes are checked when they are parsed, from the
command line, a plan file, ``--set`` or the configuration: ``check
--show-plan`` refuses them with exit 2, before anything runs."""

from pathlib import Path

import pytest

from support.cli import invoke, write
from oddnode.core import config
from oddnode.core.config import ConfigError, load_settings, parse_config
from oddnode.measure.plan import PlanError, make_plan, parse_settings, read_plan_file


@pytest.mark.parametrize("option", ["--benchmark-timeout", "--timeout", "--bisection-seconds", "--connect-timeout",
                                    "--noise-seconds", "--seconds-per-size"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "-5", "1e23"])
def test_a_duration_option_that_is_no_duration_is_one_line_and_exit_2(option, value):
    result = invoke("check", "--show-plan", option, value)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith(f"error: {option} must be"), result.output


@pytest.mark.parametrize("command", [["sets"], ["affinity"], ["processes"], ["sweep", "memory"],
                                     ["pairs"], ["numa"], ["switchbench", "chain"], ["bisection"]])
def test_every_command_checks_its_durations_before_it_runs(command):
    option = {"sets": "--seconds-per-size", "affinity": "--seconds", "processes": "--timeout", "sweep": "--timeout",
              "switchbench": "--seconds", "bisection": "--seconds", "pairs": "--seconds-per-size",
              "numa": "--seconds-per-size"}[command[0]]
    result = invoke(*command, option, "nan")
    assert result.exit_code == 2 and f"{option} must be a number of seconds" in result.text, result.output


def test_a_good_duration_passes():
    result = invoke("check", "--show-plan", "--benchmark-timeout", "30", "--bisection-seconds", "0.5")
    assert result.exit_code == 0, result.output
    assert "benchmark_timeout: 30.0" in result.output


@pytest.mark.parametrize("setting, message", [
    ("pairs.sizes=-1", "pairs.sizes: wants a whole number from 0 to"),
    ("memory.elements=100000000000000000000000", "memory.elements: wants a whole number from 0 to"),
    ("memory.elements=1e23", "memory.elements: wants a whole number"),
    ("noise.seconds=nan", "noise.seconds: wants a finite number above 0"),
    ("pairs.seconds_per_size=inf", "pairs.seconds_per_size: wants a finite number above 0"),
    ("bisection.seconds=0", "bisection.seconds: wants a finite number above 0"),
    ("hpl.timeout=-1", "hpl.timeout: wants a finite number above 0"),
    ("memory.min_loop_seconds=-1", "memory.min_loop_seconds: wants a finite number 0 or above"),
    ("sets.sizes=0,1024,-3", "sets.sizes: wants a whole number from 0 to"),
])
def test_a_setting_out_of_range_is_refused_when_the_plan_is_made(setting, message):
    with pytest.raises(PlanError, match=message):
        make_plan(parameters=parse_settings([setting]))
    result = invoke("check", "--show-plan", "--set", setting)
    assert result.exit_code == 2 and message in result.text, result.output


def test_zero_passes_where_it_means_none_and_a_seed_may_be_any_64_bit_number():
    plan = make_plan(parameters=parse_settings(["memory.min_loop_seconds=0", "pairs.sizes=0,1",
                                                f"sets.seed={2**64 - 1}"]))
    assert plan.options("memory").min_loop_seconds == 0.0 and plan.options("sets").seed == 2**64 - 1


@pytest.mark.parametrize("text, message", [
    ("benchmark_timeout: .nan\n", "benchmark_timeout must be a number of seconds above 0"),
    ("probe_timeout: .inf\n", "probe_timeout must be a number of seconds above 0"),
    ("probe_timeout: -3\n", "probe_timeout must be"),
    ("repetitions: 1.0e+23\n", "repetitions must be >= 1"),
    ("repetitions: 100000000000\n", "repetitions must be >= 1 and at most"),
    ("steps: {memory: {elements: 1.0e+23}}\n", "memory.elements: wants a whole number from 0 to"),
    ("steps: {noise: {seconds: .nan}}\n", "noise.seconds: wants a finite number"),
    ("repetitions: 3\nrepetitions: 4\n", "key 'repetitions' given twice"),
])
def test_a_plan_file_value_out_of_range_is_refused(tmp_path, text, message):
    path = write(tmp_path / "plan.yaml", text)
    with pytest.raises(PlanError, match=message):
        make_plan(read_plan_file(path))
    result = invoke("check", "--show-plan", "--plan", path)
    assert result.exit_code == 2 and message.split(" (")[0] in result.text, result.output


def test_a_plan_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    import os

    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)
    with pytest.raises(PlanError, match="cannot read plan file .*not a regular file"):
        read_plan_file(fifo)


# -- the configuration -------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("fanout: 4\nfanout: 5\n", ":2: key 'fanout' given twice"),
    ("fanout: 100000000000000000000000\n", ":1: fanout: must be a whole number of connections from 1 to"),
    ("fanout: 1e23\n", ":1: fanout: must be a whole number"),
    ("connect_timeout: .inf\n", ":1: connect_timeout: must be a number of seconds above 0"),
    ("connect_timeout: .nan\n", ":1: connect_timeout: must be a number of seconds above 0"),
    ("connect_timeout: -1\n", ":1: connect_timeout: must be a number of seconds above 0"),
    ("store: ~nosuchuser_oddnode/results.duckdb\n", ":1: store: must be a path whose ~USER is a user"),
    ("a:\n" + "".join("  " * depth + f"k{depth}:\n" for depth in range(1, 200)), "nested deeper than"),
])
def test_a_bad_configuration_value_is_one_line_naming_file_line_and_key(tmp_path, monkeypatch, text, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(text, "site.yaml", tmp_path)
    monkeypatch.setenv(config.CONFIG_ENV, str(write(tmp_path / "site.yaml", text)))
    result = invoke("config", "show")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "site.yaml" in lines[0], result.output


def test_an_unknown_user_in_the_configuration_path_or_store_variable_is_one_line(monkeypatch):
    with pytest.raises(ConfigError, match="ODDNODE_CONFIG.*no user"):
        load_settings({config.CONFIG_ENV: "~nosuchuser_oddnode/config.yaml"})
    with pytest.raises(ConfigError, match="ODDNODE_DB: must be a path whose ~USER"):
        load_settings({config.CONFIG_ENV: "/dev/null/absent", "ODDNODE_DB": "~nosuchuser_oddnode/x"}
                      | {"ODDNODE_CONFIG": ""} | {"HOME": str(Path("/nonexistent"))})


def test_a_good_configuration_still_reads(tmp_path):
    settings = parse_config("fanout: 128\nconnect_timeout: 2.5\nstore: ~/r.duckdb\n", "site.yaml", tmp_path)
    assert settings["fanout"].value == 128 and settings["connect_timeout"].value == 2.5
    assert settings["store"].value == Path("~/r.duckdb").expanduser()


def test_zero_passes_where_an_option_says_it_means_none_or_all():
    result = invoke("check", "--show-plan", "--memory-min-seconds", "0")
    assert result.exit_code == 0 and "min_loop_seconds: 0.0" in result.output, result.output
    for value in ("nan", "-1"):
        result = invoke("check", "--show-plan", "--memory-min-seconds", value)
        assert result.exit_code == 2 and "--memory-min-seconds must be" in result.text, result.output
    assert invoke("processes", "--seconds", "inf").exit_code == 2
