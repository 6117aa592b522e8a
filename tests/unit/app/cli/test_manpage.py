"""oddnode(1), written from the command line's help: every command is in
it, and man (or, without it, a check of its requests) reads it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import typer

from oddnode.app.cli.manpage import man_page, roff
from oddnode.main import app
from oddnode.manpage import main

# The roff requests the page may use (man(7) macros).
REQUESTS = {"TH", "SH", "SS", "TP", "PP", "RS", "RE", "B"}


def command_paths(command, path=("oddnode",)):
    """Every command and sub-command, as typed: ('oddnode', 'testbed', 'fault', 'hog')."""
    for name, child in getattr(command, "commands", {}).items():
        yield (*path, name)
        yield from command_paths(child, (*path, name))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("man") / "oddnode.1"
    main([str(out)])
    return out


@pytest.mark.slow
def test_every_command_and_sub_command_is_in_the_page_with_its_options(page):
    text = page.read_text(encoding="utf-8")
    paths = list(command_paths(typer.main.get_command(app)))
    assert len(paths) > 40 and ("oddnode", "switchbench", "alltoall") in paths
    for path in paths:
        assert f"\\fB{roff(' '.join(path))} [OPTIONS]" in text, path
    for option in ("--patterns", "--fail-on", "--state-dir", "--quiet", "--verbose"):
        assert roff(option) in text, option


def test_the_page_has_the_sections_of_a_man_page(page):
    text = page.read_text(encoding="utf-8")
    sections = re.findall(r"^\.SH (.+)$", text, flags=re.M)
    assert sections == ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT",
                        "FILES"]
    assert "ODDNODE_TESTBED_DIR" in text and "ODDNODE_DB" in text and "\\fB130\\fR" in text


def test_the_page_is_sane_roff(page):
    text = page.read_text(encoding="utf-8")
    assert text.isascii()  # other characters are written as groff escapes
    requests = [line[1:].split()[0] for line in text.splitlines() if line.startswith(".")]
    assert set(requests) <= REQUESTS, set(requests) - REQUESTS
    assert requests[0] == "TH" and requests.count("RS") == requests.count("RE")
    assert not any(line.startswith("'") for line in text.splitlines())
    assert roff(".hidden") == "\\&.hidden" and roff("a-b\\c") == "a\\-b\\ec" and roff("√") == "\\[u221A]"


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_man_reads_the_page_without_a_warning(page):
    env = {**os.environ, "MANWIDTH": "100", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    result = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "ODDNODE(1)" in result.stdout and "oddnode switchbench alltoall [OPTIONS]" in result.stdout
    assert "EXIT STATUS" in result.stdout


def test_the_page_module_wants_one_output_path():
    with pytest.raises(SystemExit, match="usage"):
        main([])
    assert man_page(app).startswith(".TH ODDNODE 1")


def test_the_shipped_page_is_the_one_the_help_writes(page):
    """docs/oddnode.1 is regenerated (make man) whenever a command or option changes."""
    from support.cli import FIXTURES

    shipped = FIXTURES.parents[1] / "docs" / "oddnode.1"
    assert shipped.read_text(encoding="utf-8") == page.read_text(encoding="utf-8"), "run make man"
