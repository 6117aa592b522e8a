"""The parser of our bulk-synchronous kernel's output (tool name
``oddnode-mpi-sync``): what rank 0 prints, the same for ``mpi_sync.c`` (MPI)
and ``tcp_sync.c`` (ranks synchronising over a binomial tree of TCP
connections), one rank on each node of a set.

Every iteration each rank computes the same work quantum, then calls an
allreduce of one double or a barrier; each times both.  Per iteration the
rank that waited least arrived last, and its *extra wait* (the second
shortest wait minus its own) is what it cost the others (see
``oddnode_sync.h``).

Measurements, benchmark ``sync.<operation>`` (``sync.allreduce``,
``sync.barrier``), one per set run:

* ``time``: microseconds per iteration, rank 0's loop time over the
  iterations (lower is better);
* ``efficiency``: the ranks' compute over their compute and wait, percent;
* ``compute``, ``wait``: microseconds per iteration, the mean over ranks;
* ``extra_wait``: microseconds per iteration by which the last rank made
  the others wait (the sum of every iteration's extra wait over the
  iterations).

Every rank's own numbers (its host, node, compute total, median and
maximum, wait total and median, iterations it was last and the extra wait
it caused) are in the configuration's ``rank_table`` and in the
parameters of ``time``.
"""

from __future__ import annotations

import re
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.units import canonical_unit
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.parsers.kernel_output import number, read_kernel_output, whole

KERNEL = "mpi_sync"
TCP_KERNEL = "tcp_sync"
KERNELS = (KERNEL, TCP_KERNEL)
TOOL = "oddnode-mpi-sync"
TRANSPORTS = {KERNEL: "mpi", TCP_KERNEL: "tcp"}
OPERATIONS = ("allreduce", "barrier")
_US = canonical_unit("us")
_PERCENT = canonical_unit("%")
_INT_KEYS = {"processes", "quantum_us", "work_steps", "warmup_iterations", "iterations", "timer_granularity_ns",
             "corrupt_rank", "io_timeout_seconds"}
_FLOAT_KEYS = {"steps_per_us_fastest", "steps_per_us_slowest", "seconds", "connect_wait_seconds"}
_RANK_LINE = re.compile(r"^#\s*rank\s*:\s*(\S+)\s+(\S+)\s+(\S+)\s*$")
_KEY_VALUE = re.compile(r"(\w+)=(\S+)")
# The columns of a `rank` line after its rank, in the kernel's order.
RANK_COLUMNS = ("compute_total_us", "compute_median_us", "compute_max_us", "wait_total_us", "wait_median_us",
                "last", "extra_wait_us")

# --- what comes back ----------------------------------------------------------------


def _kernel_of(text: str, source: str) -> str:
    """Which of the two kernels printed ``text``: the banner says."""
    found = [kernel for kernel in KERNELS if f"# oddnode {kernel} kernel" in text]
    if len(found) != 1:
        raise ParseError(source, None, "not oddnode sync kernel output: no '# oddnode mpi_sync kernel v1' or "
                                       "'# oddnode tcp_sync kernel v1' line" if not found
                         else "both the MPI and the TCP sync kernel's banners: not one run's output")
    return found[0]


def _rank_lines(text: str, source: str, kernel: str) -> list[tuple[int, int, str, str]]:
    """The header's ``# rank: R HOST NODE`` lines after the banner: (line, rank, host, node)."""
    banner = f"# oddnode {kernel} kernel v"
    found: list[tuple[int, int, str, str]] = []
    seen_banner = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not seen_banner:
            seen_banner = line.startswith(banner)
            continue
        if line.startswith("#") and line[1:].lstrip().startswith("rank:"):
            match = _RANK_LINE.match(line)
            if not match:
                raise ParseError(source, lineno, f"a rank line is '# rank: RANK HOST NODE', found {line[:80]!r}")
            found.append((lineno, whole(match.group(1), source, lineno), match.group(2), match.group(3)))
    return found


