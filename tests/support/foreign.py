"""Foreign-looking cluster results: what a site's own scripts write, not oddnode.

A results directory in STAB's layout but with everything a site chooses for
itself: its node naming (``cn-0001``, ``r01n01``, ``gpu001``, unpadded
``node1``), its benchmark names and unit spellings (``GBytes/s``, ``Gflops``,
``sec``), its inventory key names and spellings (``MemTotal``, ``BIOS Release
Date``), natural jitter in numeric facts (MemTotal a few MB apart, CPU MHz
and bogomips that never repeat), extra columns, tabs, comments and blank
lines in plot files, and a node list (``nodes``) holding nodes that left
nothing else.  Faults are planted on demand and returned as ground truth:
(kind, subject, folded nodes) of every warning or error the analysis must
give, and nothing else.

Independent of ``oddnode synth`` on purpose: a rule that only works on our
own names and shapes fails here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from oddnode.core.nodes import fold


SCHEMES = ("cn", "rack", "gpu", "unpadded")
FAULTS = ("less-memory", "old-bios", "fewer-cores", "slow-memory", "dead-disk", "never-booted")

# Node benchmarks: plot file name, unit as the site spells it, direction,
# healthy mean and coefficient of variation across nodes.
BENCHMARKS = (
    ("stream_triad", "GBytes/s", "higher", 182.0, 0.012),
    ("dgemm_1node", "Gflops", "higher", 2890.0, 0.008),
    ("scratch_read", "MB/sec", "higher", 1210.0, 0.035),
    ("hpl_walltime", "sec", "lower", 412.0, 0.006),
)
PAIR_BENCHMARK = ("osu_bw_4M", "MB/s", "higher", 11800.0, 0.01)

MEMTOTAL_KB = 263_742_000  # 256 GiB less the kernel's reservations


@dataclass
class ForeignCluster:
    directory: Path
    nodes: list[str]  # the declared node list, in the site's order
    truth: set[tuple[str, str, str]] = field(default_factory=set)  # (kind, subject, nodes)


def node_names(scheme: str, n: int) -> list[str]:
    """n node names in one of the sites' schemes, in list order."""
    if scheme == "cn":
        return [f"cn-{i:04d}" for i in range(1, n + 1)]
    if scheme == "rack":
        return [f"r{i // 16 + 1:02d}n{i % 16 + 1:02d}" for i in range(n)]
    if scheme == "gpu":
        return [f"gpu{i:03d}" for i in range(1, n + 1)]
    if scheme == "unpadded":
        return [f"node{i}" for i in range(1, n + 1)]
    raise ValueError(f"unknown naming scheme {scheme!r}")


def _plot_file(path: Path, rows: list[tuple[float, str]], rng: np.random.Generator, title: str) -> None:
    """Value first, label second, as STAB's plot files, with a site's extras:
    a header comment, tabs or runs of spaces, a job id and a date column,
    and blank lines."""
    lines = [f"# {title}", "# value  host  jobid  date"]
    for number, (value, label) in enumerate(rows):
        separator = "\t" if number % 3 == 0 else "   "
        lines.append(f"{value:.3f}{separator}{label}{separator}{1_000_000 + number} 2026-11-0{number % 9 + 1}")
        if number % 17 == 5:
            lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _inventory(nodes: list[str], rng: np.random.Generator) -> dict[str, dict[str, str]]:
    """Facts in the site's spellings: key -> node -> value."""
    n = len(nodes)
    # MemTotal differs by a few MB between identical nodes, in many distinct values.
    memtotal = MEMTOTAL_KB + rng.integers(-2_500, 2_500, n) * 4
    facts = {
        "MemTotal": [str(v) for v in memtotal],
        "Mem Total (GiB)": [f"{v / 2**20:.2f}" for v in memtotal],
        "cpu MHz": [f"{v:.3f}" for v in rng.uniform(1_500, 3_700, n)],
        "bogomips": [f"{v:.2f}" for v in 4_990.0 + rng.normal(0, 0.05, n)],
        "Cores": ["64"] * n,
        "Sockets": ["2"] * n,
        "MTU ib0": ["4092"] * n,
        "BIOS Version": ["2.14.1"] * n,
        "BIOS Release Date": ["03/15/2024"] * n,
        "Kernel": ["5.14.0-362.8.1.el9_3.x86_64"] * n,
        "CPU Model": ["AMD EPYC 7763 64-Core Processor"] * n,
    }
    return {key: dict(zip(nodes, values)) for key, values in facts.items()}


