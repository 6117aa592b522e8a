"""Rules on Switchbench results: a daisy chain whose aggregate throughput
stops growing with its length (the switch is out of capacity)."""

from __future__ import annotations

from oddnode.findings.registry import Sensitivity, rule
from oddnode.readings.switchbench import CHAIN_BENCHMARK, CHAIN_METRIC, MIN_HOP_GAIN, chain_scaling, hop_rate
from oddnode.core.model import Dataset, Finding, Severity
from oddnode.core.nodes import fold


@rule("switch-saturation")
def switch_saturation(dataset: Dataset, sensitivity: Sensitivity) -> list[Finding]:
    """The chain length where adding a node stopped adding throughput."""
    chain = chain_scaling(dataset)
    if chain is None or chain.saturation is None:
        return []
    k = chain.saturation
    shorter = max(length for length in chain.aggregate if length < k)
    first = min(chain.aggregate)
    hop = hop_rate(chain.aggregate)
    joined = fold(chain.joined_at_saturation)
    unit = chain.unit
    fell = chain.aggregate[k] < chain.aggregate[shorter]
    if fell:
        # Less in all with one more hop: the stream now crawls through the
        # node that joined, whatever the switch could carry.
        remedy = (f"The link of {joined} carries less than one hop's stream: look for {joined} in the pair "
                  "patterns' slow pairs (weak-pair-member) and check its cable, card and switch port.")
    else:
        remedy = (f"Either the switch carries no more than about {chain.aggregate[shorter]:.4g} {unit} at once "
                  f"(compare its data sheet's switching capacity), or the link of {joined} is weak: rerun the "
                  "chain with the nodes in another order; a limit that stays at the same length is the switch's.")
    return [Finding(
        kind="switch-saturation",
        severity=Severity.WARNING,
        subject=f"{CHAIN_BENCHMARK}:{CHAIN_METRIC}",
        nodes=joined,
        message=(
            f"the daisy chain of {chain.nodes} stops scaling at k = {k}: the aggregate "
            f"{'fell' if fell else 'went'} from {chain.aggregate[shorter]:.4g} {unit} (k = {shorter}) to "
            f"{chain.aggregate[k]:.4g} {unit} when {joined} joined, less than {MIN_HOP_GAIN:g} of the "
            f"{hop:.4g} {unit} each hop carried at k = {first} above it"
        ),
        evidence={
            "saturation": k,
            "joined": joined,
            "fell": fell,
            "hop": hop,
            "min_hop_gain": MIN_HOP_GAIN,
            "aggregate": {str(length): value for length, value in chain.aggregate.items()},
            "unit": unit,
        },
        remedy=remedy,
    )]
