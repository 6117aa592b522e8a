"""The parser of our MPI collectives kernel's output
(``oddnode/kernels/mpi_collectives.c``, tool name ``oddnode-mpi-collectives``),
rank 0's stdout of a run over a set of nodes, one rank on each.

The kernel times IMB's Sendrecv chain (every rank sends to the next and
receives from the previous, periodically), MPI_Allreduce (doubles,
MPI_SUM), MPI_Alltoall, MPI_Bcast and MPI_Barrier: per size, warm-up, then timed
batches of back-to-back calls, at least 10 ms each and after one untimed
call (so that the check's work between batches does not slow their first
calls), each batch's time per call the slowest rank's (IMB's t_max, so
that a batch is what one IMB loop is), and the minimum and median over the
batches.  Every batch's received data is checked on every rank; a failure
names the rank that saw it and its node, and the sender and its node where
one rank's data was at fault.  The rank order, which decides who sends to
whom in the chain, is in the header.

Measurements, one benchmark per kernel benchmark (``sendrecv``,
``allreduce``, ``alltoall``, ``bcast``, ``barrier``): ``time.<bytes>``, the minimum
over the batches of the slowest rank's time per call (us; barrier:
``time``), and ``bandwidth.<bytes>`` from that time (MB/s, MB = 10^6 bytes):

* sendrecv: 2 · bytes / time, IMB's figure: each rank sends and receives
  ``bytes`` per call;
* allreduce: bytes / time, an algorithm bandwidth (IMB prints none): the
  vector reduced per second, comparable between sizes and MPI libraries but
  not a link's rate (a ring allreduce moves 2 (K-1)/K times as much per rank);
* alltoall: bytes · (K - 1) / time, what each rank sends to the others per
  second (its block to itself is not counted);
* bcast: bytes / time, the message delivered to every rank per second (the
  root moves to the next rank at every call, as in IMB).

The median's bandwidth is in the parameters (``median_MBps``).  Allreduce
runs whole doubles: its sizes are the requested ones rounded down to a
multiple of 8 bytes, each once (the header's ``allreduce_sizes``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.units import canonical_unit
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.parsers.kernel_output import cut_parameters, number, read_kernel_output, whole
from oddnode.readings.sets_series import ALLREDUCE_ELEMENT_BYTES

KERNEL = "mpi_collectives"
TOOL = "oddnode-mpi-collectives"
# The kernel's benchmarks, in the order it runs them.
BENCHMARKS: tuple[str, ...] = ("sendrecv", "allreduce", "alltoall", "bcast", "barrier")
_US = canonical_unit("us")
_MB_PER_S = canonical_unit("MB/s")  # the kernel's MB is 10^6 bytes
_INT_KEYS = {"processes", "timer_granularity_ns", "min_batches", "min_batch_ns", "corrupt_rank"}
_FLOAT_KEYS = {"seconds_per_size"}
_RANK_LINE = re.compile(r"^#\s*rank\s*:\s*(\S+)\s+(\S+)\s*$")
_KEY_VALUE = re.compile(r"(\w+)=(\S+)")
def allreduce_sizes(sizes: Sequence[int]) -> list[int]:
    """The sizes allreduce runs: each rounded down to whole doubles, once, in the given order."""
    rounded: list[int] = []
    for size in sizes:
        whole_elements = size - size % ALLREDUCE_ELEMENT_BYTES
        if whole_elements not in rounded:
            rounded.append(whole_elements)
    return rounded


def benchmark_sizes(benchmark: str, sizes: Sequence[int]) -> list[int]:
    """The sizes one benchmark runs given the kernel's -s list."""
    if benchmark == "allreduce":
        return allreduce_sizes(sizes)
    return [0] if benchmark == "barrier" else list(sizes)

# --- what comes back ----------------------------------------------------------------


def _bandwidth(benchmark: str, size: int, ranks: int, seconds_us: float) -> float:
    """MB/s (bytes per microsecond) of one call of ``size`` bytes taking
    ``seconds_us``: see the module's docstring for each formula."""
    factor = {"sendrecv": 2, "allreduce": 1, "alltoall": ranks - 1, "bcast": 1}[benchmark]
    return factor * size / seconds_us


