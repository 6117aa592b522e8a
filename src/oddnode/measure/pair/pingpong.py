"""Our TCP ping-pong and streaming kernel (``oddnode/kernels/pingpong.c``)
between two nodes: the argv of each end and the parsers of what comes back.

One node runs ``serve``, its partner ``ping`` or ``stream`` against it; both
may start at the same moment (the client retries a refused connection for
its wait).  Nodes running ``relay`` may stand between them, each forwarding
the session to the next (Switchbench's daisy chain).  The kernel is built
and run by the node runner like every kernel of ours, so each argv prints
the runner's JSON report; ``parse_*_run`` read that report first, the
``parse_*_output`` functions the kernel's own stdout.

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
from collections.abc import Sequence
from typing import Any

from oddnode.measure.benchmarks import parse_kernel_run
from oddnode.reach.jobs import runner_argv
from oddnode.parsers.kernel_output import number, read_kernel_output, whole
from oddnode.core.model import Direction
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.core.units import canonical_unit

__all__ = [
    "DEFAULT_CONNECT_WAIT",
    "DEFAULT_IO_TIMEOUT",
    "DEFAULT_MESSAGE_SIZE",
    "DEFAULT_SECONDS_PER_SIZE",
    "DEFAULT_SERVE_WAIT",
    "DEFAULT_SESSION_SECONDS",
    "DEFAULT_SIZES",
    "DEFAULT_STREAM_SECONDS",
    "PINGPONG_BENCHMARK",
    "PINGPONG_LDLIBS",
    "RELAY_BENCHMARK",
    "RELAY_DIRECTIONS",
    "STREAM_BENCHMARKS",
    "STREAM_DIRECTIONS",
    "check_host",
    "check_io_timeout",
    "check_port",
    "check_seconds",
    "is_whole",
    "parse_pingpong_output",
    "parse_pingpong_run",
    "parse_relay_output",
    "parse_relay_run",
    "parse_stream_output",
    "parse_stream_run",
    "partner_options",
    "ping_run_seconds",
    "pingpong_ping_argv",
    "pingpong_relay_argv",
    "pingpong_serve_argv",
    "pingpong_stream_argv",
    "stream_run_seconds",
]

KERNEL = "pingpong"
# pthread_create lives in libc from glibc 2.34 on; older ones need libpthread,
# and newer ones still ship it as an empty stub, so linking it always works.
PINGPONG_LDLIBS = ("-lpthread",)

# 0, then 1 B to 4 MiB in powers of two: the kernel's own default list.
DEFAULT_SIZES: tuple[int, ...] = (0,) + tuple(2**k for k in range(23))
DEFAULT_SECONDS_PER_SIZE = 0.2
DEFAULT_MESSAGE_SIZE = 1 << 20
DEFAULT_STREAM_SECONDS = 2.0
DEFAULT_SERVE_WAIT = 60.0
DEFAULT_CONNECT_WAIT = 30.0
# Seconds without progress after which either end gives up on its partner.
DEFAULT_IO_TIMEOUT = 30
# What a server's runner allows its client's session when not told: a ping
# over the default sizes takes at most about 75 s on the slowest link assumed
# below (ping_run_seconds), a default stream 3 s; eight times the former.
DEFAULT_SESSION_SECONDS = 600.0
# Limits the kernel enforces, checked here first so a typo fails at once.
MAX_SIZES = 64
MAX_PING_SIZE = 256 << 20
MIN_STREAM_MESSAGE = 8
MAX_STREAM_MESSAGE = 256 << 20

# Run-time bounds for the runner's timeout.  The kernel runs each size for
# seconds_per_size plus warm-up (at most a quarter of it) and at least
# MIN_BATCHES batches after up to MAX_WARMUP_ROUNDS warm-up round trips; on a
# link no slower than SLOWEST_LINK_BYTES_PER_S (10^7 B/s: 100 Mbit/s Ethernet)
# a round trip of L bytes takes at most 2 L / 10^7 s, plus a second per size
# for everything else.
_MIN_BATCHES = 10
_MAX_WARMUP_ROUNDS = 16
SLOWEST_LINK_BYTES_PER_S = 1e7
_SLACK_PER_SIZE = 1.0
# Beyond the kernel's own bounds: the runner's start and the kernel's exit.
_RUN_SLACK = 30.0

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


# --- the argv of each end ---------------------------------------------------------


def is_whole(value: object, minimum: int, maximum: int) -> bool:
    """Whether ``value`` is a whole number (an int, not a bool) from ``minimum`` to ``maximum``."""
    return not isinstance(value, bool) and isinstance(value, int) and minimum <= value <= maximum


def check_port(port: int) -> None:
    """ValueError unless ``port`` is a TCP port, 1-65535."""
    if not is_whole(port, 1, 65535):
        raise ValueError(f"port must be a whole number 1-65535, got {port!r}")


def check_seconds(name: str, value: float, minimum: float, maximum: float, inclusive: bool = True) -> None:
    """ValueError unless ``value`` is a number of seconds above (``inclusive``:
    from) ``minimum`` and at most ``maximum``; ``name`` names it."""
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    low_ok = number and (value >= minimum if inclusive else value > minimum)
    if not (low_ok and value <= maximum):
        bound = ">=" if inclusive else ">"
        raise ValueError(f"{name} must be {bound} {minimum:g} and <= {maximum:g} seconds, got {value!r}")


def check_io_timeout(io_timeout: int) -> None:
    """ValueError unless ``io_timeout`` is the kernels' -i: whole seconds 1-3600."""
    if not is_whole(io_timeout, 1, 3600):
        raise ValueError(f"io_timeout must be whole seconds 1-3600, got {io_timeout!r}")


