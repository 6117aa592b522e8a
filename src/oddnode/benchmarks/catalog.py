"""Every step a check can run, in STAB's order of stages: memory first (if
it is ruled out, later anomalies cannot be blamed on it), then the
operating system's noise, then the processor, then the disk, then the interconnect (ping-pong patterns and
bisection bandwidth, between pairs of nodes rather than on each node),
then parallel benchmarks on sets of nodes and the scaling curve.

A step lives in its own module; naming its class in ``CATALOG`` is its one
registration.  Within a stage, steps run in the order named here.
"""

from __future__ import annotations

from oddnode.benchmarks.hpl import HplStep
from oddnode.interconnect.bisection import BisectionStep
from oddnode.interconnect.matrix import MatrixStep
from oddnode.interconnect.pairs import PairsStep
from oddnode.interconnect.switchbench import AllToAllStep, ChainStep, StreamsStep
from oddnode.kernels.dgemm import DgemmStep
from oddnode.kernels.disk import DiskStep
from oddnode.kernels.memory import MemoryStep
from oddnode.kernels.noise import NoiseStep
from oddnode.sets.runner import ScaleStep, SetsStep
from oddnode.steps import STAGES, STEPS, Step, register_step, series_stage, steps_of
from oddnode.sync.runner import SyncStep

__all__ = ["CATALOG", "STAGES", "STEPS", "get_step", "series_stage", "stage_of", "steps_of"]

CATALOG = (
    MemoryStep,  # memory
    NoiseStep,  # noise
    DgemmStep, HplStep,  # compute
    DiskStep,  # disk
    PairsStep, BisectionStep, MatrixStep, ChainStep, StreamsStep, AllToAllStep,  # interconnect
    SetsStep, ScaleStep, SyncStep,  # sets
)
for _step in CATALOG:
    register_step(_step)


def get_step(name: str) -> Step:
    """A registered step by name; an unknown one is an error naming the known ones."""
    return STEPS.get(name)


def stage_of(step: str) -> str:
    """The stage of a registered step."""
    return get_step(step).stage
