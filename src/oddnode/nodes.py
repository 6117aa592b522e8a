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
from collections.abc import Iterable

from ClusterShell.NodeSet import NodeSet, NodeSetException

from oddnode.model import LabelKind

# A hostname label as RFC 1123 allows it, plus dots for FQDNs and underscores
# that some sites use; nothing a shell would interpret.
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DIGITS = re.compile(r"\d+")
# The parts of a node set string at bracket depth 0 between commas; a part
# with ClusterShell's set operators (! & ^) or spaces is one expression.
_SET_OPERATORS = re.compile(r"[!&^\s]")


class NodeNameError(ValueError):
    """A node name or node set that cannot be used."""


def is_node_name(name: str) -> bool:
    return bool(_NODE_NAME.match(name))


def validate_node_name(name: str) -> str:
    if not is_node_name(name):
        raise NodeNameError(f"invalid node name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def fold(nodes: Iterable[str]) -> str:
    """Fold node names into ClusterShell's compact form: node[001-003,010]."""
    names = sorted(set(nodes))
    if not names:
        return ""
    return str(NodeSet.fromlist(names))


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


def _expand_one(nodeset: str) -> list[str]:
    try:
        names = list(NodeSet(nodeset))
    except NodeSetException as err:
        raise NodeNameError(f"invalid node set {nodeset!r}: {err}") from err
    for name in names:
        validate_node_name(name)
    return names


def expand(nodeset: str) -> list[str]:
    """Expand a node set (``node[001-004],login1``) into node names, in the
    order written: the comma-separated parts one after another, each range in
    natural order; a name given twice counts once, where it first appears.
    An expression with set operators (``node[1-9]!node5``) comes out in
    natural order, as ClusterShell computes it."""
    parts = _top_level_parts(nodeset.strip())
    if parts is None:
        return _expand_one(nodeset)
    names: dict[str, None] = {}
    for part in parts:
        names.update(dict.fromkeys(_expand_one(part)))
    return list(names)


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
