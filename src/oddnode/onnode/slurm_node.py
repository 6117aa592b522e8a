"""Draining and resuming Slurm nodes for what oddnode found, and never more.

A node oddnode drains carries a reason that starts with ``oddnode:``, as
LBNL NHC marks its own with ``NHC:``; that prefix is how oddnode knows a
drain is its own.  It resumes only nodes whose drain is its own, never one
an administrator drained (whatever the reason says, a reason without the
prefix is someone else's), and it never rewrites another's reason.  Every
decision is a pure function of the node's state as ``scontrol show node``
prints it, so the commands can be printed first (``--dry-run``).

Standard library only, for Python >= 3.6: ``oddnode health`` uses it, and
so does the health program ``oddnode health --install`` writes for nodes
without oddnode (onnode/health_node.py).
"""

import re
import shlex
import shutil
import subprocess
from typing import List, Mapping, NamedTuple, Optional, Sequence, Tuple

REASON_PREFIX = "oddnode: "
# Slurm keeps the whole reason it is given (22.05 kept 3,000 characters
# and `scontrol show node` printed them all), but `sinfo -R` shows 20 by
# default and every node record carries it: a health check's reason is cut
# to a line an operator reads at once.
REASON_LIMIT = 128
ELLIPSIS = "..."
SCONTROL_TIMEOUT = 30.0  # seconds: slurmctld answers in milliseconds, or is unreachable

# `scontrol show node` prints "Reason=TEXT [USER@TIME]" on a line of its own.
_REASON = re.compile(r"^\s*Reason=(?P<text>.*?)(?:\s+\[(?P<user>[^@\]]*)@(?P<time>[^\]]*)\])?\s*$", re.MULTILINE)
_FIELD = re.compile(r"(?:^|\s)(NodeName|NodeAddr|State|CPUAlloc)=(\S+)")


class SlurmError(RuntimeError):
    """scontrol could not be run or refused: names the command and Slurm's words."""


class NodeState(NamedTuple):
    """A node as slurmctld sees it: its state words (``IDLE+DRAIN``), the
    reason of a drain or down state and who set it, and the CPUs jobs hold."""

    node: str
    state: str
    reason: str = ""
    reason_user: str = ""
    cpus_allocated: int = 0
    address: Optional[str] = None  # NodeAddr: where the cluster reaches the node

    @property
    def flags(self) -> "frozenset":
        """Every word of the state: the base state and its flags (DRAIN, NOT_RESPONDING...)."""
        return frozenset(word.rstrip("*~#!%$@^-") for word in self.state.upper().split("+"))

    @property
    def drained(self) -> bool:
        """Drained or draining: the DRAIN flag (DRAINING and DRAINED are DRAIN as scontrol sets it)."""
        return bool({"DRAIN", "DRAINED", "DRAINING"} & self.flags)

    @property
    def drained_by_oddnode(self) -> bool:
        return self.drained and self.reason.startswith(REASON_PREFIX.rstrip())

    @property
    def busy(self) -> bool:
        """A job holds CPUs of the node: a benchmark now would disturb it and measure it."""
        return self.cpus_allocated > 0 or bool({"ALLOCATED", "MIXED", "COMPLETING"} & self.flags)


def parse_node_state(text: str) -> NodeState:
    """A node's state from ``scontrol show node NAME`` (one record)."""
    fields = dict(_FIELD.findall(text))
    if "NodeName" not in fields or "State" not in fields:
        raise SlurmError("scontrol show node printed no node record: {!r}".format(text.strip()[:120]))
    reason = _REASON.search(text)
    cpus = fields.get("CPUAlloc", "0")
    return NodeState(
        node=fields["NodeName"],
        state=fields["State"],
        reason=(reason.group("text").strip() if reason else ""),
        reason_user=(reason.group("user") or "") if reason else "",
        cpus_allocated=int(cpus) if cpus.isdigit() else 0,
        address=fields.get("NodeAddr"),
    )


def drain_reason(problems: Sequence[str], limit: int = REASON_LIMIT) -> str:
    """``oddnode: PROBLEM; PROBLEM`` within ``limit`` characters: problems
    that do not fit are counted (``+2 more``), a first one too long is cut
    with an ellipsis."""
    if not problems:
        raise ValueError("a drain needs at least one problem to give as its reason")
    text = REASON_PREFIX + problems[0]
    for index, problem in enumerate(problems[1:], start=1):
        rest = len(problems) - index - 1
        candidate = f"{text}; {problem}"
        tail = f"; +{rest} more" if rest else ""
        if len(candidate) + len(tail) > limit:
            text += f"; +{len(problems) - index} more"
            break
        text = candidate
    if len(text) > limit:
        text = text[: limit - len(ELLIPSIS)].rstrip() + ELLIPSIS
    return text


