"""The command line run the two ways tests run it, and the files they give it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer


# The repository's root, and the genuine tool outputs the tests read.
REPOSITORY = Path(__file__).resolve().parents[2]
FIXTURES = REPOSITORY / "tests" / "fixtures"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def oddnode(*args, cwd, check=True, env=None, launcher=()) -> subprocess.CompletedProcess:
    """The command line run as a user runs it: a subprocess, 200 columns
    wide (``launcher``: what runs it, such as ``salloc -N8``)."""
    result = subprocess.run([*launcher, sys.executable, "-m", "oddnode", *map(str, args)], cwd=cwd, capture_output=True,
                            text=True, env={"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"oddnode {' '.join(map(str, args))} exited {result.returncode}:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def invoke(*args):
    """The command line in this process (typer's runner, 80 columns); the
    result's ``text`` is its output unwrapped, for matching phrases."""
    from typer.testing import CliRunner

    from oddnode.main import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    result.text = " ".join(result.output.split())
    return result


def cli_commands() -> list[tuple[str, ...]]:
    """Every command and sub-command path the command line has, but the
    ``import TOOL`` commands, which are one per parser."""
    found: list[tuple[str, ...]] = []

    def walk(command, path: tuple[str, ...]) -> None:
        for name, child in getattr(command, "commands", {}).items():
            if child.hidden or (path == ("import",) and name in parsers()):
                continue
            found.append((*path, name))
            walk(child, (*path, name))

    from oddnode.main import app
    from oddnode.parsers import parsers

    walk(typer.main.get_command(app), ())
    return found
