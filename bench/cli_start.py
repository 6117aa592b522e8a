"""Time the start of the oddnode command: ``oddnode --help``, the
completion of a command name, and a command's own help.

Each runs as a user runs it: the ``oddnode`` script installed beside this
interpreter, a new process, its start included; best of a few rounds,
beside the interpreter starting with nothing to do, measured in the same
run: the ratio says what oddnode adds on this machine, however busy it is.

Goal: ``oddnode --help`` and a Tab of completion in 0.2 s or less.

    python bench/cli_start.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

GOAL_SECONDS = 0.2
# The script pip writes for [project.scripts]; completion finds the command by its name.
SCRIPT = str(Path(sys.executable).with_name("oddnode"))
COMPLETION = {"_ODDNODE_COMPLETE": "complete_bash", "COMP_WORDS": "oddnode ch", "COMP_CWORD": "1"}
ZSH_COMPLETION = {"_ODDNODE_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "oddnode ch"}
CASES = (
    ("python -c pass (the interpreter alone)", [sys.executable, "-c", "pass"], {}),
    ("oddnode --help", [SCRIPT, "--help"], {}),
    ("completion of 'oddnode ch' (bash)", [SCRIPT], COMPLETION),
    ("completion of 'oddnode ch' (zsh, with help)", [SCRIPT], ZSH_COMPLETION),
    ("oddnode check --help (loads its family)", [SCRIPT, "check", "--help"], {}),
)


def best_of(argv: list[str], env: dict[str, str], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       env={**os.environ, "COLUMNS": "80", **env})
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if not os.access(SCRIPT, os.X_OK):
        sys.exit(f"no oddnode script at {SCRIPT}: install oddnode into this interpreter's environment (make install)")
    seconds = {label: best_of(argv, env, args.rounds) for label, argv, env in CASES}
    reference = seconds[CASES[0][0]]
    for label, taken in seconds.items():
        print(f"{label:46s} {taken:6.3f} s   {taken / reference:5.1f}x the interpreter's start")
    for label in (CASES[1][0], CASES[2][0], CASES[3][0]):
        met = seconds[label] <= GOAL_SECONDS
        print(f"goal: {label} <= {GOAL_SECONDS} s -> {'met' if met else 'NOT met'} ({seconds[label]:.3f} s)")


if __name__ == "__main__":
    main()
