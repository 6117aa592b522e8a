"""The disk stage: sequential write and read bandwidth of one directory on
every node, with fio where it is installed and our own kernel (disk.c)
otherwise, both writing the same file size in the same block size with
O_DIRECT and both checking that the data reads back as written.

Both engines write the series ``disk.seq_write`` and ``disk.seq_read``
(``bandwidth``, MB/s = 10^6 B/s), so nodes with and without fio are compared
with each other; every result says which engine measured it (``engine``).

With several target directories (``dirs``: a node's local /tmp and the
shared /scratch) each is run on its own, one after the other, and stored
under its own metric, ``bandwidth.<directory>`` (``disk.seq_write`` metric
``bandwidth./scratch``): a node's /tmp is judged against the other nodes'
/tmp only, never against /scratch, and a directory that a node lacks or
cannot write is that node's failure for that directory alone.
Each engine times only its I/O: fio's data check runs in passes of its own
after the timed ones, our kernel fills and checks its buffers outside its
timer, so that neither engine counts CPU work as disk time.
"""

from __future__ import annotations

import errno
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from oddnode.measure.benchmarks import BenchmarkSpec, parse_kernel_run
from oddnode.readings.disk import PASSES, SERIES_METRIC, directory_table, directory_table_lines
from oddnode.reach.jobs import (
    ToolReport,
    last_json_object,
    parse_tool_output,
    runner_argv,
    tool_argv,
    tool_or_kernel_argv,
)
from oddnode.parsers.kernel_output import number, read_kernel_output, whole
from oddnode.core.model import Direction
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, json_document
from oddnode.parsers.fio import parse_fio
from oddnode.measure.runner import run_benchmark
from oddnode.measure.steps import NodeBenchmark, StepContext, StepOutcome, option
from oddnode.core.units import canonical_unit

DISK_STAGE = "disk"
ENGINES = ("auto", "fio", "oddnode")
DEFAULT_DIRECTORY = "/var/tmp"
# 4 GiB: more than common RAID-controller write caches (1-8 GiB) and drive
# DRAM caches (about 1 GiB per TB), so most of it reaches the media; the same
# default as disk.c's, where the choice is explained.
DEFAULT_SIZE = 4 * 1024**3
DEFAULT_BLOCK = 1024**2  # a streaming request size, as storage vendors quote rates
# Blocks are multiples of 4096 bytes so that any logical block size up to
# 4 KiB divides them, as O_DIRECT requires (disk.c checks it too).
BLOCK_MULTIPLE = 4096
MAX_BLOCK = 1024**3  # disk.c allocates one buffer of a block
# Seconds one run may take on a node: a write and a read pass (fio: two more
# for its check) of 4 GiB at 100 MB/s take 90-180 s.
DEFAULT_TIMEOUT = 600.0
_UNIT = canonical_unit("MB/s")  # both engines' MB is 10^6 bytes
# How much of a failing tool's stderr a problem quotes.
DETAIL_CHARS = 300

FIO_JOB_FILE = "oddnode-disk.fio"
FIO_OUTPUT = "fio.json"
# fio's check: every block written with a crc32c header, then read back and
# checked; a job whose block does not match ends with error EILSEQ.
FIO_VERIFY = "crc32c"
FIO_VERIFY_JOBS = ("verify_write", "verify_read")


def validate_disk_parameters(directory: str, size: int, block: int, engine: str) -> str:
    """The directory, normalised; ValueError naming what is wrong.  Checked
    here, on the admin's machine, so that a typo fails before any node runs."""
    if not isinstance(directory, str) or not posixpath.isabs(directory):
        raise ValueError(f"the disk directory must be an absolute path, got {directory!r}")
    if any(ord(char) < 32 or ord(char) == 127 for char in directory):
        raise ValueError(f"the disk directory contains a control character: {directory!r}")
    for name, value in (("size", size), ("block", block)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"the disk {name} must be a whole number of bytes, got {value!r}")
    if block < BLOCK_MULTIPLE or block % BLOCK_MULTIPLE or block > MAX_BLOCK:
        raise ValueError(f"the disk block must be a multiple of {BLOCK_MULTIPLE} bytes up to {MAX_BLOCK}, got {block}")
    if size < block or size % block:
        raise ValueError(f"the disk size must be a whole number of {block}-byte blocks, got {size}")
    if engine not in ENGINES:
        raise ValueError(f"unknown disk engine {engine!r} (engines: {', '.join(ENGINES)})")
    return posixpath.normpath(directory)


