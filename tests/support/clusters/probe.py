"""A scripted cluster answering the node probe with known facts."""

from __future__ import annotations

import json

from oddnode.onnode.node_probe import PROBE_VERSION
from oddnode.reach.base import NodeResult, NodeStatus


NODES = ["cn-a17", "cn-a18", "cn-a19", "cn-a20", "cn-a21", "cn-b01"]


BASE_FACTS = {"kernel": "6.1.0-18-amd64", "cpu_model": "AMD EPYC 7763", "bios_version": "2.7.3",
              "memory_total_kb": "527958168"}


class ProbeCluster:
    """Answers the inventory probe: ``facts`` overrides a node's facts,
    ``down`` cannot be reached, ``broken`` answers with no JSON."""

    name = "scripted"

    def __init__(self, facts=None, down=(), broken=(), notes=None):
        self.facts, self.down, self.broken, self.notes = facts or {}, set(down), set(broken), notes or {}

    def run(self, nodes, argv, *, timeout):
        results = {}
        for node in nodes:
            if node in self.down:
                results[node] = NodeResult(node, NodeStatus.UNREACHABLE, "",
                                           f"ssh: connect to host {node} port 22: No route to host", None, 3.0)
            elif node in self.broken:
                results[node] = NodeResult(node, NodeStatus.OK, "not json at all", "", 0, 0.2)
            else:
                facts = {**BASE_FACTS, **self.facts.get(node, {})}
                stdout = json.dumps({"probe_version": PROBE_VERSION, "hostname": node, "facts": facts,
                                     "notes": self.notes.get(node, []), "elapsed": 0.1})
                results[node] = NodeResult(node, NodeStatus.OK, stdout, "", 0, 0.3)
        return results
