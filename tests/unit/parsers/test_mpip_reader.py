"""The mpiP report reader, on reports written in mpiP's documented layout."""


import pytest

from oddnode.parsers.base import ParseError
from oddnode.readings.profile import communication_share, histogram, imbalance, time_by_call
from oddnode.parsers.mpip import parse_mpip, read_mpip
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "mpip"
RING = FIXTURES / "ring_np2.mpiP"
HALO = FIXTURES / "halo_alltoall_np4.mpiP"


def test_two_rank_ring_known_answers():
    profile = read_mpip(RING)
    assert profile.tool == "mpip"
    assert profile.command == "./ring 1000"
    assert [(r.rank, r.host, r.wall, r.time_in_mpi) for r in profile.ranks] == [
        (0, "cn-a17", 12.0, 3.0),
        (1, "cn-a18", 12.0, 6.0),
    ]
    rank1 = profile.ranks[1].calls
    send = rank1[("MPI_Send", 13)]  # 8192 B = 2^13
    assert (send.count, send.bytes) == (1000, 8_190_000)  # Sum printed with 3 digits
    assert send.time == pytest.approx(2.0)  # 1000 calls x 2 ms
    assert send.max_time == pytest.approx(0.0061)
    recv = rank1[("MPI_Recv", None)]  # mpiP records no size for receives
    assert (recv.count, recv.bytes) == (1000, 0)
    assert recv.time == pytest.approx(3.5)
    assert rank1[("MPI_Allreduce", 3)].count == 10  # 8 B = 2^3
    assert time_by_call(profile) == pytest.approx({"MPI_Recv": 5.0, "MPI_Send": 3.0, "MPI_Allreduce": 1.0})
    assert imbalance(profile) == pytest.approx(9 / 7.5)  # compute 9 and 6 s
    assert communication_share(profile) == pytest.approx(9 / 24)


def test_four_ranks_several_call_sites():
    profile = read_mpip(HALO)
    assert [r.host for r in profile.ranks] == ["r2c07n3.cluster.example"] * 2 + ["r2c07n4.cluster.example"] * 2
    by_call = time_by_call(profile)
    assert list(by_call)[0] == "MPI_Alltoall"
    assert by_call["MPI_Alltoall"] == pytest.approx(17.9)
    assert by_call["MPI_Waitall"] == pytest.approx(3.7)
    assert sum(by_call.values()) == pytest.approx(24.0)  # the MPI Time table's total
    for rank in profile.ranks:  # the call sites add up to each rank's MPITime
        assert sum(s.time for s in rank.calls.values()) == pytest.approx(rank.time_in_mpi)
    cells = histogram(profile)
    # two Alltoall call sites, 32 B and 128 KiB: two buckets, as in the seed's chart
    assert cells[("MPI_Alltoall", 5)].count == 8000
    assert cells[("MPI_Alltoall", 5)].time == pytest.approx(9.0)
    assert cells[("MPI_Alltoall", 17)].count == 400
    assert cells[("MPI_Alltoall", 17)].time == pytest.approx(8.9)
    assert cells[("MPI_Isend", 12)].bytes == 4 * 16_400_000
    assert ("MPI_Waitall", None) in cells
    assert imbalance(profile) == pytest.approx(17 / 14)  # compute 12, 14, 13, 17 s
    assert communication_share(profile) == pytest.approx(0.3)
    assert any("mean size" in note for note in profile.notes)


def _broken(replace: str, by: str) -> str:
    text = RING.read_text()
    assert replace in text
    return text.replace(replace, by, 1)


def _line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize(
    ("replace", "by", "message"),
    [
        ("   1         12          6    50.00", "   1         12        six    50.00", "MPITime: expected a number"),
        ("Send                 1    1   1000      6.1", "Send                 1    1   1000", "needs 9 columns"),
        ("Recv                 2    0   1000", "Recv                 2    x   1000", "Rank: expected a whole number"),
        ("Allreduce            3    1      10         8", "Allreduce            3    1     -10         8", "Count"),
        ("Name              Site Rank  Count", "Name              Site Task  Count", "column header"),
        ("@ MPI Task Assignment      : 1 cn-a18", "@ MPI Task Assignment      : 1", "RANK HOST"),
    ],
)
def test_malformed_lines_name_file_and_line(replace, by, message):
    text = _broken(replace, by)
    with pytest.raises(ParseError, match=message) as caught:
        parse_mpip(text, "run.mpiP")
    assert caught.value.source == "run.mpiP"
    assert caught.value.line == _line_of(text, by)
    assert str(caught.value).startswith(f"run.mpiP:{caught.value.line}: ")


def test_error_line_numbers_are_exact():
    text = _broken("Recv                 2    1   1000     12.3", "Recv                 2    1   1000     oops")
    with pytest.raises(ParseError, match="Max: expected a number") as caught:
        parse_mpip(text, "run.mpiP")
    assert caught.value.line == _line_of(text, "oops")


def test_rank_missing_from_the_time_table():
    text = _broken("   1         12          6    50.00\n", "")
    with pytest.raises(ParseError, match="rank 1 is not in the MPI Time table") as caught:
        parse_mpip(text, "run.mpiP")
    assert caught.value.line == _line_of(text, "Send                 1    1")


def test_not_an_mpip_report():
    with pytest.raises(ParseError, match="not an mpiP report") as caught:
        parse_mpip("STREAM version $Revision: 5.10 $\n", "stream.out")
    assert caught.value.line == 1


def test_concise_report_is_refused_with_the_reason():
    text = "".join(
        line for line in RING.read_text().splitlines(keepends=True)
        if not (line.split()[2:3] in (["0"], ["1"]) and line.split()[0] in ("Send", "Recv", "Allreduce"))
    )
    with pytest.raises(ParseError, match="MPIP=-c or -d"):
        parse_mpip(text, "concise.mpiP")


def test_missing_time_table():
    text = RING.read_text().replace("@--- MPI Time (seconds)", "@--- MPI Tame (seconds)")
    with pytest.raises(ParseError, match="no '@--- MPI Time"):
        parse_mpip(text, "run.mpiP")


def test_unreadable_file(tmp_path):
    with pytest.raises(ParseError, match="cannot read"):
        read_mpip(tmp_path / "missing.mpiP")
