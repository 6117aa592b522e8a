"""Acceptance targets: the least (or most) a benchmark series must reach on
every node, whatever the cluster's median, from an expectations file's
``benchmarks`` sections::

    benchmarks:
      memory.triad:bandwidth: {min: 180 GB/s}    # a unit of the series' dimension, converted
      compute.dgemm:performance: {min: 2500}     # no unit: the series' own
      pingpong.sort:latency.8: {max: 2.5 us}     # lower is better: a most
    nodes:
      "gpu[001-016]":
        benchmarks:
          memory.triad:bandwidth: {min: 300 GB/s}

Every other judgement is relative to the median, so a cluster whose every
node runs at half its datasheet speed is otherwise called ready.  A series
is named as ``oddnode stats`` prints it (benchmark, or benchmark:metric).
Scoping follows the facts' rule: for each label, the last section naming
every node of the label decides.  A pair's or set's series is judged per
label and the finding names the nodes of the labels that miss.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
import yaml

from oddnode.core.inputs import InputError, plain_path, quote, read_text
from oddnode.core.model import Direction, Finding, Series, Severity
from oddnode.core.nodes import NodeNameError, expand, fold, label_members
from oddnode.core.units import UnknownUnitError, canonical_unit, convert
from oddnode.findings.expectations import (
    SCOPES_KEY,
    TARGETS_KEY,
    ExpectationError,
    key_lines,
    read_document,
)
from oddnode.onnode.fact_rules import format_number, parse_number

__all__ = ["Target", "check_targets", "load_targets", "parse_targets", "targets_text"]

BELOW_TARGET = "below-target"
ABOVE_TARGET = "above-target"
BOUNDS = ("min", "max")
# A number, then what is left as its unit: "180 GB/s", "2.5us", "900".
_AMOUNT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
# What `oddnode baseline --targets` allows below an accepted check's median
# (above it for lower-is-better series): run-to-run variation of a healthy
# node is a few per cent (STREAM, DGEMM, ping-pong repeat within 2-5%), and a
# target is meant to catch a node or cluster that lost a real fraction of its
# speed (a memory channel, a throttled clock: 10% and more), not jitter.
TARGET_MARGIN = 0.10
# Digits a written target keeps: enough for a threshold, rounded outwards.
TARGET_DIGITS = 3


@dataclass(frozen=True)
class Target:
    """One series' bounds as written (text with or without a unit), where."""

    series: str
    minimum: str | None = None
    maximum: str | None = None
    source: str = "<expectations>"
    line: int | None = None
    scope: str | None = None  # the node set its section names (None: every node)
    scope_nodes: frozenset[str] | None = field(default=None, repr=False, compare=False)
    scope_order: int = 0  # 0 outside the sections, else the section's place in the file

    @property
    def label(self) -> str:
        return self.series if self.scope is None else f"{self.series} on {self.scope}"

    def error(self, problem: str) -> ExpectationError:
        return ExpectationError(self.source, problem, key=f"{TARGETS_KEY}: {self.label}", line=self.line)

    def threshold(self, bound: str, unit: str) -> float | None:
        """The bound (min or max) in ``unit``, the series' unit."""
        written = self.minimum if bound == "min" else self.maximum
        if written is None:
            return None
        number, written_unit = _amount(written)
        if number is None:
            raise self.error(f"{bound} must be a number, with or without a unit (180 GB/s), got {quote(written)}")
        if not written_unit:
            return number
        try:
            return convert(number, written_unit, unit)
        except (UnknownUnitError, ValueError) as err:
            raise self.error(f"{bound} {quote(written)}: {err}") from None


def _amount(text: str) -> tuple[float | None, str]:
    match = _AMOUNT.match(text)
    if match is None:
        return None, ""
    return parse_number(match.group(1)), match.group(2)


# ---------------------------------------------------------------- loading


def load_targets(path: str | Path) -> list[Target]:
    """The benchmark targets of an expectations file (none when it has no
    ``benchmarks`` section)."""
    try:
        text = read_text(path)
    except InputError as err:
        raise ExpectationError(plain_path(path), f"cannot read the file: {err.detail}") from None
    return parse_targets(text, source=plain_path(path))


def parse_targets(text: str, source: str = "<expectations>") -> list[Target]:
    """The targets of expectations text: the top ``benchmarks`` section, then
    each ``nodes`` section's, in the file's order."""
    root, data = read_document(text, source)
    if root is None or data is None:
        return []
    targets = _targets_of(root, source)
    scopes = _value_node(root, SCOPES_KEY)
    if isinstance(scopes, yaml.MappingNode):
        for order, (nodeset_node, section_node) in enumerate(scopes.value, start=1):
            nodeset = str(nodeset_node.value)
            if not isinstance(section_node, yaml.MappingNode) or _value_node(section_node, TARGETS_KEY) is None:
                continue
            try:
                members = frozenset(expand(nodeset))
            except NodeNameError as err:
                raise ExpectationError(source, f"not a node set: {err}", key=nodeset,
                                       line=nodeset_node.start_mark.line + 1) from None
            targets += [Target(t.series, t.minimum, t.maximum, source, t.line, nodeset, members, order)
                        for t in _targets_of(section_node, source)]
    return targets


