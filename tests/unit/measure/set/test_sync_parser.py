"""The sync kernel's parser on genuine outputs of both kernels, MPI and TCP
(tests/fixtures/mpi_sync), their failed checks, and broken output: every
refusal names what is wrong and where."""

from __future__ import annotations

import re

import pytest

from oddnode.measure.set.mpi_sync import parse_sync_run
from oddnode.parsers.oddnode_mpi_sync import RANK_COLUMNS, TOOL, parse_sync_output
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError, get_parser
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "mpi_sync"
NODES = ["cn-a17", "cn-b03", "gpu007"]
GOOD = ("mpi_np2.out", "mpi_np3.out", "mpi_np3_barrier_seconds.out", "mpi_np3_sleeping.out", "tcp_np3.out")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def rank_lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.startswith("rank ")]


@pytest.mark.parametrize("name", GOOD)
def test_genuine_outputs_give_the_sets_numbers_and_every_ranks(name):
    text = fixture(name)
    parsed = parse_sync_output(text, name)
    assert parsed.valid and parsed.problems == [] and parsed.tool == TOOL
    config = parsed.configuration
    ranks = config["processes"]
    assert config["nodes"] == NODES[:ranks] and config["ranks"] == ["vm"] * ranks
    assert config["transport"] == ("tcp" if name.startswith("tcp") else "mpi")
    assert config["operation"] == ("barrier" if "barrier" in name else "allreduce")
    table = config["rank_table"]
    assert [row["node"] for row in table] == NODES[:ranks]
    assert sum(row["last"] for row in table) == config["iterations"]
    # The rank lines, read as printed.
    for row, words in zip(table, rank_lines(text)):
        assert row["last"] == int(words[7]) and row["compute_median_us"] == float(words[3])
    by_metric = {m.metric: m for m in parsed.measurements}
    assert set(by_metric) == {"time", "efficiency", "compute", "wait", "extra_wait"}
    assert {m.benchmark for m in parsed.measurements} == {f"sync.{config['operation']}"}
    loop = next(line.split() for line in text.splitlines() if line.startswith("loop "))
    assert by_metric["time"].value == float(loop[3]) and by_metric["time"].direction is Direction.LOWER
    assert by_metric["efficiency"].unit == "%" and by_metric["efficiency"].direction is Direction.HIGHER
    assert 0 < by_metric["efficiency"].value < 100
    compute = sum(row["compute_total_us"] for row in table) / (ranks * config["iterations"])
    assert by_metric["compute"].value == pytest.approx(compute)
    extra = sum(row["extra_wait_us"] for row in table) / config["iterations"]
    assert by_metric["extra_wait"].value == pytest.approx(extra)
    # Every rank's numbers are stored once, with the time per iteration.
    assert by_metric["time"].parameters["rank_table"][0]["node"] == NODES[0]
    assert "rank_table" not in by_metric["wait"].parameters
    assert by_metric["time"].parameters["ranks"] == ranks


def test_the_seconds_run_says_how_long_it_was_asked_for_and_how_many_iterations_it_chose():
    config = parse_sync_output(fixture("mpi_np3_barrier_seconds.out"), "s").configuration
    assert config["seconds"] == 0.3 and config["iterations"] >= 10


def test_the_mpi_kernel_says_how_its_ranks_wait():
    assert parse_sync_output(fixture("mpi_np3.out"), "p").configuration["wait"].startswith("blocking")
    sleeping = parse_sync_output(fixture("mpi_np3_sleeping.out"), "s").configuration["wait"]
    assert sleeping == "non-blocking collective tested every 50 us, asleep in between"
    assert "wait" not in parse_sync_output(fixture("tcp_np3.out"), "t").configuration


def test_the_runner_report_carries_the_build_facts():
    parsed = parse_sync_run(fixture("mpi_np2_runner_report.json"), "report")
    assert parsed.valid
    assert parsed.configuration["built"] is True and parsed.configuration["cache_key"]
    assert parsed.configuration["nodes"] == NODES[:2]


def test_the_parser_is_registered_for_saved_outputs():
    parsed = get_parser("oddnode-mpi-sync")(fixture("tcp_np3.out"), "saved")
    assert parsed.configuration["kernel"] == "tcp_sync"


def test_a_wrong_sum_makes_the_run_invalid_and_names_every_rank_that_saw_it():
    parsed = parse_sync_output(fixture("mpi_np3_corrupt_rank1.out"), "corrupt")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    failures = parsed.configuration["validation_failures"]
    assert [(f["check"], f["rank"], f["bad"], f["iteration"]) for f in failures] == [
        ("allreduce", r, 1, 0) for r in range(3)]
    assert parsed.configuration["failing_nodes"] == sorted(NODES)
    assert "rank 0 on vm received a wrong sum in 1 of 200 iterations" in parsed.problems[0]


