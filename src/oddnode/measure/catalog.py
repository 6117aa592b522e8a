"""Every step a check can run, in STAB's order of stages: memory first (if
it is ruled out, later anomalies cannot be blamed on it), then the
operating system's noise, then the processor, then the disk, then the interconnect (ping-pong patterns and
bisection bandwidth, between pairs of nodes rather than on each node),
then parallel benchmarks on sets of nodes and the scaling curve.

A step lives in its own module; naming its class in ``CATALOG`` is its one
registration.  Within a stage, steps run in the order named here.
"""

from __future__ import annotations

from oddnode.measure.node.command import CommandStep
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
from oddnode.measure.steps import STAGES, STEPS, CheckFlag, Step, check_flag, register_step, series_stage, steps_of
from oddnode.measure.set.sync import SyncStep

__all__ = ["CATALOG", "CHECK_FLAGS", "STAGES", "STEPS", "get_step", "series_stage", "stage_of", "steps_of"]

CATALOG = (
    MemoryStep,  # memory
    NoiseStep,  # noise
    DgemmStep, HplStep, CommandStep,  # compute
    DiskStep,  # disk
    PairsStep, BisectionStep, MatrixStep, ChainStep, StreamsStep, AllToAllStep,  # interconnect
    SetsStep, ScaleStep, SyncStep,  # sets
)
for _step in CATALOG:
    register_step(_step)

# The step options ``oddnode check`` sets with flags of its own (the others
# through --set or a plan file), in the order its help lists them: each flag
# STEP-FLAG of its option, its help, default and check from the option's
# field (steps.option), except the flags that set one option of several steps.
CHECK_FLAGS: list[CheckFlag] = [
    check_flag("memory.elements"),
    check_flag("memory.ntimes"),
    check_flag("memory.min_loop_seconds"),
    check_flag("memory.max_seconds"),
    check_flag("noise.seconds"),
    check_flag("memory.threads", "dgemm.threads", "hpl.threads", flag="threads", help="OpenMP threads of the kernels"),
    check_flag("dgemm.n"),
    check_flag("hpl.n"),
    check_flag("command.command", flag="command"),
    check_flag("command.parser", flag="parser"),
    check_flag("command.output_file", flag="output-file"),
    check_flag("command.timeout", flag="command-timeout"),
    check_flag("disk.directory"),
    check_flag("disk.dirs"),
    check_flag("disk.size"),
    check_flag("disk.engine"),
    check_flag("pairs.patterns", flag="patterns"),
    check_flag("pairs.sizes", "sets.sizes", "scale.sizes", flag="sizes",
               help="Message sizes in bytes of the ping-pong and of the set benchmarks, comma-separated"),
    check_flag("pairs.seconds_per_size", "sets.seconds_per_size", "scale.seconds_per_size", flag="seconds-per-size"),
    check_flag("sets.size", flag="set-size"),
    check_flag("bisection.seconds"),
]


def get_step(name: str) -> Step:
    """A registered step by name; an unknown one is an error naming the known ones."""
    return STEPS.get(name)


def stage_of(step: str) -> str:
    """The stage of a registered step."""
    return get_step(step).stage
