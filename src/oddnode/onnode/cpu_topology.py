"""A node's topology: which socket, core and NUMA node every CPU belongs
to, and the memory of every NUMA node; read from sysfs under a root given
as a parameter (tests build trees), and from hwloc's XML (``lstopo --of
xml``) where hwloc is installed.

Standard library only, for Python >= 3.6: this module travels to the nodes
with the affinity sampler (``oddnode.measure.collect.affinity``).  Nothing runs at
import time.

The topology is plain data, the same from either source::

    {"source": "sysfs" | "hwloc",
     "cpus": [{"cpu": 0, "package": 0, "die": 0 | None, "core": 0,
               "siblings": "0,24", "numa": 0 | None}, ...],
     "numa_nodes": [{"node": 0, "cpus": "0-11,24-35", "memory_kb": 131072000 | None,
                     "distances": [10, 21] | None}, ...]}

``core`` is the core's number within its package (core_id); ``siblings``
the CPUs of that core (its hardware threads), which tell the cores apart
even where core numbers repeat across the dies of one package.
"""

import os
import re
import xml.etree.ElementTree as ElementTree

from oddnode.onnode.node_probe import read_meminfo, read_text, run_tool

SYSFS = "/sys"
# hwloc writes sets of CPUs as comma-separated 32-bit words, most
# significant first ("0x000000ff,0xffffffff"); "0xf...f" stands for every
# higher bit set (an infinite set, as the root of a topology may have).
_HWLOC_WORD_BITS = 32
_INFINITE = "0xf...f"
_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")


class TopologyError(ValueError):
    """A topology that cannot be read: names the file or the object and why."""


def parse_cpulist(text, where="cpu list"):
    """[0, 1, 2, 3, 8] from the kernel's list format "0-3,8" (empty: [])."""
    cpus = set()
    text = (text or "").strip()
    if not text:
        return []
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if sep else first
        except ValueError:
            raise TopologyError("%s: %r is not a list of CPUs such as 0-3,8" % (where, text))
        if first < 0 or last < first:
            raise TopologyError("%s: %r has a range that runs backwards or below 0" % (where, text))
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def format_cpulist(cpus):
    """The kernel's list format of some CPU numbers: [0, 1, 2, 3, 8] -> "0-3,8"."""
    ordered = sorted(set(int(cpu) for cpu in cpus))
    parts = []
    start = previous = None
    for cpu in ordered + [None]:
        if cpu is not None and previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == previous else "%d-%d" % (start, previous))
        start = previous = cpu
    return ",".join(parts)


def parse_hwloc_bitmap(text, where="hwloc cpuset"):
    """CPU numbers of an hwloc bitmap ("0x0000000f,0xffffffff": 0-35)."""
    text = (text or "").strip()
    if not text:
        return []
    if text.startswith(_INFINITE):
        raise TopologyError("%s: %r is an infinite set" % (where, text))
    words = text.split(",")
    cpus = []
    for position, word in enumerate(reversed(words)):
        try:
            value = int(word, 16)
        except ValueError:
            raise TopologyError("%s: %r is not an hwloc bitmap such as 0x000000ff,0xffffffff" % (where, text))
        base = position * _HWLOC_WORD_BITS
        bit = 0
        while value:
            if value & 1:
                cpus.append(base + bit)
            value >>= 1
            bit += 1
    return sorted(cpus)


# ---------------------------------------------------------------- sysfs


def _integer(path):
    text = read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        raise TopologyError("%s: %r is not a number" % (path, text))