def test_a_rank_whose_work_differs_is_named_under_a_barrier():
    parsed = parse_sync_output(fixture("tcp_np3_barrier_corrupt_rank2.out"), "corrupt")
    assert not parsed.valid
    (failure,) = parsed.configuration["validation_failures"]
    assert failure["check"] == "work" and failure["rank"] == 2
    assert parsed.configuration["failing_nodes"] == ["gpu007"]
    assert "rank 2 on vm computed a checksum" in parsed.problems[0]


GENUINE = fixture("mpi_np3.out")


def replace_line(text: str, start: str, new: str | None) -> str:
    """The text with its first line starting with ``start`` replaced (None: removed)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(start))
    lines[at:at + 1] = [] if new is None else [new]
    return "\n".join(lines) + "\n"


def first_rank(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("rank 0 "))


def rank0_with(field: str, value) -> str:
    """GENUINE with one field of rank 0's line changed (``last``: its count plus ``value``)."""
    words = first_rank(GENUINE).split()
    at = 2 + RANK_COLUMNS.index(field)
    words[at] = str(int(words[at]) + value) if field == "last" else str(value)
    return replace_line(GENUINE, "rank 0 ", " ".join(words))


def loop_with(count: int) -> str:
    """GENUINE's loop line claiming ``count`` iterations, its time per iteration consistent."""
    seconds = float(next(line for line in GENUINE.splitlines() if line.startswith("loop ")).split()[2])
    return replace_line(GENUINE, "loop ", f"loop {count} {seconds:.6f} {1e6 * seconds / count:.3f}")


ITERATIONS = int(re.search(r"^# iterations: (\d+)$", GENUINE, re.M).group(1))


@pytest.mark.parametrize("text, message", [
    ("hello\n", "not oddnode sync kernel output"),
    (GENUINE + GENUINE.replace("mpi_sync", "tcp_sync"), "both the MPI and the TCP sync kernel's banners"),
    (GENUINE.replace("# oddnode mpi_sync kernel v1", "# oddnode mpi_sync kernel v2"), "unsupported kernel version"),
    (replace_line(GENUINE, "# transport:", "# transport: tcp"), "transport is mpi, not 'tcp'"),
    (replace_line(GENUINE, "# iterations:", None), "header lacks 'iterations'"),
    (replace_line(GENUINE, "# operation:", "# operation: alltoall"), "unknown operation 'alltoall'"),
    (replace_line(GENUINE, "# rank: 2", None), "names the nodes of 2 ranks, not of all 3"),
    (replace_line(GENUINE, "# rank: 1", "# rank: 1 vm"), "a rank line is '# rank: RANK HOST NODE'"),
    (replace_line(GENUINE, "# rank: 1", "# rank: 2 vm cn-b03"), "rank lines out of order"),
    (replace_line(GENUINE, "# rank: 1", "# rank: 1 vm cn-a17"), "a node holds two ranks"),
    (replace_line(GENUINE, "loop ", None), "a rank line before the loop line"),
    (replace_line(GENUINE, "loop ", "loop 400 0.9 1.0"), "is not 1.0 us each"),
    (loop_with(ITERATIONS - 1), f"not the header's {ITERATIONS}"),
    (replace_line(GENUINE, "rank 2 ", None), "rank lines for 2 of 3 ranks"),
    (replace_line(GENUINE, "rank 1 ", first_rank(GENUINE)), "rank line of rank 0 where rank 1 belongs"),
    (replace_line(GENUINE, "rank 0 ", "rank 0 1 2 3"), "a rank line has 9 fields"),
    (rank0_with("last", ITERATIONS), f"of {ITERATIONS} iterations"),
    (rank0_with("last", 1), f"last in {ITERATIONS + 1} iterations, not in each of the {ITERATIONS}"),
    (rank0_with("compute_total_us", -1), "implausible rank line"),
    (rank0_with("compute_max_us", 0.5), "implausible rank line"),
    (replace_line(GENUINE, "validation ok", None), "no validation line"),
    (GENUINE + "rank 0 1 1 1 1 1 1 1\n", "a line after the validation verdict"),
    (replace_line(GENUINE, "validation ok", "validation failed allreduce rank=0 host=vm"),
     "a validation failure is 'validation failed allreduce|work' with its fields"),
    (replace_line(GENUINE, "validation ok", "validation failed work rank=5 host=vm checksum=1 expected=2"),
     "rank=5 host=vm is not a rank of the header's"),
    (replace_line(GENUINE, "validation ok", "surprise"), "unexpected line in mpi_sync kernel output"),
])
def test_broken_output_is_refused_with_what_and_where(text, message):
    with pytest.raises(ParseError, match=re.escape(message)) as error:
        parse_sync_output(text, "broken.out")
    assert "broken.out" in str(error.value)


def test_rank_columns_are_the_kernels():
    assert len(rank_lines(GENUINE)[0]) == 2 + len(RANK_COLUMNS)
