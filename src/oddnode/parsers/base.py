"""What a parser of a benchmark tool's output gives back, and the registry."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oddnode.core.inputs import InputError, finite, parse_json, quote
from oddnode.core.model import DEFAULT_METRIC, Direction
from oddnode.core.registry import Registry, UnknownNameError


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
    unit: str  # canonical, from oddnode.core.units
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

# The largest whole number an output may give (a message size, a count, a
# process number, an error code): what a signed 64-bit column holds.
MAX_WHOLE = 2**63 - 1
# The largest count or byte total one row of a profile may give: exact as a
# float, and 1024 such rows still add up within a 64-bit column.
MAX_PROFILE_COUNT = 2**53
# The longest time one row of a profile may give: 10^9 s is about 32 years.
MAX_PROFILE_SECONDS = 1e9
# The largest MPI rank: the store keeps ranks as 32-bit integers.
MAX_RANK = 2**31 - 1


def number(value: object, source: str, line: int | None, what: str,
           low: float = -math.inf, high: float = math.inf) -> float:
    """A number read from an output as a finite float from ``low`` to
    ``high``: ``nan``, ``inf`` and values past the float range (``1e999``)
    are refused, naming the line."""
    try:
        result = finite(value, what)
    except ValueError as err:
        raise ParseError(source, line, str(err)) from None
    if not low <= result <= high:
        raise ParseError(source, line, f"{what} {quote(value)} is out of range ({low:g} to {high:g})")
    return result


def json_number(value: object, source: str, line: int | None, what: str) -> float:
    """A JSON value that must be a finite number (not a string, a bool or null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(source, line, f"{what} {quote(value)} is not a number")
    return number(value, source, line, what)


def whole(value: object, source: str, line: int | None, what: str, limit: int = MAX_WHOLE) -> int:
    """A whole number from 0 to ``limit``, from digits or from a number
    that has no fraction (IMB prints its sizes in a float column)."""
    if isinstance(value, str):
        digits = value.strip().lstrip("0") or "0"
        if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(limit)):
            raise ParseError(source, line, f"{what} {quote(value)} is not a whole number from 0 to {limit}")
        result = int(digits)
    elif isinstance(value, int) and not isinstance(value, bool):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    else:
        raise ParseError(source, line, f"{what} {quote(value)} is not a whole number")
    if not 0 <= result <= limit:
        raise ParseError(source, line, f"{what} {quote(value)} is out of range (0 to {limit})")
    return result


def mapping(value: object, source: str, line: int | None, what: str) -> dict[str, Any]:
    """A JSON value that must be an object."""
    if not isinstance(value, dict):
        raise ParseError(source, line, f"{what} is {type(value).__name__} {quote(value)}, not an object")
    return value


def json_document(text: str, source: str, tool: str) -> tuple[Any, int] | None:
    """The JSON object a tool printed, possibly after warning lines, and the
    line it starts on; None when the text holds no JSON object at all.  The
    object is read strictly (no NaN, Infinity or 1e999, nesting limited)."""
    start = _JSON_START.search(text)
    if start is None:
        return None
    line = text.count("\n", 0, start.start()) + 1
    try:
        # Where the object ends: tools may print more after it.
        _, end = json.JSONDecoder().raw_decode(text, start.start())
    except json.JSONDecodeError as err:
        raise ParseError(source, line + err.lineno - 1, f"{tool} JSON is malformed or truncated: {err.msg}") from None
    except RecursionError:
        raise ParseError(source, line, f"{tool} JSON is nested too deeply") from None
    except ValueError as err:  # a whole number of more digits than int() reads
        raise ParseError(source, line, f"{tool} JSON refused: {quote(str(err))}") from None
    try:
        return parse_json(text[start.start():end], source), line
    except InputError as err:
        at = line + err.line - 1 if err.line else line
        raise ParseError(source, at, f"{tool} JSON refused: {err.detail}") from None


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
