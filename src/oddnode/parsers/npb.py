"""NAS Parallel Benchmarks (NPB 3.x serial, OpenMP and MPI) reports: the block
after "<NAME> Benchmark Completed" with rate, time and the benchmark's own
verification, and the compile options printed below it."""

from __future__ import annotations

import re
from typing import Any

from oddnode.core.model import Direction
from oddnode.core.inputs import quote
from oddnode.core.inputs import clip
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError, number, whole
from oddnode.core.units import canonical_unit

_COMPLETED = re.compile(r"^\s*([A-Z]{2}) Benchmark Completed\.?\s*$")
_BANNER = re.compile(r"NAS Parallel Benchmarks\s*(?:\(([^)]*)\)|([\d.]+))\s*-+\s*([A-Z]{2}) Benchmark")
_FIELD_NAME = re.compile(r"[A-Za-z][\w /()]*")
# lines before a report that say why the benchmark's own check failed
_FAILURE_DETAIL = re.compile(
    r"VERIFICATION FAILED|Failed partial verification|correct [^=]{0,80}? is|L2 Norm is|"
    r"Verification failed|FAILURE|\bfailed\b",
    re.IGNORECASE,
)
# NPB prints these in this order before "Compile options:"; a report missing
# any of them (or that header) was cut short and its last number may be too.
_REQUIRED = ("Class", "Time in seconds", "Mop/s total", "Verification", "Version", "Compile date")
_VERDICTS = ("SUCCESSFUL", "UNSUCCESSFUL", "NOT PERFORMED")

# NPB prints the time with two decimals: 0.00 means "under 5 ms", not a time.
_TIME_RESOLUTION_S = 0.01


def _field(line: str) -> tuple[str, str] | None:
    """``Name = value`` as (name, value), or None.  Split at the first "=",
    not matched by one pattern: spaces that both sides of a pattern may
    take make it backtrack in quadratic time on a long line."""
    name, equals, value = line.partition("=")
    name = name.strip()
    if not equals or not _FIELD_NAME.fullmatch(name):
        return None
    return name, value.strip()


def _report(lines: list[str], start: int) -> tuple[dict[str, str], dict[str, int], dict[str, str] | None, int]:
    """Fields of the report starting after line index ``start``, its compile
    options (None when the header is missing), and the index of the line after it."""
    fields: dict[str, str] = {}
    field_lines: dict[str, int] = {}  # field -> its line number
    compile_options: dict[str, str] = {}
    index = start + 1
    in_compile = False
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if _COMPLETED.match(line):
            break
        if stripped.startswith("Compile options"):
            in_compile = True
        elif not stripped:
            if in_compile and compile_options:
                index += 1
                break
        elif stripped.startswith(("Please send", "NAS Parallel Benchmarks")):
            break
        else:
            field = _field(line)
            if field:
                (compile_options if in_compile else fields)[field[0]] = field[1]
                if not in_compile:
                    field_lines[field[0]] = index + 1
        index += 1
    return fields, field_lines, (compile_options if in_compile else None), index


def parse_npb(text: str, source: str) -> ParsedOutput:
    """Parse every NPB report in ``text``; a report cut short is an error."""
    lines = text.splitlines()
    measurements: list[Measurement] = []
    problems: list[str] = []
    runs: list[dict[str, Any]] = []
    context_start = 0
    index = 0
    while index < len(lines):
        completed = _COMPLETED.match(lines[index])
        if not completed:
            index += 1
            continue
        name = completed.group(1)
        report_line = index + 1
        fields, field_lines, compile_options, after = _report(lines, index)

        def field_number(key: str) -> float:
            return number(fields[key], source, field_lines[key], f"NPB field {key!r}")

        def field_whole(key: str) -> int:
            return whole(fields[key], source, field_lines[key], f"NPB field {key!r}")

        missing = [key for key in _REQUIRED if key not in fields]
        if compile_options is None:
            missing.append("Compile options")
        if missing:
            raise ParseError(
                source,
                report_line,
                f"truncated NPB report for {name}: no {', '.join(repr(k) for k in missing)}",
            )
        if fields["Verification"].strip() not in _VERDICTS:
            raise ParseError(
                source,
                report_line,
                f"NPB report for {name}: unknown verification {quote(fields['Verification'])}",
            )
        context = lines[context_start:index]
        banner = next((m for m in map(_BANNER.search, context) if m), None)
        npb_class = fields["Class"].strip()
        time_s = field_number("Time in seconds")
        rate = field_number("Mop/s total")
        verification = fields["Verification"].strip()

        run_problems: list[str] = []
        if verification != "SUCCESSFUL":
            details = [" ".join(line.split()) for line in context if _FAILURE_DETAIL.search(line)]
            partial = [d for d in details if d.startswith("Failed partial verification")]
            other = [d for d in details if not d.startswith("Failed partial verification")]
            text_problem = f"{name} class {npb_class}: Verification = {verification}"
            if other:
                text_problem += " (" + "; ".join(other) + ")"
            if partial:
                text_problem += f" ({len(partial)} 'Failed partial verification' lines, first: {partial[0]})"
            run_problems.append(clip(text_problem, 600))
        problems.extend(run_problems)
        valid = not run_problems

        parameters: dict[str, Any] = {
            "size": re.sub(r"\s+", "", fields.get("Size", "")),
            "iterations": field_whole("Iterations") if "Iterations" in fields else 0,
            "version": fields.get("Version", ""),
        }
        for key, name_in_parameters in (
            ("Total threads", "threads"),
            ("Avail threads", "available_threads"),
            ("Total processes", "processes"),
            ("Active procs", "active_processes"),
        ):
            if key in fields:
                parameters[name_in_parameters] = field_whole(key)

        benchmark = f"npb.{name.lower()}.{npb_class}"
        measurements.append(
            Measurement(
                benchmark=benchmark,
                metric="rate",
                value=rate,
                unit=canonical_unit("Mop/s"),
                direction=Direction.HIGHER,
                valid=valid,
                parameters=dict(parameters),
            )
        )
        if time_s >= _TIME_RESOLUTION_S:
            measurements.append(
                Measurement(
                    benchmark=benchmark,
                    metric="time",
                    value=time_s,
                    unit=canonical_unit("s"),
                    direction=Direction.LOWER,
                    valid=valid,
                    parameters=dict(parameters),
                )
            )
        run: dict[str, Any] = {
            "benchmark": name,
            "class": npb_class,
            "operation_type": fields.get("Operation type", ""),
            "compile_date": fields.get("Compile date", ""),
            "compile_options": compile_options,
            **parameters,
        }
        if banner:
            run["suite"] = banner.group(1) or f"NPB{banner.group(2)}"
        if "Mop/s/thread" in fields or "Mop/s/process" in fields:
            key = "Mop/s/thread" if "Mop/s/thread" in fields else "Mop/s/process"
            run["mops_per_" + key.rsplit("/", 1)[1]] = field_number(key)
        runs.append(run)
        context_start = after
        index = after

    if not runs:
        if any("NAS Parallel Benchmarks" in line for line in lines):
            raise ParseError(
                source,
                len(lines) or None,
                "truncated NPB output: banner but no '<NAME> Benchmark Completed' report",
            )
        raise ParseError(source, None, "not NPB output: no 'NAS Parallel Benchmarks' banner or report")

    configuration: dict[str, Any] = dict(runs[0]) if len(runs) == 1 else {"runs": runs}
    return ParsedOutput(
        tool="npb",
        measurements=measurements,
        valid=not problems,
        problems=problems,
        configuration=configuration,
    )
