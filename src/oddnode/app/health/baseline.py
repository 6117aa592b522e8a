"""A health baseline: what a node should show a quick health check, taken
from the last full check of the cluster, in one small YAML file that every
node can read without the results store.

::

    # oddnode health baseline
    source: {store: /shared/oddnode.duckdb, check: 12, nodes: "cn[001-128]", written: 2026-11-26T09:00:00+00:00}
    expect: |                     # the facts a majority held, as an expectations file
      cpu_model: "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"
      memory_total_kb: 196481000
    memory:                       # the check's memory kernel, and its triad across the nodes
      options: {elements: 40000000, threads: null}
      triad: {median: 181234.5, mad: 812.3, nodes: 128, unit: MB/s, minimum: 144987.6}

A node passes the memory check when its triad is at least ``minimum``:
the cluster's median less ``max(tolerance, 5 robust sigmas)`` of it,
so a healthy cluster's spread never drains a node and a node at a
fraction of the others' bandwidth (a failed DIMM channel set, a competing
process, a throttled socket) always is.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from oddnode.core.inputs import InputError, parse_yaml, plain_path, quote, read_text
from oddnode.findings.expectations import Expectation, ExpectationError, parse_expectations, snapshot
from oddnode.core.model import LabelKind
from oddnode.core.nodes import NodeNameError, expand, fold, label_members, validate_node_name

MEMORY_SERIES = "memory.triad"
# The drop below the cluster's median a healthy node never shows in a
# short run: a health check drains production nodes, so it leaves the
# small deviations to the full check and names only gross ones.
DEFAULT_TOLERANCE = 0.20
# Robust sigmas below the median that still count as the cluster's own
# spread (1.4826 x MAD estimates a normal sigma; 5 of them are the
# outlier rule's threshold at small populations).
ROBUST_SIGMAS = 5.0
MAD_TO_SIGMA = 1.4826
# The memory kernel's options a health run takes over from the check: the
# array size and threads make its bandwidth comparable; fewer, shorter
# iterations keep it to seconds.
CARRIED_OPTIONS = ("elements", "threads", "min_loop_seconds", "cpu_node", "mem_node")
# The facts a node loses by a fault or a reboot into the wrong settings:
# its CPUs and their settings, its memory and DIMMs, its links, GPUs and
# disks.  Not the software a site rolls out on purpose (kernel, libraries,
# OS, microcode, firmware): a rolling update would drain every node still
# waiting for it; the full check and an expectations file judge those.
HEALTH_FACTS = (
    "cpu_model", "cpu_sockets", "cpu_cores", "cpu_threads", "smt", "cpu_governor", "cpu_mhz_max",
    "numa_nodes", "numa.*.cpus", "dimm_layout", "dimm_sizes", "dimm_speed", "hugepage_size_kb", "hugepages_total",
    "transparent_hugepages", "edac_ue", "nic.*.state", "nic.*.speed", "nic.*.mtu", "ib.*.state", "ib.*.rate",
    "gpu_count", "gpu.*.model", "gpu.*.memory", "gpu.*.ecc", "disk.*.size_gb",
)
# Facts compared within a relative tolerance: the memory the kernel reports
# moves by a few MB with its version and reservations; a missing DIMM
# takes a sixteenth or more.
TOLERANCES = {"memory_total_kb": 0.02}
HEADER = "# oddnode health baseline: what `oddnode health` compares this node with (docs/commands.md)\n"


class BaselineError(ValueError):
    """A baseline that cannot be written or read; names the file and the key."""


@dataclass(frozen=True)
class MemoryBaseline:
    """The cluster's triad bandwidth in the check and the least a node may show."""

    median: float
    mad: float
    nodes: int
    unit: str
    minimum: float
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_values(cls, values: np.ndarray, unit: str, options: dict[str, Any],
                    tolerance: float = DEFAULT_TOLERANCE) -> "MemoryBaseline":
        median = float(np.median(values))
        mad = float(np.median(np.abs(values - median)))
        margin = max(tolerance * median, ROBUST_SIGMAS * MAD_TO_SIGMA * mad)
        return cls(median=median, mad=mad, nodes=len(values), unit=unit, minimum=max(median - margin, 0.0),
                   options=options)


