"""Import the outputs a site already has from the field's tools (STREAM,
HPCC, NPB, IMB, OSU, fio, iperf3, NetPIPE) and our own kernels, one file
per run (the parsers of every tool are in ``oddnode.parsers``).

Each file is one run on one label (a node, a pair ``nodeA-nodeB`` or a node
set): given outright, or taken from the file's path by a regular expression
with a group named ``label``.  Several files for the same label are its
repetitions, numbered in the order given.  Every file is parsed and checked
before one transaction writes them all.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from oddnode.core.inputs import InputError, quote, read_text
from oddnode.core.nodes import NodeNameError, label_kind, label_members
from oddnode.parsers import ParsedOutput, get_parser, parsers
from oddnode.store import ResultBatch, Store


@dataclass(frozen=True)
class ToolImportSummary:
    run_id: int
    files: int
    labels: int
    measurements: int
    invalid_runs: tuple[str, ...]  # files whose run failed its own accuracy check


def importable_tools() -> list[str]:
    """The tools whose outputs import: the field's and our own kernels'."""
    return parsers()


def label_of(path: Path, label: str | None, label_from: str | None) -> str:
    """The label a file's results belong to."""
    if (label is None) == (label_from is None):
        raise InputError(path, None, "give the label either outright (--label) or as a pattern (--label-from)")
    if label is None:
        try:
            pattern = re.compile(label_from)
        except re.error as err:
            raise InputError(path, None, f"--label-from {label_from!r} is not a regular expression: {err}") from None
        if "label" not in pattern.groupindex:
            raise InputError(path, None, f"--label-from {label_from!r} needs a group named label: (?P<label>...)")
        match = pattern.search(os.fspath(path))
        if match is None or not match.group("label"):
            raise InputError(path, None, f"no label in the file's path: {label_from!r} does not match it")
        label = match.group("label")
    try:
        label_members(label, label_kind(label))
    except NodeNameError as err:
        raise InputError(path, None, str(err)) from None
    return label


def read_outputs(tool: str, paths: Sequence[Path], label: str | None = None,
                 label_from: str | None = None) -> list[tuple[Path, str, ParsedOutput]]:
    """Parse every file (a ParseError names the file and line); only
    regular files are read."""
    parse = get_parser(tool)
    parsed = []
    for path in paths:
        path = Path(path)
        name = label_of(path, label, label_from)
        output = parse(read_text(path), os.fspath(path))
        _check_finite(path, output)
        parsed.append((path, name, output))
    return parsed


def _check_finite(path: Path, output: ParsedOutput) -> None:
    """Refuse a number that is not finite: every parser should have, this
    keeps one that did not from storing it."""
    for m in output.measurements:
        if not math.isfinite(m.value):
            raise InputError(path, None, f"{quote(m.benchmark)} {quote(m.metric)} is {m.value}, not a finite number")


def import_tool_outputs(store: Store, tool: str, paths: Sequence[Path], *, label: str | None = None,
                        label_from: str | None = None, command: str | None = None) -> ToolImportSummary:
    """Parse, then write every measurement of every file in one transaction."""
    if not paths:
        raise InputError(tool, None, "no files to import")
    outputs = read_outputs(tool, paths, label, label_from)
    batch = ResultBatch()
    repetitions: Counter[str] = Counter()
    for path, name, output in outputs:
        repetitions[name] += 1
        kind = label_kind(name)
        if not output.measurements:  # a run that gave no number is still a failed run of that label
            batch.add(tool, name, None, label_kind=kind, repetition=repetitions[name], valid=False,
                      parameters={"tool": tool, "problems": output.problems}, raw_ref=os.fspath(path))
        for m in output.measurements:
            batch.add(
                m.benchmark, name, m.value, metric=m.metric, unit=m.unit, direction=m.direction,
                label_kind=kind, repetition=repetitions[name], valid=m.valid and output.valid,
                parameters={"tool": tool, **m.parameters}, raw_ref=os.fspath(path),
            )
    with store.transaction():
        run_id = store.new_run(command or f"oddnode import {tool}", ", ".join(os.fspath(p) for p in paths))
        store.add_results(run_id, batch)
    return ToolImportSummary(
        run_id=run_id,
        files=len(outputs),
        labels=len(repetitions),
        measurements=len(batch),
        invalid_runs=tuple(os.fspath(path) for path, _, output in outputs if not output.valid),
    )
