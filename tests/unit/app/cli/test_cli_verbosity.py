"""-q and -v: quiet keeps the verdict, the problems and errors; verbose adds
each step's details and where the results are stored; the default says
what it always said."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from support.cli import invoke, write
from oddnode.app.cli import common
from oddnode.measure.runner import RunSummary


@pytest.fixture
def skewed_db(tmp_path):
    """Twelve nodes alike and node13 far below them."""
    plot = write(tmp_path / "plot.triad", "".join(f"{1000.0 + i} node{i:02d}\n" for i in range(1, 13))
                 + "10.0 node13\n")
    db = tmp_path / "v.duckdb"
    assert invoke("import", "stab", plot, "--db", db).exit_code == 0
    return db


@pytest.mark.slow
def test_analyze_quiet_gives_the_verdict_and_the_findings_only(skewed_db):
    default, quiet = invoke("analyze", "--db", skewed_db), invoke("-q", "analyze", "--db", skewed_db)
    assert default.exit_code == quiet.exit_code == 1  # not ready
    assert "%var" in default.text and default.text.count("NOT READY") == 2
    assert "NOT READY" in quiet.text and "node13" in quiet.text
    assert "%var" not in quiet.text and quiet.text.count("NOT READY") == 1
    assert "findings recorded" not in default.text


def test_analyze_verbose_says_where_the_findings_are_recorded(skewed_db):
    result = invoke("--verbose", "analyze", "--db", skewed_db)
    assert result.exit_code == 1 and f"findings recorded in {skewed_db}" in result.text
    assert "%var" in result.text  # everything the default shows


@pytest.mark.slow
def test_quiet_import_says_nothing(skewed_db, tmp_path):
    plot = write(tmp_path / "plot.copy", "1 n1\n2 n2\n")
    assert invoke("-q", "import", "stab", plot, "--db", skewed_db).output == ""
    assert "-> " in invoke("import", "stab", plot, "--db", skewed_db).output


def test_quiet_and_verbose_together_is_an_error(skewed_db):
    result = invoke("-q", "-v", "analyze", "--db", skewed_db)
    assert result.exit_code == 2 and "give one" in result.text


@pytest.mark.slow
def test_quiet_and_verbose_after_the_command_are_as_before_it(skewed_db):
    before, after = invoke("-q", "analyze", "--db", skewed_db), invoke("analyze", "--db", skewed_db, "-q")
    assert before.exit_code == after.exit_code == 1 and before.output == after.output
    assert "findings recorded" in invoke("analyze", "--db", skewed_db, "--verbose").text
    for args in (("-q", "analyze", "--db", skewed_db, "-v"), ("analyze", "-q", "--db", skewed_db, "-v")):
        result = invoke(*args)
        assert result.exit_code == 2 and "give one" in result.text


def test_h_is_help_for_the_command_line_its_commands_and_groups():
    for args in (("-h",), ("stats", "-h"), ("import", "-h"), ("import", "stab", "-h"), ("testbed", "up", "-h")):
        result = invoke(*args)
        assert result.exit_code == 0 and "Usage: oddnode" in result.output, args


def test_every_command_takes_q_and_v_but_profile_which_hands_them_to_its_application():
    import typer

    from oddnode.main import app

    def commands(group, path=()):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, (*path, name))
            else:
                yield (*path, name), {p.name for p in command.params}

    taking = {" ".join(path): "oddnode_quiet" in names and "oddnode_verbose" in names
              for path, names in commands(typer.main.get_command(app))}
    assert not taking.pop("profile") and all(taking.values()), [c for c, t in taking.items() if not t]


def run_pairs(level, tmp_path, down=()):
    from support.clusters.pairs import PairCluster, TWELVE

    return [*level, "pairs", "--patterns", "sort,cut", "-r", 1, "--sizes", "0,1,64,4096,65536",
            "--db", tmp_path / "p.duckdb"], PairCluster(weak="node03", down=down), TWELVE


@pytest.mark.slow
@pytest.mark.parametrize("level", [[], ["-q"], ["-v"]])
def test_pairs_at_each_level(scripted, tmp_path, level):
    args, cluster, nodes = run_pairs(level, tmp_path)
    scripted(cluster, nodes)
    result = invoke(*args)
    assert result.exit_code == 1, result.output
    assert "weak-pair-member" in result.text  # the finding, at every level
    run_lines = "sort: 6 pairs, 1 repetitions, run 1" in result.text
    table = "Pair patterns" in result.text
    stored = "results stored in" in result.text
    assert (run_lines, table, stored) == {(): (True, True, False), ("-q",): (False, False, False),
                                          ("-v",): (True, True, True)}[tuple(level)]


@pytest.mark.slow
def test_quiet_pairs_still_names_the_pairs_that_failed(scripted, tmp_path):
    args, cluster, nodes = run_pairs(["-q"], tmp_path, down=["node04"])
    scripted(cluster, nodes)
    result = invoke(*args)
    assert result.exit_code == 1, result.output  # a pair that failed is a problem found
    assert "sort: 1 pairs with failed or invalid runs: node03-node04" in result.text
    assert "6 pairs, 1 repetitions" not in result.text


def check_progress(verbosity, monkeypatch):
    """The check's observer at a verbosity, printing into a string, its
    bars on a stderr that is a terminal."""
    from oddnode.app.cli.check import _CheckProgress

    monkeypatch.setattr(common.output, "verbosity", verbosity)
    monkeypatch.setattr(common, "err_console", Console(file=io.StringIO(), force_terminal=True))
    out = io.StringIO()
    return _CheckProgress(Console(file=out, width=200, color_system=None)), out


def judged_stage():
    outcome = dict.fromkeys(("ok", "invalid", "failed", "unreachable", "timeout", "unavailable"), 0)
    return SimpleNamespace(name="memory", blocking=[], notes=["memory: 3 repetitions"],
                           runs={"memory": RunSummary(4, 3, {"node01": {**outcome, "ok": 3}})})


@pytest.mark.parametrize(("verbosity", "shown"), [
    (common.Verbosity.QUIET, []),
    (common.Verbosity.NORMAL, ["diagnostics: inventory of every node", "memory: consistent",
                               "  memory: 3 repetitions"]),
    (common.Verbosity.VERBOSE, ["diagnostics: inventory of every node", "memory: consistent",
                                "  memory: 3 repetitions", "  memory: run 4, 3 repetitions on 1 nodes: 3 ok"]),
])
def test_the_check_says_its_stages_by_default_nothing_quiet_and_every_run_verbose(monkeypatch, verbosity, shown):
    progress, out = check_progress(verbosity, monkeypatch)
    with progress:
        progress.stage_started("diagnostics")
        progress.stage_judged(judged_stage())
    assert progress.progress.disable is (verbosity is common.Verbosity.QUIET)
    assert [line.rstrip() for line in out.getvalue().splitlines() if line.strip()] == shown
