"""Run the accounting collector on every node at once through a transport,
parse what comes back, and store it as a run.

The collector (``node_collector.py`` with ``pacct.py``, ``proc_sampler.py``
and the inventory probe's /proc readers) travels inside the command line as
the inventory probe does: its modules' sources in one script that registers
them under their package names, so that the same files run on a node
without oddnode installed and are imported here by the tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from oddnode.onnode.accounting_collector import COLLECTOR_VERSION, DEFAULT_SECONDS, METHODS
from oddnode.core.model import CommandCount, NodeProcesses
from oddnode.reach.base import NodeResult, Target, Transport
from oddnode.core.inputs import NodeOutputError
from oddnode.reach.scripts import ScriptResults, onnode_script, python_command, sort_results

__all__ = [
    "AccountingOutputError",
    "AccountingResult",
    "PROCESSES_STAGE",
    "collect_processes",
    "collector_argv",
    "collector_script",
    "parse_collector_output",
    "store_processes",
]

PROCESSES_STAGE = "processes"
# Seconds a node may take beyond the interval: the transport's start, the
# reading of a large accounting file, the answer.
DEFAULT_MARGIN = 60.0
# How much of a bad output an error message quotes.
QUOTED_CHARS = 80
# The modules that travel, in the order they are loaded (each imports only those before it).
_MODULES = ("node_probe", "pacct", "proc_sampler", "accounting_collector")


class AccountingOutputError(NodeOutputError):
    """The collector's output on one node cannot be used; names the node and why."""


@dataclass
class AccountingResult(ScriptResults[NodeProcesses]):
    """What the nodes that answered accounted, and why the others did not;
    the run that stored it."""

    run_id: int | None = None


def collector_script() -> str:
    """The collector and the modules it imports, as one script."""
    return onnode_script(*_MODULES)


def collector_argv(seconds: float = DEFAULT_SECONDS, pacct: str | None = None, method: str = "auto",
                   interpreter: str = "python3") -> list[str]:
    """The argv that runs the collector on a node for ``seconds`` (0 with
    ``pacct``: the whole file), nothing to copy there first."""
    if method not in METHODS:
        raise ValueError(f"unknown accounting method {method!r}: use {', '.join(METHODS)}")
    if seconds < 0 or (seconds == 0 and pacct is None):
        raise ValueError(f"--seconds must be > 0 (0 only with --pacct, to read the whole file), not {seconds:g}")
    argv = python_command(collector_script(), interpreter) + [f"--seconds={seconds:g}", f"--method={method}"]
    if pacct is not None:
        argv.append(f"--pacct={pacct}")
    return argv


def _quote(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + "...")


def _number(node: str, value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise AccountingOutputError(node, f"the collector's {what} is not a number >= 0: {value!r}")
    return float(value)


def parse_collector_output(node: str, stdout: str) -> NodeProcesses:
    """The collector's JSON from one node's stdout, checked; lines before
    it (a login banner) are ignored, anything else wrong raises
    AccountingOutputError naming the node."""
    lines = [line for line in (stdout or "").strip().splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("{")]
    if not starts:
        raise AccountingOutputError(node, f"the collector's output is not JSON: {_quote(stdout or '')}")
    text = "\n".join(lines[starts[-1]:])
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise AccountingOutputError(node, f"the collector's output is not valid JSON ({err.msg} at character "
                                          f"{err.pos})") from None
    if not isinstance(data, dict):
        raise AccountingOutputError(node, f"the collector's JSON is a {type(data).__name__}, not an object")
    if data.get("collector_version") != COLLECTOR_VERSION:
        raise AccountingOutputError(node, f"collector_version is {data.get('collector_version')!r}, expected "
                                          f"{COLLECTOR_VERSION}")
    method = data.get("method")
    if method not in ("acct", "pacct", "proc"):
        raise AccountingOutputError(node, f"unknown accounting method {method!r}")
    commands = data.get("commands")
    if not isinstance(commands, dict):
        raise AccountingOutputError(node, "the collector's 'commands' is not an object")
    counts = {}
    for name, entry in commands.items():
        if not isinstance(entry, dict):
            raise AccountingOutputError(node, f"command {name!r}: not an object")
        values = {key: _number(node, entry.get(key), f"{key} of {name!r}")
                  for key in ("executions", "cpu_seconds", "elapsed_seconds", "bursts")}
        parents = entry.get("parents", [])
        if not isinstance(parents, list) or not all(isinstance(parent, str) for parent in parents):
            raise AccountingOutputError(node, f"command {name!r}: its parents are not a list of names")
        counts[name] = CommandCount(executions=int(values["executions"]), cpu_seconds=values["cpu_seconds"],
                                    elapsed_seconds=values["elapsed_seconds"],
                                    bursts=int(values["bursts"]), parents=tuple(parents))
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(note, str) for note in notes):
        raise AccountingOutputError(node, "the collector's 'notes' is not a list of strings")
    return NodeProcesses(node=node, seconds=_number(node, data.get("seconds"), "seconds"), method=method,
                         commands=counts, source=str(data.get("source") or ""), notes=tuple(notes),
                         start=_number(node, data.get("start", 0.0), "start"))


def classify(results: dict[str, NodeResult], nodes: Iterable[str], timeout: float) -> AccountingResult:
    """Sort a transport's results into reports, unreachable and failed nodes."""
    return sort_results(AccountingResult(), results, nodes, timeout, parse_collector_output, "collector",
                        prefix="oddnode accounting: ")


def collect_processes(transport: Transport, nodes: Sequence[str], seconds: float = DEFAULT_SECONDS,
                      pacct: str | None = None, method: str = "auto",
                      margin: float = DEFAULT_MARGIN) -> AccountingResult:
    """The collector on every node at once for ``seconds``; one bad node never loses the others."""
    requested = list(dict.fromkeys(nodes))
    timeout = seconds + margin
    results = transport.run(requested, collector_argv(seconds, pacct, method), timeout=timeout)
    return classify(results, requested, timeout)


def store_processes(store, target: Target, result: AccountingResult, command: str) -> int:
    """One run: every node's counts and how every node fared, in one transaction."""
    with store.transaction():
        run_id = store.new_run(command, source=f"{target.transport.name}:{target.nodeset}", nodes=target.nodes)
        store.add_process_counts(run_id, result.reports.values())
        store.add_node_status(run_id, PROCESSES_STAGE, result.statuses())
    result.run_id = run_id
    return run_id
