"""NetPIPE 3.x output: the transmitter's stdout
("  0:       1 bytes   4107 times -->      0.29 Mbps in      26.31 usec")
or the ``np.out`` file it writes (columns: bytes, Mbps, seconds).

NetPIPE's "Mbps" is 2^20 bits/s (netpipe.c: ``bps = bits / (t * 1024 * 1024)``),
so MB/s (10^6 B/s) = Mbps * 2^20 / 8 / 10^6.  Its time is the one-way time
(half a round trip), recorded as ``latency.<bytes>`` in microseconds.

The transport (``netpipe.tcp``, ``netpipe.mpi``) comes from the text (TCP's
"Send and receive buffers" line, MPI ranks' "0: host" lines) or else from the
file name (NPtcp..., NPmpi..., NPopenmpi...); a bare ``np.out`` under another
name gives ``netpipe`` with ``transport`` "unknown".
"""

from __future__ import annotations

import os
import re

from oddnode.core.model import Direction
from oddnode.core.inputs import quote
from oddnode.core.inputs import clip
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, number, whole
from oddnode.core.units import canonical_unit

_ROW_START = re.compile(r"^\s*(\d+):\s+(\d+) bytes\s+(\d+) times -->")
_RANK_HOST = re.compile(r"^\d+: \S+$")
_TCP_MARK = "Send and receive buffers are"
_MBPS_TO_MB_PER_S = 2**20 / 8 / 1e6  # NetPIPE Mbps (2^20 bits/s) -> 10^6 bytes/s
_US_PER_S = 1e6
_TRANSPORTS = {"tcp": "tcp", "mpi": "mpi", "openmpi": "mpi", "mpich": "mpi", "mpich2": "mpi", "lam": "mpi",
               "mpi2": "mpi", "ib": "ib", "ibv": "ib", "gm": "gm", "shmem": "shmem", "memcpy": "memcpy"}


def _transport(text: str, source: str) -> str:
    if _TCP_MARK in text:
        return "tcp"
    if any(_RANK_HOST.match(line) for line in text.splitlines()):
        return "mpi"
    name = os.path.basename(source).lower()
    found = re.match(r"np([a-z0-9]+)", name)
    if found and found.group(1) in _TRANSPORTS:
        return _TRANSPORTS[found.group(1)]
    for token in re.split(r"[^a-z0-9]+", name):
        if token in _TRANSPORTS:
            return _TRANSPORTS[token]
    return "unknown"


def _row_end(line: str) -> tuple[str, str] | None:
    """The Mbps and usec fields of a row's end ("0.27 Mbps in 28.06 usec"),
    or None.  Split, not matched by a pattern: a search for a number before
    "Mbps" takes quadratic time on a long line of digits."""
    fields = line.split()
    if len(fields) >= 5 and fields[-4:-2] == ["Mbps", "in"] and fields[-1] == "usec":
        return fields[-5], fields[-2]
    return None


def _stdout_rows(lines: list[str], source: str) -> tuple[list[tuple[int, float, float, int]], list[str]]:
    """(bytes, Mbps, usec, repetitions) rows, and lines interleaved into them."""
    rows, interleaved = [], []
    pending: tuple[int, int, int] | None = None  # (line number, bytes, repetitions)
    for lineno, line in enumerate(lines, start=1):
        start = _ROW_START.match(line)
        if start:
            if pending is not None:
                raise ParseError(source, pending[0], "NetPIPE row without its 'Mbps in ... usec' part")
            pending = (lineno, whole(start.group(2), source, lineno, "bytes"),
                       whole(start.group(3), source, lineno, "times"))
            line = line[start.end():]
        if pending is None:
            continue
        end = _row_end(line)
        if end:
            rows.append((pending[1], number(end[0], source, lineno, "Mbps"),
                         number(end[1], source, lineno, "usec"), pending[2]))
            pending = None
        elif line.strip():
            interleaved.append(clip(line.strip()))  # e.g. MPI ranks printing their host names
    if pending is not None:
        raise ParseError(source, pending[0], "NetPIPE row without its 'Mbps in ... usec' part: truncated")
    return rows, interleaved


def _np_out_rows(lines: list[str], source: str) -> list[tuple[int, float, float, None]]:
    rows = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) < 3 or not fields[0].isdecimal():
            raise ParseError(source, lineno, "not NetPIPE output: expected 'bytes Mbps seconds' (np.out) "
                                             f"or 'N: B bytes R times --> ...' (stdout), got {quote(line.strip())}")
        size = whole(fields[0], source, lineno, "bytes")
        mbps, seconds = (number(field, source, lineno, what) for field, what in zip(fields[1:3], ("Mbps", "seconds")))
        rows.append((size, mbps, number(seconds * _US_PER_S, source, lineno, "usec"), None))
    return rows


def parse_netpipe(text: str, source: str) -> ParsedOutput:
    """Bandwidth and one-way time per message size of one NetPIPE run."""
    lines = text.splitlines()
    configuration: dict[str, object] = {}
    if any(_ROW_START.match(line) for line in lines):
        rows, interleaved = _stdout_rows(lines, source)
        configuration["format"] = "stdout"
        if interleaved:
            configuration["interleaved_lines"] = interleaved
    elif _TCP_MARK in text or "Now starting the main loop" in text:
        raise ParseError(source, None, "NetPIPE output without measurements: a receiver's stdout, or a "
                                       "transmitter stopped before its first size; parse the transmitter's "
                                       "stdout or its np.out")
    else:
        rows = _np_out_rows(lines, source)
        configuration["format"] = "np.out"
    if not rows:
        raise ParseError(source, None, "no NetPIPE measurements (empty output)")
    transport = _transport(text, source)
    configuration["transport"] = transport
    benchmark = "netpipe" if transport == "unknown" else f"netpipe.{transport}"
    measurements = []
    for size, mbps, usec, repetitions in rows:
        parameters: dict[str, object] = {"bytes": size, "transport": transport}
        if repetitions is not None:
            parameters["repetitions"] = repetitions
        measurements.append(Measurement(benchmark, mbps * _MBPS_TO_MB_PER_S, canonical_unit("MB/s"),
                                        Direction.HIGHER, metric=f"bandwidth.{size}",
                                        parameters={**parameters, "source_unit": "Mbps (2^20 bits/s)"}))
        measurements.append(Measurement(benchmark, usec, canonical_unit("us"), Direction.LOWER,
                                        metric=f"latency.{size}",
                                        parameters={**parameters, "source_unit": "usec"
                                                    if configuration["format"] == "stdout" else "s"}))
    return ParsedOutput(tool="netpipe", measurements=measurements, configuration=configuration)
