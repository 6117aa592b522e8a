"""The jobs that build and run our kernels (and installed tools) on the
nodes, and the reports that come back.

The C sources and ``node_runner.py`` ship in this package and travel inside
the argv as every script of ours does (reach/scripts.py): the runner compiles a kernel on the node with
``-march=native`` once per source, flags, compiler and CPU model, caches the
binary in the user's cache directory and prints one JSON report.  Everything
here runs on the admin's machine: it builds the argv and reads the report;
each kernel's own module (memory, dgemm, disk) builds its arguments and
parses its output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from oddnode.parsers.base import ParseError, ToolUnavailable
from oddnode.reach.base import NodeResult, NodeStatus, pack_text, unpack_text
from oddnode.reach.scripts import onnode_script, python_command

RUNNER_VERSION = 1
# Seconds a kernel may run on a node, compile excluded.
DEFAULT_TIMEOUT = 600.0
# How much of a bad output or compiler message an error quotes.
QUOTED_CHARS = 2000


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
    """The node runner script's text, as shipped in the package (its own
    file's: no module of ours travels with it)."""
    return onnode_script("node_runner")


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
    return runner_job(spec, interpreter)


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
    return runner_job({
        "tool": tool,
        "args": [str(arg) for arg in args],
        "files": dict(files or {}),
        "collect": [str(name) for name in collect],
        "version_args": None if version_args is None else [str(arg) for arg in version_args],
        "env": {str(k): str(v) for k, v in (env or {}).items()},
        "parent": parent,
        "timeout": float(timeout),
    }, interpreter)


def encode_job(spec: dict[str, Any]) -> str:
    """A job as the runner's last argument: JSON, packed (compressed, then
    base64): its text is never pasted into code, and needs no quoting in a
    remote shell."""
    return pack_text(json.dumps(spec))


def decode_job(word: str) -> dict[str, Any]:
    """The job encode_job encoded; ValueError when the word is not one."""
    job = json.loads(unpack_text(word))
    if not isinstance(job, dict):
        raise ValueError("a job is a JSON object")
    return job


def runner_job(spec: dict[str, Any], interpreter: str = "python3") -> list[str]:
    """The node runner's argv with its job (``spec``, see node_runner.py)
    as one extra argument."""
    return python_command(runner_source(), interpreter) + [encode_job(spec)]


# --- several jobs for one start of the runner ----------------------------------------


def scheduled_argv(items: Sequence[tuple[float | None, Sequence[str]]]) -> list[str]:
    """One runner argv that runs the jobs of several runner argvs
    (runner_argv, tool_argv; without runner options) on a node in turn,
    each held until its start (epoch seconds; None: as soon as the one
    before it has ended): a node's part in several rounds of a measurement
    for one connection and one start of the runner.  Its report is split
    back into one per job by schedule_results."""
    if not items:
        raise ValueError("a schedule holds at least one job")
    interpreter = items[0][1][0]
    runner = python_command(runner_source(), interpreter)
    schedule: list[dict[str, Any]] = []
    sources: list[str] = []  # each C source once: the jobs of a round share a kernel
    for start_at, argv in items:
        if list(argv[:-1]) != runner:
            raise ValueError("a scheduled job is a node runner argv without options, as runner_argv makes it")
        job = decode_job(argv[-1])
        item: dict[str, Any] = {"start_at": None if start_at is None else round(start_at, 3), "job": job}
        if isinstance(job.get("source"), str):
            source = job.pop("source")
            if source not in sources:
                sources.append(source)
            item["source"] = sources.index(source)
        schedule.append(item)
    return runner_job({"schedule": schedule, "sources": sources}, interpreter)


def schedule_results(result: NodeResult, jobs: int) -> list[NodeResult]:
    """A node's result of a scheduled_argv of ``jobs`` jobs, as the result
    each job's own argv would have given: its report, in turn.  A node that
    could not run the schedule (unreachable, cut, failed) gives that
    result for every job; a report that is no schedule's (the runner's own
    error, garbled output) goes to every job as it is, for its parser to
    say what is wrong; a job the report lacks failed, saying so."""
    data = last_json_object(result.stdout) if result.ok else None
    reports = data.get("schedule") if data is not None else None
    if not isinstance(reports, list):
        return [result] * jobs
    results = []
    for index in range(jobs):
        if index < len(reports) and isinstance(reports[index], dict):
            results.append(NodeResult(result.node, NodeStatus.OK, json.dumps(reports[index]), result.stderr,
                                      result.exit_code, result.duration))
        else:
            results.append(NodeResult(result.node, NodeStatus.FAILED, "",
                                      f"the node runner reported {len(reports)} of the {jobs} jobs of its schedule",
                                      result.exit_code, result.duration))
    return results


# Runs on the node: gives the node runner the tool's job when the tool is on
# PATH (the test the runner itself makes), our kernel's job otherwise.  Its
# arguments: the runner's options (see with_runner_options), then the
# runner's source and the two jobs, each packed as the runner takes them
# (reach.base.pack_text); the runner then runs as if started with its
# options and the chosen job.
_TOOL_OR_KERNEL = """\
import base64, json, shutil, sys, zlib
options, (source, tool_job, kernel_job) = sys.argv[1:-3], sys.argv[-3:]
tool = json.loads(zlib.decompress(base64.b64decode(tool_job)).decode("utf-8"))["tool"]
sys.argv = [sys.argv[0]] + options + [tool_job if shutil.which(tool) else kernel_job]
exec(compile(zlib.decompress(base64.b64decode(source)), "<oddnode node runner>", "exec"), {"__name__": "__main__"})
"""


def tool_or_kernel_argv(tool: list[str], kernel: list[str], interpreter: str = "python3") -> list[str]:
    """One argv that runs ``tool`` (a tool_argv) where its program is
    installed and ``kernel`` (a runner_argv) elsewhere: the node decides."""
    # Both argvs end with their job, the one argument the runner reads.
    return python_command(_TOOL_OR_KERNEL, interpreter) + [pack_text(runner_source()), tool[-1], kernel[-1]]


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
    finished: float | None = None  # when its run ended; None if it did not run

    @property
    def late(self) -> float:
        """Seconds the node was ready after the requested start (0 if on time)."""
        return 0.0 if self.start_at is None else max(0.0, self.arrived - self.start_at)


def start_timing(stdout: str) -> StartTiming | None:
    """The start timing in a runner report, None when it has none (a run
    that failed before it got ready, or output that is not a report)."""
    try:
        report = _runner_json("", stdout)
        start = report.get("start")
        launched, arrived = float(start["launched"]), float(start["arrived"])
        start_at = None if start.get("at") is None else float(start["at"])
        finished = None if report.get("finished") is None else float(report["finished"])
    except (ParseError, TypeError, KeyError, ValueError, AttributeError):
        return None
    return StartTiming(launched, arrived, start_at, finished)


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


def last_json_object(stdout: str) -> dict[str, Any] | None:
    """The JSON object a node printed: the whole output, else its last line
    (login banners may precede it); None when neither is one."""
    text = stdout.strip()
    if not text:
        return None
    for candidate in (text, text.splitlines()[-1]):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        return data if isinstance(data, dict) else None
    return None


def _runner_json(source: str, stdout: str) -> dict[str, Any]:
    """The runner's JSON object, its version checked."""
    text = stdout.strip()
    if not text:
        raise ParseError(source, None, "no output from the kernel runner")
    data = last_json_object(text)
    if data is None:
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