def _value_node(mapping: yaml.MappingNode, key: str) -> yaml.Node | None:
    return next((value for name, value in mapping.value if name.value == key), None)


def _targets_of(mapping: yaml.MappingNode, source: str) -> list[Target]:
    """The targets of one mapping's ``benchmarks`` key."""
    section = _value_node(mapping, TARGETS_KEY)
    if section is None:
        return []
    line = section.start_mark.line + 1
    if not isinstance(section, yaml.MappingNode):
        raise ExpectationError(source, "expected a mapping of series names to {min: ...} and/or {max: ...}",
                               key=TARGETS_KEY, line=line)
    key_lines(section, source)  # a series given twice is an error
    targets = []
    for name_node, value_node in section.value:
        name = str(name_node.value)
        where = name_node.start_mark.line + 1

        def error(problem: str) -> ExpectationError:
            return ExpectationError(source, problem, key=f"{TARGETS_KEY}: {name}", line=where)  # noqa: B023

        if not isinstance(name_node, yaml.ScalarNode) or not name:
            raise error("a series name must be a non-empty string")
        if not isinstance(value_node, yaml.MappingNode):
            raise error("expected {min: VALUE} and/or {max: VALUE} (VALUE with or without a unit: 180 GB/s)")
        bounds: dict[str, str] = {}
        for bound_node, amount_node in value_node.value:
            bound = str(bound_node.value)
            if bound not in BOUNDS:
                raise error(f"unknown option {quote(bound)} (a target holds min and/or max)")
            if not isinstance(amount_node, yaml.ScalarNode) or _amount(str(amount_node.value))[0] is None:
                shown = amount_node.value if isinstance(amount_node, yaml.ScalarNode) else "a list or mapping"
                raise error(f"{bound} must be a number, with or without a unit (180 GB/s), got {quote(shown)}")
            bounds[bound] = str(amount_node.value)
        if not bounds:
            raise error("no bound given: write {min: VALUE} and/or {max: VALUE}")
        target = Target(name, bounds.get("min"), bounds.get("max"), source, where)
        low, high = (_amount(bounds[b])[0] if b in bounds else None for b in BOUNDS)
        same_unit = "min" in bounds and "max" in bounds and _amount(bounds["min"])[1] == _amount(bounds["max"])[1]
        if same_unit and low is not None and high is not None and low > high:
            raise error(f"min {bounds['min']} is above max {bounds['max']}")
        for bound in bounds:  # a unit that is no unit is refused now, not after the benchmarks ran
            unit = _amount(bounds[bound])[1]
            if unit:
                try:
                    canonical_unit(unit)
                except UnknownUnitError as err:
                    raise error(f"{bound} {quote(bounds[bound])}: {err}") from None
        targets.append(target)
    return targets


# ---------------------------------------------------------------- checking


def check_targets(targets: Sequence[Target], series: Iterable[Series],
                  may_be_absent: Callable[[str], bool] | None = None) -> list[Finding]:
    """A ``below-target`` finding for each target's labels under its min and
    an ``above-target`` one for those over its max.  A target naming no
    series is an error unless ``may_be_absent(name)`` (a check's series it
    did not measure); a label without a value misses nothing."""
    by_name: dict[str, list[Series]] = defaultdict(list)
    for one in series:
        by_name[one.name].append(one)
    findings = []
    for name in dict.fromkeys(t.series for t in targets):
        mine = [t for t in targets if t.series == name]
        if not by_name.get(name):
            if may_be_absent is not None and may_be_absent(name):
                continue
            known = ", ".join(sorted(by_name)[:12]) or "none"
            more = f" and {len(by_name) - 12} more" if len(by_name) > 12 else ""
            raise mine[0].error(f"no series named {quote(name)} in the results (series, as `oddnode stats` "
                                f"names them: {known}{more})")
        for one in by_name[name]:
            findings += _judge_series(one, mine)
    return findings


def _governing(targets: Sequence[Target], members: tuple[str, ...]) -> Target | None:
    """The last section (in the file's order) naming every node of a label."""
    owner = None
    for target in sorted(targets, key=lambda t: t.scope_order):
        if target.scope_nodes is None or all(node in target.scope_nodes for node in members):
            owner = target
    return owner


def _members(label: str, series: Series) -> tuple[str, ...]:
    try:
        return label_members(label, series.label_kind)
    except NodeNameError:
        return (label,)


