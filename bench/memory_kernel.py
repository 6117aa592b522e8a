"""Measure our memory kernel's triad against a reference, in one run.

The reference is McCalpin's stream.c when ``--reference PATH`` names a copy
of it (built here with the same array length and iteration count), else
numpy's ``a = b + s*c`` into preallocated arrays, best of the same number of
passes with the first discarded, bytes counted as 3 arrays like STREAM.
Both run at 1 thread and at all threads (numpy's elementwise operations are
single-threaded, so its 'all threads' rate is its 1-thread rate).

Each program runs ``--rounds`` times, alternating with the other, and its
best round counts (as oddnode keeps the best of several runs per node):
on a shared or virtual machine one round of either can be slowed by a
neighbour, and alternating exposes both to the same conditions.

Goal: our triad >= 95% of the reference triad.

    python bench/memory_kernel.py [--reference stream.c] [--elements N] [--ntimes 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oddnode.reach.jobs import parse_runner_output
from oddnode.measure.node.memory import (
    default_elements,
    last_level_cache_bytes,
    memory_kernel_argv,
    parse_memory_output,
)

GOAL = 0.95
SCALAR = 3.0


def our_triad(elements: int, ntimes: int, threads: int | None, env: dict[str, str]) -> tuple[float, int]:
    """(best triad MB/s, threads the kernel counted)."""
    argv = [sys.executable] + memory_kernel_argv(elements, ntimes, threads=threads)[1:]
    completed = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    report = parse_runner_output("localhost", completed.stdout)
    parsed = parse_memory_output(report.stdout, "localhost")
    if not parsed.valid:
        raise SystemExit(f"our kernel failed validation: {parsed.problems}")
    triad = next(m for m in parsed.measurements if m.benchmark == "memory.triad")
    return triad.value, parsed.configuration["threads_counted"]


def _stream_triad(text: str) -> float:
    """The Triad best rate from stream.c's output, read by oddnode's STREAM parser."""
    from oddnode.parsers import get_parser

    parsed = get_parser("stream")(text, "stream.c")
    if not parsed.valid:
        raise SystemExit(f"the reference failed its validation: {parsed.problems}")
    return next(m.value for m in parsed.measurements if m.benchmark == "stream.triad")


def stream_triad(executable: Path, threads: int | None, env: dict[str, str]) -> float:
    run_env = dict(env, OMP_PROC_BIND="spread")  # as our kernel runs by default
    if threads is not None:
        run_env["OMP_NUM_THREADS"] = str(threads)
    completed = subprocess.run([str(executable)], capture_output=True, text=True, env=run_env, check=True)
    return _stream_triad(completed.stdout)


def build_stream(reference: Path, elements: int, ntimes: int, directory: Path) -> Path:
    executable = directory / "stream"
    subprocess.run(
        ["cc", "-O3", "-march=native", "-fopenmp", f"-DSTREAM_ARRAY_SIZE={elements}", f"-DNTIMES={ntimes}",
         "-o", str(executable), str(reference)],
        check=True,
    )
    return executable


def numpy_triad(elements: int, ntimes: int) -> float:
    """Best MB/s of a = b + s*c over ntimes passes, the first discarded."""
    import numpy as np

    a = np.ones(elements)
    b = np.full(elements, 2.0)
    c = np.zeros(elements)
    best = float("inf")
    for k in range(ntimes):
        started = time.perf_counter()
        np.multiply(c, SCALAR, out=a)
        np.add(a, b, out=a)
        elapsed = time.perf_counter() - started
        if k > 0:
            best = min(best, elapsed)
    return 1e-6 * 3 * 8 * elements / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, help="path to stream.c; numpy when absent")
    parser.add_argument("--elements", type=int, help="doubles per array (default: >= 4x the LLC)")
    parser.add_argument("--ntimes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each; the best counts")
    args = parser.parse_args()

    llc = last_level_cache_bytes()
    elements = args.elements or default_elements(llc)
    print(f"last-level cache {llc / 2**20:.1f} MiB; {elements} elements "
          f"({elements * 8 / 1e6:.1f} MB per array), ntimes {args.ntimes}, best of {args.rounds} rounds")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}

    with tempfile.TemporaryDirectory(prefix="oddnode-bench-") as tmp:
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        stream_exe = build_stream(args.reference, elements, args.ntimes, Path(tmp)) if args.reference else None
        rows = []
        for label, threads in (("1 thread", 1), ("all threads", None)):
            ours = reference = 0.0
            for _ in range(args.rounds):
                rate, counted = our_triad(elements, args.ntimes, threads, env)
                ours = max(ours, rate)
                if stream_exe is not None:
                    reference = max(reference, stream_triad(stream_exe, threads, env))
                else:
                    reference = max(reference, numpy_triad(elements, args.ntimes))
            reference_name = "stream.c" if stream_exe is not None else "numpy"
            note = " (numpy's elementwise ops are single-threaded)" if stream_exe is None and threads is None else ""
            ratio = ours / reference
            rows.append(ratio)
            print(f"{label:>11} ({counted} counted): ours {ours:10.1f} MB/s   "
                  f"{reference_name} {reference:10.1f} MB/s{note}   ratio {ratio:.3f}")
    met = all(ratio >= GOAL for ratio in rows)
    if args.reference:
        print(f"goal (ours >= {GOAL:.0%} of the reference STREAM triad): {'met' if met else 'NOT met'}")
    else:
        print(f"against numpy (no --reference stream.c given): ours >= {GOAL:.0%} of numpy's triad: "
              f"{'yes' if met else 'no'}; the goal itself is judged against STREAM")


if __name__ == "__main__":
    main()