@dataclass(frozen=True)
class Baseline:
    """The facts expected of every node, and the memory bandwidth (None when
    the check measured none)."""

    expect: dict[str, Expectation]
    memory: MemoryBaseline | None
    source: dict[str, Any]
    expect_text: str = ""


def baseline_from_store(store, path_label: str, tolerance: float = DEFAULT_TOLERANCE) -> tuple[Baseline, str]:
    """The baseline of the newest check in ``store``, and its YAML text."""
    from oddnode.measure.plan import CheckPlan

    latest = store.latest_check()
    if latest is None:
        raise BaselineError(f"{path_label} holds no check: run `oddnode check` first (the baseline is its result)")
    check_id, _, target, plan_json = latest
    facts = store.load_facts()
    nodes = sorted(expand_target_nodes(target) or {node for per_node in facts.values() for node in per_node})
    if not facts or not nodes:
        raise BaselineError(f"{path_label}: check {check_id} stored no facts (did its diagnostics run?)")
    expect_text = health_expectations(facts, nodes)
    memory = None
    triad = next((series for series in store.load_series()
                  if series.benchmark == MEMORY_SERIES and series.label_kind is LabelKind.NODE), None)
    if triad is not None:
        # The check's memory options (their defaults when it ran no memory
        # step: a plan sets options only of the steps it runs).  A loop time
        # of 0 is the kernel's own default: nothing to carry.
        options = dataclasses.asdict(CheckPlan.from_json(plan_json).options("memory"))
        carried = {key: options[key] for key in CARRIED_OPTIONS
                   if options[key] is not None and not (key == "min_loop_seconds" and options[key] == 0)}
        finite = triad.values[np.isfinite(triad.values)]
        if len(finite):
            memory = MemoryBaseline.from_values(finite, triad.unit, carried, tolerance)
    source = {"store": path_label, "check": check_id, "nodes": fold(nodes),
              "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    baseline = Baseline(expect=parse_expectations(expect_text, source=path_label), memory=memory, source=source,
                        expect_text=expect_text)
    return baseline, baseline_text(baseline)


def baseline_targets(store) -> str:
    """The benchmark targets (an expectations file's ``benchmarks`` section)
    of the newest check's results, restricted to its nodes."""
    from oddnode.findings.targets import targets_text

    latest = store.latest_check()
    if latest is None:
        raise BaselineError("the store holds no check: run `oddnode check` first")
    nodes = set(expand_target_nodes(latest[2]))

    def checked(label: str, series) -> bool:
        try:
            return not nodes or set(label_members(label, series.label_kind)) <= nodes
        except NodeNameError:
            return False

    series = []
    for one in store.load_series():
        kept = np.array([checked(str(label), one) for label in one.labels], dtype=bool)
        if kept.any():
            series.append(dataclasses.replace(one, labels=one.labels[kept], values=one.values[kept],
                                              repetitions=one.repetitions[kept],
                                              spread=one.spread[kept] if one.spread is not None else None))
    return targets_text(series)


def health_expectations(facts: dict[str, dict[str, str]], nodes: list[str]) -> str:
    """The expectations text of the facts a health check compares (HEALTH_FACTS
    as a majority of ``nodes`` holds them; TOLERANCES' keys within their band)."""
    kept = {key: per_node for key, per_node in facts.items()
            if any(fnmatchcase(key, pattern) for pattern in HEALTH_FACTS)}
    lines = [snapshot(kept, nodes).rstrip("\n")]
    for key, tolerance in TOLERANCES.items():
        values = Counter(facts.get(key, {}).get(node) for node in nodes)
        values.pop(None, None)
        if not values:
            continue
        value, count = values.most_common(1)[0]
        try:
            number = float(value)
        except ValueError:
            continue
        if 2 * count > len(nodes):
            lines.append(f"{key}: {{equals: {value}, tolerance: {tolerance}}}  # within {tolerance:.0%} of "
                         f"{number:,.0f}")
    return "\n".join(lines) + "\n"


