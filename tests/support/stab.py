"""stab-style plot files (value, node per line) of a GPU partition and a CPU one."""

from __future__ import annotations

import numpy as np

from support.cli import write


rng = np.random.default_rng(20)


GPU = [f"gpu{i:03d}" for i in range(3, 39)]  # gpu[003-038], 36 nodes


TRIAD = rng.normal(181_000.0, 900.0, len(GPU))


# The application tracks memory bandwidth on gpu[004-038] (gpu003 has no run).
LAMMPS = 0.002 * TRIAD[1:] + rng.normal(0.0, 0.4, len(GPU) - 1)


NOISE = rng.normal(50.0, 5.0, len(GPU))


RETRANSMITS = [0, 0, 1, 0, 2, 0, 0, 1, 0, 5]  # cn-a[11-20]


CN = [f"cn-a{i}" for i in range(11, 21)]


def plot_file(path, labels, values):
    return write(path, "".join(f"{float(value)!r} {label}\n" for label, value in zip(labels, values)))
