"""Intel MPI Benchmarks (IMB-MPI1) output: one table per "# Benchmarking"
block, one series per benchmark, process count, column and message size.

IMB 2021's "Mbytes/sec" is 10^6 bytes/s: the column equals #bytes / t[usec]
(PingPong, 4194304 B in 410.42 us -> 10219.55), i.e. bytes per microsecond,
so it is recorded unchanged as MB/s.  Times are in microseconds.

A benchmark IMB refuses to run ("!! Benchmark PingPong invalid for 1
processes !!") and a run that never reaches "All processes entering
MPI_Finalize" make the whole output invalid, with the reason in ``problems``;
an output with no numbers at all but such a reason is returned (invalid,
empty) so that the importer records a failed run of that label.
"""

from __future__ import annotations

import re

from oddnode.core.model import Direction
from oddnode.core.inputs import clip
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, number, whole
from oddnode.core.units import canonical_unit

_BANNER = re.compile(r"Intel\(R\) MPI Benchmarks\s+(\S+?),?\s+(.*?)\s*$")
_BENCHMARKING = re.compile(r"^#\s*Benchmarking\s+(\S+)\s*$")
_PROCESSES = re.compile(r"^#\s*#processes\s*=\s*(\d+)")
_WAITING = re.compile(r"^#\s*\(\s*(\d+)\s+additional process(?:es)? waiting in MPI_Barrier\s*\)")
# "!! Benchmark PingPong invalid for 1 processes !!": the text between the
# marks, told by its first word (a pattern with spaces on both sides of the
# text backtracks in cubic time on a long line of spaces).
_INVALID = re.compile(r"!!([^!]*)!!")
_CALLING = re.compile(r"^# Calling sequence was:\s*\n(?:\s*\n)*#\s*(\S.*)$", re.MULTILINE)
_FINALIZE = "All processes entering MPI_Finalize"

# column header -> (metric stem, canonical unit, direction); "#bytes" and
# "#repetitions" are parameters, unknown columns are skipped by position.
_COLUMNS: dict[str, tuple[str, str, Direction]] = {
    "t[usec]": ("latency", canonical_unit("usec"), Direction.LOWER),
    "t_min[usec]": ("t_min", canonical_unit("usec"), Direction.LOWER),
    "t_max[usec]": ("t_max", canonical_unit("usec"), Direction.LOWER),
    "t_avg[usec]": ("t_avg", canonical_unit("usec"), Direction.LOWER),
    "Mbytes/sec": ("bandwidth", canonical_unit("MB/s"), Direction.HIGHER),
    "Msg/sec": ("msg_rate", canonical_unit("msg/s"), Direction.HIGHER),
}
_SOURCE_UNITS = {"usec": "usec", "Mbytes/sec": "Mbytes/sec (10^6 B/s)", "Msg/sec": "Msg/sec"}
_TWO_RANK_TESTS = {"pingpong", "pingping"}  # always exactly 2 active ranks: no ".npN"


def _benchmark_name(name: str, processes: int) -> str:
    stem = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if stem in _TWO_RANK_TESTS and processes == 2:
        return f"imb.{stem}"
    return f"imb.{stem}.np{processes}"


def parse_imb(text: str, source: str) -> ParsedOutput:
    """Every table of an IMB-MPI1 output as measurements."""
    lines = text.splitlines()
    configuration: dict[str, object] = {}
    for line in lines:
        banner = _BANNER.search(line)
        if banner:
            configuration["version"] = banner.group(1)
            configuration["part"] = banner.group(2)
            break
    else:
        raise ParseError(source, None, "not IMB output: no 'Intel(R) MPI Benchmarks' banner")

    calling = _CALLING.search(text)
    if calling:
        configuration["calling_sequence"] = calling.group(1).strip()

    measurements: list[Measurement] = []
    problems: list[str] = []
    name: str | None = None
    processes: int | None = None
    waiting = 0
    columns: list[str] | None = None
    rows_in_block = 0
    blocks: list[tuple[str, int, int]] = []  # (name, processes, rows) to spot empty tables

    def close_block() -> None:
        if name is not None and processes is not None:
            blocks.append((name, processes, rows_in_block))

    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line.startswith("# MPI Version"):
            configuration["mpi_version"] = clip(line.partition(":")[2].strip())
        invalid = _INVALID.search(line)
        if invalid and invalid.group(1).split(None, 1)[:1] == ["Benchmark"]:
            problems.append(f"IMB: {clip(invalid.group(1).strip())}")
            continue
        started = _BENCHMARKING.match(line)
        if started:
            close_block()
            # The name is cut short for messages: only a hostile file has a long one.
            name, processes, waiting, columns, rows_in_block = clip(started.group(1)), None, 0, None, 0
            continue
        if name is None:
            continue
        found = _PROCESSES.match(line)
        if found:
            if processes is not None:  # a second process count within the block: IMB never writes that
                raise ParseError(source, lineno, f"second '#processes' line in the {name} block")
            processes = whole(found.group(1), source, lineno, "#processes")
            continue
        found = _WAITING.match(line)
        if found:
            waiting = whole(found.group(1), source, lineno, "waiting processes")
            continue
        if line.startswith("#bytes") or line.startswith("#repetitions"):
            if processes is None:
                raise ParseError(source, lineno, f"table of {name} before its '#processes' line")
            columns = line.split()
            continue
        if columns is None or not line or line.startswith("#"):
            if line.startswith("#") and columns is not None:
                columns = None  # a comment ends the table
            continue
        fields = line.split()
        if len(fields) != len(columns):
            raise ParseError(source, lineno,
                             f"{name} row has {len(fields)} values for {len(columns)} columns "
                             f"({clip(' '.join(columns))}): truncated or not IMB output")
        row = {column: number(field, source, lineno, f"{name} {column}") for column, field in zip(columns, fields)}
        size = whole(row["#bytes"], source, lineno, f"{name} #bytes") if "#bytes" in row else None
        benchmark = _benchmark_name(name, processes)
        parameters: dict[str, object] = {"processes": processes}
        if waiting:
            parameters["waiting_processes"] = waiting
        if size is not None:
            parameters["bytes"] = size
        if "#repetitions" in row:
            parameters["repetitions"] = whole(row["#repetitions"], source, lineno, f"{name} #repetitions")
        for column, value in row.items():
            if column not in _COLUMNS:
                continue
            stem, unit, direction = _COLUMNS[column]
            if stem in ("bandwidth", "msg_rate") and size == 0:
                continue  # a rate over 0 bytes is 0 by definition, not a measurement
            source_unit = _SOURCE_UNITS["usec" if column.endswith("[usec]") else column]
            measurements.append(Measurement(
                benchmark=benchmark,
                value=value,
                unit=unit,
                direction=direction,
                metric=stem if size is None else f"{stem}.{size}",
                parameters={**parameters, "source_unit": source_unit},
            ))
        rows_in_block += 1
    close_block()

    for block_name, block_processes, rows in blocks:
        if rows == 0:
            problems.append(f"IMB: {block_name} at {block_processes} processes reported no rows")
    if _FINALIZE not in text:
        problems.append("IMB: run did not finish (no 'All processes entering MPI_Finalize'): "
                        "killed, crashed or truncated")
    if not measurements and not problems:
        raise ParseError(source, None, "IMB output without any result table")
    configuration["benchmarks"] = sorted({b for b, _, _ in blocks})
    return ParsedOutput(tool="imb", measurements=measurements, valid=not problems,
                        problems=problems, configuration=configuration)
