"""Parsers of tools' outputs, registered by tool name: the field's
benchmarks (STREAM, HPCC, NPB, IMB, OSU, fio, iperf3, NetPIPE) and our own
kernels (``oddnode-memory``, ``oddnode-noise``, ...).

Every parser is registered from the one list below, in its order, when
``oddnode.parsers`` is imported: which parsers exist does not depend on
which other module was imported first.  A parser added to the package is
added to TOOL_PARSERS.
"""

from oddnode.parsers import fio, hpcc, imb, iperf3, netpipe, npb, osu, stream
from oddnode.parsers import (
    oddnode_memory,
    oddnode_mpi_collectives,
    oddnode_mpi_demo_app,
    oddnode_mpi_sync,
    oddnode_noise,
    oddnode_shm_pingpong,
)
from oddnode.parsers.base import (
    PARSERS,
    Measurement,
    ParsedOutput,
    ParseError,
    Parser,
    UnknownToolError,
    get_parser,
    parsers,
    register_parser,
)

# Tool name -> the parser of its output, in registration order.
TOOL_PARSERS: tuple[tuple[str, Parser], ...] = (
    ("fio", fio.parse_fio),
    ("hpcc", hpcc.parse_hpcc),
    ("imb", imb.parse_imb),
    ("iperf3", iperf3.parse_iperf3),
    ("netpipe", netpipe.parse_netpipe),
    ("npb", npb.parse_npb),
    ("osu", osu.parse_osu),
    ("stream", stream.parse_stream),
    ("oddnode-memory", oddnode_memory.parse_memory_output),
    (oddnode_mpi_collectives.TOOL, oddnode_mpi_collectives.parse_collectives_output),
    (oddnode_mpi_demo_app.TOOL, oddnode_mpi_demo_app.parse_demo_app_tool_output),
    (oddnode_mpi_sync.TOOL, oddnode_mpi_sync.parse_sync_output),
    ("oddnode-noise", oddnode_noise.parse_noise_output),
    ("oddnode-shm-pingpong", oddnode_shm_pingpong.parse_shm_pingpong_output),
)

for _tool, _parser in TOOL_PARSERS:
    PARSERS.add(_tool, _parser)

__all__ = [
    "Measurement",
    "ParsedOutput",
    "ParseError",
    "Parser",
    "TOOL_PARSERS",
    "UnknownToolError",
    "get_parser",
    "parsers",
    "register_parser",
]
