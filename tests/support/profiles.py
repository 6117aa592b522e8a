"""A scripted MPI profile of known calls, for the profile report and command."""

from __future__ import annotations

from oddnode.readings.profile import Profile


def scripted() -> Profile:
    """Two ranks, 10 s each: Alltoall at 32 B and 128 KiB, Barrier of unknown size.

    MPI: rank 0 2+2+1 = 5 s, rank 1 1+2+3 = 6 s, 11 s of 20 s (55.0%);
    compute 5 and 4 s, imbalance 5/4.5 = 1.11; Alltoall 7 s (63.6%), 2200
    calls, mean 3.18 ms, max 50 ms; Barrier 4 s (36.4%), 20 calls, mean
    200 ms, max 500 ms; CPU 95% and 85%, mean 90%."""
    profile = Profile(tool="oddnode", source="/tmp/run", command="mpirun -np 2 ./halo")
    zero, one = profile.rank(0), profile.rank(1)
    zero.host, zero.wall, zero.cpu = "cn-a17", 10.0, 0.95
    one.host, one.wall, one.cpu = "gpu[003-010]-x", 10.0, 0.85
    zero.record("MPI_Alltoall", 5, 1000, 2.0, 0.01, 32_000)
    zero.record("MPI_Alltoall", 17, 100, 2.0, 0.05, 13_107_200)
    zero.record("MPI_Barrier", None, 10, 1.0, 0.2)
    one.record("MPI_Alltoall", 5, 1000, 1.0, 0.01, 32_000)
    one.record("MPI_Alltoall", 17, 100, 2.0, 0.04, 13_107_200)
    one.record("MPI_Barrier", None, 10, 3.0, 0.5)
    profile.notes.append("rank 2 wrote no file")
    profile.skipped["COMMENT"] = 2
    return profile
