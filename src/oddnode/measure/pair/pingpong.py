"""Our TCP ping-pong and streaming kernel (``oddnode/kernels/pingpong.c``)
between two nodes: the argv of each end, and the parsers of what comes back
(which live in ``oddnode.parsers.oddnode_pingpong``) applied to the runner's
report.

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

from collections.abc import Sequence

from oddnode.measure.benchmarks import parse_kernel_run
from oddnode.reach.jobs import runner_argv
from oddnode.parsers.base import ParsedOutput
from oddnode.parsers.oddnode_pingpong import (
    KERNEL,
    PINGPONG_BENCHMARK,
    RELAY_BENCHMARK,
    RELAY_DIRECTIONS,
    STREAM_BENCHMARKS,
    STREAM_DIRECTIONS,
    parse_pingpong_output,
    parse_relay_output,
    parse_stream_output,
)

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
# at most seconds_per_size, warm-up included, ending the batch under way; the
# bound allows it a quarter more and MIN_BATCHES batches after
# MAX_WARMUP_ROUNDS warm-up round trips besides (a wide margin: a timeout
# must not cut a slow but sound run); on a link no slower than
# SLOWEST_LINK_BYTES_PER_S (10^7 B/s: 100 Mbit/s Ethernet) a round trip of L
# bytes takes at most 2 L / 10^7 s, plus a second per size for everything
# else.
_MIN_BATCHES = 10
_MAX_WARMUP_ROUNDS = 16
SLOWEST_LINK_BYTES_PER_S = 1e7
_SLACK_PER_SIZE = 1.0
# Beyond the kernel's own bounds: the runner's start and the kernel's exit.
_RUN_SLACK = 30.0


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


def parse_pingpong_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a ping run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_pingpong_output)


def parse_stream_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a stream run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_stream_output)


def parse_relay_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report of a relay run, then the kernel's stdout."""
    return parse_kernel_run(text, source, KERNEL, parse_relay_output)
