"""Node names, node sets and result labels.

Node sets use ClusterShell's syntax (``node[001-084]``) everywhere: reports
fold them so that output grows with distinct answers, not with nodes.

Node order matters: STAB's pair patterns (sort, cut, fold), the daisy chain
and the all-to-all are defined on the cluster's list order, which follows
its cabling.  A list the administrator gives (``-w``, a host file) keeps its
order; where no order is given, nodes go in natural order, numbers compared
as numbers (node9 before node10, r2n3 before r10n1), as ClusterShell does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

from oddnode.core.inputs import quote
from oddnode.core.model import LabelKind

# A hostname label as RFC 1123 allows it, plus dots for FQDNs and underscores
# that some sites use; nothing a shell would interpret; at most 253
# characters, the longest DNS name (a 16 MB "name" in a file is no host).
MAX_NAME = 253
NODE_NAME_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME - 1}}}"
_NODE_NAME = re.compile(NODE_NAME_PATTERN)
_DIGITS = re.compile(r"\d+")
# The parts of a node set string at bracket depth 0 between commas; a part
# with ClusterShell's set operators (! & ^) or spaces is one expression.
_SET_OPERATORS = re.compile(r"[!&^\s]")
# The most names one node set may give: ten times the largest clusters, and
# a few seconds and some hundred MB to expand.  Checked before expanding.
MAX_NODES = 1_000_000
# A node set's text, token by token for counting: a bracket group of ranges,
# a separator between names (comma or set operator), or a stray bracket.
_TOKENS = re.compile(r"\[(?P<ranges>[^\[\]]*)\]|(?P<separator>[,!&^])|[\[\]]")
# One item of a bracket group, as ClusterShell's RangeSet reads it: N, N-M or
# N-M/STEP, blanks allowed around each number (and a sign before it).
_RANGE = re.compile(r"\s*(?P<first>-?\d+)\s*(?:-\s*(?P<last>-?\d+)\s*(?:/\s*(?P<step>\d+)\s*)?)?")


class NodeNameError(ValueError):
    """A node name or node set that cannot be used."""


def is_node_name(name: str) -> bool:
    return bool(_NODE_NAME.fullmatch(name))  # fullmatch: '$' would let a final newline pass


def validate_node_name(name: str) -> str:
    if not is_node_name(name):
        raise NodeNameError(f"invalid node name {quote(name)}: use letters, digits, '.', '_' and '-', "
                            f"at most {MAX_NAME} of them")
    return name


def fold(nodes: Iterable[str], limit: int = MAX_NODES) -> str:
    """Fold node names into ClusterShell's compact form: node[001-003,010].
    No name is resolved as a group; names that are node sets count against
    ``limit`` as in :func:`expand`."""
    names = sorted(set(nodes))
    if not names:
        return ""
    _check_size(",".join(name for name in names if not is_node_name(name)), limit, plain=len(names))
    return str(NodeSet.fromlist(names, resolver=RESOLVER_NOGROUP))


def node_count(nodeset: str) -> int:
    """How many names ``nodeset`` gives at most, counted from its text
    without expanding it: each bracket group's ranges (``1-100/2`` is 50)
    multiply, comma-separated parts add, and so do the operands of a set
    expression (``!``, ``&``, ``^`` give at most their sum).  A group
    (``@rack1``) counts as one name: what it holds is not known here."""
    total, product = 0, 1
    for token in _TOKENS.finditer(nodeset):
        if token["ranges"] is not None:
            product *= _range_count(token["ranges"], nodeset)
        elif token["separator"]:
            total, product = total + product, 1
        else:
            raise NodeNameError(f"invalid node set {quote(nodeset)}: brackets unbalanced or nested")
    return total + product


def _range_count(ranges: str, nodeset: str) -> int:
    """How many numbers a bracket's ranges (``1-3,7,10-20/5``) give."""
    count = 0
    for item in ranges.split(","):
        match = _RANGE.fullmatch(item)
        if match is None:
            raise NodeNameError(f"invalid node set {quote(nodeset)}: bad range {quote(item.strip())}")
        first, last, step = match["first"], match["last"] or match["first"], match["step"] or "1"
        count += max(int(last) - int(first), 0) // max(int(step), 1) + 1
    return count


def _check_size(nodeset: str, limit: int, plain: int = 0) -> None:
    """Refuse, before expanding, a node set of more than ``limit`` names
    (``plain`` names already counted), so that ``node[1-20000000]`` costs
    nothing but this message."""
    if nodeset and (count := plain + node_count(nodeset)) > limit:
        raise _too_many(nodeset, count, limit)


