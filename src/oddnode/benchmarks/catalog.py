"""Every step a check can run, in STAB's order of stages: memory first (if
it is ruled out, later anomalies cannot be blamed on it), then the
processor, then the disk, then the interconnect (ping-pong patterns and
bisection bandwidth, between pairs of nodes rather than on each node).

A step lives in its own module and registers itself there
(``@register_step``); importing the module is its one registration here.
Within a stage, steps run in the order of these imports.
"""

from __future__ import annotations

# Importing a step's module registers it: one line per module, in the order they run.
from oddnode.kernels import memory  # noqa: F401, I001
from oddnode.kernels import dgemm  # noqa: F401
from oddnode.benchmarks import hpl  # noqa: F401
from oddnode.kernels import disk  # noqa: F401
from oddnode.interconnect import pairs  # noqa: F401
from oddnode.interconnect import bisection  # noqa: F401
from oddnode.interconnect import matrix  # noqa: F401
from oddnode.interconnect import switchbench  # noqa: F401
from oddnode.steps import STAGES, STEPS, Step, series_stage, steps_of

__all__ = ["STAGES", "STEPS", "get_step", "series_stage", "stage_of", "steps_of"]


def get_step(name: str) -> Step:
    """A registered step by name; an unknown one is an error naming the known ones."""
    return STEPS.get(name)


def stage_of(step: str) -> str:
    """The stage of a registered step."""
    return get_step(step).stage
