"""The parser of our shared-memory ping-pong kernel's output
(``shm_pingpong.c``, tool name ``oddnode-shm-pingpong``): two threads pinned
to the CPUs of two NUMA nodes, printing the TCP ping-pong kernel's lines
(read by ``parse_ping_output``) with the ends' NUMA nodes and CPUs in its
header."""

from __future__ import annotations

from dataclasses import replace

from oddnode.parsers.base import ParsedOutput, ParseError
from oddnode.parsers.kernel_output import whole
from oddnode.parsers.oddnode_pingpong import parse_ping_output

SHM_KERNEL = "shm_pingpong"
SHM_BENCHMARK = "shm.pingpong"
_SHM_INT_KEYS = ("a_node", "b_node", "a_cpu", "b_cpu", "a_final_cpu", "b_final_cpu", "pages_checked",
                 "pages_on_node")


def parse_shm_pingpong_output(text: str, source: str) -> ParsedOutput:
    """One run of the shared-memory ping-pong: latency and bandwidth per
    size (``shm.pingpong``, as the TCP and MPI kernels' lines), the ends'
    NUMA nodes and CPUs, and its echo and binding checks."""
    parsed = parse_ping_output(text, source, SHM_KERNEL, SHM_BENCHMARK, "oddnode-shm-pingpong")
    configuration = dict(parsed.configuration)
    for key in _SHM_INT_KEYS:
        if key in configuration:
            configuration[key] = whole(str(configuration[key]), source, None)
    for key in ("a_node", "b_node", "a_cpu", "b_cpu"):
        if key not in configuration:
            raise ParseError(source, None, f"shm_pingpong kernel header lacks {key!r}")
    ends = {key: configuration[key] for key in ("a_node", "b_node", "a_cpu", "b_cpu")}
    problems = [p.replace("between the nodes", "between the two ends") for p in parsed.problems]
    measurements = []
    for m in parsed.measurements:
        parameters = {k: v for k, v in m.parameters.items() if k not in ("peer", "port")}
        measurements.append(replace(m, parameters={**parameters, **ends}))
    return ParsedOutput(parsed.tool, measurements, parsed.valid, problems, configuration)
