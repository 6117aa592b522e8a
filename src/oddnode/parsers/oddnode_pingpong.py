"""The parsers of our TCP ping-pong kernel's output
(``oddnode/kernels/pingpong.c``): a ping run, a stream run and a relay run,
read from the kernel's own stdout; the shared-memory and MPI ping-pong
kernels print the same lines and are read by ``parse_ping_output`` too.

Series:

* ``tcp.pingpong``: ``latency.<bytes>``, the minimum one-way time over the
  timed batches (us), and ``bandwidth.<bytes>``, bytes / that time (MB/s,
  MB = 10^6 bytes, so bytes per microsecond); the median is kept in the
  parameters.  Size 0 (a 1-byte token: TCP cannot carry an empty message)
  has a latency and no bandwidth.
* ``tcp.stream`` (one direction) and ``tcp.stream_both`` (both at once):
  ``bandwidth.client_to_server`` and ``bandwidth.server_to_client`` (MB/s),
  the bytes the receiver counted over the receiver's time.
* ``tcp.relay``: ``bandwidth.upstream_to_downstream`` and
  ``bandwidth.downstream_to_upstream`` (MB/s), the bytes a relay forwarded
  over its time from the first byte read to the last written.

A run whose echo check or stream check failed is kept, invalid, with the
kernel's account of what differed and where in ``problems``.
"""

from __future__ import annotations

import re
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.units import canonical_unit
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.parsers.kernel_output import cut_parameters, number, read_kernel_output, whole

KERNEL = "pingpong"
PINGPONG_BENCHMARK = "tcp.pingpong"
STREAM_BENCHMARKS = {False: "tcp.stream", True: "tcp.stream_both"}
RELAY_BENCHMARK = "tcp.relay"
STREAM_DIRECTIONS = ("client_to_server", "server_to_client")
RELAY_DIRECTIONS = ("upstream_to_downstream", "downstream_to_upstream")

_US = canonical_unit("us")
_MB_PER_S = canonical_unit("MB/s")  # the kernel's MB is 10^6 bytes
_INT_KEYS = {
    "protocol",
    "io_timeout_seconds",
    "timer_granularity_ns",
    "port",
    "min_batches",
    "min_batch_ticks",
    "min_batch_ns",
    "connect_attempts",
    "echoes_checked",
    "message_size",
    "corrupt_echo",
    "next_port",
    "relay_buffer_bytes",
}
_FLOAT_KEYS = {"seconds_per_size", "connect_wait_seconds", "wait_seconds", "seconds", "min_batch_seconds"}
_KEY_VALUE = re.compile(r"(\w+)=(\S+)")
# --- what comes back ----------------------------------------------------------------


def _read_lines(text: str, source: str, parse_line, kernel: str = KERNEL) -> tuple[dict[str, Any], int]:
    """The kernel's output (see read_kernel_output) with its list of sizes
    typed and each of its own lines handed to parse_line; returns
    (configuration, number of lines)."""
    output = read_kernel_output(text, source, kernel, int_keys=_INT_KEYS, float_keys=_FLOAT_KEYS)
    configuration = output.configuration
    if "sizes" in configuration:
        lineno = output.header_lines["sizes"]
        configuration["sizes"] = [whole(item, source, lineno) for item in configuration["sizes"].split(",")]
    for lineno, line in output.lines:
        parse_line(line, lineno, configuration)
    if output.warnings:
        configuration["warnings"] = output.warnings
    return configuration, output.line_count


def _check_mode(configuration: dict[str, Any], wanted: str, source: str) -> None:
    mode = configuration.get("mode")
    if mode != wanted:
        other = {"ping": "parse_pingpong_output", "stream": "parse_stream_output",
                 "relay": "parse_relay_output"}.get(str(mode))
        hint = f"; read it with {other}" if other else ""
        raise ParseError(source, None, f"expected the pingpong kernel's {wanted} output, found mode {mode!r}{hint}")


def _failure(line: str, source: str, lineno: int) -> tuple[str, dict[str, str]]:
    """What failed and its key=value evidence, from 'validation failed WHAT k=v ...'."""
    words = line.split()
    if len(words) < 3:
        raise ParseError(source, lineno, f"validation failed without saying what: {line!r}")
    return words[2], dict(_KEY_VALUE.findall(line))


def parse_pingpong_output(text: str, source: str) -> ParsedOutput:
    """Parse one ping run of our kernel: the one-way latency and the
    bandwidth per message size, the configuration it reports, and its check
    of every echo; ParseError if the output is not ours or is cut short."""
    return parse_ping_output(text, source, KERNEL, PINGPONG_BENCHMARK, "oddnode-pingpong")


