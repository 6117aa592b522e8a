"""Time a full ``analyze`` of 10,000 nodes x 100 benchmarks.

The store holds 10 repetitions per node and benchmark (10,000,000 results)
and their 1,000,000 best-per-node values.  The full analysis (load from the
store, statistics, findings, correlation of all 4,950 benchmark pairs) is
timed next to the time numpy takes merely to sort the same 1,000,000 values,
in the same run: absolute times drift on shared machines, the ratio less so.

Goal: the whole analysis within 3 s on 2 cores.

    python bench/analyze_scale.py [--nodes 10000] [--benchmarks 100] [--repetitions 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from oddnode.analysis import analyze
from oddnode.store import RESULT_COLUMNS, open_store


def _dictionary_column(codes: np.ndarray, names: list[str]) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(names)).cast(pa.string())


def fill_store(path: Path, nodes: int, benchmarks: int, repetitions: int, seed: int = 1) -> None:
    """A healthy cluster with one slow node per benchmark, written in one run."""
    rng = np.random.default_rng(seed)
    width = len(str(nodes))
    node_names = [f"node{i:0{width}d}" for i in range(1, nodes + 1)]
    bench_names = [f"bench{b:03d}" for b in range(benchmarks)]
    means = rng.uniform(100, 10_000, benchmarks)
    with open_store(path) as store:
        with store.transaction():
            run_id = store.new_run("bench/analyze_scale.py")
            for b in range(benchmarks):
                values = rng.normal(means[b], means[b] * 0.01, size=(nodes, repetitions))
                values[b % nodes] *= 0.8  # one slow node per benchmark, so findings have work to do
                n = nodes * repetitions
                columns = {
                    "benchmark": pa.array(np.full(n, bench_names[b])),
                    "metric": pa.array(np.full(n, "value")),
                    "unit": pa.array(np.full(n, "MB/s")),
                    "direction": pa.array(np.full(n, "higher")),
                    "label": _dictionary_column(np.repeat(np.arange(nodes), repetitions), node_names),
                    "label_kind": pa.array(np.full(n, "node")),
                    "repetition": pa.array(np.tile(np.arange(1, repetitions + 1, dtype=np.int32), nodes)),
                    "value": pa.array(values.ravel()),
                    "valid": pa.array(np.ones(n, dtype=bool)),
                    "parameters": pa.nulls(n, pa.string()),
                    "raw_ref": pa.nulls(n, pa.string()),
                }
                store.add_results(run_id, pa.table({c: columns[c] for c in RESULT_COLUMNS}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--benchmarks", type=int, default=100)
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the best is reported")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scale.duckdb"
        start = time.perf_counter()
        fill_store(path, args.nodes, args.benchmarks, args.repetitions)
        print(f"store: {args.nodes} nodes x {args.benchmarks} benchmarks x {args.repetitions} repetitions "
              f"written in {time.perf_counter() - start:.1f} s")

        analyze_times, sort_times = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            with open_store(path, read_only=True) as store:
                dataset = store.load_dataset()
            result = analyze(dataset)
            analyze_times.append(time.perf_counter() - start)

            values = np.concatenate([s.values for s in dataset.series])
            start = time.perf_counter()
            np.sort(values)
            sort_times.append(time.perf_counter() - start)

    best_analyze, best_sort = min(analyze_times), min(sort_times)
    warnings = sum(1 for f in result.findings if f.severity.value != "info")
    print(f"values analysed: {sum(len(s) for s in dataset.series):,}; findings: {len(result.findings)} "
          f"({warnings} warning or above); correlations: {len(result.correlations)}")
    print(f"full analyze (load + statistics + findings + all-pairs correlation): {best_analyze:.2f} s "
          f"(rounds: {', '.join(f'{t:.2f}' for t in analyze_times)})")
    print(f"numpy sort of the same values: {best_sort * 1000:.1f} ms")
    print(f"ratio analyze / sort: {best_analyze / best_sort:.0f}x")
    print(f"goal: analyze within 3 s -> {'met' if best_analyze <= 3.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
