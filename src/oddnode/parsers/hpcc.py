"""HPC Challenge (``hpccoutf.txt``): the key=value Summary section gives the
numbers; the per-test sections say whether each test passed its own check."""

from __future__ import annotations

import re
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.inputs import quote
from oddnode.core.inputs import clip
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, number, whole
from oddnode.core.units import canonical_unit

_BEGIN_SUMMARY = "Begin of Summary section."
_END_SUMMARY = "End of Summary section."

# summary key -> (benchmark, metric, unit, direction, factor to the unit).
# HPCC prints HPL in Tflop/s; it is stored in GFLOP/s like DGEMM and FFT.
# HPCC's GB/s and "GBytes" are 10^9 bytes/s (its LatencyBandwidth section says
# "1 MB/s = 10**6 byte/sec" and the summary divides MB/s by 1000).
_SUMMARY_METRICS: dict[str, tuple[str, str, str, Direction, float]] = {
    "HPL_Tflops": ("hpcc.hpl", "performance", "GFLOP/s", Direction.HIGHER, 1000.0),
    "StarDGEMM_Gflops": ("hpcc.star_dgemm", "performance", "GFLOP/s", Direction.HIGHER, 1.0),
    "SingleDGEMM_Gflops": ("hpcc.single_dgemm", "performance", "GFLOP/s", Direction.HIGHER, 1.0),
    "PTRANS_GBs": ("hpcc.ptrans", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "MPIRandomAccess_GUPs": ("hpcc.mpi_random_access", "rate", "GUP/s", Direction.HIGHER, 1.0),
    "StarRandomAccess_GUPs": ("hpcc.star_random_access", "rate", "GUP/s", Direction.HIGHER, 1.0),
    "SingleRandomAccess_GUPs": ("hpcc.single_random_access", "rate", "GUP/s", Direction.HIGHER, 1.0),
    "MPIRandomAccess_LCG_GUPs": ("hpcc.mpi_random_access_lcg", "rate", "GUP/s", Direction.HIGHER, 1.0),
    "StarRandomAccess_LCG_GUPs": ("hpcc.star_random_access_lcg", "rate", "GUP/s", Direction.HIGHER, 1.0),
    "SingleRandomAccess_LCG_GUPs": ("hpcc.single_random_access_lcg", "rate", "GUP/s", Direction.HIGHER, 1.0),
    "StarSTREAM_Copy": ("hpcc.star_stream_copy", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "StarSTREAM_Scale": ("hpcc.star_stream_scale", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "StarSTREAM_Add": ("hpcc.star_stream_add", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "StarSTREAM_Triad": ("hpcc.star_stream_triad", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "SingleSTREAM_Copy": ("hpcc.single_stream_copy", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "SingleSTREAM_Scale": ("hpcc.single_stream_scale", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "SingleSTREAM_Add": ("hpcc.single_stream_add", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "SingleSTREAM_Triad": ("hpcc.single_stream_triad", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "StarFFT_Gflops": ("hpcc.star_fft", "performance", "GFLOP/s", Direction.HIGHER, 1.0),
    "SingleFFT_Gflops": ("hpcc.single_fft", "performance", "GFLOP/s", Direction.HIGHER, 1.0),
    "MPIFFT_Gflops": ("hpcc.mpi_fft", "performance", "GFLOP/s", Direction.HIGHER, 1.0),
    "MinPingPongLatency_usec": ("hpcc.pingpong", "latency.min", "us", Direction.LOWER, 1.0),
    "AvgPingPongLatency_usec": ("hpcc.pingpong", "latency.avg", "us", Direction.LOWER, 1.0),
    "MaxPingPongLatency_usec": ("hpcc.pingpong", "latency.max", "us", Direction.LOWER, 1.0),
    "MinPingPongBandwidth_GBytes": ("hpcc.pingpong", "bandwidth.min", "GB/s", Direction.HIGHER, 1.0),
    "AvgPingPongBandwidth_GBytes": ("hpcc.pingpong", "bandwidth.avg", "GB/s", Direction.HIGHER, 1.0),
    "MaxPingPongBandwidth_GBytes": ("hpcc.pingpong", "bandwidth.max", "GB/s", Direction.HIGHER, 1.0),
    "NaturallyOrderedRingLatency_usec": ("hpcc.natural_ring", "latency", "us", Direction.LOWER, 1.0),
    "NaturallyOrderedRingBandwidth_GBytes": ("hpcc.natural_ring", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
    "RandomlyOrderedRingLatency_usec": ("hpcc.random_ring", "latency", "us", Direction.LOWER, 1.0),
    "RandomlyOrderedRingBandwidth_GBytes": ("hpcc.random_ring", "bandwidth", "GB/s", Direction.HIGHER, 1.0),
}

# Which test a section's failure invalidates: section name -> benchmark prefixes.
_SECTION_BENCHMARKS: dict[str, tuple[str, ...]] = {
    "HPL": ("hpcc.hpl",),
    "PTRANS": ("hpcc.ptrans",),
    "StarDGEMM": ("hpcc.star_dgemm",),
    "SingleDGEMM": ("hpcc.single_dgemm",),
    "StarSTREAM": ("hpcc.star_stream_",),
    "SingleSTREAM": ("hpcc.single_stream_",),
    "MPIRandomAccess": ("hpcc.mpi_random_access",),
    "StarRandomAccess": ("hpcc.star_random_access",),
    "SingleRandomAccess": ("hpcc.single_random_access",),
    "MPIRandomAccess_LCG": ("hpcc.mpi_random_access_lcg",),
    "StarRandomAccess_LCG": ("hpcc.star_random_access_lcg",),
    "SingleRandomAccess_LCG": ("hpcc.single_random_access_lcg",),
    "MPIFFT": ("hpcc.mpi_fft",),
    "StarFFT": ("hpcc.star_fft",),
    "SingleFFT": ("hpcc.single_fft",),
    "LatencyBandwidth": ("hpcc.pingpong", "hpcc.natural_ring", "hpcc.random_ring"),
}

# HPCC's RandomAccess passes when at most 1% of the table is wrong (the
# benchmark tolerates lost updates from unsynchronised concurrent writes).
_RANDOM_ACCESS_ERROR_FRACTION = 0.01

_SECTION = re.compile(r"^(Begin|End) of (\w+) section\.$")
_NODES_WITH_ERROR = re.compile(r"^Node\(s\) with error (\d+)")
_RA_FOUND = re.compile(r"^Found (\d+) errors in (\d+) locations \((\w+)\)\.")


def _summary(lines: list[str], source: str) -> tuple[dict[str, str], dict[str, int], int]:
    """The key=value pairs of the Summary section, the line of each key, and
    the line the section starts on."""
    start = next((i for i, line in enumerate(lines) if line.strip() == _BEGIN_SUMMARY), None)
    if start is None:
        if not any("HPC Challenge" in line or "HPC Challange" in line for line in lines[:20]):
            raise ParseError(source, None, "not HPCC output: no HPC Challenge banner and no Summary section")
        raise ParseError(
            source,
            len(lines) or None,
            f"HPCC output without '{_BEGIN_SUMMARY}' (run interrupted before the summary?)",
        )
    values: dict[str, str] = {}
    key_lines: dict[str, int] = {}
    for index in range(start + 1, len(lines)):
        line = lines[index].strip()
        if line == _END_SUMMARY:
            return values, key_lines, start + 1
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise ParseError(source, index + 1, f"expected key=value in the Summary section, found {quote(line)}")
        values[key.strip()] = value.strip()
        key_lines[key.strip()] = index + 1
    raise ParseError(source, len(lines), f"truncated HPCC Summary section: no '{_END_SUMMARY}'")


def _section_problems(lines: list[str]) -> dict[str, list[str]]:
    """Failures each test section reports about itself, by section name."""
    problems: dict[str, list[str]] = {}
    section = None
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        marker = _SECTION.match(line)
        if marker:
            section = marker.group(2) if marker.group(1) == "Begin" else None
            continue
        if section is None or section == "Summary":
            continue
        failure = None
        nodes = _NODES_WITH_ERROR.match(line)
        found = _RA_FOUND.match(line)
        if nodes and int(nodes.group(1)) > 0:
            failure = f"{section}: {nodes.group(1)} node(s) with error (line {lineno})"
        elif found and found.group(3) != "passed":
            failure = f"{section}: {clip(line)} (line {lineno})"
        elif section in ("HPL", "PTRANS") and re.search(r"\bFAILED\b", line) and not line.startswith(
            ("0 tests", "Finished")
        ):
            failure = f"{section}: residual check failed: {clip(line)} (line {lineno})"
        elif re.search(r"\b[1-9]\d* tests? completed and failed residual checks", line):
            failure = f"{section}: {clip(line.rstrip(',.'))} (line {lineno})"
        elif line.startswith("Failed Validation"):
            failure = f"{section}: {clip(line)} (line {lineno})"
        if failure:
            problems.setdefault(section, []).append(failure)
    return problems


def parse_hpcc(text: str, source: str) -> ParsedOutput:
    """Parse ``hpccoutf.txt``; tests that did not run (HPCC writes -1) are left out."""
    lines = text.splitlines()
    summary, key_lines, summary_line = _summary(lines, source)

    def summary_number(key: str) -> float:
        return number(summary[key], source, key_lines[key], f"summary value {key}")

    if "Success" not in summary:
        raise ParseError(source, summary_line, "HPCC Summary section without a Success field")

    by_section = _section_problems(lines)
    problems: list[str] = []
    if summary["Success"] != "1":
        problems.append(f"HPCC summary reports Success={clip(summary['Success'])} "
                        "(a test failed or the input was rejected)")
    for section_problems in by_section.values():
        problems.extend(section_problems)
    for prefix in ("MPIRandomAccess", "MPIRandomAccess_LCG"):
        key = f"{prefix}_ErrorsFraction"
        if key in summary and summary_number(key) > _RANDOM_ACCESS_ERROR_FRACTION:
            problems.append(f"{prefix}: {clip(summary[key])} of the table in error (more than 1%)")
            by_section.setdefault(prefix, []).append("errors")

    failed_prefixes = tuple(
        prefix for section in by_section for prefix in _SECTION_BENCHMARKS.get(section, ())
    )
    all_invalid = summary["Success"] != "1"

    measurements: list[Measurement] = []
    for key, (benchmark, metric, unit, direction, factor) in _SUMMARY_METRICS.items():
        if key not in summary:
            continue
        value = summary_number(key)
        if value < 0:  # HPCC initialises every result to -1: the test did not run
            continue
        failed = all_invalid or any(
            benchmark == prefix or (prefix.endswith("_") and benchmark.startswith(prefix)) for prefix in failed_prefixes
        )
        measurements.append(
            Measurement(
                benchmark=benchmark,
                metric=metric,
                value=number(value * factor, source, key_lines[key], f"summary value {key}"),
                unit=canonical_unit(unit),
                direction=direction,
                valid=not failed,
            )
        )
    if not measurements:
        raise ParseError(source, summary_line, "HPCC Summary section holds no test results")

    configuration: dict[str, Any] = {}
    version = [summary.get(k) for k in ("VersionMajor", "VersionMinor", "VersionMicro")]
    if all(version):
        configuration["version"] = ".".join(v for v in version if v) + summary.get("VersionRelease", "")
    for key, name in (
        ("HPL_N", "N"),
        ("HPL_NB", "NB"),
        ("HPL_nprow", "P"),
        ("HPL_npcol", "Q"),
        ("CommWorldProcs", "comm_world_procs"),
        ("STREAM_VectorSize", "stream_vector_size"),
        ("STREAM_Threads", "stream_threads"),
        ("PTRANS_n", "ptrans_n"),
        ("DGEMM_N", "dgemm_n"),
        ("FFT_N", "fft_n"),
        ("MPIFFT_N", "mpi_fft_n"),
    ):
        if key in summary:
            configuration[name] = whole(summary[key], source, key_lines[key], f"summary value {key}")
    # HPCC 1.5.0 prints no MPI version; the hostname is the only run context it gives.
    for raw in lines:
        line = raw.strip()
        if line.startswith("Hostname:"):
            configuration["hostname"] = line.partition(":")[2].strip().strip("'")

    return ParsedOutput(
        tool="hpcc",
        measurements=measurements,
        valid=not problems,
        problems=problems,
        configuration=configuration,
    )
