"""The process.* fact family: which commands a node runs, and how steadily.

The probe samples each node's processes several times (``node_probe.py``:
SNAPSHOTS snapshots over SAMPLE_SECONDS) and reports every command it saw as
``process.<comm>`` = ``running``.  A command it did not see in every
snapshot, or that used CPU time while it sampled, also gets
``process_seen.<comm>`` = ``"<seen>/<snapshots> snapshots in <window> s,
<cpu> s CPU"``.  Facts from a probe that took one snapshot have no
``process_seen.*`` keys and read as steadily running, as they always did.

A command seen in few snapshots with little CPU time was passing through
(a cron job, a login, another tool's probe): information.  One that stays or
burns CPU competes with whatever runs beside it (seaborg's node asymmetry):
a warning when some nodes run it and the others do not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from oddnode.onnode.fact_rules import NOT_RUNNING, PROCESS_PREFIX

SAMPLED_PREFIX = "process_seen."
RUNNING = "running"
# A node that saw the command only in passing: neither running nor not.
SEEN_BRIEFLY = "seen briefly"

# Persistent: seen in more than half of the snapshots.  A command that
# lives through most of the sampling is part of the node's state; one
# caught in one or two of five was starting or ending.
PERSISTENT_SHARE = 0.5
# Busy: used at least a tenth of one CPU over the sampling window.  Even a
# short-lived command that burns that much takes time from a benchmark
# beside it; idle daemons use a few clock ticks (10 ms each) at most.
BUSY_CPU_SHARE = 0.1

# What node_probe.py writes into process_seen.<comm>.
_SAMPLED = re.compile(r"^(\d+)/(\d+) snapshots in (\d+(?:\.\d+)?) s, (\d+(?:\.\d+)?) s CPU$")


def is_process_key(key: str) -> bool:
    return key.startswith(PROCESS_PREFIX)


def is_sampled_key(key: str) -> bool:
    return key.startswith(SAMPLED_PREFIX)


def sampled_key(key: str) -> str:
    """process_seen.<comm> for process.<comm>."""
    return SAMPLED_PREFIX + key[len(PROCESS_PREFIX):]


def parse_sampled(text: str) -> tuple[int, int, float, float] | None:
    """(snapshots seen, snapshots taken, window seconds, CPU seconds), or None
    when the text is not what the probe writes."""
    match = _SAMPLED.match(str(text).strip())
    if not match:
        return None
    seen, taken = int(match.group(1)), int(match.group(2))
    return seen, taken, float(match.group(3)), float(match.group(4))


def is_persistent(sampled: str | None) -> bool:
    """Whether a command's sampling says it stays or burns CPU on the node;
    no sampling (seen in every snapshot, idle, or an older probe) says it stays."""
    parsed = parse_sampled(sampled) if sampled is not None else None
    if parsed is None:
        return True
    seen, taken, window, cpu = parsed
    busy = window > 0 and cpu >= BUSY_CPU_SHARE * window
    return seen > PERSISTENT_SHARE * taken or busy


def process_reporting_nodes(facts: Mapping[str, Mapping[str, str]]) -> set[str]:
    """Nodes that reported a process list: only they can be said not to run a command."""
    nodes: set[str] = set()
    for key, per_node in facts.items():
        if is_process_key(key):
            nodes.update(per_node)
    return nodes


def process_state(value: str, sampled: str | None) -> str:
    """RUNNING or SEEN_BRIEFLY for a node that reported the command; other
    values (a site's own spelling) are kept as they are."""
    if value != RUNNING:
        return value
    return RUNNING if is_persistent(sampled) else SEEN_BRIEFLY


def is_warning(top_value: str, odd_values: set[str]) -> bool:
    """A difference worth a warning: some nodes run the command steadily and
    the others do not, or most run it and some not at all (or a value that is
    no state of ours).  Nodes that saw it only briefly alone are information."""
    known = {RUNNING, NOT_RUNNING, SEEN_BRIEFLY}
    return (RUNNING in odd_values or (NOT_RUNNING in odd_values and top_value == RUNNING)
            or bool(odd_values - known) or top_value not in known)


def process_wording(key: str, top: tuple[str, str], minority: Mapping[str, str], odd: str, majority: bool,
                    brief_sampling: Mapping[str, str]) -> tuple[str, str]:
    """Message and remedy for a command that runs on some nodes only.

    ``top``: the largest group's state and its folded nodes; ``minority``:
    the other states -> their folded nodes; ``odd``: all of those folded;
    ``brief_sampling``: node -> process_seen text of the odd nodes that saw
    the command briefly.
    """
    top_value, top_nodes = top
    comm = key[len(PROCESS_PREFIX):]
    examples = "; ".join(f"{node}: {text}" for node, text in sorted(brief_sampling.items())[:3])
    examples = f" ({examples})" if examples else ""
    brief = f"seen briefly on {minority[SEEN_BRIEFLY]}{examples}" if SEEN_BRIEFLY in minority else ""
    if not is_warning(top_value, set(minority)):
        if top_value == RUNNING:
            message = f"{comm} runs on every node but {odd}, which saw it only briefly{examples}"
        elif top_value == NOT_RUNNING:
            message = f"{comm} was {brief} only"
        else:
            message = f"{comm} was seen briefly on most nodes and not at all on {odd}"
        remedy = ("A command seen in few of the probe's snapshots and using little CPU was passing through "
                  "(a cron job, a login, another tool's probe): nothing to do unless it is seen again when "
                  "the inventory is taken again.")
        return message, remedy
    why = (
        "A command that runs on only some of the nodes meant to be identical takes CPU time from "
        "synchronising parallel codes there, which then wait for those nodes (seaborg's node asymmetry): "
    )
    if not majority:
        states = {**minority, top_value: top_nodes}
        running, idle = states.get(RUNNING, odd), states.get(NOT_RUNNING, odd)
        message = f"{comm} runs on {running} and is not running on {idle}; neither is a majority"
        remedy = why + f"decide whether {comm} belongs on these nodes and make them all agree."
    elif top_value == RUNNING:
        message = f"{comm} runs on every node but {odd}: not running on {minority.get(NOT_RUNNING, odd)}"
        remedy = why + f"start {comm} on {odd} if it is needed, or find out why it stopped there."
    else:
        running = minority.get(RUNNING, odd)
        message = f"{comm} runs on {running} only"
        remedy = why + f"stop {comm} on {running} (and disable it) unless those nodes have a reason to run it."
    return message + (f"; {brief}" if brief else ""), remedy
