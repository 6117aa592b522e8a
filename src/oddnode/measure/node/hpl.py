"""HPL through HPC Challenge (``hpcc``) on the nodes that have it
installed: the compute stage's second step, after our DGEMM kernel."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from oddnode.measure.benchmarks import DETAIL_CHARS, BenchmarkSpec
from oddnode.measure.node.dgemm import COMPUTE_STAGE, GFLOPS, blas_thread_env
from oddnode.reach.jobs import parse_tool_output, tool_argv
from oddnode.core.model import Direction
from oddnode.parsers.base import ParsedOutput, ParseError
from oddnode.parsers.hpcc import parse_hpcc
from oddnode.measure.steps import NodeBenchmark, option

# HPL's problem size.  It must be one number for all nodes (one argv runs
# everywhere), so it cannot follow each node's memory; 10000 (800 MB of
# matrix) keeps HPL's update phase, which runs at DGEMM speed, dominant over
# the panel factorisation on one node, while HPCC's other tests, sized from
# the same memory, keep the whole run to a few minutes (3 on two cores, most
# of it in RandomAccess, which HPCC bounds at 60 s).
DEFAULT_HPL_ORDER = 10_000
# HPL's block size: the threaded BLAS libraries of current CPUs (OpenBLAS,
# MKL, BLIS) run HPL's trailing update best with blocks of 192 to 256.
DEFAULT_HPL_BLOCK = 192
# HPL's own threshold for its scaled residual ||Ax-b|| / (eps (||A|| ||x|| + ||b||) N).
HPL_THRESHOLD = 16.0
# Seconds hpcc may run on a node: under the runner's 600 s, so that a run that
# is too slow is cut and reported by the node runner itself.
DEFAULT_HPL_TIMEOUT = 540.0
HPCC_INPUT = "hpccinf.txt"
HPCC_OUTPUT = "hpccoutf.txt"

# HPCC's numbers kept from one single-process run, and their names here: HPL,
# and the two of its tests that are also computation on one process.  DGEMM
# through the BLAS hpcc is linked with (which may not be the one our kernel
# found) tells a slow BLAS from a slow factorisation; the others (STREAM,
# RandomAccess, PTRANS, the MPI and ring tests) measure memory or need
# several processes, and stay in the stored raw output.
HPCC_KEPT = {
    "hpcc.hpl": "compute.hpl",
    "hpcc.single_dgemm": "compute.hpcc_dgemm",
    "hpcc.single_fft": "compute.hpcc_fft",
}
HPL_SERIES = tuple((name, "performance", GFLOPS, Direction.HIGHER) for name in HPCC_KEPT.values())
# The sizes each kept test ran at: (key in parse_hpcc's configuration, parameter name).
_HPCC_SIZES = {
    "compute.hpl": (("N", "n"), ("NB", "nb"), ("P", "p"), ("Q", "q")),
    "compute.hpcc_dgemm": (("dgemm_n", "n"),),
    "compute.hpcc_fft": (("fft_n", "n"),),
}

_HPL_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|_oo/\(eps\*.*\)=\s*(\S+)\s*\.+\s*(PASSED|FAILED)")


def hpcc_input(n: int, nb: int, p: int = 1, q: int = 1) -> str:
    """HPCC's input file (HPL.dat's 31 lines, then PTRANS's): one problem of
    order ``n``, blocks of ``nb``, one P x Q process grid, HPL's standard
    algorithm variants."""
    if n < 1 or nb < 1 or p < 1 or q < 1:
        raise ValueError(f"n, nb, p and q must be >= 1, got n={n} nb={nb} p={p} q={q}")
    lines = [
        ("HPLinpack benchmark input file", ""),
        ("oddnode compute stage", ""),
        ("HPL.out", "output file name (if any)"),
        ("8", "device out (6=stdout,7=stderr,file)"),
        ("1", "# of problems sizes (N)"),
        (str(n), "Ns"),
        ("1", "# of NBs"),
        (str(nb), "NBs"),
        ("0", "PMAP process mapping (0=Row-,1=Column-major)"),
        ("1", "# of process grids (P x Q)"),
        (str(p), "Ps"),
        (str(q), "Qs"),
        (f"{HPL_THRESHOLD:.1f}", "threshold"),
        ("1", "# of panel fact"),
        ("2", "PFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of recursive stopping criterium"),
        ("4", "NBMINs (>= 1)"),
        ("1", "# of panels in recursion"),
        ("2", "NDIVs"),
        ("1", "# of recursive panel fact."),
        ("1", "RFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of broadcast"),
        ("1", "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
        ("1", "# of lookahead depth"),
        ("1", "DEPTHs (>=0)"),
        ("2", "SWAP (0=bin-exch,1=long,2=mix)"),
        ("64", "swapping threshold"),
        ("0", "L1 in (0=transposed,1=no-transposed) form"),
        ("0", "U  in (0=transposed,1=no-transposed) form"),
        ("1", "Equilibration (0=no,1=yes)"),
        ("8", "memory alignment in double (> 0)"),
        ("##### This line (no. 32) is ignored (it serves as a separator). ######", ""),
        ("0", "Number of additional problem sizes for PTRANS"),
        ("1200", "values of N"),
        ("0", "number of additional blocking sizes for PTRANS"),
        ("40", "values of NB"),
    ]
    return "".join(f"{value:<12} {comment}".rstrip() + "\n" if comment else value + "\n" for value, comment in lines)


def _hpl_residual(text: str) -> float | None:
    """HPL's scaled residual as its section prints it (the summary does not)."""
    for raw in text.splitlines():
        found = _HPL_RESIDUAL.match(raw.strip())
        if found:
            try:
                return float(found.group(1))
            except ValueError:
                return None
    return None


