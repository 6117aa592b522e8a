"""Time ``import stab`` + ``analyze`` of 10,000 nodes x 100 benchmarks from plot files.

100 STAB plot files (one per benchmark, one line per node: 1,000,000 values,
about 19 MB) are written to a temporary directory.  Timed, as ``oddnode
analyze DIR`` does it: import into a fresh in-memory store, load the
dataset, statistics, findings and the correlation of all 4,950 benchmark
pairs.  The reference, timed in the same run on the same files: numpy
parses each file's two columns (value and label, ``np.loadtxt``) and sorts
its values, carrying the labels along.  Both are timed twice: in this
process (the work alone), and as processes, start and imports included
(``oddnode analyze DIR`` with its report to /dev/null, against this script
running the reference alone, which loads numpy and nothing of oddnode).
Absolute times drift on shared machines; the ratios less so.

Goal: import + analyze within 3x the reference, process start included.

    python bench/analyze_scale.py [--nodes 10000] [--benchmarks 100] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

GOAL_RATIO = 3.0
# The slow node of each benchmark runs at this fraction of the others, so
# that the findings have something to name.
SLOW_FACTOR = 0.8


def write_plot_files(directory: Path, nodes: int, benchmarks: int, seed: int = 1) -> int:
    """A healthy cluster with one slow node per benchmark, one plot file per
    benchmark; the bytes written."""
    rng = np.random.default_rng(seed)
    width = len(str(nodes))
    names = np.array([f"node{i:0{width}d}" for i in range(1, nodes + 1)])
    means = rng.uniform(100, 10_000, benchmarks)
    size = 0
    for b in range(benchmarks):
        values = rng.normal(means[b], means[b] * 0.01, nodes)
        values[b % nodes] *= SLOW_FACTOR
        text = f"# bench{b:03d}: best result per node\n" + "\n".join(
            np.char.add(np.char.add(np.char.mod("%.6g", values), " "), names)) + "\n"
        path = directory / f"plot.bench{b:03d}"
        path.write_text(text, encoding="utf-8")
        size += len(text)
    return size


def import_and_analyze(directory: Path):
    """What ``oddnode analyze DIR`` does, without printing."""
    # Imported here: the reference's process loads nothing of oddnode.
    from oddnode.judge.analysis import analyze
    from oddnode.store import open_store
    from oddnode.store.stab import import_stab

    with open_store(":memory:") as store:
        import_stab(store, [directory], command="oddnode analyze")
        result = analyze(store.load_dataset())
        store.record_findings("oddnode analyze", result.findings)
    return result


def parse_and_sort(directory: Path) -> int:
    """The reference: numpy reads every plot file's value and label and sorts by value."""
    count = 0
    for path in sorted(directory.glob("plot.*")):
        rows = np.loadtxt(path, dtype=[("value", "f8"), ("label", "U64")], usecols=(0, 1), comments="#")
        count += len(rows[np.argsort(rows["value"], kind="stable")])
    return count


def best_of(rounds: int, work: Callable[[], object]) -> tuple[float, list[float], object]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), times, result


def run_process(argv: list[str]) -> None:
    """Run a timed process, its output dropped; a failure stops the benchmark."""
    result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "120"})
    if result.returncode not in (0, 1):  # 1: oddnode analyze found something, as it should
        raise SystemExit(f"{' '.join(argv)} exited {result.returncode}:\n{result.stderr}")


def ratio_line(what: str, measured: float, reference: float) -> float:
    ratio = measured / reference
    print(f"ratio {what}: {ratio:.1f}x")
    return ratio


def main() -> None:
    if sys.argv[1:2] == ["--reference"]:  # the reference as a process of its own
        parse_and_sort(Path(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--benchmarks", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the best is reported")
    parser.add_argument("--profile", action="store_true", help="profile one import + analyze, print the top 25")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        size = write_plot_files(directory, args.nodes, args.benchmarks)
        print(f"plot files: {args.benchmarks} x {args.nodes} nodes ({args.nodes * args.benchmarks:,} values, "
              f"{size / 1e6:.1f} MB) in {directory}")
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(import_and_analyze, directory)
            pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        reference, reference_times, _ = best_of(args.rounds, lambda: parse_and_sort(directory))
        measured, measured_times, result = best_of(args.rounds, lambda: import_and_analyze(directory))
        reference_run, reference_run_times, _ = best_of(args.rounds, lambda: run_process(
            [sys.executable, __file__, "--reference", str(directory)]))
        measured_run, measured_run_times, _ = best_of(args.rounds, lambda: run_process(
            [sys.executable, "-m", "oddnode", "analyze", str(directory)]))

    def rounds(times: list[float]) -> str:
        return ", ".join(f"{t:.2f}" for t in times)

    warnings = sum(1 for f in result.findings if f.severity.value != "info")
    print(f"findings: {len(result.findings)} ({warnings} warning or above); "
          f"correlations: {len(result.correlations)}")
    print(f"in this process: import + analyze {measured:.2f} s (rounds: {rounds(measured_times)}); "
          f"numpy parse + sort of the same files {reference:.2f} s (rounds: {rounds(reference_times)})")
    ratio_line("in this process", measured, reference)
    print(f"as processes: oddnode analyze DIR {measured_run:.2f} s (rounds: {rounds(measured_run_times)}); "
          f"the numpy reference {reference_run:.2f} s (rounds: {rounds(reference_run_times)})")
    ratio = ratio_line("as processes, start included", measured_run, reference_run)
    print(f"goal: <= {GOAL_RATIO:g}x as processes -> {'PASS' if ratio <= GOAL_RATIO else 'FAIL'}")


if __name__ == "__main__":
    main()
