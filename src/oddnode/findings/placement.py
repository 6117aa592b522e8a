"""``placement-sensitive``: an application whose predicted communication
time differs between its job packed into few topology groups and striped
across them, by more than the noise of the measurements.

Reads the predictions ``oddnode model`` stores (``model.prediction.<placement>``,
metric ``profile.<id>``, one value per repetition) and compares packed with
striped by Mann-Whitney's exact test over the repetitions.  Packed faster:
the links between the groups (uplinks, the line cards' fabric links) limit
the application; striped faster: something inside a group does (a line
card whose ports share one fabric connection, as in Intel's StarCD case,
or a leaf switch's own capacity).
"""

from __future__ import annotations

from statistics import median

from oddnode.findings.registry import Sensitivity, rule
from oddnode.core.model import Dataset, Finding, SetRuns, Severity
from oddnode.core.nodes import fold
from oddnode.readings.sets import set_members
from oddnode.readings.placement import stored_predictions
from oddnode.readings.sets_series import PACKED, STRIPED

# Packed and striped differ when the exact Mann-Whitney p over their
# repetitions is at most this: with 5 repetitions each, complete separation
# gives p = 2/C(10,5) = 0.008, one swapped pair 0.016; with 3, no outcome
# reaches it (p >= 0.1), and the model says so.
PLACEMENT_ALPHA = 0.05
# ... and their medians differ by at least this fraction.  Placements within
# 20% of each other are the same for a scheduler's policy: real applications
# vary that much from run to run on one placement, and a prediction from
# microbenchmarks is no closer (a set of nodes' own latency, its CPUs' and
# daemons', moves a call's time by 5-10% with no switch involved).
PLACEMENT_MIN_EFFECT = 0.20
# A slower placement this many times the faster one is a warning; below it,
# information for the scheduler's policy.
WARNING_FACTOR = 1.5


def _groups(runs: SetRuns, topology: dict[str, str]) -> list[str]:
    members = set_members(str(runs.labels[0])) if len(runs.labels) else ()
    return sorted({topology.get(node, "?") for node in members})


@rule("placement-sensitive")
def placement_sensitive(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """Packed and striped placements of a profiled application predicted apart."""
    findings = []
    for metric, placements in sorted(stored_predictions(dataset).items()):
        packed, striped = placements.get(PACKED), placements.get(STRIPED)
        if packed is None or striped is None or min(len(packed), len(striped)) < 2:
            continue
        from scipy import stats  # a second to import: only where a test needs it (see stats.tails)

        p = float(stats.mannwhitneyu(packed.values, striped.values, alternative="two-sided", method="exact").pvalue)
        medians = {name: median(runs.values.tolist()) for name, runs in placements.items() if len(runs)}
        fast, slow = sorted((PACKED, STRIPED), key=lambda name: medians[name])
        if medians[fast] <= 0:
            continue
        factor = medians[slow] / medians[fast]
        if p > PLACEMENT_ALPHA or factor < 1 + PLACEMENT_MIN_EFFECT:
            continue
        findings.append(_finding(metric, placements, medians, fast, slow, factor, p, dataset.topology))
    return findings


def _finding(metric: str, placements: dict[str, SetRuns], medians: dict[str, float], fast: str, slow: str,
             factor: float, p: float, topology: dict[str, str]) -> Finding:
    groups = {name: _groups(runs, topology) for name, runs in placements.items()}
    labels = {name: str(runs.labels[0]) for name, runs in placements.items() if len(runs)}
    members = sorted({n for name in (PACKED, STRIPED) for n in set_members(labels[name])})
    best = min(medians, key=medians.__getitem__)
    others = "; ".join(f"{name} {medians[name] * 1e3:.4g} ms" for name in sorted(medians)
                       if name not in (PACKED, STRIPED))
    if fast == PACKED:
        cause = ("the links between the groups limit this application: packed it talks inside "
                 f"{'+'.join(groups[PACKED]) or 'one group'}, striped across "
                 f"{'+'.join(groups[STRIPED])}")
        remedy = ("Place this application's jobs within as few groups as they fit in (Slurm: topology/tree and "
                  "--switches=1); check the uplinks of the groups the striped placement crosses for "
                  "oversubscription or degraded links (oddnode scale, oddnode bisection).")
    else:
        cause = ("something inside a group limits this application: packed into "
                 f"{'+'.join(groups[PACKED]) or 'one group'} it is slower than spread over "
                 f"{'+'.join(groups[STRIPED])} (a line card whose ports share one fabric connection, a leaf "
                 "switch's own capacity)")
        remedy = ("Spread this application's jobs across groups (Slurm: a block or cyclic node order over the "
                  "switches) or recable so that consecutive nodes sit on different line cards; check the "
                  "capacity of the packed group's line card or leaf switch.")
    return Finding(
        kind="placement-sensitive",
        severity=Severity.WARNING if factor >= WARNING_FACTOR else Severity.INFO,
        subject=f"model:{metric}",
        nodes=fold(members),
        message=(f"the profiled application ({metric}) is predicted to spend {factor:.3g}x as long communicating "
                 f"{slow} ({labels[slow]}, {medians[slow] * 1e3:.4g} ms per rank) as {fast} ({labels[fast]}, "
                 f"{medians[fast] * 1e3:.4g} ms) (Mann-Whitney p = {p:.2g} over {len(placements[PACKED])} and "
                 f"{len(placements[STRIPED])} repetitions{'; ' + others if others else ''}): {cause}; "
                 f"best placement: {best}"),
        evidence={"metric": metric, "p": p, "alpha": PLACEMENT_ALPHA, "min_effect": PLACEMENT_MIN_EFFECT,
                  "factor": factor, "faster": fast, "slower": slow, "best": best,
                  "medians_s": medians, "placements": labels, "groups": groups,
                  "predictions_s": {name: runs.values.tolist() for name, runs in placements.items()}},
        remedy=remedy,
    )
