"""The DGEMM kernel (``dgemm.c``): GFLOP/s of C = A B through each node's
BLAS, the product checked; its argv, the parser of its output and the
check's dgemm step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oddnode.measure.benchmarks import BenchmarkSpec, parse_kernel_run
from oddnode.reach.jobs import DEFAULT_TIMEOUT, runner_argv
from oddnode.parsers.kernel_output import RESULT_LINE, VALIDATION_FAILED, VALIDATION_OK, number, read_kernel_output
from oddnode.core.model import Direction
from oddnode.parsers.base import Measurement, ParsedOutput, ParseError
from oddnode.measure.steps import NodeBenchmark, option
from oddnode.core.units import canonical_unit

COMPUTE_STAGE = "compute"
# Matrix order of the DGEMM kernel: 2 * 6000^3 = 4.3e11 operations per call,
# at least 0.1 s even at 4 TFLOP/s (the timer is never the limit) and enough
# work per core for the BLAS to reach its steady rate on a few dozen cores;
# the three matrices take 864 MB, which any compute node has to spare.
DEFAULT_DGEMM_ORDER = 6000
DEFAULT_DGEMM_NTIMES = 5
GFLOPS = canonical_unit("GFLOP/s")
DGEMM_SERIES = (("compute.dgemm", "performance", GFLOPS, Direction.HIGHER),)

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
        found = RESULT_LINE.match(line)
        if found:
            if found.group(1) != "dgemm":
                raise ParseError(source, lineno, f"unknown kernel {found.group(1)!r}")
            rate, avg, best, worst = (number(found.group(i), source, lineno) for i in range(2, 6))
            result = (rate, {"avg_time_s": avg, "min_time_s": best, "max_time_s": worst})
            continue
        if VALIDATION_OK.match(line):
            validated = True
            continue
        failed = VALIDATION_FAILED.match(line)
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
        unit=GFLOPS,
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


def _parse_dgemm_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report, then the DGEMM kernel's stdout inside it."""
    return parse_kernel_run(text, source, "dgemm", parse_dgemm_output)


@dataclass(frozen=True)
class DgemmOptions:
    """The DGEMM kernel's options.  ``blas`` names the library to load on
    every node (a path or soname, or "builtin"); None lets each node's kernel
    find its own.  ``threads`` None keeps each node's OMP_NUM_THREADS."""

    n: int = option(DEFAULT_DGEMM_ORDER, help="Matrix order of DGEMM")
    ntimes: int = DEFAULT_DGEMM_NTIMES
    threads: int | None = option(None, help="OpenMP threads of DGEMM", shown_default="the node's")
    blas: str | None = None


class DgemmStep(NodeBenchmark):
    """The DGEMM kernel (GFLOP/s of C = A B, product checked) on every node."""

    name = "dgemm"
    stage = COMPUTE_STAGE
    options = DgemmOptions
    series = tuple(name for name, *_ in DGEMM_SERIES)
    summary = "GFLOP/s of C = A B through each node's BLAS, product checked"

    def spec(self, options: DgemmOptions) -> BenchmarkSpec:
        return BenchmarkSpec(
            name=self.name,
            stage=self.stage,
            argv=dgemm_kernel_argv(options.n, options.ntimes, options.threads, options.blas),
            parse=_parse_dgemm_run,
            series=DGEMM_SERIES,
            synchronized=True,
        )


def dgemm_benchmark(*args, **options) -> BenchmarkSpec:
    """The DGEMM kernel as a benchmark, with DgemmOptions' fields."""
    return DgemmStep().spec(DgemmOptions(*args, **options))
