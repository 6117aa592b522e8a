"""oddnode's own MPI profiler: the PMPI interposition library
(``oddnode/kernels/mpi_profiler.c``) built with ``mpicc`` by the node
runner, the launcher arguments that preload it into every rank of an
unchanged application, a profiled run, and the reader of the profile rank 0
writes at MPI_Finalize (format in docs/formats.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from oddnode.reach.jobs import PREPARE_OPTION, kernel_source, last_json_object, runner_job, with_runner_options
from oddnode.parsers.base import ParseError
from oddnode.readings.profile import ZERO_BUCKET, Bucket, Profile, RankProfile, bucket_range
from oddnode.reach.base import Target
from oddnode.reach.launch import (
    OPEN_MPI,
    OPEN_MPI_ROOT_ENV,
    SINGLETON,
    LauncherError,
    launcher_kind,
    pass_environment,
)

KERNEL = "mpi_profiler"
TOOL = "oddnode"
FORMAT = "oddnode-mpi-profile"
FORMAT_VERSION = 1
OUTPUT_VARIABLE = "ODDNODE_PROFILE_OUTPUT"
# The MPI calls the library wraps (its CALL_NAMES); others are not counted.
WRAPPED_CALLS: tuple[str, ...] = (
    "MPI_Init", "MPI_Init_thread", "MPI_Finalize",
    "MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend", "MPI_Issend", "MPI_Irecv", "MPI_Recv",
    "MPI_Sendrecv", "MPI_Sendrecv_replace",
    "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test", "MPI_Testall", "MPI_Testany",
    "MPI_Probe", "MPI_Iprobe",
    "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block",
    "MPI_Scan", "MPI_Exscan", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Allgather",
    "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw",
    "MPI_Ibarrier", "MPI_Ibcast", "MPI_Iallreduce", "MPI_Ialltoall")
PRELOAD_VARIABLE = "LD_PRELOAD"
# Seconds a build with mpicc may take on a node (the runner's own compile
# limit is 300 s; the rest is the transport's start).
BUILD_TIMEOUT = 360.0
# Seconds to read the profile back from a node.
FETCH_TIMEOUT = 60.0
# A relative tolerance for "max <= total" on numbers printed with 9 decimals.
_ROUNDING = 1e-9


class ProfilerError(Exception):
    """The profiler could not be built, run or read: what and where."""


@dataclass(frozen=True)
class ProfiledRun:
    """A profiled application run: its profile, exit status, the profile
    file and the run's wall seconds."""

    profile: Profile
    returncode: int
    output: Path
    seconds: float


# --- building ---------------------------------------------------------------------


def profiler_job(interpreter: str = "python3") -> list[str]:
    """The node runner argv that builds the profiler library (shared-library
    mode, prepare only) with mpicc."""
    spec = {"kernel": KERNEL, "source": kernel_source(KERNEL), "cflags": [], "defines": [], "ldlibs": ["-lpthread"],
            "args": [], "env": {}, "timeout": BUILD_TIMEOUT, "compiler": "mpicc", "shared": True}
    return with_runner_options(runner_job(spec, interpreter), PREPARE_OPTION)


def _library_of(where: str, stdout: str) -> str:
    """The library path in a runner's report; ProfilerError naming ``where``."""
    report = last_json_object(stdout)
    if report is None:
        raise ProfilerError(f"building the MPI profiler on {where}: no runner report, got {stdout.strip()[:300]!r}")
    if "error" in report:
        detail = str(report.get("detail", "")).strip()[:2000]
        raise ProfilerError(f"building the MPI profiler on {where}: {report['error']}" + (f":\n{detail}" if detail
                                                                                          else ""))
    library = report.get("library")
    if not isinstance(library, str) or not library:
        raise ProfilerError(f"building the MPI profiler on {where}: the runner report names no library")
    return library


def build_profiler_library(target: Target | None = None, *, timeout: float = BUILD_TIMEOUT) -> Path:
    """Build (once, cached) the profiler library here, or on every node of
    ``target``; its absolute path, which must be the same on every node."""
    if target is None:
        argv = profiler_job(sys.executable)
        try:
            completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ProfilerError(f"building the MPI profiler here took more than {timeout:g} s") from None
        return Path(_library_of("this machine", completed.stdout))
    results = target.transport.run(target.nodes, profiler_job(), timeout=timeout)
    paths: dict[str, list[str]] = {}
    for node in target.nodes:
        result = results[node]
        if not result.ok and not result.stdout.strip():
            raise ProfilerError(f"building the MPI profiler on {node}: {result.status.value} "
                                f"(exit {result.exit_code}): {result.stderr.strip()[:500]}")
        paths.setdefault(_library_of(node, result.stdout), []).append(node)
    if len(paths) != 1:
        shown = "; ".join(f"{path} on {', '.join(nodes[:3])}{' ...' if len(nodes) > 3 else ''}"
                          for path, nodes in paths.items())
        raise ProfilerError(f"the MPI profiler's cache path differs between nodes ({shown}); every rank preloads "
                            "the same path: set XDG_CACHE_HOME to one directory that exists on every node "
                            "(a shared file system, or the same local path) and run again")
    return Path(next(iter(paths)))


