"""Measure our MPI collectives kernel against the Intel MPI Benchmarks, in one run.

Two ranks on this machine: our kernel's ``sendrecv`` (the periodic chain)
and ``allreduce`` (doubles, MPI_SUM) against IMB-MPI1's Sendrecv and
Allreduce at the same sizes, both started by the same ``mpirun`` line, over
Open MPI's shared memory (``shm``: what two ranks of one node use) and, when
asked (``--transports shm,tcp``), over its TCP transport on loopback
(``tcp``: what ranks on two nodes use).  Loopback TCP on a shared virtual
machine is no steady reference: within a minute IMB's own 1 MiB Sendrecv
took 250 us in one run and 1,170 us in the next, in spells of seconds, so a
run-by-run comparison there mostly tells which spell each run met.

What is compared.  IMB times one loop of repetitions per size and reports
t_max, the slowest rank's mean time per call over that loop.  Our kernel
times batches of back-to-back calls, at least 10 ms each, the same way -- a
batch's time per call is the slowest rank's mean over it -- and reports
the minimum and the median over its batches (at least 10).  An IMB loop is
thus one sample of what each of our batches is, and like is compared with
like: the median of IMB's t_max over ``--rounds`` runs of 5 loops each (a
benchmark named 5 times runs 5 times) against the median over the same
rounds of our median batch, the two programs alternating round by round.
IMB's loops are made about as long as our batches: at small sizes its
repetitions (``-iter``) are set from our time per call in the round before
(10 ms of calls, IMB's 1000 at the least); from 64 KiB up IMB's own cap of
40 MiB per loop gives 4-20 ms.  (On a shared machine a longer loop meets
more of the neighbours' work: IMB's default 1000 calls of 8 B last 0.2 ms,
fifty times shorter than a batch.)  Our minimum, the value oddnode stores
(the best batch), is printed beside for information: it is not comparable
with IMB's typical loop.

Rates.  Both count MB as 10^6 bytes: ours by definition, IMB's Mbytes/sec
in this version (``MEGA = 1/1e6`` in IMB_output.c; older IMB used 2^20).
The script reads IMB's unit from its own Sendrecv table (Mbytes/sec
against 2 x bytes / t_max) and converts to 10^6 if it is not.  Sendrecv's
rate counts 2 x bytes per call on both sides (each rank sends and
receives); IMB prints no rate for Allreduce, so both are bytes / time.

Method.  IMB's reduction runs on doubles here (``-red_data_type double``),
as ours.  IMB's Allreduce puts a barrier between calls and times each call
alone (its default ``-sync on``), timer reads included; ours times calls
back to back.  Buffers are reused by every call in both (IMB without
``-off_cache``).  The machine may be shared: each run waits (up to 20 s)
until the CPUs have been nearly idle for half a second, and runs again (3
runs at most) while other processes took more than 0.1 CPU during it (all
CPUs' busy time from /proc/stat less the run's own); the table says how
much the runs kept were disturbed.

Goals, for sendrecv and allreduce on each transport: bandwidth >= 0.95 x
IMB's at every size >= 64 KiB, time <= 1.1 x IMB's at 8 B.

Measured (2 shared cores of an AMD EPYC KVM guest, Open MPI 4.1.4, shm):
with 1 ms batches the kernel's median took 1.5-1.6 times IMB's time at
4 MiB (Sendrecv) and up to 2.7 times (Allreduce, 1 and 4 MiB); with 10 ms
batches and an untimed call before each, in the calmest run every time
ratio was 0.85-1.07 (bandwidth 0.94-1.04: all goals met but Sendrecv's
0.94 at 2 and 4 MiB).  With other users' processes taking up to a CPU,
as in most runs on that machine, the medians of either program moved by
up to 4 times from one run to the next, and ratios from 0.45 to 2.6 in
both directions met or missed the goals.
After the sizes' time became an upper bound (a size ends with the batch
under way once its time is spent), three runs on an idle 2-core guest
(Open MPI 4.1.4, shm, 0.1 s a size): times at 8 B 0.82-1.03 of IMB's
(met); Allreduce bandwidth 0.96-1.06 (met); Sendrecv bandwidth 0.94-1.06,
missing 0.95 at 128 or 256 KiB in each run (0.942-0.946; 0.869 once at
128 KiB), as the earlier runs missed it at 2 and 4 MiB.

IMB is built from its source (``--imb-source``, the reference copy in
/work/shared/refs by default) with Open MPI's compilers into the user's
cache directory, once; ``--imb PATH`` uses an IMB-MPI1 already built.
Every process started here is stopped by its process group id when it is
done or its time is up.

    python bench/mpi_kernels.py [--rounds 5] [--seconds-per-size 0.1] [--sizes 8,65536,...]
                                [--transports shm[,tcp]] [--imb PATH | --imb-source TARBALL]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from oddnode.measure.set.collectives import collectives_argv, parse_collectives_run, run_seconds
from oddnode.parsers import get_parser

BANDWIDTH_GOAL = 0.95  # ours >= 95% of IMB's rate at every size from BANDWIDTH_FROM
BANDWIDTH_FROM = 64 << 10
LATENCY_GOAL = 1.10  # ours <= 110% of IMB's time at LATENCY_SIZE
LATENCY_SIZE = 8
DEFAULT_SIZES = [LATENCY_SIZE] + [2**k for k in range(16, 23)]  # 8 B, then 64 KiB to 4 MiB
BENCHMARKS = {"sendrecv": "Sendrecv", "allreduce": "Allreduce"}  # ours -> IMB's
# Bytes a call's rate counts: each sendrecv rank sends and receives its message.
RATE_FACTOR = {"sendrecv": 2, "allreduce": 1}
TRANSPORTS = {"shm": "self,vader", "tcp": "self,tcp"}  # Open MPI 4's BTL names
IMB_SOURCE = Path("/work/shared/refs/intel-mpi-benchmarks.tar.gz")
# The build line of the reference's README: Open MPI's C++ bindings skipped,
# which IMB's -Werror refuses.
IMB_MAKE = ["make", "-C", "src_cpp", "-f", "Makefile", "TARGET=MPI1", "CXX=mpicxx", "CC=mpicc",
            "CPPFLAGS=-DOMPI_SKIP_MPICXX=1"]
IMB_BUILD_SECONDS = 600
T = TypeVar("T")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # /proc/stat's jiffies per second
# The bytes of a MB in IMB's Mbytes/sec, by version.
MB_UNITS = {"10^6": 1e6, "2^20": float(2**20)}
# Seconds a run may take beyond its own measuring time (mpirun's start and end).
SLACK = 60.0
# IMB's loop at small sizes is made about as long as our kernel's shortest
# batch (10 ms), at IMB's own 1000 repetitions at the least.
IMB_LOOP_SECONDS = 0.01
IMB_REPETITIONS = 1000
# IMB loops per size in each of its runs: one is a single sample, where our
# run gives at least 10 batches.
IMB_LOOPS = 5
# Each run waits, up to QUIET_WAIT seconds, until the CPUs were busy at most
# QUIET_BUSY of QUIET_SAMPLE seconds (other users' work on a shared machine),
# and is run again, up to TRIES times in all, while other processes took
# more than OTHERS_LIMIT CPUs on average during it.
QUIET_SAMPLE = 0.5
QUIET_BUSY = 0.15
QUIET_WAIT = 20.0
OTHERS_LIMIT = 0.1
TRIES = 3
# Open MPI refuses root unless told it may; nothing changes for other users.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def run_group(argv: list[str], timeout: float, env: dict[str, str] | None = None,
              cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """A command in its own process group, the group killed if it outlives ``timeout``."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{argv[0]} did not finish in {timeout:.0f} s") from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat: user,
    nice, system, idle, iowait, irq, softirq and steal (the time the
    hypervisor gave to other guests, busy too); guest time is in user."""
    with open("/proc/stat") as stat:
        fields = [int(field) for field in stat.readline().split()[1:9]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def own_cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (the
    node runner or mpirun, with what they waited for: the ranks)."""
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in used)


