"""Rules on the shape of each single-node population (STAB's dplot reading):
outliers, a second mode, skew and other departures from the normal, and
repetitions too noisy to tell kinds of nodes apart."""

from __future__ import annotations

import math

import numpy as np

from oddnode.findings.population import HIGH, LOW, JudgedGroup, Modes, RepetitionNoise, analyse, bad_side
from oddnode.findings.registry import Sensitivity, first_few, rule
from oddnode.core.model import Dataset, Finding, LabelKind, Series, Severity
from oddnode.core.nodes import fold
from oddnode.stats.distribution import normality
from oddnode.stats.robust import median

# How many nodes a message spells out before "and N more"; the evidence lists all.
MESSAGE_NODES = 5


def node_series(dataset: Dataset) -> list[Series]:
    return [s for s in dataset.series if s.label_kind is LabelKind.NODE]


def number(value: float) -> str:
    """A value as a report prints it: four significant digits."""
    return f"{value:.4g}"


def with_unit(value: float, series: Series) -> str:
    return f"{number(value)} {series.unit}".rstrip()


def _deviation_pct(value: float, median: float) -> float:
    return (value - median) / abs(median) * 100.0 if median else float("inf") if value != median else 0.0


def _outlier_finding(series: Series, group: JudgedGroup, side: str) -> Finding:
    indices = group.outliers(side)
    labels = series.labels[indices].tolist()
    values = series.values[indices].astype(np.float64)
    median, sigma = group.scale.median, group.scale.sigma
    if sigma > 0:
        zs = (values - median) / sigma
    else:
        zs = np.copysign(np.inf, values - median)
    worse = side == bad_side(series)
    # The worse side of a small group is judged by the generalized ESD test:
    # each node's step statistic and critical value, in the others' σ.
    steps = group.esd_steps if worse else {}
    # Worst first: furthest from the median.
    order = np.argsort(-np.abs(zs), kind="stable")
    per_node = {}
    for i in order:
        entry = {
            "value": float(values[i]),
            "modified_z": float(zs[i]),
            "deviation_pct": _deviation_pct(float(values[i]), median),
        }
        if int(indices[i]) in steps:
            entry["esd_statistic"], entry["esd_critical"] = steps[int(indices[i])]
        per_node[labels[i]] = entry

    def detail(label: str, value: float) -> str:
        entry = per_node[label]
        if "esd_statistic" in entry:
            measure = f"{entry['esd_statistic']:.1f} σ of the nodes {'above' if side == LOW else 'below'} it"
        else:
            measure = f"modified z {entry['modified_z']:+.1f}"
        return f"{label} {with_unit(value, series)} ({entry['deviation_pct']:+.1f}%, {measure})"

    details = first_few([detail(labels[i], float(values[i])) for i in order], MESSAGE_NODES)
    within = f" within the {group.mode} mode ({group.size} nodes)" if group.mode else ""
    if steps:
        test = "generalized ESD"
        critical = [per_node[label]["esd_critical"] for label in labels]
        threshold = min(critical)
        criterion = (f"generalized ESD test over {group.size} nodes at α/2, critical "
                     + ", ".join(f"{c:.1f}" for c in sorted(set(critical))) + " σ")
    else:
        test = "modified z"
        threshold = group.threshold_on(side, bad_side(series))
        criterion = f"threshold |modified z| > {threshold:.2f}"
    nodes = fold(labels)
    message = (
        f"{nodes} {'is an outlier' if len(labels) == 1 else 'are outliers'} on the "
        f"{'worse' if worse else 'better'} ({side}) side of {series.name}{within}: {details}; "
        f"median {with_unit(median, series)}, {criterion}"
    )
    if worse:
        remedy = (
            f"Compare {nodes}'s facts with the other nodes' (memory configuration, BIOS, CPU frequency "
            "governor, competing processes) and rerun the benchmark on it alone."
        )
    else:
        remedy = (
            f"A result better than identical nodes reach is suspect: check that {nodes} ran the same work "
            "(problem size, threads, accuracy check passed), compare its facts (memory configuration, "
            "BIOS, governor, competing processes) and rerun the benchmark on it alone."
        )
    return Finding(
        kind="outlier",
        severity=Severity.WARNING,
        subject=series.name,
        nodes=nodes,
        message=message,
        evidence={
            "side": side,
            "worse": worse,
            "mode": group.mode,
            "median": median,
            "mad": group.scale.mad,
            "test": test,
            "threshold": threshold,
            "population": group.size,
            "nodes": per_node,
        },
        remedy=remedy,
    )


