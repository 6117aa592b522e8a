"""Parsers of the field's benchmark tools' outputs (STREAM, HPCC, NPB, IMB,
OSU, fio, iperf3, NetPIPE), registered by tool name."""

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
