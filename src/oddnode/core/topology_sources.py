"""Topologies a site already keeps: Slurm's topology.conf and topology.yaml,
and ClusterShell node groups.

Each reader gives node -> group, the group being the switch (or block, or
node group) a node hangs from, as oddnode's own topology file does:

- Slurm's topology/tree plugin (``topology.conf``): the leaf switches, those
  with ``Nodes=``, are the groups; switches with ``Switches=`` are the levels
  above, kept as each switch's parents.  The topology/block plugin's
  ``BlockName=... Nodes=...`` blocks are groups too.
- Slurm's ``topology.yaml`` (Slurm 23.11 and later): the cluster's default
  topology (else the first), its tree switches or its blocks as above.
- ClusterShell groups (``@rack*``, ``@switch:*``): every group of a group
  source whose name matches, resolved by ClusterShell's own resolver
  (``groups.conf``, ``groups.d/*.yaml``, upcalls).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from oddnode.core.inputs import quote
from oddnode.core.nodes import NodeNameError, expand, validate_node_name
from oddnode.core.topology import TopologyError, check_group_name

# topology.conf's keys this reader uses, lower case (Slurm reads keys in any
# case); any other key on a switch or block line is ignored, as LinkSpeed is.
_LEADING_KEYS = ("switchname", "blockname", "blocksizes")
# A '#' starts a comment unless escaped as '\#', as Slurm's parser reads it.
_COMMENT = re.compile(r"(?<!\\)#")


@dataclass
class GroupTree:
    """Node -> group, and for each group or switch the switches above it."""

    groups: dict[str, str] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)


# ---------------------------------------------------------------- Slurm topology.conf


def is_slurm_topology(text: str) -> bool:
    """Whether a file's first significant line is a topology.conf line
    (``SwitchName=``, ``BlockName=`` or ``BlockSizes=``, in any case)."""
    for raw in text.splitlines():
        line = _COMMENT.split(raw, 1)[0].strip()
        if line:
            return line.lower().startswith(tuple(f"{key}=" for key in _LEADING_KEYS))
    return False


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each line, comments removed and a line
    that ends in a backslash joined to the next, as Slurm's parser does."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _COMMENT.split(raw, 1)[0].replace("\\#", "#")
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1]  # joined as written: no blank added, as Slurm does
            continue
        lines.append((start, pending + line))
        pending = ""
    if pending:
        lines.append((start, pending))
    return lines


def _names(value: str, where: str, what: str) -> list[str]:
    """The names of a Slurm hostlist (``tux[0-3,12]``), which ClusterShell reads."""
    try:
        return expand(value)
    except NodeNameError as err:
        raise TopologyError(where, None, f"{what}: {err}") from None


def parse_slurm_topology(text: str, source: str = "<topology.conf>") -> GroupTree:
    """Node -> leaf switch (or block) from topology.conf's text, and each
    switch's parents.  A node under two switches, a switch defined twice, one
    with both nodes and switches or neither, a child switch never defined, or a
    line that is not KEY=VALUE words is an error naming the file and line."""
    return _switch_tree([(f"{source}:{number}", f"line {number}", line) for number, line in _logical_lines(text)])


def _switch_tree(lines: list[tuple[str, str, str]]) -> GroupTree:
    """The tree from topology.conf lines, each with where it is for an error
    (FILE:LINE) and how another line's error names it (line N)."""
    tree = GroupTree()
    defined: dict[str, str] = {}
    defined_where: dict[str, str] = {}
    node_place: dict[str, str] = {}
    children: list[tuple[str, str, str]] = []
    for where, place, line in lines:
        words = line.split()
        if not words:
            continue
        pairs: dict[str, str] = {}
        for word in words:
            key, equals, value = word.partition("=")
            if not equals or not key or not value:
                raise TopologyError(where, None, f"{quote(word)} is not KEY=VALUE (a line reads "
                                    "'SwitchName=NAME Nodes=NODES' or 'SwitchName=NAME Switches=SWITCHES')")
            if key.lower() in pairs:
                raise TopologyError(where, None, f"{quote(key)} is given twice")
            pairs[key.lower()] = value
        leading = words[0].partition("=")[0].lower()
        if leading not in _LEADING_KEYS:
            raise TopologyError(where, None, f"a line starts with SwitchName= (or BlockName=), not {quote(words[0])}")
        if leading == "blocksizes":
            continue  # the block plugin's sizes of aggregated blocks: no membership
        name = pairs[leading]
        what = "switch" if leading == "switchname" else "block"
        try:
            check_group_name(name)
        except ValueError as err:
            raise TopologyError(where, None, str(err)) from None
        if name in defined:
            raise TopologyError(where, None, f"{what} {name} is already defined on {defined[name]}")
        defined[name], defined_where[name] = place, where
        nodes, switches = pairs.get("nodes"), pairs.get("switches") if what == "switch" else None
        if nodes and switches:
            raise TopologyError(where, None, f"switch {name} has both Nodes= and Switches=: "
                                "a switch has one kind of child")
        if not nodes and not switches:
            wanted = "Nodes= or Switches=" if what == "switch" else "Nodes="
            raise TopologyError(where, None, f"{what} {name} has no {wanted}")
        if switches:
            children += [(child, name, where) for child in _names(switches, where, f"Switches of {name}")]
            continue
        for node in _names(nodes, where, f"Nodes of {name}"):
            if node in tree.groups:
                raise TopologyError(where, None, f"{node} is already under {tree.groups[node]} ({node_place[node]}); "
                                    "a node hangs from one leaf switch")
            tree.groups[node] = name
            node_place[node] = place
    for child, parent, where in children:
        if child not in defined:
            raise TopologyError(where, None, f"switch {parent} names switch {child}, defined nowhere")
        tree.parents.setdefault(child, []).append(parent)
    _refuse_cycles(tree.parents, defined_where)
    return tree