def parse_ping_output(text: str, source: str, kernel: str, benchmark: str, tool: str) -> ParsedOutput:
    """A ping run of one of our ping-pong kernels (``kernel``, the TCP one or
    the MPI one: the same lines), its measurements under ``benchmark``."""
    results: dict[int, tuple[int, float, float, int]] = {}  # bytes -> round trips, min, median, batches
    problems: list[str] = []
    state = {"validated": False}

    def line_of_ours(line: str, lineno: int, configuration: dict[str, Any]) -> None:
        words = line.split()
        if words[0] == "result":
            if len(words) != 6:
                raise ParseError(source, lineno, f"a result line has 6 fields, found {len(words)}: {line[:80]!r}")
            size, trips, batches = (whole(words[i], source, lineno) for i in (1, 2, 5))
            min_us, median_us = (number(words[i], source, lineno) for i in (3, 4))
            if size in results:
                raise ParseError(source, lineno, f"a second result line for {size} bytes")
            if trips < 1 or batches < 1 or not 0 < min_us <= median_us:
                raise ParseError(source, lineno, f"implausible result for {size} bytes: {line!r}")
            results[size] = (trips, min_us, median_us, batches)
        elif line == "validation ok":
            state["validated"] = True
        elif words[:2] == ["validation", "failed"]:
            state["validated"] = True
            what, evidence = _failure(line, source, lineno)
            configuration["validation_failed"] = line[len("validation failed"):].strip()
            if what == "echo":
                bad, _, checked = evidence.get("bad", "?").partition("/")
                of = f" of {checked}" if checked else ""
                problems.append(
                    f"echo check failed: {bad}{of} echoes differed from the message sent; "
                    f"the first at {evidence.get('size', '?')} bytes, round {evidence.get('round', '?')}, "
                    f"byte offset {evidence.get('offset', '?')}: expected {evidence.get('expected', '?')}, "
                    f"got {evidence.get('got', '?')} (data corrupted or misordered between the nodes)")
            else:
                problems.append(f"validation failed: {configuration['validation_failed']}")
        else:
            raise ParseError(source, lineno, f"unexpected line in pingpong kernel output: {line[:80]!r}")

    configuration, count = _read_lines(text, source, line_of_ours, kernel)
    _check_mode(configuration, "ping", source)
    if "sizes" not in configuration:
        raise ParseError(source, None, "pingpong kernel header lacks 'sizes'")
    sizes = configuration["sizes"]
    extra = sorted(set(results) - set(sizes))
    if extra:
        raise ParseError(source, None, f"result lines for sizes the header does not list: {extra}")
    missing = [size for size in sizes if size not in results]
    if missing:
        raise ParseError(source, count, "truncated pingpong kernel output: no result line for "
                                        + ", ".join(f"{size} bytes" for size in missing))
    if not state["validated"]:
        raise ParseError(source, count, "truncated pingpong kernel output: no validation line")

    valid = not problems
    common = {"peer": configuration.get("peer", ""), "port": configuration.get("port")}
    measurements = []
    for size in sizes:
        trips, min_us, median_us, batches = results[size]
        parameters = {**common, "bytes": size, "repetitions": trips, "batches": batches,
                      **cut_parameters(batches, configuration), "min_us": min_us, "median_us": median_us}
        measurements.append(Measurement(benchmark, min_us, _US, Direction.LOWER,
                                        metric=f"latency.{size}", valid=valid, parameters=parameters))
        if size > 0:  # a 0-byte message carries no payload to divide
            measurements.append(Measurement(
                benchmark, size / min_us, _MB_PER_S, Direction.HIGHER, metric=f"bandwidth.{size}",
                valid=valid, parameters={**parameters, "median_MBps": size / median_us}))
    return ParsedOutput(tool=tool, measurements=measurements, valid=valid, problems=problems,
                        configuration=configuration)


