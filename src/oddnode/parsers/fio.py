"""fio JSON output (``--output-format=json`` or ``json+``).

One benchmark per job (``fio.<jobname>``; with ``--group_reporting`` fio
reports the group as one job), metrics per data direction that moved bytes:
``read.bandwidth`` (MB/s = 10^6 B/s, from fio's exact ``bw_bytes``; fio's
``bw`` is KiB/s), ``read.iops``, ``read.lat_mean`` (total latency, us) and
``read.clat_p99`` (completion-latency 99th percentile, us; ``read.lat_p99``
when fio ran with ``--lat_percentiles=1``).

fio's normal text output rounds to three significant digits and its layout
varies between versions, so it is refused with a ParseError that says to
use ``--output-format=json``.  A job whose ``error`` is non-zero, or that
moved no bytes, makes the output invalid.
"""

from __future__ import annotations

import os
import re
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.inputs import quote
from oddnode.parsers.base import (
    Measurement, ParsedOutput, ParseError, json_document, json_number, mapping, number, whole,
)
from oddnode.core.units import canonical_unit

_DIRECTIONS = ("read", "write", "trim")
_OPTIONS = ("rw", "bs", "iodepth", "numjobs", "runtime", "ioengine", "size", "direct", "rwmixread")
_TEXT_OUTPUT = re.compile(r"^\S+: \(g(?:roupid)?=\d+\)|^fio-\d", re.MULTILINE)
_NS_PER_US = 1000.0
_BYTES_PER_MB = 1e6
_BYTES_PER_KIB = 1024


def _load(text: str, source: str) -> tuple[dict[str, Any], int]:
    """The JSON document, which may follow fio's warnings on the same stream,
    and the line it starts on (the line every error below names)."""
    found = json_document(text, source, "fio")
    if found is None:
        if _TEXT_OUTPUT.search(text):
            raise ParseError(source, None, "fio normal (text) output is not parsed: it rounds to three "
                                           "significant digits; run fio with --output-format=json")
        raise ParseError(source, None, "not fio JSON output: no JSON object")
    document, line = found
    if not isinstance(document, dict) or "jobs" not in document or "fio version" not in document:
        raise ParseError(source, line, "not fio JSON output: no 'fio version' and 'jobs' keys")
    return document, line


def _latency_us(stats: dict[str, Any], key: str, where: tuple[str, int], what: str) -> dict[str, float] | None:
    """fio >= 3 reports ``<key>_ns``, fio 2 ``<key>`` in microseconds; values in us."""
    if f"{key}_ns" in stats:
        name, scale = f"{key}_ns", 1 / _NS_PER_US
    elif key in stats:
        name, scale = key, 1.0
    else:
        return None
    block = mapping(stats[name], *where, f"{what}.{name}")
    if "mean" not in block:
        raise ParseError(*where, f"{what}.{name} has no 'mean'")
    result = {"mean": json_number(block["mean"], *where, f"{what}.{name}.mean") * scale}
    percentile = mapping(block.get("percentile", {}), *where, f"{what}.{name}.percentile")
    p99 = next((value for name_, value in percentile.items()
                if number(name_, *where, f"{what}.{name}.percentile key") == 99.0), None)
    if p99 is not None:
        result["p99"] = json_number(p99, *where, f"{what}.{name}.percentile 99") * scale
    return result


