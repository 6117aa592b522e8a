"""The parser of our MPI demo application's output
(``oddnode/kernels/mpi_demo_app.c``, tool name ``oddnode-mpi-demo-app``):
what rank 0 prints, and the count of every MPI call a rank makes.

Measurements (benchmark ``mpi_demo_app``), for ``oddnode import``: ``wall``
(the slowest rank's seconds), ``comm_share`` (the ranks' communication
over their wall time, percent) and ``compute_imbalance`` (by how much the
longest compute time exceeds the ranks' mean, percent: max/mean - 1).
:func:`parse_demo_app_output` gives everything, per rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.units import canonical_unit
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.parsers.kernel_output import number, read_kernel_output, whole

KERNEL = "mpi_demo_app"
TOOL = "oddnode-mpi-demo-app"
# The MPI calls the kernel counts, in the order it prints them.
CALLS: tuple[str, ...] = ("MPI_Init", "MPI_Comm_rank", "MPI_Comm_size", "MPI_Get_processor_name",
                          "MPI_Get_library_version", "MPI_Barrier", "MPI_Sendrecv", "MPI_Alltoall",
                          "MPI_Allreduce", "MPI_Gather", "MPI_Finalize")
_SECONDS = canonical_unit("s")
_PERCENT = canonical_unit("%")
_INT_KEYS = {"processes", "iterations", "work_units", "halo_bytes", "alltoall_every", "alltoall_bytes",
             "alltoalls", "timer_granularity_ns", "corrupt_rank"}
_FLOAT_KEYS = {"imbalance"}
_TIMES = ("wall_s", "compute_s", "comm_s", "other_s")
def expected_calls(iterations: int, alltoall_every: int) -> dict[str, int]:
    """The MPI calls every rank of a completed run makes, by name: two
    MPI_Sendrecv per iteration, an MPI_Alltoall every ``alltoall_every``
    iterations (floor(N/a); none when 0), three MPI_Gather (hosts, times,
    counts) and one of each other call."""
    calls = dict.fromkeys(CALLS, 1)
    calls["MPI_Sendrecv"] = 2 * iterations
    calls["MPI_Alltoall"] = iterations // alltoall_every if alltoall_every > 0 else 0
    calls["MPI_Gather"] = 3
    return calls

# --- what comes back ----------------------------------------------------------------


@dataclass(frozen=True)
class RankResult:
    """One rank's line and counts: seconds of wall, compute, communication
    and pattern work, its work units per iteration, its MPI calls by name."""

    rank: int
    host: str
    wall_s: float
    compute_s: float
    comm_s: float
    other_s: float
    work_units: int
    calls: dict[str, int]


@dataclass(frozen=True)
class DemoAppRun:
    """One run of the demo application: its header, every rank, the agreed
    checksum, and the check's verdict (``problems`` say what failed)."""

    configuration: dict[str, Any]
    ranks: list[RankResult]
    checksum: int
    valid: bool
    problems: list[str] = field(default_factory=list)

    def expected_calls(self) -> dict[str, int]:
        """What every rank must have called, from the run's options."""
        return expected_calls(self.configuration["iterations"], self.configuration["alltoall_every"])


def _key_values(words: list[str], keys: Sequence[str], source: str, lineno: int, line: str) -> dict[str, str]:
    found = dict(word.split("=", 1) for word in words if "=" in word)
    if len(found) != len(words) or list(found) != list(keys):
        raise ParseError(source, lineno, f"expected the fields {', '.join(keys)}, found {line[:120]!r}")
    return found


