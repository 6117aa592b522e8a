"""Finding rules registered by name, the sensitivity they share, and
``find_all``, which runs them over a dataset."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from oddnode.core.model import Dataset, Finding
from oddnode.core.registry import Registry, UnknownNameError
from oddnode.stats.robust import ALPHA_RANGE


@dataclass(frozen=True)
class Sensitivity:
    """How readily the rules warn.

    alpha: probability that one rule raises a false warning on one benchmark
    of a healthy cluster (a family-wise rate over that benchmark's nodes).
    min_effect: smallest deviation from the median, as a fraction of it,
    worth a warning: a node 0.3% slower is no fault even when the statistics
    can tell it apart.
    """

    alpha: float = 1e-4
    min_effect: float = 0.01

    def __post_init__(self) -> None:
        low, high = ALPHA_RANGE
        if not (low * (1 - 1e-9) <= self.alpha <= high * (1 + 1e-9)):
            raise ValueError(
                f"alpha {self.alpha:g} is outside [{low:g}, {high:g}], the range the outlier "
                "thresholds are calibrated for"
            )
        if not self.min_effect >= 0:
            raise ValueError(f"min_effect must be a fraction ≥ 0, got {self.min_effect!r}")


Rule = Callable[[Dataset, Sensitivity], list[Finding]]


def first_few(items: Sequence[str], limit: int, separator: str = ", ", rest: str = "more") -> str:
    """Spell out the first items of a message; the evidence keeps them all."""
    shown = separator.join(items[:limit])
    if len(items) > limit:
        before_and = " " if separator == ", " else separator  # "a, b and 3 more"; "a; b; and 3 more values"
        shown += f"{before_and}and {len(items) - limit} {rest}"
    return shown


class UnknownRuleError(UnknownNameError):
    """A rule name that no rule was registered under."""


# name -> rule function, in registration order
RULES: Registry[Rule] = Registry("finding rule", UnknownRuleError)
# name -> the finding kinds the rule can produce
RULE_KINDS: dict[str, tuple[str, ...]] = {}


def rule(name: str, kinds: Iterable[str] | None = None) -> Callable[[Rule], Rule]:
    """Register a rule ``(dataset, sensitivity) -> list[Finding]`` under ``name``."""

    def register(function: Rule) -> Rule:
        RULES.add(name, function)
        RULE_KINDS[name] = tuple(kinds) if kinds is not None else (name,)
        return function

    return register


def get_rule(name: str) -> Rule:
    return RULES.get(name)


# Kinds read first within their severity: a node that left nothing at all
# (it never booted) explains why every other finding counts one node less.
LEADING_KINDS = ("missing",)


def leads(finding: Finding) -> bool:
    return finding.kind in LEADING_KINDS


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Errors first, then warnings, then information; within each, the
    leading kinds first, then by kind and subject."""
    return sorted(findings, key=lambda f: (-f.severity.rank, not leads(f), f.kind, f.subject, f.nodes))


def find_all(
    dataset: Dataset, sensitivity: Sensitivity = Sensitivity(), rules: list[str] | None = None
) -> list[Finding]:
    """Run the named rules (all of them by default) and return their findings, worst first."""
    selected = [get_rule(name) for name in (rules if rules is not None else RULES.names())]
    findings: list[Finding] = []
    for function in selected:
        findings.extend(function(dataset, sensitivity))
    return sort_findings(findings)