def _parse_hpl_run(text: str, source: str) -> ParsedOutput:
    """The node runner's report of hpcc, then ``hpccoutf.txt`` inside it: HPL's
    GFLOP/s with HPCC's DGEMM and FFT.  ToolUnavailable when the node has no
    hpcc; any failed check of HPCC's makes the whole run invalid, as one bad
    test says the node computes wrong."""
    report = parse_tool_output(source, text)
    output = report.collected.get(HPCC_OUTPUT)
    where = f"{source}:{HPCC_OUTPUT}"
    if not output or not output.strip():
        said = (report.stderr.strip() or report.stdout.strip())[:DETAIL_CHARS]
        raise ParseError(source, None, f"hpcc exited with status {report.returncode} and wrote no "
                                       f"{HPCC_OUTPUT}: {said or 'no message'}")
    try:
        parsed = parse_hpcc(output, where)
    except ParseError as problem:
        if report.returncode != 0:
            said = report.stderr.strip()[:DETAIL_CHARS]
            raise ParseError(
                source, None, f"hpcc exited with status {report.returncode}: {said or problem.detail}"
            ) from None
        raise
    kept = [replace(m, benchmark=HPCC_KEPT[m.benchmark]) for m in parsed.measurements if m.benchmark in HPCC_KEPT]
    if not any(m.benchmark == "compute.hpl" for m in kept):
        raise ParseError(where, None, "HPCC Summary section holds no HPL result")

    problems = list(parsed.problems)
    if report.returncode != 0:
        problems.append(f"hpcc exited with status {report.returncode}")
    valid = not problems
    configuration = dict(parsed.configuration)
    configuration.update(tool_path=report.tool_path, cpu_model=report.cpu_model)
    residual = _hpl_residual(output)
    measurements = []
    for m in kept:
        sizes = {name: configuration[key] for key, name in _HPCC_SIZES[m.benchmark] if key in configuration}
        parameters = {**m.parameters, **sizes}
        if m.benchmark == "compute.hpl" and residual is not None:
            parameters["scaled_residual"] = residual
        measurements.append(replace(m, valid=m.valid and valid, parameters=parameters))
    return ParsedOutput("hpcc", measurements, valid, problems, configuration)


@dataclass(frozen=True)
class HplOptions:
    """HPL's problem size and block, the BLAS threads (as in
    blas_thread_env) and the seconds hpcc may run on a node."""

    n: int = option(DEFAULT_HPL_ORDER, help="Problem size N of HPL through hpcc")
    nb: int = DEFAULT_HPL_BLOCK
    threads: int | None = option(None, help="BLAS threads of HPL", shown_default="the node's")
    timeout: float = DEFAULT_HPL_TIMEOUT


class HplStep(NodeBenchmark):
    """HPL through the node's ``hpcc``.

    hpcc runs as one MPI process started without mpirun (an MPI singleton,
    grid 1 x 1), the BLAS's own threads using the node's cores: the argv is
    the same on nodes of any core count, no launcher has to be found or
    configured, and Open MPI's mpirun, which refuses to run as root, is not
    involved.
    """

    name = "hpl"
    stage = COMPUTE_STAGE
    options = HplOptions
    series = tuple(HPCC_KEPT.values())
    summary = "HPL (and hpcc's single-process DGEMM and FFT) through the node's hpcc"

    def spec(self, options: HplOptions) -> BenchmarkSpec:
        return BenchmarkSpec(
            name=self.name,
            stage=self.stage,
            argv=tool_argv(
                "hpcc", [], files={HPCC_INPUT: hpcc_input(options.n, options.nb)}, collect=[HPCC_OUTPUT],
                env=blas_thread_env(options.threads), timeout=options.timeout,
            ),
            parse=_parse_hpl_run,
            series=HPL_SERIES,
            synchronized=True,
        )


def hpl_benchmark(*args, **options) -> BenchmarkSpec:
    """HPL through hpcc as a benchmark, with HplOptions' fields."""
    return HplStep().spec(HplOptions(*args, **options))
