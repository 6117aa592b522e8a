"""The health check of one node, as a program that needs only ``python3``
(>= 3.6) on the node: what ``oddnode health --install DIR`` writes for
Slurm's ``HealthCheckProgram`` (or NHC, or cron) with its settings beside
it, and the checks ``oddnode health`` itself shares.

Three checks, each ending ``ok``, ``problem`` (the node is not fit for
jobs: what Slurm should drain it for), ``skipped`` (with why) or ``failed``
(the check could not run: the site's problem, not the node's; it drains
nothing):

- facts: the inventory probe's facts against the expectations (the
  baseline's and the site's files, as fact_rules.py judges them);
- memory: a few seconds of our memory kernel (built here by the node
  runner at first use) against the least triad bandwidth a healthy node
  reached in the last full check; only while no job holds the node;
- address: the address the cluster knows the node by (Slurm's NodeAddr,
  else its name resolved) is one of its own, on an interface that is up,
  and answers a datagram.

The settings file (``oddnode-health.json``, written by oddnode) holds the
expectations with their node sets already expanded, the memory kernel's
job and bound, and the options the program runs with when Slurm starts
it without arguments (``drain``, ``resume_when_healthy``, ``benchmarks``,
``log``).  One line per problem on stdout, each also logged (syslog by
default, as NHC does, or a file); exit 0 healthy, 1 a problem, 2 a bad
settings file or option, 3 a check that could not run or a Slurm that
cannot be reached to drain.

Standard library only, for Python >= 3.6; runs nothing at import time.
"""

import argparse
import json
import logging
import logging.handlers
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

from oddnode.onnode import fact_rules, node_probe, node_runner
from oddnode.onnode.kernel_lines import RESULT_LINE, VALIDATION_FAILED, VALIDATION_OK
from oddnode.onnode import slurm_node
from oddnode.onnode.slurm_node import SlurmError, node_state, plan_actions

FORMAT = "oddnode-health 1"  # the settings file's "format"
SETTINGS_SUFFIX = ".json"  # the settings file: the program's path with this suffix
OK, PROBLEM, SKIPPED, FAILED = "ok", "problem", "skipped", "failed"
EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, EXIT_COULD_NOT_RUN = 0, 1, 2, 3
BENCHMARKS = ("idle", "always", "never")
PING_COUNT = 5  # datagrams sent to the node's own address
PING_TIMEOUT = 1.0  # seconds one may take to come back
# Interface states that carry traffic: `unknown` is what virtual and
# loopback devices report while they work.
WORKING_OPERSTATES = ("up", "unknown")
MEMORY_SERIES = "triad"
# The memory kernel's header lines a health run reports: key -> name in the run.
HEADER_NUMBERS = {"elements": "elements", "iterations_run": "iterations", "ntimes": "ntimes"}
# Where syslog listens on Linux; without it the log goes to stderr.
SYSLOG_SOCKET = "/dev/log"
LOGGER = "oddnode-health"


class SettingsError(ValueError):
    """A settings file that cannot be used: names the file and what is wrong."""


# -- outcomes ----------------------------------------------------------------------


def outcome(name, status, detail, problems=(), data=None):
    """How one check ended (a plain mapping: it travels as JSON as it is)."""
    return {"name": name, "status": status, "detail": detail, "seconds": 0.0,
            "problems": list(problems), "data": dict(data or {})}


def problem(check, reason, message):
    """Something that makes the node unfit: a short reason (Slurm's drain
    reason) and the whole message (``finding``: the package's finding behind
    it, which a node without oddnode has none of)."""
    return {"check": check, "reason": reason, "message": message, "finding": None}


def timed(name, run):
    """Run a check, timing it; an unexpected error fails the check, not the program."""
    started = time.monotonic()
    try:
        result = run()
    except Exception as err:  # a check that breaks must not lose the others
        result = outcome(name, FAILED, "{}: {}".format(type(err).__name__, err))
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


# -- facts -------------------------------------------------------------------------


def probe_facts(with_processes=False):
    """This node's facts as the inventory probe gives them, derived facts
    included (the process sampling, two seconds, only when asked), and the
    probe's notes."""
    facts, notes = {}, []
    for name, section in node_probe.SECTIONS:
        if name == "processes" and not with_processes:
            continue
        try:
            section(facts, notes)
        except Exception as err:  # as the probe itself: one broken section loses only its facts
            notes.append("section {} failed: {}: {}".format(name, type(err).__name__, err))
    return node_probe.derive_facts(dict((str(k), str(v)) for k, v in facts.items())), notes


