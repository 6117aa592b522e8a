"""What every kernel of ours prints, read the same way for all of them.

A kernel's output is its banner (``# oddnode NAME kernel v1``), before which
anything -- a login message -- is ignored; ``# key: value`` header lines that
describe what ran; ``# warning: ...`` lines; and the kernel's own lines
(results, validation), which are each parser's business.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from oddnode.onnode.kernel_lines import RESULT_LINE, VALIDATION_FAILED, VALIDATION_OK
from oddnode.parsers.base import ParseError

KERNEL_VERSION = 1
_KEY = re.compile(r"^[a-z_]+$")
_WHOLE = re.compile(r"^-?[0-9]+$")


def banner(kernel: str) -> str:
    return f"# oddnode {kernel} kernel v{KERNEL_VERSION}"


def number(text: str, source: str, lineno: int | None) -> float:
    """A finite number, or ParseError naming the line."""
    try:
        value = float(text)
    except ValueError:
        raise ParseError(source, lineno, f"expected a number, found {text!r}") from None
    if not math.isfinite(value):
        raise ParseError(source, lineno, f"expected a finite number, found {text!r}")
    return value


def whole(text: str, source: str, lineno: int | None, minimum: int = 0) -> int:
    """A whole number >= ``minimum`` written as one (no '1e6', no '12.0'),
    or ParseError naming the line."""
    if not _WHOLE.match(text):
        raise ParseError(source, lineno, f"expected a whole number, found {text!r}")
    value = int(text)
    if value < minimum:
        raise ParseError(source, lineno, f"expected a whole number >= {minimum}, found {text!r}")
    return value


@dataclass(frozen=True)
class KernelOutput:
    """A kernel's output, read: its header as typed values (with the line of
    each key, for errors found later), its warnings, and its own lines."""

    configuration: dict[str, Any]
    header_lines: dict[str, int]
    warnings: list[str]
    lines: list[tuple[int, str]]  # (line number, stripped text) after the banner
    line_count: int


def read_kernel_output(text: str, source: str, kernel: str, *,
                       int_keys: Collection[str] = (), float_keys: Collection[str] = ()) -> KernelOutput:
    """Split one run's output of ``kernel``; header values of ``int_keys``
    (>= 0) and ``float_keys`` are converted, the others kept as text.  ParseError
    when the banner is missing or of another version, or a header line is
    malformed."""
    expected = banner(kernel)
    configuration: dict[str, Any] = {}
    header_lines: dict[str, int] = {}
    warnings: list[str] = []
    own: list[tuple[int, str]] = []
    all_lines = text.splitlines()
    seen_banner = False
    for lineno, raw in enumerate(all_lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if not seen_banner:
            if line == expected:
                seen_banner = True
                configuration["kernel_version"] = KERNEL_VERSION
            elif line.startswith(f"# oddnode {kernel} kernel"):
                raise ParseError(source, lineno, f"unsupported kernel version: {line!r}")
            continue  # anything before our banner (a login message) is not ours to judge
        if line.startswith("# warning:"):
            warnings.append(line[len("# warning:"):].strip())
        elif line.startswith("#"):
            key, sep, value = line[1:].partition(":")
            key, value = key.strip(), value.strip()
            if not sep or not _KEY.match(key):
                raise ParseError(source, lineno, f"malformed header line: {line[:80]!r}")
            if key in int_keys:
                configuration[key] = whole(value, source, lineno)
            elif key in float_keys:
                configuration[key] = number(value, source, lineno)
            else:
                configuration[key] = value
            header_lines[key] = lineno
        else:
            own.append((lineno, line))
    if not seen_banner:
        raise ParseError(source, None, f"not oddnode {kernel} kernel output: no {expected!r} line")
    return KernelOutput(configuration, header_lines, warnings, own, len(all_lines))


def cut_parameters(batches: int, configuration: dict[str, Any]) -> dict[str, bool]:
    """``{"cut_by_time": True}`` for a size that ran out of its time before the
    batches its kernel wants (the header's ``min_batches``), else nothing:
    its minimum and median rest on fewer samples (the kernel's warning
    line says how many)."""
    wanted = configuration.get("min_batches")
    return {"cut_by_time": True} if isinstance(wanted, int) and batches < wanted else {}
