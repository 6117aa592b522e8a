"""The disk step over several directories for real on this machine: each
directory run in turn through the node runner, stored under its own metric,
a missing or unwritable one failing alone, and the side-by-side table."""

from __future__ import annotations

import json
import os

import pytest

from support.kernels import openmp_problem
from oddnode.measure import catalog
from oddnode.measure.node.disk import DiskOptions, directory_metric
from oddnode.measure.steps import StepContext, make_options
from oddnode.reach import get_transport
from oddnode.reach.base import Target
from oddnode.reach.local import local_node_name

MiB = 1024**2


@pytest.fixture
def node_cache(tmp_path_factory, monkeypatch):
    """The local transport inherits this process's environment: a private build cache."""
    tmp = tmp_path_factory.mktemp("disk_dirs")
    problem = openmp_problem(tmp)
    if problem:
        pytest.skip(f"the disk kernel needs a C compiler: {problem}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp / "cache"))


def run_step(store, directories, repetitions=2):
    step = catalog.get_step("disk")
    options = make_options(step, {"dirs": ",".join(map(str, directories)), "size": 4 * MiB, "engine": "oddnode"})
    node = local_node_name()
    context = StepContext(store, Target([node], get_transport("local")), repetitions=repetitions, timeout=120)
    return node, step.run(context, options)


def test_two_directories_are_stored_apart_and_shown_side_by_side(store, tmp_path, node_cache):
    local, shared = tmp_path / "local", tmp_path / "shared"
    local.mkdir()
    shared.mkdir()
    node, outcome = run_step(store, [local, shared])

    assert list(outcome.runs) == [f"disk.{local}", f"disk.{shared}"]
    assert all(summary.per_node[node]["ok"] == 2 for summary in outcome.runs.values())
    rows = store.con.execute(
        "SELECT benchmark, metric, count(*), bool_and(valid) FROM results GROUP BY ALL ORDER BY 1, 2").fetchall()
    assert rows == [(f"disk.{step}", directory_metric(str(d)), 2, True)
                    for step in ("seq_read", "seq_write") for d in (local, shared)]
    for directory in (local, shared):
        params = [json.loads(p) for (p,) in store.con.execute(
            "SELECT parameters FROM results WHERE metric = ?", [directory_metric(str(directory))]).fetchall()]
        assert {p["directory"] for p in params} == {str(directory)}
        assert list(directory.iterdir()) == []
    # Each directory is its own series: the analysis never puts one beside the other.
    series = {s.name for s in store.load_dataset().series}
    assert f"disk.seq_write:bandwidth.{local}" in series and f"disk.seq_write:bandwidth.{shared}" in series
    table = [line.strip() for line in outcome.notes[0].splitlines()]
    assert table[0].startswith("disk directories side by side")
    assert table[1].split() == ["directory", "seq_write", "seq_read"]
    assert [line.split()[0] for line in table[2:]] == [str(local), str(shared)]
    assert all(line.split()[2] == "(1)" and line.split()[4] == "(1)" for line in table[2:])


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory all the same")
def test_unwritable_directory_fails_alone(store, tmp_path, node_cache):
    good, locked = tmp_path / "good", tmp_path / "locked"
    good.mkdir()
    locked.mkdir(mode=0o500)
    try:
        node, outcome = run_step(store, [good, locked], repetitions=1)
    finally:
        locked.chmod(0o700)
    assert outcome.runs[f"disk.{good}"].per_node[node]["ok"] == 1
    assert outcome.runs[f"disk.{locked}"].per_node[node]["failed"] == 1


def test_missing_directory_is_the_nodes_failure_for_that_directory_only(store, tmp_path, node_cache):
    present, missing = tmp_path / "present", tmp_path / "not-there"
    present.mkdir()
    node, outcome = run_step(store, [missing, present], repetitions=1)

    assert outcome.runs[f"disk.{missing}"].per_node[node]["failed"] == 1
    assert outcome.runs[f"disk.{present}"].per_node[node]["ok"] == 1
    valid = dict(store.con.execute(
        "SELECT metric, bool_and(valid) FROM results WHERE benchmark = 'disk.seq_write' GROUP BY 1").fetchall())
    assert valid == {directory_metric(str(missing)): False, directory_metric(str(present)): True}
    dataset = store.load_dataset()
    trouble = dataset.node_trouble[node]
    assert trouble.stage == f"disk.{missing}" and str(missing) in trouble.detail
    assert catalog.series_stage(trouble.stage) == "disk"
    assert [f.benchmark for f in dataset.failures] == ["disk.seq_read", "disk.seq_write"]
    lines = [line.strip() for line in outcome.notes[0].splitlines()]
    assert lines[2].split() == [str(missing), "-", "(0)", "-", "(0)"]
    assert lines[3].split()[0] == str(present) and lines[3].split()[2] == "(1)"


def test_the_check_refuses_bad_directories_before_running():
    step = catalog.get_step("disk")
    with pytest.raises(ValueError, match="must be an absolute path, got 'scratch'"):
        step.check(make_options(step, {"dirs": "/tmp,scratch"}))
    with pytest.raises(ValueError, match="named twice"):
        step.check(make_options(step, {"dirs": "/tmp,/tmp/"}))
    with pytest.raises(ValueError, match="not both"):
        step.check(DiskOptions(directory="/data", dirs=("/tmp",)))


def test_a_file_where_a_directory_should_be_fails_alone(store, tmp_path, node_cache):
    good, plain_file = tmp_path / "good", tmp_path / "a-file"
    good.mkdir()
    plain_file.write_text("not a directory\n")
    node, outcome = run_step(store, [plain_file, good], repetitions=1)
    assert outcome.runs[f"disk.{plain_file}"].per_node[node]["failed"] == 1
    assert outcome.runs[f"disk.{good}"].per_node[node]["ok"] == 1
    assert str(plain_file) in store.load_dataset().node_trouble[node].detail
