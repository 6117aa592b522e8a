"""Every step a check can run, in STAB's order of stages: memory first (if
it is ruled out, later anomalies cannot be blamed on it), then the
operating system's noise, then the processor, then the disk, then the interconnect (ping-pong patterns and
bisection bandwidth, between pairs of nodes rather than on each node),
then parallel benchmarks on sets of nodes and the scaling curve.

A step lives in its own module; naming its class in ``CATALOG`` is its one
registration.  Within a stage, steps run in the order named here.
"""

from __future__ import annotations

from oddnode.measure.node.hpl import HplStep
from oddnode.measure.pair.bisection import BisectionStep
from oddnode.measure.pair.matrix import MatrixStep
from oddnode.measure.pair.pairs import PairsStep
from oddnode.measure.pair.switchbench import AllToAllStep, ChainStep, StreamsStep
from oddnode.measure.node.dgemm import DgemmStep
from oddnode.measure.node.disk import DiskStep
from oddnode.measure.node.memory import MemoryStep
from oddnode.measure.node.noise import NoiseStep
from oddnode.measure.set.runner import ScaleStep, SetsStep
from oddnode.measure.steps import STAGES, STEPS, Step, register_step, series_stage, steps_of
from oddnode.measure.set.sync import SyncStep

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
