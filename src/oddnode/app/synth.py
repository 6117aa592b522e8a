"""Synthetic cluster datasets with planted faults and their ground truth.

``generate`` writes a directory in oddnode's STAB import format (``plot.*``,
``units.csv``, ``inventory.csv``, ``topology.csv``, ``failed``) that imitates
the 484-blade IBM JS20 case study of the STAB toolkit: STREAM, NPB serial
class B, HPL on one node, and Myrinet and GigE ping-pong over four pair
patterns, with the case study's means and spreads.  ``truth.json`` beside the
files lists the findings a correct analysis must make, and no other finding
is expected.  ``faults=False`` writes the same cluster with every node
healthy: the control for false alarms.

Every node's value is its best run, drawn directly from a normal distribution
bounded at ±3.5σ (no heavy tails, so a healthy population has no outlier).
Fault nodes are chosen by position so that any node count from 32 works; the
default 484 reproduces the case study's node names.  Positions below are for
N = 484; for other N each scales as round(k·N/484), the accuracy node is
always node N−1, the bad chassis always chassis 2 (14 blades a chassis).  A
fault that would land on a node already taken, in the fast group or on the
last node moves to the nearest free node; the weak Myrinet card also keeps
out of bc02 and out of every pair with it (a shuffle that would pair them
swaps the partner), so that each low pair has one cause.  (The statistics need enough nodes to see some faults: a second mode
of 17% of the nodes, or a skew of 0.8, is hard to prove on a hundred nodes.)

=====  =======================================  ==============================================
fault  planted cause                            expected finding (kind, severity, subject: nodes)
=====  =======================================  ==============================================
1      node[001-084] (first ~17%) run a second  ``bimodal`` warning, one per STREAM series
       memory configuration: STREAM 4.5%        (``c.ppc64``, ``c_omp.ppc64``, ``f.ppc64``):
       faster (10σ of the within-mode noise)    node[001-084]
2      node100 runs a competing process:        ``outlier`` warning (side low), one per series
       15% slow in ep.B and bt.B only           (``bt.B.ppc64``, ``ep.B.ppc64``): node100
3      node483 gives wrong answers: failed      ``accuracy`` error, series bt.B, c_omp, ft.B,
       runs xhpl 1-10, bt.B 1-5, ft.B 1-4,      sp.B, xhpl: node483
       sp.B 1-3, c_omp 3; no line in
       plot.xhpl.ppc64 (every run failed)
4      node215 did not boot for HPL, node224    ``missing`` warning, ``xhpl.ppc64``:
       has too little memory for its problem    node[215,224]
       size: both absent from plot.xhpl only
5      node443 has BIOS 09/02/2004 (others      ``inconsistent-fact`` warning, ``bios_date``:
       10/21/2004); node224 has 1460116 kB      node443; and ``memory_total_kb``: node224
       of memory (others 1977208 kB)
6      node406 has a weak Myrinet card: each    ``weak-pair-member`` warning, the four
       of its pairs ~87 MB/s instead of ~233    ``spp.*.bw.4194304`` series: node406
7      chassis bc02 (node[015-028]) has a bad   ``weak-group`` warning, the ip cut/fold/shuffle
       GigE uplink: pairs with exactly one      series, evidence group bc02: node[015-028]
       member in bc02 get 46-71 MB/s
8      cg.B is right-skewed (skew-normal,       ``skewed`` info, ``cg.B.ppc64``: no nodes
       shape 6, upper tail bounded)
=====  =======================================  ==============================================

Plot files list the best run of each node as STAB's anal scripts do; the
accuracy check is separate (``failed``), so node483 keeps its NPB and STREAM
lines beside its failed runs.  Its HPL runs all failed, so it has no HPL
line: there the absence is explained by the failures (accuracy, not missing).

Pair patterns (node i at position i, M = N rounded down to even; with N odd
the last node sits out of every pattern): sort pairs 1-2, 3-4, …; cut pairs
i with i+M/2; fold pairs i with M+1−i; shuffle pairs a seeded random
permutation two by two (one shuffle per network).  Sort pairs never leave a
chassis; the other patterns mostly cross the GigE core switch, hence their
lower healthy GigE bandwidth (~88.5 against ~100 MB/s), which every pair of
those patterns gets so that a healthy cluster stays one bell per series.
Myrinet latency (``spp.sort.lat.0``, us, lower is better) carries no fault.

``python -m oddnode.app.synth --check DIR [--db STORE]`` judges DIR (or the store
it was imported into) and compares the findings with DIR/truth.json.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oddnode import __version__
from oddnode.core.inputs import load_json
from oddnode.store.stab import FAILED_FILE, INVENTORY_FILE, PLOT_PREFIX, TOPOLOGY_FILE, UNITS_FILE
from oddnode.core.model import Finding
from oddnode.core.nodes import NodeNameError, expand, fold

GENERATOR = "oddnode.app.synth"
TRUTH_FORMAT = 1
TRUTH_FILE = "truth.json"

CASE_STUDY_NODES = 484
MIN_NODES = 32
MAX_NODES = 99999  # node%05d is the widest name
DEFAULT_SEED = 2005  # the case study's year: any fixed seed makes the dataset reproducible
ARCH = "ppc64"
# JS20 blades per BladeCenter chassis; each chassis has its own GigE switch.
CHASSIS_SIZE = 14
BAD_CHASSIS = 2
MESSAGE_BYTES = 4194304

# Healthy noise is a normal bounded at ±3.5σ: unbounded, 484 nodes times two
# dozen series would put a few values past 3.5σ by chance, and real best-of-N
# runs have no such tails.  Bounding at 3.5σ leaves the bell's shape intact
# (excess kurtosis -0.07) and keeps every healthy value well inside any
# outlier threshold calibrated for hundreds of nodes (≥ 4.5 for 100 nodes).
NOISE_BOUND_SIGMA = 3.5

# Fault 1: share of nodes in the second memory configuration (84 of 484) and
# how much faster STREAM runs there (4.5% = 10σ of the 0.45% within-mode noise).
FAST_MODE_SHARE = 84 / CASE_STUDY_NODES
FAST_MODE_GAIN = 1.045
# Fault 2: a competing process takes 15% of one CPU.
COMPETING_FACTOR = 0.85
# Fault 6: the weak Myrinet card's bandwidth (case study: 87.13-87.62 MB/s).
WEAK_CARD_MBS = (87.4, 0.15)
# Fault 7: pairs crossing bc02's bad uplink (case study: 45.5-72.3 MB/s).
BAD_UPLINK_MBS = (46.0, 71.0)
# Fault 8: skew-normal shape, and where its upper tail is cut, in robust σ
# (1.4826·MAD) above the median: skewness stays ≈ 0.8 while the longest
# value stays short of the outlier thresholds.
SKEW_SHAPE = 6.0
SKEW_UPPER_BOUND = 4.0

# Case-study node numbers of the single-node faults (scaled by position).
CASE_COMPETING = 100
CASE_UNBOOTED = 215
CASE_SMALL_MEMORY = 224
CASE_WEAK_CARD = 406
CASE_OLD_BIOS = 443

HEALTHY_FACTS = {
    "bios_date": "10/21/2004",
    "cpu_model": "PPC970FX",
    "cpus": "2",
    "kernel": "2.6.5-7.191-pseries64",
    "memory_total_kb": "1977208",
    "os": "SLES 9",
}
OLD_BIOS_DATE = "09/02/2004"
SMALL_MEMORY_KB = "1460116"

# Runs of node483 that fail their accuracy check (case study slides 53-70).
INACCURATE_RUNS = {
    "c_omp": (3,),
    "bt.B": (1, 2, 3, 4, 5),
    "ft.B": (1, 2, 3, 4),
    "sp.B": (1, 2, 3),
    "xhpl": tuple(range(1, 11)),
}


class SynthError(ValueError):
    """A dataset that cannot be written, or a truth file that cannot be read."""


@dataclass(frozen=True)
class NodeBenchmark:
    """A single-node benchmark: healthy nodes' best runs ~ mean ± std."""

    name: str  # without the arch suffix
    title: str
    unit: str
    mean: float
    std: float
    runs: int
    direction: str = "higher"

    @property
    def benchmark(self) -> str:
        return f"{self.name}.{ARCH}"