def undisturbed(run: Callable[[], T]) -> tuple[T, float]:
    """run(), again while other processes took more than OTHERS_LIMIT CPUs
    meanwhile (up to TRIES runs in all): the last run's result and the CPUs
    the others took during it."""
    for _ in range(TRIES):
        wait_for_quiet()
        busy, _ = cpu_times()
        own, started = own_cpu_seconds(), time.monotonic()
        result = run()
        # All CPUs' busy time less ours: what the other processes took.
        others = (cpu_times()[0] - busy) / CLOCK_TICKS - (own_cpu_seconds() - own)
        share = max(0.0, others) / (time.monotonic() - started)
        if share <= OTHERS_LIMIT:
            break
    return result, share


def wait_for_quiet() -> None:
    """Wait until the CPUs were busy at most QUIET_BUSY of a QUIET_SAMPLE,
    or QUIET_WAIT seconds have passed."""
    deadline = time.monotonic() + QUIET_WAIT
    while time.monotonic() < deadline:
        busy, total = cpu_times()
        time.sleep(QUIET_SAMPLE)
        busy_after, total_after = cpu_times()
        if busy_after - busy <= QUIET_BUSY * (total_after - total):
            return


def launcher(btl: str) -> list[str]:
    """Two ranks on this machine, on the BTL given; the same for both programs."""
    return ["mpirun", "-np", "2", "--host", "localhost:2", "--mca", "btl", btl]