def _too_many(nodeset: str, count: int, limit: int) -> NodeNameError:
    return NodeNameError(f"node set {quote(nodeset)} gives {count:,} names, more than the {limit:,} accepted at once")


def _top_level_parts(nodeset: str) -> list[str] | None:
    """The comma-separated parts outside brackets, or None when the string
    uses set operators, which only make sense on the whole expression."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(nodeset):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(nodeset[start:index])
            start = index + 1
    parts.append(nodeset[start:])
    if any(_SET_OPERATORS.search(part) for part in parts):
        return None
    return [part for part in parts if part]


def _expand_one(nodeset: str, resolver: object) -> list[str]:
    try:
        names = list(NodeSet(nodeset, resolver=resolver))
    except NodeSetException as err:
        raise NodeNameError(f"invalid node set {quote(nodeset)}: {err}") from err
    for name in names:
        validate_node_name(name)
    return names


def _expand(nodeset: str, resolver: object, limit: int) -> list[str]:
    """The names of ``nodeset`` in the order written (see :func:`expand`),
    at most ``limit`` of them, groups resolved by ``resolver``."""
    _check_size(nodeset, limit)
    parts = _top_level_parts(nodeset.strip())
    if parts is None:
        names = dict.fromkeys(_expand_one(nodeset, resolver))
    else:
        names = {}
        for part in parts:
            names.update(dict.fromkeys(_expand_one(part, resolver)))
    if len(names) > limit:  # groups from the command line, counted once resolved
        raise _too_many(nodeset, len(names), limit)
    return list(names)


def expand(nodeset: str, limit: int = MAX_NODES) -> list[str]:
    """Expand a node set read from data (a file, a store, a label) into node
    names, in the order written: the comma-separated parts one after another,
    each range in natural order; a name given twice counts once, where it
    first appears.  An expression with set operators (``node[1-9]!node5``)
    comes out in natural order, as ClusterShell computes it.

    Node names in data are data: a group (``@name``) is refused, never
    resolved (a group source may run commands), and a set of more than
    ``limit`` names is refused before it is expanded."""
    if "@" in nodeset:
        raise NodeNameError(f"node set {quote(nodeset)} names a group ('@'): groups are resolved only in "
                            "-w and -x, never from a file")
    return _expand(nodeset, RESOLVER_NOGROUP, limit)


def expand_command_line(nodeset: str, limit: int = MAX_NODES) -> list[str]:
    """Expand a node set the user typed (``-w``, ``-x``) as :func:`expand`
    does, except that ``@group`` resolves through ClusterShell's standard
    group sources (groups.conf), as clush resolves it: those are the site's
    own configuration."""
    return _expand(nodeset, None, limit)


def _shape(name: str) -> str:
    """A name with its digit runs masked: node405 and node406 share a shape."""
    return _DIGITS.sub("#", name)


def split_pair(label: str, known_nodes: set[str] | None = None) -> tuple[str, str] | None:
    """Split ``nodeA-nodeB`` into its two nodes, or return None.

    Node names may themselves contain dashes (``cn-001-cn-002``), so every
    dash is tried; a split counts when both halves are known nodes or, with no
    inventory to ask, when both halves have the same shape.
    """
    candidates = []
    for match in re.finditer("-", label):
        left, right = label[: match.start()], label[match.end():]
        if not (left and right and is_node_name(left) and is_node_name(right)):
            continue
        if known_nodes is not None and left in known_nodes and right in known_nodes:
            return left, right
        if _shape(left) == _shape(right):
            candidates.append((left, right))
    return candidates[0] if len(candidates) == 1 else None


def label_kind(label: str, known_nodes: set[str] | None = None) -> LabelKind:
    """Classify a result label as a node, a pair or a node set."""
    if any(c in label for c in "[],"):
        return LabelKind.SET
    if known_nodes is not None and label in known_nodes:
        return LabelKind.NODE
    if split_pair(label, known_nodes) is not None:
        return LabelKind.PAIR
    return LabelKind.NODE


def node_sets(given: str | Sequence[str] | None) -> str | None:
    """Node sets given several times (``-w a -w b``) as one: they add up, as
    clush's do; None when none was given."""
    if given is None or isinstance(given, str):
        return given
    return ",".join(given) or None


def label_members(label: str, kind: LabelKind) -> tuple[str, ...]:
    """The nodes a label names, each a valid node name."""
    if kind is LabelKind.NODE:
        return (validate_node_name(label),)
    if kind is LabelKind.PAIR:
        pair = split_pair(label)
        if pair is None:
            raise NodeNameError(f"label {label!r} is not a pair of nodes (nodeA-nodeB)")
        return pair
    return tuple(expand(label))