@dataclass(frozen=True)
class PairBenchmark:
    """A ping-pong series over one pair pattern."""

    network: str  # spp: Myrinet (MPI over GM); ip: GigE (MPI over TCP)
    pattern: str  # sort, cut, fold or shuffle
    metric: str  # bw or lat
    size: int  # message bytes
    unit: str
    mean: float
    std: float
    direction: str = "higher"

    @property
    def benchmark(self) -> str:
        return f"{self.network}.{self.pattern}.{self.metric}.{self.size}"


# STREAM: the case study's means less the fast mode's pull (~0.8%), with a
# within-mode spread of 0.45%: the case study's lowest values sit 1.4% under
# the main mode.  Its overall std (~23 MB/s) cannot be kept with a 4.5% gap
# on 17% of the nodes; here it comes out near 36 MB/s.
STREAM = (
    NodeBenchmark("c", "STREAM memory bandwidth (C, one thread)", "MB/s", 2060.0, 9.3, 10),
    NodeBenchmark("c_omp", "STREAM memory bandwidth (C, OpenMP, two threads)", "MB/s", 2035.0, 9.2, 10),
    NodeBenchmark("f", "STREAM memory bandwidth (Fortran, one thread)", "MB/s", 2024.0, 9.1, 10),
)
# NPB 3.2 serial class B (case study slide 57: mean and std of 484 nodes).
NPB_SERIAL = (
    NodeBenchmark("bt.B", "NPB serial BT class B", "Mop/s", 1087.60, 4.67, 5),
    NodeBenchmark("cg.B", "NPB serial CG class B", "Mop/s", 41.94, 1.31, 5),
    NodeBenchmark("ep.B", "NPB serial EP class B", "Mop/s", 9.96, 0.04, 5),
    NodeBenchmark("ft.B", "NPB serial FT class B", "Mop/s", 487.07, 3.71, 5),
    NodeBenchmark("lu.B", "NPB serial LU class B", "Mop/s", 543.08, 12.46, 5),
    NodeBenchmark("mg.B", "NPB serial MG class B", "Mop/s", 638.31, 6.76, 5),
    NodeBenchmark("sp.B", "NPB serial SP class B", "Mop/s", 541.01, 3.99, 5),
)
# HPL on one node, both CPUs (slide 71).
HPL = NodeBenchmark("xhpl", "HPL on one node (two processes)", "GFLOP/s", 11.89, 0.08, 10)
NODE_BENCHMARKS = (*STREAM, *NPB_SERIAL, HPL)