def check_host(host: str) -> None:
    """ValueError unless ``host`` can be a kernel's host name or address."""
    # The host travels inside the JSON job, never through a shell; a leading
    # dash would still read as an option, and blanks are never a host name.
    if not isinstance(host, str) or not host or host.startswith("-") or any(c.isspace() for c in host):
        raise ValueError(f"host must be a host name or an address, got {host!r}")


def check_sizes(sizes: Sequence[int]) -> list[int]:
    sizes = list(sizes)
    if not sizes or len(sizes) > MAX_SIZES:
        raise ValueError(f"sizes must list 1 to {MAX_SIZES} message sizes, got {len(sizes)}")
    for size in sizes:
        if not is_whole(size, 0, MAX_PING_SIZE):
            raise ValueError(f"a message size must be whole bytes 0-{MAX_PING_SIZE}, got {size!r}")
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"message sizes must be distinct, got {sizes}")
    return sizes


def ping_run_seconds(sizes: Sequence[int] = DEFAULT_SIZES, seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE) -> float:
    """An upper bound of a ping run's seconds once connected, on links no
    slower than SLOWEST_LINK_BYTES_PER_S."""
    rounds = _MIN_BATCHES + _MAX_WARMUP_ROUNDS
    return sum(1.25 * seconds_per_size + rounds * 2 * max(size, 1) / SLOWEST_LINK_BYTES_PER_S + _SLACK_PER_SIZE
               for size in sizes)


def stream_run_seconds(seconds: float = DEFAULT_STREAM_SECONDS, message_size: int = DEFAULT_MESSAGE_SIZE) -> float:
    """An upper bound of a stream run's seconds once connected: the stream,
    then the last write draining on the slowest link, then the counts."""
    return seconds + 2 * message_size / SLOWEST_LINK_BYTES_PER_S + _SLACK_PER_SIZE


