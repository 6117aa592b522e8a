"""Natural order: digit runs compared as numbers (node9 before node10,
latency.256 before latency.1024), the order ClusterShell gives node sets and
a person expects of any numbered list."""

from __future__ import annotations

import re
from collections.abc import Iterable

_DIGITS = re.compile(r"\d+")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key comparing digit runs as numbers: node9 < node10, r2n3 < r10n1.

    Each part is tagged (0 for text, 1 for a number) so that text and numbers
    never meet in one comparison; a tie between 07 and 7 falls to the text.
    """
    parts: list[tuple[int, int | str]] = []
    position = 0
    for match in _DIGITS.finditer(name):
        parts.append((0, name[position:match.start()]))
        parts.append((1, int(match.group())))
        position = match.end()
    parts.append((0, name[position:]))
    return (*parts, (0, name))


def natural_sorted(names: Iterable[str]) -> list[str]:
    """Distinct names in natural order."""
    return sorted(set(names), key=natural_key)
