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

import json
import shutil
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oddnode.app.health.baseline import MEMORY_SERIES, MemoryBaseline
from oddnode.findings.expectations import Expectation, check_expectations
from oddnode.core.model import Finding

if TYPE_CHECKING:
    from oddnode.report import documents

OK, PROBLEM, SKIPPED, FAILED = "ok", "problem", "skipped", "failed"
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
PING_COUNT = 5  # datagrams sent to the node's own address
PING_TIMEOUT = 1.0  # seconds one may take to come back
# Interface states that carry traffic: `unknown` is what virtual and
# loopback devices report while they work.
WORKING_OPERSTATES = ("up", "unknown")


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
    from oddnode.onnode import node_probe
    from oddnode.measure.collect.inventory import derive_facts

    facts: dict[str, str] = {}
    notes: list[str] = []
    for name, section in node_probe.SECTIONS:
        if name == "processes" and not with_processes:
            continue
        try:
            section(facts, notes)
        except Exception as err:  # as the probe itself: one broken section loses only its facts
            notes.append(f"section {name} failed: {type(err).__name__}: {err}")
    return derive_facts({str(k): str(v) for k, v in facts.items()}), notes


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
            wanted = expectations[finding.subject].describe()
            problems.append(Problem("facts", f"{finding.subject}={value}, must {wanted}",
                                    f"{finding.message} ({label})", finding))
    detail = (f"{checked} expectations met" if not problems
              else f"{len(problems)} of {checked} expectations not met")
    return CheckOutcome("facts", PROBLEM if problems else OK, detail, problems=problems,
                        data={"checked": checked, "facts": len(facts)})


# -- memory -------------------------------------------------------------------


def measure_memory(baseline: MemoryBaseline, timeout: float = MEMORY_TIMEOUT) -> dict[str, Any]:
    """Run the check's memory step here with its array size and threads,
    briefly: its measurements as {series: value} and the run's words."""
    from oddnode.measure.node.memory import memory_benchmark
    from oddnode.reach import get_transport
    from oddnode.reach.local import local_node_name

    options = baseline.options
    spec = memory_benchmark(elements=options.get("elements"), ntimes=HEALTH_NTIMES, threads=options.get("threads"),
                            min_loop_seconds=options.get("min_loop_seconds") or HEALTH_MIN_LOOP_SECONDS,
                            max_seconds=HEALTH_MAX_SECONDS,
                            cpu_node=options.get("cpu_node"), mem_node=options.get("mem_node"))
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
    triad = run["values"].get(MEMORY_SERIES)
    data = {"triad": triad, "minimum": baseline.minimum, "median": baseline.median, "unit": baseline.unit,
            "elements": run.get("elements"), "iterations": run.get("iterations")}
    if not run.get("valid", True):
        why = "; ".join(run.get("problems") or ()) or "no reason given"
        problem = Problem("memory", "memory kernel results wrong", f"the memory kernel's results failed their own "
                          f"check ({why}): memory that returns wrong values")
        return CheckOutcome("memory", PROBLEM, problem.message, problems=[problem], data=data)
    if triad is None:
        problem = Problem("memory", "memory kernel gave no triad", "the memory kernel ran but reported no triad "
                          "bandwidth (its validation failed?)")
        return CheckOutcome("memory", PROBLEM, problem.message, problems=[problem], data=data)
    share = triad / baseline.median if baseline.median else float("nan")
    seen = f"triad {triad:,.0f} {baseline.unit} ({share:.0%} of the cluster's {baseline.median:,.0f})"
    iterations, ntimes = run.get("iterations"), run.get("ntimes")
    if iterations and ntimes and iterations < ntimes:
        seen += f" in {iterations} of {ntimes} iterations, the rest cut by the time budget"
    if triad >= baseline.minimum:
        return CheckOutcome("memory", OK, f"{seen} >= {baseline.minimum:,.0f}", data=data)
    problem = Problem("memory", f"triad {triad:,.0f} {baseline.unit} < {baseline.minimum:,.0f}",
                      f"memory bandwidth {seen}, below the least a healthy node shows ({baseline.minimum:,.0f} "
                      f"{baseline.unit}): a competing process, memory missing from a channel, or a throttled CPU")
    return CheckOutcome("memory", PROBLEM, problem.message, problems=[problem], data=data)


# -- the node's own address -------------------------------------------------------


def _interface_of(address: str) -> str | None:
    """The interface holding ``address`` (iproute2's JSON), or None when `ip` is missing."""
    if shutil.which("ip") is None:
        return None
    done = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        return None
    for interface in json.loads(done.stdout or "[]"):
        for info in interface.get("addr_info", []):
            if info.get("local") == address:
                return interface.get("ifname")
    return None


def _operstate(interface: str) -> str:
    try:
        with open(f"/sys/class/net/{interface}/operstate", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


def echo_round_trips(address: str, count: int = PING_COUNT, timeout: float = PING_TIMEOUT) -> list[float]:
    """Send ``count`` datagrams from ``address`` to itself; each round trip's
    seconds.  OSError when the address is not this node's or a datagram is lost."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.bind((address, 0))  # EADDRNOTAVAIL unless an interface of this node holds it
        sock.settimeout(timeout)
        target = sock.getsockname()
        times = []
        for index in range(count):
            payload = b"oddnode-health %d" % index
            sent = time.perf_counter()
            sock.sendto(payload, target)
            data, _ = sock.recvfrom(256)
            if data != payload:
                raise OSError(f"datagram {index} came back altered")
            times.append(time.perf_counter() - sent)
        return times


def check_address(node: str, address: str | None = None) -> CheckOutcome:
    """The node's address (Slurm's NodeAddr, else its name resolved) is one
    of its own, on an interface that is up, and answers a datagram."""
    if address is None:
        try:
            infos = socket.getaddrinfo(node, None, type=socket.SOCK_DGRAM)
        except socket.gaierror as err:
            problem = Problem("address", f"{node} does not resolve", f"the node's name {node} does not resolve: "
                              f"{err.strerror}")
            return CheckOutcome("address", PROBLEM, problem.message, problems=[problem])
        address = infos[0][4][0]
    if address.startswith("127.") or address == "::1":
        return CheckOutcome("address", SKIPPED, f"{node} resolves to loopback {address} here: nothing to test "
                            "(other nodes cannot reach it there)", data={"address": address})
    interface = _interface_of(address)
    state = _operstate(interface) if interface else None
    data = {"address": address, "interface": interface, "operstate": state}
    if interface and state not in WORKING_OPERSTATES:
        problem = Problem("address", f"{interface} is {state}", f"{address} is on {interface}, whose state is "
                          f"{state}: the node cannot be reached there")
        return CheckOutcome("address", PROBLEM, problem.message, problems=[problem], data=data)
    try:
        times = echo_round_trips(address)
    except OSError as err:
        why = err.strerror or str(err)
        problem = Problem("address", f"{address} not this node's: {why}"[:80],
                          f"{address} (the address the cluster knows {node} by) does not answer here: {why}")
        return CheckOutcome("address", PROBLEM, problem.message, problems=[problem], data=data)
    data["round_trip_us"] = round(statistics.median(times) * 1e6, 1)
    where = f" on {interface} ({state})" if interface else ""
    return CheckOutcome("address", OK, f"{address}{where} answers in {data['round_trip_us']:g} us", data=data)
