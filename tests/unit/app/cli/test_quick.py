"""The root help and the completion of a command's name are answered from
the index before typer loads (oddnode.app.cli.quick): byte for byte what
the command line itself prints, and nothing else is answered that way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import oddnode.main
from oddnode.app.cli import quick
from oddnode.command_index import COMMANDS, ROOT


def quick_answer(capsys, args, environ=None):
    status = quick.answer(args, COMMANDS, ROOT, environ or {}, program="oddnode")
    return status, capsys.readouterr().out


def typer_answer(args, env=None):
    result = CliRunner().invoke(oddnode.main.app, args, env=env, prog_name="oddnode")
    return result.exit_code, result.stdout


@pytest.mark.parametrize("args", [["--help"], ["-h"], []])
@pytest.mark.parametrize("columns", ["50", "80", "200"])
@pytest.mark.parametrize("colour", [False, True])
def test_the_root_help_is_the_command_lines_byte_for_byte(monkeypatch, capsys, args, columns, colour):
    environment = {"COLUMNS": columns, "FORCE_COLOR": "1" if colour else None,
                   "NO_COLOR": None, "TERMINAL_WIDTH": None}
    for name, value in environment.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    status, printed = quick_answer(capsys, args)
    assert (status, printed) == typer_answer(args)
    assert ("\x1b[" in printed) == colour and "check" in printed


def test_a_usage_line_click_would_wrap_is_left_to_the_command_line(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "50")
    assert quick.answer(["--help"], COMMANDS, ROOT, {}, program="a-very-long-name-for-the-oddnode-command") is None
    assert capsys.readouterr().out == ""


def completion_environments(incomplete: str, shell: str) -> dict[str, str]:
    words = f"oddnode {incomplete}"
    return {"bash": {"COMP_WORDS": words, "COMP_CWORD": "1"},
            "zsh": {"_TYPER_COMPLETE_ARGS": words},
            "fish": {"_TYPER_COMPLETE_ARGS": words, "_TYPER_COMPLETE_FISH_ACTION": "get-args"},
            "fish-is-args": {"_TYPER_COMPLETE_ARGS": words, "_TYPER_COMPLETE_FISH_ACTION": "is-args"},
            "powershell": {"_TYPER_COMPLETE_ARGS": words, "_TYPER_COMPLETE_WORD_TO_COMPLETE": incomplete},
            }[shell]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "fish-is-args", "powershell"])
@pytest.mark.parametrize("incomplete", ["", "c", "ch", "s", "zz"])
def test_a_command_name_completes_as_the_command_line_completes_it(capsys, shell, incomplete):
    environ = {"_ODDNODE_COMPLETE": f"complete_{shell.split('-')[0]}", **completion_environments(incomplete, shell)}
    assert quick_answer(capsys, [], environ) == typer_answer([], environ)


@pytest.mark.parametrize("args, environ", [
    (["check", "--help"], {}),
    (["--version"], {}),
    (["-q", "--help"], {}),
    (["stats"], {}),
    ([], {"_ODDNODE_COMPLETE": "complete_bash", "COMP_WORDS": "oddnode check --memory-m", "COMP_CWORD": "2"}),
    ([], {"_ODDNODE_COMPLETE": "complete_bash", "COMP_WORDS": "oddnode --ver", "COMP_CWORD": "1"}),
    ([], {"_ODDNODE_COMPLETE": "source_bash"}),
    ([], {"_ODDNODE_COMPLETE": "complete_tcsh", "COMP_WORDS": "oddnode ch", "COMP_CWORD": "1"}),
])
def test_anything_else_is_left_to_the_command_line(capsys, args, environ):
    assert quick_answer(capsys, args, environ) == (None, "")


def test_without_a_root_in_the_index_nothing_is_answered(capsys):
    assert quick.answer(["--help"], COMMANDS, None, {}, program="oddnode") is None
    assert capsys.readouterr().out == ""


@pytest.mark.slow
@pytest.mark.parametrize("args, environ", [
    (["--help"], {}),
    ([], {"_ODDNODE_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "oddnode ch"}),
])
def test_the_script_answers_without_loading_typer(args, environ):
    program = ("import json, sys\nsys.argv = ['oddnode', *sys.argv[1:]]\nimport oddnode.start\n"
               "try:\n    oddnode.start.main()\nexcept SystemExit:\n    pass\n"
               "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "80", **environ})
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "check" in done.stdout
    assert not {"typer", "click", "numpy", "oddnode.main"} & loaded, loaded