PATTERNS = ("sort", "cut", "fold", "shuffle")
NETWORK_TITLES = {"spp": "Myrinet (MPI over GM)", "ip": "GigE (MPI over TCP)"}
# Myrinet behind a full-bisection switch: every pattern alike (slide 76).
# GigE: sort pairs stay on their chassis switch (~100 MB/s); the others go
# through the oversubscribed core (~88.5 MB/s, slide 79).
PAIR_BENCHMARKS = (
    *(PairBenchmark("spp", p, "bw", MESSAGE_BYTES, "MB/s", 233.2, 1.2) for p in PATTERNS),
    PairBenchmark("spp", "sort", "lat", 0, "us", 6.95, 0.04, direction="lower"),
    PairBenchmark("ip", "sort", "bw", MESSAGE_BYTES, "MB/s", 99.9, 1.0),
    *(PairBenchmark("ip", p, "bw", MESSAGE_BYTES, "MB/s", 88.5, 1.3) for p in PATTERNS[1:]),
)
PATTERN_TEXT = {
    "sort": "node i with node i+1 (1-2, 3-4, ...)",
    "cut": "node i with node i+M/2 (the two halves)",
    "fold": "node i with node M+1-i (the list folded)",
    "shuffle": "a seeded random pairing",
}


@dataclass(frozen=True)
class ExpectedFinding:
    """One finding a correct analysis makes on the dataset.

    ``subject`` is the benchmark or fact key; for kinds that span several
    series (accuracy, weak-pair-member, weak-group) it is None and ``series``
    lists them.  ``evidence`` holds values the finding's evidence should
    carry where it carries that key (outlier side, weak group's name).
    """

    kind: str
    severity: str
    subject: str | None
    nodes: str  # folded node set; "" for a finding about a whole series
    why: str
    series: tuple[str, ...] | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "severity": self.severity, "subject": self.subject}
        if self.series is not None:
            data["series"] = list(self.series)
        data["nodes"] = self.nodes
        data["why"] = self.why
        if self.evidence:
            data["evidence"] = dict(self.evidence)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ExpectedFinding":
        try:
            series = data.get("series")
            return cls(
                kind=str(data["kind"]),
                severity=str(data["severity"]),
                subject=data["subject"],
                nodes=str(data["nodes"]),
                why=str(data["why"]),
                series=tuple(series) if series is not None else None,
                evidence=dict(data.get("evidence") or {}),
            )
        except (KeyError, TypeError) as err:
            raise SynthError(f"expected finding {data!r} lacks {err}") from None