def expand_target_nodes(target: dict[str, Any]) -> list[str]:
    """The nodes a stored check description names: a store is data, so a
    list is checked name by name and a node set never resolves groups."""
    nodes = target.get("nodes")
    if isinstance(nodes, list):
        return [validate_node_name(str(node)) for node in nodes]
    return expand(nodes) if isinstance(nodes, str) and nodes else []


def baseline_text(baseline: Baseline) -> str:
    """The YAML file of a baseline: the source, the expectations text (a
    snapshot, its comments kept) as the block ``expect``, the memory section."""
    lines = [HEADER.rstrip("\n"), "source: " + _flow(baseline.source)]
    body = [line for line in baseline.expect_text.splitlines() if line.strip()]
    lines.append("expect: |")
    lines += [f"  {line}" for line in body] or ["  # nothing expected"]
    if baseline.memory is not None:
        m = baseline.memory
        lines.append("memory:")
        lines.append("  options: " + _flow(m.options))
        lines.append("  triad: " + _flow({"median": round(m.median, 1), "mad": round(m.mad, 1), "nodes": m.nodes,
                                          "unit": m.unit, "minimum": round(m.minimum, 1)}))
    return "\n".join(lines) + "\n"


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf, sort_keys=False).strip()


def read_baseline(path: str | Path) -> Baseline:
    """A baseline file; BaselineError naming the file and what is wrong."""
    name = plain_path(path)
    try:
        text = read_text(path)
    except InputError as err:
        raise BaselineError(f"cannot read the baseline {name}: {err.detail}") from None
    try:
        document = parse_yaml(text, name)
    except InputError as err:
        raise BaselineError(str(err)) from None
    if not isinstance(document, dict):
        raise BaselineError(f"{name}: a baseline is a mapping with expect, memory and source")
    unknown = set(document) - {"source", "expect", "memory"}
    if unknown:
        raise BaselineError(f"{name}: unknown key {quote(sorted(unknown, key=str)[0])} "
                            "(a baseline holds source, expect, memory)")
    expect_text = document.get("expect") or ""
    if not isinstance(expect_text, str):
        raise BaselineError(f"{name}: expect is the text of an expectations file (`expect: |` and its lines "
                            "indented under it)")
    try:
        expect = parse_expectations(expect_text, source=f"{name} (expect)")
    except ExpectationError as err:
        raise BaselineError(str(err)) from None
    memory = None
    if document.get("memory") is not None:
        memory = _memory(document["memory"], name)
    source = document.get("source") or {}
    if not isinstance(source, dict):
        raise BaselineError(f"{name}: source must be a mapping")
    return Baseline(expect=expect, memory=memory, source=source, expect_text=expect_text)


def _memory(section: Any, name: str) -> MemoryBaseline:
    where = f"{name}: memory"
    if not isinstance(section, dict) or not isinstance(section.get("triad"), dict):
        raise BaselineError(f"{where}: needs triad: {{median, minimum, unit}}")
    triad = section["triad"]
    values: dict[str, float] = {}
    for key in ("median", "minimum"):
        value = triad.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise BaselineError(f"{where}.triad.{key}: a bandwidth >= 0 is needed, not {quote(value)}")
        values[key] = float(value)
    options = section.get("options") or {}
    if not isinstance(options, dict) or set(options) - set(CARRIED_OPTIONS):
        extra = sorted(set(options) - set(CARRIED_OPTIONS), key=str) if isinstance(options, dict) else options
        raise BaselineError(f"{where}.options: only {', '.join(CARRIED_OPTIONS)} are carried, not {quote(extra)}")
    for key, value in options.items():
        number = (int, float) if key == "min_loop_seconds" else int
        if value is not None and (not isinstance(value, number) or isinstance(value, bool) or value < 0):
            kind = "a number of seconds" if key == "min_loop_seconds" else "a whole number"
            raise BaselineError(f"{where}.options.{key}: {kind} >= 0, not {quote(value)}")
    return MemoryBaseline(median=values["median"], mad=float(triad.get("mad") or 0.0),
                          nodes=int(triad.get("nodes") or 0), unit=str(triad.get("unit") or "MB/s"),
                          minimum=values["minimum"], options=dict(options))