def _failure_problem(kind: str, line: str, words: list[str], ranks: int, source: str, lineno: int) -> str:
    """One ``validation failed`` line in words."""
    if kind == "checksum":
        values = _key_values(words, ("expected", "got"), source, lineno, line)
        return (f"checksum: the allreduced sum {values['got']} is not the sum of the ranks' checksums "
                f"{values['expected']} (the allreduce corrupted data)")
    values = _key_values(words, ("rank", "from_rank", "bad", "iteration", "offset"), source, lineno, line)
    rank, sender = whole(values["rank"], source, lineno), whole(values["from_rank"], source, lineno)
    bad, slash, checked = values["bad"].partition("/")
    if not slash:
        raise ParseError(source, lineno, f"bad= is BAD/CHECKED messages, found {values['bad']!r}")
    bad_count, checked_count = whole(bad, source, lineno, 1), whole(checked, source, lineno, 1)
    iteration, offset = whole(values["iteration"], source, lineno, 1), whole(values["offset"], source, lineno)
    if rank >= ranks or sender >= ranks or bad_count > checked_count:
        raise ParseError(source, lineno, f"a validation failure of no rank of the {ranks}: {line[:120]!r}")
    return (f"{kind}: rank {rank} received bad data from rank {sender} in {bad_count} of {checked_count} "
            f"messages; first in iteration {iteration}, byte offset {offset}")


def parse_demo_app_output(text: str, source: str) -> DemoAppRun:
    """Parse rank 0's stdout of the demo application: every rank's times,
    work and MPI calls, the checksum and the check; ParseError naming the
    line when the output is not ours, malformed or cut short."""
    output = read_kernel_output(text, source, KERNEL, int_keys=_INT_KEYS, float_keys=_FLOAT_KEYS)
    configuration: dict[str, Any] = dict(output.configuration)
    for key in ("processes", "iterations", "work_units", "imbalance", "halo_bytes", "alltoall_every",
                "alltoall_bytes", "rank"):
        if key not in configuration:
            raise ParseError(source, None, f"mpi_demo_app kernel header lacks {key!r}")
    ranks = configuration["processes"]
    if ranks < 2:
        raise ParseError(source, output.header_lines["processes"], f"a run of {ranks} ranks: the kernel needs two")
    hosts: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        words = raw.split()
        if words[:2] == ["#", "rank:"]:
            if len(words) != 4 or words[2] != str(len(hosts)):
                raise ParseError(source, lineno, f"expected '# rank: {len(hosts)} HOST', found {raw.strip()[:80]!r}")
            hosts.append(words[3])
    if len(hosts) != ranks:
        raise ParseError(source, None, f"the header names the hosts of {len(hosts)} ranks, not of all {ranks}")
    configuration.pop("rank")
    configuration["hosts"] = hosts

    rows: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[str, int]] = {r: {} for r in range(ranks)}
    checksum: int | None = None
    problems: list[str] = []
    verdict = False
    for lineno, line in output.lines:
        words = line.split()
        if verdict:
            raise ParseError(source, lineno, f"a line after 'validation ok': {line[:80]!r}")
        if words[0] == "rank":
            if len(words) != 12 or words[2::2] != [*_TIMES, "work_units"]:
                raise ParseError(source, lineno, "a rank line is 'rank R wall_s W compute_s C comm_s M other_s O "
                                                 f"work_units U', found {line[:120]!r}")
            rank = whole(words[1], source, lineno)
            if rank != len(rows) or rank >= ranks:
                raise ParseError(source, lineno, f"rank line of rank {rank} where rank {len(rows)} belongs")
            rows[rank] = {name: number(words[3 + 2 * i], source, lineno) for i, name in enumerate(_TIMES)}
            rows[rank]["work_units"] = whole(words[11], source, lineno)
            if min(rows[rank][name] for name in _TIMES) < 0:
                raise ParseError(source, lineno, f"a negative time: {line[:120]!r}")
        elif words[0] == "calls":
            if len(words) != 4 or words[2] not in CALLS:
                raise ParseError(source, lineno, f"a calls line is 'calls RANK MPI_NAME COUNT' with one of "
                                                 f"{', '.join(CALLS)}, found {line[:120]!r}")
            rank = whole(words[1], source, lineno)
            if rank >= ranks or words[2] in calls[rank]:
                raise ParseError(source, lineno, f"a call count of no rank or a second one: {line[:120]!r}")
            calls[rank][words[2]] = whole(words[3], source, lineno)
        elif words[0] == "checksum":
            if len(words) != 2 or checksum is not None:
                raise ParseError(source, lineno, f"one checksum line 'checksum 0xHEX', found {line[:80]!r}")
            try:
                checksum = int(words[1], 16) if words[1].startswith("0x") else None
            except ValueError:
                checksum = None
            if checksum is None:
                raise ParseError(source, lineno, f"the checksum is a hexadecimal word, found {words[1]!r}")
        elif line == "validation ok":
            if problems:
                raise ParseError(source, lineno, "both 'validation ok' and validation failures: not one run's output")
            verdict = True
        elif words[:2] == ["validation", "failed"] and len(words) > 2 and words[2] in ("halo", "alltoall",
                                                                                        "checksum"):
            problems.append(_failure_problem(words[2], line, words[3:], ranks, source, lineno))
        else:
            raise ParseError(source, lineno, f"unexpected line in mpi_demo_app kernel output: {line[:80]!r}")

    missing = [f"rank line of rank {r}" for r in range(ranks) if r not in rows]
    missing += [f"{name} count of rank {r}" for r in range(ranks) for name in CALLS if name not in calls[r]]
    if checksum is None:
        missing.append("checksum line")
    if not verdict and not problems:
        missing.append("validation line")
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ParseError(source, output.line_count, f"truncated mpi_demo_app kernel output: no {shown}")
    if output.warnings:
        configuration["warnings"] = output.warnings
    results = [RankResult(rank=r, host=hosts[r], wall_s=rows[r]["wall_s"], compute_s=rows[r]["compute_s"],
                          comm_s=rows[r]["comm_s"], other_s=rows[r]["other_s"], work_units=rows[r]["work_units"],
                          calls=calls[r]) for r in range(ranks)]
    assert checksum is not None
    return DemoAppRun(configuration, results, checksum, not problems, problems)


