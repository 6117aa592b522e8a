"""Topology files: which group (leaf switch, chassis, rack) each node hangs from.

One group a line, its name and then its nodes as a ClusterShell node set::

    # leaf switches of rack 1
    leaf1  node[01-04]
    leaf2  node[05-08],login1

Blanks inside the node set separate node sets as commas do.  ``#`` starts a comment; blank lines are ignored.  A group may take several
lines (their node sets add up), but a node belongs to one group only.  With a
topology a finding can name a group ("leaf2's uplink") rather than its nodes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from oddnode.nodes import NodeNameError, expand, fold

# Group names are words a report can print and a shell cannot misread:
# letters, digits and '.', '_', ':', '-', starting with a letter or digit.
_GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
HEADER = "# oddnode topology: GROUP NODESET, one group a line (node sets in ClusterShell syntax)"


class TopologyError(ValueError):
    """A topology file that cannot be read; the message names the file and line."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        super().__init__(f"{source}:{line}: {message}" if line is not None else f"{source}: {message}")


def parse_topology(text: str, source: str = "<topology>") -> dict[str, str]:
    """Node -> group from a topology file's text (format in the module docstring)."""
    groups: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split(None, 1)
        if len(fields) < 2:
            raise TopologyError(source, number, f"group {fields[0]!r} has no nodes: write 'GROUP NODESET'")
        group, nodeset = fields[0], ",".join(fields[1].split())
        if not _GROUP_NAME.match(group):
            raise TopologyError(source, number, f"invalid group name {group!r}: use letters, digits, "
                                "'.', '_', ':' and '-'")
        try:
            nodes = expand(nodeset)
        except NodeNameError as err:
            raise TopologyError(source, number, str(err)) from None
        for node in nodes:
            if node in groups:
                where = f"{groups[node]} (line {first_line[node]})"
                raise TopologyError(source, number, f"{node} is already in group {where}; a node has one group")
            groups[node] = group
            first_line[node] = number
    return groups


def read_topology(path: str | Path) -> dict[str, str]:
    """Node -> group from a topology file; an empty file gives an empty mapping."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise TopologyError(str(path), None, f"cannot read the topology file: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise TopologyError(str(path), None, f"not UTF-8 text: {err}") from err
    return parse_topology(text, source=str(path))


def format_topology(groups: dict[str, str]) -> str:
    """The text of a topology file for node -> group: one line per group, its
    nodes folded into a node set, groups in name order, a header comment."""
    members: dict[str, list[str]] = defaultdict(list)
    for node, group in groups.items():
        if not _GROUP_NAME.match(group):
            raise TopologyError("<topology>", None, f"invalid group name {group!r} for {node}")
        members[group].append(node)
    width = max((len(group) for group in members), default=0)
    lines = [HEADER]
    lines += [f"{group:<{width}}  {fold(nodes)}" for group, nodes in sorted(members.items())]
    return "\n".join(lines) + "\n"