# --- IMB ---------------------------------------------------------------------------


def build_imb(source: Path) -> Path:
    """IMB-MPI1 built from ``source`` (a tarball) in the user's cache
    directory, under the tarball's hash: built once, then reused."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oddnode-bench" / f"imb-{digest}"
    binary = cache / "IMB-MPI1"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    print(f"building IMB-MPI1 from {source} into {cache} (about a minute)", flush=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        unpacked = run_group(["tar", "-xzf", str(source), "-C", tmp], IMB_BUILD_SECONDS)
        if unpacked.returncode != 0:
            raise SystemExit(f"cannot unpack {source}: {unpacked.stderr.strip()[-300:]}")
        top = next(path.parent for path in Path(tmp).rglob("src_cpp") if path.is_dir())
        built = run_group(IMB_MAKE, IMB_BUILD_SECONDS, cwd=top)
        if built.returncode != 0:
            raise SystemExit(f"building IMB failed (status {built.returncode}): {built.stderr.strip()[-800:]}")
        # Renamed into place, so that an interrupted build never leaves half a binary.
        os.replace(top / "src_cpp" / "IMB-MPI1", binary)
    return binary


def imb_repetitions(ours: dict[tuple[str, int], tuple[float, float]]) -> int:
    """IMB's repetitions per loop (-iter) for a loop about as long as our
    batches at the smallest size, from our median time per call there; IMB's
    own 1000 at the least.  Larger sizes keep IMB's cap of 40 MiB per loop."""
    per_call = min(median for (benchmark, _), (_, median) in ours.items() if benchmark == "sendrecv")
    return max(IMB_REPETITIONS, round(IMB_LOOP_SECONDS / (1e-6 * per_call)))


