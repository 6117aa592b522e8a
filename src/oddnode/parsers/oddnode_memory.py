"""The parser of our memory kernel's output (``memory.c``, tool name
``oddnode-memory``): STREAM's four bandwidths, the configuration the kernel
reports, its validation and, for a bound run, its binding check."""

from __future__ import annotations

import re

from oddnode.core.model import Direction
from oddnode.core.units import canonical_unit
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.parsers.kernel_output import RESULT_LINE, VALIDATION_FAILED, VALIDATION_OK, number, read_kernel_output

MEMORY_KERNELS = ("copy", "scale", "add", "triad")
BANDWIDTH_UNIT = canonical_unit("MB/s")  # the kernel's MB is 10^6 bytes

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
    "cpu_node",
    "mem_node",
    "mem_pages_checked",
    "mem_pages_on_node",
    "iterations_run",
}
# The line a bound run reports its binding check with.
_BINDING_OK = re.compile(r"^binding ok\s*$")
_BINDING_FAILED = re.compile(r"^binding failed\s+(cpu|memory)\s+(.*)$")
_FLOAT_KEYS = {"scalar", "tolerance", "min_loop_seconds", "max_seconds"}




def parse_memory_output(text: str, source: str) -> ParsedOutput:
    """Parse one run of our memory kernel: four bandwidths, the configuration
    it reports (effective threads, affinity, array bytes, timer), and its
    validation; ParseError if the output is not ours or is cut short."""
    output = read_kernel_output(text, source, "memory", int_keys=_INT_KEYS, float_keys=_FLOAT_KEYS)
    configuration = output.configuration
    results: dict[str, tuple[float, dict[str, float]]] = {}
    problems: list[str] = []
    validated = False
    binding_checked = False

    for lineno, line in output.lines:
        result = RESULT_LINE.match(line)
        if result:
            kernel = result.group(1)
            if kernel not in MEMORY_KERNELS:
                raise ParseError(source, lineno, f"unknown kernel {kernel!r}")
            rate, avg, best, worst = (number(result.group(i), source, lineno) for i in range(2, 6))
            results[kernel] = (rate, {"avg_time_s": avg, "min_time_s": best, "max_time_s": worst})
            continue
        if VALIDATION_OK.match(line):
            validated = True
            continue
        if _BINDING_OK.match(line):
            binding_checked = True
            continue
        unmet = _BINDING_FAILED.match(line)
        if unmet:
            binding_checked = True
            configuration["binding_failed"] = f"{unmet.group(1)} {unmet.group(2)}"
            problems.append(f"binding not met: {unmet.group(1)}: {unmet.group(2)}")
            continue
        failed = VALIDATION_FAILED.match(line)
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
    bound = {key: configuration[key] for key in ("cpu_node", "mem_node") if key in configuration}
    if bound and not binding_checked:
        raise ParseError(source, output.line_count, "truncated memory kernel output: a bound run without its "
                                                    "binding line")
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
        # A time budget (-s) says how many iterations it let run.
        **({"max_seconds": configuration["max_seconds"], "iterations_run": configuration.get("iterations_run")}
           if configuration.get("max_seconds") else {}),
        **bound,
        **({"bound_cpus": configuration["bound_cpus"]} if "bound_cpus" in configuration else {}),
    }
    measurements = [
        Measurement(
            benchmark=f"memory.{kernel}",
            metric="bandwidth",
            value=results[kernel][0],
            unit=BANDWIDTH_UNIT,
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
