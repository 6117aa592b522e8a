"""Reading files that other programs and other people wrote.

Every data file oddnode reads (tool outputs, result directories, profiles,
topology, expectations, baselines) is untrusted: it may be malformed,
truncated, hostile or not a file at all.  The readers here turn each of
those into one ``InputError`` naming the file and line, with the offending
text quoted short, so that no input gives a traceback, hangs on a FIFO or
fills memory from ``/dev/zero``.

The limits below are generous for real files and small against abuse.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

# The most of an offending line or value an error message quotes.
QUOTE_LIMIT = 200
# The largest input file read whole (a NPB or fio output is kilobytes, an
# mpiP report of 10,000 ranks some tens of megabytes).
MAX_FILE_BYTES = 1 << 30
# The deepest nesting of JSON or YAML accepted: real documents (fio, iperf3,
# our own) nest fewer than 10 levels; Python's parsers recurse per level.
MAX_DEPTH = 64


class InputError(ValueError):
    """Bad input, located by file and line."""

    def __init__(self, path: os.PathLike[str] | str, line: int | None, message: str):
        self.path, self.line, self.detail = os.fspath(path), line, message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


class NodeOutputError(ValueError):
    """A script's output on one node cannot be used; names the node and why."""

    def __init__(self, node: str, problem: str) -> None:
        self.node = node
        self.problem = problem
        super().__init__(f"{node}: {problem}")


def quote(text: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr`` of a value from input, cut to ``limit`` characters, so that
    a 16 MB bad line is not printed back whole."""
    shown = repr(text)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}... ({len(shown)} characters)"


def clip(text: object, limit: int = QUOTE_LIMIT) -> str:
    """Text from input for an error line, as it is (no quotes added), cut
    to ``limit`` characters."""
    shown = str(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown)} characters)"


def check_regular_file(path: os.PathLike[str] | str) -> None:
    """Refuse, before reading, anything that is not a regular file: a
    FIFO would block forever, a device (``/dev/zero``) never ends."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise InputError(path, None, err.strerror or str(err)) from err
    if stat.S_ISDIR(mode):
        raise InputError(path, None, "is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise InputError(path, None, "not a regular file (a device, FIFO or socket): refused")


def read_bytes(path: os.PathLike[str] | str, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, at most ``limit`` of them."""
    check_regular_file(path)
    try:
        # O_NONBLOCK: a file swapped for a FIFO after the check must not block the open.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise InputError(path, None, "not a regular file (a device, FIFO or socket): refused")
            data = file.read(limit + 1)
    except OSError as err:
        raise InputError(path, None, err.strerror or str(err)) from err
    if len(data) > limit:
        raise InputError(path, None, f"larger than {limit} bytes: refused")
    return data


def read_text(path: os.PathLike[str] | str, limit: int = MAX_FILE_BYTES) -> str:
    """A regular file's text (UTF-8), at most ``limit`` bytes of it."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(path, None, f"not a text file ({err.reason} at byte {err.start})") from err


def finite(value: object, where: str = "value") -> float:
    """``value`` as a finite float, else ValueError naming ``where``."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{where} {quote(value)} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{where} {quote(value)} is not a finite number")
    return number


def _depth_exceeds(text: str, limit: int) -> bool:
    """Whether brackets nest deeper than ``limit`` outside JSON strings: a
    scan before parsing, since the parser recurses once per level."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{quote(text)} is out of range")
    return number


def parse_json(text: str, path: os.PathLike[str] | str = "<input>", depth: int = MAX_DEPTH) -> Any:
    """Strict JSON: no NaN or Infinity, no number that overflows to
    infinity (``1e999``), no nesting deeper than ``depth``; errors as
    ``InputError`` with the line."""
    if _depth_exceeds(text, depth):
        raise InputError(path, None, f"JSON nested deeper than {depth} levels: refused")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as err:
        raise InputError(path, err.lineno, f"not valid JSON: {err.msg}") from None
    except (ValueError, RecursionError) as err:
        raise InputError(path, None, f"not valid JSON: {err}") from None


def load_json(path: os.PathLike[str] | str, depth: int = MAX_DEPTH) -> Any:
    return parse_json(read_text(path), path, depth)


def parse_yaml(text: str, path: os.PathLike[str] | str = "<input>", depth: int = MAX_DEPTH) -> Any:
    """Safe YAML (no Python objects), a key given twice in one mapping
    refused (PyYAML keeps the last silently), nesting deeper than
    ``depth`` refused; errors as ``InputError`` with the line."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise InputError(path, key_node.start_mark.line + 1, "a mapping key that is not a scalar") from None
            if key in seen:
                raise InputError(path, key_node.start_mark.line + 1,
                                 f"key {quote(key)} given twice (first on line {seen[key]})")
            seen[key] = key_node.start_mark.line + 1
        return loader.construct_mapping(node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    if _yaml_depth_exceeds(text, depth):
        raise InputError(path, None, f"YAML nested deeper than {depth} levels: refused")
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + 1 if mark is not None else None
        raise InputError(path, line, f"not valid YAML: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise InputError(path, None, f"not valid YAML: {quote(str(err))}") from None
    except RecursionError:
        raise InputError(path, None, f"YAML nested deeper than {depth} levels: refused") from None


def _yaml_depth_exceeds(text: str, limit: int) -> bool:
    """Whether flow brackets or block indentation nest deeper than
    ``limit``: YAML's composer recurses once per level."""
    if _depth_exceeds(text.replace('"', " "), limit):
        return True
    indents: list[int] = []
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        while indents and indents[-1] >= indent:
            indents.pop()
        indents.append(indent)
        # A block sequence item ("- - - x") opens one level per dash.
        dashes = 0
        while stripped.startswith("- "):
            dashes += 1
            stripped = stripped[2:].lstrip(" ")
        if len(indents) + dashes > limit:
            return True
    return False


def load_yaml(path: os.PathLike[str] | str, depth: int = MAX_DEPTH) -> Any:
    return parse_yaml(read_text(path), path, depth)


def plain_path(path: os.PathLike[str] | str) -> str:
    """A path for an error message: as given, quoted short when odd."""
    text = os.fspath(path)
    return text if text.isprintable() and len(text) <= QUOTE_LIMIT else quote(text)


__all__ = [
    "InputError", "MAX_DEPTH", "MAX_FILE_BYTES", "QUOTE_LIMIT", "check_regular_file", "clip", "finite", "load_json",
    "load_yaml", "parse_json", "parse_yaml", "plain_path", "quote", "read_bytes", "read_text",
]
