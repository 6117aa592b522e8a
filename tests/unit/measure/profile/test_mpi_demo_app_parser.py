"""The demo application's parser on real outputs (tests/fixtures/mpi_demo_app)
and on broken ones: every rank's times, work and MPI calls, the check's
verdict, and clear errors naming the line."""

from __future__ import annotations


import pytest

from oddnode.measure.profile.demo_app import parse_demo_app_run, work_units_of
from oddnode.parsers.oddnode_mpi_demo_app import CALLS, TOOL, expected_calls, parse_demo_app_output
from oddnode.parsers import get_parser
from oddnode.parsers.base import ParseError
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "mpi_demo_app"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_two_ranks_read_with_their_times_and_calls():
    run = parse_demo_app_output(fixture("np2.out"), "np2.out")
    assert run.valid and not run.problems
    assert run.configuration["iterations"] == 20 and run.configuration["alltoall_every"] == 5
    assert run.configuration["hosts"] == ["vm", "vm"]
    assert [r.rank for r in run.ranks] == [0, 1]
    for rank in run.ranks:
        assert rank.calls == expected_calls(20, 5) == run.expected_calls()
        assert rank.calls["MPI_Sendrecv"] == 40 and rank.calls["MPI_Alltoall"] == 4
        assert 0 < rank.compute_s < rank.wall_s and rank.work_units == 200
    assert run.checksum == int(fixture("np2.out").split("checksum ")[1].split()[0], 16)


def test_the_runner_report_adds_the_build():
    run = parse_demo_app_run(fixture("np2_runner_report.json"), "report")
    assert run.valid and run.configuration["built"] is True and run.configuration["cache_key"]


def test_an_imbalanced_run_shows_each_rank_its_work():
    run = parse_demo_app_output(fixture("np3_imbalance3.out"), "imb")
    assert [r.work_units for r in run.ranks] == [work_units_of(r, 3, 200, 3.0) for r in range(3)] == [200, 500, 800]
    assert run.ranks[2].compute_s > 2 * run.ranks[0].compute_s


def test_validation_failures_name_receiver_and_sender():
    run = parse_demo_app_output(fixture("np3_corrupt_rank1.out"), "corrupt")
    assert not run.valid and len(run.problems) == 3
    assert run.problems[1].startswith("halo: rank 2 received bad data from rank 1 in 1 of 20 messages")


def test_the_registered_parser_gives_the_runs_numbers():
    parsed = get_parser(TOOL)(fixture("np3_imbalance3.out"), "imb")
    values = {m.metric: m for m in parsed.measurements}
    assert set(values) == {"wall", "comm_share", "compute_imbalance"}
    assert values["compute_imbalance"].value > 30 and 0 < values["comm_share"].value < 100
    assert len(values["wall"].parameters["rank_table"]) == 3
    assert not get_parser(TOOL)(fixture("np3_corrupt_rank1.out"), "c").valid


def replaced(old: str, new: str, name: str = "np2.out") -> str:
    text = fixture(name)
    assert old in text
    return text.replace(old, new, 1)


def line_of(text: str, start: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if line.startswith(start))


@pytest.mark.parametrize("text, match", [
    ("hello\n", "not oddnode mpi_demo_app kernel output"),
    (replaced("# iterations: 20\n", ""), "lacks 'iterations'"),
    (replaced("# rank: 1 vm\n", ""), "hosts of 1 ranks, not of all 2"),
    (replaced("calls 1 MPI_Gather 3\n", ""), "truncated .* no MPI_Gather count of rank 1"),
    (replaced("validation ok\n", ""), "truncated .* no validation line"),
    (fixture("np2.out").split("calls 0")[0], r"truncated .* and \d+ more"),
    (replaced("calls 0 MPI_Barrier 1", "calls 0 MPI_Bcast 1"), "one of MPI_Init"),
    (replaced("calls 1 MPI_Init 1", "calls 0 MPI_Init 1"), "a second one"),
    (replaced("calls 0 MPI_Sendrecv 40", "calls 0 MPI_Sendrecv forty"), "expected a whole number"),
    (replaced("validation ok", "validation ok\nrank 2 wall_s 1"), "after 'validation ok'"),
    (replaced("checksum 0x", "checksum zz"), "hexadecimal"),
])
def test_malformed_output_is_refused_with_its_line(text, match):
    with pytest.raises(ParseError, match=match):
        parse_demo_app_output(text, "bad.out")


def test_a_bad_rank_line_names_its_line_number():
    text = fixture("np2.out")
    lineno = line_of(text, "rank 1 ")
    broken = text.replace("rank 1 wall_s", "rank 1 wall", 1)
    with pytest.raises(ParseError, match=rf"bad.out:{lineno}: a rank line is"):
        parse_demo_app_output(broken, "bad.out")
    with pytest.raises(ParseError, match=rf"bad.out:{lineno}: a negative time"):
        parse_demo_app_output(text.replace("rank 1 wall_s 0", "rank 1 wall_s -0", 1), "bad.out")


def test_a_malformed_validation_failure_is_refused():
    text = fixture("np3_corrupt_rank1.out")
    with pytest.raises(ParseError, match="expected the fields rank, from_rank"):
        parse_demo_app_output(text.replace(" offset=512", "", 1), "bad.out")
    with pytest.raises(ParseError, match="no rank of the 3"):
        parse_demo_app_output(text.replace("rank=0 from_rank=1", "rank=7 from_rank=1", 1), "bad.out")
    with pytest.raises(ParseError, match="both 'validation ok' and validation failures"):
        parse_demo_app_output(text + "validation ok\n", "bad.out")


def test_the_call_formula():
    assert expected_calls(10, 3)["MPI_Alltoall"] == 3 and expected_calls(10, 0)["MPI_Alltoall"] == 0
    assert set(expected_calls(1, 1)) == set(CALLS)
