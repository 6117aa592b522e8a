"""Inventory: what every node is (CPU, memory, firmware, kernel, NICs, GPUs,
disks, libraries, processes), as flat facts, and what it should be.

``node_probe.py`` runs on the nodes (stdlib only, Python >= 3.6);
:func:`collect` runs it through any transport and parses what comes back;
:mod:`oddnode.inventory.expectations` checks facts against a YAML file of
expectations and writes one from a cluster's majority values.
"""

from oddnode.inventory.collect import (
    InventoryResult,
    ProbeOutputError,
    ProbeReport,
    classify,
    collect,
    derive_facts,
    parse_dmidecode_memory,
    parse_probe_output,
    probe_argv,
    probe_source,
)
from oddnode.inventory.expectations import (
    Expectation,
    ExpectationError,
    ExpectationReport,
    check_expectations,
    load_expectations,
    parse_expectations,
    snapshot,
)

__all__ = [
    "Expectation",
    "ExpectationError",
    "ExpectationReport",
    "InventoryResult",
    "ProbeOutputError",
    "ProbeReport",
    "check_expectations",
    "classify",
    "collect",
    "derive_facts",
    "load_expectations",
    "parse_dmidecode_memory",
    "parse_expectations",
    "parse_probe_output",
    "probe_argv",
    "probe_source",
    "snapshot",
]
