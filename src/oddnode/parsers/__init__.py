"""Parsers of the field's benchmark tools' outputs (STREAM, HPCC, NPB, IMB,
OSU, fio, iperf3, NetPIPE), registered by tool name.  Our own kernels'
parsers register with their kernels (``oddnode-memory`` in
``oddnode.measure.node.memory``); ``oddnode.store.tool_import`` loads both."""

from oddnode.parsers.base import (
    Measurement,
    ParsedOutput,
    ParseError,
    Parser,
    UnknownToolError,
    get_parser,
    parsers,
    register_parser,
)
from oddnode.parsers import fio, imb, iperf3, netpipe, osu  # noqa: F401  (importing registers them)
from oddnode.parsers import hpcc, npb, stream  # noqa: F401  (importing registers them)

__all__ = [
    "Measurement",
    "ParsedOutput",
    "ParseError",
    "Parser",
    "UnknownToolError",
    "get_parser",
    "parsers",
    "register_parser",
]
