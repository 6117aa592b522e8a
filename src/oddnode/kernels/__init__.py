"""oddnode's own C kernels, built and run on the nodes through any transport.

The C sources and ``node_runner.py`` ship in this package and travel inside
the argv (``python_command``): the runner compiles a kernel on the node with
``-march=native`` once per source, flags, compiler and CPU model, caches the
binary in the user's cache directory and prints one JSON report.  Everything
here runs on the admin's machine: it reads the node's cache size, chooses
the array length, builds the argv and parses what comes back.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from oddnode.kernels.output import number, read_kernel_output
from oddnode.model import Direction
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, ToolUnavailable
from oddnode.transport.base import python_command
from oddnode.units import canonical_unit

__all__ = [
    "MEMORY_KERNELS",
    "MIN_ELEMENTS",
    "PREPARE_OPTION",
    "RUNNER_VERSION",
    "RunnerReport",
    "StartTiming",
    "ToolReport",
    "blas_thread_env",
    "default_elements",
    "dgemm_kernel_argv",
    "kernel_source",
    "last_level_cache_bytes",
    "memory_kernel_argv",
    "parse_dgemm_output",
    "parse_memory_output",
    "parse_runner_output",
    "parse_tool_output",
    "runner_argv",
    "runner_source",
    "start_option",
    "start_timing",
    "tool_argv",
    "with_runner_options",
]

RUNNER_VERSION = 1
MEMORY_KERNELS = ("copy", "scale", "add", "triad")
BYTES_PER_DOUBLE = 8
# Each array must be at least this many times the last-level cache so that
# the loops measure memory, not cache (STREAM's rule for a valid run).
CACHE_MULTIPLE = 4
# Arrays never shorter than this (80 MB each): on a node whose cache size
# cannot be read, a too-small array would silently measure the cache.
MIN_ELEMENTS = 10_000_000
# Seconds the memory kernel may run on a node, compile excluded.
DEFAULT_TIMEOUT = 600.0
# The longest a timed memory loop may be asked to last (memory.c's -m bound).
MAX_MIN_LOOP_SECONDS = 60.0
# How much of a bad output or compiler message an error quotes.
QUOTED_CHARS = 2000
_UNIT = canonical_unit("MB/s")  # the kernel's MB is 10^6 bytes


# A kernel's include of one of the package's own headers.
_OWN_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_]+\.h)"$', re.M)


def kernel_source(kernel: str = "memory") -> str:
    """A kernel's C source as a node compiles it: the package's file with
    the package's own headers (``#include "oddnode_kernel.h"``) pasted in,
    so that one self-contained file travels and its hash covers them."""
    files = resources.files("oddnode.kernels")
    source = files.joinpath(f"{kernel}.c").read_text(encoding="utf-8")
    return _OWN_INCLUDE.sub(lambda include: files.joinpath(include.group(1)).read_text(encoding="utf-8"), source)


def runner_source() -> str:
    """The node runner script's text, as shipped in the package."""
    return resources.files("oddnode.kernels").joinpath("node_runner.py").read_text(encoding="utf-8")


# --- how long the arrays must be -------------------------------------------------