def _refuse_cycles(parents: dict[str, list[str]], where: dict[str, str]) -> None:
    """Refuse a switch that is, through its parents, above itself, naming
    the line of the switch that closes the loop; walked without recursion,
    so that a chain of any length is no stack overflow."""
    done: set[str] = set()
    for start in parents:
        if start in done:
            continue
        path, on_path, pending = [start], {start}, [iter(parents.get(start, ()))]
        while pending:
            parent = next(pending[-1], None)
            if parent is None:
                done.add(path[-1])
                on_path.discard(path.pop())
                pending.pop()
            elif parent in on_path:
                loop = " under ".join(path[path.index(parent):] + [parent])
                raise TopologyError(where[parent], None, f"switches in a cycle: {loop}")
            elif parent not in done:
                path.append(parent)
                on_path.add(parent)
                pending.append(iter(parents.get(parent, ())))


# ---------------------------------------------------------------- Slurm topology.yaml


def is_slurm_topology_yaml(document: object) -> bool:
    """Whether a YAML document is Slurm's topology.yaml: a list of mappings
    each naming a ``topology``."""
    return (isinstance(document, list) and bool(document)
            and all(isinstance(item, dict) and "topology" in item for item in document))


def slurm_yaml_topology(document: list[dict], source: str = "<topology.yaml>") -> GroupTree:
    """Node -> leaf switch or block from a parsed topology.yaml: the topology
    marked ``cluster_default``, else the first; a flat topology has no groups."""
    chosen = next((item for item in document if item.get("cluster_default")), document[0])
    name = chosen.get("topology")
    lines: list[str] = []
    if "tree" in chosen:
        for entry in _entries(chosen["tree"], "switches", "switch", source, name):
            children = "".join(f" {key}={_hostlist(entry[yaml_key])}"
                               for key, yaml_key in (("Nodes", "nodes"), ("Switches", "children")) if yaml_key in entry)
            lines.append(f"SwitchName={entry['switch']}{children}")
    elif "block" in chosen:
        lines += [f"BlockName={entry['block']}" + (f" Nodes={_hostlist(entry['nodes'])}" if "nodes" in entry else "")
                  for entry in _entries(chosen["block"], "blocks", "block", source, name)]
    elif not chosen.get("flat"):
        raise TopologyError(source, None, f"topology {name} has no tree, block or flat")
    # The same checks as topology.conf, each entry named by its place in the list.
    where = f"{source}: topology {name}"
    return _switch_tree([(f"{where}, entry {i}", f"entry {i}", line) for i, line in enumerate(lines, start=1)])