def _numa_nodes_sysfs(root, notes):
    base = os.path.join(root, "devices", "system", "node")
    names = [name for name in (os.listdir(base) if os.path.isdir(base) else []) if _NODE_DIR.match(name)]
    if not names:
        notes.append("no NUMA nodes in %s: the CPUs' NUMA nodes are unknown" % base)
    nodes = []
    for name in sorted(names, key=lambda n: int(_NODE_DIR.match(n).group(1))):
        path = os.path.join(base, name)
        cpus = read_text(os.path.join(path, "cpulist"))
        meminfo = read_meminfo(os.path.join(path, "meminfo"))
        distance = read_text(os.path.join(path, "distance"))
        memory = meminfo.get("MemTotal")
        nodes.append({
            "node": int(_NODE_DIR.match(name).group(1)),
            "cpus": format_cpulist(parse_cpulist(cpus, os.path.join(path, "cpulist"))) if cpus else "",
            "memory_kb": int(memory) if memory and memory.isdigit() else None,
            "distances": [int(word) for word in distance.split()] if distance else None,
        })
    return nodes


def read_sysfs(root=SYSFS, notes=None):
    """The topology under a sysfs root (``/sys``, or a tree a test wrote).

    Online CPUs are those with a ``topology`` directory (an offline CPU has
    none); ``notes`` collects what could not be read."""
    notes = notes if notes is not None else []
    base = os.path.join(root, "devices", "system", "cpu")
    numbers = []
    for name in os.listdir(base) if os.path.isdir(base) else []:
        match = _CPU_DIR.match(name)
        if match and os.path.isdir(os.path.join(base, name, "topology")):
            numbers.append(int(match.group(1)))
    if not numbers:
        raise TopologyError("%s: no CPU with a topology directory" % base)
    numa_nodes = _numa_nodes_sysfs(root, notes)
    numa_of = {}
    for node in numa_nodes:
        for cpu in parse_cpulist(node["cpus"]):
            numa_of[cpu] = node["node"]
    cpus = []
    for number in sorted(numbers):
        topology = os.path.join(base, "cpu%d" % number, "topology")
        package = _integer(os.path.join(topology, "physical_package_id"))
        core = _integer(os.path.join(topology, "core_id"))
        if package is None or core is None:
            raise TopologyError("%s: no physical_package_id or core_id" % topology)
        siblings = read_text(os.path.join(topology, "thread_siblings_list")) or \
            read_text(os.path.join(topology, "core_cpus_list")) or str(number)
        cpus.append({
            "cpu": number,
            "package": package,
            "die": _integer(os.path.join(topology, "die_id")),  # Linux >= 5.2
            "core": core,
            "siblings": format_cpulist(parse_cpulist(siblings, os.path.join(topology, "thread_siblings_list"))),
            "numa": numa_of.get(number),
        })
    return {"source": "sysfs", "cpus": cpus, "numa_nodes": numa_nodes}


# ---------------------------------------------------------------- hwloc


def _distances_hwloc(root, numa_nodes):
    """The NUMA distance rows of hwloc 2's <distances2 type="NUMANode">, by os index."""
    for element in root.iter("distances2"):
        if element.get("type") != "NUMANode":
            continue
        # hwloc writes long lists in several elements of ten numbers each.
        order = [int(word) for part in element.findall("indexes") for word in (part.text or "").split()]
        numbers = [int(word) for part in element.findall("u64values") for word in (part.text or "").split()]
        if not order:
            continue
        if len(numbers) != len(order) ** 2:
            raise TopologyError("hwloc distances2: %d values for %d NUMA nodes" % (len(numbers), len(order)))
        rows = dict((node, numbers[i * len(order):(i + 1) * len(order)]) for i, node in enumerate(order))
        for node in numa_nodes:
            if node["node"] in rows:
                node["distances"] = rows[node["node"]]
        return