def demo_app_measurements(run: DemoAppRun) -> list[Measurement]:
    """The run's three numbers (see the module's docstring)."""
    ranks = run.ranks
    wall = max(r.wall_s for r in ranks)
    total_wall = sum(r.wall_s for r in ranks)
    comm_share = 100.0 * sum(r.comm_s for r in ranks) / total_wall if total_wall > 0 else 0.0
    mean_compute = sum(r.compute_s for r in ranks) / len(ranks)
    # How much longer the slowest rank computed than the mean (0 when balanced).
    imbalance = 100.0 * (max(r.compute_s for r in ranks) / mean_compute - 1.0) if mean_compute > 0 else 0.0
    common = {key: run.configuration[key] for key in ("processes", "iterations", "work_units", "imbalance",
                                                      "halo_bytes", "alltoall_every", "alltoall_bytes")}
    table = [{"rank": r.rank, "host": r.host, "wall_s": r.wall_s, "compute_s": r.compute_s, "comm_s": r.comm_s,
              "other_s": r.other_s, "work_units": r.work_units} for r in ranks]
    return [Measurement(KERNEL, wall, _SECONDS, Direction.LOWER, metric="wall", valid=run.valid,
                        parameters={**common, "rank_table": table}),
            Measurement(KERNEL, comm_share, _PERCENT, Direction.LOWER, metric="comm_share", valid=run.valid,
                        parameters=common),
            Measurement(KERNEL, imbalance, _PERCENT, Direction.LOWER, metric="compute_imbalance",
                        valid=run.valid, parameters=common)]


def parse_demo_app_tool_output(text: str, source: str) -> ParsedOutput:
    """The demo application's stdout as a tool's parsed output."""
    run = parse_demo_app_output(text, source)
    return ParsedOutput(tool=TOOL, measurements=demo_app_measurements(run), valid=run.valid, problems=run.problems,
                        configuration={**run.configuration, "checksum": f"0x{run.checksum:016x}"})