def parse_stream_output(text: str, source: str) -> ParsedOutput:
    """Parse one stream run of our kernel: MB/s per direction as the
    receiver counted it, and the check of stamps and byte counts;
    ParseError if the output is not ours or is cut short."""
    results: dict[str, tuple[int, float, float]] = {}  # direction -> bytes, seconds, MB/s
    problems: list[str] = []
    state = {"validated": False}

    def line_of_ours(line: str, lineno: int, configuration: dict[str, Any]) -> None:
        words = line.split()
        if words[0] == "stream":
            if len(words) != 5 or words[1] not in STREAM_DIRECTIONS:
                raise ParseError(source, lineno, f"malformed stream line: {line[:80]!r}")
            if words[1] in results:
                raise ParseError(source, lineno, f"a second stream line for {words[1]}")
            moved = whole(words[2], source, lineno)
            seconds, rate = (number(words[i], source, lineno) for i in (3, 4))
            if seconds <= 0 or rate <= 0:
                raise ParseError(source, lineno, f"implausible stream line (no time or no bytes): {line!r}")
            results[words[1]] = (moved, seconds, rate)
        elif line == "validation ok":
            state["validated"] = True
        elif words[:2] == ["validation", "failed"]:
            state["validated"] = True
            what, evidence = _failure(line, source, lineno)
            configuration["validation_failed"] = line[len("validation failed"):].strip()
            details = ", ".join(f"{key} {value}" for key, value in evidence.items())
            problems.append(f"stream check failed {what.replace('_', ' ')}: {details} "
                            "(bytes lost, duplicated or out of order between the nodes)")
        else:
            raise ParseError(source, lineno, f"unexpected line in pingpong kernel output: {line[:80]!r}")

    configuration, count = _read_lines(text, source, line_of_ours)
    _check_mode(configuration, "stream", source)
    for key in ("directions", "message_size"):
        if key not in configuration:
            raise ParseError(source, None, f"pingpong kernel header lacks {key!r}")
    both = str(configuration["directions"]).startswith("both")
    directions = STREAM_DIRECTIONS if both else STREAM_DIRECTIONS[:1]
    missing = [direction for direction in directions if direction not in results]
    if missing:
        raise ParseError(source, count, f"truncated pingpong kernel output: no stream line for {', '.join(missing)}")
    extra = sorted(set(results) - set(directions))
    if extra:
        raise ParseError(source, None, f"stream lines for directions the header does not run: {extra}")
    if not state["validated"]:
        raise ParseError(source, count, "truncated pingpong kernel output: no validation line")

    valid = not problems
    benchmark = STREAM_BENCHMARKS[both]
    measurements = [
        Measurement(benchmark, results[direction][2], _MB_PER_S, Direction.HIGHER, metric=f"bandwidth.{direction}",
                    valid=valid,
                    parameters={"peer": configuration.get("peer", ""), "port": configuration.get("port"),
                                "direction": direction, "both": both,
                                "message_size": configuration["message_size"],
                                "bytes": results[direction][0], "seconds": results[direction][1]})
        for direction in directions
    ]
    return ParsedOutput(tool="oddnode-pingpong", measurements=measurements, valid=valid, problems=problems,
                        configuration=configuration)


def parse_relay_output(text: str, source: str) -> ParsedOutput:
    """Parse one relay run of our kernel: the bytes it forwarded each way
    and at what rate (first byte read to last written), as measurements of
    ``tcp.relay``; ParseError if the output is not ours or is cut short.
    A relay checks nothing itself: the ends of its chain validate the data."""
    results: dict[str, tuple[int, float, float]] = {}  # direction -> bytes, seconds, MB/s

    def line_of_ours(line: str, lineno: int, configuration: dict[str, Any]) -> None:
        words = line.split()
        if words[0] != "relayed":
            raise ParseError(source, lineno, f"unexpected line in pingpong relay output: {line[:80]!r}")
        if len(words) != 5 or words[1] not in RELAY_DIRECTIONS:
            raise ParseError(source, lineno, f"malformed relayed line: {line[:80]!r}")
        if words[1] in results:
            raise ParseError(source, lineno, f"a second relayed line for {words[1]}")
        moved = whole(words[2], source, lineno)
        seconds, rate = (number(words[i], source, lineno) for i in (3, 4))
        if seconds < 0 or rate < 0:
            raise ParseError(source, lineno, f"implausible relayed line: {line!r}")
        results[words[1]] = (moved, seconds, rate)

    configuration, count = _read_lines(text, source, line_of_ours)
    _check_mode(configuration, "relay", source)
    missing = [direction for direction in RELAY_DIRECTIONS if direction not in results]
    if missing:
        raise ParseError(source, count, f"truncated pingpong relay output: no relayed line for {', '.join(missing)}")
    measurements = [
        Measurement(RELAY_BENCHMARK, results[direction][2], _MB_PER_S, Direction.HIGHER,
                    metric=f"bandwidth.{direction}",
                    parameters={"next": configuration.get("next", ""), "next_port": configuration.get("next_port"),
                                "upstream": configuration.get("upstream", ""), "direction": direction,
                                "bytes": results[direction][0], "seconds": results[direction][1]})
        for direction in RELAY_DIRECTIONS
    ]
    return ParsedOutput(tool="oddnode-pingpong", measurements=measurements, valid=True, problems=[],
                        configuration=configuration)
