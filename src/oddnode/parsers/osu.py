"""OSU Micro-Benchmarks output (osu_latency, osu_bw, osu_bibw, collectives).

The test comes from the header line ("# OSU MPI Bandwidth Test v5.3" ->
``osu.bw``), the columns from the "# Size ..." line.  OSU's "MB/s" is 10^6
bytes/s: osu_bw computes ``size / 1e6 * iterations * window_size / t``, so it
is recorded unchanged as MB/s.  Latencies are in microseconds.

OSU's output does not say how many processes ran a collective: keep runs at
different process counts apart when importing (separate imports or labels).
A run that stopped with "This test requires ..." or under an MPI launcher's
abort banner is returned invalid with the reason in ``problems``.
"""

from __future__ import annotations

import re

from oddnode.core.model import Direction
from oddnode.core.inputs import quote
from oddnode.core.inputs import clip
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, number, whole
from oddnode.core.units import canonical_unit

_TITLE = re.compile(r"^#\s*(OSU\s+.*?\bTest)(?:\s+v(\S+))?\s*$", re.IGNORECASE)
_REFUSAL = re.compile(r"^(This test requires .*?)\s*$", re.MULTILINE)
_LAUNCHER_ABORT = re.compile(
    r"exited with non-zero status|exited on signal|MPI_ABORT was invoked|BAD TERMINATION", re.IGNORECASE)

# title (after "OSU MPI[-CUDA...]", before "Test") -> short name, as the binaries are named
_NAMES = {
    "latency": "latency",
    "bandwidth": "bw",
    "bi-directional bandwidth": "bibw",
    "multiple bandwidth / message rate": "mbw_mr",
    "multi-threaded latency": "latency_mt",
    "multi latency": "multi_lat",
    "all-to-all personalized exchange latency": "alltoall",
    "all-to-allv personalized exchange latency": "alltoallv",
    "broadcast latency": "bcast",
}

_US = canonical_unit("us")
# column (lower case, spaces removed) -> (metric stem, canonical unit, direction, source unit)
_COLUMNS: dict[str, tuple[str, str, Direction, str]] = {
    "latency(us)": ("latency", _US, Direction.LOWER, "us"),
    "avglatency(us)": ("latency", _US, Direction.LOWER, "us"),
    "minlatency(us)": ("latency_min", _US, Direction.LOWER, "us"),
    "maxlatency(us)": ("latency_max", _US, Direction.LOWER, "us"),
    "bandwidth(mb/s)": ("bandwidth", canonical_unit("MB/s"), Direction.HIGHER, "MB/s (10^6 B/s)"),
    "mb/s": ("bandwidth", canonical_unit("MB/s"), Direction.HIGHER, "MB/s (10^6 B/s)"),
    "messages/s": ("msg_rate", canonical_unit("msg/s"), Direction.HIGHER, "messages/s"),
    "overall(us)": ("overall", _US, Direction.LOWER, "us"),
    "compute(us)": ("compute", _US, Direction.LOWER, "us"),
    "purecomm.(us)": ("pure_comm", _US, Direction.LOWER, "us"),
    "overlap(%)": ("overlap", canonical_unit("%"), Direction.HIGHER, "%"),
}
_PARAMETER_COLUMNS = {"size": "bytes", "iterations": "iterations"}


def _short_name(title: str) -> str:
    """"OSU MPI Allreduce Latency Test" -> "allreduce"."""
    body = re.sub(r"^OSU\s+\S+\s+", "", title)  # "OSU MPI " / "OSU MPI-CUDA "
    body = re.sub(r"\s+Test$", "", body, flags=re.IGNORECASE).strip().lower()
    if body in _NAMES:
        return _NAMES[body]
    nonblocking = body.startswith("non-blocking ")
    body = re.sub(r"^non-blocking\s+", "", body)
    body = re.sub(r"\s+latency$", "", body)
    stem = re.sub(r"[^a-z0-9]+", "_", body).strip("_")
    return f"i{stem}" if nonblocking else stem


def _columns(header: str) -> list[str] | None:
    """The column keys of a "# Size  Avg Latency(us) ..." line, or None if it is not one."""
    names = [name for name in re.split(r"\s{2,}", header.lstrip("#").strip()) if name]
    keys = [re.sub(r"\s+", "", name).lower() for name in names]
    if keys and all(key in _COLUMNS or key in _PARAMETER_COLUMNS for key in keys) \
            and any(key in _COLUMNS for key in keys):
        return keys
    return None


def parse_osu(text: str, source: str) -> ParsedOutput:
    """Every row of one OSU benchmark's output as measurements."""
    lines = text.splitlines()
    problems = [f"OSU: {clip(m.group(1))}" for m in _REFUSAL.finditer(text)]
    if _LAUNCHER_ABORT.search(text):
        problems.append("MPI launcher reports that a process exited abnormally")
    title_at = next((i for i, line in enumerate(lines) if _TITLE.match(line.strip())), None)
    if title_at is None:
        if problems:  # a refused or aborted run: a failed run, not a malformed file
            return ParsedOutput(tool="osu", measurements=[], valid=False, problems=problems)
        raise ParseError(source, None, "not OSU output: no '# OSU ... Test' header line")
    title = _TITLE.match(lines[title_at].strip())
    name = _short_name(title.group(1))
    configuration: dict[str, object] = {"title": title.group(1), "version": title.group(2), "test": name}
    benchmark = f"osu.{name}"
    shown = clip(benchmark)  # in messages: a title is long only in a hostile file

    measurements: list[Measurement] = []
    columns: list[str] | None = None
    rows = 0
    for lineno, raw in enumerate(lines[title_at + 1:], start=title_at + 2):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            keys = _columns(line)
            if keys is not None:
                columns = keys
            elif ":" in line:
                key, _, value = line.lstrip("#").partition(":")
                configuration[key.strip().lower().replace(" ", "_")] = value.strip().rstrip(".")
            elif columns is None:
                raise ParseError(source, lineno, f"unknown OSU column header {quote(line)}")
            continue
        if columns is None or not re.match(r"^[-+]?\d", line):
            continue  # launcher or library chatter between rows
        fields = line.split()
        if len(fields) != len(columns):
            raise ParseError(source, lineno, f"{shown} row has {len(fields)} values for "
                                             f"{len(columns)} columns: truncated or not OSU output")
        row = {key: number(field, source, lineno, f"{shown} {key}") for key, field in zip(columns, fields)}
        parameters = {_PARAMETER_COLUMNS[key]: whole(value, source, lineno, f"{shown} {key}")
                      for key, value in row.items() if key in _PARAMETER_COLUMNS}
        size = parameters.get("bytes")
        for key, value in row.items():
            if key not in _COLUMNS:
                continue
            stem, unit, direction, source_unit = _COLUMNS[key]
            measurements.append(Measurement(
                benchmark=benchmark, value=value, unit=unit, direction=direction,
                metric=stem if size is None else f"{stem}.{size}",
                parameters={**parameters, "source_unit": source_unit},
            ))
        rows += 1
    if columns is None:
        raise ParseError(source, None, f"{shown}: no column header after the title line")
    if rows == 0:
        problems.append(f"{shown}: no result rows (the run stopped before its first size)")
    return ParsedOutput(tool="osu", measurements=measurements, valid=not problems,
                        problems=problems, configuration=configuration)
