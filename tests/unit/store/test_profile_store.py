"""MPI profiles in the store: round trip, listing, the upgrade from schema 7."""

from __future__ import annotations


import duckdb
import pytest

from oddnode.readings.profile import Profile
from oddnode.parsers.itc import read_itc
from oddnode.parsers.mpip import read_mpip
from oddnode.store import SCHEMA_VERSION, StoreError, open_store
from support.cli import FIXTURES



def scripted_profile() -> Profile:
    """Two ranks on foreign-looking hosts, every kind of bucket and optional field."""
    profile = Profile(tool="oddnode", source="/tmp/prof", command="mpirun -np 2 ./app",
                      notes=["rank 1 wrote no CPU time"], skipped={"COMMENT": 3})
    first = profile.rank(1)
    first.host, first.wall, first.mpi_time, first.cpu = "gpu003", 10.0, 4.0, None
    first.record("MPI_Alltoall", 15, 100, 2.5, 0.1, 3_276_800)
    first.record("MPI_Barrier", None, 7, 0.5, 0.25)
    first.record("MPI_Send", -1, 3, 0.001, 0.0005)
    zero = profile.rank(0)
    zero.host, zero.wall, zero.cpu = "cn-a17", 10.5, 0.97  # mpi_time None: the sum of the calls
    zero.record("MPI_Alltoall", 5, 1000, 1.25, 0.01, 32_000)
    return profile


def test_a_profile_comes_back_exactly(store):
    profile = scripted_profile()
    profile_id = store.add_profile(profile, command="oddnode profile -- mpirun -np 2 ./app")
    back = store.profile(profile_id)
    assert back == profile
    assert [r.rank for r in back.ranks] == [0, 1]
    assert back.ranks[1].calls[("MPI_Barrier", None)].count == 7
    assert back.ranks[1].calls[("MPI_Send", -1)].max_time == 0.0005
    assert back.ranks[0].mpi_time is None and back.ranks[1].cpu is None


def test_profiles_are_listed_with_their_run(store):
    assert store.profiles() == [] and store.latest_profile_id() is None
    first = store.add_profile(scripted_profile(), command="oddnode profile -- ./app")
    second = store.add_profile(read_mpip(FIXTURES / "mpip" / "halo_alltoall_np4.mpiP"))
    listed = store.profiles()
    assert [p.profile_id for p in listed] == [first, second] and store.latest_profile_id() == second
    assert (listed[0].tool, listed[0].command, listed[0].ranks, listed[0].hosts) == ("oddnode", "mpirun -np 2 ./app",
                                                                                     2, 2)
    assert listed[1].tool == "mpip" and listed[1].ranks == 4 and listed[1].hosts == 2 and listed[1].run_id is None
    (run,) = [r for r in store.runs() if r[0] == listed[0].run_id]
    assert run[2] == "oddnode profile -- ./app" and run[4] == "profile:oddnode"


def test_the_fixtures_round_trip(store):
    for profile in (read_mpip(FIXTURES / "mpip" / "ring_np2.mpiP"),
                    read_itc(FIXTURES / "itc" / "alltoall_np2.dump", ticks_per_second=1e6)):
        assert store.profile(store.add_profile(profile)) == profile


def test_an_empty_profile_and_a_missing_one(store):
    empty_id = store.add_profile(Profile(tool="itc", source="x"))
    assert store.profile(empty_id) == Profile(tool="itc", source="x")
    with pytest.raises(StoreError, match=rf"no profile 99 in .* \(its profiles: {empty_id}\)"):
        store.profile(99)


def test_an_empty_store_says_so(tmp_path):
    with open_store(tmp_path / "e.duckdb") as store:
        with pytest.raises(StoreError, match="holds none"):
            store.profile(1)


def test_a_failed_write_leaves_nothing(store):
    profile = scripted_profile()
    profile.ranks[0].calls[("MPI_Bcast", 3)] = object()  # type: ignore[assignment]
    with pytest.raises(AttributeError):
        store.add_profile(profile, command="oddnode import mpip x")
    assert store.profiles() == [] and store.runs() == []
    assert store.con.execute("SELECT count(*) FROM profile_ranks").fetchall()[0][0] == 0


@pytest.mark.slow
def test_a_schema_7_store_gets_the_profile_tables(tmp_path):
    path = tmp_path / "v7.duckdb"
    open_store(path).close()
    con = duckdb.connect(str(path))
    for table in ("profiles", "profile_ranks", "profile_calls"):
        con.execute(f"DROP TABLE {table}")
    con.execute("DROP SEQUENCE profile_ids")
    con.execute("ALTER TABLE process_counts DROP COLUMN parents")  # schema 9's
    con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    con.close()
    with open_store(path, read_only=True) as store:
        assert store.con.execute("SELECT value FROM meta").fetchall()[0][0] == str(SCHEMA_VERSION)
        assert store.profiles() == []
    with open_store(path) as store:
        profile_id = store.add_profile(scripted_profile())
        assert profile_id == 1 and store.profile(profile_id) == scripted_profile()