def _failure(line: str, hosts: list[str], source: str, lineno: int) -> dict[str, Any]:
    """One ``validation failed`` line's evidence, its rank's host checked."""
    words = line.split()
    what = words[2] if len(words) > 2 else ""
    fields = {"allreduce": ("rank", "host", "bad", "iteration", "expected", "got"),
              "work": ("rank", "host", "checksum", "expected")}.get(what)
    evidence: dict[str, Any] = dict(_KEY_VALUE.findall(line))
    if fields is None or set(evidence) != set(fields) or len(words) != 3 + len(fields):
        raise ParseError(source, lineno, f"a validation failure is 'validation failed allreduce|work' with its "
                                         f"fields, found {line[:120]!r}")
    rank = evidence["rank"] = whole(evidence["rank"], source, lineno)
    if rank >= len(hosts) or hosts[rank] != evidence["host"]:
        raise ParseError(source, lineno, f"rank={rank} host={evidence['host']} is not a rank of the header's")
    if what == "allreduce":
        bad, slash, checked = evidence["bad"].partition("/")
        if not slash:
            raise ParseError(source, lineno, f"bad= is BAD/CHECKED iterations, found {evidence['bad']!r}")
        evidence["bad"], evidence["checked"] = whole(bad, source, lineno, 1), whole(checked, source, lineno, 1)
        evidence["iteration"] = whole(evidence["iteration"], source, lineno)
    # The sums and checksums stay words: a corrupted value may be anything, NaN included.
    return {"check": what, **evidence}


def _failure_problem(failure: dict[str, Any]) -> str:
    rank, host = failure["rank"], failure["host"]
    if failure["check"] == "allreduce":
        return (f"allreduce: rank {rank} on {host} received a wrong sum in {failure['bad']} of {failure['checked']} "
                f"iterations; first in iteration {failure['iteration']}: expected {failure['expected']}, got "
                f"{failure['got']} (a rank's contribution or the reduction was corrupted)")
    return (f"work: rank {rank} on {host} computed a checksum {failure['checksum']} where rank 0 computed "
            f"{failure['expected']}: the same work gave another result there (a faulty CPU or memory, or another "
            "build of the kernel)")


def _rank_row(words: list[str], source: str, lineno: int) -> dict[str, Any]:
    if len(words) != 2 + len(RANK_COLUMNS):
        raise ParseError(source, lineno, f"a rank line has {2 + len(RANK_COLUMNS)} fields, found {len(words)}")
    row: dict[str, Any] = {"rank": whole(words[1], source, lineno)}
    for key, text in zip(RANK_COLUMNS, words[2:]):
        row[key] = whole(text, source, lineno) if key == "last" else number(text, source, lineno)
    if min(row[key] for key in RANK_COLUMNS) < 0 or row["compute_median_us"] > row["compute_max_us"] * (1 + 1e-9):
        raise ParseError(source, lineno, f"implausible rank line: {' '.join(words)[:120]!r}")
    return row


