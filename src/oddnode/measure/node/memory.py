"""The memory kernel (``memory.c``): STREAM's copy, scale, add and triad
bandwidths on every node, each array at least four times the last-level
cache; its argv and the check's memory step (the parser of its output is
``oddnode.parsers.oddnode_memory``).

The kernel can also pin its threads to the CPUs of one NUMA node and bind
its arrays to the memory of one (``cpu_node``, ``mem_node``): it reads back
where its threads ran and where its pages landed, and a binding it did not
get makes the run invalid, named (``oddnode numa`` runs it so).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from oddnode.measure.benchmarks import BenchmarkSpec, parse_kernel_run
from oddnode.reach.jobs import runner_argv
from oddnode.core.model import Direction
from oddnode.parsers.base import ParsedOutput
from oddnode.parsers.oddnode_memory import BANDWIDTH_UNIT, MEMORY_KERNELS, parse_memory_output
from oddnode.measure.steps import NodeBenchmark, option

MEMORY_STAGE = "memory"
BYTES_PER_DOUBLE = 8
# Each array must be at least this many times the last-level cache so that
# the loops measure memory, not cache (STREAM's rule for a valid run).
CACHE_MULTIPLE = 4
# Arrays never shorter than this (80 MB each): on a node whose cache size
# cannot be read, a too-small array would silently measure the cache.
MIN_ELEMENTS = 10_000_000
# Seconds the memory kernel may run on a node, compile excluded.
DEFAULT_TIMEOUT = 600.0
# The longest a timed memory loop may be asked to last (memory.c's -m bound).
MAX_MIN_LOOP_SECONDS = 60.0
MAX_BUDGET_SECONDS = 86400.0  # the longest time budget memory.c's -s accepts
# The highest NUMA node number the kernel takes (oddnode_numa.h's bound).
MAX_NUMA_NODE = 1023

# --- how long the arrays must be -------------------------------------------------


def _cache_size_bytes(text: str) -> int:
    """sysfs writes cache sizes as '32K', '1024K', '105M'."""
    found = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text)
    if not found:
        return 0
    return int(found.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[found.group(2)]


def last_level_cache_bytes(sysfs_root: Path = Path("/sys/devices/system/cpu")) -> int:
    """Total bytes of the highest-level data or unified cache over all its
    instances (one L3 per socket counts twice on two sockets), read from sysfs;
    0 when sysfs says nothing about caches."""
    instances: dict[int, dict[str, int]] = {}  # level -> instance id -> bytes
    for index in sorted(Path(sysfs_root).glob("cpu[0-9]*/cache/index[0-9]*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text().strip())
            size = _cache_size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified") or size <= 0:
            continue
        # CPUs sharing one cache list the same CPUs; that list names the instance.
        shared = index / "shared_cpu_list"
        try:
            instance = shared.read_text().strip()
        except OSError:
            instance = str(index.parent.parent.name)
        instances.setdefault(level, {})[instance] = size
    if not instances:
        return 0
    return sum(instances[max(instances)].values())


def default_elements(llc_bytes: int) -> int:
    """Doubles per array so that each array is >= 4x the last-level cache,
    never fewer than MIN_ELEMENTS."""
    needed = math.ceil(CACHE_MULTIPLE * max(llc_bytes, 0) / BYTES_PER_DOUBLE)
    return max(MIN_ELEMENTS, needed)


def memory_kernel_argv(
    elements: int,
    ntimes: int = 10,
    threads: int | None = None,
    proc_bind: str | None = "spread",
    cflags: Sequence[str] = (),
    defines: Sequence[str] = (),
    *,
    min_loop_seconds: float = 0.0,
    max_seconds: float = 0.0,
    cpu_node: int | None = None,
    mem_node: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    interpreter: str = "python3",
) -> list[str]:
    """The argv that runs the memory kernel on a node.

    ``threads`` sets OMP_NUM_THREADS and ``proc_bind`` OMP_PROC_BIND; None
    leaves the node's setting (the kernel reports what it got either way).
    ``min_loop_seconds`` > 0 repeats each timed loop's pass until the loop
    lasts about that long (see memory.c): a rate clear of the timer and of
    the time slices of CPUs that nodes share.  ``max_seconds`` > 0 ends the
    timed iterations once that long has passed (at least one counted), so
    that a node slowed by a competing process still reports its bandwidth
    in about that time.  ``cpu_node`` pins each thread
    to one CPU of that NUMA node (one thread per CPU there unless
    ``threads`` says otherwise); ``mem_node`` binds the arrays to that
    node's memory (see memory.c).
    """
    if elements < 1:
        raise ValueError(f"elements must be >= 1, got {elements}")
    if ntimes < 2:
        raise ValueError(f"ntimes must be >= 2 (the first iteration is discarded), got {ntimes}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if not 0.0 <= min_loop_seconds <= MAX_MIN_LOOP_SECONDS:
        raise ValueError(f"min_loop_seconds must be 0 to {MAX_MIN_LOOP_SECONDS:g}, got {min_loop_seconds}")
    if not 0.0 <= max_seconds <= MAX_BUDGET_SECONDS:
        raise ValueError(f"max_seconds must be 0 to {MAX_BUDGET_SECONDS:g}, got {max_seconds}")
    for name, node in (("cpu_node", cpu_node), ("mem_node", mem_node)):
        if node is not None and not (isinstance(node, int) and 0 <= node <= MAX_NUMA_NODE):
            raise ValueError(f"{name} must be a NUMA node number, 0 to {MAX_NUMA_NODE}, got {node!r}")
    env: dict[str, str] = {}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if proc_bind is not None:
        env["OMP_PROC_BIND"] = proc_bind
    binding = ((["-C", str(cpu_node)] if cpu_node is not None else [])
               + (["-M", str(mem_node)] if mem_node is not None else []))
    return runner_argv(
        "memory",
        ["-n", str(elements), "-t", str(ntimes)] + (["-m", f"{min_loop_seconds:g}"] if min_loop_seconds else [])
        + (["-s", f"{max_seconds:g}"] if max_seconds else []) + binding,
        cflags=cflags,
        defines=defines,
        env=env,
        timeout=timeout,
        interpreter=interpreter,
    )


def _parse_memory_run(text: str, source: str) -> ParsedOutput:
    """The node runner's JSON report, then the memory kernel's stdout inside it."""
    return parse_kernel_run(text, source, "memory", parse_memory_output)


@dataclass(frozen=True)
class MemoryOptions:
    """The memory kernel's options.

    ``elements`` defaults to what the last-level cache of THIS machine needs
    (each array >= 4x the LLC, see default_elements); nodes with a larger
    cache need more, so on a mixed cluster pass the size for the largest LLC.
    ``threads`` None keeps each node's OMP_NUM_THREADS (all cores by default).
    ``min_loop_seconds`` > 0 makes each timed loop last about that long;
    ``max_seconds`` > 0 bounds the timed iterations all together.
    ``cpu_node`` and ``mem_node`` bind the threads and the arrays to NUMA
    nodes (None: the node's own placement; ``oddnode numa`` runs every pair).
    """

    elements: int | None = option(None, help="Doubles per array of the memory kernel",
                                  shown_default="4x this machine's last-level cache")
    ntimes: int = option(10, help="Timed iterations of the memory kernel, the first discarded")
    threads: int | None = option(None, help="OpenMP threads of the memory kernel", shown_default="the node's")
    min_loop_seconds: float = option(
        0.0, help="Repeat each timed memory loop until it lasts about this long, 0: one pass",
        flag="min-seconds", check="seconds_or_zero")
    max_seconds: float = option(
        0.0, help="End the memory kernel's timed iterations after this many seconds (at least one counted), "
                  "0: no bound", check="seconds_or_zero")
    cpu_node: int | None = None
    mem_node: int | None = None


class MemoryStep(NodeBenchmark):
    """The memory kernel's copy, scale, add and triad bandwidths on every node."""

    name = "memory"
    stage = MEMORY_STAGE
    options = MemoryOptions
    series = ("memory",)
    summary = "copy, scale, add and triad bandwidth (oddnode's STREAM kernel)"

    def spec(self, options: MemoryOptions) -> BenchmarkSpec:
        elements = options.elements
        if elements is None:
            elements = default_elements(last_level_cache_bytes())
        return BenchmarkSpec(
            name=self.name,
            stage=self.stage,
            argv=memory_kernel_argv(elements, options.ntimes, options.threads,
                                    # Pinned threads keep their own CPU: no OpenMP binding on top.
                                    proc_bind=None if options.cpu_node is not None else "spread",
                                    min_loop_seconds=options.min_loop_seconds, max_seconds=options.max_seconds,
                                    cpu_node=options.cpu_node,
                                    mem_node=options.mem_node),
            parse=_parse_memory_run,
            series=tuple((f"memory.{kernel}", "bandwidth", BANDWIDTH_UNIT, Direction.HIGHER)
                         for kernel in MEMORY_KERNELS),
            synchronized=True,
        )


def memory_benchmark(*args, **options) -> BenchmarkSpec:
    """The memory kernel as a benchmark, with MemoryOptions' fields."""
    return MemoryStep().spec(MemoryOptions(*args, **options))
