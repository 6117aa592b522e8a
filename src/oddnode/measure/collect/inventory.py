"""Run the inventory probe on nodes through any transport and turn what comes
back into facts, keeping apart the nodes that could not be inventoried.

The probe itself (``node_probe.py``) runs on the nodes; everything here runs
on the admin's machine and only parses and classifies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from oddnode.onnode.node_probe import PROBE_VERSION, derive_facts, parse_dmidecode_memory
from oddnode.reach.base import NodeResult, Transport
from oddnode.core.inputs import NodeOutputError
from oddnode.reach.scripts import ScriptResults, onnode_script, python_command, sort_results

__all__ = [
    "InventoryResult",
    "ProbeOutputError",
    "ProbeReport",
    "classify",
    "collect",
    "derive_facts",
    "parse_dmidecode_memory",
    "parse_probe_output",
    "probe_argv",
    "probe_source",
]

# How much of a bad output an error message quotes.
QUOTED_CHARS = 80
# Exit status of a shell that did not find the command (no python3 on the node).


class ProbeOutputError(NodeOutputError):
    """The probe's output on one node cannot be used; names the node and why."""


@dataclass(frozen=True)
class ProbeReport:
    """One node's inventory: its facts, the probe's notes on what it skipped,
    and how long the probe took on the node (seconds)."""

    node: str
    facts: dict[str, str]
    notes: list[str]
    elapsed: float | None
    hostname: str = ""


@dataclass
class InventoryResult(ScriptResults[ProbeReport]):
    """Reports of the nodes that answered, and the others with their results.

    ``reasons`` says, for every node in ``unreachable`` or ``failed``, why in
    one line: nothing a node did is lost, and one bad node costs only itself.
    ``run_id``: the run the facts were stored under, once they are.
    """

    run_id: int | None = None

    def facts(self) -> dict[str, dict[str, str]]:
        """key -> node -> value, the shape the findings and expectations read."""
        by_key: dict[str, dict[str, str]] = {}
        for node in sorted(self.reports):
            for key, value in self.reports[node].facts.items():
                by_key.setdefault(key, {})[node] = value
        return {key: by_key[key] for key in sorted(by_key)}

    def fact_rows(self) -> list[tuple[str, str, str]]:
        """(node, key, value) rows, as the store's ``add_facts`` takes them."""
        return [
            (node, key, value)
            for node in sorted(self.reports)
            for key, value in sorted(self.reports[node].facts.items())
        ]


def probe_source() -> str:
    """The probe script's text, as shipped in the package (its own file's:
    it imports no module of ours)."""
    return onnode_script("node_probe")


def probe_argv(interpreter: str = "python3") -> list[str]:
    """The argv that runs the probe on a node, with nothing to copy there first."""
    return python_command(probe_source(), interpreter)


def _quote(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "...")


def parse_probe_output(node: str, stdout: str) -> ProbeReport:
    """The probe's JSON from one node's stdout, checked, with derived facts added.

    Lines before the JSON (a login banner a shell profile prints) are
    ignored; anything else wrong raises ProbeOutputError naming the node.
    """
    if not stdout or not stdout.strip():
        raise ProbeOutputError(node, "the probe printed nothing")
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("{")]
    if not starts:
        raise ProbeOutputError(node, f"the probe's output is not JSON: {_quote(stdout)}")
    text = "\n".join(lines[starts[-1]:])
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if not text.rstrip().endswith("}"):  # cut mid-way: the connection dropped or the node died
            raise ProbeOutputError(node, f"the probe's JSON is truncated ({len(text)} characters)") from None
        problem = f"the probe's output is not valid JSON ({err.msg} at character {err.pos})"
        raise ProbeOutputError(node, problem) from None
    if not isinstance(data, dict):
        raise ProbeOutputError(node, f"the probe's JSON is a {type(data).__name__}, not an object")
    version = data.get("probe_version")
    if version != PROBE_VERSION:
        raise ProbeOutputError(
            node, f"probe_version is {version!r}, expected {PROBE_VERSION} (an older or newer oddnode's probe?)"
        )
    facts = data.get("facts")
    if not isinstance(facts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in facts.items()):
        raise ProbeOutputError(node, "the probe's 'facts' is not an object of strings")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ProbeOutputError(node, "the probe's 'notes' is not a list of strings")
    elapsed = data.get("elapsed")
    if elapsed is not None and (isinstance(elapsed, bool) or not isinstance(elapsed, (int, float))):
        raise ProbeOutputError(node, f"the probe's 'elapsed' is not a number: {elapsed!r}")
    hostname = data.get("hostname", "")
    return ProbeReport(
        node=node,
        facts=derive_facts(facts),
        notes=list(notes),
        elapsed=float(elapsed) if elapsed is not None else None,
        hostname=hostname if isinstance(hostname, str) else str(hostname),
    )


def classify(results: dict[str, NodeResult], nodes: Iterable[str], timeout: float) -> InventoryResult:
    """Sort a transport's results into reports, unreachable and failed nodes."""
    return sort_results(InventoryResult(), results, nodes, timeout, parse_probe_output, "probe")


def collect(transport: Transport, nodes: Sequence[str], timeout: float = 60.0) -> InventoryResult:
    """Run the probe on every node through the transport; one bad node never loses the others."""
    requested = list(dict.fromkeys(nodes))
    results = transport.run(requested, probe_argv(), timeout=timeout)
    return classify(results, requested, timeout)

