"""What a parser of a benchmark tool's output gives back, and the registry."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oddnode.model import DEFAULT_METRIC, Direction
from oddnode.registry import Registry, UnknownNameError


class ParseError(ValueError):
    """Output that is not what the tool writes, located by source and line."""

    def __init__(self, source: str, line: int | None, message: str):
        self.source, self.line, self.detail = source, line, message
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {message}")


class ToolUnavailable(ParseError):
    """The node does not have the tool a benchmark runs (fio, hpcc): the
    benchmark cannot run there, which is not the node failing it."""


@dataclass(frozen=True)
class Measurement:
    """One number a tool reported.

    ``benchmark`` names the test (``stream.triad``, ``imb.pingpong``);
    ``metric`` the quantity, with the message size when there is one
    (``bandwidth.4194304``), so that one series holds comparable values.
    """

    benchmark: str
    value: float
    unit: str  # canonical, from oddnode.units
    direction: Direction
    metric: str = DEFAULT_METRIC
    valid: bool = True
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedOutput:
    """Everything one output file says: its numbers, whether the run passed
    its own accuracy check, and the configuration it reports."""

    tool: str
    measurements: list[Measurement]
    valid: bool = True
    problems: list[str] = field(default_factory=list)  # why the run is invalid
    configuration: dict[str, Any] = field(default_factory=dict)


Parser = Callable[[str, str], ParsedOutput]  # (text, source) -> ParsedOutput

_JSON_START = re.compile(r"^\{", re.MULTILINE)


def json_document(text: str, source: str, tool: str) -> tuple[Any, int] | None:
    """The JSON object a tool printed, possibly after warning lines, and the
    line it starts on; None when the text holds no JSON object at all."""
    start = _JSON_START.search(text)
    if start is None:
        return None
    line = text.count("\n", 0, start.start()) + 1
    try:
        document, _ = json.JSONDecoder().raw_decode(text, start.start())
    except json.JSONDecodeError as err:
        raise ParseError(source, line + err.lineno - 1, f"{tool} JSON is malformed or truncated: {err.msg}") from None
    return document, line


class UnknownToolError(UnknownNameError):
    """A tool that no parser was registered for."""


# tool name -> the parser of its output
PARSERS: Registry[Parser] = Registry("parser", UnknownToolError)


def register_parser(tool: str) -> Callable[[Parser], Parser]:
    """Register the parser of one tool's output under the tool's name."""
    return PARSERS.register(tool)


def parsers() -> list[str]:
    return sorted(PARSERS)


def get_parser(tool: str) -> Parser:
    return PARSERS.get(tool)