def write_foreign_cluster(directory: Path, scheme: str, n: int, seed: int,
                          faults: tuple[str, ...] = ()) -> ForeignCluster:
    """A results directory of n nodes with the given faults planted."""
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}")
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    nodes = node_names(scheme, n)
    cluster = ForeignCluster(directory, nodes)
    # Faulty nodes, distinct, drawn away from the list's ends.
    chosen = iter(rng.permutation(np.arange(1, n - 1))[: len(faults)].tolist())
    faulty = {fault: nodes[next(chosen)] for fault in faults}
    silent = {faulty["never-booted"]} if "never-booted" in faulty else set()
    present = [node for node in nodes if node not in silent]

    facts = _inventory(present, rng)
    if "less-memory" in faulty:
        node = faulty["less-memory"]
        for key in ("MemTotal", "Mem Total (GiB)"):
            quarter_less = float(facts[key][node]) * 0.75
            facts[key][node] = str(int(quarter_less)) if key == "MemTotal" else f"{quarter_less:.2f}"
            cluster.truth.add(("inconsistent-fact", key, node))
    if "old-bios" in faulty:
        node = faulty["old-bios"]
        facts["BIOS Version"][node], facts["BIOS Release Date"][node] = "1.9.0", "11/02/2021"
        cluster.truth |= {("inconsistent-fact", "BIOS Version", node),
                          ("inconsistent-fact", "BIOS Release Date", node)}
    if "fewer-cores" in faulty:
        node = faulty["fewer-cores"]
        facts["Cores"][node] = "62"
        cluster.truth.add(("inconsistent-fact", "Cores", node))
    lines = ["node,key,value"] + [f"{node},{key},{value}" for key, per_node in facts.items()
                                   for node, value in per_node.items()]
    (directory / "inventory.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")

    units = ["benchmark,unit,direction"]
    for name, unit, direction, mean, cv in BENCHMARKS:
        values = rng.normal(mean, cv * mean, len(present))
        if name == "stream_triad" and "slow-memory" in faulty:
            values[present.index(faulty["slow-memory"])] *= 0.6
            cluster.truth.add(("outlier", name, faulty["slow-memory"]))
        if name == "scratch_read" and "dead-disk" in faulty:
            values[present.index(faulty["dead-disk"])] /= 30
            cluster.truth.add(("outlier", name, faulty["dead-disk"]))
        _plot_file(directory / f"plot.{name}", list(zip(values.tolist(), present)), rng, name)
        units.append(f"{name},{unit},{direction}")
    name, unit, direction, mean, cv = PAIR_BENCHMARK
    pairs = [(present[i], present[i + 1]) for i in range(0, len(present) - 1, 2)]
    values = rng.normal(mean, cv * mean, len(pairs))
    _plot_file(directory / f"plot.{name}", [(v, f"{a}-{b}") for v, (a, b) in zip(values.tolist(), pairs)],
               rng, "osu_bw, 4 MiB messages, sort pairs")
    units.append(f"{name},{unit},{direction}")
    (directory / "units.csv").write_text("\n".join(units) + "\n", encoding="utf-8")

    # The node list as the site keeps it: ranges where they fold, comments.
    (directory / "nodes").write_text(f"# compute partition\n{fold(nodes)}\n", encoding="utf-8")
    if silent:
        cluster.truth.add(("missing", "", fold(silent)))
    return cluster