# --- what runs on a node ----------------------------------------------------------


def disk_kernel_argv(
    directory: str,
    size: int = DEFAULT_SIZE,
    block: int = DEFAULT_BLOCK,
    *,
    defines: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that builds (once) and runs our disk kernel on a node."""
    directory = validate_disk_parameters(directory, size, block, "oddnode")
    return runner_argv("disk", ["-d", directory, "-s", str(size), "-b", str(block)],
                       defines=defines, timeout=timeout, interpreter=interpreter)


def fio_job_text(size: int, block: int) -> str:
    """fio's job file: the timed passes as plain sequential I/O like our
    kernel's (synchronous, one request in flight, O_DIRECT, the final fsync
    timed with the writes), then an untimed write and read of the same file
    with fio's crc32c check, which would slow the timed passes by fill and
    checksum work."""
    # fallocate=none and create_on_open=1: the write pass allocates a new
    # file as our kernel's does, and fio does not lay the file out first.
    return f"""\
[global]
filename=oddnode-disk.dat
size={size}
bs={block}
direct=1
ioengine=psync
iodepth=1
fallocate=none
create_on_open=1
verify_state_save=0

[seq_write]
rw=write
end_fsync=1

[seq_read]
stonewall
rw=read

[verify_write]
stonewall
rw=write
verify={FIO_VERIFY}
do_verify=0
end_fsync=1

[verify_read]
stonewall
rw=read
verify={FIO_VERIFY}
"""


def fio_argv(
    directory: str,
    size: int = DEFAULT_SIZE,
    block: int = DEFAULT_BLOCK,
    *,
    job_text: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that runs fio's disk job on a node, in a private directory
    under ``directory``; its JSON goes to a file, apart from its messages."""
    directory = validate_disk_parameters(directory, size, block, "fio")
    return tool_argv(
        "fio",
        ["--output-format=json", f"--output={FIO_OUTPUT}", FIO_JOB_FILE],
        files={FIO_JOB_FILE: job_text if job_text is not None else fio_job_text(size, block)},
        collect=[FIO_OUTPUT],
        version_args=["--version"],
        parent=directory,
        timeout=timeout,
        interpreter=interpreter,
    )


# --- what comes back: our kernel --------------------------------------------------


_INT_KEYS = {"size_bytes", "block_bytes", "blocks", "buffer_alignment", "timer_granularity_ns", "corrupt_read_offset"}
_REQUIRED_KEYS = ("directory", "filesystem", "size_bytes", "block_bytes", "direct")


