"""Importing outputs of the field's tools that a site already has."""

import shutil

import pytest

from support.cli import FIXTURES, write
from oddnode.store.stab import InputError
from oddnode.store.tool_import import import_tool_outputs
from oddnode.parsers import ParseError, UnknownToolError



def _runs(tmp_path, names):
    """Copies of the real STREAM outputs under per-node, per-run file names."""
    paths = []
    for name, fixture in names:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / "stream" / fixture, path)
        paths.append(path)
    return paths


def test_labels_from_paths_repetitions_and_validity(store, tmp_path):
    paths = _runs(tmp_path, [
        ("run/node01/stream.1.out", "stream_c.out"),
        ("run/node01/stream.2.out", "stream_c_1thread.out"),
        ("run/node02/stream.1.out", "stream_c.out"),
        ("run/node03/stream.1.out", "stream_validation_failed.out"),
    ])
    summary = import_tool_outputs(store, "stream", paths, label_from=r"/(?P<label>node\d+)/")
    assert (summary.files, summary.labels) == (4, 3)
    assert summary.invalid_runs == (str(paths[3]),)
    triad = next(s for s in store.load_series() if s.benchmark == "stream.triad")
    assert triad.unit == "MB/s" and list(triad.labels) == ["node01", "node02"]  # node03 failed validation
    assert list(triad.repetitions) == [2, 1]
    failures = store.load_failures()
    assert {f.label for f in failures} == {"node03"}
    reps = store.con.execute(
        "SELECT label, repetition FROM results WHERE benchmark = 'stream.triad' ORDER BY label, repetition"
    ).fetchall()
    assert reps == [("node01", 1), ("node01", 2), ("node02", 1), ("node03", 1)]


def test_one_label_for_every_file(store, tmp_path):
    paths = _runs(tmp_path, [("a.out", "stream_c.out"), ("b.out", "stream_c_1thread.out")])
    import_tool_outputs(store, "stream", paths, label="node07")
    triad = next(s for s in store.load_series() if s.benchmark == "stream.triad")
    assert list(triad.labels) == ["node07"] and list(triad.repetitions) == [2]


def test_bad_inputs_name_the_file_and_write_nothing(store, tmp_path):
    good = _runs(tmp_path, [("node01.out", "stream_c.out")])
    garbage = write(tmp_path / "node02.out", "this is not STREAM output\n")
    with pytest.raises(ParseError, match="node02.out"):
        import_tool_outputs(store, "stream", [*good, garbage], label_from=r"(?P<label>node\d+)")
    assert store.runs() == []
    with pytest.raises(InputError, match="does not match"):
        import_tool_outputs(store, "stream", good, label_from=r"(?P<label>cn\d+)")
    with pytest.raises(InputError, match="group named label"):
        import_tool_outputs(store, "stream", good, label_from=r"node\d+")
    with pytest.raises(InputError, match="either outright"):
        import_tool_outputs(store, "stream", good)
    with pytest.raises(InputError, match="invalid node name"):
        import_tool_outputs(store, "stream", good, label="node;01")
    with pytest.raises(UnknownToolError, match="no parser named 'linpack'"):
        import_tool_outputs(store, "linpack", good, label="node01")
    assert store.runs() == []
