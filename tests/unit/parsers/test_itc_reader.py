"""The reader of Intel Trace Collector ASCII dumps (xstftool --dump)."""


import pytest

from oddnode.parsers.base import ParseError
from oddnode.parsers.itc import parse_itc, read_itc
from oddnode.readings.profile import ZERO_BUCKET, communication_share, compute_times, histogram, imbalance, time_by_call
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "itc"
DUMP = FIXTURES / "alltoall_np2.dump"
SEED = FIXTURES / "seed_bcast.dump"
US = 1e6  # the fixtures' clock: one tick is a microsecond


def test_the_records_quoted_in_the_case_study():
    profile = read_itc(SEED, ticks_per_second=US)
    (rank,) = profile.ranks
    assert rank.rank == 0  # "0:1" is process 0, thread 1
    bcast = rank.calls[("MPI_Bcast", 2)]  # SENT 4: bucket [4,8)
    assert (bcast.count, bcast.bytes) == (1, 4)
    assert bcast.time == pytest.approx(499e-6)
    assert rank.wall == pytest.approx(499e-6)  # 1998984 .. 1998984 + 499
    assert not any("never left" in note for note in profile.notes)  # its GLOBALOP counted it


def test_two_processes_known_answers():
    profile = read_itc(DUMP, ticks_per_second=US, hosts={0: "cn-a17", 1: "cn-a18"})
    assert [(r.rank, r.host) for r in profile.ranks] == [(0, "cn-a17"), (1, "cn-a18")]
    assert [r.wall for r in profile.ranks] == pytest.approx([0.5, 0.5])
    # rank 0: Bcast 499 + Alltoall 3x30 + 2000 + 2500 + Send 40 + Barrier 100 ticks
    assert profile.ranks[0].time_in_mpi == pytest.approx(5229e-6)
    # rank 1: 520 + 3x35 + 2100 + 2400 + Recv 60 + Iprobe 5 (thread 2) + 95
    assert profile.ranks[1].time_in_mpi == pytest.approx(5285e-6)
    cells = histogram(profile)
    assert cells[("MPI_Alltoall", 6)].count == 6  # 64 B
    assert cells[("MPI_Alltoall", 6)].time == pytest.approx(195e-6)
    assert cells[("MPI_Alltoall", 16)].count == 4  # 64 KiB
    assert cells[("MPI_Alltoall", 16)].time == pytest.approx(9000e-6)
    assert cells[("MPI_Alltoall", 16)].max_time == pytest.approx(2500e-6)
    assert cells[("MPI_Alltoall", 16)].bytes == 4 * 65536
    # the Bcast receiver (SENT 0 RECVD 4) shares the root's bucket; only sent bytes count
    assert (cells[("MPI_Bcast", 2)].count, cells[("MPI_Bcast", 2)].bytes) == (2, 4)
    assert cells[("MPI_Barrier", ZERO_BUCKET)].count == 2
    # MPI states without an operation record: counted, size not recorded
    assert cells[("MPI_Send", None)].time == pytest.approx(40e-6)
    assert cells[("MPI_Recv", None)].time == pytest.approx(60e-6)
    assert cells[("MPI_Iprobe", None)].count == 1
    assert ("MPI_Bcast", None) not in cells  # not counted twice
    assert list(time_by_call(profile))[0] == "MPI_Alltoall"
    assert compute_times(profile) == pytest.approx({0: 0.494771, 1: 0.494715})
    assert imbalance(profile) == pytest.approx(0.494771 / ((0.494771 + 0.494715) / 2))
    assert communication_share(profile) == pytest.approx((5229 + 5285) / 1e6)
    assert profile.skipped == {}


def test_tick_length_scales_every_time():
    slow = read_itc(DUMP, ticks_per_second=1e3)
    assert slow.ranks[0].wall == pytest.approx(500.0)
    with pytest.raises(ValueError, match="positive"):
        read_itc(DUMP, ticks_per_second=0)