def pingpong_serve_argv(
    port: int,
    wait: float = DEFAULT_SERVE_WAIT,
    *,
    session_seconds: float = DEFAULT_SESSION_SECONDS,
    io_timeout: int = DEFAULT_IO_TIMEOUT,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    timeout: float | None = None,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that serves one client on ``port`` of a node (all its
    addresses), waiting ``wait`` seconds for it.

    ``session_seconds`` is how long the client's session may last (pass
    ping_run_seconds or stream_run_seconds of the client's run); the runner's
    ``timeout`` defaults to wait + session + io_timeout + a margin.
    """
    check_port(port)
    check_seconds("session_seconds", session_seconds, 0.0, 86400.0, inclusive=False)
    return _kernel_argv(["serve", "-p", str(port)], wait, io_timeout, session_seconds, timeout,
                        cflags, defines, interpreter)


def pingpong_ping_argv(
    host: str,
    port: int,
    sizes: Sequence[int] = DEFAULT_SIZES,
    seconds_per_size: float = DEFAULT_SECONDS_PER_SIZE,
    wait: float = DEFAULT_CONNECT_WAIT,
    *,
    io_timeout: int = DEFAULT_IO_TIMEOUT,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    timeout: float | None = None,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that measures the one-way time per message size against the
    server on ``host``:``port``, connecting within ``wait`` seconds.  The
    runner's ``timeout`` defaults to the wait plus ping_run_seconds plus
    io_timeout and a margin."""
    check_host(host)
    check_port(port)
    sizes = check_sizes(sizes)
    check_seconds("seconds_per_size", seconds_per_size, 0.0, 3600.0, inclusive=False)
    args = ["ping", "-H", host, "-p", str(port), "-s", ",".join(str(s) for s in sizes), "-T", f"{seconds_per_size:g}"]
    return _kernel_argv(args, wait, io_timeout, ping_run_seconds(sizes, seconds_per_size), timeout,
                        cflags, defines, interpreter)


def pingpong_stream_argv(
    host: str,
    port: int,
    message_size: int = DEFAULT_MESSAGE_SIZE,
    seconds: float = DEFAULT_STREAM_SECONDS,
    both: bool = False,
    wait: float = DEFAULT_CONNECT_WAIT,
    *,
    io_timeout: int = DEFAULT_IO_TIMEOUT,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    timeout: float | None = None,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that streams ``message_size``-byte writes to the server on
    ``host``:``port`` for ``seconds`` (``both``: and from it at once)."""
    check_host(host)
    check_port(port)
    if not is_whole(message_size, MIN_STREAM_MESSAGE, MAX_STREAM_MESSAGE):
        raise ValueError(f"message_size must be whole bytes {MIN_STREAM_MESSAGE}-{MAX_STREAM_MESSAGE} "
                         f"(a message carries an 8-byte stamp), got {message_size!r}")
    check_seconds("seconds", seconds, 0.001, 3600.0)
    args = ["stream", "-H", host, "-p", str(port), "-s", str(message_size), "-d", f"{seconds:g}"]
    return _kernel_argv(args, wait, io_timeout, stream_run_seconds(seconds, message_size), timeout,
                        cflags, defines, interpreter, switches=["--both"] if both else [])


def pingpong_relay_argv(
    port: int,
    next_host: str,
    next_port: int,
    wait: float = DEFAULT_SERVE_WAIT,
    *,
    session_seconds: float = DEFAULT_SESSION_SECONDS,
    io_timeout: int = DEFAULT_IO_TIMEOUT,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    timeout: float | None = None,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that listens on ``port`` of a node, connects to the next
    hop ``next_host``:``next_port`` (a relay or a server) and forwards one
    session both ways between them; ``wait`` bounds both the connection
    to the next hop and the upstream node's arrival.  ``session_seconds``
    and ``timeout`` as for pingpong_serve_argv."""
    check_port(port)
    check_host(next_host)
    check_port(next_port)
    check_seconds("session_seconds", session_seconds, 0.0, 86400.0, inclusive=False)
    return _kernel_argv(["relay", "-p", str(port), "-H", next_host, "-P", str(next_port)], wait, io_timeout,
                        session_seconds, timeout, cflags, defines, interpreter)


def _kernel_argv(args: list[str], wait: float, io_timeout: int, session_seconds: float, timeout: float | None,
                 cflags: Sequence[str], defines: Sequence[str], interpreter: str,
                 switches: Sequence[str] = ()) -> list[str]:
    """The runner argv of one end: its mode's ``args``, the options every
    mode takes (partner_options), then its ``switches``."""
    options, timeout = partner_options(wait, io_timeout, session_seconds, timeout)
    return runner_argv(KERNEL, [*args, *options, *switches], cflags=cflags, defines=defines, ldlibs=PINGPONG_LDLIBS,
                       timeout=timeout, interpreter=interpreter)


def partner_options(wait: float, io_timeout: int, session_seconds: float, timeout: float | None,
                    slack: float = _RUN_SLACK) -> tuple[list[str], float]:
    """What every network kernel of ours takes: ``-w``, the seconds it waits
    for its partners, and ``-i``, the seconds a read or write may make no
    progress (both checked); and the runner's timeout: ``timeout``, or when
    None the wait, the session, io_timeout and ``slack``."""
    check_seconds("wait", wait, 0.0, 86400.0)
    check_io_timeout(io_timeout)
    if timeout is None:
        timeout = wait + session_seconds + io_timeout + slack
    return ["-w", f"{wait:g}", "-i", str(io_timeout)], timeout


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
                      "min_us": min_us, "median_us": median_us}
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


def parse_pingpong_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a ping run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_pingpong_output)


def parse_stream_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a stream run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_stream_output)


def parse_relay_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a relay run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_relay_output)
