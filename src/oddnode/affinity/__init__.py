"""Topology and process affinity: per node its sockets, NUMA nodes, cores
and CPUs and the memory of each NUMA node; per process asked for, where it
may run (cpuset, Cpus_allowed_list, Mems_allowed_list), where each of its
threads ran over a short interval, and where its memory lives.

``topology.py``, ``sampler.py`` and ``node_affinity.py`` run on the nodes
(standard library only, Python >= 3.6) and travel in the command line
(``collect.py``); ``model.py`` holds the typed report the findings
(``oddnode.findings.affinity``) and the report read.
"""

from oddnode.affinity.collect import AffinityResult, collect_affinity, parse_sampler_output, sampler_argv
from oddnode.affinity.model import (
    AffinityOutputError,
    Cpu,
    NodeAffinity,
    NumaNode,
    ProcessSample,
    ThreadSample,
    Topology,
    node_affinity_from_json,
)

__all__ = [
    "AffinityOutputError",
    "AffinityResult",
    "Cpu",
    "NodeAffinity",
    "NumaNode",
    "ProcessSample",
    "ThreadSample",
    "Topology",
    "collect_affinity",
    "node_affinity_from_json",
    "parse_sampler_output",
    "sampler_argv",
]
