"""A check's plan from a plan file, the command's flags and --set, in that
order of precedence; every value typed by its step's options, every
mistake named with where it is."""

from __future__ import annotations

import pytest
import yaml

from support.cli import write
from oddnode.measure.plan import (
    CheckPlan,
    PlanError,
    layered_parameters,
    make_plan,
    parse_settings,
    plan_document,
    read_plan_file,
)


def test_settings_are_step_option_value_text():
    assert parse_settings(["memory.threads=1", "pairs.sizes = 0,1024", "memory.ntimes=3"]) == {
        "memory": {"threads": "1", "ntimes": "3"}, "pairs": {"sizes": "0,1024"}}
    for bad in ("memory.threads", "threads=1", ".threads=1", "memory.=1"):
        with pytest.raises(PlanError, match="a setting is STEP.OPTION=VALUE"):
            parse_settings([bad])


def test_later_layers_win_option_by_option():
    merged = layered_parameters({"memory": {"threads": 2, "ntimes": 4}}, {"memory": {"threads": 1}}, {"dgemm": {"n": 9}})
    assert merged == {"memory": {"threads": 1, "ntimes": 4}, "dgemm": {"n": 9}}


def test_a_plan_file_then_flags_then_settings(tmp_path):
    path = write(tmp_path / "plan.yaml", "stages: memory, compute\nrepetitions: 3\nskip: [hpl]\n"
                                        "steps:\n  memory: {threads: 2, ntimes: 4}\n  dgemm: {n: 2000}\n")
    plan = make_plan(read_plan_file(path), layered_parameters({"memory": {"threads": 8}},
                                                             parse_settings(["memory.threads=1"])),
                     repetitions=None, stages=None)
    assert plan.stages == ("memory", "compute") and plan.repetitions == 3 and plan.benchmarks("compute") == ["dgemm"]
    assert plan.options("memory").threads == 1 and plan.options("memory").ntimes == 4
    assert plan.options("dgemm").n == 2000
    assert make_plan(read_plan_file(path), repetitions=7).repetitions == 7  # a flag given beats the file


def test_the_shown_plan_reads_back_as_the_same_plan(tmp_path):
    plan = make_plan(parameters=parse_settings(["pairs.sizes=0,64", "matrix.retest=no"]), add=("matrix",),
                     repetitions=2)
    document = plan_document(plan)
    assert document["steps"]["matrix"]["retest"] is False and document["steps"]["pairs"]["sizes"] == [0, 64]
    assert document["steps"]["memory"]["ntimes"] == 10  # defaults spelled out
    path = write(tmp_path / "shown.yaml", yaml.safe_dump(document))
    again = make_plan(read_plan_file(path))
    assert plan_document(again) == document
    assert isinstance(again, CheckPlan) and again.options("pairs").sizes == (0, 64)


@pytest.mark.parametrize("text, message", [
    ("- memory\n", "a plan is a mapping"),
    ("stage: [memory]\n", "unknown key 'stage'"),
    ("steps: [memory]\n", "steps is a mapping of step names"),
    ("steps:\n  memory: {thread: 1}\n", "memory has no option 'thread'"),
    ("steps:\n  memroy: {threads: 1}\n", "no step named 'memroy'"),
    ("steps:\n  disk: {directory: tmp}\n", "absolute"),
    ("repetitions: 0\n", "repetitions must be >= 1"),
    ("stages: [memory]\nadd: [matrix]\n", "matrix belongs to the interconnect stage"),
    ("steps: {memory: {ntimes: [1, 2]}}\n", "memory.ntimes: wants a whole number"),
    ("stages: [memory\n", "not valid YAML"),
])
def test_a_bad_plan_file_is_refused_naming_what(tmp_path, text, message):
    path = write(tmp_path / "plan.yaml", text)
    with pytest.raises(PlanError, match=message):
        make_plan(read_plan_file(path))


def test_an_unreadable_plan_file_is_named(tmp_path):
    with pytest.raises(PlanError, match="cannot read plan file .*nosuch.yaml"):
        read_plan_file(tmp_path / "nosuch.yaml")
    assert read_plan_file(write(tmp_path / "empty.yaml", "")) == {}


# -- the command line ---------------------------------------------------------------------


def show_plan(*args):
    from typer.testing import CliRunner

    from oddnode.main import app

    return CliRunner().invoke(app, ["check", "--show-plan", *map(str, args)])


def test_flags_set_the_options_they_name_and_set_overrides_them(tmp_path):
    result = show_plan("--threads", 2, "--sizes", "0,1024", "--set", "dgemm.threads=4", "--with", "chain",
                       "--skip", "hpl", "-r", 3)
    assert result.exit_code == 0, result.output
    plan = yaml.safe_load(result.output)
    assert plan["repetitions"] == 3 and plan["add"] == ["chain"] and "hpl" not in plan["steps"]
    assert (plan["steps"]["memory"]["threads"], plan["steps"]["dgemm"]["threads"]) == (2, 4)
    assert plan["steps"]["pairs"]["sizes"] == [0, 1024] and plan["steps"]["chain"]["lengths"] is None
    path = write(tmp_path / "plan.yaml", result.output)
    again = show_plan("--plan", path, "--memory-ntimes", 5)
    assert yaml.safe_load(again.output)["steps"]["memory"] == {**plan["steps"]["memory"], "ntimes": 5}


def test_a_mistake_in_a_setting_is_a_usage_error_naming_it():
    result = show_plan("--set", "memory.thread=1")
    assert result.exit_code == 2 and "memory has no option 'thread'" in result.output
    result = show_plan("--with", "nosuch")
    assert result.exit_code == 2 and "no step named 'nosuch'" in result.output
