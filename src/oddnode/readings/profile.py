"""The profile of one MPI run: per rank, per MPI call and message size.

Message sizes are folded into power-of-two buckets: bucket ``k`` (k >= 0)
holds the sizes in [2^k, 2^(k+1)) bytes, so 1 B is bucket 0, 2-3 B bucket
1, 1024-2047 B bucket 10. A call that moved 0 bytes has its own bucket,
``ZERO_BUCKET`` (-1). A call whose size the source does not record (an
mpiP call site without sent bytes: Barrier, Wait, Irecv) is in bucket
``None``, shown as ``?``.

Times are in seconds, sizes in bytes. Everything here is plain data and
pure functions of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ZERO_BUCKET = -1
Bucket = int | None  # ZERO_BUCKET, k >= 0, or None for "size not recorded"
# Start-up and shut-down: outside the run's span (a rank's wall time runs
# from the end of MPI_Init to the start of MPI_Finalize), kept per rank but
# neither time in MPI nor communication.
OUTSIDE_RUN = frozenset({"MPI_Init", "MPI_Init_thread", "MPI_Finalize"})


def size_bucket(nbytes: float | None) -> Bucket:
    """The bucket of a message of ``nbytes`` bytes (None when unknown).

    ``int.bit_length() - 1`` is floor(log2(n)) for n >= 1, exact on integers
    (no floating-point log); a fractional size (a mean) is floored first.
    """
    if nbytes is None:
        return None
    if nbytes < 0:
        raise ValueError(f"message size {nbytes} is negative")
    whole = int(nbytes)
    if whole == 0:
        return ZERO_BUCKET
    return whole.bit_length() - 1


def bucket_range(bucket: Bucket) -> tuple[int, int] | None:
    """The sizes a bucket holds, [low, high) in bytes; None for unknown."""
    if bucket is None:
        return None
    if bucket == ZERO_BUCKET:
        return (0, 1)
    if bucket < 0:
        raise ValueError(f"bucket {bucket} does not exist")
    return (1 << bucket, 1 << (bucket + 1))


def bucket_label(bucket: Bucket) -> str:
    """A short label: ``0``, ``1``, ``[2,4)``, ``[1K,2K)``, ``?``."""
    span = bucket_range(bucket)
    if span is None:
        return "?"
    low, high = span
    if high - low == 1:
        return str(low)
    return span_label(low, high)


def span_label(low: int, high: int) -> str:
    """The sizes [low, high) in bytes, whole multiples of 1K, 1M and 1G
    written so: ``[1K,4K)``."""
    return f"[{_bytes(low)},{_bytes(high)})"


def _bytes(n: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


@dataclass
class CallStats:
    """One MPI call at one message-size bucket on one rank."""

    count: int = 0
    time: float = 0.0  # s, total over the calls
    max_time: float = 0.0  # s, the longest single call
    bytes: int = 0  # total bytes the calls sent

    def add(self, count: int, time: float, max_time: float, nbytes: int) -> None:
        """Fold more calls into these."""
        self.count += count
        self.time += time
        self.max_time = max(self.max_time, max_time)
        self.bytes += nbytes


@dataclass
class RankProfile:
    """One rank: its wall time, its time in MPI and its calls."""

    rank: int
    host: str | None = None
    wall: float = 0.0  # s
    mpi_time: float | None = None  # s; None: the sum of the calls' times
    cpu: float | None = None  # CPU time over wall time (1.0: one CPU busy throughout); None: not measured
    calls: dict[tuple[str, Bucket], CallStats] = field(default_factory=dict)

    def record(self, call: str, bucket: Bucket, count: int, time: float, max_time: float, nbytes: int = 0) -> None:
        """Add calls of ``call`` in ``bucket``."""
        self.calls.setdefault((call, bucket), CallStats()).add(count, time, max_time, nbytes)

    @property
    def time_in_mpi(self) -> float:
        """The time in MPI the source reports, else the sum of the calls."""
        if self.mpi_time is not None:
            return self.mpi_time
        return sum(stats.time for (call, _), stats in self.calls.items() if call not in OUTSIDE_RUN)

    @property
    def compute_time(self) -> float:
        """Wall time outside MPI (never below 0)."""
        return max(self.wall - self.time_in_mpi, 0.0)


@dataclass
class Profile:
    """One MPI run as a tool saw it."""

    tool: str  # "mpip", "itc", "oddnode"
    source: str  # the file it was read from
    ranks: list[RankProfile] = field(default_factory=list)
    command: str | None = None
    notes: list[str] = field(default_factory=list)  # what the reader assumed or skipped
    skipped: dict[str, int] = field(default_factory=dict)  # records not read, by kind

    def rank(self, rank: int) -> RankProfile:
        """The rank's profile, created when missing (ranks stay sorted)."""
        for existing in self.ranks:
            if existing.rank == rank:
                return existing
        created = RankProfile(rank)
        self.ranks.append(created)
        self.ranks.sort(key=lambda r: r.rank)
        return created


