"""A sweep's grid (parameters, their values and defaults, the cartesian
product), the interleaved order of its runs, and how its environment
variables reach the benchmark's processes on the nodes."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from oddnode.reach.jobs import decode_job
from oddnode.measure.pair.mpi_pingpong import mpi_ping_argv
from oddnode.measure.pair.pingpong import pingpong_serve_argv
from oddnode.measure.set.jobs import command_job
from oddnode.readings.sweep_grid import MAX_SETTINGS, Grid, GridError, Parameter, interleaved_order, make_grid
from oddnode.measure.sweep import EnvironmentTransport, check_grid, with_environment
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.scripts import python_command


def job_of(argv):
    return decode_job(argv[-1])


# -- the grid ------------------------------------------------------------------------------


def test_the_grid_is_the_cartesian_product_first_parameter_slowest():
    grid = make_grid("pairs", ["OMPI_MCA_btl_tcp_eager_limit=4096,65536,1048576"],
                     ["pairs.sizes=0,1024|0,65536"])
    assert grid.size == 6 and [p.name for p in grid.swept] == ["OMPI_MCA_btl_tcp_eager_limit", "pairs.sizes"]
    assert grid.labels() == ["4096, 0,1024", "4096, 0,65536", "65536, 0,1024", "65536, 0,65536",
                             "1048576, 0,1024", "1048576, 0,65536"]
    third = grid.settings[2]
    assert grid.env(third) == {"OMPI_MCA_btl_tcp_eager_limit": "65536"}
    assert grid.options(third) == {"sizes": "0,1024"}  # a list value keeps its commas
    assert grid.describe(third) == {"env": {"OMPI_MCA_btl_tcp_eager_limit": "65536"}, "options": {"sizes": "0,1024"}}
    assert grid.default == 0
    assert Grid.from_json(json.loads(json.dumps(grid.to_json()))) == grid


def test_the_default_is_every_first_value_unless_named():
    grid = make_grid("pairs", ["A=1,2", "B=x,y,z"], defaults=["B=z", "A=2"])
    assert grid.labels()[grid.default] == "2, z"
    assert make_grid("pairs", ["A=1,2"]).labels()[0] == "1"
    with pytest.raises(GridError, match=r"--default B=w: not one of its values \(x, y\)"):
        make_grid("pairs", ["B=x,y"], defaults=["B=w"])
    with pytest.raises(GridError, match=r"--default C: no such parameter \(the sweep's: B\)"):
        make_grid("pairs", ["B=x,y"], defaults=["C=1"])
    with pytest.raises(GridError, match="--default is NAME=VALUE"):
        make_grid("pairs", ["B=x,y"], defaults=["B"])


def test_env_values_split_on_bars_when_a_value_holds_a_comma():
    grid = make_grid("sets", ["OMPI_MCA_btl=tcp,self|tcp,vader,self"])
    assert grid.swept[0].values == ("tcp,self", "tcp,vader,self")
    fixed = make_grid("sets", ["SINGLE=one"])
    assert fixed.size == 1 and fixed.swept == [] and fixed.labels() == ["default"]


@pytest.mark.parametrize("texts, message", [
    (["NO_EQUALS"], "--env is NAME=VALUES"),
    (["1BAD=1,2"], "not an environment variable name"),
    (["A=1,,2"], "an empty value"),
    (["A=1,2,1"], "value '1' given twice"),
])
def test_bad_env_parameters_are_refused_naming_them(texts, message):
    with pytest.raises(GridError, match=message):
        make_grid("pairs", texts)


def test_set_parameters_name_the_swept_step_and_are_typed_by_it():
    with pytest.raises(GridError, match="the sweep runs the pairs step, not memory"):
        make_grid("pairs", options=["memory.threads=1|2"])
    with pytest.raises(GridError, match="--set is STEP.OPTION=VALUES"):
        make_grid("pairs", options=["sizes=1|2"])
    with pytest.raises(GridError, match="pairs.sizes given twice"):
        make_grid("pairs", options=["pairs.sizes=0|8", "pairs.sizes=16"])
    with pytest.raises(GridError, match=r"setting 'four': memory.threads: wants a whole number, not 'four'"):
        check_grid(make_grid("memory", options=["memory.threads=1|four"]))
    with pytest.raises(GridError, match="memory has no option 'thread'"):
        check_grid(make_grid("memory", options=["memory.thread=1"]))
    typed = check_grid(make_grid("pairs", options=["pairs.sizes=0,1024|0,65536", "pairs.patterns=sort"]))
    assert [o.sizes for o in typed] == [(0, 1024), (0, 65536)] and typed[0].patterns == ("sort",)
    with pytest.raises(KeyError, match="no step named 'pair'"):
        check_grid(make_grid("pair"))


def test_a_grid_too_large_is_refused():
    values = ",".join(str(i) for i in range(17))
    with pytest.raises(GridError, match=f"289 settings: a sweep runs at most {MAX_SETTINGS}"):
        make_grid("pairs", [f"A={values}", f"B={values}"])


# -- the order -----------------------------------------------------------------------------


def test_every_round_runs_every_setting_once_in_an_order_drawn_per_round():
    order = interleaved_order(5, 40, seed=3)
    assert len(order) == 40 and all(sorted(r) == list(range(5)) for r in order)
    assert len({tuple(r) for r in order}) > 20  # drawn afresh, not one order repeated
    assert order == interleaved_order(5, 40, seed=3) and order != interleaved_order(5, 40, seed=4)
    # No setting keeps a place: each is first in some rounds and last in others.
    first, last = Counter(r[0] for r in order), Counter(r[-1] for r in order)
    assert set(first) == set(last) == set(range(5))
    # Over many rounds every setting's mean place is the middle: drift favours none.
    many = interleaved_order(4, 4000, seed=0)
    for setting in range(4):
        mean = sum(r.index(setting) for r in many) / len(many)
        assert mean == pytest.approx(1.5, abs=0.1)


@pytest.mark.parametrize("settings,rounds", [(2, 3), (2, 6), (3, 7), (5, 10)])
def test_every_block_of_rounds_puts_each_setting_in_each_place_once(settings, rounds):
    """Shuffled but balanced: a cost a round's first run pays (a cold
    start after the pause) cannot fall on one setting in every round, as
    three independent shuffles of two settings do in a quarter of sweeps."""
    for seed in range(20):
        order = interleaved_order(settings, rounds, seed)
        for start in range(0, rounds - settings + 1, settings):
            block = order[start:start + settings]
            for place in range(settings):
                assert sorted(r[place] for r in block) == list(range(settings)), (seed, order)
        firsts = Counter(r[0] for r in order)
        assert max(firsts.values()) <= -(-rounds // settings), (seed, order)
    with pytest.raises(GridError, match="repetitions must be >= 1"):
        interleaved_order(2, 0)


# -- the environment on the nodes ---------------------------------------------------------------


def test_the_environment_is_added_to_a_kernel_job():
    argv = pingpong_serve_argv(29170)
    changed = with_environment(argv, {"TCP_TEST": "1"})
    assert changed[:-1] == argv[:-1]
    job, before = job_of(changed), job_of(argv)
    assert job["env"] == {**before["env"], "TCP_TEST": "1"} and "launcher" not in job
    assert with_environment(argv, {}) == argv


def test_an_open_mpi_launcher_exports_every_variable_to_its_ranks():
    argv = mpi_ping_argv("cn-a17", "cn-b02", [0, 1024], 0.1)
    job = job_of(with_environment(argv, {"OMPI_MCA_btl_tcp_eager_limit": "4096", "OMPI_MCA_mpi_yield_when_idle": "1"}))
    launcher = job["launcher"]
    assert launcher[0] == job_of(argv)["launcher"][0] == "mpirun"
    assert launcher[1:5] == ["-x", "OMPI_MCA_btl_tcp_eager_limit", "-x", "OMPI_MCA_mpi_yield_when_idle"]
    assert launcher[5:] == job_of(argv)["launcher"][1:]
    assert job["env"]["OMPI_MCA_mpi_yield_when_idle"] == "1"
    assert job["env"]["OMPI_ALLOW_RUN_AS_ROOT"] == "1"  # the kernel's own kept
    untold = job_of(with_environment(argv, {"A": "1"}, mpi_export=False))
    assert untold["launcher"] == job_of(argv)["launcher"] and untold["env"]["A"] == "1"


def test_an_application_started_by_mpirun_gets_the_variables_exported_too():
    job = command_job("mpirun -np {ranks} --host {hosts} IMB-MPI1 PingPong", "imb")
    argv = job.argv(["gpu003", "gpu010"])
    tool = job_of(with_environment(argv, {"OMPI_MCA_btl": "tcp,self"}))
    assert tool["tool"] == "mpirun"
    assert tool["args"][:2] == ["-x", "OMPI_MCA_btl"] and tool["args"][2:] == job_of(argv)["args"]
    assert tool["env"]["OMPI_MCA_btl"] == "tcp,self"


def test_anything_but_a_benchmark_job_is_left_alone():
    probe = python_command("print('hello')")
    assert with_environment(probe, {"A": "1"}) == probe
    assert with_environment(["true"], {"A": "1"}) == ["true"]
    assert with_environment(["sh", "-c", "echo", "bm90IGpzb24="], {"A": "1"}) == ["sh", "-c", "echo", "bm90IGpzb24="]


class Recording:
    name = "recording"
    ssh_config = "/etc/cluster/ssh_config"

    def __init__(self):
        self.seen = []

    def run(self, nodes, argv, *, timeout):
        self.seen.append(list(argv))
        return {node: NodeResult(node, NodeStatus.OK, "", "", 0, 0.0) for node in nodes}

    def run_each(self, commands, *, timeout):
        self.seen.extend(list(argv) for argv in commands.values())
        return {node: NodeResult(node, NodeStatus.OK, "", "", 0, 0.0) for node in commands}


def test_the_transport_wrapper_adds_the_variables_and_is_otherwise_the_transport():
    inner = Recording()
    wrapped = EnvironmentTransport(inner, {"X_SWEPT": "7"})
    assert wrapped.name == "recording" and wrapped.ssh_config == "/etc/cluster/ssh_config"
    serve = pingpong_serve_argv(29170)
    wrapped.run(["cn-a17"], serve, timeout=5)
    wrapped.run_each({"cn-a17": serve, "cn-b02": ["true"]}, timeout=5)
    assert [job_of(argv)["env"]["X_SWEPT"] for argv in inner.seen[:2]] == ["7", "7"]
    assert inner.seen[2] == ["true"]


def test_parameters_round_trip_as_json():
    p = Parameter("option", "pairs.sizes", ("0,1024", "0,65536"), 1)
    assert Parameter.from_json(json.loads(json.dumps(p.to_json()))) == p and p.option == "sizes" and p.swept
