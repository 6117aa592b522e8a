"""Read an Intel Trace Collector ASCII dump (``xstftool FILE.stf --dump``)
into a Profile.

The only sample of the format at hand is the one quoted in Intel's StarCD
case study; this reader takes those record shapes and assumes the rest:

* Every record is ``TIMESTAMP KIND ...``, the timestamp in clock ticks. The
  quoted dump shows no header giving the tick length, so the caller passes
  ``ticks_per_second`` (the trace's clock resolution); times are
  ticks / ticks_per_second seconds. Timestamps are non-decreasing per
  process:thread.
* ``P:T`` (``ON 0:1``, ``CPU 0:1``) is process:thread; the process number
  is the MPI rank and the threads of a process add up into that rank.
* ``TS GLOBALOP NAME ON P:T COM COMM(SIZE) [ROOT R] SENT S RECVD R DURATION D``
  is one collective call, starting at TS and lasting D ticks: count 1,
  time D, bytes S (sent). Its message size, for the bucket, is the larger
  of SENT and RECVD, so that a Bcast's receivers fall in the same bucket
  as its root. Keys other than these are accepted and ignored.
* ``TS EXCHEXT CPU P:T DOWNTO|UPTO "CLASS:FUNCTION"`` changes the state of
  P:T to FUNCTION of CLASS. A state of class ``MPI`` lasts until the next
  state change on that P:T. An MPI state with a GLOBALOP of the same name
  inside it is that operation and is not counted again; one without (a
  Send, a Wait: the quoted dump shows no point-to-point records) counts as
  one call of that name lasting the state's time, size not recorded.
* A rank's wall time is the span from its first record's timestamp to its
  last record's end (TS + DURATION for an operation).
* Lines of other kinds are counted per kind and reported in the profile's
  notes, not fatal; blank lines and lines starting with ``#`` are skipped.
  A malformed record of a known kind is a ParseError naming the line.

The dump names no hosts; pass ``hosts`` (rank -> host) when they are known.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from oddnode.core.inputs import InputError, finite, quote, read_bytes
from oddnode.parsers.base import (
    MAX_PROFILE_COUNT, MAX_PROFILE_SECONDS, MAX_RANK, MAX_WHOLE, ParseError, number, whole,
)
from oddnode.readings.profile import Profile, size_bucket

_PLACE = re.compile(r"^(\d+):(\d+)$")
_EXCHEXT = re.compile(r'^CPU\s+(\S+)\s+(DOWNTO|UPTO)\s+"([^"]*)"$')
_REQUIRED = ("ON", "SENT", "RECVD", "DURATION")


@dataclass
class _OpenState:
    name: str
    start: int
    lineno: int
    covered: bool = False  # a GLOBALOP of this name fell inside it


def _place(text: str, source: str, lineno: int) -> tuple[int, int]:
    match = _PLACE.match(text)
    if not match:
        raise ParseError(source, lineno, f"expected PROCESS:THREAD, found {quote(text)}")
    return (whole(match.group(1), source, lineno, "process", limit=MAX_RANK),
            whole(match.group(2), source, lineno, "thread", limit=MAX_PROFILE_COUNT))


def _count(text: str, source: str, lineno: int, key: str, limit: int = MAX_PROFILE_COUNT) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ParseError(source, lineno, f"{key} needs a whole number, found {quote(text)}")
    return whole(text, source, lineno, key, limit=limit)


def parse_itc(
    text: str,
    source: str = "<ITC dump>",
    *,
    ticks_per_second: float,
    hosts: Mapping[int, str] | None = None,
) -> Profile:
    """The profile in an xstftool ASCII dump; ParseError names the line."""
    if not finite(ticks_per_second, "ticks_per_second") > 0:
        raise ValueError(f"ticks_per_second must be positive, not {ticks_per_second}")
    seconds = 1.0 / ticks_per_second

    def duration_s(ticks: int, lineno: int | None) -> float:
        """Ticks as seconds, refused past MAX_PROFILE_SECONDS (a tiny tick rate or a huge count)."""
        return number(ticks * seconds, source, lineno, f"{ticks} ticks in seconds",
                      low=0.0, high=MAX_PROFILE_SECONDS)

    profile = Profile(tool="itc", source=source)
    span: dict[int, list[int]] = {}  # rank -> [first tick, last tick]
    last_tick: dict[tuple[int, int], int] = {}
    open_states: dict[tuple[int, int], _OpenState] = {}
    unknown: dict[str, list[int]] = {}  # kind -> [count, first line]
    records = 0

    def touch(place: tuple[int, int], tick: int, end: int, lineno: int) -> None:
        previous = last_tick.get(place)
        if previous is not None and tick < previous:
            raise ParseError(source, lineno, f"timestamp {tick} goes back before {previous} on {place[0]}:{place[1]}")
        last_tick[place] = tick
        first_last = span.setdefault(place[0], [tick, end])
        first_last[0] = min(first_last[0], tick)
        first_last[1] = max(first_last[1], end)

    def close(place: tuple[int, int], tick: int) -> None:
        state = open_states.pop(place, None)
        if state is not None and not state.covered:
            time = duration_s(tick - state.start, state.lineno)
            profile.rank(place[0]).record(state.name, None, 1, time, time)

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if not (parts[0].isascii() and parts[0].isdigit()):
            raise ParseError(source, lineno,
                             f"expected a record starting with a timestamp in ticks, found {quote(line)}")
        if len(parts) < 3:
            raise ParseError(source, lineno, f"record {quote(line)} has no fields after its kind")
        tick, kind, rest = _count(parts[0], source, lineno, "timestamp", MAX_WHOLE), parts[1], parts[2]
        records += 1
        if kind == "GLOBALOP":
            tokens = rest.split()
            name, pairs = tokens[0], tokens[1:]
            if len(pairs) % 2:
                raise ParseError(source, lineno,
                                 f"GLOBALOP fields are KEY VALUE pairs; {quote(pairs[-1])} has no value")
            fields = dict(zip(pairs[::2], pairs[1::2]))
            missing = [key for key in _REQUIRED if key not in fields]
            if missing:
                raise ParseError(source, lineno, f"GLOBALOP {quote(name)} lacks {', '.join(missing)}")
            place = _place(fields["ON"], source, lineno)
            sent, received = (_count(fields[key], source, lineno, key) for key in ("SENT", "RECVD"))
            duration = _count(fields["DURATION"], source, lineno, "DURATION", MAX_WHOLE)
            time = duration_s(duration, lineno)
            touch(place, tick, tick + duration, lineno)
            profile.rank(place[0]).record(name, size_bucket(max(sent, received)), 1, time, time, sent)
            state = open_states.get(place)
            if state is not None and state.name == name:
                state.covered = True
        elif kind == "EXCHEXT":
            match = _EXCHEXT.match(rest)
            if not match:
                raise ParseError(source, lineno,
                                 f'EXCHEXT record is not CPU P:T DOWNTO|UPTO "CLASS:FUNCTION": {quote(line)}')
            place = _place(match.group(1), source, lineno)
            state_class, _, function = match.group(3).partition(":")
            if not function:
                raise ParseError(source, lineno, f"state {quote(match.group(3))} is not CLASS:FUNCTION")
            touch(place, tick, tick, lineno)
            close(place, tick)
            if state_class == "MPI":
                open_states[place] = _OpenState(function, tick, lineno)
        else:
            count_first = unknown.setdefault(kind, [0, lineno])
            count_first[0] += 1
    if not span:
        raise ParseError(source, None, "no GLOBALOP or EXCHEXT records: not an xstftool --dump output")
    for place, state in sorted(open_states.items()):
        if state.covered:  # its GLOBALOP was counted
            continue
        profile.notes.append(f"{state.name} on {place[0]}:{place[1]} entered at line {state.lineno} never left; not counted")
    for rank, (first, last) in span.items():
        entry = profile.rank(rank)
        entry.wall = duration_s(last - first, None)
        if hosts and rank in hosts:
            entry.host = hosts[rank]
    for kind, (count, first_line) in sorted(unknown.items()):
        profile.skipped[kind] = count
        profile.notes.append(f"skipped {count} {kind} record(s), first at line {first_line}")
    profile.notes.append(f"{records} records, {ticks_per_second:g} ticks per second")
    return profile


def read_itc(path: str | Path, *, ticks_per_second: float, hosts: Mapping[int, str] | None = None) -> Profile:
    """Read an xstftool ASCII dump file."""
    path = Path(path)
    try:
        text = read_bytes(path).decode("utf-8", errors="replace")
    except InputError as err:  # missing, unreadable, or not a regular file
        raise ParseError(str(path), None, f"cannot read: {err.detail}") from None
    return parse_itc(text, str(path), ticks_per_second=ticks_per_second, hosts=hosts)