# --- the launcher -----------------------------------------------------------------


def profiled_argv(argv: Sequence[str], library: str | os.PathLike[str],
                  output: str | os.PathLike[str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` with the profiler preloaded into every rank and the profile
    path passed to them, and the extra environment of the launcher process
    (the library is never preloaded into a launcher)."""
    argv = [str(word) for word in argv]
    if not argv:
        raise ProfilerError("no command to profile")
    library, output = os.path.abspath(library), os.path.abspath(output)
    preload = library + (":" + os.environ[PRELOAD_VARIABLE] if os.environ.get(PRELOAD_VARIABLE) else "")
    env = {PRELOAD_VARIABLE: preload, OUTPUT_VARIABLE: output}
    try:
        kind = launcher_kind(argv[0])
        if kind == SINGLETON:
            return argv, env
        return pass_environment(argv, env, kind), dict(OPEN_MPI_ROOT_ENV) if kind == OPEN_MPI else {}
    except LauncherError as problem:
        raise ProfilerError(str(problem)) from None


# --- running ----------------------------------------------------------------------


def _fetch(target: Target, output: Path) -> str | None:
    """The profile's text from the first node that has it, or None."""
    results = target.transport.run(target.nodes, ["cat", str(output)], timeout=FETCH_TIMEOUT)
    for node in target.nodes:
        result = results.get(node)
        if result is not None and result.ok and result.stdout.startswith(FORMAT):
            return result.stdout
    return None


def run_profiled(argv: Sequence[str], *, target: Target | None = None, timeout: float | None = None,
                 work_dir: str | os.PathLike[str] | None = None) -> ProfiledRun:
    """Run ``argv`` (``mpirun ... APP``, ``srun ... APP`` or the application
    itself) profiled, its output passed through, and read its profile."""
    library = build_profiler_library(target)
    directory = Path(work_dir) if work_dir is not None else Path.cwd()
    output = (directory / f"oddnode-profile-{os.getpid()}-{time.time_ns()}.txt").absolute()
    try:
        output.unlink()
    except FileNotFoundError:
        pass
    command, extra = profiled_argv(argv, library, output)
    started = time.monotonic()
    try:
        process = subprocess.Popen(command, env={**os.environ, **extra}, start_new_session=True)
    except OSError as problem:
        raise ProfilerError(f"cannot start {command[0]}: {problem}") from None
    try:
        returncode = process.wait(timeout=timeout)
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as stop:
        # The launcher and its ranks are one session: stop all of them.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        process.wait()
        if isinstance(stop, KeyboardInterrupt):
            raise
        raise ProfilerError(f"{command[0]} did not finish in {timeout:g} s: stopped, no profile") from None
    seconds = time.monotonic() - started
    if output.exists():
        text = output.read_text(encoding="utf-8", errors="replace")
    else:
        text = _fetch(target, output) if target is not None else None
        if text is None:
            raise ProfilerError(f"no profile: the application ended (status {returncode}) before MPI_Finalize, "
                                f"or rank 0's node could not write {output}")
        output.write_text(text, encoding="utf-8")
    profile = parse_profiler_output(text, str(output))
    return ProfiledRun(profile, returncode, output, seconds)


# --- reading ----------------------------------------------------------------------


def _number(word: str, what: str, source: str, lineno: int) -> float:
    try:
        value = float(word)
    except ValueError:
        raise ParseError(source, lineno, f"{what}: expected a number, found {word!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ParseError(source, lineno, f"{what}: {word!r} is not a non-negative number")
    return value


def _whole(word: str, what: str, source: str, lineno: int, low: int = 0) -> int:
    if not (word.isdigit() or (word.startswith("-") and word[1:].isdigit())):
        raise ParseError(source, lineno, f"{what}: expected a whole number, found {word!r}")
    value = int(word)
    if value < low:
        raise ParseError(source, lineno, f"{what}: {value} is below {low}")
    return value


def _bucket(word: str, source: str, lineno: int) -> Bucket:
    if word == "-":
        return None
    bucket = _whole(word, "bucket", source, lineno, ZERO_BUCKET)
    if bucket > 62:
        raise ParseError(source, lineno, f"bucket {bucket} is beyond 2^63 bytes")
    return bucket


def parse_profiler_output(text: str, source: str) -> Profile:
    """The profile rank 0 wrote; ParseError with the line on anything that
    is not that format, or a file cut short."""
    lines = text.splitlines()
    header: dict[str, list[str]] = {}
    expected = ("oddnode-mpi-profile", "ranks", "clock", "command")
    for index, key in enumerate(expected):
        lineno = index + 1
        if index >= len(lines):
            raise ParseError(source, lineno, f"truncated profile: no {key!r} header line")
        key_word, _, rest = lines[index].partition(" ")
        if key_word != key:
            what = "not an oddnode MPI profile" if index == 0 else "a header line out of place"
            raise ParseError(source, lineno, f"{what}: expected '{key} ...', found {lines[index][:80]!r}")
        header[key] = rest.split() if key != "command" else [rest]
    version = _whole(header[FORMAT][0] if len(header[FORMAT]) == 1 else "?", "format version", source, 1)
    if version != FORMAT_VERSION:
        raise ParseError(source, 1, f"format version {version}; this reader knows {FORMAT_VERSION}")
    if len(header["ranks"]) != 1:
        raise ParseError(source, 2, f"expected 'ranks K', found {lines[1][:80]!r}")
    ranks = _whole(header["ranks"][0], "ranks", source, 2, 1)
    clock = header["clock"]
    if clock == ["monotonic"]:
        note = "clock: CLOCK_MONOTONIC"
    elif len(clock) == 2 and clock[0] == "tsc":
        note = f"clock: TSC at {_number(clock[1], 'TSC ticks per second', source, 3) / 1e9:.4f} GHz"
    else:
        raise ParseError(source, 3, f"expected 'clock tsc HZ' or 'clock monotonic', found {lines[2][:80]!r}")
    profile = Profile(tool=TOOL, source=source, command=header["command"][0] or None, notes=[note])

    seen: dict[int, RankProfile] = {}
    ended = False
    for lineno, line in enumerate(lines[4:], start=5):
        words = line.split()
        if ended:
            raise ParseError(source, lineno, f"a line after 'end': {line[:80]!r}")
        if not words:
            raise ParseError(source, lineno, "an empty line")
        if words == ["end"]:
            ended = True
        elif words[0] == "rank":
            if len(words) != 6:
                raise ParseError(source, lineno, f"a rank line is 'rank R HOST WALL_S MPI_S CPU', found {line[:120]!r}")
            rank = _whole(words[1], "rank", source, lineno)
            if rank != len(seen) or rank >= ranks:
                raise ParseError(source, lineno, f"rank line of rank {rank} where rank {len(seen)} of {ranks} belongs")
            wall = _number(words[3], "wall time", source, lineno)
            mpi = _number(words[4], "time in MPI", source, lineno)
            cpu = None if words[5] == "-" else _number(words[5], "CPU utilisation", source, lineno)
            entry = profile.rank(rank)
            entry.host, entry.wall, entry.mpi_time, entry.cpu = words[2], wall, mpi, cpu
            seen[rank] = entry
        elif words[0] == "call":
            if len(words) != 8:
                raise ParseError(source, lineno, "a call line is 'call R MPI_NAME BUCKET COUNT TIME_S MAX_S BYTES', "
                                                 f"found {line[:120]!r}")
            rank = _whole(words[1], "rank", source, lineno)
            if rank not in seen or len(seen) < ranks:
                raise ParseError(source, lineno, f"a call line of rank {rank} before every rank's line")
            call = words[2]
            if not call.startswith("MPI_"):
                raise ParseError(source, lineno, f"{call!r} is not an MPI call")
            bucket = _bucket(words[3], source, lineno)
            count = _whole(words[4], "count", source, lineno, 1)
            total = _number(words[5], "time", source, lineno)
            longest = _number(words[6], "max time", source, lineno)
            nbytes = _whole(words[7], "bytes", source, lineno)
            if longest > total * (1 + _ROUNDING) + _ROUNDING:
                raise ParseError(source, lineno, f"the longest call ({longest} s) exceeds the total ({total} s)")
            span = bucket_range(bucket)
            # Each call's size lies in the bucket, so their sum lies in count x the bucket.
            low, high = (0, 1) if span is None else span
            if not count * low <= nbytes <= count * (high - 1):
                raise ParseError(source, lineno, f"{nbytes} bytes in {count} calls do not fit bucket "
                                                 f"{words[3]} ({'no size' if span is None else f'{low}-{high - 1} B'})")
            if (call, bucket) in seen[rank].calls:
                raise ParseError(source, lineno, f"a second line of rank {rank} {call} bucket {words[3]}")
            seen[rank].record(call, bucket, count, total, longest, nbytes)
        else:
            raise ParseError(source, lineno, f"unexpected line in an oddnode MPI profile: {line[:80]!r}")
    if not ended:
        missing = f"; the rank lines of {ranks - len(seen)} ranks are missing" if len(seen) < ranks else ""
        raise ParseError(source, len(lines), f"truncated profile: no 'end' line{missing}")
    if len(seen) < ranks:
        raise ParseError(source, len(lines), f"the profile declares {ranks} ranks but has {len(seen)} rank lines")
    return profile


def read_profiler_output(path: str | os.PathLike[str]) -> Profile:
    """The profile in a file (parse_profiler_output)."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as problem:
        raise ParseError(str(path), None, f"cannot read the profile: {problem.strerror or problem}") from None
    return parse_profiler_output(text, str(path))
