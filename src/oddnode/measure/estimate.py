"""How long a run will take, from its plan, before it starts.

A pair or set step runs in rounds: the pairs or sets of a round started
together, each round's results returned before the next.  A round costs its
start (the start lead of a synchronized round, MIN_LEAD at its least, and
the return of the results) and the measurements' own time.  A message size's
seconds are an upper bound its kernel keeps but for the batch under way
(kernels.md#time-budgets), so a size takes its seconds and one more round
trip; one too slow for its seconds takes a warm-up round trip and one
timed batch.  A node benchmark's time is its nodes' own: not estimated.  A round trip's time needs the link's rate: the slowest pair's
best bandwidth of earlier runs in the store, when it has any; else the
round trips are taken as short beside the seconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from dataclasses import dataclass, field

from oddnode.core.units import UnknownUnitError, base_scale, duration
from oddnode.measure.runner import LEAD_MARGIN, MIN_LEAD

# A round's start and end beyond its measurements: the start lead at its
# least (the nodes' runners start, then wait for the common moment) and the
# results' way back.
ROUND_SECONDS = MIN_LEAD + LEAD_MARGIN
# A step's preparation, once: every node checks its cached build (a fan-out
# and a compiler call), seconds more when it builds.
PREPARE_SECONDS = 3.0
# mpirun starting its ranks over ssh and their MPI_Init, per launch: 1-2 s
# measured with Open MPI 4.1 on two to twelve nodes.
MPI_START_SECONDS = 2.0
# A timed batch of the collectives kernel lasts at least this long
# (mpi_collectives.c's ODDNODE_MIN_BATCH_SECONDS).
COLLECTIVE_BATCH_SECONDS = 0.01


@dataclass(frozen=True)
class Estimate:
    """A step's estimated seconds and how they were reckoned, in words."""

    step: str
    seconds: float
    how: str

    def line(self) -> str:
        return f"{self.step}: about {duration(self.seconds)} ({self.how})"


def estimate_lines(estimates: Sequence[Estimate], unknown: Sequence[str] = ()) -> list[str]:
    """A run's estimate in lines: each step's, then their sum with the
    steps it leaves out, when there are several or some left out."""
    lines = [e.line() for e in estimates]
    if len(estimates) > 1 or unknown:
        total = f"in all about {duration(sum(e.seconds for e in estimates))}" if estimates else "no step estimated"
        lines.append(total + (f", besides {', '.join(unknown)} (not estimated)" if unknown else ""))
    return lines


def size_seconds(unit: float, seconds: float, batch: float = 0.0) -> float:
    """The time one message size takes whose round trip (or call) takes
    ``unit`` seconds: its ``seconds`` and the batch under way (at least
    ``batch`` long), or a warm-up round trip and one timed batch when those
    take longer than its seconds."""
    last = max(unit, batch)
    return max(seconds + last, unit + last)


def round_trip_seconds(size: int, link_bytes_per_s: float | None) -> float:
    """A ping-pong round trip of ``size`` bytes at the link's rate; 0 when
    the rate is not known."""
    return 2 * max(size, 1) / link_bytes_per_s if link_bytes_per_s else 0.0


def ping_seconds(sizes: Iterable[int], seconds: float, link_bytes_per_s: float | None) -> float:
    """A ping-pong client's measuring time over its sizes."""
    return sum(size_seconds(round_trip_seconds(size, link_bytes_per_s), seconds) for size in sizes)


def slowest_pair_rate(rates: Iterable[tuple[str, str, float]]) -> float | None:
    """The slowest pair's best bandwidth in bytes/s, of (pair, unit, best
    value) rows (a store's pair_rates); None without any in a unit of
    bandwidth."""
    best: dict[str, float] = {}
    for pair, unit, value in rates:
        try:
            dimension, scale = base_scale(unit)
        except UnknownUnitError:
            continue
        if dimension == "bandwidth":
            best[pair] = max(best.get(pair, 0.0), value * scale)
    return min(best.values()) if best else None


def rate_words(link_bytes_per_s: float | None) -> str:
    if not link_bytes_per_s:
        return "round trips short beside the seconds (no pair measured yet)"
    return f"round trips at the slowest measured pair's {link_bytes_per_s / 1e6:.3g} MB/s"


def rounds_estimate(step: str, rounds: int, per_round: float, launch: float, what: str,
                    prepares: int = 1) -> Estimate:
    """``rounds`` rounds of ``per_round`` measuring seconds, each launched
    for ``launch`` seconds more, after ``prepares`` preparations (one per
    pattern or ordering: each is a run of its own)."""
    seconds = prepares * PREPARE_SECONDS + rounds * (ROUND_SECONDS + launch + per_round)
    return Estimate(step, seconds, f"{rounds} rounds of {per_round:.3g} s measuring: {what}")


class BudgetSpent(Exception):
    """A run's time budget ran out: it stopped after the round under way,
    every round before it stored."""


@dataclass
class Budget:
    """A run's time budget (``--max-minutes``; None: none) and the estimate
    of its plan: a plan whose estimate exceeds it is refused before it
    starts, and the run stops after the round under way once it is spent
    (``stopped`` then says where)."""

    minutes: float | None = None
    estimates: Sequence[Estimate] = ()
    unknown: Sequence[str] = ()  # the steps left out of the estimate
    started: float = field(default_factory=time.monotonic)
    stopped: str | None = None

    def __post_init__(self) -> None:
        if self.minutes is not None and not (math.isfinite(self.minutes) and self.minutes > 0):
            raise ValueError(f"--max-minutes wants minutes above 0, not {self.minutes:g}")

    def to_json(self) -> dict[str, Any]:
        """The estimate, the budget and where it stopped the run, for a command's JSON document."""
        return {"steps": [{"step": e.step, "seconds": round(e.seconds, 1), "how": e.how} for e in self.estimates],
                "seconds": round(sum(e.seconds for e in self.estimates), 1), "not_estimated": list(self.unknown),
                "max_minutes": self.minutes, "stopped": self.stopped}

    def refuse(self, estimates: Sequence[Estimate]) -> None:
        """ValueError when the estimated steps alone take longer than the budget."""
        if self.minutes is None:
            return
        total = sum(e.seconds for e in estimates)
        if total > 60 * self.minutes:
            raise ValueError(f"the plan takes about {duration(total)} ({'; '.join(e.line() for e in estimates)}), "
                             f"over --max-minutes {self.minutes:g}: give fewer sizes, patterns or repetitions, "
                             "shorter --seconds-per-size, or more minutes")

    def spent(self) -> bool:
        return self.minutes is not None and time.monotonic() - self.started > 60 * self.minutes

    def watching(self, on_progress: Callable[[int, int], None] | None) -> Callable[[int, int], None]:
        """``on_progress(done, total)`` of a run, raising BudgetSpent after
        a round (stored by then) once the budget is spent and rounds remain."""
        def watched(done: int, total: int) -> None:
            if on_progress is not None:
                on_progress(done, total)
            if done < total and self.spent():
                raise BudgetSpent(f"the --max-minutes budget of {self.minutes:g} min was spent after round {done} "
                                  f"of {total}")
        return watched
