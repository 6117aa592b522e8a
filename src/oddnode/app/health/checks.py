"""The quick checks ``oddnode health`` runs on the node it is started on:
its facts against the expectations and the baseline, a few seconds of the
memory kernel against the cluster's bandwidth in the last full check, and
its own address (its name resolves to an address of an interface that is
up, and a datagram sent to that address comes back).

Each check ends ``ok``, ``problem`` (the node is not fit for jobs: what
Slurm should drain it for), ``skipped`` (with why) or ``failed`` (the check
itself could not run: a missing compiler is the site's problem, not the
node's, and drains nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oddnode.app.health.baseline import MEMORY_SERIES, MemoryBaseline
from oddnode.findings.expectations import Expectation, check_expectations
from oddnode.core.model import Finding
from oddnode.onnode import fact_rules, health_node
from oddnode.onnode.health_node import FAILED, OK, PROBLEM, SKIPPED

if TYPE_CHECKING:
    from oddnode.measure.benchmarks import BenchmarkSpec
    from oddnode.report import documents

# A health run of the memory kernel: a handful of timed iterations (the
# first discarded), each loop long enough to be clear of the timer (or as
# long as the check made its loops, whose bandwidth it is compared with).
HEALTH_NTIMES = 3
HEALTH_MIN_LOOP_SECONDS = 0.1
# The kernel's timed iterations end after this long, so that a node a
# competing process slows to a crawl still reports its (low) bandwidth
# within the timeout rather than none.
HEALTH_MAX_SECONDS = 15.0
MEMORY_TIMEOUT = 40.0  # seconds for the kernel, its first build included: slurmd allows 60 in all


@dataclass(frozen=True)
class Problem:
    """Something that makes the node unfit: the check, a short reason (for
    Slurm's drain reason), the whole message, and the finding behind it."""

    check: str
    reason: str
    message: str
    finding: Finding | None = None

    def to_json(self) -> documents.HealthProblem:
        return {"check": self.check, "reason": self.reason, "message": self.message,
                "finding": self.finding.to_json() if self.finding else None}


@dataclass
class CheckOutcome:
    """How one check ended, what it saw (one line), and its problems."""

    name: str
    status: str
    detail: str
    seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> "CheckOutcome":
        """An outcome as the health program's checks return it (onnode/health_node.py)."""
        return cls(plain["name"], plain["status"], plain["detail"], plain["seconds"],
                   [Problem(p["check"], p["reason"], p["message"]) for p in plain["problems"]], dict(plain["data"]))

    def to_json(self) -> documents.HealthCheck:
        return {"name": self.name, "status": self.status, "detail": self.detail, "seconds": round(self.seconds, 3),
                "problems": [p.to_json() for p in self.problems], "data": self.data}


def timed(name: str, run: Callable[[], CheckOutcome]) -> CheckOutcome:
    """Run a check, timing it; an unexpected error fails the check, not the command."""
    started = time.monotonic()
    try:
        outcome = run()
    except Exception as err:  # a check that breaks must not lose the others
        outcome = CheckOutcome(name, FAILED, f"{type(err).__name__}: {err}")
    outcome.seconds = time.monotonic() - started
    return outcome


# -- facts --------------------------------------------------------------------


def probe_facts(with_processes: bool = False) -> tuple[dict[str, str], list[str]]:
    """This node's facts, as the inventory probe gives them (the process
    sampling, two seconds, only when an expectation names a process)."""
    return health_node.probe_facts(with_processes)


def check_facts(node: str, facts: Mapping[str, str],
                sources: Sequence[tuple[str, Mapping[str, Expectation]]]) -> CheckOutcome:
    """Every expectation of every source (the site's files, the baseline's)
    on this node's facts."""
    if not any(expectations for _, expectations in sources):
        return CheckOutcome("facts", SKIPPED, "no expectations: give --expect FILE or --baseline FILE")
    per_key = {key: {node: value} for key, value in facts.items()}
    problems: list[Problem] = []
    checked = 0
    for label, expectations in sources:
        report = check_expectations(expectations, per_key, [node])
        checked += len(report.passed) + len(report.failures)
        for finding in report.failures:
            (value,) = finding.evidence["violations"]
            wanted = fact_rules.describe(finding.evidence["expected"])
            problems.append(Problem("facts", f"{finding.subject}={value}, must {wanted}",
                                    f"{finding.message} ({label})", finding))
    detail = (f"{checked} expectations met" if not problems
              else f"{len(problems)} of {checked} expectations not met")
    return CheckOutcome("facts", PROBLEM if problems else OK, detail, problems=problems,
                        data={"checked": checked, "facts": len(facts)})


# -- memory -------------------------------------------------------------------


def memory_spec(baseline: MemoryBaseline) -> BenchmarkSpec:
    """The check's memory step with its array size and threads, briefly."""
    from oddnode.measure.node.memory import memory_benchmark

    options = baseline.options
    return memory_benchmark(elements=options.get("elements"), ntimes=HEALTH_NTIMES, threads=options.get("threads"),
                            min_loop_seconds=options.get("min_loop_seconds") or HEALTH_MIN_LOOP_SECONDS,
                            max_seconds=HEALTH_MAX_SECONDS,
                            cpu_node=options.get("cpu_node"), mem_node=options.get("mem_node"))


def measure_memory(baseline: MemoryBaseline, timeout: float = MEMORY_TIMEOUT) -> dict[str, Any]:
    """Run the check's memory step here (memory_spec): its measurements as
    {series: value} and the run's words."""
    from oddnode.reach import get_transport
    from oddnode.reach.local import local_node_name

    spec = memory_spec(baseline)
    node = local_node_name()
    result = get_transport("local").run([node], spec.argv, timeout=timeout)[node]
    if not result.ok:
        said = (result.stderr or result.stdout).strip().splitlines()
        raise RuntimeError(f"the memory kernel {result.status.value} (exit {result.exit_code}): "
                           f"{said[-1] if said else 'no output'}")
    parsed = spec.parse(result.stdout, f"memory kernel on {node}")
    values = {m.benchmark: m.value for m in parsed.measurements if m.valid}
    return {"values": values, "valid": parsed.valid, "problems": list(parsed.problems),
            "elements": parsed.configuration.get("elements"), "seconds": result.duration,
            "iterations": parsed.configuration.get("iterations_run"), "ntimes": parsed.configuration.get("ntimes")}


def check_memory(baseline: MemoryBaseline | None, measure: Callable[[MemoryBaseline], dict[str, Any]],
                 busy: str | None = None) -> CheckOutcome:
    """The triad bandwidth against the baseline's least; skipped without a
    baseline or while a job holds the node (``busy`` says how)."""
    if baseline is None:
        return CheckOutcome("memory", SKIPPED, "no memory baseline: write one from a check with `oddnode baseline`")
    if busy:
        return CheckOutcome("memory", SKIPPED, f"not measured: {busy}")
    run = measure(baseline)
    run = dict(run, triad=run["values"].get(MEMORY_SERIES))
    return CheckOutcome.from_plain(health_node.memory_verdict(run, baseline.minimum, baseline.median, baseline.unit))


# -- the node's own address -------------------------------------------------------


def check_address(node: str, address: str | None = None) -> CheckOutcome:
    """The node's address (Slurm's NodeAddr, else its name resolved) is one
    of its own, on an interface that is up, and answers a datagram."""
    return CheckOutcome.from_plain(health_node.check_address(node, address))
