"""Options taken together as one typed parameter: each field is an option of
its own on the command line, where the parameter stands, and the command
gets one instance of the values given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Optional

import pytest
import typer
from typer.testing import CliRunner

from oddnode.app.cli.option_groups import option_group, with_option_groups
from support.cli import invoke


@option_group
@dataclass(frozen=True)
class Window:
    """Two options that belong together."""

    first: Annotated[int, typer.Option(help="The first.")] = 1
    last: Annotated[Optional[int], typer.Option("--until", help="The last.")] = None


def command(name: Annotated[str, typer.Option()] = "x", window: Window = Window(),
            loud: Annotated[bool, typer.Option()] = False) -> None:
    typer.echo(f"{name} {window!r} {loud}")


def app_of(function) -> typer.Typer:
    app = typer.Typer()
    app.command()(with_option_groups(function))
    app.command("other")(lambda: None)  # two commands: the command is named
    return app


def test_each_field_is_an_option_in_the_group_s_place_and_the_command_gets_one_instance():
    runner = CliRunner()
    given = runner.invoke(app_of(command), ["command", "--name", "y", "--first", "3", "--until", "9", "--loud"])
    assert given.exit_code == 0, given.output
    assert given.output.strip() == "y Window(first=3, last=9) True"
    defaults = runner.invoke(app_of(command), ["command"])
    assert defaults.output.strip() == "x Window(first=1, last=None) False"
    shown = runner.invoke(app_of(command), ["command", "--help"], env={"COLUMNS": "200"}).output
    assert shown.index("--name") < shown.index("--first") < shown.index("--until") < shown.index("--loud")


def test_a_command_without_a_group_is_unchanged_and_a_field_named_like_an_option_is_refused():
    def plain(name: str = "x") -> None:
        pass

    assert with_option_groups(plain) is plain

    def clashing(first: int = 0, window: Window = Window()) -> None:
        pass

    with pytest.raises(ValueError, match="first"):
        with_option_groups(clashing)


def test_the_check_takes_its_plan_and_drain_options_as_groups():
    shown = invoke("check", "--show-plan", "-w", "n[1-4]", "--stages", "memory", "-r", "2", "--timeout", "9")
    assert shown.exit_code == 0, shown.output
    assert "repetitions: 2" in shown.output and "probe_timeout: 9.0" in shown.output
    refused = invoke("check", "--dry-run", "-w", "n1")
    assert refused.exit_code == 2 and "give both" in refused.text
