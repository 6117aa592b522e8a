"""McCalpin STREAM (``stream.c`` 5.10) output: the four kernels' best rates,
the configuration header, and STREAM's own validation of the arrays."""

from __future__ import annotations

import re
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.inputs import clip
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, number, whole
from oddnode.core.units import canonical_unit

KERNELS = ("Copy", "Scale", "Add", "Triad")
_COLUMNS = ("Best Rate MB/s", "Avg time", "Min time", "Max time")

# STREAM's "MB" is 10^6 bytes (stream.c computes 1.0E-06 * bytes / time), so
# the rate is MB/s in the decimal sense, not MiB/s.
_UNIT = canonical_unit("MB/s")

_BANNER = re.compile(r"^STREAM version \$Revision:\s*([\d.]+)\s*\$")
_KERNEL = re.compile(
    r"^(Copy|Scale|Add|Triad):\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"
)
# header line -> configuration key and its type: int a whole number, float a decimal
_CONFIG: list[tuple[re.Pattern[str], str, type]] = [
    (re.compile(r"^This system uses (\d+) bytes per array element"), "bytes_per_element", int),
    (re.compile(r"^Array size = (\d+)"), "array_size", int),
    (re.compile(r"Offset = (\d+)"), "offset", int),
    (re.compile(r"^Memory per array = ([\d.]+) MiB"), "memory_per_array_mib", float),
    (re.compile(r"^Total memory required = ([\d.]+) MiB"), "total_memory_mib", float),
    (re.compile(r"^Each kernel will be executed (\d+) times"), "ntimes", int),
    (re.compile(r"^Number of Threads requested = (\d+)"), "threads_requested", int),
    (re.compile(r"^Number of Threads counted = (\d+)"), "threads_counted", int),
    (re.compile(r"^Your clock granularity/precision appears to be (\d+) microseconds"),
     "timer_granularity_us", int),
    (re.compile(r"^Each test below will take on the order of (\d+) microseconds"),
     "test_duration_us", int),
]


def parse_stream(text: str, source: str) -> ParsedOutput:
    """Parse one run of stream.c; a run without all four kernels is an error."""
    lines = text.splitlines()
    configuration: dict[str, Any] = {}
    rates: dict[str, tuple[float, dict[str, float]]] = {}
    problems: list[str] = []
    validated = False
    seen_banner = False
    last_verdict = 0  # line number of the last validation line

    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        banner = _BANNER.match(line)
        if banner:
            seen_banner = True
            configuration["version"] = banner.group(1)
            continue
        kernel = _KERNEL.match(line)
        if kernel:
            if not seen_banner:
                raise ParseError(source, lineno, "kernel line before the 'STREAM version' banner")
            name = kernel.group(1)
            rate, avg, best, worst = (number(kernel.group(i), source, lineno, f"{name} {column}")
                                      for i, column in enumerate(_COLUMNS, start=2))
            rates[name] = (rate, {"avg_time_s": avg, "min_time_s": best, "max_time_s": worst})
            continue
        if line.startswith("Solution Validates"):
            validated = True
            last_verdict = lineno
            continue
        if line.startswith("Failed Validation") or re.match(r"^For array \w\[\], \d+ errors were found", line):
            problems.append(clip(line))
            last_verdict = lineno
            continue
        for pattern, key, kind in _CONFIG:
            found = pattern.search(line)
            if found and key not in configuration:
                read = whole if kind is int else number
                configuration[key] = read(found.group(1), source, lineno, key)

    if not seen_banner:
        raise ParseError(source, None, "not STREAM output: no 'STREAM version $Revision: ... $' banner")
    missing = [k for k in KERNELS if k not in rates]
    if missing:
        raise ParseError(
            source,
            len(lines),
            f"truncated STREAM output: no result line for {', '.join(missing)}",
        )
    if not validated and not problems:
        raise ParseError(
            source,
            len(lines),
            "truncated STREAM output: no 'Solution Validates' or 'Failed Validation' after the results",
        )
    # stream.c closes the validation report with a line of dashes; without it
    # the report (and the list of failed arrays) may be cut short.
    if not any(line.strip().startswith("----") for line in lines[last_verdict:]):
        raise ParseError(source, len(lines), "truncated STREAM output: the validation report is not closed")

    valid = not problems
    measurements = [
        Measurement(
            benchmark=f"stream.{kernel.lower()}",
            metric="bandwidth",
            value=rates[kernel][0],
            unit=_UNIT,
            direction=Direction.HIGHER,
            valid=valid,
            parameters=dict(rates[kernel][1]),
        )
        for kernel in KERNELS
    ]
    return ParsedOutput(
        tool="stream",
        measurements=measurements,
        valid=valid,
        problems=problems,
        configuration=configuration,
    )