_FORMULAS = {"sendrecv": "2*bytes/time", "allreduce": "bytes/time", "alltoall": "bytes*(ranks-1)/time",
             "bcast": "bytes/time"}


def _rank_hosts(text: str, source: str, kernel: str) -> list[tuple[int, int, str]]:
    """The header's ``# rank: R HOST`` lines after the banner: (line, rank, host)."""
    banner = f"# oddnode {kernel} kernel v"
    found: list[tuple[int, int, str]] = []
    seen_banner = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not seen_banner:
            seen_banner = line.startswith(banner)
            continue
        if line.startswith("#") and line[1:].lstrip().startswith("rank:"):
            match = _RANK_LINE.match(line)
            if not match:
                raise ParseError(source, lineno, f"a rank line is '# rank: RANK HOST', found {line[:80]!r}")
            found.append((lineno, whole(match.group(1), source, lineno), match.group(2)))
    return found


def _failure(benchmark: str, line: str, hosts: list[str], source: str, lineno: int) -> dict[str, Any]:
    """One ``validation failed`` line's evidence, its numbers read and its
    ranks' hosts checked against the header's rank lines."""
    evidence: dict[str, Any] = dict(_KEY_VALUE.findall(line))
    position = "element" if benchmark == "allreduce" else "offset"
    # Allreduce's sum mixes every rank's data: no one sender is named.
    ranked = (("rank", "host"),) if benchmark == "allreduce" else (("rank", "host"), ("from_rank", "from_host"))
    wanted = [key for pair in ranked for key in pair] + ["bad", "bytes", "batch", position, "expected", "got"]
    missing = [key for key in wanted if key not in evidence]
    if missing or set(evidence) - set(wanted):
        raise ParseError(source, lineno, f"a {benchmark} validation failure has the fields {', '.join(wanted)}, "
                                         f"found {line[:120]!r}")
    bad, slash, checked = evidence["bad"].partition("/")
    if not slash:
        raise ParseError(source, lineno, f"bad= is BAD/CHECKED batches, found {evidence['bad']!r}")
    evidence["bad"], evidence["checked"] = whole(bad, source, lineno, 1), whole(checked, source, lineno, 1)
    # expected= and got= stay words: bytes, or (allreduce) sums that a
    # corrupted reduction may have made anything, NaN included.
    for key in ("bytes", "batch", position):
        evidence[key] = whole(evidence[key], source, lineno)
    for rank_key, host_key in ranked:
        rank = evidence[rank_key] = whole(evidence[rank_key], source, lineno)
        if rank >= len(hosts) or hosts[rank] != evidence[host_key]:
            raise ParseError(source, lineno, f"{rank_key}={rank} {host_key}={evidence[host_key]} is not a rank of "
                                             f"the header's: {line[:120]!r}")
    return {"benchmark": benchmark, **evidence}


def _failure_problem(failure: dict[str, Any]) -> str:
    """One validation failure in words, naming the rank that saw it and its
    node and, where one rank's data was at fault, the sender and its node."""
    benchmark, rank, host = failure["benchmark"], failure["rank"], failure["host"]
    batches = f"in {failure['bad']} of {failure['checked']} batches"
    first = f"first with {failure['bytes']}-byte messages, batch {failure['batch']}"
    found = f"expected {failure['expected']}, got {failure['got']}"
    if benchmark == "allreduce":
        return (f"allreduce: rank {rank} on {host} got a wrong sum {batches}; {first}, element {failure['element']}: "
                f"{found} (a rank's contribution or the reduction was corrupted)")
    sender, sender_host = failure["from_rank"], failure["from_host"]
    what = {"sendrecv": f"bad data from its left neighbour, rank {sender} on {sender_host},",
            "bcast": f"a bad broadcast from its root, rank {sender} on {sender_host},"}.get(
        benchmark, f"a bad block from rank {sender} on {sender_host}")
    return (f"{benchmark}: rank {rank} on {host} received {what} {batches}; {first}, byte offset "
            f"{failure['offset']}: {found} (data corrupted between {sender_host} and {host}, or on one of them)")


