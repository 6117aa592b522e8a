"""The node runner's tool mode: an installed program run in a private
directory with its input files, its output and chosen files brought back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oddnode.reach.jobs import parse_tool_output, tool_argv
from oddnode.parsers.base import ParseError, ToolUnavailable


def run_on_this_node(argv: list[str], env: dict[str, str] | None = None) -> str:
    """Run a node argv here, with this interpreter in place of the node's python3."""
    argv = [sys.executable, *argv[1:]]
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=True)
    return completed.stdout


def test_tool_gets_its_files_and_its_collected_files_come_back(tmp_path):
    argv = tool_argv(
        "sh",
        ["-c", 'tr a-z A-Z < in.txt > out.txt; pwd; echo problem >&2; exit 3'],
        files={"in.txt": "hello\n"}, collect=["out.txt", "never.txt"], parent=str(tmp_path), timeout=30,
    )
    report = parse_tool_output("node01", run_on_this_node(argv))
    assert report.tool == "sh" and Path(report.tool_path).name == "sh"
    assert report.returncode == 3 and report.stderr == "problem\n"
    assert report.collected == {"out.txt": "HELLO\n", "never.txt": None}
    workdir = Path(report.stdout.strip())
    assert workdir.parent == tmp_path and workdir.name.startswith("oddnode-sh-")
    assert not workdir.exists(), "the private directory is removed"


def test_a_missing_tool_is_unavailable_not_a_failure():
    argv = tool_argv("oddnode-no-such-tool", [], timeout=30)
    with pytest.raises(ToolUnavailable, match="oddnode-no-such-tool is not installed"):
        parse_tool_output("node01", run_on_this_node(argv))


@pytest.mark.slow
def test_a_tool_cut_at_its_timeout_takes_its_children_along(tmp_path):
    marker = tmp_path / "child.pid"
    # The child outlives its parent shell unless the whole session is killed.
    script = f'sleep 30 & echo $! > {marker}; wait'
    argv = tool_argv("sh", ["-c", script], timeout=1)
    with pytest.raises(ParseError, match="did not finish in 1.0 s"):
        parse_tool_output("node01", run_on_this_node(argv))
    child = int(marker.read_text())
    assert not Path(f"/proc/{child}").exists() or "State:\tZ" in Path(f"/proc/{child}/status").read_text()


@pytest.mark.parametrize("name", ["../etc/passwd", ".hidden", ""])
def test_file_names_must_be_plain(name):
    argv = tool_argv("sh", ["-c", "true"], files={name: "x"}, timeout=30)
    with pytest.raises(ParseError, match="bad spec"):
        parse_tool_output("node01", run_on_this_node(argv))


def test_version_line_is_reported():
    argv = tool_argv("sh", ["-c", "true"], version_args=["-c", "echo tool 1.2; echo more"], timeout=30)
    report = parse_tool_output("node01", run_on_this_node(argv))
    assert report.tool_version == "tool 1.2" and report.returncode == 0


def test_garbage_is_a_parse_error():
    with pytest.raises(ParseError, match="not a kernel runner report"):
        parse_tool_output("node07", "Segmentation fault\n")
    incomplete = json.dumps({"runner_version": 1, "tool": "fio"})
    with pytest.raises(ParseError, match="incomplete tool report"):
        parse_tool_output("node07", incomplete)