def _cache_size_bytes(text: str) -> int:
    """sysfs writes cache sizes as '32K', '1024K', '105M'."""
    found = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text)
    if not found:
        return 0
    return int(found.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[found.group(2)]


def last_level_cache_bytes(sysfs_root: Path = Path("/sys/devices/system/cpu")) -> int:
    """Total bytes of the highest-level data or unified cache over all its
    instances (one L3 per socket counts twice on two sockets), read from sysfs;
    0 when sysfs says nothing about caches."""
    instances: dict[int, dict[str, int]] = {}  # level -> instance id -> bytes
    for index in sorted(Path(sysfs_root).glob("cpu[0-9]*/cache/index[0-9]*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = _cache_size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or size <= 0:
            continue
        # CPUs sharing one cache list the same CPUs; that list names the instance.
        shared = index / "shared_cpu_list"
        try:
            instance = shared.read_text().strip()
        except OSError:
            instance = str(index.parent.parent.name)
        instances.setdefault(level, {})[instance] = size
    if not instances:
        return 0
    return sum(instances[max(instances)].values())


def default_elements(llc_bytes: int) -> int:
    """Doubles per array so that each array is >= 4x the last-level cache,
    never fewer than MIN_ELEMENTS."""
    needed = math.ceil(CACHE_MULTIPLE * max(llc_bytes, 0) / BYTES_PER_DOUBLE)
    return max(MIN_ELEMENTS, needed)


# --- the argv that runs a kernel on a node -----------------------------------------


def runner_argv(
    kernel: str,
    args: Sequence[str],
    *,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    ldlibs: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
    compiler: str | None = None,
    launcher: Sequence[str] = (),
) -> list[str]:
    """An argv that builds (once) and runs one of our kernels on a node;
    ``ldlibs`` (``-lm``) are linked after the source.  ``compiler`` replaces
    the node's ``cc`` (``mpicc``); ``launcher`` goes before the kernel's
    path (``mpirun -np 2 --host a,b``)."""
    spec: dict[str, Any] = {
        "kernel": kernel,
        "source": kernel_source(kernel),
        "cflags": [str(flag) for flag in cflags],
        "defines": [str(define) for define in defines],
        "ldlibs": [str(lib) for lib in ldlibs],
        "args": [str(arg) for arg in args],
        "env": {str(k): str(v) for k, v in (env or {}).items()},
        "timeout": float(timeout),
    }
    if compiler is not None:
        spec["compiler"] = compiler
    if launcher:
        spec["launcher"] = [str(word) for word in launcher]
    return _runner_job(spec, interpreter)


def tool_argv(
    tool: str,
    args: Sequence[str],
    *,
    files: dict[str, str] | None = None,
    collect: Sequence[str] = (),
    version_args: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
    parent: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
) -> list[str]:
    """An argv that runs an installed tool (fio, hpcc) on a node, in a private
    directory created under ``parent`` (the node's $TMPDIR when None) holding
    ``files``; the files named in ``collect`` come back with its output."""
    return _runner_job({
        "tool": tool,
        "args": [str(arg) for arg in args],
        "files": dict(files or {}),
        "collect": [str(name) for name in collect],
        "version_args": None if version_args is None else [str(arg) for arg in version_args],
        "env": {str(k): str(v) for k, v in (env or {}).items()},
        "parent": parent,
        "timeout": float(timeout),
    }, interpreter)


def _runner_job(spec: dict[str, Any], interpreter: str) -> list[str]:
    """The node runner's argv with its job as one extra argument, JSON then
    base64: the job's text is never pasted into code, and base64 needs no
    quoting in a remote shell."""
    encoded = base64.b64encode(json.dumps(spec).encode("utf-8")).decode("ascii")
    return python_command(runner_source(), interpreter) + [encoded]


# The node runner's options (see node_runner.py): build or find the tool and
# stop; wait for a wall-clock start time before running.
PREPARE_OPTION = "--prepare"
_START_OPTION = "--start-at="


def start_option(start_at: float) -> str:
    """The runner option that holds a run until ``start_at`` (epoch seconds)."""
    return f"{_START_OPTION}{start_at:.3f}"


def with_runner_options(argv: Sequence[str], *options: str) -> list[str]:
    """A runner argv (runner_argv, tool_argv or one wrapping them) with the
    node runner's options put right after its ``python -c CODE``: in front
    of the job argument(s), which stay last."""
    argv = list(argv)
    try:
        code = argv.index("-c") + 1
    except ValueError:
        raise ValueError("not a node runner argv: it has no -c") from None
    return argv[: code + 1] + list(options) + argv[code + 1 :]


@dataclass(frozen=True)
class StartTiming:
    """When a node's runner started and when it was ready to run (built,
    tool found), and the start it was asked for: epoch seconds, the node's
    clock."""

    launched: float
    arrived: float
    start_at: float | None

    @property
    def late(self) -> float:
        """Seconds the node was ready after the requested start (0 if on time)."""
        return 0.0 if self.start_at is None else max(0.0, self.arrived - self.start_at)


def start_timing(stdout: str) -> StartTiming | None:
    """The start timing in a runner report, None when it has none (a run
    that failed before it got ready, or output that is not a report)."""
    try:
        start = _runner_json("", stdout).get("start")
        launched, arrived = float(start["launched"]), float(start["arrived"])
        start_at = None if start.get("at") is None else float(start["at"])
    except (ParseError, TypeError, KeyError, ValueError, AttributeError):
        return None
    return StartTiming(launched, arrived, start_at)


def memory_kernel_argv(
    elements: int,
    ntimes: int = 10,
    threads: int | None = None,
    proc_bind: str | None = "spread",
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    *,
    min_loop_seconds: float = 0.0,
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that runs the memory kernel on a node.

    ``threads`` sets OMP_NUM_THREADS and ``proc_bind`` OMP_PROC_BIND; None
    leaves the node's setting (the kernel reports what it got either way).
    ``min_loop_seconds`` > 0 repeats each timed loop's pass until the loop
    lasts about that long (see memory.c): a rate clear of the timer and of
    the time slices of CPUs that nodes share.
    """
    if elements < 1:
        raise ValueError(f"elements must be >= 1, got {elements}")
    if ntimes < 2:
        raise ValueError(f"ntimes must be >= 2 (the first iteration is discarded), got {ntimes}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if not 0.0 <= min_loop_seconds <= MAX_MIN_LOOP_SECONDS:
        raise ValueError(f"min_loop_seconds must be 0 to {MAX_MIN_LOOP_SECONDS:g}, got {min_loop_seconds}")
    env: dict[str, str] = {}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if proc_bind is not None:
        env["OMP_PROC_BIND"] = proc_bind
    return runner_argv(
        "memory",
        ["-n", str(elements), "-t", str(ntimes)] + (["-m", f"{min_loop_seconds:g}"] if min_loop_seconds else []),
        cflags=cflags,
        defines=defines,
        env=env,
        timeout=timeout,
        interpreter=interpreter,
    )


# --- what comes back --------------------------------------------------------------


@dataclass(frozen=True)
class RunnerReport:
    """What the node runner says: which build ran, whether it was built now,
    and the kernel's exit status and output."""

    cache_key: str
    built: bool
    compiler: str
    flags: list[str]
    cpu_model: str
    build_seconds: float | None  # None when the cached build was used
    returncode: int
    stdout: str
    stderr: str
    runner_version: int = RUNNER_VERSION


def _quote(text: str) -> str:
    text = text.strip()
    return text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "..."


@dataclass(frozen=True)
class ToolReport:
    """What the node runner says of an installed tool's run: which one, its
    exit status (None when cut at its timeout), output and collected files."""

    tool: str
    tool_path: str
    tool_version: str | None
    cpu_model: str
    returncode: int | None
    stdout: str
    stderr: str
    collected: dict[str, str | None]


def _runner_json(source: str, stdout: str) -> dict[str, Any]:
    """The runner's JSON object, its version checked."""
    text = stdout.strip()
    if not text:
        raise ParseError(source, None, "no output from the kernel runner")
    data: Any = None
    # Login banners may precede the report; it is the last line in any case.
    for candidate in (text, text.splitlines()[-1]):
        try:
            data = json.loads(candidate)
            break
        except ValueError:
            continue
    if not isinstance(data, dict):
        raise ParseError(source, None, f"not a kernel runner report: {_quote(text)[:80]!r}")
    if data.get("runner_version") != RUNNER_VERSION:
        raise ParseError(
            source, None, f"kernel runner version {data.get('runner_version')!r}, expected {RUNNER_VERSION}"
        )
    return data


def parse_tool_output(source: str, stdout: str) -> ToolReport:
    """The runner's report of a tool's run.  ToolUnavailable when the node
    does not have the tool; ParseError for any other error the runner
    reports (a timeout included: the output of a cut run is not trusted)."""
    data = _runner_json(source, stdout)
    if data.get("error") == "not installed":
        raise ToolUnavailable(source, None, f"{data.get('tool', 'the tool')} is not installed on this node")
    if "error" in data:
        detail = _quote(str(data.get("detail", "")))
        raise ParseError(source, None, f"{data.get('tool', 'tool')}: {data['error']}" + (f": {detail}" if detail else ""))
    try:
        collected = data["collected"]
        return ToolReport(
            tool=str(data["tool"]),
            tool_path=str(data["tool_path"]),
            tool_version=None if data.get("tool_version") is None else str(data["tool_version"]),
            cpu_model=str(data["cpu_model"]),
            returncode=None if data["returncode"] is None else int(data["returncode"]),
            stdout=str(data["stdout"]),
            stderr=str(data["stderr"]),
            collected={str(k): None if v is None else str(v) for k, v in dict(collected).items()},
        )
    except (KeyError, TypeError, ValueError) as problem:
        raise ParseError(source, None, f"incomplete tool report: {problem!r}") from None


def parse_runner_output(source: str, stdout: str) -> RunnerReport:
    """The runner's JSON report of a kernel's run; ParseError if it is not
    one, or if it reports an error (the compiler's or the runner's message is
    in the exception)."""
    data = _runner_json(source, stdout)
    if "error" in data:
        detail = _quote(str(data.get("detail", "")))
        raise ParseError(source, None, f"kernel runner: {data['error']}" + (f":\n{detail}" if detail else ""))
    try:
        return RunnerReport(
            cache_key=str(data["cache_key"]),
            built=bool(data["built"]),
            compiler=str(data["compiler"]),
            flags=[str(flag) for flag in data["flags"]],
            cpu_model=str(data["cpu_model"]),
            build_seconds=None if data["build_seconds"] is None else float(data["build_seconds"]),
            returncode=int(data["returncode"]),
            stdout=str(data["stdout"]),
            stderr=str(data["stderr"]),
            runner_version=int(data["runner_version"]),
        )
    except (KeyError, TypeError, ValueError) as problem:
        raise ParseError(source, None, f"incomplete kernel runner report: {problem!r}") from None


_RESULT = re.compile(r"^result\s+(\w+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
_VALIDATION_OK = re.compile(r"^validation ok\s*$")
_VALIDATION_FAILED = re.compile(r"^validation failed\s+(\w+)\s+(\S+)\s*$")
# Header keys and how to read them; the others stay text.
_INT_KEYS = {
    "elements",
    "bytes_per_element",
    "bytes_per_array",
    "ntimes",
    "threads_requested",
    "threads_counted",
    "places",
    "timer_granularity_ns",
    "corrupt_element",
}
_FLOAT_KEYS = {"scalar", "tolerance", "min_loop_seconds"}




def parse_memory_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of our memory kernel: four bandwidths, the configuration
    it reports (effective threads, affinity, array bytes, timer), and its
    validation; ParseError if the output is not ours or is cut short."""
    output = read_kernel_output(text, source, "memory", int_keys=_INT_KEYS, float_keys=_FLOAT_KEYS)
    configuration = output.configuration
    results: dict[str, tuple[float, dict[str, float]]] = {}
    problems: list[str] = []
    validated = False

    for lineno, line in output.lines:
        result = _RESULT.match(line)
        if result:
            kernel = result.group(1)
            if kernel not in MEMORY_KERNELS:
                raise ParseError(source, lineno, f"unknown kernel {kernel!r}")
            rate, avg, best, worst = (number(result.group(i), source, lineno) for i in range(2, 6))
            results[kernel] = (rate, {"avg_time_s": avg, "min_time_s": best, "max_time_s": worst})
            continue
        if _VALIDATION_OK.match(line):
            validated = True
            continue
        failed = _VALIDATION_FAILED.match(line)
        if failed:
            validated = True
            error = failed.group(2)
            configuration["validation_failed_kernel"] = failed.group(1)
            configuration["validation_error"] = number(error, source, lineno)
            tolerance = configuration.get("tolerance")
            against = f" (tolerance {tolerance:.3e})" if isinstance(tolerance, float) else ""
            problems.append(
                f"validation failed: {failed.group(1)} max relative error {error}{against}"
            )
            continue
        raise ParseError(source, lineno, f"unexpected line in memory kernel output: {line[:80]!r}")

    missing = [kernel for kernel in MEMORY_KERNELS if kernel not in results]
    if missing:
        raise ParseError(
            source, output.line_count, f"truncated memory kernel output: no result line for {', '.join(missing)}"
        )
    if not validated:
        raise ParseError(source, output.line_count, "truncated memory kernel output: no validation line")
    for key in ("elements", "ntimes", "threads_counted", "bytes_per_array"):
        if key not in configuration:
            raise ParseError(source, None, f"memory kernel header lacks {key!r}")
    if output.warnings:
        configuration["timer_warnings"] = output.warnings

    valid = not problems
    common = {
        "elements": configuration["elements"],
        "ntimes": configuration["ntimes"],
        "threads": configuration["threads_counted"],
        "proc_bind": configuration.get("proc_bind", ""),
        **({"min_loop_seconds": configuration["min_loop_seconds"], "passes": configuration.get("passes", "")}
           if configuration.get("min_loop_seconds") else {}),
    }
    measurements = [
        Measurement(
            benchmark=f"memory.{kernel}",
            metric="bandwidth",
            value=results[kernel][0],
            unit=_UNIT,
            direction=Direction.HIGHER,
            valid=valid,
            parameters={**common, **results[kernel][1]},
        )
        for kernel in MEMORY_KERNELS
    ]
    return ParsedOutput(
        tool="oddnode-memory",
        measurements=measurements,
        valid=valid,
        problems=problems,
        configuration=configuration,
    )


# --- the DGEMM kernel -----------------------------------------------------------------

# dlopen lives in libc from glibc 2.34 on; older ones need libdl, and newer
# ones still ship it as an empty stub, so linking it always works everywhere.
DGEMM_LDLIBS = ("-ldl",)
# The variables through which the common BLAS libraries take their thread
# count: OpenBLAS and MKL read OMP_NUM_THREADS only when their own is unset.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
_DGEMM_INT_KEYS = {
    "n",
    "bytes_per_matrix",
    "ntimes",
    "threads_requested",
    "threads_counted",
    "blas_threads",
    "timer_granularity_ns",
    "seed",
    "corrupt_element",
}
_DGEMM_FLOAT_KEYS = {"flops_per_call", "residual_threshold", "scaled_residual"}


def blas_thread_env(threads: int | None) -> dict[str, str]:
    """Environment that gives OpenMP and the BLAS ``threads`` threads; empty
    for None, which leaves each node's own setting."""
    if threads is None:
        return {}
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return dict.fromkeys(BLAS_THREAD_VARIABLES, str(threads))


def dgemm_kernel_argv(
    n: int,
    ntimes: int = 5,
    threads: int | None = None,
    blas: str | None = None,
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that runs the DGEMM kernel on a node.

    ``blas`` (a path, a soname, or "builtin") sets ODDNODE_BLAS; None lets the
    kernel find the node's library.  ``threads`` as in blas_thread_env.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if ntimes < 2:
        raise ValueError(f"ntimes must be >= 2 (the first multiply is discarded), got {ntimes}")
    env = blas_thread_env(threads)
    if blas is not None:
        env["ODDNODE_BLAS"] = blas
    return runner_argv(
        "dgemm",
        ["-n", str(n), "-t", str(ntimes)],
        cflags=cflags,
        defines=defines,
        ldlibs=DGEMM_LDLIBS,
        env=env,
        timeout=timeout,
        interpreter=interpreter,
    )


def parse_dgemm_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of our DGEMM kernel: its GFLOP/s, the BLAS and threads it
    reports, and its residual check; ParseError if the output is not ours or
    is cut short."""
    output = read_kernel_output(text, source, "dgemm", int_keys=_DGEMM_INT_KEYS, float_keys=_DGEMM_FLOAT_KEYS)
    configuration = output.configuration
    result: tuple[float, dict[str, float]] | None = None
    problems: list[str] = []
    validated = False

    for lineno, line in output.lines:
        found = _RESULT.match(line)
        if found:
            if found.group(1) != "dgemm":
                raise ParseError(source, lineno, f"unknown kernel {found.group(1)!r}")
            rate, avg, best, worst = (number(found.group(i), source, lineno) for i in range(2, 6))
            result = (rate, {"avg_time_s": avg, "min_time_s": best, "max_time_s": worst})
            continue
        if _VALIDATION_OK.match(line):
            validated = True
            continue
        failed = _VALIDATION_FAILED.match(line)
        if failed:
            validated = True
            residual = number(failed.group(2), source, lineno)
            configuration["scaled_residual"] = residual
            threshold = configuration.get("residual_threshold")
            against = f" > threshold {threshold:g}" if isinstance(threshold, float) else ""
            problems.append(f"validation failed: dgemm scaled residual {residual:.3e}{against}")
            continue
        raise ParseError(source, lineno, f"unexpected line in dgemm kernel output: {line[:80]!r}")

    if result is None:
        raise ParseError(source, output.line_count, "truncated dgemm kernel output: no result line")
    if not validated:
        raise ParseError(source, output.line_count, "truncated dgemm kernel output: no validation line")
    for key in ("n", "ntimes", "threads_counted", "blas"):
        if key not in configuration:
            raise ParseError(source, None, f"dgemm kernel header lacks {key!r}")
    if output.warnings:
        configuration["timer_warnings"] = output.warnings

    valid = not problems
    parameters: dict[str, Any] = {
        "n": configuration["n"],
        "ntimes": configuration["ntimes"],
        "threads": configuration["threads_counted"],
        # The file the multiply came from tells two OpenBLAS builds apart.
        "blas": configuration.get("blas_file", configuration["blas"]),
        **result[1],
    }
    for key in ("blas_threads", "scaled_residual"):
        if key in configuration:
            parameters[key] = configuration[key]
    measurement = Measurement(
        benchmark="compute.dgemm",
        metric="performance",
        value=result[0],
        unit=canonical_unit("GFLOP/s"),
        direction=Direction.HIGHER,
        valid=valid,
        parameters=parameters,
    )
    return ParsedOutput(
        tool="oddnode-dgemm",
        measurements=[measurement],
        valid=valid,
        problems=problems,
        configuration=configuration,
    )
