"""Nodes common to failed runs (STAB's ``xcommon``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from oddnode.core.model import Failure


def common_nodes(failures: Iterable[Failure]) -> list[tuple[str, int]]:
    """Count the failed runs each node took part in, most frequent first.

    A pair or node set counts once for each of its members, so the node that
    is common to many failed multi-node runs rises to the top.
    """
    counts = Counter(node for failure in failures for node in failure.members)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