def parse_disk_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of our disk kernel: write and read bandwidth, the
    configuration it reports (file system, sizes, direct I/O or why not) and
    its check of the data read back; ParseError if the output is not ours or
    is cut short."""
    output = read_kernel_output(text, source, "disk", int_keys=_INT_KEYS)
    configuration = output.configuration
    warnings = list(output.warnings)
    results: dict[str, tuple[float, float, int]] = {}  # pass -> MB/s, seconds, bytes
    problems: list[str] = []
    validated = False
    if "direct" in configuration:
        direct = configuration["direct"]
        configuration["direct"] = direct == "yes"
        if direct != "yes":
            if not (direct.startswith("no (") and direct.endswith(")")):
                raise ParseError(source, output.header_lines["direct"],
                                 f"expected 'yes' or 'no (why)', found {direct!r}")
            configuration["direct_refused"] = direct[len("no ("):-1]
    for lineno, line in output.lines:
        words = line.split()
        if words[0] == "result" and len(words) == 5 and words[1] in PASSES:
            rate, seconds = (number(word, source, lineno) for word in words[2:4])
            results[words[1]] = (rate, seconds, whole(words[4], source, lineno))
            continue
        if line == "validation ok":
            validated = True
            continue
        if words[:2] == ["validation", "failed"] and len(words) == 4:
            validated = True
            # -1 is the kernel's 'no bad block' for the first bad offset.
            bad_blocks, first_bad = whole(words[2], source, lineno), whole(words[3], source, lineno, minimum=-1)
            configuration.update(bad_blocks=bad_blocks, first_bad_offset=first_bad)
            where = f", the first at byte offset {first_bad}" if first_bad >= 0 else ""
            of = f" of {configuration['blocks']}" if "blocks" in configuration else ""
            problems.append(f"data read back differs from what was written in {bad_blocks}{of} blocks{where} "
                            f"(checksum {configuration.get('checksum', 'not reported')})")
            continue
        raise ParseError(source, lineno, f"unexpected line in disk kernel output: {line[:80]!r}")

    missing = [name for name in PASSES if name not in results]
    if missing:
        raise ParseError(source, output.line_count,
                         f"truncated disk kernel output: no result line for {', '.join(missing)}")
    if not validated:
        raise ParseError(source, output.line_count, "truncated disk kernel output: no validation line")
    for key in _REQUIRED_KEYS:
        if key not in configuration:
            raise ParseError(source, None, f"disk kernel header lacks {key!r}")
    if not configuration["direct"]:
        # Valid, and kept apart by its parameters: the bytes were checked, and
        # buffered I/O with fdatasync and dropped pages still reaches the
        # device; where the file system is RAM (tmpfs) the node stands out
        # with filesystem=tmpfs, which is the admin's finding to make.
        warnings.append(f"buffered I/O, not O_DIRECT: {configuration['direct_refused']}")
    if warnings:
        configuration["warnings"] = warnings
    configuration["engine"] = "oddnode"

    valid = not problems
    common = {
        "engine": "oddnode",
        "directory": configuration["directory"],
        "filesystem": configuration["filesystem"],
        "size_bytes": configuration["size_bytes"],
        "block_bytes": configuration["block_bytes"],
        "direct": configuration["direct"],
    }
    measurements = [
        Measurement(f"disk.{name}", results[name][0], _UNIT, Direction.HIGHER, SERIES_METRIC, valid,
                    {**common, "seconds": results[name][1]})
        for name in PASSES
    ]
    return ParsedOutput(tool="oddnode-disk", measurements=measurements, valid=valid, problems=problems,
                        configuration=configuration)


# --- what comes back: fio ---------------------------------------------------------


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:DETAIL_CHARS] if lines else ""


def _fio_number(text: Any) -> int | str:
    """fio echoes job options as text; ours are plain numbers of bytes."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return str(text)


