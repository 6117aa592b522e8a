"""The profile model: size buckets and the derived numbers."""

import json

import pytest

from oddnode.readings.profile import (
    ZERO_BUCKET,
    Profile,
    RankProfile,
    bucket_label,
    bucket_range,
    communication_share,
    compute_times,
    histogram,
    imbalance,
    size_bucket,
    time_by_call,
    to_json,
)


@pytest.mark.parametrize(
    ("nbytes", "bucket"),
    [(0, ZERO_BUCKET), (1, 0), (2, 1), (3, 1), (4, 2), (1023, 9), (1024, 10), (1025, 10), (2047, 10), (2048, 11)],
)
def test_size_bucket_edges(nbytes, bucket):
    assert size_bucket(nbytes) == bucket


def test_every_size_lies_in_its_bucket_range():
    for nbytes in range(0, 5000):
        low, high = bucket_range(size_bucket(nbytes))
        assert low <= nbytes < high


def test_fractional_and_unknown_sizes():
    assert size_bucket(0.4) == ZERO_BUCKET  # a mean below one byte floors to 0
    assert size_bucket(1023.9) == 9
    assert size_bucket(None) is None
    assert bucket_range(None) is None
    with pytest.raises(ValueError, match="negative"):
        size_bucket(-1)
    with pytest.raises(ValueError, match="does not exist"):
        bucket_range(-2)


def test_bucket_labels():
    assert bucket_label(ZERO_BUCKET) == "0"
    assert bucket_label(0) == "1"
    assert bucket_label(1) == "[2,4)"
    assert bucket_label(10) == "[1K,2K)"
    assert bucket_label(20) == "[1M,2M)"
    assert bucket_label(None) == "?"


def _profile() -> Profile:
    """Three ranks on foreign host names with known answers.

    walls 10, 10, 10 s; MPI 2, 4, 1 s -> compute 8, 6, 9 (mean 23/3),
    imbalance 9 / (23/3) = 27/23, communication 7/30.
    """
    profile = Profile(tool="test", source="hand-made")
    for rank, host, alltoall_small, alltoall_large, barrier in (
        (0, "cn-a17", 0.5, 1.0, 0.5),
        (1, "cn-a18", 1.0, 2.5, 0.5),
        (2, "gpu003", 0.25, 0.5, 0.25),
    ):
        entry = profile.rank(rank)
        entry.host, entry.wall = host, 10.0
        entry.record("MPI_Alltoall", size_bucket(32), 100, alltoall_small, 0.05, 3200)
        entry.record("MPI_Alltoall", size_bucket(200_000), 10, alltoall_large, 0.3, 2_000_000)
        entry.record("MPI_Barrier", ZERO_BUCKET, 5, barrier, 0.2)
    return profile


def test_derived_numbers_on_a_hand_made_profile():
    profile = _profile()
    assert [r.rank for r in profile.ranks] == [0, 1, 2]
    assert time_by_call(profile) == pytest.approx({"MPI_Alltoall": 5.75, "MPI_Barrier": 1.25})
    assert list(time_by_call(profile)) == ["MPI_Alltoall", "MPI_Barrier"]
    assert compute_times(profile) == pytest.approx({0: 8.0, 1: 6.0, 2: 9.0})
    assert imbalance(profile) == pytest.approx(27 / 23)
    assert communication_share(profile) == pytest.approx(7 / 30)
    cells = histogram(profile)
    assert list(cells) == [("MPI_Alltoall", 5), ("MPI_Alltoall", 17), ("MPI_Barrier", ZERO_BUCKET)]
    small = cells[("MPI_Alltoall", 5)]
    assert (small.count, small.bytes) == (300, 9600)
    assert small.time == pytest.approx(1.75)
    assert cells[("MPI_Alltoall", 17)].max_time == pytest.approx(0.3)


def test_reported_mpi_time_wins_over_the_sum_of_calls():
    entry = RankProfile(rank=0, wall=10.0, mpi_time=3.0)
    entry.record("MPI_Send", 3, 10, 1.0, 0.2, 80)
    assert entry.time_in_mpi == 3.0
    assert entry.compute_time == 7.0


def test_calls_fold_into_one_cell():
    entry = RankProfile(rank=0)
    entry.record("MPI_Send", 3, 10, 1.0, 0.2, 80)
    entry.record("MPI_Send", 3, 5, 0.5, 0.4, 40)
    stats = entry.calls[("MPI_Send", 3)]
    assert (stats.count, stats.time, stats.max_time, stats.bytes) == (15, 1.5, 0.4, 120)


def test_empty_and_idle_profiles_give_none():
    empty = Profile(tool="test", source="x")
    assert imbalance(empty) is None
    assert communication_share(empty) is None
    idle = Profile(tool="test", source="x")
    idle.rank(0).mpi_time = 0.0
    assert imbalance(idle) is None


def test_to_json_is_serialisable_and_carries_the_derived_numbers():
    document = to_json(_profile())
    assert json.loads(json.dumps(document)) == document
    assert document["imbalance"] == pytest.approx(27 / 23)
    assert document["ranks"][0]["host"] == "cn-a17"
    assert document["ranks"][2]["compute_time"] == pytest.approx(9.0)
    barrier = [cell for cell in document["histogram"] if cell["call"] == "MPI_Barrier"][0]
    assert (barrier["bucket"], barrier["size_min"], barrier["size_max"]) == (-1, 0, 0)


def test_start_up_and_shut_down_are_outside_the_run_and_its_time_in_mpi():
    from oddnode.readings.profile import startup_time
    from oddnode.report.profile import summary_line

    profile = Profile(tool="oddnode", source="run")
    for r, init in enumerate((0.4, 0.6)):
        rank = profile.rank(r)
        rank.host, rank.wall = f"cn-a{17 + r}", 3.0
        rank.record("MPI_Init", None, 1, init, init)
        rank.record("MPI_Alltoall", 13, 10, 1.0, 0.2, 81920)
        rank.record("MPI_Finalize", None, 1, 0.0, 0.0)
    assert [rank.time_in_mpi for rank in profile.ranks] == [1.0, 1.0]
    assert time_by_call(profile) == {"MPI_Alltoall": 2.0}
    assert [call for call, _ in histogram(profile)] == ["MPI_Alltoall"]
    assert startup_time(profile) == pytest.approx(0.5)
    assert "start-up 500 ms a rank in MPI_Init (not counted)" in summary_line(profile)
    # The raw calls keep them, as the profiler counted them.
    assert ("MPI_Init", None) in profile.ranks[0].calls
