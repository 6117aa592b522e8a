"""A kernel's job travels to a node as one ssh command line, which the
remote shell takes only up to MAX_ARG_STRLEN: every job oddnode sends must
fit, and a larger one is refused here with its size, not by ssh's bare
exit status 255 on the node."""

from __future__ import annotations

import pytest

from oddnode.measure import catalog
from oddnode.measure.pair.pingpong import pingpong_ping_argv, pingpong_serve_argv, pingpong_stream_argv
from oddnode.reach.jobs import runner_argv
from oddnode.measure.steps import NodeBenchmark
from oddnode.reach.base import TransportError
from oddnode.reach.ssh import MAX_REMOTE_COMMAND, remote_command

KERNELS_WITH_RANKS = ("alltoall", "tcp_sync", "mpi_collectives", "mpi_pingpong", "mpi_sync", "mpi_demo_app")


def test_the_ping_pong_jobs_fit_a_remote_command_line():
    for argv in (pingpong_serve_argv(40000), pingpong_ping_argv("10.0.0.2", 40000),
                 pingpong_stream_argv("10.0.0.2", 40000)):
        assert len(remote_command(argv).encode()) <= MAX_REMOTE_COMMAND


@pytest.mark.parametrize("kernel", KERNELS_WITH_RANKS)
def test_every_kernel_with_ranks_fits_a_remote_command_line(kernel):
    assert len(remote_command(runner_argv(kernel, ["-h"])).encode()) <= MAX_REMOTE_COMMAND


@pytest.mark.parametrize("step", [s for s in catalog.STEPS.values() if isinstance(s, NodeBenchmark)],
                         ids=lambda s: s.name)
def test_every_node_benchmark_fits_a_remote_command_line(step):
    # A step that runs the site's program needs one to run.
    given = {"command": "bt.S.x", "parser": "npb"} if "command" in step.options.__dataclass_fields__ else {}
    spec = step.spec(step.options(**given))
    assert len(remote_command(spec.argv).encode()) <= MAX_REMOTE_COMMAND


def test_a_command_too_long_for_a_remote_shell_is_refused_with_its_size():
    with pytest.raises(TransportError, match=r"is 200\d{3} bytes quoted .* at most 131071"):
        remote_command(["python3", "-c", "x" * 200_000])