def _entries(section: object, key: str, name_key: str, source: str, name: str) -> list[dict]:
    """The switches or blocks of a topology.yaml section, each with its name."""
    entries = section.get(key) if isinstance(section, dict) else None
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise TopologyError(source, None, f"topology {name}: '{key}' must be a list of mappings")
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry.get(name_key), str) or not entry[name_key].strip():
            raise TopologyError(source, None, f"topology {name}, entry {number}: no '{name_key}' name")
    return entries


def _hostlist(value: object) -> str:
    """A YAML hostlist: a string (``tux[0-3]``) or a list of them; no blanks
    inside, as topology.conf's words have none."""
    text = ",".join(str(item) for item in value) if isinstance(value, list) else str(value)
    return ",".join(text.split())


# ---------------------------------------------------------------- ClusterShell groups


def is_group_spec(spec: str) -> bool:
    """A topology given as ClusterShell groups: ``@PATTERN`` or ``@SOURCE:PATTERN``."""
    return spec.startswith("@")


def clustershell_topology(spec: str, resolver=None) -> GroupTree:
    """Node -> group from the ClusterShell groups that ``@[SOURCE:]PATTERN``
    names: every group of SOURCE (the default source when none is given) whose
    name matches the shell pattern (``@rack*``, ``@switch:*``, ``@leaf1``).
    ``resolver`` defaults to ClusterShell's standard one (groups.conf in
    /etc/clustershell, ~/.local/etc/clustershell or $CLUSTERSHELL_CFGDIR)."""
    from ClusterShell.NodeSet import NodeSet, NodeSetException, grouplist, std_group_resolver
    from ClusterShell.NodeUtils import GroupResolverError, GroupSourceError

    resolver = resolver or std_group_resolver()
    body = spec[1:]
    namespace, colon, pattern = body.rpartition(":")
    if not colon:
        namespace, pattern = "", body
    if not pattern:
        raise TopologyError(spec, None, "give a group or a pattern after '@' (@rack*, @switch:*)")
    described = f"group source {quote(namespace)}" if namespace else "the default group source"
    try:
        sources = resolver.sources()
        if not sources:
            raise TopologyError(spec, None, "no ClusterShell group source is configured (groups.conf in "
                                "/etc/clustershell, ~/.local/etc/clustershell or $CLUSTERSHELL_CFGDIR)")
        if not namespace and resolver.default_source_name is None:
            raise TopologyError(spec, None, f"ClusterShell has no default group source: write @SOURCE:{pattern} "
                                f"(sources: {', '.join(sources)})")
        if namespace and namespace not in sources:
            raise TopologyError(spec, None, f"no ClusterShell group source {quote(namespace)}; "
                                f"sources: {', '.join(sources) or 'none configured (groups.conf)'}")
        names = grouplist(namespace or None, resolver=resolver)
        matching = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
        if not matching:
            raise TopologyError(spec, None, f"no group of {described} matches {quote(pattern)}; "
                                f"its groups: {', '.join(names) or 'none'}")
        tree = GroupTree()
        for name in matching:
            try:
                check_group_name(name)
            except ValueError as err:
                raise TopologyError(spec, None, str(err)) from None
            prefix = f"@{namespace}:" if namespace else "@"
            members = NodeSet(prefix + name, resolver=resolver)
            for node in members:
                try:
                    validate_node_name(node)
                except NodeNameError as err:
                    raise TopologyError(spec, None, f"group {name}: {err}") from None
                if node in tree.groups:
                    raise TopologyError(spec, None, f"{node} is in groups {tree.groups[node]} and {name}; "
                                        "a node belongs to one group: narrow the pattern")
                tree.groups[node] = name
    except (GroupResolverError, GroupSourceError, NodeSetException) as err:
        raise TopologyError(spec, None, f"ClusterShell cannot resolve the groups: {err}") from None
    return tree