@dataclass(frozen=True)
class Truth:
    """What was planted in a synthetic dataset and what must be found there."""

    nodes: int
    seed: int
    faults: bool
    node_set: str
    findings: tuple[ExpectedFinding, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "generator": GENERATOR,
            "format": TRUTH_FORMAT,
            "oddnode": __version__,
            "nodes": self.nodes,
            "seed": self.seed,
            "faults": self.faults,
            "node_set": self.node_set,
            "findings": [f.to_json() for f in self.findings],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Truth":
        if not isinstance(data, dict) or data.get("generator") != GENERATOR:
            raise SynthError(f"not a ground truth written by {GENERATOR}")
        if data.get("format") != TRUTH_FORMAT:
            raise SynthError(f"ground truth format {data.get('format')!r} is not {TRUTH_FORMAT}")
        try:
            return cls(
                nodes=int(data["nodes"]),
                seed=int(data["seed"]),
                faults=bool(data["faults"]),
                node_set=str(data["node_set"]),
                findings=tuple(ExpectedFinding.from_json(f) for f in data["findings"]),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise SynthError(f"ground truth lacks or garbles {err}") from None


def read_truth(path: Path | str) -> Truth:
    """Read a truth.json (or the truth.json inside a dataset directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / TRUTH_FILE
    data = load_json(path)  # a file like any other: strict, regular, bounded
    try:
        return Truth.from_json(data)
    except SynthError as err:
        raise SynthError(f"{path}: {err}") from None


# --- the cluster's layout -------------------------------------------------


def node_names(n: int) -> list[str]:
    """node001 … nodeN, zero-padded to three digits or to N's width if wider."""
    width = max(3, len(str(n)))
    return [f"node{i:0{width}d}" for i in range(1, n + 1)]


def chassis_groups(nodes: Sequence[str]) -> dict[str, str]:
    """Node → BladeCenter chassis (bc01: the first 14 nodes, …; the last may be partial)."""
    count = math.ceil(len(nodes) / CHASSIS_SIZE)
    width = max(2, len(str(count)))
    return {node: f"bc{i // CHASSIS_SIZE + 1:0{width}d}" for i, node in enumerate(nodes)}


def _paired_count(nodes: Sequence[str]) -> int:
    """Nodes that take part in the pair patterns: all, or all but the last when odd."""
    return len(nodes) - len(nodes) % 2


def pairs_sort(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """1-2, 3-4, …: neighbours, inside one chassis."""
    m = _paired_count(nodes)
    return [(nodes[i], nodes[i + 1]) for i in range(0, m, 2)]


def pairs_cut(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """i with i+M/2: the list cut in two halves laid side by side."""
    half = _paired_count(nodes) // 2
    return [(nodes[i], nodes[i + half]) for i in range(half)]


def pairs_fold(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """i with M+1−i: the list folded in the middle."""
    m = _paired_count(nodes)
    return [(nodes[i], nodes[m - 1 - i]) for i in range(m // 2)]


def pairs_shuffle(nodes: Sequence[str], rng: np.random.Generator) -> list[tuple[str, str]]:
    """A random permutation taken two by two."""
    order = rng.permutation(_paired_count(nodes))
    return [(nodes[order[i]], nodes[order[i + 1]]) for i in range(0, len(order), 2)]


@dataclass(frozen=True)
class FaultPlan:
    """Which nodes carry which planted fault, for one node count."""

    fast: tuple[str, ...]  # second memory configuration (fault 1)
    competing: str  # competing process (fault 2)
    inaccurate: str  # accuracy failures (fault 3)
    unbooted: str  # absent from HPL (fault 4)
    small_memory: str  # absent from HPL and less memory (faults 4, 5)
    old_bios: str  # fault 5
    weak_card: str  # fault 6
    bad_chassis: str  # fault 7
    bad_chassis_nodes: tuple[str, ...]


def _scaled_position(case_node: int, n: int) -> int:
    """The 1-based position that case-study node ``case_node`` of 484 maps to among n."""
    return math.floor(case_node * n / CASE_STUDY_NODES + 0.5)


def _keep_apart(pairs: list[tuple[str, str]], node: str, avoid: set[str]) -> list[tuple[str, str]]:
    """The pairs with ``node``'s partner swapped for a node outside ``avoid``
    when it is inside: the partner goes to the first pair wholly outside."""
    pairs = list(pairs)
    mine = next((i for i, p in enumerate(pairs) if node in p), None)
    if mine is None:
        return pairs
    partner = pairs[mine][1] if pairs[mine][0] == node else pairs[mine][0]
    if partner not in avoid:
        return pairs
    for i, (a, b) in enumerate(pairs):
        if i != mine and a not in avoid and b not in avoid:
            pairs[mine] = (node, a) if pairs[mine][0] == node else (a, node)
            pairs[i] = (partner, b)
            return pairs
    raise SynthError(f"no pair outside {fold(avoid)} to swap {node}'s partner with")


def pair_patterns(nodes: Sequence[str], seed: int, plan: FaultPlan) -> dict[str, list[tuple[str, str]]]:
    """The pairs of every network and pattern (``spp.cut``, ``ip.shuffle``, …).

    Each network draws its own shuffle; where it pairs the weak Myrinet card
    with the bad chassis, the partner is swapped away (as an operator reruns
    a pair that two faults would confound)."""
    patterns = {}
    bad = set(plan.bad_chassis_nodes)
    for network in NETWORK_TITLES:
        patterns[f"{network}.sort"] = pairs_sort(nodes)
        patterns[f"{network}.cut"] = pairs_cut(nodes)
        patterns[f"{network}.fold"] = pairs_fold(nodes)
        shuffled = pairs_shuffle(nodes, _rng(seed, f"{network}.shuffle"))
        patterns[f"{network}.shuffle"] = _keep_apart(shuffled, plan.weak_card, bad)
    return patterns


def plan_faults(nodes: Sequence[str]) -> FaultPlan:
    """Place the faults by position so that each shows in one finding only.

    No two single-node faults share a node (the small-memory node is also one
    of the two missing from HPL, by design), none sits in the fast group or on
    the last node (which sits out of the pairs when N is odd), and the weak
    Myrinet card is neither in the bad chassis nor its partner in the sort,
    cut or fold pattern (``pair_patterns`` keeps the shuffles apart), so that
    each low pair has one cause.
    """
    n = len(nodes)
    if n < MIN_NODES:
        raise SynthError(f"a synthetic cluster needs at least {MIN_NODES} nodes, got {n}")
    fast_count = math.floor(FAST_MODE_SHARE * n + 0.5)
    groups = chassis_groups(nodes)
    bad_chassis = groups[nodes[(BAD_CHASSIS - 1) * CHASSIS_SIZE]]
    bad_nodes = {node for node in nodes if groups[node] == bad_chassis}
    partners: dict[str, set[str]] = {node: set() for node in nodes}
    for pattern in (pairs_sort, pairs_cut, pairs_fold):
        for a, b in pattern(nodes):
            partners[a].add(b)
            partners[b].add(a)
    taken = {n - 1}  # the inaccurate node, as node483 of 484

    def place(case_node: int, clear_of_bad_chassis: bool = False) -> int:
        wanted = _scaled_position(case_node, n)
        for step in range(n):
            for position in (wanted + step, wanted - step):
                if not (fast_count < position < n) or position in taken:
                    continue
                node = nodes[position - 1]
                if clear_of_bad_chassis and (node in bad_nodes or partners[node] & bad_nodes):
                    continue
                taken.add(position)
                return position
        raise SynthError(f"no free node for the fault of case-study node{case_node:03d} among {n}")

    competing = place(CASE_COMPETING)
    unbooted = place(CASE_UNBOOTED)
    small_memory = place(CASE_SMALL_MEMORY)
    weak_card = place(CASE_WEAK_CARD, clear_of_bad_chassis=True)
    old_bios = place(CASE_OLD_BIOS)
    return FaultPlan(
        fast=tuple(nodes[:fast_count]),
        competing=nodes[competing - 1],
        inaccurate=nodes[n - 2],
        unbooted=nodes[unbooted - 1],
        small_memory=nodes[small_memory - 1],
        old_bios=nodes[old_bios - 1],
        weak_card=nodes[weak_card - 1],
        bad_chassis=bad_chassis,
        bad_chassis_nodes=tuple(node for node in nodes if node in bad_nodes),
    )


# --- random values --------------------------------------------------------


def _rng(seed: int, stream: str) -> np.random.Generator:
    """An independent generator per named stream, so that one series' draws
    do not depend on which other series (or faults) were drawn before it."""
    return np.random.default_rng([seed, zlib.crc32(stream.encode("utf-8"))])


def bounded_normal(rng: np.random.Generator, size: int, mean: float, std: float,
                   bound: float = NOISE_BOUND_SIGMA) -> np.ndarray:
    """Normal values cut at mean ± bound·std, drawn by inverting the CDF."""
    # scipy is imported where it is used: the command line imports this
    # module (for SynthError) on every command, and scipy takes a second.
    from scipy import special

    u = rng.uniform(special.ndtr(-bound), special.ndtr(bound), size)
    return mean + std * special.ndtri(u)


@dataclass(frozen=True)
class _BoundedSkewNormal:
    """Standardised skew-normal cut below at the normal bound's quantile and
    above at ``SKEW_UPPER_BOUND`` robust σ over its median."""

    low: float
    high: float
    mean: float
    std: float


@functools.cache
def _bounded_skew_normal_shape(shape: float) -> _BoundedSkewNormal:
    from scipy import optimize, special, stats

    dist = stats.skewnorm(shape)
    median = float(dist.median())
    # MAD of the distribution: the d with P(|X - median| ≤ d) = 1/2.
    mad = optimize.brentq(lambda d: dist.cdf(median + d) - dist.cdf(median - d) - 0.5, 1e-9, 10.0)
    low = float(dist.ppf(special.ndtr(-NOISE_BOUND_SIGMA)))
    high = median + SKEW_UPPER_BOUND * 1.4826 * mad
    mean = float(dist.expect(lambda x: x, lb=low, ub=high, conditional=True))
    second = float(dist.expect(lambda x: x * x, lb=low, ub=high, conditional=True))
    return _BoundedSkewNormal(low, high, mean, math.sqrt(second - mean * mean))


def bounded_skew_normal(rng: np.random.Generator, size: int, mean: float, std: float,
                        shape: float = SKEW_SHAPE) -> np.ndarray:
    """Right-skewed values with the given mean and standard deviation and a
    short (Gaussian-like, bounded) tail, drawn by inverting the CDF."""
    from scipy import stats

    cut = _bounded_skew_normal_shape(shape)
    dist = stats.skewnorm(shape)
    u = rng.uniform(dist.cdf(cut.low), dist.cdf(cut.high), size)
    x = dist.ppf(u)
    return mean + std * (x - cut.mean) / cut.std


# --- the dataset ----------------------------------------------------------


@dataclass
class _PlotFile:
    benchmark: str
    header: list[str]
    rows: list[tuple[float, str]]


def _node_series(spec: NodeBenchmark, nodes: list[str], plan: FaultPlan | None, seed: int) -> np.ndarray:
    rng = _rng(seed, spec.benchmark)
    if plan is not None and spec.name == "cg.B":
        return bounded_skew_normal(rng, len(nodes), spec.mean, spec.std)
    values = bounded_normal(rng, len(nodes), spec.mean, spec.std)
    if plan is None:
        return values
    index = {node: i for i, node in enumerate(nodes)}
    if spec in STREAM:
        values[: len(plan.fast)] *= FAST_MODE_GAIN
    if spec.name in ("ep.B", "bt.B"):
        values[index[plan.competing]] *= COMPETING_FACTOR
    return values


def _pair_values(spec: PairBenchmark, pairs: list[tuple[str, str]], plan: FaultPlan | None,
                 groups: dict[str, str], seed: int) -> np.ndarray:
    values = bounded_normal(_rng(seed, spec.benchmark), len(pairs), spec.mean, spec.std)
    if plan is None or spec.metric != "bw":
        return values
    fault_rng = _rng(seed, spec.benchmark + "/fault")
    for i, (a, b) in enumerate(pairs):
        if spec.network == "spp" and plan.weak_card in (a, b):
            values[i] = bounded_normal(fault_rng, 1, *WEAK_CARD_MBS)[0]
        elif spec.network == "ip" and (groups[a] == plan.bad_chassis) != (groups[b] == plan.bad_chassis):
            values[i] = fault_rng.uniform(*BAD_UPLINK_MBS)
    return values


def _provenance(seed: int, n: int, plan: FaultPlan | None) -> str:
    kind = "planted faults (see truth.json)" if plan is not None else "no fault: a healthy control"
    return f"# synthetic cluster by {GENERATOR} {__version__}: seed {seed}, {n} nodes, {kind}"


def _build(nodes: list[str], patterns: dict[str, list[tuple[str, str]]], plan: FaultPlan | None,
           seed: int) -> tuple[list[_PlotFile], list[str]]:
    """The plot files and the failed run names; no fault where plan is None."""
    n = len(nodes)
    groups = chassis_groups(nodes)
    provenance = _provenance(seed, n, plan)
    plots: list[_PlotFile] = []
    for spec in NODE_BENCHMARKS:
        values = _node_series(spec, nodes, plan, seed)
        absent: set[str] = set()
        if plan is not None and spec is HPL:
            absent = {plan.unbooted, plan.small_memory, plan.inaccurate}
        header = [
            f"# plot.{spec.benchmark}: {spec.title} in {spec.unit}, {spec.direction} is better",
            f"# one line per node: value, node; the best of its {spec.runs} runs "
            "(accuracy failures are listed in 'failed')",
            provenance,
        ]
        if absent:
            header.append(f"# not here: {plan.unbooted} did not boot, {plan.small_memory} has too little "
                          f"memory for the problem size, every run of {plan.inaccurate} failed")
        rows = [(float(v), node) for node, v in zip(nodes, values) if node not in absent]
        plots.append(_PlotFile(spec.benchmark, header, rows))

    for spec in PAIR_BENCHMARKS:
        pairs = patterns[f"{spec.network}.{spec.pattern}"]
        values = _pair_values(spec, pairs, plan, groups, seed)
        what = "bandwidth" if spec.metric == "bw" else "latency"
        header = [
            f"# plot.{spec.benchmark}: {NETWORK_TITLES[spec.network]} ping-pong {what} at {spec.size} bytes "
            f"in {spec.unit}, {spec.direction} is better",
            f"# pattern {spec.pattern}: {PATTERN_TEXT[spec.pattern]}; one line per pair: value, nodeA-nodeB",
            provenance,
        ]
        if n % 2:
            header.append(f"# {n} nodes, an odd count: {nodes[-1]} sits out")
        rows = [(float(v), f"{a}-{b}") for (a, b), v in zip(pairs, values)]
        plots.append(_PlotFile(spec.benchmark, header, rows))

    failed: list[str] = []
    if plan is not None:
        for name, runs in INACCURATE_RUNS.items():
            failed.extend(f"{name}.{ARCH}.{plan.inaccurate}.{run}" for run in runs)
    return plots, failed


def _inventory(nodes: list[str], plan: FaultPlan | None) -> list[tuple[str, str, str]]:
    rows = []
    for node in nodes:
        facts = dict(HEALTHY_FACTS)
        if plan is not None and node == plan.old_bios:
            facts["bios_date"] = OLD_BIOS_DATE
        if plan is not None and node == plan.small_memory:
            facts["memory_total_kb"] = SMALL_MEMORY_KB
        rows.extend((node, key, facts[key]) for key in sorted(facts))
    return rows


def expected_findings(nodes: list[str], plan: FaultPlan,
                      patterns: dict[str, list[tuple[str, str]]]) -> list[ExpectedFinding]:
    """The findings the planted faults must produce, one per fault and series."""
    findings = []
    fast = fold(plan.fast)
    for spec in STREAM:
        findings.append(ExpectedFinding(
            "bimodal", "warning", spec.benchmark, fast,
            f"{fast} run a second memory configuration: STREAM {100 * (FAST_MODE_GAIN - 1):.1f}% faster."))
    for name in ("bt.B", "ep.B"):
        findings.append(ExpectedFinding(
            "outlier", "warning", f"{name}.{ARCH}", plan.competing,
            f"A competing process on {plan.competing} takes {100 * (1 - COMPETING_FACTOR):.0f}% of its CPU.",
            evidence={"side": "low"}))
    findings.append(ExpectedFinding(
        "accuracy", "error", None, plan.inaccurate,
        f"{plan.inaccurate} fails the accuracy check of {sum(map(len, INACCURATE_RUNS.values()))} runs, "
        f"every HPL run among them.",
        series=tuple(sorted(f"{name}.{ARCH}" for name in INACCURATE_RUNS))))
    findings.append(ExpectedFinding(
        "missing", "warning", HPL.benchmark, fold([plan.unbooted, plan.small_memory]),
        f"{plan.unbooted} did not boot for HPL and {plan.small_memory} has too little memory for its problem "
        "size."))
    findings.append(ExpectedFinding(
        "inconsistent-fact", "warning", "bios_date", plan.old_bios,
        f"{plan.old_bios} has BIOS {OLD_BIOS_DATE}, the others {HEALTHY_FACTS['bios_date']}."))
    findings.append(ExpectedFinding(
        "inconsistent-fact", "warning", "memory_total_kb", plan.small_memory,
        f"{plan.small_memory} has {SMALL_MEMORY_KB} kB of memory, the others {HEALTHY_FACTS['memory_total_kb']} kB."))
    findings.append(ExpectedFinding(
        "weak-pair-member", "warning", None, plan.weak_card,
        f"{plan.weak_card}'s Myrinet card is weak: its pairs reach {WEAK_CARD_MBS[0]:.0f} MB/s, not 233.",
        series=tuple(s.benchmark for s in PAIR_BENCHMARKS if s.network == "spp" and s.metric == "bw")))
    groups = chassis_groups(nodes)
    crossing = []
    for spec in PAIR_BENCHMARKS:
        if spec.network != "ip":
            continue
        pairs = patterns[f"{spec.network}.{spec.pattern}"]
        if any((groups[a] == plan.bad_chassis) != (groups[b] == plan.bad_chassis) for a, b in pairs):
            crossing.append(spec.benchmark)
    findings.append(ExpectedFinding(
        "weak-group", "warning", None, fold(plan.bad_chassis_nodes),
        f"Chassis {plan.bad_chassis}'s GigE uplink is bad: its pairs with other chassis reach "
        f"{BAD_UPLINK_MBS[0]:.0f}-{BAD_UPLINK_MBS[1]:.0f} MB/s, its pairs inside are normal.",
        series=tuple(crossing), evidence={"group": plan.bad_chassis}))
    findings.append(ExpectedFinding(
        "skewed", "info", f"cg.B.{ARCH}", "",
        f"cg.B is right-skewed (skew-normal, shape {SKEW_SHAPE:g}) with a bounded tail.",
        evidence={"side": "high"}))
    return findings


def _owned_files(directory: Path) -> list[Path]:
    """The files a previous synth wrote into ``directory``."""
    names = {TRUTH_FILE, UNITS_FILE, INVENTORY_FILE, TOPOLOGY_FILE, FAILED_FILE}
    return [p for p in directory.iterdir()
            if p.is_file() and (p.name in names or p.name.startswith(PLOT_PREFIX))]


def _prepare(out_dir: Path) -> None:
    """Create ``out_dir``, or clear a previous synth's files from it; refuse
    a non-empty directory that holds no ground truth from synth."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SynthError(f"{out_dir} exists and is not a directory")
    if not out_dir.exists():
        if not out_dir.parent.is_dir():
            raise SynthError(f"cannot write {out_dir}: directory {out_dir.parent} does not exist")
        out_dir.mkdir()
        return
    if not any(out_dir.iterdir()):
        return
    truth = out_dir / TRUTH_FILE
    if not truth.is_file():
        raise SynthError(f"{out_dir} is not empty and holds no {TRUTH_FILE} from a previous synth: "
                         "choose an empty or new directory")
    read_truth(truth)  # a foreign truth.json is no licence to overwrite
    for path in _owned_files(out_dir):
        path.unlink()


def _format_value(value: float) -> str:
    # Six significant digits: 2060.12 MB/s, 9.96123 Mop/s, 6.95012 us.
    return f"{value:.6g}"


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def generate(out_dir: Path | str, *, nodes: int = CASE_STUDY_NODES, seed: int = DEFAULT_SEED,
             faults: bool = True) -> Truth:
    """Write a synthetic cluster of ``nodes`` nodes into ``out_dir`` and
    return its ground truth (also written as ``truth.json``).

    The same seed gives the same files; ``faults=False`` gives the same
    cluster with every node healthy.  ``out_dir`` is created if needed and
    may be a previous synth's output, which is replaced.
    """
    if isinstance(nodes, bool) or not isinstance(nodes, int):
        raise SynthError(f"the node count must be a whole number, got {nodes!r}")
    if not MIN_NODES <= nodes <= MAX_NODES:
        raise SynthError(f"a synthetic cluster has {MIN_NODES} to {MAX_NODES} nodes, got {nodes}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SynthError(f"the seed must be a whole number ≥ 0, got {seed!r}")
    out_dir = Path(out_dir)
    names = node_names(nodes)
    plan = plan_faults(names)
    patterns = pair_patterns(names, seed, plan)
    planted = plan if faults else None
    plots, failed = _build(names, patterns, planted, seed)
    truth = Truth(
        nodes=nodes,
        seed=seed,
        faults=faults,
        node_set=fold(names),
        findings=tuple(expected_findings(names, plan, patterns)) if faults else (),
    )

    _prepare(out_dir)
    for plot in plots:
        lines = [*plot.header, *(f"{_format_value(v)} {label}" for v, label in plot.rows)]
        (out_dir / f"{PLOT_PREFIX}{plot.benchmark}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _write_csv(out_dir / UNITS_FILE, ("benchmark", "unit", "direction"),
               [(s.benchmark, s.unit, s.direction) for s in (*NODE_BENCHMARKS, *PAIR_BENCHMARKS)])
    _write_csv(out_dir / INVENTORY_FILE, ("node", "key", "value"), _inventory(names, planted))
    _write_csv(out_dir / TOPOLOGY_FILE, ("node", "group"), sorted(chassis_groups(names).items()))
    if failed:
        text = "\n".join([f"# runs that failed their accuracy check: benchmark.{ARCH}.node.run", *failed])
        (out_dir / FAILED_FILE).write_text(text + "\n", encoding="utf-8")
    (out_dir / TRUTH_FILE).write_text(json.dumps(truth.to_json(), indent=2) + "\n", encoding="utf-8")
    return truth


# --- comparing findings with the truth ------------------------------------


def _same_nodes(a: str, b: str) -> bool:
    if not a or not b:
        return a == b
    try:
        return set(expand(a)) == set(expand(b))
    except NodeNameError:
        return a == b


def _subject_matches(expected: ExpectedFinding, subject: str) -> bool:
    if expected.subject is not None:
        return subject == expected.subject
    allowed = set(expected.series or ()) | {str(v) for v in expected.evidence.values()}
    named = {part.strip() for part in subject.split(",") if part.strip()}
    return bool(named) and named <= allowed


def _evidence_matches(expected: ExpectedFinding, evidence: dict[str, Any]) -> bool:
    return all(evidence[key] == value for key, value in expected.evidence.items() if key in evidence)


def matches(expected: ExpectedFinding, finding: Finding) -> bool:
    """Whether a finding is the expected one: same kind, same nodes, the
    subject (or a subset of the expected series), agreeing evidence."""
    return (
        finding.kind == expected.kind
        and _same_nodes(finding.nodes, expected.nodes)
        and _subject_matches(expected, finding.subject)
        and _evidence_matches(expected, finding.evidence)
    )


@dataclass
class TruthCheck:
    """Findings set against the ground truth, one to one."""

    matched: list[tuple[ExpectedFinding, Finding]]
    missed: list[ExpectedFinding]
    unexpected: list[Finding]

    @property
    def ok(self) -> bool:
        return not self.missed and not self.unexpected

    @property
    def severity_differs(self) -> list[tuple[ExpectedFinding, Finding]]:
        return [(e, f) for e, f in self.matched if f.severity.value != e.severity]

    def summary(self) -> str:
        lines = []
        if self.ok:
            lines.append(f"findings match the ground truth: {len(self.matched)} expected, {len(self.matched)} found")
        else:
            lines.append(f"findings do not match the ground truth: {len(self.matched)} matched, "
                         f"{len(self.missed)} missed, {len(self.unexpected)} unexpected")
        for e in self.missed:
            subject = e.subject if e.subject is not None else ", ".join(e.series or ())
            lines.append(f"  missed      {e.kind} {subject}: {e.nodes or '-'} ({e.why})")
        for f in self.unexpected:
            lines.append(f"  unexpected  {f.severity.value} {f.kind} {f.subject}: {f.nodes or '-'}")
        for e, f in self.severity_differs:
            lines.append(f"  note: {e.kind} {f.subject} has severity {f.severity.value}, the truth says {e.severity}")
        return "\n".join(lines)


def check_findings(truth: Truth, findings: Iterable[Finding]) -> TruthCheck:
    """Pair every expected finding with one actual finding that matches it."""
    remaining = list(findings)
    matched, missed = [], []
    for expected in truth.findings:
        hit = next((f for f in remaining if matches(expected, f)), None)
        if hit is None:
            missed.append(expected)
        else:
            remaining.remove(hit)
            matched.append((expected, hit))
    return TruthCheck(matched, missed, remaining)