def governing_rules(rules, node):
    """Of one file's rules, those that decide on ``node``: for each key, the
    rule of the last section (in the file's order) naming the node, else the
    rule outside any section."""
    chosen = {}
    for rule in rules:
        members = rule.get("scope_nodes")
        if members is not None and node not in members:
            continue
        held = chosen.get(rule["key"])
        if held is None or rule.get("scope_order", 0) >= held.get("scope_order", 0):
            chosen[rule["key"]] = rule
    return [chosen[key] for key in sorted(chosen)]


def check_facts(node, facts, sources):
    """Every rule of every source ((label, rules) pairs: the site's files,
    the baseline's) on this node's facts."""
    if not any(rules for _, rules in sources):
        return outcome("facts", SKIPPED, "no expectations: give --expect FILE or --baseline FILE")
    processes_reported = any(key.startswith(fact_rules.PROCESS_PREFIX) for key in facts)
    problems, checked = [], 0
    for label, rules in sources:
        for rule in governing_rules(rules, node):
            checked += 1
            key, conditions = rule["key"], rule["conditions"]
            value = fact_rules.node_value(facts, key, processes_reported)
            if value is not None and fact_rules.accepts(conditions, value):
                continue
            shown = fact_rules.NOT_REPORTED if value is None else value
            wanted = fact_rules.describe(conditions)
            scope = " on " + rule["scope"] if rule.get("scope") else ""
            problems.append(problem("facts", "{}={}, must {}".format(key, shown, wanted),
                                    "{} must {}{}; {}: {} ({})".format(key, wanted, scope, node, shown, label)))
    detail = ("{} expectations met".format(checked) if not problems
              else "{} of {} expectations not met".format(len(problems), checked))
    return outcome("facts", PROBLEM if problems else OK, detail, problems, {"checked": checked, "facts": len(facts)})


# -- memory ------------------------------------------------------------------------


def read_memory_run(stdout):
    """The memory kernel's triad rate, whether its own check passed (and
    why not), and the header's array size, iterations run and wanted."""
    run = {"triad": None, "valid": False, "problems": [], "elements": None, "iterations": None, "ntimes": None}
    for raw in stdout.splitlines():
        line = raw.strip()
        result = RESULT_LINE.match(line)
        if result and result.group(1) == MEMORY_SERIES:
            run["triad"] = float(result.group(2))
        elif VALIDATION_OK.match(line):
            run["valid"] = True
        elif VALIDATION_FAILED.match(line):
            failed = VALIDATION_FAILED.match(line)
            run["problems"].append("validation failed: {} error {}".format(failed.group(1), failed.group(2)))
        elif line.startswith("#"):
            key, _, value = line[1:].partition(":")
            name = HEADER_NUMBERS.get(key.strip())
            if name and value.strip().isdigit():
                run[name] = int(value.strip())
    if not run["valid"] and not run["problems"]:
        run["problems"].append("no validation line")
    return run


def measure_memory(job):
    """Build (at first use) and run the memory kernel here from its job, as
    the node runner does for a check; the run read by read_memory_run."""
    report = node_runner.run(job)
    if report.get("error"):
        raise RuntimeError("the memory kernel: {}: {}".format(report["error"], str(report.get("detail", ""))[:200]))
    if report.get("returncode"):
        said = (report.get("stderr") or report.get("stdout") or "").strip().splitlines()
        raise RuntimeError("the memory kernel exited {}: {}".format(report["returncode"],
                                                                    said[-1] if said else "no output"))
    return read_memory_run(report.get("stdout") or "")


