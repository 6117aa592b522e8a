"""Measure our memory kernel's triad, bound to one NUMA node, against
McCalpin's stream.c bound the same way, in one run.

Both use the same CPUs and the same memory: ours through its own binding
(``-C NODE -M NODE``: one thread pinned to each CPU of the node this
process may use, arrays bound with mbind before the first touch); STREAM
(built here with the same array length, iteration count and flags) under
OMP_PLACES with one place per such CPU and OMP_PROC_BIND=close, started
through a small wrapper that sets MPOL_BIND on the node with set_mempolicy
before it execs STREAM (the policy survives the exec, so every page STREAM
touches comes from that node).  Each program runs ``--rounds`` times,
alternating with the other, and its best round counts (see
bench/memory_kernel.py, whose STREAM build and parser this reuses).

Goal: our bound local-NUMA triad >= 95% of STREAM's.

    python bench/numa_kernel.py [--reference stream.c] [--node 0] [--elements N] [--ntimes 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_kernel import GOAL, _stream_triad, build_stream  # noqa: E402

from oddnode.reach.jobs import parse_runner_output  # noqa: E402
from oddnode.measure.node.memory import (
    default_elements,
    last_level_cache_bytes,
    memory_kernel_argv,
    parse_memory_output,
)
from oddnode.measure.node.numa import parse_cpu_list  # noqa: E402

# The reference copy beside the repository (the run says so when it is missing).
STREAM_SOURCE = Path("/work/shared/refs/stream.c")

# set_mempolicy(MPOL_BIND, {node}) then exec: what numactl --membind does,
# in a dozen lines, so that the bench needs no numactl.
WRAPPER = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    unsigned long mask[16] = {0};
    int node = atoi(argv[1]);
    mask[node / 64] = 1UL << (node % 64);
    if (argc < 3 || syscall(SYS_set_mempolicy, 2 /* MPOL_BIND */, mask, 1025UL) != 0) {
        fprintf(stderr, "membind: set_mempolicy: %s\n", strerror(errno));
        return 4;
    }
    execv(argv[2], argv + 2);
    fprintf(stderr, "membind: exec %s: %s\n", argv[2], strerror(errno));
    return 127;
}
"""


def node_cpus(node: int) -> list[int]:
    """The CPUs of NUMA node ``node`` this process may use (every allowed CPU
    for node 0 on a kernel without NUMA)."""
    allowed = os.sched_getaffinity(0)
    path = Path(f"/sys/devices/system/node/node{node}/cpulist")
    if not path.exists():
        if node != 0 or Path("/sys/devices/system/node/online").exists():
            raise SystemExit(f"no NUMA node {node} on this machine")
        return sorted(allowed)
    cpus = [cpu for cpu in parse_cpu_list(path.read_text(), str(path)) if cpu in allowed]
    if not cpus:
        raise SystemExit(f"NUMA node {node} has no CPU this process may use")
    return cpus


def our_bound_triad(elements: int, ntimes: int, node: int, env: dict[str, str]) -> tuple[float, str]:
    """(best triad MB/s, the CPUs it was bound to) of our kernel on ``node``."""
    argv = [sys.executable] + memory_kernel_argv(elements, ntimes, proc_bind=None, cpu_node=node,
                                                 mem_node=node)[1:]
    completed = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    report = parse_runner_output("localhost", completed.stdout)
    if report.returncode != 0:
        raise SystemExit(f"our kernel exited with {report.returncode}: {report.stderr.strip()}")
    parsed = parse_memory_output(report.stdout, "localhost")
    if not parsed.valid:
        raise SystemExit(f"our kernel's run is invalid: {parsed.problems}")
    triad = next(m for m in parsed.measurements if m.benchmark == "memory.triad")
    return triad.value, str(parsed.configuration.get("bound_cpus"))


def stream_bound_triad(executable: Path, wrapper: Path, node: int, cpus: list[int], env: dict[str, str]) -> float:
    """STREAM's best triad MB/s, one thread per CPU of the node, each on its
    own CPU, its memory bound to the node."""
    run_env = dict(env, OMP_NUM_THREADS=str(len(cpus)), OMP_PROC_BIND="close",
                   OMP_PLACES=",".join(f"{{{cpu}}}" for cpu in cpus))
    completed = subprocess.run([str(wrapper), str(node), str(executable)], capture_output=True, text=True,
                               env=run_env, check=True, preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    return _stream_triad(completed.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=STREAM_SOURCE, help="path to stream.c")
    parser.add_argument("--node", type=int, default=0, help="the NUMA node of the threads and the memory")
    parser.add_argument("--elements", type=int, help="doubles per array (default: >= 4x the LLC)")
    parser.add_argument("--ntimes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each; the best counts")
    args = parser.parse_args()
    if not args.reference.exists():
        print(f"no stream.c at {args.reference}: give --reference PATH; nothing measured")
        return

    cpus = node_cpus(args.node)
    llc = last_level_cache_bytes()
    elements = args.elements or default_elements(llc)
    print(f"NUMA node {args.node}: CPUs {','.join(map(str, cpus))}; last-level cache {llc / 2**20:.1f} MiB; "
          f"{elements} elements ({elements * 8 / 1e6:.1f} MB per array), ntimes {args.ntimes}, "
          f"best of {args.rounds} rounds")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    with tempfile.TemporaryDirectory(prefix="oddnode-bench-") as tmp:
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        stream_exe = build_stream(args.reference, elements, args.ntimes, Path(tmp))
        wrapper = Path(tmp) / "membind"
        (Path(tmp) / "membind.c").write_text(WRAPPER)
        subprocess.run(["cc", "-O2", "-o", str(wrapper), str(Path(tmp) / "membind.c")], check=True)
        ours = reference = 0.0
        bound = ""
        for _ in range(args.rounds):
            rate, bound = our_bound_triad(elements, args.ntimes, args.node, env)
            ours = max(ours, rate)
            reference = max(reference, stream_bound_triad(stream_exe, wrapper, args.node, cpus, env))
    ratio = ours / reference
    print(f"bound to NUMA node {args.node} (ours on CPUs {bound}, {len(cpus)} threads each): "
          f"ours {ours:10.1f} MB/s   stream.c {reference:10.1f} MB/s   ratio {ratio:.3f}")
    print(f"goal (ours >= {GOAL:.0%} of the bound STREAM triad): {'met' if ratio >= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