def parse_sync_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of our sync kernel, MPI or TCP (rank 0's stdout): the
    set's time per iteration, efficiency, compute, wait and extra wait, every
    rank's numbers in ``rank_table``, and the check; ParseError if the
    output is not ours or is cut short."""
    kernel = _kernel_of(text, source)
    output = read_kernel_output(text, source, kernel, int_keys=_INT_KEYS, float_keys=_FLOAT_KEYS)
    configuration: dict[str, Any] = dict(output.configuration)
    for key in ("transport", "processes", "operation", "quantum_us", "work_steps", "iterations"):
        if key not in configuration:
            raise ParseError(source, None, f"{kernel} kernel header lacks {key!r}")
    if configuration["transport"] != TRANSPORTS[kernel]:
        raise ParseError(source, output.header_lines["transport"],
                         f"the {kernel} kernel's transport is {TRANSPORTS[kernel]}, not {configuration['transport']!r}")
    ranks, iterations, operation = configuration["processes"], configuration["iterations"], configuration["operation"]
    if ranks < 2:
        raise ParseError(source, output.header_lines["processes"], f"a run of {ranks} ranks: the kernel needs two")
    if operation not in OPERATIONS:
        raise ParseError(source, output.header_lines["operation"], f"unknown operation {operation!r}")
    if iterations < 1:
        raise ParseError(source, output.header_lines["iterations"], "a run of no iterations")
    configuration["kernel"] = kernel
    lines = _rank_lines(text, source, kernel)
    for index, (lineno, rank, _, _) in enumerate(lines):
        if rank != index:
            raise ParseError(source, lineno, f"rank lines out of order: rank {rank} where rank {index} belongs")
    if len(lines) != ranks:
        raise ParseError(source, None, f"the header names the nodes of {len(lines)} ranks, not of all {ranks}")
    configuration.pop("rank", None)
    hosts = [host for _, _, host, _ in lines]
    nodes = [node for _, _, _, node in lines]
    if len(set(nodes)) != len(nodes):
        raise ParseError(source, lines[0][0], f"a node holds two ranks: {nodes}")
    configuration["ranks"], configuration["nodes"] = hosts, nodes

    loop: tuple[int, float, float] | None = None
    rows: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    validated_ok = False
    for lineno, line in output.lines:
        words = line.split()
        if validated_ok or (failures and words[0] != "validation"):
            raise ParseError(source, lineno, f"a line after the validation verdict: {line[:80]!r}")
        if words[0] == "loop":
            if loop is not None or rows or len(words) != 4:
                raise ParseError(source, lineno, f"one 'loop ITERATIONS SECONDS US' line comes first, found {line!r}")
            count = whole(words[1], source, lineno, 1)
            seconds, per_iteration = number(words[2], source, lineno), number(words[3], source, lineno)
            # Seconds are printed to the microsecond and the time per iteration
            # to the nanosecond: they agree within those roundings.
            if count != iterations or seconds <= 0 or abs(per_iteration - 1e6 * seconds / count) > 0.5 / count + 1e-3:
                raise ParseError(source, lineno, f"a loop of {count} iterations in {seconds} s is not "
                                                 f"{per_iteration} us each, or not the header's {iterations}")
            loop = (count, seconds, per_iteration)
        elif words[0] == "rank":
            if loop is None:
                raise ParseError(source, lineno, "a rank line before the loop line")
            row = _rank_row(words, source, lineno)
            if row["rank"] != len(rows) or row["rank"] >= ranks:
                raise ParseError(source, lineno, f"rank line of rank {row['rank']} where rank {len(rows)} belongs")
            if row["last"] > iterations:
                raise ParseError(source, lineno, f"rank {row['rank']} last in {row['last']} of {iterations} iterations")
            rows.append(row)
        elif line == "validation ok":
            if failures:
                raise ParseError(source, lineno, "both 'validation ok' and validation failures: not one run's output")
            validated_ok = True
        elif words[:2] == ["validation", "failed"]:
            if len(rows) != ranks:
                raise ParseError(source, lineno, "a validation line before every rank's line")
            failures.append(_failure(line, hosts, source, lineno))
        else:
            raise ParseError(source, lineno, f"unexpected line in {kernel} kernel output: {line[:80]!r}")
    if loop is None or len(rows) != ranks:
        raise ParseError(source, output.line_count, f"truncated {kernel} kernel output: "
                                                    + ("no loop line" if loop is None else
                                                       f"rank lines for {len(rows)} of {ranks} ranks"))
    if not validated_ok and not failures:
        raise ParseError(source, output.line_count, f"truncated {kernel} kernel output: no validation line")
    if sum(row["last"] for row in rows) != iterations:
        raise ParseError(source, None, f"the ranks were last in {sum(row['last'] for row in rows)} iterations, "
                                       f"not in each of the {iterations}")
    for row, host, node in zip(rows, hosts, nodes):
        row.update(host=host, node=node)
    configuration["rank_table"] = rows
    problems = [_failure_problem(failure) for failure in failures]
    if failures:
        configuration["validation_failures"] = failures
        configuration["failing_nodes"] = sorted({nodes[f["rank"]] for f in failures})
    if output.warnings:
        configuration["warnings"] = output.warnings
    return ParsedOutput(tool=TOOL, measurements=_measurements(configuration, loop, rows), valid=not problems,
                        problems=problems, configuration=configuration)


def _measurements(configuration: dict[str, Any], loop: tuple[int, float, float],
                  rows: list[dict[str, Any]]) -> list[Measurement]:
    """The set's numbers (see the module's docstring)."""
    iterations, _, per_iteration = loop
    ranks = len(rows)
    compute = sum(row["compute_total_us"] for row in rows)
    wait = sum(row["wait_total_us"] for row in rows)
    extra = sum(row["extra_wait_us"] for row in rows)
    benchmark = f"sync.{configuration['operation']}"
    valid = "validation_failures" not in configuration
    common = {"ranks": ranks, "iterations": iterations, "quantum_us": configuration["quantum_us"],
              "work_steps": configuration["work_steps"], "operation": configuration["operation"],
              "transport": configuration["transport"]}
    values = [
        ("time", per_iteration, _US, Direction.LOWER),
        ("efficiency", 100.0 * compute / (compute + wait) if compute + wait > 0 else 0.0, _PERCENT, Direction.HIGHER),
        ("compute", compute / (ranks * iterations), _US, Direction.LOWER),
        ("wait", wait / (ranks * iterations), _US, Direction.LOWER),
        ("extra_wait", extra / iterations, _US, Direction.LOWER),
    ]
    # Every rank's numbers travel once, with the time per iteration.
    table = [{key: row[key] for key in ("rank", "node", "host", *RANK_COLUMNS)} for row in rows]
    return [Measurement(benchmark, value, unit, direction, metric=metric, valid=valid,
                        parameters={**common, **({"rank_table": table} if metric == "time" else {})})
            for metric, value, unit, direction in values]
