"""Text from input is text: benchmark, metric, unit, fact, group and MPI
call names holding rich markup print as they are, in every command that
shows them, and never end a command with a MarkupError (``[/bold]`` closes
nothing) or recolour its output."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from rich.text import Text

from support.cli import invoke
from oddnode.core.model import Direction, LabelKind
from oddnode.readings.profile import Profile
from oddnode.report.terminal import common_table, fit_columns, fixed_table
from oddnode.report.text import literal, literals
from oddnode.store import ResultBatch, open_store

CLOSING = "[/bold]"  # closes a tag never opened: a MarkupError when read as markup
COLOUR = "[red]x[/red]"  # would print a red x
LINK = "[link=/etc/passwd]y[/link]"  # would make a terminal hyperlink
# No ':' in a benchmark name: it separates a benchmark from its metric on the command line.
BENCHMARKS = (f"bench{CLOSING}", f"colour{COLOUR}", f"link{LINK}")
METRIC = f"rate{CLOSING}"
UNIT = f"MB/s{COLOUR}"
FACT_KEY, FACT_VALUES = f"bios{CLOSING}", (f"v{COLOUR}", f"w{LINK}")
GROUPS = (f"rack{CLOSING}", f"rack{COLOUR}")
SCRIPT = "<script>alert(1)</script>"
NODES = [f"cn-a{i:02d}" for i in range(1, 13)]
PAIRS = ("cn-a01-cn-a02", "cn-a03-cn-a04", "cn-a05-cn-a06")


def odd_batch(shift: float = 0.0) -> ResultBatch:
    """Three repetitions of every odd benchmark on every node, cn-a04 slow
    and cn-a06's second repetition failed; a pair pattern named oddly, with
    a time per message size, for fit."""
    batch = ResultBatch()
    for b, name in enumerate((*BENCHMARKS, SCRIPT)):
        for i, node in enumerate(NODES):
            for repetition in (1, 2, 3):
                value = 100.0 + shift + i * (b + 1) + repetition - (40 if node == "cn-a04" else 0)
                failed = node == "cn-a06" and repetition == 2
                batch.add(name, node, None if failed else value, metric=METRIC, unit=UNIT, repetition=repetition,
                          valid=not failed)
    for p, pair in enumerate(PAIRS):
        for size in (0, 1024, 65536, 1048576):
            batch.add(f"pingpong{COLOUR}", pair, 2.0 + p + size / 1000.0, metric=f"latency.{size}", unit="us",
                      direction=Direction.LOWER, label_kind=LabelKind.PAIR, repetition=1)
    return batch


@pytest.fixture
def odd_store(tmp_path):
    """A store of odd names: results, failed runs, facts, a topology and an MPI profile."""
    db = tmp_path / "odd.duckdb"
    profile = Profile(tool="mpiP", source=f"/tmp/{COLOUR}/app.mpiP", command=f"mpirun ./app{CLOSING}",
                      notes=[f"note {LINK}"])
    for rank, host in enumerate(("cn-a01", "cn-a02")):
        r = profile.rank(rank)
        r.host, r.wall, r.cpu = host, 10.0, 0.9
        r.record(f"MPI_Odd{CLOSING}", 1, 100, 2.0, 0.05, 32_000)
        r.record(f"MPI_Colour{COLOUR}", 2, 10, 1.0, 0.2, 1024)
    with open_store(db) as store:
        for shift in (0.0, 30.0):
            run = store.new_run(f"import {COLOUR}", source=f"/data/{CLOSING}")
            store.add_results(run, odd_batch(shift))
        store.add_facts(run, [(node, FACT_KEY, FACT_VALUES[i % 2]) for i, node in enumerate(NODES)])
        store.set_topology(run, {node: GROUPS[i % 2] for i, node in enumerate(NODES)})
        store.add_profile(profile)
    return db


def assert_plain(result, expected_status: int, *texts: str) -> None:
    """The command ended as it does on plain names, and printed each odd name as it is."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and "MarkupError" not in result.output, result.output
    assert result.exit_code == expected_status, result.output
    for text in texts:
        assert text in result.output, (text, result.output)


def test_literal_escapes_strings_and_paths_and_leaves_renderables():
    console = Console(width=200, record=True, color_system=None)
    console.print(f"[bold]{literal(BENCHMARKS[0])}[/] {literal(COLOUR)} {literal(LINK)}")
    assert console.export_text().strip() == f"{BENCHMARKS[0]} {COLOUR} {LINK}"
    text = Text(COLOUR)
    assert literal(text) is text and literal(None) is None
    assert literals(["a", 1]) == ["a", "1"]


def test_a_fixed_table_prints_cells_headers_title_and_caption_as_they_are():
    rows = [{"name": BENCHMARKS[0], COLOUR: UNIT}]
    shown, widths, _ = fit_columns(["name", COLOUR], rows, 80)
    table = fixed_table(f"title {CLOSING}", f"caption {LINK}", shown, widths, rows, {"name"})
    console = Console(width=80, record=True, color_system=None)
    console.print(table)
    out = console.export_text()
    for text in (BENCHMARKS[0], COLOUR, UNIT, f"title {CLOSING}", f"caption {LINK}"):
        assert text in out


@pytest.mark.slow
def test_stats_prints_every_odd_name(odd_store):
    result = invoke("stats", "--wide", "--db", odd_store)
    assert_plain(result, 0, *BENCHMARKS, METRIC, UNIT)