@rule("outlier")
def outliers(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Nodes far from their population's median, judged within each mode when there are two."""
    findings = []
    for series in node_series(dataset):
        population = analyse(series, sensitivity)
        for group in population.groups:
            for side in (LOW, HIGH):
                if len(group.outliers(side)):
                    findings.append(_outlier_finding(series, group, side))
    return findings


def _mode_groups(series: Series, modes: Modes) -> dict[str, dict]:
    """Each mode's side, nodes, size, mean and standard deviation."""
    groups = {}
    for side in (LOW, HIGH):
        indices = modes.indices(side)
        groups[side] = {
            "side": side,
            "nodes": fold(series.labels[indices].tolist()),
            "size": int(len(indices)),
            "mean": float(np.mean(series.values[indices])),
            "std": float(np.std(series.values[indices])),
        }
    return groups


def _bimodal_finding(series: Series, modes: Modes) -> Finding:
    split = modes.split
    minority = modes.minority
    majority = HIGH if minority == LOW else LOW
    groups = _mode_groups(series, modes)
    odd, rest = groups[minority], groups[majority]
    faster = minority != bad_side(series)
    message = (
        f"{odd['nodes']} ({odd['size']} nodes, mean {with_unit(odd['mean'], series)}) form a second, "
        f"{'faster' if faster else 'slower'} mode than {rest['nodes']} ({rest['size']} nodes, mean "
        f"{with_unit(rest['mean'], series)}) on {series.name}: gap {modes.gap_pct:.1f}%"
    )
    return Finding(
        kind="bimodal",
        severity=Severity.WARNING,
        subject=series.name,
        nodes=odd["nodes"],
        message=message,
        evidence={
            "groups": [groups[LOW], groups[HIGH]],
            "minority": minority,
            "gap_pct": modes.gap_pct,
            "test": modes.test,
            "split_ratio": modes.split_ratio,
            "critical_ratio": None if math.isnan(modes.critical_ratio) else modes.critical_ratio,
            "dip": modes.dip.statistic,
            "dip_p": modes.dip.p,
            "ashman_d": split.ashman_d,
        },
        remedy=(
            f"Two kinds of nodes: compare the facts of {odd['nodes']} with the others' "
            "(memory configuration and DIMM layout, BIOS version and settings, kernel)."
        ),
    )


@rule("bimodal")
def bimodal(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Two kinds of nodes in one population (calibrated split ratio up to 30
    nodes, dip test and Ashman's D above; group sizes, gap)."""
    findings = []
    for series in node_series(dataset):
        population = analyse(series, sensitivity)
        if population.modes is not None:
            findings.append(_bimodal_finding(series, population.modes))
    return findings


def _noisy_finding(series: Series, noise: RepetitionNoise) -> Finding:
    groups = _mode_groups(series, noise.candidate)
    better = groups[noise.better]
    message = (
        f"{series.name} varies as much between repetitions as between nodes: the median node of the better "
        f"candidate mode ({better['nodes']}) spans {noise.median_spread_pct:.1f}% between its repetitions, "
        f"while the two candidate modes are {noise.separation_pct:.1f}% apart; a node's best run may be luck "
        f"rather than its kind, so the modes are not named"
    )
    return Finding(
        kind="noisy-benchmark",
        severity=Severity.INFO,
        subject=series.name,
        nodes="",
        message=message,
        evidence={
            "median_spread_pct": noise.median_spread_pct,
            "separation_pct": noise.separation_pct,
            "gap_pct": noise.candidate.gap_pct,
            "better": noise.better,
            "nodes_with_spread": noise.nodes_with_spread,
            "repetitions": int(np.median(series.repetitions)),
            "candidate_groups": [groups[LOW], groups[HIGH]],
        },
        remedy=(
            f"Make {series.name} repeatable before comparing nodes on it: run it longer or more times, and "
            "quiet the nodes (stop competing work, give each run its own cores, fix the CPU frequency), "
            "until a node's repetitions agree better than the nodes differ."
        ),
    )


@rule("noisy-benchmark")
def noisy_benchmark(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Two candidate modes left unnamed: the better mode's nodes vary between repetitions by half the gap or more."""
    findings = []
    for series in node_series(dataset):
        population = analyse(series, sensitivity)
        if population.noise is not None:
            findings.append(_noisy_finding(series, population.noise))
    return findings


@rule("normality", kinds=("skewed", "not-normal"))
def shape(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """A single-mode population, outliers removed, that is skewed or otherwise not normal."""
    findings = []
    for series in node_series(dataset):
        population = analyse(series, sensitivity)
        # Two modes, or repetitions too noisy for any shape to mean much.
        if population.modes is not None or population.noise is not None:
            continue
        keep = np.isfinite(series.values)
        for side in (LOW, HIGH):
            keep[population.outliers(side)] = False
        result = normality(series.values[keep])
        # The best of several runs is skewed towards the better side and not
        # normal even on identical nodes (the maximum of R normals); only a
        # tail on the worse side says something then.
        best_of_runs = median(series.repetitions) > 1
        skew_side = HIGH if result.skewness > 0 else LOW
        if best_of_runs and skew_side != bad_side(series):
            continue
        if result.skew_p < sensitivity.alpha:
            side = skew_side
            worse = side == bad_side(series)
            findings.append(
                Finding(
                    kind="skewed",
                    severity=Severity.INFO,
                    subject=series.name,
                    nodes="",
                    message=(
                        f"{series.name} is skewed towards {side} values (the {'worse' if worse else 'better'} "
                        f"side): skewness {result.skewness:+.2f}, skew test p = {result.skew_p:.2g}"
                    ),
                    evidence={
                        "test": "skewtest",
                        "side": side,
                        "statistic": result.skew_z,
                        "p": result.skew_p,
                        "skewness": result.skewness,
                        "n": result.n,
                    },
                    remedy=(
                        f"A tail of {side} results hides a minority of nodes pulled one way: list the nodes "
                        "in that tail, compare their facts, and rerun to see whether the tail repeats."
                    ),
                )
            )
        elif result.dagostino_p < sensitivity.alpha and not best_of_runs:
            findings.append(
                Finding(
                    kind="not-normal",
                    severity=Severity.INFO,
                    subject=series.name,
                    nodes="",
                    message=(
                        f"{series.name} does not look normal: D'Agostino-Pearson K² = {result.dagostino_k2:.1f}, "
                        f"p = {result.dagostino_p:.2g} (skewness {result.skewness:+.2f}, "
                        f"excess kurtosis {result.kurtosis:+.2f})"
                    ),
                    evidence={
                        "test": "dagostino-pearson",
                        "statistic": result.dagostino_k2,
                        "p": result.dagostino_p,
                        "skewness": result.skewness,
                        "kurtosis": result.kurtosis,
                        "n": result.n,
                    },
                    remedy=(
                        "Identical nodes should give a bell curve: plot the histogram, and compare the facts "
                        "of the nodes in its heavier parts (flat tops and heavy tails mean mixed kinds of nodes)."
                    ),
                )
            )
    return findings