def parse_collectives_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of our collectives kernel (rank 0's stdout): time and
    bandwidth per benchmark and size, the ranks' nodes in rank order, and
    every rank's check; ParseError if the output is not ours or is cut short."""
    output = read_kernel_output(text, source, KERNEL, int_keys=_INT_KEYS, float_keys=_FLOAT_KEYS)
    configuration: dict[str, Any] = dict(output.configuration)
    for key in ("processes", "benchmarks", "sizes", "allreduce_sizes"):
        if key not in configuration:
            raise ParseError(source, None, f"mpi_collectives kernel header lacks {key!r}")
    ranks = configuration["processes"]
    if ranks < 2:
        raise ParseError(source, output.header_lines["processes"], f"a run of {ranks} ranks: the kernel needs two")
    for key in ("sizes", "allreduce_sizes"):
        lineno = output.header_lines[key]
        configuration[key] = [whole(item, source, lineno) for item in str(configuration[key]).split(",")]
    benchmarks = str(configuration["benchmarks"]).split(",")
    unknown = [name for name in benchmarks if name not in BENCHMARKS]
    if unknown or len(set(benchmarks)) != len(benchmarks):
        raise ParseError(source, output.header_lines["benchmarks"],
                         f"benchmarks must be distinct names of {', '.join(BENCHMARKS)}, found {benchmarks}")
    configuration["benchmarks"] = benchmarks
    if configuration["allreduce_sizes"] != allreduce_sizes(configuration["sizes"]):
        raise ParseError(source, output.header_lines["allreduce_sizes"],
                         f"allreduce sizes {configuration['allreduce_sizes']} are not the sizes' whole doubles")

    # The ranks' nodes, in rank order: who sends to whom in the chain.
    hosts = _rank_hosts(text, source, KERNEL)
    for index, (lineno, rank, _) in enumerate(hosts):
        if rank != index:
            raise ParseError(source, lineno, f"rank lines out of order: rank {rank} where rank {index} belongs")
    if len(hosts) != ranks:
        raise ParseError(source, None, f"the header names the nodes of {len(hosts)} ranks, not of all {ranks}")
    configuration.pop("rank", None)
    configuration["ranks"] = [host for _, _, host in hosts]

    results: dict[tuple[str, int], tuple[int, float, float, int]] = {}
    failures: list[dict[str, Any]] = []
    validated_ok = False
    for lineno, line in output.lines:
        words = line.split()
        # The check's verdict comes last: anything after "validation ok", or
        # a result after a failure, is a second run's output pasted on.
        if validated_ok or (failures and words[0] == "result"):
            raise ParseError(source, lineno, f"a line after the validation verdict: {line[:80]!r}")
        if words[0] == "result":
            if len(words) != 7:
                raise ParseError(source, lineno, f"a result line has 7 fields, found {len(words)}: {line[:80]!r}")
            benchmark = words[1]
            if benchmark not in benchmarks:
                raise ParseError(source, lineno, f"a result for {benchmark!r}, which the header does not run")
            size, iterations, batches = (whole(words[i], source, lineno) for i in (2, 3, 6))
            min_us, median_us = (number(words[i], source, lineno) for i in (4, 5))
            if size not in benchmark_sizes(benchmark, configuration["sizes"]):
                raise ParseError(source, lineno, f"a result of {benchmark} at {size} bytes, a size it does not run")
            if (benchmark, size) in results:
                raise ParseError(source, lineno, f"a second result of {benchmark} at {size} bytes")
            # A call of no data may take less than the printed 0.001 us; one
            # carrying data never does.
            if iterations < 1 or batches < 1 or not 0 <= min_us <= median_us or (size > 0 and min_us == 0):
                raise ParseError(source, lineno, f"implausible result: {line!r}")
            results[benchmark, size] = (iterations, min_us, median_us, batches)
        elif line == "validation ok":
            if failures:
                raise ParseError(source, lineno, "both 'validation ok' and validation failures: not one run's output")
            validated_ok = True
        elif words[:2] == ["validation", "failed"]:
            if len(words) < 3 or words[2] not in benchmarks or words[2] == "barrier":
                raise ParseError(source, lineno, f"a validation failure of no benchmark run with data: {line[:80]!r}")
            failure = _failure(words[2], line, configuration["ranks"], source, lineno)
            if any((seen["benchmark"], seen["rank"]) == (words[2], failure["rank"]) for seen in failures):
                raise ParseError(source, lineno, f"a second {words[2]} failure of rank {failure['rank']}")
            failures.append(failure)
        else:
            raise ParseError(source, lineno, f"unexpected line in mpi_collectives kernel output: {line[:80]!r}")

    missing = [f"{benchmark} {size} bytes" for benchmark in benchmarks
               for size in benchmark_sizes(benchmark, configuration["sizes"]) if (benchmark, size) not in results]
    if missing:
        raise ParseError(source, output.line_count, "truncated mpi_collectives kernel output: no result line for "
                                                    + ", ".join(missing))
    if not validated_ok and not failures:
        raise ParseError(source, output.line_count, "truncated mpi_collectives kernel output: no validation line")
    problems = [_failure_problem(failure) for failure in failures]
    if failures:
        configuration["validation_failures"] = failures
        named = {failure[key] for failure in failures for key in ("host", "from_host") if key in failure}
        configuration["failing_nodes"] = sorted(named)
    if output.warnings:
        configuration["warnings"] = output.warnings

    valid = not problems
    measurements = []
    for benchmark in benchmarks:
        for size in benchmark_sizes(benchmark, configuration["sizes"]):
            iterations, min_us, median_us, batches = results[benchmark, size]
            parameters = {"ranks": ranks, "bytes": size, "iterations": iterations, "batches": batches,
                          **cut_parameters(batches, configuration), "min_us": min_us, "median_us": median_us}
            metric = "time" if benchmark == "barrier" else f"time.{size}"
            measurements.append(Measurement(benchmark, min_us, _US, Direction.LOWER, metric=metric, valid=valid,
                                            parameters=parameters))
            if benchmark != "barrier" and size > 0:  # no data, no rate
                measurements.append(Measurement(
                    benchmark, _bandwidth(benchmark, size, ranks, min_us), _MB_PER_S, Direction.HIGHER,
                    metric=f"bandwidth.{size}", valid=valid,
                    parameters={**parameters, "median_MBps": _bandwidth(benchmark, size, ranks, median_us),
                                "formula": _FORMULAS[benchmark]}))
    return ParsedOutput(tool=TOOL, measurements=measurements, valid=valid, problems=problems,
                        configuration=configuration)


# The line before each set's section in the output of a launch that ran a
# plan's rounds (the kernel's -P).
_SECTION_LINE = re.compile(r"^== round (\d+) set (\d+)$")


def plan_sections(text: str, source: str, *, complete: bool) -> dict[tuple[int, int], str]:
    """(round, set) -> that set's output, each as a run of the set alone
    prints it, from rank 0's output of a launch that ran a plan (both
    numbered from 1).  The kernel prints a round once all its sets have
    ended, so a launch cut short ends in the middle of its last round at
    worst: unless ``complete`` (the launch exited cleanly), that last
    round is left out.  ParseError for text before the first section or a
    section given twice."""
    sections: dict[tuple[int, int], list[str]] = {}
    current: list[str] | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        marker = _SECTION_LINE.match(line)
        if marker:
            key = (int(marker.group(1)), int(marker.group(2)))
            if key in sections:
                raise ParseError(source, lineno, f"round {key[0]} set {key[1]} given twice")
            current = sections[key] = []
        elif current is not None:
            current.append(line)
        elif line.strip():
            raise ParseError(source, lineno, f"output before the first round's section: {line[:80]!r}")
    if not complete and sections:
        last = max(round_number for round_number, _ in sections)
        sections = {key: lines for key, lines in sections.items() if key[0] != last}
    return {key: "\n".join(lines) + "\n" for key, lines in sections.items()}
