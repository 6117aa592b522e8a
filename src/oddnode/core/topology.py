"""Topology files: which group (leaf switch, chassis, rack) each node hangs from.

One group a line, its name and then its nodes as a ClusterShell node set::

    # leaf switches of rack 1
    leaf1  node[01-04]
    leaf2  node[05-08],login1

Blanks inside the node set separate node sets as commas do.  ``#`` starts a comment; blank lines are ignored.  A group may take several
lines (their node sets add up), but a node belongs to one group only.  With a
topology a finding can name a group ("leaf2's uplink") rather than its nodes.

``load_topology`` also reads the topologies a site already keeps (Slurm's
topology.conf and topology.yaml, ClusterShell groups: oddnode.core.topology_sources)
and tells which kind it read.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from oddnode.core.inputs import InputError, parse_yaml, plain_path, quote, read_text
from oddnode.core.nodes import NodeNameError, expand, fold

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


def check_group_name(name: str) -> str:
    """A group name a report can print, else ValueError saying which characters to use."""
    if not _GROUP_NAME.match(name):
        raise ValueError(f"invalid group name {quote(name)}: use letters, digits, '.', '_', ':' and '-'")
    return name


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
            raise TopologyError(source, number, f"group {quote(fields[0])} has no nodes: write 'GROUP NODESET'")
        group, nodeset = fields[0], ",".join(fields[1].split())
        try:
            check_group_name(group)
        except ValueError as err:
            raise TopologyError(source, number, str(err)) from None
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


@dataclass(frozen=True)
class Topology:
    """Node -> group read from one source, and what that source was.

    ``kind`` is ``file`` (oddnode's own format), ``slurm`` (topology.conf or
    topology.yaml) or ``clustershell`` (a group spec); ``origin`` the path or
    the spec; ``parents`` each Slurm switch's switches above it.
    """

    groups: dict[str, str]
    kind: str
    origin: str
    parents: dict[str, list[str]] = field(default_factory=dict)

    @property
    def source(self) -> str:
        """How a run records it: the path for oddnode's own file, else KIND:ORIGIN."""
        return self.origin if self.kind == "file" else f"{self.kind}:{self.origin}"


def load_topology(spec: str | Path, resolver=None, *, groups: bool = True) -> Topology:
    """The topology a ``--topology`` value names: ``@[SOURCE:]PATTERN`` is
    ClusterShell groups (``resolver`` defaults to ClusterShell's standard one),
    unless ``groups`` is false (a path read from data is always a file);
    a file whose first significant line is ``SwitchName=`` (or ``BlockName=``)
    is Slurm's topology.conf, a YAML list of ``topology:`` entries Slurm's
    topology.yaml, anything else oddnode's own topology file."""
    from oddnode.core import topology_sources as sources

    text_spec = str(spec)
    if groups and sources.is_group_spec(text_spec):
        tree = sources.clustershell_topology(text_spec, resolver)
        return Topology(tree.groups, "clustershell", text_spec)
    text = _read_text(spec)
    if sources.is_slurm_topology(text):
        tree = sources.parse_slurm_topology(text, source=text_spec)
        return Topology(tree.groups, "slurm", text_spec, tree.parents)
    if _first_significant_line(text).startswith("-"):
        try:
            document = parse_yaml(text, text_spec)
        except InputError as err:
            raise TopologyError(text_spec, err.line, err.detail) from None
        if sources.is_slurm_topology_yaml(document):
            tree = sources.slurm_yaml_topology(document, source=text_spec)
            return Topology(tree.groups, "slurm", text_spec, tree.parents)
    return Topology(parse_topology(text, source=text_spec), "file", text_spec)


def read_topology(path: str | Path) -> dict[str, str]:
    """Node -> group from a topology file of any kind ``load_topology``
    reads, never ClusterShell groups (the path may come from data); an
    empty file gives an empty mapping."""
    return load_topology(path, groups=False).groups


def _first_significant_line(text: str) -> str:
    return next((line for raw in text.splitlines() if (line := raw.split("#", 1)[0].strip())), "")


def _read_text(path: str | Path) -> str:
    try:
        return read_text(path)
    except InputError as err:
        raise TopologyError(plain_path(path), None, f"cannot read the topology file: {err.detail}") from None


def format_topology(groups: dict[str, str]) -> str:
    """The text of a topology file for node -> group: one line per group, its
    nodes folded into a node set, groups in name order, a header comment."""
    members: dict[str, list[str]] = defaultdict(list)
    for node, group in groups.items():
        if not _GROUP_NAME.match(group):
            raise TopologyError("<topology>", None, f"invalid group name {quote(group)} for {node}")
        members[group].append(node)
    width = max((len(group) for group in members), default=0)
    lines = [HEADER]
    lines += [f"{group:<{width}}  {fold(nodes)}" for group, nodes in sorted(members.items())]
    return "\n".join(lines) + "\n"
