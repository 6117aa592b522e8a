"""The testbed is the top layer: the command line (oddnode.app) reaches it
only through the provider the entry point (oddnode.main) registers for
--testbed (tests/unit/test_layers.py checks that app imports nothing of it)."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

import oddnode.main  # registers the testbed, before a test here takes it away and puts it back
from oddnode.app.cli import common
from oddnode.app.cli.root import build_app


@pytest.mark.parametrize("args", [["inventory", "--testbed"], ["check", "--testbed"],
                                  ["pairs", "--testbed"], ["sets", "--testbed"]])
def test_testbed_option_without_a_provider_says_none_is_loaded(monkeypatch, tmp_path, args):
    monkeypatch.setattr(common, "testbed_provider", None)
    monkeypatch.setattr(common, "testbed_loader", None)
    app = build_app()  # the command line alone, as a site might build it without the testbed
    result = CliRunner().invoke(app, [*args, "--db", str(tmp_path / "odd.duckdb")])
    assert result.exit_code == 3, result.output  # could not run, not a defect
    text = " ".join(result.output.split())
    assert "--testbed: no testbed support is loaded" in text and "Traceback" not in text
    assert "testbed" not in typer.main.get_command(app).commands


def test_the_entry_point_registers_the_testbed_and_its_commands():
    from oddnode.testbed.cli import TestbedProvider

    assert isinstance(common.loaded_testbed(), TestbedProvider)
    root = typer.main.get_command(oddnode.main.app)
    names = root.list_commands(typer.Context(root))
    assert names[-2:] == ["testbed", "config"]  # where the help has always listed it