def time_by_call(profile: Profile) -> dict[str, float]:
    """Total time per MPI call over all ranks, the largest first (start-up
    and shut-down left out)."""
    totals: dict[str, float] = {}
    for rank in profile.ranks:
        for (call, _), stats in rank.calls.items():
            if call not in OUTSIDE_RUN:
                totals[call] = totals.get(call, 0.0) + stats.time
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def histogram(profile: Profile) -> dict[tuple[str, Bucket], CallStats]:
    """The call x size histogram: each cell summed over ranks (max of maxima),
    sorted by call, then bucket (unknown size last); start-up and shut-down
    left out."""
    cells: dict[tuple[str, Bucket], CallStats] = {}
    for rank in profile.ranks:
        for key, stats in rank.calls.items():
            if key[0] not in OUTSIDE_RUN:
                cells.setdefault(key, CallStats()).add(stats.count, stats.time, stats.max_time, stats.bytes)
    return dict(sorted(cells.items(), key=lambda item: (item[0][0], _bucket_order(item[0][1]))))


def _bucket_order(bucket: Bucket) -> int:
    return 1 << 62 if bucket is None else bucket


def startup_time(profile: Profile) -> float | None:
    """Mean over ranks of the time in MPI_Init (s); None where not recorded."""
    times = [sum(stats.time for (call, _), stats in rank.calls.items() if call in ("MPI_Init", "MPI_Init_thread"))
             for rank in profile.ranks
             if any(call in ("MPI_Init", "MPI_Init_thread") for call, _ in rank.calls)]
    return sum(times) / len(times) if times else None


def compute_times(profile: Profile) -> dict[int, float]:
    """Per rank, wall time minus time in MPI (s)."""
    return {rank.rank: rank.compute_time for rank in profile.ranks}


def imbalance(profile: Profile) -> float | None:
    """max/mean of the ranks' compute times: 1.0 is perfect balance, 1.5
    means the slowest rank computes 50% longer than the average one, and
    the others wait that long in MPI. None without compute time."""
    times = list(compute_times(profile).values())
    if not times:
        return None
    mean = sum(times) / len(times)
    if mean <= 0:
        return None
    return max(times) / mean


def communication_share(profile: Profile) -> float | None:
    """Time in MPI over wall time, summed over ranks (0..1); None without
    wall time."""
    wall = sum(rank.wall for rank in profile.ranks)
    if wall <= 0:
        return None
    return sum(rank.time_in_mpi for rank in profile.ranks) / wall


def _stats_json(call: str, bucket: Bucket, stats: CallStats) -> dict[str, Any]:
    span = bucket_range(bucket)
    return {
        "call": call,
        "bucket": bucket,
        "size_min": span[0] if span else None,
        "size_max": span[1] - 1 if span else None,
        "count": stats.count,
        "time": stats.time,
        "max_time": stats.max_time,
        "bytes": stats.bytes,
    }


def to_json(profile: Profile) -> dict[str, Any]:
    """The profile and its derived numbers as a JSON-ready dict."""
    return {
        "tool": profile.tool,
        "source": profile.source,
        "command": profile.command,
        "notes": list(profile.notes),
        "skipped": dict(profile.skipped),
        "ranks": [
            {
                "rank": rank.rank,
                "host": rank.host,
                "wall": rank.wall,
                "mpi_time": rank.time_in_mpi,
                "compute_time": rank.compute_time,
                "cpu": rank.cpu,
                "calls": [_stats_json(call, bucket, stats) for (call, bucket), stats in
                          sorted(rank.calls.items(), key=lambda i: (i[0][0], _bucket_order(i[0][1])))],
            }
            for rank in profile.ranks
        ],
        "time_by_call": time_by_call(profile),
        "histogram": [_stats_json(call, bucket, stats) for (call, bucket), stats in histogram(profile).items()],
        "imbalance": imbalance(profile),
        "communication_share": communication_share(profile),
    }
