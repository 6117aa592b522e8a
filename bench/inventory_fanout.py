"""Time the inventory of 8, 16 and 32 testbed nodes over ssh (root only).

One testbed of the largest size is brought up; the inventory probe then runs
over ssh on its first 8, 16 and 32 nodes, best of a few rounds each, and the
seconds per node are printed.  With fan-out the time per node must fall as
the node count grows.

Goal: 32 nodes in under 15 s on 2 cores.

    python bench/inventory_fanout.py [--sizes 8 16 32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from oddnode.app.check import make_target
from oddnode.measure.collect.inventory import collect
from oddnode.testbed import down, up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    state_dir = Path(tempfile.mkdtemp(prefix="oddnode-bench-")) / "testbed"
    started = time.perf_counter()
    bed = up(nodes=max(args.sizes), state_dir=state_dir)
    print(f"testbed of {len(bed.nodes)} nodes up in {time.perf_counter() - started:.1f} s")
    try:
        per_node = []
        for size in sorted(args.sizes):
            target = make_target(bed.nodes[:size], "ssh", bed.ssh_config)
            times, answered = [], 0
            for _ in range(args.rounds):
                start = time.perf_counter()
                result = collect(target.transport, target.nodes, args.timeout)
                times.append(time.perf_counter() - start)
                answered = len(result.reports)
            best = min(times)
            per_node.append(best / size)
            print(f"{size:3d} nodes: {best:6.2f} s  ({best / size:.3f} s per node; {answered}/{size} answered; "
                  f"rounds {', '.join(f'{t:.2f}' for t in times)})")
    finally:
        down(state_dir)
    falling = all(later < earlier for earlier, later in zip(per_node, per_node[1:]))
    largest = max(args.sizes)
    print(f"time per node falls as nodes grow: {'yes' if falling else 'NO'}")
    print(f"goal: {largest} nodes under 15 s -> {'met' if per_node[-1] * largest < 15 else 'NOT met'}")


if __name__ == "__main__":
    main()