class Action(NamedTuple):
    """What to do to one node (``drain``, ``resume`` or ``leave``), the
    scontrol arguments that do it (none for ``leave``), and why."""

    node: str
    verb: str
    argv: Tuple[str, ...]
    why: str

    @property
    def command(self) -> str:
        """The command line as an operator would type it."""
        return " ".join(shlex.quote(word) for word in self.argv)


def drain_argv(node: str, reason: str) -> Tuple[str, ...]:
    return ("scontrol", "update", "NodeName=" + node, "State=DRAIN", "Reason=" + reason)


def resume_argv(node: str) -> Tuple[str, ...]:
    return ("scontrol", "update", "NodeName=" + node, "State=RESUME")


def plan_actions(states: Mapping[str, NodeState], problems: Mapping[str, Sequence[str]], *,
                 drain: bool = True, resume: bool = False) -> List[Action]:
    """What to do to each node of ``states``, given the problems found on
    each (a node absent from ``problems`` or with none is healthy).

    A node with problems is drained, unless it is drained already: by
    oddnode, the reason is brought up to date when it changed; by someone
    else, it is left alone (their reason stays).  With ``resume``, a
    healthy node oddnode drained is resumed; one drained by anyone else,
    never."""
    actions = []  # type: List[Action]
    for node, state in sorted(states.items()):
        found = list(problems.get(node) or ())
        if found and drain:
            reason = drain_reason(found)
            if not state.drained:
                actions.append(Action(node, "drain", drain_argv(node, reason), reason))
            elif not state.drained_by_oddnode:
                who = f" by {state.reason_user}" if state.reason_user else ""
                actions.append(Action(node, "leave", (), f"already drained{who} for {state.reason!r}: "
                                                          "its reason is kept"))
            elif state.reason != reason:
                actions.append(Action(node, "drain", drain_argv(node, reason), reason))
        elif not found and resume and state.drained:
            if state.drained_by_oddnode:
                actions.append(Action(node, "resume", resume_argv(node), f"healthy again (was: {state.reason})"))
            else:
                who = f" by {state.reason_user}" if state.reason_user else ""
                actions.append(Action(node, "leave", (), f"drained{who} for {state.reason!r}, not by oddnode: "
                                                          "only whoever drained it resumes it"))
    return actions


def scontrol(*args: str, timeout: float = SCONTROL_TIMEOUT) -> str:
    """Run scontrol; its stdout, or SlurmError with what it said."""
    if shutil.which("scontrol") is None:
        raise SlurmError("scontrol not found: Slurm's commands must be on PATH to drain or resume nodes")
    argv = ["scontrol"] + list(args)
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(argv)}: no answer in {timeout:g} s (is slurmctld up?)") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise SlurmError(f"{' '.join(argv)} failed (exit {done.returncode}): {said[-1] if said else 'no message'}")
    return done.stdout


def node_state(node: str) -> NodeState:
    """``scontrol show node NODE``, parsed."""
    return parse_node_state(scontrol("show", "node", node))


def node_states(nodes: Sequence[str]) -> "dict":
    """The state of each node; SlurmError when Slurm does not know one."""
    return {node: node_state(node) for node in nodes}


def carry_out(actions: Sequence[Action]) -> List[Tuple[Action, Optional[str]]]:
    """Run each action's scontrol command: (action, None) when done, (action,
    error) when scontrol refused; every action is tried."""
    done = []  # type: List[Tuple[Action, Optional[str]]]
    for action in actions:
        if not action.argv:
            done.append((action, None))
            continue
        try:
            scontrol(*action.argv[1:])
        except SlurmError as err:
            done.append((action, str(err)))
        else:
            done.append((action, None))
    return done


def act(actions: Sequence[Action], dry_run: bool) -> List[Tuple[Action, Optional[str], dict, str]]:
    """Carry out each action (none with ``dry_run``): the action, scontrol's
    error or None, its record for a JSON document, and the line that says
    what became of it (an error's without the ``error:`` its printer adds)."""
    done = [(action, None) for action in actions] if dry_run else carry_out(actions)
    acted = []
    for action, error in done:
        record = {"node": action.node, "action": action.verb, "command": action.command or None, "why": action.why,
                  "done": not dry_run and error is None and bool(action.argv), "error": error}
        if action.verb == "leave":
            line = "{}: left as it is: {}".format(action.node, action.why)
        elif dry_run:
            line = "would run: " + action.command
        elif error:
            line = "{}: could not {}: {}".format(action.node, action.verb, error)
        else:
            line = "{}: {} ({})".format(action.node, "drained" if action.verb == "drain" else "resumed", action.why)
        acted.append((action, error, record, line))
    return acted
