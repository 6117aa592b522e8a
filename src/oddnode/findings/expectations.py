"""What the nodes' facts should be: a YAML file of expectations, checked
against an inventory, and written from a cluster's majority values.

A file maps fact keys to expectations::

    smt: off                    # exact value (a string, whatever YAML 1.1 says)
    kernel: "6.1.*"             # a value with * ? [ is an fnmatch glob
    gpu_count: 8                # numbers compare as numbers: 8 == 8.0
    memory_total_kb: {min: 257000000}
    cpu_governor: {in: [performance, ondemand]}
    memory_total_gib: {equals: 251.5, tolerance: 0.02}

A mapping may hold min, max, equals, match (glob), regex (searched), in (a
list of values) and tolerance (relative, with a numeric equals); all the
conditions it holds must be met.  Checking is a pure function of the facts.

The key ``nodes`` holds sections that apply to a node set only (ClusterShell
syntax, as -w takes), so that partitions can differ::

    nodes:
      "gpu[001-016]":
        gpu_count: 8
      "cpu[001-512],bigmem[01-04]":
        memory_total_kb: {min: 257000000}

For each node and key, the last section (in the file's order) that names the
node and sets the key decides; a node in no section has the expectations
outside ``nodes`` only.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

from oddnode.onnode import fact_rules
from oddnode.onnode.node_probe import SENSOR_PREFIX
from oddnode.findings.facts import MESSAGE_VALUES, NOT_REPORTED, one_value, parse_number, written_decimals
from oddnode.findings.processes import NOT_RUNNING, SAMPLED_PREFIX, is_process_key, process_reporting_nodes
from oddnode.findings.registry import first_few
from oddnode.core.model import Finding, Severity
from oddnode.core.inputs import InputError, plain_path, quote, read_text
from oddnode.core.nodes import NodeNameError, expand, fold

__all__ = [
    "Expectation",
    "ExpectationError",
    "ExpectationReport",
    "check_expectations",
    "load_expectations",
    "parse_expectations",
    "snapshot",
]

OPTIONS = fact_rules.CONDITIONS
SCOPES_KEY = "nodes"  # the section of expectations scoped by node set
TARGETS_KEY = "benchmarks"  # the benchmark targets' section (findings/targets.py), at the top and in a scope
GLOB_CHARACTERS = frozenset("*?[")
# Keys that differ on every node by nature (addresses, serial numbers, the
# CPU time a command used while the probe sampled, sensor readings): a snapshot never expects
# their majority value.
UNIQUE_KEYS = ("hostname", "*.mac", "*.address", "*serial*", "*uuid*", "*guid*", SAMPLED_PREFIX + "*",
               SENSOR_PREFIX + "*")


class ExpectationError(ValueError):
    """An expectations file that cannot be used: names the file, the key and the line."""

    def __init__(self, source: str, problem: str, key: str | None = None, line: int | None = None) -> None:
        self.source = source
        self.key = key
        self.line = line
        self.problem = problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {key}: {problem}" if key is not None else f"{where}: {problem}")


class _Loader(yaml.SafeLoader):
    """YAML that keeps scalars as the text written: `smt: off` means "off",
    not False (YAML 1.1), and `bios_version: 1.10` stays "1.10", not 1.1.
    Whether a value is a number is decided when comparing."""


def _as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)


for _tag in ("bool", "int", "float", "timestamp"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _as_text)


def _fraction(text: str) -> float | None:
    """A relative tolerance written as 0.02 or 2%."""
    text = text.strip()
    if text.endswith("%"):
        percent = parse_number(text[:-1])
        return percent / 100 if percent is not None else None
    return parse_number(text)


@dataclass(frozen=True)
class Expectation:
    """The conditions one fact key must meet on every node."""

    key: str
    equals: str | None = None
    match: str | None = None
    regex: str | None = None
    one_of: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    tolerance: float | None = None
    source: str | None = None
    line: int | None = None
    scope: str | None = None  # the node set its section names, as written (None: every node)
    scope_nodes: frozenset[str] | None = field(default=None, repr=False, compare=False)
    scope_order: int = 0  # 0 outside the sections, else the section's place in the file (1, 2, ...)

    @property
    def label(self) -> str:
        """The key, and the node set of its section: 'gpu_count on gpu[001-016]'."""
        return self.key if self.scope is None else f"{self.key} on {self.scope}"

    def accepts(self, value: str) -> bool:
        """Whether one node's value meets every condition."""
        return fact_rules.accepts(self.as_dict(), value)

    def describe(self) -> str:
        """The conditions in words: 'be off', 'match 6.1.*', 'be between 1 and 2'."""
        return fact_rules.describe(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        """The conditions as the file's options (JSON-safe, for evidence)."""
        options: dict[str, Any] = {}
        for name, value in (
            ("equals", self.equals),
            ("match", self.match),
            ("regex", self.regex),
            ("in", list(self.one_of) if self.one_of is not None else None),
            ("min", self.minimum),
            ("max", self.maximum),
            ("tolerance", self.tolerance),
        ):
            if value is not None:
                options[name] = value
        return options


@dataclass
class ExpectationReport:
    """Violated expectations as findings (worst first), and the keys every node met."""

    failures: list[Finding] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


# ---------------------------------------------------------------- loading


def load_expectations(path: str | Path) -> dict[str, Expectation]:
    """Expectations from a YAML file, key -> Expectation, validated."""
    try:
        text = read_text(path)
    except InputError as err:
        raise ExpectationError(plain_path(path), f"cannot read the file: {err.detail}") from None
    return parse_expectations(text, source=plain_path(path))


def parse_expectations(text: str, source: str = "<expectations>") -> dict[str, Expectation]:
    """Expectations from YAML text; ``source`` names it in errors.  The
    benchmark targets (the ``benchmarks`` sections) are left to
    :mod:`oddnode.findings.targets`."""
    root, data = read_document(text, source)
    if data is None:
        return {}
    lines = key_lines(root, source)
    data.pop(TARGETS_KEY, None)
    scopes = data.pop(SCOPES_KEY, None)
    expectations = _section(data, lines, source)
    if scopes is not None:
        scope_node = next(value for key, value in root.value if key.value == SCOPES_KEY)
        expectations.update(_scoped_sections(scopes, scope_node, source, lines[SCOPES_KEY]))
    return expectations


def read_document(text: str, source: str) -> tuple[yaml.MappingNode | None, dict | None]:
    """An expectations file's YAML: its root node (for the keys' lines) and
    its mapping, None for an empty file; anything but a mapping is refused."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        raise ExpectationError(
            source, f"not valid YAML: {err.problem or err.context}", line=mark.line + 1 if mark else None
        ) from None
    except yaml.YAMLError as err:
        raise ExpectationError(source, f"not valid YAML: {quote(str(err))}") from None
    except RecursionError:
        raise ExpectationError(source, "not valid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    if data is None:
        return None, None
    if not isinstance(root, yaml.MappingNode) or not isinstance(data, dict):
        raise ExpectationError(source, "expected a mapping of fact keys to expectations", line=root.start_mark.line + 1)
    return root, data


def key_lines(node: yaml.MappingNode, source: str) -> dict[str, int]:
    """Each key's line; a key given twice is an error."""
    lines: dict[str, int] = {}
    for key_node, _ in node.value:
        key = str(key_node.value)
        line = key_node.start_mark.line + 1
        if key in lines:
            raise ExpectationError(source, f"given twice (lines {lines[key]} and {line})", key=key, line=line)
        lines[key] = line
    return lines


def _section(data: dict, lines: Mapping[str, int], source: str) -> dict[str, Expectation]:
    """One mapping of fact keys to expectations, sorted by key."""
    expectations = {}
    for key, value in data.items():
        if not isinstance(key, str) or not key:
            raise ExpectationError(source, f"a fact key must be a non-empty string, got {quote(key)}")
        expectations[key] = _expectation(key, value, source, lines.get(key))
    return {key: expectations[key] for key in sorted(expectations)}


def _scoped_sections(scopes: Any, node: yaml.Node, source: str, line: int) -> dict[str, Expectation]:
    """The ``nodes`` sections, in the file's order, each expectation labelled with its node set."""
    if not isinstance(scopes, dict) or not isinstance(node, yaml.MappingNode):
        raise ExpectationError(source, "expected a mapping of node sets to expectations", key=SCOPES_KEY, line=line)
    scope_lines = key_lines(node, source)
    expectations: dict[str, Expectation] = {}
    for order, ((nodeset, section), (_, section_node)) in enumerate(zip(scopes.items(), node.value), start=1):
        where = scope_lines.get(str(nodeset))
        try:
            members = frozenset(expand(str(nodeset)))
        except NodeNameError as err:
            raise ExpectationError(source, f"not a node set: {err}", key=str(nodeset), line=where) from None
        if not members:
            raise ExpectationError(source, "the node set is empty", key=str(nodeset), line=where)
        if not isinstance(section, dict) or not isinstance(section_node, yaml.MappingNode):
            raise ExpectationError(source, "expected a mapping of fact keys to expectations", key=str(nodeset),
                                   line=where)
        section = {key: value for key, value in section.items() if key != TARGETS_KEY}
        for key, expectation in _section(section, key_lines(section_node, source), source).items():
            scoped = dataclasses.replace(expectation, scope=str(nodeset), scope_nodes=members, scope_order=order)
            expectations[scoped.label] = scoped
    return expectations


def governed_nodes(expectations: Mapping[str, Expectation] | Iterable[Expectation],
                   nodes: Iterable[str]) -> list[tuple[Expectation, list[str]]]:
    """Each expectation with the nodes it decides for, sorted by key then
    section: per node and key, the last section that names the node wins over
    earlier ones and over the expectations outside the sections.  An
    expectation that decides for none of ``nodes`` is left out."""
    items = list(expectations.values()) if isinstance(expectations, Mapping) else list(expectations)
    checked = sorted(set(nodes))
    owner: dict[tuple[str, str], Expectation] = {}
    for expectation in sorted(items, key=lambda e: e.scope_order):
        for node in checked:
            if expectation.scope_nodes is None or node in expectation.scope_nodes:
                owner[expectation.key, node] = expectation
    governed: dict[int, list[str]] = defaultdict(list)
    for (_, node), expectation in owner.items():
        governed[id(expectation)].append(node)
    return [(e, sorted(governed[id(e)])) for e in sorted(items, key=lambda e: (e.key, e.scope_order))
            if governed.get(id(e))]


def _expectation(key: str, value: Any, source: str, line: int | None) -> Expectation:
    def error(problem: str) -> ExpectationError:
        return ExpectationError(source, problem, key=key, line=line)

    if value is None:
        raise error("no expectation given")
    if isinstance(value, str):
        if GLOB_CHARACTERS.intersection(value):
            return Expectation(key, match=value, source=source, line=line)
        return Expectation(key, equals=value, source=source, line=line)
    if isinstance(value, list):
        raise error("a list is not an expectation; for one of several values write {in: [...]}")
    if not isinstance(value, dict):
        raise error(f"expected a value or a mapping of {', '.join(OPTIONS)}, got {type(value).__name__}")
    unknown = sorted(str(name) for name in value if name not in OPTIONS)
    if unknown:
        raise error(f"unknown option {', '.join(unknown)} (known: {', '.join(OPTIONS)})")
    if not set(value) - {"tolerance"}:
        raise error(f"no condition given: use one of {', '.join(o for o in OPTIONS if o != 'tolerance')}")

    def text(name: str) -> str | None:
        if name not in value:
            return None
        item = value[name]
        if item is None or isinstance(item, (list, dict)):
            raise error(f"{name} must be a single value, got {quote(item)}")
        return str(item)

    def number(name: str) -> float | None:
        item = text(name)
        if item is None:
            return None
        parsed = parse_number(item)
        if parsed is None:
            raise error(f"{name} must be a number, got {quote(item)}")
        return parsed

    equals, match, regex = text("equals"), text("match"), text("regex")
    minimum, maximum = number("min"), number("max")
    if minimum is not None and maximum is not None and minimum > maximum:
        raise error(f"min {fact_rules.format_number(minimum)} is above max {fact_rules.format_number(maximum)}")
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as err:
            raise error(f"regex {quote(regex)} does not compile: {err}") from None
    one_of = None
    if "in" in value:
        choices = value["in"]
        if not isinstance(choices, list) or not choices:
            raise error("in must be a non-empty list of values")
        if any(choice is None or isinstance(choice, (list, dict)) for choice in choices):
            raise error("in must list single values")
        one_of = tuple(str(choice) for choice in choices)
    tolerance = None
    if "tolerance" in value:
        raw = text("tolerance") or ""
        tolerance = _fraction(raw)
        if tolerance is None or not 0 <= tolerance < 1:
            raise error(f"tolerance must be a fraction in [0, 1) such as 0.02 or 2%, got {quote(raw)}")
        if equals is None or parse_number(equals) is None:
            raise error("tolerance needs a numeric equals to be relative to")
    return Expectation(
        key, equals=equals, match=match, regex=regex, one_of=one_of, minimum=minimum, maximum=maximum,
        tolerance=tolerance, source=source, line=line,
    )


# ---------------------------------------------------------------- checking


def _value_order(item: tuple[str, list[str]]) -> tuple[int, str]:
    value, nodes = item
    return (-len(nodes), value)


def check_expectations(
    expectations: Mapping[str, Expectation] | Iterable[Expectation],
    facts: Mapping[str, Mapping[str, str]],
    nodes: Iterable[str],
) -> ExpectationReport:
    """Check every expectation on every node: one ERROR finding per violated
    key; a node without the fact violates it, shown as "(not reported)" (for
    process.* keys on a node that reported its processes: "not running")."""
    process_nodes = process_reporting_nodes({key: dict(per_node) for key, per_node in facts.items()})
    report = ExpectationReport()
    for expectation, checked in governed_nodes(expectations, nodes):
        key = expectation.key
        per_node = facts.get(key, {})
        violations: dict[str, list[str]] = defaultdict(list)
        for node in checked:
            value = per_node.get(node)
            if value is None:
                if is_process_key(key) and node in process_nodes:
                    value = NOT_RUNNING
                else:
                    violations[NOT_REPORTED].append(node)
                    continue
            if not expectation.accepts(str(value)):
                violations[str(value)].append(node)
        if not violations:
            report.passed.append(expectation.label)
            continue
        ranked = sorted(violations.items(), key=_value_order)
        folded = {value: fold(members) for value, members in ranked}
        odd_nodes = fold(node for members in violations.values() for node in members)
        wanted = expectation.describe()
        shown = first_few([f"{members}: {value}" for value, members in folded.items()], MESSAGE_VALUES,
                          separator="; ", rest="more values")
        where = f" in {expectation.source}" if expectation.source else ""
        if expectation.line is not None:
            where += f" (line {expectation.line})"
        scope = f" on {expectation.scope}" if expectation.scope is not None else ""
        report.failures.append(
            Finding(
                kind="expectation",
                severity=Severity.ERROR,
                subject=key,
                nodes=odd_nodes,
                message=f"{key} must {wanted}{scope}; {shown}",
                evidence={
                    "expected": expectation.as_dict(),
                    **({"scope": expectation.scope} if expectation.scope is not None else {}),
                    "violations": folded,
                    "passed": len(checked) - sum(len(members) for members in violations.values()),
                },
                remedy=(
                    f"Bring {key} on {odd_nodes} to what is expected ({wanted}): fix the configuration, "
                    f"update firmware or replace parts; if the expectation is out of date, edit it{where}."
                ),
            )
        )
    return report


# ---------------------------------------------------------------- writing


def _flow(value: Any) -> str:
    """A value as inline YAML, quoted where YAML would misread it ('off', 'null')."""
    text = yaml.safe_dump(value, default_flow_style=True, width=math.inf, allow_unicode=True, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").rstrip("\n")


def _dump_entry(key: str, value: Any) -> str:
    """One `key: value` line of YAML."""
    return f"{_flow(key)}: {_flow(value)}"


def _written_value(value: str) -> str:
    """How a snapshot writes one value: numbers as their text (1.10 stays 1.10:
    the loader keeps numbers as text), globs and empty text as {equals: ...}."""
    if parse_number(value) is not None:
        return value
    if not value or GLOB_CHARACTERS.intersection(value):
        return _flow({"equals": value})
    return _flow(value)


def _bound(number: float, decimals: int, down: bool) -> int | float:
    """``number`` rounded down (or up) at ``decimals`` digits: a bound that
    still holds every value it was drawn around."""
    scale = 10**decimals
    rounded = (math.floor if down else math.ceil)(number * scale) / scale
    return int(rounded) if decimals == 0 else round(rounded, decimals)


def snapshot(facts: Mapping[str, Mapping[str, str]], nodes: Iterable[str]) -> str:
    """A YAML expectations text from the values held by a majority of ``nodes``.

    Keys unique by nature (addresses, serial numbers) and keys absent on
    most nodes are left out; numbers that jitter, are close integers or are rounded (see
    :mod:`oddnode.findings.facts`) become the band the analysis counts as
    one value, with a comment saying so.
    """
    members = sorted(set(nodes))
    lines = [
        "# oddnode expectations: what every node should be.",
        f"# Written from the values a majority of {len(members)} nodes hold: edit it to say what the",
        "# cluster SHOULD be (delete what does not matter, widen what may vary), then check against it.",
        "# A value is exact (with * ? [ a glob); a mapping may hold min, max, equals, match, regex,",
        "# in (a list) and tolerance (relative, with equals).",
        "",
    ]
    for key in sorted(facts):
        if any(fnmatchcase(key, pattern) for pattern in UNIQUE_KEYS):
            continue
        per_node = {node: str(facts[key][node]) for node in members if node in facts[key]}
        if 2 * len(per_node) <= len(members):
            continue  # absent on most nodes: nothing to expect of all of them
        counts = Counter(per_node.values())
        merged = one_value(counts) if len(counts) > 1 else None
        if merged is not None and 2 * sum(counts[text] for text in merged.members) > len(members):
            decimals = max(written_decimals(text) for text in merged.members)
            low, high = merged.band
            lines.append(f"# {key}: {merged.low} to {merged.high} on the nodes, one value ({merged.reason}): "
                         "the band the analysis allows")
            lines.append(_dump_entry(key, {"min": _bound(low, decimals, down=True),
                                           "max": _bound(high, decimals, down=False)}))
            continue
        value, count = min(counts.items(), key=lambda item: (-item[1], item[0]))
        if 2 * count <= len(members):
            lines.append(f"# {key}: no value held by a majority ({len(counts)} different values); left out")
            continue
        lines.append(f"{_flow(key)}: {_written_value(value)}")
    return "\n".join(lines) + "\n"