def parse_fio_report(report: ToolReport, source: str) -> ParsedOutput:
    """fio's JSON, collected by the node runner, as the disk series: its
    seq_write and seq_read jobs' bandwidths; an error in any job, its data
    check's included, makes the run invalid."""
    text = report.collected.get(FIO_OUTPUT)
    if not text:
        why = _first_line(report.stderr) or _first_line(report.stdout) or "no message"
        raise ParseError(source, None, f"fio wrote no JSON report (exit status {report.returncode}): {why}")
    parsed = parse_fio(text, source)
    located = json_document(text, source, "fio")  # parse_fio has checked that it is there
    document = located[0] if located else {}
    jobs = {str(job.get("jobname")): job for job in document.get("jobs", [])}
    problems = list(parsed.problems)
    if report.returncode != 0:
        problems.append(f"fio exited with status {report.returncode}: {_first_line(report.stderr) or 'no message'}")
    if any(int(jobs.get(name, {}).get("error", 0)) == errno.EILSEQ for name in FIO_VERIFY_JOBS):
        problems.append(f"fio's check found data that did not read back as written ({FIO_VERIFY} mismatch)")
    found = {(m.benchmark, m.metric): m for m in parsed.measurements}
    # fio.seq_write's write.bandwidth, fio.seq_read's read.bandwidth
    chosen = {name: found.get((f"fio.{name}", f"{name.removeprefix('seq_')}.bandwidth")) for name in PASSES}
    missing = [name for name, m in chosen.items() if m is None]
    if missing:
        why = "; ".join(problems) or f"no job named {missing[0]!r} in its output"
        raise ParseError(source, None, f"fio measured no {', '.join(missing)}: {why}")

    fio_version = report.tool_version or parsed.configuration.get("version")
    configuration = {
        "engine": "fio",
        "fio_version": fio_version,
        "fio_path": report.tool_path,
        "cpu_model": report.cpu_model,
        "returncode": report.returncode,
        "jobs": parsed.configuration.get("jobs"),
        "job_options": {name: job.get("job options", {}) for name, job in jobs.items()},
        "global_options": document.get("global options", {}),
        "check": f"{FIO_VERIFY} headers, written and read back in untimed passes after the timed ones",
    }
    valid = not problems
    measurements = []
    for name in PASSES:
        m = chosen[name]
        parameters = {
            "engine": "fio",
            "size_bytes": _fio_number(m.parameters.get("size")),
            "block_bytes": _fio_number(m.parameters.get("bs")),
            "direct": m.parameters.get("direct") == "1",
            "ioengine": m.parameters.get("ioengine"),
            "fio_version": fio_version,
        }
        measurements.append(Measurement(f"disk.{name}", m.value, _UNIT, Direction.HIGHER, SERIES_METRIC,
                                        valid and m.valid, parameters))
    return ParsedOutput(tool="fio", measurements=measurements, valid=valid, problems=problems,
                        configuration=configuration)


# --- either ---------------------------------------------------------------------


def _is_tool_report(text: str) -> bool:
    """Whether the node runner's report (its last line) is of a tool's run."""
    data = last_json_object(text)
    return data is not None and "tool" in data


def directory_metric(directory: str) -> str:
    """The metric of a directory's results when several are measured:
    ``bandwidth./scratch``."""
    return f"{SERIES_METRIC}.{directory}"


def parse_disk_run(text: str, source: str, directory: str | None = None, engine: str = "auto",
                   metric: str = SERIES_METRIC) -> ParsedOutput:
    """The node runner's report of either engine as the disk series, under
    ``metric`` (directory_metric when several directories are measured);
    the engine asked for and the directory go into the configuration.  A
    node without fio, when fio was asked for, raises ToolUnavailable."""
    if _is_tool_report(text):
        parsed = parse_fio_report(parse_tool_output(source, text), source)
    else:
        parsed = parse_kernel_run(text, source, "disk", parse_disk_output)
    configuration = {**parsed.configuration, "engine_requested": engine}
    measurements = parsed.measurements
    if directory is not None:
        configuration.setdefault("directory", directory)
        measurements = [replace(m, parameters={"directory": directory, **m.parameters}) for m in measurements]
    if metric != SERIES_METRIC:
        measurements = [replace(m, metric=metric) for m in measurements]
    return ParsedOutput(parsed.tool, measurements, parsed.valid, parsed.problems, configuration)


@dataclass(frozen=True)
class DiskOptions:
    """Where and how much the disk benchmark writes.

    ``engine``: "fio" runs fio (a node without it is "unavailable"),
    "oddnode" our kernel, "auto" fio on the nodes that have it and our kernel
    on the others -- each node decides, so a cluster with fio on some nodes
    only is still measured everywhere.  The directory must exist on every
    node and have ``size`` bytes free.  ``timeout``: seconds one run may take
    on a node, after which it is stopped and its file removed.  ``dirs``:
    several directories, each run in turn and stored under its own metric
    (directory_metric), in place of ``directory``.
    """

    directory: str = option(DEFAULT_DIRECTORY, help="Directory on the nodes the disk benchmark writes in", flag="dir")
    size: int = option(DEFAULT_SIZE, help="Bytes the disk benchmark writes")
    block: int = DEFAULT_BLOCK
    engine: str = option("auto", help="auto (fio where installed, else oddnode's kernel), fio or oddnode")
    timeout: float = DEFAULT_TIMEOUT
    dirs: tuple[str, ...] = option((), help="Several directories the disk benchmark writes in, one after the other, "
                                            "comma-separated (/tmp,/scratch: local against shared); each is "
                                            "compared across nodes on its own")


