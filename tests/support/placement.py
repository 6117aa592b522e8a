"""Scripted MPI profiles and a placement model measured on two placements."""

from __future__ import annotations

from oddnode.readings.placement import Candidate, ModelRun, Point, select
from oddnode.readings.profile import Profile


def profile_of(cells: dict[tuple[str, int | None], tuple[int, float, int]], ranks: int = 4,
               hosts: list[str] | None = None) -> Profile:
    """Every rank with the same calls: (call, bucket) -> (count, seconds, bytes) per rank."""
    profile = Profile(tool="test", source="scripted")
    for r in range(ranks):
        rank = profile.rank(r)
        rank.host = hosts[r] if hosts else None
        rank.wall = 10.0
        for (call, bucket), (count, seconds, nbytes) in cells.items():
            rank.record(call, bucket, count, seconds, seconds / max(count, 1), nbytes)
    return profile


def a_model_run():
    """A model of 4 ranks (Alltoall 32 KiB, Sendrecv 1 KiB) measured on two placements: (selection, model)."""
    profile = profile_of({("MPI_Alltoall", 15): (100, 6.0, 100 * 32768), ("MPI_Sendrecv", 10): (400, 1.0, 409600)},
                         hosts=["r12-n001", "r12-n017", "r13-n001", "r12-n002"])
    selection = select(profile, coverage=1.0)
    packed = Candidate("packed", ("r12-n001", "r12-n002", "r12-n003", "r12-n004"), ("r12-sw1",))
    striped = Candidate("striped", ("r12-n001", "r12-n017", "r13-n001", "r12-n002"),
                        ("r12-sw1", "r12-sw2", "r13-sw1"), ("given",))
    fast = {Point("alltoall", 32768): 0.004, Point("sendrecv", 1024): 0.0002}
    slow = {Point("alltoall", 32768): 0.013, Point("sendrecv", 1024): 0.0003}
    model = ModelRun(3, [packed, striped], measured={"packed": {1: fast, 2: fast}, "striped": {1: slow, 2: slow}})
    model.predictions = {"packed": {1: 0.48, 2: 0.48}, "striped": {1: 1.42, 2: 1.42}}
    return selection, model