def _direction_measurements(benchmark: str, direction: str, stats: dict[str, Any],
                            parameters: dict[str, Any], where: tuple[str, int]) -> list[Measurement]:
    what = f"{benchmark} {direction}"
    if "bw_bytes" in stats:
        bandwidth = json_number(stats["bw_bytes"], *where, f"{what}.bw_bytes") / _BYTES_PER_MB
        source_unit = "B/s (bw_bytes)"
    elif "bw" in stats:
        bandwidth = json_number(stats["bw"], *where, f"{what}.bw") * _BYTES_PER_KIB / _BYTES_PER_MB
        source_unit = "KiB/s (bw)"
    else:
        raise ParseError(*where, f"{what} has neither 'bw_bytes' nor 'bw'")
    if "iops" not in stats:
        raise ParseError(*where, f"{what} has no 'iops'")
    found = [
        Measurement(benchmark, bandwidth, canonical_unit("MB/s"), Direction.HIGHER,
                    metric=f"{direction}.bandwidth", parameters={**parameters, "source_unit": source_unit}),
        Measurement(benchmark, json_number(stats["iops"], *where, f"{what}.iops"), canonical_unit("IOPS"),
                    Direction.HIGHER, metric=f"{direction}.iops", parameters={**parameters, "source_unit": "IOPS"}),
    ]
    latency_unit = {**parameters, "source_unit": "ns" if "lat_ns" in stats else "us"}
    total = _latency_us(stats, "lat", where, what)
    if total is not None:
        found.append(Measurement(benchmark, total["mean"], canonical_unit("us"), Direction.LOWER,
                                 metric=f"{direction}.lat_mean", parameters=latency_unit))
    if total is not None and "p99" in total:  # --lat_percentiles=1
        found.append(Measurement(benchmark, total["p99"], canonical_unit("us"), Direction.LOWER,
                                 metric=f"{direction}.lat_p99", parameters=latency_unit))
    else:
        completion = _latency_us(stats, "clat", where, what)
        if completion is not None and "p99" in completion:
            found.append(Measurement(benchmark, completion["p99"], canonical_unit("us"), Direction.LOWER,
                                     metric=f"{direction}.clat_p99", parameters=latency_unit))
    return found


def parse_fio(text: str, source: str) -> ParsedOutput:
    """Bandwidth, IOPS and latency of every fio job and direction."""
    document, line = _load(text, source)
    where = (source, line)
    jobs = document["jobs"]
    if not isinstance(jobs, list) or not jobs:
        raise ParseError(source, line, "fio JSON output without jobs")
    jobs = [mapping(job, *where, f"job {index}") for index, job in enumerate(jobs, start=1)]
    global_options = mapping(document.get("global options", {}), *where, "'global options'")
    names = [str(job.get("jobname")) for job in jobs]
    seen: dict[str, int] = {}
    measurements: list[Measurement] = []
    problems: list[str] = []
    for job, name in zip(jobs, names):
        seen[name] = seen.get(name, 0) + 1
        # clones of one job (numjobs without group_reporting) share a name: number them
        benchmark = f"fio.{name}" if names.count(name) == 1 else f"fio.{name}.{seen[name]}"
        options = {**global_options, **mapping(job.get("job options", {}), *where, f"{benchmark} 'job options'")}
        parameters: dict[str, Any] = {key: options[key] for key in _OPTIONS if key in options}
        parameters.setdefault("numjobs", "1")
        # errno values are small: a larger one is not an errno.
        error = whole(job.get("error", 0), *where, f"{benchmark} error", limit=2**31 - 1)
        if error:
            problems.append(f"fio job {quote(name)} ended with error {error} ({os.strerror(error)})")
        moved = []
        for direction in _DIRECTIONS:
            if direction in job:
                stats = mapping(job[direction], *where, f"{benchmark} {direction}")
                if whole(stats.get("io_bytes", 0), *where, f"{benchmark} {direction}.io_bytes") > 0:
                    moved.append(direction)
        if not moved and not error:
            problems.append(f"fio job {quote(name)} moved no bytes")
        for direction in moved:
            for m in _direction_measurements(benchmark, direction, job[direction], parameters, where):
                measurements.append(m if not error else Measurement(
                    m.benchmark, m.value, m.unit, m.direction, m.metric, False, m.parameters))
    configuration = {"version": document.get("fio version"), "time": document.get("time"),
                     "jobs": names}
    return ParsedOutput(tool="fio", measurements=measurements, valid=not problems,
                        problems=problems, configuration=configuration)
