"""The main job: run the stages of a production-readiness check on a set of
nodes, keep everything in the store, and judge it.

Stage 1 is diagnostics: the inventory of every node, compared across nodes
and against an expectations file.  Benchmarks follow in later stages; they
are inconsistent until diagnostics pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from oddnode.analysis import Analysis, analyze
from oddnode.findings import Sensitivity, sort_findings
from oddnode.inventory import InventoryResult, collect
from oddnode.inventory.expectations import ExpectationReport, check_expectations, load_expectations
from oddnode.nodes import NodeNameError, expand
from oddnode.store import FINDINGS_SOURCE, Store
from oddnode.transport import Target, get_transport
from oddnode.transport.local import local_node_name

INVENTORY_STAGE = "inventory"
DEFAULT_TIMEOUT = 60.0  # seconds for the inventory probe on one node


def read_hostfile(path: Path) -> list[str]:
    """Node names or node sets, one a line; ``#`` comments and blank lines skipped."""
    names: list[str] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise NodeNameError(f"cannot read host file {path}: {err.strerror or err}") from err
    for number, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            names.extend(expand(line.split()[0]))
        except NodeNameError as err:
            raise NodeNameError(f"{path}:{number}: {err}") from None
    return names


def select_nodes(nodes: str | None = None, exclude: str | None = None, hostfile: Path | None = None) -> list[str]:
    """The node list from ``-w``, ``--hostfile`` and ``-x``, in ClusterShell syntax."""
    chosen: list[str] = []
    if nodes:
        chosen.extend(expand(nodes))
    if hostfile:
        chosen.extend(read_hostfile(hostfile))
    excluded = set(expand(exclude)) if exclude else set()
    return sorted({n for n in chosen if n not in excluded})


def make_target(
    nodes: list[str],
    transport: str | None = None,
    ssh_config: Path | None = None,
    fanout: int | None = None,
) -> Target:
    """Choose the transport: local with no nodes, ssh with nodes, slurm when
    asked (then the allocation gives the nodes if none were named)."""
    name = transport or ("ssh" if nodes else "local")
    options: dict[str, object] = {}
    if name == "ssh":
        if ssh_config is not None:
            options["ssh_config"] = ssh_config
        if fanout is not None:
            options["fanout"] = fanout
    chosen = get_transport(name, **options)
    if not nodes:
        if name == "local":
            nodes = [local_node_name()]
        elif name == "slurm":
            from oddnode.transport.slurm import allocation_nodes

            nodes = allocation_nodes(os.environ)
        else:
            raise NodeNameError(f"the {name} transport needs nodes: give -w NODES or --hostfile FILE")
    return Target(nodes=nodes, transport=chosen)


def collect_inventory(store: Store, target: Target, timeout: float = DEFAULT_TIMEOUT,
                      command: str = "oddnode inventory") -> InventoryResult:
    """Probe every node, then store its facts and how every node fared, in
    one transaction: a node that fails loses nothing the others gave."""
    result = collect(target.transport, target.nodes, timeout)
    statuses = [(node, "ok", None) for node in result.reports]
    # A node that ran the probe but gave no usable answer counts as failed.
    troubled = {**result.unreachable, **result.failed}
    statuses += [(node, "failed" if r.ok else r.status.value, result.reasons.get(node))
                 for node, r in sorted(troubled.items())]
    with store.transaction():
        run_id = store.new_run(command, source=f"{target.transport.name}:{target.nodeset}")
        store.add_facts(run_id, result.fact_rows())
        store.add_node_status(run_id, INVENTORY_STAGE, statuses)
    return result


@dataclass
class CheckResult:
    analysis: Analysis
    expectations: ExpectationReport | None
    inventory: InventoryResult


def run_check(store: Store, target: Target, *, expectations: Path | None = None,
              timeout: float = DEFAULT_TIMEOUT, sensitivity: Sensitivity | None = None,
              command: str = "oddnode check") -> CheckResult:
    """Stage 1, diagnostics: inventory, consistency across nodes, expectations."""
    inventory = collect_inventory(store, target, timeout, command)
    dataset = store.load_dataset()
    # The diagnostics judge the nodes checked now, not others the store
    # remembers from earlier runs.
    checked = set(target.nodes)
    dataset.facts = {key: {node: value for node, value in per_node.items() if node in checked}
                     for key, per_node in dataset.facts.items()}
    dataset.node_trouble = {node: trouble for node, trouble in dataset.node_trouble.items() if node in checked}
    result = analyze(dataset, sensitivity, correlations=False)
    report = None
    if expectations is not None:
        report = check_expectations(load_expectations(expectations), dataset.facts, sorted(inventory.reports))
        result.findings = sort_findings(result.findings + report.failures)
    with store.transaction():
        store.add_findings(store.new_run(command, source=FINDINGS_SOURCE), result.findings)
    return CheckResult(result, report, inventory)
