"""Outputs are written, not swapped: a regular file is replaced in one
rename, a device or FIFO written through, a symbolic link, directory or
missing directory refused and left as it was, and a file named from data
never lands outside its directory."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from support.cli import invoke
from oddnode.core.atomic import (
    OutputRefused,
    OutputUnwritable,
    check_target,
    inside,
    output_directory,
    safe_file_name,
    write_atomically,
)
from oddnode.report.compare import write_plots
from oddnode.report.sweep import write_sweep_plots
from support.cli import FIXTURES



# The character devices the tests write to: Linux's null (takes anything)
# and full (every write fails with ENOSPC), as major and minor numbers.
DEVICES = {"null": (1, 3), "full": (1, 7)}


@pytest.fixture
def device(tmp_path):
    """A path to /dev/null or /dev/full.  As root, a private node of the same
    device in tmp_path: a regression that replaced the target would then
    replace the test's copy, not the system's."""
    def make(name: str) -> Path:
        if os.geteuid() != 0:
            return Path("/dev") / name
        path = tmp_path / f"dev-{name}"
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*DEVICES[name]))
        return path

    return make


def kind_of(path: Path) -> tuple[int, str | None]:
    """What a path is (its file type bits) and, for a link, where it points."""
    mode = stat.S_IFMT(os.lstat(path).st_mode)
    return mode, os.readlink(path) if stat.S_ISLNK(mode) else None


# -- the one writer -----------------------------------------------------------------------


def test_a_regular_file_is_replaced_whole_and_no_temporary_is_left(tmp_path):
    target = tmp_path / "r.prom"
    target.write_text("old\n")
    write_atomically(target, b"new\n")
    assert target.read_bytes() == b"new\n" and os.listdir(tmp_path) == ["r.prom"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_dev_null_is_written_through_and_stays_a_device(device):
    null = device("null")
    write_atomically(null, b"x" * 100_000)
    assert stat.S_ISCHR(os.lstat(null).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_dev_full_is_one_error_and_stays_a_device(device):
    full = device("full")
    with pytest.raises(OutputUnwritable, match=f"^cannot write {full}: No space left on device$") as caught:
        write_atomically(full, b"x\n")
    assert caught.value.errno == errno.ENOSPC
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_a_fifo_is_written_through_to_its_reader(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    data = b"oddnode_x 1\n" * 20_000  # more than a pipe holds: the writes must wait for the reader
    for _ in range(200):  # the reader opens the FIFO when its thread gets to it
        try:
            write_atomically(fifo, data)
            break
        except OutputUnwritable:
            threading.Event().wait(0.01)
    reader.join(10)
    assert got == [data]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputUnwritable, match="no process reads the FIFO"):
        write_atomically(fifo, b"x\n")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_to_a_device_is_written_through_and_stays_a_link(tmp_path, device):
    null = device("null")
    link = tmp_path / "out"
    link.symlink_to(null)
    write_atomically(link, b"x\n")
    assert kind_of(link) == (stat.S_IFLNK, str(null)) and stat.S_ISCHR(os.lstat(null).st_mode)


@pytest.mark.parametrize("make", ["link", "dangling", "directory", "socket"])
def test_what_is_neither_file_nor_stream_is_refused_and_left_as_it_was(tmp_path, make):
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep\n")
    target = tmp_path / "out"
    if make == "link":
        target.symlink_to(elsewhere)
    elif make == "dangling":
        target.symlink_to(tmp_path / "nothing")
    elif make == "directory":
        target.mkdir()
    else:
        import socket

        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
        server.close()
    before = kind_of(target)
    with pytest.raises(OutputRefused, match="not replaced"):
        check_target(target)
    with pytest.raises(OutputRefused, match="not replaced"):
        write_atomically(target, b"new\n")
    assert kind_of(target) == before and elsewhere.read_text() == "keep\n"
    assert sorted(os.listdir(tmp_path)) == ["elsewhere.txt", "out"]  # no temporary left


def test_a_missing_directory_is_named_and_never_made(tmp_path):
    target = tmp_path / "no" / "such" / "r.html"
    with pytest.raises(OutputRefused, match=f"directory {tmp_path / 'no' / 'such'} does not exist"):
        write_atomically(target, b"x")
    assert not (tmp_path / "no").exists()


def test_an_output_directory_is_made_but_not_its_parents(tmp_path):
    assert output_directory(tmp_path / "out") == tmp_path / "out" and (tmp_path / "out").is_dir()
    assert output_directory(tmp_path / "out") == tmp_path / "out"  # there already: used as it is
    with pytest.raises(OutputRefused, match="does not exist"):
        output_directory(tmp_path / "no" / "out")
    assert not (tmp_path / "no").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputRefused, match="not a directory"):
        output_directory(tmp_path / "file")


@pytest.mark.parametrize("write", [write_plots, write_sweep_plots])
def test_plot_directories_of_compare_and_sweep_are_not_made_with_their_parents(tmp_path, write):
    with pytest.raises(OutputRefused, match="does not exist"):
        write(SimpleNamespace(series=[]), tmp_path / "no" / "plots")
    assert not (tmp_path / "no").exists()
    assert write(SimpleNamespace(series=[]), tmp_path / "plots") == [] and (tmp_path / "plots").is_dir()


@pytest.mark.parametrize("name, expected", [
    ("fio.../../x:write.iops", "fio..._.._x:write.iops"),
    ("..", "_"),
    ("../../etc/passwd", "_.._etc_passwd"),
    (".hidden", "hidden"),
    ("a b\nc", "a_b_c"),
    ("pingpong.cut:latency.0", "pingpong.cut:latency.0"),
])
def test_file_names_made_from_data(name, expected):
    assert safe_file_name(name) == expected


def test_a_name_from_data_stays_inside_its_directory(tmp_path):
    assert inside(tmp_path, "plot.../../x") == tmp_path / "plot..._.._x"
    (tmp_path / "plot.x").symlink_to("/tmp")
    with pytest.raises(OutputRefused, match="outside"):
        inside(tmp_path, "plot.x")


# -- every command that writes a file ------------------------------------------------------


@pytest.fixture
def db(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "plot.stream").write_text("".join(f"{100 + i % 3} node{i:02d}\n" for i in range(1, 9)))
    store = tmp_path / "s.duckdb"
    assert invoke("import", "stab", results, "--db", store).exit_code == 0
    return store


WRITERS = {
    "html": lambda out, db: ("analyze", "--db", db, "--html", out),
    "junit": lambda out, db: ("analyze", "--db", db, "--junit", out),
    "prometheus": lambda out, db: ("export", "prometheus", out, "--db", db),
}


@pytest.mark.slow
@pytest.mark.parametrize("writer", WRITERS)
def test_each_writer_writes_a_regular_file_and_dev_null(db, tmp_path, device, writer):
    out = tmp_path / "out.file"
    result = invoke(*WRITERS[writer](out, db))
    assert result.exit_code == 0, result.output
    assert out.is_file() and out.stat().st_size > 0
    null = device("null")
    result = invoke(*WRITERS[writer](null, db))
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat(null).st_mode)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("writer", WRITERS)
def test_each_writer_on_a_full_device_exits_3_with_one_line(db, device, writer):
    full = device("full")
    result = invoke(*WRITERS[writer](full, db))
    assert result.exit_code == 3, result.output
    assert f"cannot write {full}: No space left on device" in result.text
    assert "Traceback" not in result.output
    assert stat.S_ISCHR(os.lstat(full).st_mode)


@pytest.mark.slow
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("make", ["link", "directory", "missing parent"])
def test_each_writer_refuses_and_leaves_the_target_as_it_was(db, tmp_path, writer, make):
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep\n")
    out = tmp_path / "out"
    if make == "link":
        out.symlink_to(elsewhere)
    elif make == "directory":
        out.mkdir()
    else:
        out = tmp_path / "no" / "such" / "out"
    before = kind_of(out) if make != "missing parent" else None
    result = invoke(*WRITERS[writer](out, db))
    assert result.exit_code == 2, result.output
    assert str(out) in result.text and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert elsewhere.read_text() == "keep\n"
    if before is None:
        assert not (tmp_path / "no").exists()
    else:
        assert kind_of(out) == before


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["plot", "csv"])
def test_export_makes_its_directory_but_not_missing_parents(db, tmp_path, fmt):
    result = invoke("export", fmt, tmp_path / "no" / "out", "--db", db)
    assert result.exit_code == 2 and "does not exist" in result.text, result.output
    assert not (tmp_path / "no").exists()
    result = invoke("export", fmt, tmp_path / "out", "--db", db)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out").is_dir() and os.listdir(tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["plot", "csv"])
def test_export_refuses_a_link_inside_its_directory(db, tmp_path, fmt):
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep\n")
    (out / ("plot.stream" if fmt == "plot" else "runs.csv")).symlink_to(elsewhere)
    result = invoke("export", fmt, out, "--db", db)
    assert result.exit_code == 2, result.output
    assert elsewhere.read_text() == "keep\n"


@pytest.mark.slow
def test_a_fio_job_named_with_dots_and_slashes_is_exported_inside(tmp_path):
    document = json.loads((FIXTURES / "fio" / "seqwrite.json").read_text())
    document["jobs"][0]["jobname"] = "../../x"
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps(document))
    store = tmp_path / "s.duckdb"
    assert invoke("import", "fio", evil, "--label", "node01", "--db", store).exit_code == 0
    out = tmp_path / "a" / "b" / "out"
    out.parent.mkdir(parents=True)
    result = invoke("export", "plot", out, "--db", store)
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(tmp_path / "a")) == ["b"] and sorted(os.listdir(out.parent)) == ["out"]
    names = sorted(os.listdir(out))
    assert "units.csv" in names and all(name.startswith("plot.fio.") and "/" not in name for name in names
                                         if name != "units.csv")
    for name in names:
        assert (out / name).resolve().parent == out.resolve()
    units = (out / "units.csv").read_text().splitlines()[1:]
    assert {line.split(",")[0] for line in units} == {name[len("plot."):] for name in names if name != "units.csv"}
