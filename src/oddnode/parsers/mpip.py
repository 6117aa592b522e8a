"""Read an mpiP text report (``*.mpiP``, mpiP 3.x) into a Profile.

What is read:

* the header: ``@ Command :`` and ``@ MPI Task Assignment : RANK HOST``
  (the rank's host);
* ``@--- MPI Time (seconds) ---``: per task AppTime (the rank's wall time,
  MPI_Init to MPI_Finalize) and MPITime; the ``*`` aggregate row is checked
  for shape and skipped;
* ``@--- Callsite Time statistics (all, milliseconds): N ---``: per call
  site and rank Count, Max and Mean (ms). A rank's time in a call is
  Count x Mean; mpiP prints Mean with three significant digits, so that
  total carries the same precision. Call names get the ``MPI_`` prefix
  mpiP leaves out (``Allreduce`` -> ``MPI_Allreduce``);
* ``@--- Callsite Message Sent statistics (all, sent bytes) ---``: per call
  site and rank Count, Mean and Sum of the sent bytes.

Every other section (Callsites, the top-twenty aggregates, histograms,
I/O) is skipped.

Message sizes: mpiP keeps per call site and rank only the count, min,
mean, max and sum of the sizes, not their distribution. All calls of one
call site on one rank go to the bucket of that row's Mean (sizes are
bucketed by their mean per call site), and their bytes are the row's Sum.
A call site with no sent-bytes row (Recv, Wait, Barrier) goes to the
"size not recorded" bucket. Exact size histograms need oddnode's own
profiler, which records every call's size.

A report made with ``MPIP=-c`` (concise) or ``-d`` (no call site detail)
has no per-rank call rows and is refused with a message saying so.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from oddnode.core.inputs import InputError, quote, read_bytes
from oddnode.parsers.base import MAX_PROFILE_COUNT, MAX_PROFILE_SECONDS, MAX_RANK, ParseError, whole
from oddnode.readings.profile import Profile, size_bucket

_SECTION = re.compile(r"^@---\s+(.*?)\s*-*\s*$")
_HEADER_FIELD = re.compile(r"^@\s+(.*?)\s*:\s*(.*?)\s*$")
_RULE = re.compile(r"^-+\s*$")

_TIME_COLUMNS = ["Task", "AppTime", "MPITime", "MPI%"]
_CALL_TIME_COLUMNS = ["Name", "Site", "Rank", "Count", "Max", "Mean", "Min", "App%", "MPI%"]
_SENT_COLUMNS = ["Name", "Site", "Rank", "Count", "Max", "Mean", "Min", "Sum"]
_MS = 1e-3  # mpiP's call site times are in milliseconds
_MAX_MS = MAX_PROFILE_SECONDS / _MS


def _number(text: str, source: str, lineno: int, what: str, high: float = math.inf) -> float:
    """A finite number from 0 to ``high``: nan, inf and 1e999 are refused."""
    try:
        value = float(text)
    except ValueError:
        raise ParseError(source, lineno, f"{what}: expected a number, found {quote(text)}") from None
    if not (math.isfinite(value) and 0 <= value <= high):
        raise ParseError(source, lineno, f"{what}: {quote(text)} is not a finite number from 0 to {high:g}")
    return value


def _integer(text: str, source: str, lineno: int, what: str, limit: int = MAX_PROFILE_COUNT) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ParseError(source, lineno, f"{what}: expected a whole number, found {quote(text)}")
    return whole(text, source, lineno, what, limit=limit)


def _section_kind(title: str) -> str | None:
    if title.startswith("MPI Time"):
        return "time"
    if title.startswith("Callsite Time statistics"):
        return "calls"
    if title.startswith("Callsite Message Sent statistics"):
        return "sent"
    return None


def parse_mpip(text: str, source: str = "<mpiP report>") -> Profile:
    """The profile in an mpiP report's text; ParseError names the line."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or lines[first].strip() != "@ mpiP":
        raise ParseError(source, (first or 0) + 1, "not an mpiP report: the first line is not '@ mpiP'")
    profile = Profile(tool="mpip", source=source)
    hosts: dict[int, str] = {}
    app_times: dict[int, tuple[float, float]] = {}
    # (name, site, rank) -> (line, count, total s, max s) and -> (line, mean B, sum B)
    call_rows: dict[tuple[str, int, int], tuple[int, int, float, float]] = {}
    sent_rows: dict[tuple[str, int, int], tuple[int, float, float]] = {}
    seen: set[str] = set()
    section: str | None = None
    columns_seen = False
    for lineno, raw in enumerate(lines[first + 1 :], start=first + 2):
        line = raw.strip()
        if not line or _RULE.match(line):
            continue
        heading = _SECTION.match(line)
        if heading:
            section = _section_kind(heading.group(1))
            if section in seen:
                raise ParseError(source, lineno, f"second '{heading.group(1)}' section")
            if section:
                seen.add(section)
            columns_seen = False
            continue
        if section is None and line.startswith("@") and not seen:
            field = _HEADER_FIELD.match(line)
            if field and field.group(1) == "Command":
                profile.command = field.group(2)
            elif field and field.group(1) == "MPI Task Assignment":
                parts = field.group(2).split()
                if len(parts) != 2:
                    raise ParseError(source, lineno, f"task assignment {quote(field.group(2))} is not 'RANK HOST'")
                hosts[_integer(parts[0], source, lineno, "task assignment rank", MAX_RANK)] = parts[1]
            continue
        if section is None:
            continue
        tokens = line.split()
        expected = {"time": _TIME_COLUMNS, "calls": _CALL_TIME_COLUMNS, "sent": _SENT_COLUMNS}[section]
        if not columns_seen:
            if tokens != expected:
                raise ParseError(source, lineno,
                                 f"expected the column header {' '.join(expected)!r}, found {quote(line)}")
            columns_seen = True
            continue
        if section == "time":
            _time_row(tokens, source, lineno, app_times)
        elif section == "calls":
            _call_row(tokens, source, lineno, call_rows)
        else:
            _sent_row(tokens, source, lineno, sent_rows)

    if "time" not in seen:
        raise ParseError(source, None, "no '@--- MPI Time (seconds) ---' section")
    if "calls" not in seen or not call_rows:
        raise ParseError(
            source, None,
            "no per-rank rows in '@--- Callsite Time statistics' (a concise or no-detail report, "
            "MPIP=-c or -d, lacks them; rerun without those flags)",
        )
    for rank, (wall, mpi_time) in sorted(app_times.items()):
        entry = profile.rank(rank)
        entry.wall, entry.mpi_time, entry.host = wall, mpi_time, hosts.get(rank)
    for (name, site, rank), (lineno, count, total, longest) in call_rows.items():
        if rank not in app_times:
            raise ParseError(source, lineno, f"rank {rank} is not in the MPI Time table")
        sent = sent_rows.get((name, site, rank))
        bucket = size_bucket(sent[1]) if sent else None
        nbytes = round(sent[2]) if sent else 0
        profile.rank(rank).record(f"MPI_{name}", bucket, count, total, longest, nbytes)
    for (name, site, rank), (lineno, _, _) in sent_rows.items():
        if (name, site, rank) not in call_rows:
            raise ParseError(source, lineno, f"{name} site {site} rank {rank} has sent bytes but no time row")
    profile.notes.append("message sizes bucketed by the mean size per call site and rank (mpiP keeps no histogram)")
    return profile