def memory_verdict(run, minimum, median, unit):
    """A memory run (read_memory_run's mapping) against the least triad a
    healthy node shows (``minimum``) and the cluster's ``median``."""
    data = {"triad": run.get("triad"), "minimum": minimum, "median": median, "unit": unit,
            "elements": run.get("elements"), "iterations": run.get("iterations")}
    if not run.get("valid", True):
        why = "; ".join(run.get("problems") or ()) or "no reason given"
        found = problem("memory", "memory kernel results wrong", "the memory kernel's results failed their own "
                        "check ({}): memory that returns wrong values".format(why))
        return outcome("memory", PROBLEM, found["message"], [found], data)
    triad = run.get("triad")
    if triad is None:
        found = problem("memory", "memory kernel gave no triad", "the memory kernel ran but reported no triad "
                        "bandwidth (its validation failed?)")
        return outcome("memory", PROBLEM, found["message"], [found], data)
    share = triad / median if median else float("nan")
    seen = "triad {:,.0f} {} ({:.0%} of the cluster's {:,.0f})".format(triad, unit, share, median)
    iterations, ntimes = run.get("iterations"), run.get("ntimes")
    if iterations and ntimes and iterations < ntimes:
        seen += " in {} of {} iterations, the rest cut by the time budget".format(iterations, ntimes)
    if triad >= minimum:
        return outcome("memory", OK, "{} >= {:,.0f}".format(seen, minimum), data=data)
    found = problem("memory", "triad {:,.0f} {} < {:,.0f}".format(triad, unit, minimum),
                    "memory bandwidth {}, below the least a healthy node shows ({:,.0f} {}): a competing "
                    "process, memory missing from a channel, or a throttled CPU".format(seen, minimum, unit))
    return outcome("memory", PROBLEM, found["message"], [found], data)


def check_memory(memory, busy=None, measure=None):
    """The triad bandwidth against the settings' memory bound; skipped
    without one or while a job holds the node (``busy`` says how)."""
    if memory is None:
        return outcome("memory", SKIPPED, "no memory baseline: write one from a check with `oddnode baseline`")
    if busy:
        return outcome("memory", SKIPPED, "not measured: " + busy)
    run = (measure or measure_memory)(memory["job"])
    return memory_verdict(run, memory["minimum"], memory["median"], memory["unit"])


# -- the node's own address --------------------------------------------------------


