"""Time the health program ``oddnode health --install`` writes: its start
(``--help``) and a whole check of this machine's facts and address (the
memory kernel left out: its seconds are the kernel's), each as slurmd runs
it (a new process, the interpreter's start included), best of a few
rounds, beside the interpreter starting with nothing to do, measured in the
same run.

Goal: the program starts in under 0.5 s.

    python bench/health_program.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 0.5


def best_of(argv: list[str], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    python3 = shutil.which("python3") or sys.executable
    with tempfile.TemporaryDirectory() as directory:
        site = Path(directory, "site.yaml")
        site.write_text(f"arch: {platform.machine()}\ncpu_threads: {{min: 1}}\n")
        subprocess.run([sys.executable, "-m", "oddnode", "health", "--install", directory, "--expect", str(site),
                        "--benchmarks", "never", "--log", "none"], check=True, stdout=subprocess.DEVNULL)
        program = str(Path(directory, "oddnode-health"))
        cases = {
            f"{python3} -c pass (the interpreter alone)": [python3, "-c", "pass"],
            "oddnode-health --help (its start)": [program, "--help"],
            "oddnode-health (facts and address)": [program, "--node", "localhost"],
        }
        seconds = {label: best_of(argv, args.rounds) for label, argv in cases.items()}
    reference = next(iter(seconds.values()))
    for label, taken in seconds.items():
        print(f"{label:50s} {taken:6.3f} s   {taken / reference:5.1f}x the interpreter's start")
    start = seconds["oddnode-health --help (its start)"]
    print(f"goal: the program starts in < {GOAL_SECONDS} s -> {'met' if start < GOAL_SECONDS else 'NOT met'} "
          f"({start:.3f} s)")


if __name__ == "__main__":
    main()