def imb_run(imb: Path, sizes: list[int], btl: str, repetitions: int, loops: int,
            env: dict[str, str]) -> tuple[dict[tuple[str, int], list[float]], str]:
    """(benchmark, bytes) -> IMB's time per call in us of each of ``loops``
    loops (IMB runs a benchmark again when it is named again), read by oddnode's IMB
    parser, and the MB its rates count.  IMB prints t_max with 2 decimals
    (0.24 us at 8 B is +-2%); Sendrecv's time is taken from its rate (4
    significant digits and more), which IMB computes from the unrounded
    t_max."""
    argv = launcher(btl) + [str(imb), *list(BENCHMARKS.values()) * loops, "-msgsize", ",".join(map(str, sizes)),
                            "-red_data_type", "double", "-iter", str(repetitions)]
    done = run_group(argv, SLACK + 10 * loops * len(sizes), env)
    parsed = get_parser("imb")(done.stdout, "IMB-MPI1")
    if done.returncode != 0 or not parsed.valid:
        raise SystemExit(f"IMB-MPI1 failed (status {done.returncode}): {parsed.problems or done.stderr[-500:]}")
    values: dict[tuple[str, str], list[float]] = {}
    for m in parsed.measurements:  # in the order IMB printed them
        values.setdefault((m.benchmark, m.metric), []).append(m.value)
    times = {(ours, size): values[f"imb.{theirs.lower()}.np2", f"t_max.{size}"]
             for ours, theirs in BENCHMARKS.items() for size in sizes}
    rates = {size: values["imb.sendrecv.np2", f"bandwidth.{size}"] for size in sizes if size > 0}
    # Sendrecv's rate is 2 * bytes / t_max in IMB's MB per second: its largest
    # size (t_max with 5 or more digits) tells 10^6 from 2^20.
    largest = max(rates)
    seen = 2 * largest / times["sendrecv", largest][0] / rates[largest][0]
    unit = min(MB_UNITS, key=lambda name: abs(seen * 1e6 / MB_UNITS[name] - 1))
    if abs(seen * 1e6 / MB_UNITS[unit] - 1) > 0.01:
        raise SystemExit(f"IMB's Sendrecv Mbytes/sec is neither 10^6 nor 2^20 bytes: 2*bytes/t_max/rate = {seen:.4f}")
    for size, loop_rates in rates.items():
        times["sendrecv", size] = [2 * size / (rate * MB_UNITS[unit] / 1e6) for rate in loop_rates]
    return times, unit


# --- ours ---------------------------------------------------------------------------


def our_run(sizes: list[int], seconds: float, btl: str,
            env: dict[str, str]) -> dict[tuple[str, int], tuple[float, float]]:
    """(benchmark, bytes) -> (min, median) us per call, through the node runner as oddnode runs it."""
    argv = collectives_argv(["rank0", "rank1"], list(BENCHMARKS), sizes, seconds, launcher=launcher(btl))
    done = run_group([sys.executable] + argv[1:], SLACK + run_seconds(list(BENCHMARKS), sizes, seconds), env)
    parsed = parse_collectives_run(done.stdout, "ours")
    if not parsed.valid:
        raise SystemExit(f"our kernel failed its check: {parsed.problems}")
    return {(m.benchmark, m.parameters["bytes"]): (m.value, m.parameters["median_us"])
            for m in parsed.measurements if m.metric.startswith("time.")}


# --- main ---------------------------------------------------------------------------


def verdict(passed: bool) -> str:
    return "PASS" if passed else "FAIL"


