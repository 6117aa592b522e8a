"""Run a parameter sweep: one registered step, every setting of a grid once
per round, R rounds in an interleaved order, every run stored with the
setting it ran under.

A setting's step options are typed by the step (as ``--set`` in a check);
its environment variables reach every process the step starts on the
nodes: they are added to the node runner's job (which runs the kernel, or
the installed tool, with them), and an Open MPI launcher (``mpirun``,
``mpiexec``, ``orterun``) is told to pass each one on to the ranks it
starts on other nodes (``-x NAME``), which it does not do by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oddnode.measure import catalog
from oddnode.reach.jobs import decode_job, encode_job
from oddnode.reach.launch import export_names, is_assumed_open_mpi
from oddnode.measure.runner import DEFAULT_TIMEOUT
from oddnode.measure.steps import StepContext, make_options
from oddnode.store import SWEEP_SOURCE, Store
from oddnode.readings.sweep_grid import Grid, GridError, interleaved_order
from oddnode.reach.base import NodeResult, Target


def _job_of(argv: Sequence[str]) -> dict[str, Any] | None:
    """The node runner's job in an argv (the last argument after ``python
    -c CODE``: packed JSON), None when the argv runs something else."""
    if "-c" not in argv[:-1] or len(argv) < 2:
        return None
    try:
        job = decode_job(argv[-1])
    except ValueError:
        return None
    return job if "kernel" in job or "tool" in job else None


def with_environment(argv: Sequence[str], env: Mapping[str, str], mpi_export: bool = True) -> list[str]:
    """A node runner argv whose job runs with ``env`` added (an argv of
    anything else unchanged: no benchmark runs in it); an Open MPI launcher
    of the job's (``launcher``, or the tool itself) passes the variables on
    to its ranks when ``mpi_export``."""
    argv = list(argv)
    job = _job_of(argv) if env else None
    if job is None:
        return argv
    job["env"] = {**job.get("env", {}), **{str(k): str(v) for k, v in env.items()}}
    names = sorted(env)
    if mpi_export:
        launcher = job.get("launcher") or []
        if launcher and is_assumed_open_mpi(launcher[0]):
            job["launcher"] = export_names(launcher, names)
        elif "tool" in job and is_assumed_open_mpi(str(job["tool"])):
            job["args"] = export_names([job["tool"], *job.get("args", [])], names)[1:]
    return argv[:-1] + [encode_job(job)]


class EnvironmentTransport:
    """A transport whose every benchmark job runs with extra environment
    variables (see with_environment); anything else it asks of the
    transport underneath (its name, ssh configuration, fan-out)."""

    def __init__(self, inner: Any, env: Mapping[str, str], mpi_export: bool = True):
        self.inner = inner
        self.env = dict(env)
        self.mpi_export = mpi_export

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float) -> dict[str, NodeResult]:
        return self.inner.run(nodes, with_environment(argv, self.env, self.mpi_export), timeout=timeout)

    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float) -> dict[str, NodeResult]:
        return self.inner.run_each({node: with_environment(argv, self.env, self.mpi_export)
                                    for node, argv in commands.items()}, timeout=timeout)


@dataclass
class SweepRun:
    """One setting's turn in one round: the runs its step stored, and its notes."""

    setting: int
    round: int
    position: int
    run_ids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.setting, "round": self.round, "position": self.position, "runs": self.run_ids,
                "notes": self.notes}


@dataclass
class SweepSummary:
    """What a sweep ran: its id (its own run's), grid, rounds, seed and every turn."""

    sweep_id: int
    grid: Grid
    repetitions: int
    seed: int
    turns: list[SweepRun] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        return list(dict.fromkeys(note for turn in self.turns for note in turn.notes))

    def to_json(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "grid": self.grid.to_json(), "repetitions": self.repetitions,
                "seed": self.seed, "turns": [t.to_json() for t in self.turns]}


def check_grid(grid: Grid) -> list[Any]:
    """Every setting's typed options, each checked by the step as it would
    run them (ValueError naming the setting), before anything runs."""
    step = catalog.get_step(grid.step)
    typed = []
    for setting in grid.settings:
        try:
            options = make_options(step, grid.options(setting))
            step.check(options)
        except (TypeError, ValueError) as err:
            where = grid.label(setting)
            raise GridError(f"setting {where!r}: {err}" if grid.swept else str(err)) from None
        typed.append(options)
    return typed


def run_sweep(
    store: Store,
    target: Target,
    grid: Grid,
    repetitions: int,
    *,
    seed: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    command: str = "oddnode sweep",
    mpi_export: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> SweepSummary:
    """Run ``grid``'s step under every setting ``repetitions`` times,
    interleaved (see grid.interleaved_order), each turn one repetition of
    the step as a check would run it, stored with the sweep as it ends."""
    step = catalog.get_step(grid.step)
    if len(target.nodes) < step.min_nodes:
        raise ValueError(f"the {step.name} step needs {step.min_nodes} nodes or more, got {len(target.nodes)}")
    typed = check_grid(grid)
    order = interleaved_order(grid.size, repetitions, seed)
    with store.transaction():
        sweep_id = store.new_run(command, source=SWEEP_SOURCE, nodes=target.nodes)
        store.start_sweep(sweep_id, grid.step, grid.to_json(), repetitions, seed)
    summary = SweepSummary(sweep_id, grid, repetitions, seed)
    settings = grid.settings
    total, done = grid.size * repetitions, 0
    for round_number, permutation in enumerate(order, start=1):
        for position, index in enumerate(permutation, start=1):
            setting = settings[index]
            turn = SweepRun(index, round_number, position)
            env = grid.env(setting)
            transport = EnvironmentTransport(target.transport, env, mpi_export) if env else target.transport
            # Every run the step makes is named after this turn: that is how
            # they are told from runs other commands make meanwhile.
            label = f"{command} [sweep {sweep_id} setting {index + 1} round {round_number}]"
            before = store.newest_run_id()
            store.release()  # the nodes run next: let others read the store meanwhile
            context = StepContext(store, Target(target.nodes, transport), 1, timeout, command=label)
            outcome = step.run(context, typed[index])
            turn.notes = list(outcome.notes)
            turn.run_ids = store.runs_after(before, label + " [")
            described = grid.describe(setting)
            with store.transaction():
                store.add_sweep_runs(sweep_id, [(run_id, index, round_number, position, described)
                                                for run_id in turn.run_ids])
            summary.turns.append(turn)
            done += 1
            if on_progress is not None:
                on_progress(done, total)
    return summary