def _judge_series(series: Series, targets: Sequence[Target]) -> list[Finding]:
    governed: dict[int, list[int]] = defaultdict(list)
    for index, (label, value) in enumerate(zip(series.labels, series.values)):
        owner = _governing(targets, _members(str(label), series)) if math.isfinite(value) else None
        if owner is not None:
            governed[id(owner)].append(index)
    findings = []
    for target in targets:
        judged = governed.get(id(target), [])
        for bound in BOUNDS:
            threshold = target.threshold(bound, series.unit)
            if threshold is None or not judged:
                continue
            values = series.values[judged]
            missed = values < threshold if bound == "min" else values > threshold
            if missed.any():
                findings.append(_finding(series, target, bound, threshold, [judged[i] for i in np.flatnonzero(missed)],
                                         len(judged)))
    return findings


def _shown(value: float) -> str:
    """Four significant digits without an exponent for everyday sizes: 14620, 1.85."""
    return f"{float(f'{value:.4g}'):g}"


def _finding(series: Series, target: Target, bound: str, threshold: float, missed: list[int],
             judged: int) -> Finding:
    labels = [str(series.labels[i]) for i in missed]
    values = series.values[missed]
    nodes = fold(node for label in labels for node in _members(label, series))
    median = float(np.median(values))
    # How far the missing labels' median falls short, as a fraction of the target.
    shortfall = (threshold - median) / abs(threshold) if bound == "min" else (median - threshold) / abs(threshold)
    unit = f" {series.unit}" if series.unit else ""
    scope = f" on {target.scope}" if target.scope is not None else ""
    counted = f"all {judged}" if len(labels) == judged else f"{len(labels)} of {judged}"
    population = "" if series.label_kind.value == "node" else f" {series.label_kind.value}s"
    wanted = "at least" if bound == "min" else "at most"
    where = f"{target.source}" + (f" (line {target.line})" if target.line is not None else "")
    return Finding(
        kind=BELOW_TARGET if bound == "min" else ABOVE_TARGET,
        severity=Severity.ERROR,
        subject=series.name,
        nodes=nodes,
        message=(f"{series.name} must be {wanted} {format_number(threshold)}{unit}{scope}; {counted}{population} "
                 f"miss it, median {_shown(median)}{unit}: {shortfall:.1%} {'short' if bound == 'min' else 'over'}"),
        evidence={
            "target": {bound: threshold},
            "written": target.minimum if bound == "min" else target.maximum,
            "unit": series.unit,
            **({"scope": target.scope} if target.scope is not None else {}),
            "median": median,
            "shortfall": shortfall,
            "worst": float(values.min() if bound == "min" else values.max()),
            "missed": len(labels),
            "judged": judged,
        },
        remedy=(f"Find why {nodes} {'fall short of' if bound == 'min' else 'exceed'} the target for {series.name}: "
                "compare their firmware, BIOS power and performance profile, clocks, memory population and "
                "cabling with what the target was measured on; when every node misses it, the cause is "
                f"cluster-wide (a setting, a driver, the benchmark's build). If the target is out of date, "
                f"edit it in {where}."),
    )


# ---------------------------------------------------------------- writing


def _round_out(value: float, down: bool) -> float:
    """``value`` at TARGET_DIGITS significant digits, rounded outwards."""
    if value == 0 or not math.isfinite(value):
        return value
    scale = 10 ** (TARGET_DIGITS - 1 - math.floor(math.log10(abs(value))))
    return (math.floor if down else math.ceil)(value * scale) / scale


def targets_text(series: Iterable[Series], margin: float = TARGET_MARGIN) -> str:
    """A ``benchmarks`` section from accepted results: per series a min at the
    median less ``margin`` (a max above it for lower-is-better series), or
    further out where a label of these results lies beyond, so the results
    it was written from meet it."""
    lines = [
        "# oddnode benchmark targets, from an accepted check: the least (most, for lower-is-better",
        f"# series) every node must reach, the median {margin:.0%} away or the furthest node's value.",
        "# Raise them to the vendor's figures where those are known.",
        f"{TARGETS_KEY}:",
    ]
    written = 0
    for one in sorted(series, key=lambda s: s.name):
        finite = one.values[np.isfinite(one.values)]
        if not len(finite):
            continue
        median = float(np.median(finite))
        if median <= 0:
            lines.append(f"  # {one.name}: median {median:g}: no target relative to it")
            continue
        higher = one.direction is Direction.HIGHER
        bound = min(median * (1 - margin), float(finite.min())) if higher else max(median * (1 + margin),
                                                                                    float(finite.max()))
        amount = format_number(_round_out(bound, down=higher)) + (f" {one.unit}" if one.unit else "")
        key = yaml.safe_dump(one.name, default_flow_style=True).removesuffix("\n...\n").strip()
        value = yaml.safe_dump({"min" if higher else "max": amount}, default_flow_style=True, width=math.inf).strip()
        unit = f" {one.unit}" if one.unit else ""
        lines.append(f"  {key}: {value}  # median {_shown(median)}{unit} over {len(finite)} {one.label_kind.value}s")
        written += 1
    if not written:
        lines[-1] = f"{TARGETS_KEY}: {{}}  # no results to draw targets from"
    return "\n".join(lines) + "\n"