def compare(name: str, btl: str, sizes: list[int], rounds: int, seconds: float, imb: Path,
            env: dict[str, str]) -> list[tuple[str, bool]]:
    """Alternating rounds of ours and IMB on one transport; the table and its goals."""
    ours: list[dict[tuple[str, int], tuple[float, float]]] = []
    theirs: list[dict[tuple[str, int], list[float]]] = []
    units: set[str] = set()
    repetitions: list[int] = []
    disturbed: list[float] = []  # CPUs other processes took during each run kept
    for round_number in range(rounds):
        # Who goes first alternates, so that neither always follows the other;
        # ours first in round 0, to size IMB's loops.
        for program in ("ours", "imb") if round_number % 2 == 0 else ("imb", "ours"):
            if program == "ours":
                result, others = undisturbed(lambda: our_run(sizes, seconds, btl, env))
                ours.append(result)
            else:
                repetitions.append(imb_repetitions(ours[-1]))
                (times, unit), others = undisturbed(
                    lambda: imb_run(imb, sizes, btl, repetitions[-1], IMB_LOOPS, env))
                theirs.append(times)
                units.add(unit)
            disturbed.append(others)
    print(f"transport {name} (--mca btl {btl}), 2 ranks, medians of {rounds} alternating rounds of ours and of "
          f"{IMB_LOOPS} IMB loops (IMB -iter {min(repetitions)}-{max(repetitions)}, its MB "
          f"{' and '.join(sorted(units))} bytes); other processes took {min(disturbed):.2f}-{max(disturbed):.2f} "
          f"CPUs during the runs kept, {sum(d > OTHERS_LIMIT for d in disturbed)} of {2 * rounds} over "
          f"{OTHERS_LIMIT:g} after {TRIES} tries")
    goals = []
    for benchmark in BENCHMARKS:
        factor = RATE_FACTOR[benchmark]
        print(f"  {benchmark:<9} {'bytes':>8} {'ours min':>10} {'ours med':>10} {'IMB t_max':>10} {'ratio':>6}"
              f" {'ours MB/s':>10} {'IMB MB/s':>10} {'ratio':>6}   (times in us, MB = 10^6 B)")
        lowest: tuple[float, int] | None = None
        for size in sizes:
            low = statistics.median(run[benchmark, size][0] for run in ours)
            mine = statistics.median(run[benchmark, size][1] for run in ours)
            reference = statistics.median(loop for run in theirs for loop in run[benchmark, size])
            line = f"  {'':<9} {size:>8} {low:>10.3f} {mine:>10.3f} {reference:>10.2f} {mine / reference:>6.3f}"
            # 10^6-byte MB/s = bytes per microsecond.
            rate, reference_rate = factor * size / mine, factor * size / reference
            line += f" {rate:>10.1f} {reference_rate:>10.1f} {rate / reference_rate:>6.3f}"
            print(line)
            if size == LATENCY_SIZE:
                passed = mine / reference <= LATENCY_GOAL
                goals.append((f"{name}: {benchmark} time <= {LATENCY_GOAL:g} x IMB's at {size} B "
                              f"(ratio {mine / reference:.3f})", passed))
            if size >= BANDWIDTH_FROM and (lowest is None or rate / reference_rate < lowest[0]):
                lowest = (rate / reference_rate, size)
        if lowest is not None:
            goals.append((f"{name}: {benchmark} bandwidth >= {BANDWIDTH_GOAL:g} x IMB's at every size >= "
                          f"{BANDWIDTH_FROM >> 10} KiB (lowest {lowest[0]:.3f}, at {lowest[1]} B)",
                          lowest[0] >= BANDWIDTH_GOAL))
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating runs of each; medians count")
    parser.add_argument("--seconds-per-size", type=float, default=0.1, help="our kernel's time per size")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="message sizes in bytes")
    parser.add_argument("--transports", default="shm", help="shm (shared memory) and/or tcp (loopback)")
    parser.add_argument("--imb", type=Path, help="an IMB-MPI1 already built (else built from --imb-source)")
    parser.add_argument("--imb-source", type=Path, default=IMB_SOURCE, help="IMB's source tarball")
    args = parser.parse_args()
    sizes = sorted({int(size) for size in args.sizes.split(",")})
    names = args.transports.split(",")
    unknown = [name for name in names if name not in TRANSPORTS]
    if unknown:
        raise SystemExit(f"unknown transport {unknown[0]!r}: {' or '.join(TRANSPORTS)}")
    missing = [tool for tool in ("mpicc", "mpicxx", "mpirun") if shutil.which(tool) is None]
    if missing:
        print(f"no {', '.join(missing)} on PATH (Debian: openmpi-bin, libopenmpi-dev): nothing measured")
        return
    if args.imb is None and not args.imb_source.exists():
        print(f"no IMB source at {args.imb_source} and no --imb: nothing measured")
        return
    imb = args.imb or build_imb(args.imb_source)

    print(f"ours: mpi_collectives via the node runner, {args.seconds_per_size:g} s per size; IMB: {imb} "
          f"{' '.join(BENCHMARKS.values())} -msgsize LIST -red_data_type double; CPUs "
          f"{sorted(os.sched_getaffinity(0))}")
    goals: list[tuple[str, bool]] = []
    with tempfile.TemporaryDirectory(prefix="oddnode-bench-") as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"), **MPI_ENV)
        for name in names:
            goals += compare(name, TRANSPORTS[name], sizes, args.rounds, args.seconds_per_size, imb, env)
    for text, passed in goals:
        print(f"goal ({text}): {verdict(passed)}")


if __name__ == "__main__":
    main()
