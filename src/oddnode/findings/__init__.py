"""Findings: typed judgements of a dataset, each with its evidence and a remedy.

Rules register by name (``@rule("outlier")``) in :data:`RULES`;
:func:`find_all` runs them, worst finding first.  The rule modules are
imported here, explicitly, so that importing this package registers them all.
"""

from oddnode.findings.registry import (
    RULE_KINDS,
    RULES,
    Rule,
    Sensitivity,
    UnknownRuleError,
    find_all,
    get_rule,
    rule,
    sort_findings,
)
# Importing the rule modules registers their rules.
from oddnode.findings import (  # noqa: F401
    affinity,
    distribution_rules,
    facts,
    failures,
    missing,
    noise,
    numa,
    pairs,
    placement,
    process_asymmetry,
    reachability,
    sets,
    switchbench,
    sync,
)

__all__ = [
    "RULES",
    "RULE_KINDS",
    "Rule",
    "Sensitivity",
    "UnknownRuleError",
    "find_all",
    "get_rule",
    "rule",
    "sort_findings",
]
