"""The disk stage's series, and the directories it measured side by side.

The disk step stores ``disk.seq_write`` and ``disk.seq_read`` with metric
``bandwidth``, or ``bandwidth.<directory>`` when several directories are
measured in one check; the table reads them back for the terminal, the
check's notes and the HTML report.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from oddnode.core.model import Series

PASSES = ("seq_write", "seq_read")
SERIES_METRIC = "bandwidth"


@dataclass
class DirectoryRow:
    """One directory's passes, each the median of the nodes' best results."""

    directory: str
    medians: dict[str, float | None] = field(default_factory=dict)  # pass -> MB/s
    nodes: dict[str, int] = field(default_factory=dict)  # pass -> nodes with a valid result

    def to_json(self) -> dict:
        return {"directory": self.directory, "median_mb_s": self.medians, "nodes": self.nodes}


def directory_table(series: Iterable[Series], directories: Sequence[str] | None = None,
                    nodes: set[str] | None = None) -> list[DirectoryRow]:
    """The disk directories measured side by side (their metrics are
    ``bandwidth.<directory>``): per directory and pass, the median over the
    nodes (``nodes`` only, when given) of their best results; the given
    ``directories`` in their order, else every one stored, sorted."""
    found: dict[str, dict[str, Series]] = {}
    prefix = SERIES_METRIC + "."
    for s in series:
        step = s.benchmark.removeprefix("disk.")
        if s.benchmark.startswith("disk.") and step in PASSES and s.metric.startswith(prefix):
            found.setdefault(s.metric[len(prefix):], {})[step] = s
    rows = []
    for directory in directories if directories is not None else sorted(found):
        row = DirectoryRow(directory)
        for step in PASSES:
            s = found.get(directory, {}).get(step)
            keep = np.zeros(0, dtype=bool) if s is None else np.isfinite(s.values)
            if s is not None and nodes is not None:
                keep &= np.array([label in nodes for label in s.labels], dtype=bool)
            values = s.values[keep] if s is not None else np.zeros(0)
            row.medians[step] = float(np.median(values)) if values.size else None
            row.nodes[step] = int(values.size)
        rows.append(row)
    return rows


DIRECTORY_TABLE_TITLE = "disk directories side by side: median MB/s over the nodes (nodes with a valid result)"


def directory_table_lines(rows: Sequence[DirectoryRow]) -> list[str]:
    """The directories side by side as text lines: directory down, the
    passes across, the median over nodes in MB/s and how many nodes gave it."""
    if not rows:
        return []
    width = max(len("directory"), *(len(row.directory) for row in rows))
    cells = {step: [("-" if row.medians[step] is None else f"{row.medians[step]:.4g}") +
                    f" ({row.nodes[step]})" for row in rows] for step in PASSES}
    widths = {step: max(len(step), *(len(cell) for cell in cells[step])) for step in PASSES}
    header = f"{'directory':<{width}}  " + "  ".join(f"{step:>{widths[step]}}" for step in PASSES)
    lines = [DIRECTORY_TABLE_TITLE, header]
    for index, row in enumerate(rows):
        lines.append(f"{row.directory:<{width}}  " + "  ".join(f"{cells[step][index]:>{widths[step]}}"
                                                            for step in PASSES))
    return lines