def test_unknown_record_kinds_are_counted_not_fatal():
    text = DUMP.read_text() + "1500001 COUNTER CPU 0:1 VALUE 7\n1500002 COUNTER CPU 1:1 VALUE 9\n1500003 SENDMSG 0:1 1\n"
    profile = parse_itc(text, "x.dump", ticks_per_second=US)
    assert profile.skipped == {"COUNTER": 2, "SENDMSG": 1}
    assert any("2 COUNTER record(s), first at line 53" in note for note in profile.notes)
    assert profile.ranks[0].time_in_mpi == pytest.approx(5229e-6)


def test_mpi_state_left_open_is_reported():
    text = '100 EXCHEXT CPU 3:1 DOWNTO "MPI:MPI_Wait"\n'
    profile = parse_itc(text, "x.dump", ticks_per_second=US)
    assert profile.ranks[0].rank == 3
    assert profile.ranks[0].calls == {}
    assert any("MPI_Wait on 3:1 entered at line 1 never left" in note for note in profile.notes)


GOOD = "10 GLOBALOP MPI_Bcast ON 0:1 COM COMM_WORLD(2) ROOT 1 SENT 4 RECVD 0 DURATION 499"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("x10 GLOBALOP MPI_Bcast ON 0:1", "starting with a timestamp"),
        ("10 GLOBALOP", "no fields after its kind"),
        (GOOD.replace("ON 0:1", "ON rank0"), "expected PROCESS:THREAD"),
        (GOOD.replace(" DURATION 499", ""), "lacks DURATION"),
        (GOOD.replace("SENT 4", "SENT four"), "SENT needs a whole number"),
        (GOOD.replace("DURATION 499", "DURATION -3"), "DURATION needs a whole number"),
        (GOOD + " TAG", "has no value"),
        ('10 EXCHEXT CPU 0:1 SIDEWAYS "MPI:MPI_Send"', "DOWNTO|UPTO"),
        ('10 EXCHEXT CPU 0:1 DOWNTO "MPI_Send"', "not CLASS:FUNCTION"),
        ("5 GLOBALOP MPI_Barrier ON 0:1 COM COMM_WORLD(2) SENT 0 RECVD 0 DURATION 1", "goes back before 10"),
    ],
)
def test_malformed_records_name_file_and_line(bad, message):
    text = f"# dump\n{GOOD}\n\n{bad}\n{GOOD.replace('10 ', '900 ', 1)}\n"
    with pytest.raises(ParseError, match=message) as caught:
        parse_itc(text, "run.dump", ticks_per_second=US)
    assert caught.value.line == 4
    assert str(caught.value).startswith("run.dump:4: ")


def test_foreign_host_names_and_sparse_ranks():
    text = "\n".join([
        "0 GLOBALOP MPI_Allreduce ON 5:0 COM COMM_WORLD(2) SENT 8 RECVD 8 DURATION 10",
        "0 GLOBALOP MPI_Allreduce ON 12:0 COM COMM_WORLD(2) SENT 8 RECVD 8 DURATION 30",
        "100 EXCHEXT CPU 5:0 UPTO \"Application:main\"",
        "100 EXCHEXT CPU 12:0 UPTO \"Application:main\"",
    ])
    profile = parse_itc(text, "x.dump", ticks_per_second=1000, hosts={5: "cn-a17", 12: "gpu[003-010]"})
    assert [(r.rank, r.host) for r in profile.ranks] == [(5, "cn-a17"), (12, "gpu[003-010]")]
    assert compute_times(profile) == pytest.approx({5: 0.09, 12: 0.07})


def test_not_a_dump():
    with pytest.raises(ParseError, match="not an xstftool --dump output"):
        parse_itc("# nothing\n\n", "empty.dump", ticks_per_second=US)
    with pytest.raises(ParseError, match="cannot read"):
        read_itc(FIXTURES / "missing.dump", ticks_per_second=US)