def disk_directories(options: DiskOptions) -> tuple[str, ...]:
    """The directories ``dirs`` names, normalised; ValueError for a bad or
    repeated one, or for ``directory`` set beside them."""
    if options.dirs and options.directory != DEFAULT_DIRECTORY:
        raise ValueError(f"give the disk directory (disk.directory={options.directory}) or several "
                         f"(disk.dirs={','.join(options.dirs)}), not both")
    found: list[str] = []
    for directory in options.dirs:
        normal = validate_disk_parameters(directory, options.size, options.block, options.engine)
        if normal in found:
            raise ValueError(f"the disk directory {normal} is named twice in disk.dirs")
        found.append(normal)
    return tuple(found)


class DiskStep(NodeBenchmark):
    """Sequential write and read bandwidth of one directory on every node."""

    name = "disk"
    stage = DISK_STAGE
    options = DiskOptions
    series = ("disk",)
    summary = "sequential write and read bandwidth with O_DIRECT (fio, or oddnode's kernel)"

    def spec(self, options: DiskOptions, directory: str | None = None) -> BenchmarkSpec:
        """The benchmark of ``options.directory``; of ``directory``, one of
        ``dirs``, under that directory's name and metric."""
        size, block, engine, timeout = options.size, options.block, options.engine, options.timeout
        name, metric = self.name, SERIES_METRIC
        if directory is not None:
            # Stored under disk./scratch: a node's trouble is its trouble
            # with that directory, and still the disk stage's.
            name, metric = f"{self.name}.{directory}", directory_metric(directory)
        directory = validate_disk_parameters(directory or options.directory, size, block, engine)
        if engine == "oddnode":
            argv = disk_kernel_argv(directory, size, block, timeout=timeout)
        elif engine == "fio":
            argv = fio_argv(directory, size, block, timeout=timeout)
        else:
            argv = tool_or_kernel_argv(fio_argv(directory, size, block, timeout=timeout),
                                       disk_kernel_argv(directory, size, block, timeout=timeout))
        return BenchmarkSpec(
            name=name,
            stage=self.stage,
            argv=argv,
            parse=partial(parse_disk_run, directory=directory, engine=engine,
                          **({"metric": metric} if metric != SERIES_METRIC else {})),
            series=tuple((f"disk.{step}", metric, _UNIT, Direction.HIGHER) for step in PASSES),
            synchronized=True,
        )

    def check(self, options: DiskOptions) -> None:
        for directory in disk_directories(options) or (None,):
            self.spec(options, directory)

    def run(self, context: StepContext, options: DiskOptions) -> StepOutcome:
        """One directory (``directory``), or each of ``dirs`` in turn, each
        recorded with the check as it finishes; then the directories side by
        side, medians over the nodes."""
        directories = disk_directories(options)
        if not directories:
            return super().run(context, options)
        outcome = StepOutcome()
        for directory in directories:
            spec = self.spec(options, directory)
            if context.finished(spec.name):
                outcome.runs[spec.name] = None
                continue
            run_id, wanted, done = context.recorded.get(spec.name, (None, context.repetitions, 0))
            if run_id is None:
                run_id = context.begin(spec.name)
            context.observer.benchmark_started(spec.name, done, wanted)
            summary = run_benchmark(context.store, context.target, spec, wanted, context.timeout,
                                    on_progress=context.progress(spec.name), run_id=run_id, start=done + 1)
            outcome.runs[spec.name] = summary
        nodes = set(context.target.nodes)
        # One note of several lines: the table stays whole wherever notes go.
        lines = directory_table_lines(directory_table(context.store.load_series(), directories, nodes))
        outcome.notes.append("\n  ".join(lines))  # indented under the first line, as notes are printed
        return outcome


# --- several directories side by side ----------------------------------------------


def disk_benchmark(*args, **options) -> BenchmarkSpec:
    """The disk benchmark, with DiskOptions' fields."""
    return DiskStep().spec(DiskOptions(*args, **options))