def _time_row(tokens: list[str], source: str, lineno: int, out: dict[int, tuple[float, float]]) -> None:
    if len(tokens) != 4:
        raise ParseError(source, lineno, f"MPI Time row needs 4 columns (Task AppTime MPITime MPI%), found {len(tokens)}")
    app = _number(tokens[1], source, lineno, "AppTime", MAX_PROFILE_SECONDS)
    mpi = _number(tokens[2], source, lineno, "MPITime", MAX_PROFILE_SECONDS)
    _number(tokens[3], source, lineno, "MPI%")
    if tokens[0] == "*":
        return
    rank = _integer(tokens[0], source, lineno, "Task", MAX_RANK)
    if rank in out:
        raise ParseError(source, lineno, f"task {rank} appears twice in the MPI Time table")
    out[rank] = (app, mpi)


def _call_row(tokens: list[str], source: str, lineno: int, out: dict) -> None:
    if len(tokens) != len(_CALL_TIME_COLUMNS):
        raise ParseError(source, lineno, f"call site time row needs {len(_CALL_TIME_COLUMNS)} columns "
                         f"({' '.join(_CALL_TIME_COLUMNS)}), found {len(tokens)}")
    name = tokens[0]
    site = _integer(tokens[1], source, lineno, "Site")
    count = _integer(tokens[3], source, lineno, "Count")
    longest, mean = (_number(tokens[i], source, lineno, col, _MAX_MS) for i, col in ((4, "Max"), (5, "Mean")))
    for i in (6, 7, 8):
        _number(tokens[i], source, lineno, _CALL_TIME_COLUMNS[i])
    if tokens[2] == "*":
        return
    rank = _integer(tokens[2], source, lineno, "Rank", MAX_RANK)
    if (name, site, rank) in out:
        raise ParseError(source, lineno, f"{name} site {site} rank {rank} appears twice")
    out[(name, site, rank)] = (lineno, count, count * mean * _MS, longest * _MS)


def _sent_row(tokens: list[str], source: str, lineno: int, out: dict) -> None:
    if len(tokens) != len(_SENT_COLUMNS):
        raise ParseError(source, lineno, f"sent bytes row needs {len(_SENT_COLUMNS)} columns "
                         f"({' '.join(_SENT_COLUMNS)}), found {len(tokens)}")
    name = tokens[0]
    site = _integer(tokens[1], source, lineno, "Site")
    _integer(tokens[3], source, lineno, "Count")
    values = [_number(tokens[i], source, lineno, _SENT_COLUMNS[i], MAX_PROFILE_COUNT) for i in (4, 5, 6, 7)]
    if tokens[2] == "*":
        return
    rank = _integer(tokens[2], source, lineno, "Rank", MAX_RANK)
    if (name, site, rank) in out:
        raise ParseError(source, lineno, f"{name} site {site} rank {rank} appears twice")
    out[(name, site, rank)] = (lineno, values[1], values[3])


def read_mpip(path: str | Path) -> Profile:
    """Read an mpiP report file."""
    path = Path(path)
    try:
        text = read_bytes(path).decode("utf-8", errors="replace")
    except InputError as err:  # missing, unreadable, or not a regular file
        raise ParseError(str(path), None, f"cannot read: {err.detail}") from None
    return parse_mpip(text, str(path))
