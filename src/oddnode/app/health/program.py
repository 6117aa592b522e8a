"""The health program for nodes without oddnode: ``oddnode health --install
DIR`` writes ``DIR/oddnode-health``, one file that needs only ``python3``
(>= 3.6) on the node (the modules of onnode/health_node.py and those it
imports, bundled as the node runner's scripts travel), and beside it
``DIR/oddnode-health.json``, its settings: the expectations with their node
sets expanded, the memory kernel's job and bound, and the options it runs
with when Slurm (or NHC, or cron) starts it without arguments.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oddnode.app.health.baseline import Baseline
from oddnode.core.atomic import OutputUnwritable, output_directory, write_atomically
from oddnode.findings.expectations import Expectation
from oddnode.onnode.health_node import FORMAT, SETTINGS_SUFFIX

PROGRAM = "oddnode-health"
# The modules of oddnode.onnode the program is made of, each after those it imports.
MODULES = ("fact_rules", "kernel_lines", "node_probe", "node_runner", "slurm_node", "health_node")
SHEBANG = "#!/usr/bin/env python3\n"


def program_text() -> str:
    """The program: the bundled modules behind a shebang."""
    from oddnode.reach.scripts import onnode_script

    return SHEBANG + onnode_script(*MODULES)


def rules(expectations: Mapping[str, Expectation]) -> list[dict[str, Any]]:
    """Expectations as the program reads them: key, conditions, and the node
    set of their section (expanded, with its place in the file)."""
    return [{"key": e.key, "conditions": e.as_dict(), "scope": e.scope,
             "scope_nodes": sorted(e.scope_nodes) if e.scope_nodes is not None else None,
             "scope_order": e.scope_order} for e in expectations.values()]


def settings_document(sources: Sequence[tuple[str, Mapping[str, Expectation]]], baseline: Baseline | None,
                      run: Mapping[str, Any], memory_timeout: float) -> dict[str, Any]:
    """The settings file's content: every source's rules, the memory kernel's
    job from the baseline (None without one), and the options ``run``."""
    from oddnode.app.health.checks import memory_spec
    from oddnode.reach.jobs import decode_job

    memory = None
    if baseline is not None and baseline.memory is not None:
        job = decode_job(memory_spec(baseline.memory).argv[-1])
        job["timeout"] = memory_timeout
        memory = {"minimum": baseline.memory.minimum, "median": baseline.memory.median,
                  "unit": baseline.memory.unit, "job": job}
    return {"format": FORMAT, "source": dict(baseline.source) if baseline is not None else None,
            "expectations": [{"label": label, "rules": rules(expectations)} for label, expectations in sources],
            "memory": memory, "run": dict(run)}


def install(directory: Path, settings: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write the program (executable) and its settings into ``directory``
    (made when missing, its parent never, as every output directory); their
    absolute paths, as slurm.conf wants them.  OutputRefused or
    OutputUnwritable naming the path."""
    directory = output_directory(directory.absolute())
    program = directory / PROGRAM
    settings_file = directory / (PROGRAM + SETTINGS_SUFFIX)
    # default=str: the baseline's source says when it was written, a datetime as YAML reads it.
    write_atomically(settings_file, (json.dumps(settings, indent=1, sort_keys=True, default=str) + "\n").encode())
    write_atomically(program, program_text().encode())
    try:
        os.chmod(program, 0o755)
    except OSError as err:
        raise OutputUnwritable(err.errno, err.strerror, str(program)) from None
    return program, settings_file
