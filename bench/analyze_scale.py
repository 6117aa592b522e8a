"""Time ``import stab`` + ``analyze`` of 10,000 nodes x 100 benchmarks from plot files.

100 STAB plot files (one per benchmark, one line per node: 1,000,000 values,
about 19 MB) are written to a temporary directory.  Timed, as ``oddnode
analyze DIR`` does it: import into a fresh in-memory store, load the
dataset, statistics, findings and the correlation of all 4,950 benchmark
pairs.  The reference, timed in the same run on the same files: numpy
parses each file's two columns (value and label, ``np.loadtxt``) and sorts
its values, carrying the labels along.  Absolute times drift on shared
machines; the ratio less so.

Goal: import + analyze within 3x the reference.

    python bench/analyze_scale.py [--nodes 10000] [--benchmarks 100] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from oddnode.judge.analysis import analyze
from oddnode.store.stab import import_stab
from oddnode.store import open_store

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


def main() -> None:
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

    warnings = sum(1 for f in result.findings if f.severity.value != "info")
    print(f"findings: {len(result.findings)} ({warnings} warning or above); "
          f"correlations: {len(result.correlations)}")
    print(f"import + analyze: {measured:.2f} s (rounds: {', '.join(f'{t:.2f}' for t in measured_times)})")
    print(f"numpy parse + sort of the same files: {reference:.2f} s "
          f"(rounds: {', '.join(f'{t:.2f}' for t in reference_times)})")
    ratio = measured / reference
    print(f"ratio: {ratio:.1f}x (goal <= {GOAL_RATIO:g}x) -> {'PASS' if ratio <= GOAL_RATIO else 'FAIL'}")


if __name__ == "__main__":
    main()