def parse_hwloc_xml(text):
    """The topology in hwloc's XML (``lstopo --of xml``, hwloc 1.x or 2.x):
    every PU with its Package, Die and Core ancestors, every NUMANode with
    its cpuset and local_memory (bytes)."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as err:
        raise TopologyError("hwloc XML is not well-formed: %s" % err)
    if root.tag != "topology":
        raise TopologyError("hwloc XML: the root element is <%s>, not <topology>" % root.tag)
    pus = []
    numa_nodes = []

    def walk(element, context):
        kind = element.get("type")
        if kind in ("Package", "Die", "Core"):
            index = element.get("os_index")
            context = dict(context)
            context[kind] = int(index) if index is not None else None
            if kind == "Core":
                context["siblings"] = parse_hwloc_bitmap(element.get("cpuset"), "hwloc Core cpuset")
        elif kind == "PU":
            index = element.get("os_index")
            if index is None:
                raise TopologyError("hwloc XML: a PU without os_index")
            pus.append((int(index), context))
        elif kind == "NUMANode":
            memory = element.get("local_memory")
            numa_nodes.append({
                "node": int(element.get("os_index", len(numa_nodes))),
                "cpus": format_cpulist(parse_hwloc_bitmap(element.get("cpuset"), "hwloc NUMANode cpuset")),
                "memory_kb": int(memory) // 1024 if memory else None,  # hwloc counts bytes, meminfo kB
                "distances": None,
            })
        for child in element.findall("object"):
            walk(child, context)

    for top in root.findall("object"):
        walk(top, {})
    if not pus:
        raise TopologyError("hwloc XML: no PU (processing unit) objects")
    numa_nodes.sort(key=lambda node: node["node"])
    _distances_hwloc(root, numa_nodes)
    numa_of = {}
    for node in numa_nodes:
        for cpu in parse_cpulist(node["cpus"]):
            numa_of[cpu] = node["node"]
    cpus = []
    for number, context in sorted(pus, key=lambda item: item[0]):
        siblings = context.get("siblings") or [number]
        cpus.append({
            "cpu": number,
            "package": context.get("Package", 0) if context.get("Package") is not None else 0,
            "die": context.get("Die"),
            "core": context.get("Core") if context.get("Core") is not None else number,
            "siblings": format_cpulist(siblings),
            "numa": numa_of.get(number),
        })
    return {"source": "hwloc", "cpus": cpus, "numa_nodes": numa_nodes}


def read_hwloc(notes):
    """The topology lstopo reports, or None (a note says why) without hwloc."""
    text = run_tool(["lstopo", "--of", "xml"], notes)
    if text is None:
        return None
    try:
        return parse_hwloc_xml(text)
    except TopologyError as err:
        notes.append("lstopo's XML could not be read: %s" % err)
        return None


def _layout(topology):
    """What two readings of one machine must agree on: per CPU its
    package, core siblings and NUMA node; per NUMA node its CPUs."""
    return (sorted((c["cpu"], c["package"], c["siblings"], c["numa"]) for c in topology["cpus"]),
            sorted((n["node"], n["cpus"]) for n in topology["numa_nodes"]))


def read_topology(root=SYSFS, notes=None, hwloc=True):
    """The node's topology from sysfs, cross-checked with hwloc when
    ``lstopo`` is installed (only for the real /sys, which lstopo reads);
    hwloc's alone when sysfs has none."""
    notes = notes if notes is not None else []
    try:
        topology = read_sysfs(root, notes)
    except TopologyError as err:
        topology = None
        notes.append("sysfs topology unreadable: %s" % err)
    from_hwloc = read_hwloc(notes) if hwloc and os.path.realpath(root) == SYSFS else None
    if topology is None:
        if from_hwloc is None:
            raise TopologyError("no topology: sysfs unreadable and hwloc (lstopo) unavailable")
        return from_hwloc
    if from_hwloc is not None:
        if _layout(from_hwloc) == _layout(topology):
            topology["hwloc"] = "agrees"
        else:
            topology["hwloc"] = "differs"
            notes.append("hwloc's lstopo and sysfs disagree on the CPUs' cores or NUMA nodes; sysfs is shown")
        for node in topology["numa_nodes"]:
            if node["distances"] is None:
                node["distances"] = next((n["distances"] for n in from_hwloc["numa_nodes"]
                                          if n["node"] == node["node"]), None)
    return topology