def interface_of(address):
    """The interface holding ``address`` (iproute2's JSON), or None when `ip` is missing."""
    if shutil.which("ip") is None:
        return None
    done = subprocess.run(["ip", "-j", "addr", "show"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=10)
    if done.returncode != 0:
        return None
    for interface in json.loads(done.stdout or "[]"):
        for info in interface.get("addr_info", []):
            if info.get("local") == address:
                return interface.get("ifname")
    return None


def operstate(interface):
    try:
        with open("/sys/class/net/{}/operstate".format(interface)) as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


def echo_round_trips(address, count=PING_COUNT, timeout=PING_TIMEOUT):
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
                raise OSError("datagram {} came back altered".format(index))
            times.append(time.perf_counter() - sent)
        return times


def check_address(node, address=None):
    """The node's address (Slurm's NodeAddr, else its name resolved) is one
    of its own, on an interface that is up, and answers a datagram."""
    if address is None:
        try:
            infos = socket.getaddrinfo(node, None, type=socket.SOCK_DGRAM)
        except socket.gaierror as err:
            found = problem("address", "{} does not resolve".format(node),
                            "the node's name {} does not resolve: {}".format(node, err.strerror))
            return outcome("address", PROBLEM, found["message"], [found])
        address = infos[0][4][0]
    if address.startswith("127.") or address == "::1":
        return outcome("address", SKIPPED, "{} resolves to loopback {} here: nothing to test (other nodes cannot "
                       "reach it there)".format(node, address), data={"address": address})
    interface = interface_of(address)
    state = operstate(interface) if interface else None
    data = {"address": address, "interface": interface, "operstate": state}
    if interface and state not in WORKING_OPERSTATES:
        found = problem("address", "{} is {}".format(interface, state), "{} is on {}, whose state is {}: the node "
                        "cannot be reached there".format(address, interface, state))
        return outcome("address", PROBLEM, found["message"], [found], data)
    try:
        times = echo_round_trips(address)
    except OSError as err:
        why = err.strerror or str(err)
        found = problem("address", "{} not this node's: {}".format(address, why)[:80],
                        "{} (the address the cluster knows {} by) does not answer here: {}".format(address, node, why))
        return outcome("address", PROBLEM, found["message"], [found], data)
    data["round_trip_us"] = round(statistics.median(times) * 1e6, 1)
    where = " on {} ({})".format(interface, state) if interface else ""
    return outcome("address", OK, "{}{} answers in {:g} us".format(address, where, data["round_trip_us"]), data=data)


# -- the program ------------------------------------------------------------------


def settings_path(program):
    """The settings file beside the program: its path less any suffix, plus SETTINGS_SUFFIX."""
    return os.path.splitext(os.path.abspath(program))[0] + SETTINGS_SUFFIX


def read_settings(path):
    """The settings file, checked for what the program reads; SettingsError naming the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            settings = json.load(handle)
    except OSError as err:
        raise SettingsError("{}: cannot read it: {}".format(path, err.strerror or err))
    except ValueError as err:
        raise SettingsError("{}: not JSON: {}".format(path, err))
    if not isinstance(settings, dict) or settings.get("format") != FORMAT:
        raise SettingsError("{}: not an oddnode health settings file (no \"format\": \"{}\"); write it with "
                            "`oddnode health --install`".format(path, FORMAT))
    sources = settings.get("expectations") or []
    if not isinstance(sources, list) or not all(isinstance(source, dict) and isinstance(source.get("rules"), list)
                                                 for source in sources):
        raise SettingsError("{}: expectations: a list of a label and rules each".format(path))
    for source in sources:
        for rule in source["rules"]:
            key = rule.get("key") if isinstance(rule, dict) else None
            if not isinstance(key, str) or not key:
                raise SettingsError("{}: expectations: a rule without a fact key".format(path))
            wrong = fact_rules.conditions_problem(rule.get("conditions"))
            members = rule.get("scope_nodes")
            if wrong is None and members is not None and not isinstance(members, list):
                wrong = "scope_nodes must be a list of node names"
            if wrong:
                raise SettingsError("{}: expectations: {}: {}".format(path, key, wrong))
    if not isinstance(settings.get("run") or {}, dict):
        raise SettingsError("{}: run: a mapping of drain, resume_when_healthy, benchmarks and log".format(path))
    memory = settings.get("memory")
    if memory is not None and not (isinstance(memory, dict) and isinstance(memory.get("job"), dict)
                                   and all(isinstance(memory.get(k), (int, float)) for k in ("minimum", "median"))):
        raise SettingsError("{}: memory: needs job, minimum and median".format(path))
    return settings


def node_name(given=None):
    """--node, else the name slurmd runs the program for, else this host's short name."""
    return given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def logger_for(target):
    """A logger writing to syslog (``syslog``), to a file (a path), or nowhere (``none``)."""
    log = logging.getLogger(LOGGER)
    log.handlers[:] = []
    log.propagate = False
    log.setLevel(logging.INFO)
    if target == "none":
        log.addHandler(logging.NullHandler())
    elif target == "syslog":
        if os.path.exists(SYSLOG_SOCKET):
            handler = logging.handlers.SysLogHandler(address=SYSLOG_SOCKET,
                                                     facility=logging.handlers.SysLogHandler.LOG_DAEMON)
            handler.setFormatter(logging.Formatter(LOGGER + "[%(process)d]: %(message)s"))
        else:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(LOGGER + ": %(message)s"))
        log.addHandler(handler)
    else:
        handler = logging.FileHandler(target, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s " + LOGGER + "[%(process)d]: %(message)s"))
        log.addHandler(handler)
    return log


def parser():
    options = argparse.ArgumentParser(
        prog="oddnode-health", description="The quick health check of this node, written by `oddnode health "
        "--install`: its facts against the expectations, the memory kernel against the last check's bandwidth, "
        "and its own address.")
    options.add_argument("--settings", metavar="FILE", help="the settings file (default: beside the program)")
    options.add_argument("--node", help="this node's name in Slurm (default: $SLURMD_NODENAME, else the short "
                         "host name)")
    options.add_argument("--benchmarks", choices=BENCHMARKS, default=None,
                         help="when to run the memory kernel (default: the settings', else idle)")
    options.add_argument("--drain", action="store_true", default=None, help="drain this node in Slurm for its "
                         "problems")
    options.add_argument("--no-drain", dest="drain", action="store_false", help="do not drain")
    options.add_argument("--resume-when-healthy", action="store_true", default=None,
                         help="resume this node when healthy, if oddnode drained it")
    options.add_argument("--dry-run", action="store_true", help="print the scontrol commands, do not run them")
    options.add_argument("--log", metavar="TARGET", default=None,
                         help="syslog, a file to append to, or none (default: the settings', else syslog)")
    options.add_argument("--json", action="store_true", help="print the checks and problems as JSON")
    options.add_argument("-q", "--quiet", action="store_true", help="say nothing when healthy")
    return options


def main(argv=None):
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        settings = read_settings(args.settings or settings_path(sys.argv[0]))
    except SettingsError as err:
        sys.stderr.write("error: {}\n".format(err))
        return EXIT_USAGE
    run = settings.get("run") or {}
    drain = run.get("drain", False) if args.drain is None else args.drain
    resume = run.get("resume_when_healthy", False) if args.resume_when_healthy is None else args.resume_when_healthy
    benchmarks = args.benchmarks or run.get("benchmarks") or "idle"
    if benchmarks not in BENCHMARKS:
        sys.stderr.write("error: benchmarks must be one of {}, not {!r}\n".format(", ".join(BENCHMARKS), benchmarks))
        return EXIT_USAGE
    try:
        log = logger_for(args.log or run.get("log") or "syslog")
    except OSError as err:
        sys.stderr.write("error: --log: {}\n".format(err))
        return EXIT_USAGE
    return check_node(node_name(args.node), settings, drain=drain, resume=resume, benchmarks=benchmarks,
                      dry_run=args.dry_run, json_out=args.json, quiet=args.quiet, log=log)


def check_node(name, settings, drain, resume, benchmarks, dry_run, json_out, quiet, log):
    """Run the checks on this node, act on Slurm, say and log what was found; the exit status."""
    started = time.monotonic()
    out = sys.stderr if json_out else sys.stdout
    state, slurm_note = None, None
    if drain or resume or benchmarks == "idle":
        try:
            state = node_state(name)
        except SlurmError as err:
            if drain or resume:
                say_error(log, "{}: {}".format(name, err))
                return EXIT_COULD_NOT_RUN
            slurm_note = "no Slurm state ({})".format(err)
    busy = None
    if benchmarks == "never":
        busy = "--benchmarks never"
    elif benchmarks == "idle" and state is not None and state.busy:
        busy = "a job holds {} CPUs of {} ({})".format(state.cpus_allocated, name, state.state)

    sources = [(source.get("label", "expectations"), source["rules"]) for source in settings.get("expectations") or []]
    with_processes = any(rule["key"].startswith(fact_rules.PROCESS_PREFIX) for _, rules in sources for rule in rules)
    outcomes = [
        timed("facts", lambda: check_facts(name, probe_facts(with_processes)[0], sources)),
        timed("memory", lambda: check_memory(settings.get("memory"), busy)),
        timed("address", lambda: check_address(name, state.address if state else None)),
    ]
    problems = [found for result in outcomes for found in result["problems"]]
    failed = [result for result in outcomes if result["status"] == FAILED]

    actions = []
    if state is not None and (drain or resume):
        planned = plan_actions({name: state}, {name: [found["reason"] for found in problems]}, drain=drain,
                               resume=resume and not failed)
        actions = act(planned, dry_run, out, log)
    elapsed = time.monotonic() - started

    if json_out:
        document = {"node": name, "healthy": not problems and not failed, "seconds": round(elapsed, 3),
                    "slurm_state": state.state if state else None, "slurm_reason": state.reason if state else None,
                    "checks": outcomes, "problems": problems,
                    "actions": actions}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    for found in problems:
        say(out, log, logging.WARNING, "{}: {}".format(name, found["message"]))
    for result in failed:
        say_error(log, "{}: the {} check could not run: {}".format(name, result["name"], result["detail"]))
    if not problems:
        seen = "; ".join("{} {}: {}".format(r["name"], r["status"], r["detail"]) for r in outcomes)
        line = "{}: {} in {:.1f} s ({})".format(name, "healthy" if not failed else "no problem found", elapsed, seen)
        line += "; " + slurm_note if slurm_note else ""
        say(None if quiet else out, log, logging.INFO, line)
    if problems:
        return EXIT_PROBLEM
    if failed or any(record["error"] for record in actions):
        return EXIT_COULD_NOT_RUN
    return EXIT_OK


def act(actions, dry_run, out, log):
    """Carry out (or with ``dry_run`` print) drain and resume actions, a line
    each; their records for the JSON document."""
    records = []
    for action, error, record, line in slurm_node.act(actions, dry_run):
        records.append(record)
        if error:
            say_error(log, line)
        elif action.verb == "leave":
            say(out, log, logging.INFO, line)
        elif dry_run:
            say(out, None, logging.INFO, line)  # a command shown, not run: nothing to log
        else:
            say(out, log, logging.WARNING, line)
    return records


def say(out, log, level, line):
    """One line to ``out`` (unless None) and to the log (unless None)."""
    if out is not None:
        out.write(line + "\n")
        out.flush()
    if log is not None:
        log.log(level, line)


def say_error(log, line):
    say(sys.stderr, log, logging.ERROR, "error: " + line)