@pytest.mark.slow
def test_analyze_prints_findings_and_statistics_of_odd_names(odd_store):
    result = invoke("analyze", "--wide", "--db", odd_store)
    assert_plain(result, 1, *BENCHMARKS, FACT_KEY, *FACT_VALUES)


@pytest.mark.slow
def test_analyze_html_escapes_what_it_quotes(odd_store, tmp_path):
    html = tmp_path / "report.html"
    result = invoke("analyze", "--db", odd_store, "--html", html)
    assert_plain(result, 1)
    page = html.read_text(encoding="utf-8")
    assert SCRIPT not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "bench[/bold]" in page


@pytest.mark.slow
@pytest.mark.parametrize("command", ["dist", "findn"])
def test_a_one_benchmark_view_titles_it_as_it_is(odd_store, command):
    assert_plain(invoke(command, BENCHMARKS[0], "--db", odd_store), 0, BENCHMARKS[0], METRIC)


@pytest.mark.slow
def test_correlate_and_findc_name_both_sides(odd_store):
    assert_plain(invoke("correlate", BENCHMARKS[0], BENCHMARKS[1], "--db", odd_store), 0, BENCHMARKS[0], BENCHMARKS[1])
    assert_plain(invoke("findc", "--db", odd_store), 0, BENCHMARKS[2])


@pytest.mark.slow
def test_common_counts_the_failed_runs_of_odd_benchmarks(odd_store):
    assert_plain(invoke("common", "--db", odd_store), 0, "cn-a06")


@pytest.mark.slow
def test_compare_prints_odd_series_names(odd_store):
    result = invoke("compare", "1", "2", "--db", odd_store)
    assert_plain(result, 1 if result.exit_code == 1 else 0, BENCHMARKS[1])


@pytest.mark.slow
def test_diagnose_prints_odd_fact_keys_and_values(odd_store, tmp_path):
    expect = tmp_path / "expect.yaml"
    expect.write_text(f"'{FACT_KEY}': '{FACT_VALUES[0]}'\n", encoding="utf-8")
    assert_plain(invoke("diagnose", "--expect", expect, "--db", odd_store), 1, FACT_KEY)


@pytest.mark.slow
def test_profile_show_prints_odd_call_names(odd_store):
    result = invoke("profile", "--show", "1", "--db", odd_store)
    assert_plain(result, 0, f"MPI_Odd{CLOSING}", f"MPI_Colour{COLOUR}")


@pytest.mark.slow
def test_fit_names_an_odd_pattern(odd_store):
    result = invoke("fit", f"pingpong{COLOUR}", "--each", "--db", odd_store)
    assert_plain(result, 0)


def test_a_name_longer_than_the_terminal_folds_in_its_cell():
    long = "x" * 150 + CLOSING + "y" * 150
    table = common_table([(long, 3)])
    console = Console(width=80, record=True, color_system=None)
    console.print(table)
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert long in "".join(line.strip("│ ").split("│")[0].strip() for line in lines)


def test_stats_fits_a_long_odd_name_to_80_columns(tmp_path, monkeypatch):
    from oddnode.app.cli import common

    monkeypatch.setattr(common.console, "width", 80)  # a terminal's width, not a pipe's
    long = "bench" + COLOUR * 30
    batch = ResultBatch()
    for i, node in enumerate(NODES):
        batch.add(long, node, 100.0 + i, unit=UNIT)
    with open_store(tmp_path / "long.duckdb") as store:
        store.add_results(store.new_run("test"), batch)
    result = invoke("stats", "--db", tmp_path / "long.duckdb")
    assert_plain(result, 0)
    rows = [line for line in result.output.splitlines() if "│" in line]
    assert rows and all(len(line) <= 80 for line in rows)  # the caption below is a pipe's one line
    cells = "".join(line.strip("│ ").split("│")[0].strip() for line in rows)
    assert long in cells


@pytest.mark.slow
def test_a_sweep_setting_with_markup_prints_as_it_is(tmp_path, scripted):
    from support.clusters.sweep import FIXED, NODES as SWEEP_NODES, TunableCluster

    scripted(TunableCluster(), SWEEP_NODES)
    db = tmp_path / "sweep.duckdb"
    result = invoke("sweep", "memory", "--env", f"MEMORY_POLICY={COLOUR},interleave", "--set", FIXED[0],
                    "--set", FIXED[1], "-r", "2", "--seed", "1", "--db", db)
    assert_plain(result, 0, COLOUR)
    shown = invoke("sweep", "--stored", "latest", "--db", db)
    assert_plain(shown, 0, COLOUR)
    listed = invoke("sweep", "--list", "--json", "--db", db)
    assert json.loads(listed.stdout)[0]["step"] == "memory"


@pytest.mark.slow
def test_a_name_with_dollar_signs_is_not_mathtext_in_a_figure(tmp_path):
    name = "cost$\\nosuchsymbol{$"  # mathtext would refuse the unknown symbol
    batch = ResultBatch()
    for i, node in enumerate(NODES):
        batch.add(name, node, 100.0 + i + (30 if i == 3 else 0))
    db = tmp_path / "dollar.duckdb"
    with open_store(db) as store:
        store.add_results(store.new_run("test"), batch)
    assert_plain(invoke("dist", name, "--plot", tmp_path / "dist.svg", "--db", db), 0)
    assert (tmp_path / "dist.svg").exists()
    html = tmp_path / "report.html"
    result = invoke("analyze", "--db", db, "--html", html)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert name in html.read_text(encoding="utf-8")
