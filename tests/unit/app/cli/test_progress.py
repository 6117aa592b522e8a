"""A long command says how far it is on stderr at least every HEARTBEAT_S
seconds where stderr is a file or a pipe: the step, done of total, the
time in the step and about how long is left."""

from __future__ import annotations

import re
import time

import pytest
from rich.console import Console

from oddnode.app.cli import check as check_cli
from oddnode.app.cli import common, progress
from oddnode.app.cli.progress import Heartbeat, duration

PERIOD = 0.1  # seconds, for the tests: 30 in use


@pytest.fixture
def fast_heartbeat(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", PERIOD)


def progress_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("progress: ")]


@pytest.mark.slow
def test_a_standalone_command_says_its_progress_on_stderr_while_it_runs(fast_heartbeat, capsys):
    def run(on_progress):
        for done in range(4):
            on_progress(done, 4)
            time.sleep(4 * PERIOD)
        return "ran"

    assert common.progress_run("pairs sort on cn-[0001-0008]", run) == "ran"
    captured = capsys.readouterr()
    lines = progress_lines(captured.err)
    assert len(lines) >= 8, captured.err  # 1.6 s at one line per 0.1 s, with room for a slow machine
    assert lines[-1].startswith("progress: pairs sort on cn-[0001-0008], 3/4, ") and " left (" in lines[-1]
    assert progress_lines(captured.out) == []  # stdout keeps the results


@pytest.mark.slow
def test_no_progress_line_with_quiet(fast_heartbeat, capsys, monkeypatch):
    monkeypatch.setattr(common, "quiet", lambda: True)
    common.progress_run("matrix", lambda on_progress: time.sleep(5 * PERIOD))
    assert progress_lines(capsys.readouterr().err) == []


@pytest.mark.slow
def test_the_check_says_its_stage_and_benchmark(fast_heartbeat, capsys):
    with check_cli._CheckProgress(Console(file=open("/dev/null", "w"))) as observer:
        observer.stage_started("memory")
        time.sleep(3 * PERIOD)
        observer.benchmark_started("stream", 0, 3)
        observer.repetition_done("stream", 1, 3)
        time.sleep(3 * PERIOD)
    lines = progress_lines(capsys.readouterr().err)
    assert any(line.startswith("progress: the memory stage, ") for line in lines), lines
    assert any(line.startswith("progress: stream repetitions, 1/3, ") and "left" in line for line in lines), lines


def test_the_line_estimates_what_is_left_from_the_pace_of_the_step():
    beat = Heartbeat(Console(file=open("/dev/null", "w")))
    beat.update("sets shuffled", 2, 8)
    beat.step_started -= 60  # two of eight done in a minute: three more minutes
    beat.started -= 100
    line = beat.line()
    assert re.fullmatch(r"progress: sets shuffled, 2/8, 1 min 0[01] s in this step, about 3 min 0[0-3] s left "
                        r"\(1 min 4[01] s in all\)", line), line
    beat.update("sets sorted")  # a new step: its own clock, no estimate yet
    assert beat.line().startswith("progress: sets sorted, 0 s in this step (")


@pytest.mark.parametrize(("seconds", "said"), [(0, "0 s"), (59.4, "59 s"), (61, "1 min 01 s"),
                                                (3600 + 180, "1 h 03 min")])
def test_duration(seconds, said):
    assert duration(seconds) == said


def terminal(is_terminal: bool) -> Console:
    """A console written to memory that is, or is not, a terminal."""
    import io

    return Console(file=io.StringIO(), force_terminal=is_terminal, width=100)


@pytest.mark.slow
@pytest.mark.parametrize("stdout_is_terminal", [True, False])
def test_bars_go_to_stderr_on_a_terminal_and_stdout_keeps_the_results(monkeypatch, stdout_is_terminal):
    out, err = terminal(stdout_is_terminal), terminal(True)
    monkeypatch.setattr(common, "console", out)
    monkeypatch.setattr(common, "err_console", err)

    def run(on_progress):
        on_progress(1, 2)
        time.sleep(0.4)  # several refreshes of the bar
        common.inform("the result line")
        return "ran"

    assert common.progress_run("pairs sort on cn-[0001-0008]", run) == "ran"
    shown, results = err.file.getvalue(), out.file.getvalue()
    assert "pairs sort on cn-[0001-0008]" in shown and "pairs sort" not in results
    assert "the result line" in results and "the result line" not in shown
    assert progress_lines(shown) == []  # a terminal gets the bar, not the 30 s lines


def test_no_bar_where_stderr_is_no_terminal_and_the_check_says_its_stages_on_its_output(monkeypatch):
    out, err = terminal(False), terminal(False)
    monkeypatch.setattr(common, "console", out)
    monkeypatch.setattr(common, "err_console", err)
    with check_cli._CheckProgress(out) as observer:
        observer.stage_started("diagnostics")
        observer.benchmark_started("stream", 0, 3)
        observer.repetition_done("stream", 3, 3)
    assert "diagnostics: inventory of every node" in out.file.getvalue()
    assert "stream" not in out.file.getvalue() + err.file.getvalue()  # no bar, and no 30 s line yet
