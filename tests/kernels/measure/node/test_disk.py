"""The disk stage for real on this machine: our kernel built and run through
the node runner in a temporary directory (and on tmpfs), its check of the
data read back, its errors; fio's job run for real into the same series;
the node choosing fio or our kernel; both engines through the runner."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.kernels import openmp_problem
from oddnode.measure.node.disk import (
    DISK_STAGE,
    disk_benchmark,
    disk_kernel_argv,
    fio_argv,
    fio_job_text,
    parse_disk_output,
    parse_disk_run,
    parse_fio_report,
)
from oddnode.reach.jobs import ToolReport, parse_runner_output, runner_argv
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError, ToolUnavailable
from oddnode.measure.runner import run_benchmark
from oddnode.reach import get_transport
from oddnode.reach.base import Target
from oddnode.reach.local import local_node_name

MiB = 1024**2
SIZE = 16 * MiB
BLOCK = MiB
SERIES = ["disk.seq_read", "disk.seq_write"]
needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


@pytest.fixture(scope="module")
def node_env(tmp_path_factory):
    """An environment whose kernel build cache is private to this module."""
    tmp = tmp_path_factory.mktemp("disk_kernel")
    problem = openmp_problem(tmp)
    if problem:
        pytest.skip(f"the disk kernel needs a C compiler: {problem}")
    return {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache")}


def run_on_this_node(argv: list[str], env: dict[str, str], preexec_fn=None) -> str:
    """Run a node argv here, with this interpreter in place of the node's python3."""
    completed = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, env=env,
                               timeout=120, preexec_fn=preexec_fn)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def needs_direct_io(directory: Path) -> Path:
    """The directory, or a skip where its file system refuses O_DIRECT
    (tmpfs before Linux 6.6): fio's job asks for it and has no fallback."""
    probe = directory / "direct-probe"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600))
    except OSError as refused:
        pytest.skip(f"{directory} refuses O_DIRECT: {refused}")
    finally:
        probe.unlink(missing_ok=True)
    return directory


def is_tmpfs(path: str) -> bool:
    mounts = Path("/proc/mounts").read_text().splitlines() if Path("/proc/mounts").exists() else []
    return any(line.split()[1] == path and line.split()[2] == "tmpfs" for line in mounts)


@pytest.fixture(scope="module")
def kernel_run(node_env, tmp_path_factory):
    """One real run of our kernel: the directory, and the runner's stdout."""
    directory = tmp_path_factory.mktemp("disk_dir")
    return directory, run_on_this_node(disk_kernel_argv(str(directory), SIZE, BLOCK), node_env)


# --- our kernel ---------------------------------------------------------------------


def test_kernel_writes_reads_back_checks_and_leaves_nothing(kernel_run):
    directory, stdout = kernel_run
    parsed = parse_disk_run(stdout, "localhost", directory=str(directory), engine="oddnode")
    assert parsed.valid and parsed.problems == []
    assert sorted(m.benchmark for m in parsed.measurements) == SERIES
    for m in parsed.measurements:
        assert m.metric == "bandwidth" and m.unit == "MB/s" and m.direction is Direction.HIGHER
        assert m.value > 0 and m.valid
        assert m.parameters["engine"] == "oddnode" and m.parameters["directory"] == str(directory)
        assert m.parameters["size_bytes"] == SIZE and m.parameters["block_bytes"] == BLOCK
        assert m.value == pytest.approx(SIZE / 1e6 / m.parameters["seconds"], rel=1e-3)
    config = parsed.configuration
    assert config["blocks"] == SIZE // BLOCK and config["mb"] == "10^6 bytes"
    assert config["filesystem"] and config["filesystem_magic"].startswith("0x")
    assert isinstance(config["direct"], bool) and (config["direct"] or config["direct_refused"])
    written, read = config["checksum"].split(" written ")[1].split(" read ")
    assert written == read
    assert config["file"].startswith(f"{directory}/oddnode-disk.")
    assert config["cflags"] == "-O3 -march=native -fopenmp" and config["cache_key"]
    assert config["engine"] == "oddnode" and config["engine_requested"] == "oddnode"
    assert list(directory.iterdir()) == [], "the test file is removed"


@pytest.mark.skipif(not is_tmpfs("/dev/shm"), reason="/dev/shm is not a tmpfs here")
def test_tmpfs_is_measured_and_named(node_env):
    parsed = parse_disk_run(run_on_this_node(disk_kernel_argv("/dev/shm", 4 * MiB, BLOCK), node_env), "localhost")
    assert parsed.valid
    config = parsed.configuration
    assert config["filesystem"] == "tmpfs"
    # Linux >= 6.6 takes O_DIRECT on tmpfs; older ones refuse it and we fall back.
    assert config["direct"] or "O_DIRECT" in config["direct_refused"]
    assert not Path(config["file"].split(" ")[0]).exists()


def test_a_refused_o_direct_falls_back_to_buffered_io_and_says_so(node_env, tmp_path):
    argv = disk_kernel_argv(str(tmp_path), 4 * MiB, BLOCK, defines=["ODDNODE_REFUSE_DIRECT"])
    parsed = parse_disk_run(run_on_this_node(argv, node_env), "localhost")
    config = parsed.configuration
    assert config["direct"] is False and config["refuse_direct"] == "test build"
    assert config["direct_refused"] == "O_DIRECT refused by the file system: Invalid argument"
    assert any(w.startswith("buffered I/O, not O_DIRECT") for w in config["warnings"])
    # Still valid: every byte was checked; the parameters keep it apart.
    assert parsed.valid and all(m.parameters["direct"] is False for m in parsed.measurements)


def test_a_corrupted_byte_fails_the_check(node_env, tmp_path):
    offset = 5_000_000  # in the fifth 1 MiB block, which starts at 4194304
    argv = disk_kernel_argv(str(tmp_path), 8 * MiB, BLOCK, defines=[f"ODDNODE_CORRUPT_READ={offset}"])
    stdout = run_on_this_node(argv, node_env)
    report = parse_runner_output("localhost", stdout)
    assert report.returncode == 0  # the kernel ran; judging it is the parser's job
    assert report.stdout.rstrip().splitlines()[-1] == "validation failed 1 4194304"
    parsed = parse_disk_run(stdout, "localhost")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    assert len(parsed.problems) == 1 and "in 1 of 8 blocks, the first at byte offset 4194304" in parsed.problems[0]
    config = parsed.configuration
    assert config["corrupt_read_offset"] == offset and config["bad_blocks"] == 1
    written, read = config["checksum"].split(" written ")[1].split(" read ")
    assert written != read


def test_a_missing_directory_is_named(node_env, tmp_path):
    missing = tmp_path / "no-such-dir"
    stdout = run_on_this_node(disk_kernel_argv(str(missing), 4 * MiB, BLOCK), node_env)
    with pytest.raises(ParseError, match=f"exited with status 3: error: cannot create a file in {missing}: "
                                         "No such file or directory"):
        parse_disk_run(stdout, "node03")


def test_not_enough_space_is_refused_before_writing(node_env, tmp_path):
    stdout = run_on_this_node(disk_kernel_argv(str(tmp_path), 2**50, BLOCK), node_env)
    with pytest.raises(ParseError, match=f"status 3: error: not enough space in {tmp_path}: the test needs"):
        parse_disk_run(stdout, "node03")
    assert list(tmp_path.iterdir()) == []


def test_running_out_of_room_mid_write_is_a_clean_error(node_env, tmp_path):
    def small_file_limit():  # ulimit -f: writes past 4 MiB fail (EFBIG), like a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 * MiB, 4 * MiB))

    argv = disk_kernel_argv(str(tmp_path), SIZE, BLOCK)
    parse_runner_output("localhost", run_on_this_node(argv, node_env))  # built before the limit applies
    report = parse_runner_output("localhost", run_on_this_node(argv, node_env, small_file_limit))
    assert report.returncode == 3 and report.stdout == ""
    assert f"writing the test file in {tmp_path} at offset {4 * MiB} failed: File too large" in report.stderr
    assert f"{tmp_path} has no room for the test file" in report.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ([], "-d DIRECTORY is required"),
        (["-d", "/tmp", "-b", "1000"], "-b wants a multiple of 4096"),
        (["-d", "/tmp", "-s", "5000", "-b", "4096"], "must be a whole number of blocks"),
        (["-d", "/tmp", "-s", "lots"], "-s wants a whole number"),
        (["-d", "/tmp", "-x"], "unknown option"),
        (["-d", "/tmp", "extra"], "unexpected argument 'extra'"),
    ],
)
def test_bad_arguments_exit_2_with_usage(node_env, args, complaint):
    report = parse_runner_output("localhost", run_on_this_node(runner_argv("disk", args), node_env))
    assert report.returncode == 2 and report.stdout == ""
    assert complaint in report.stderr and "usage:" in report.stderr


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"directory": "var/tmp"}, "absolute path"),
        ({"directory": "/var/tmp\n# direct: yes"}, "control character"),
        ({"block": 1000}, "multiple of 4096"),
        ({"size": 3 * MiB + 4096}, "whole number of 1048576-byte blocks"),
        ({"size": 1.5e9}, "whole number of bytes"),
        ({"engine": "dd"}, "unknown disk engine 'dd'"),
    ],
)
def test_parameters_are_checked_on_the_admin_side(kwargs, complaint):
    with pytest.raises(ValueError, match=complaint):
        disk_benchmark(**{"size": SIZE, **kwargs})


def test_spec_names_its_stage_and_series():
    spec = disk_benchmark("/var/tmp/", size=SIZE, engine="oddnode")
    assert spec.name == "disk" and spec.stage == DISK_STAGE == "disk"
    assert [s[0] for s in spec.series] == ["disk.seq_write", "disk.seq_read"]
    assert all(s[1:] == ("bandwidth", "MB/s", Direction.HIGHER) for s in spec.series)
    assert spec.parse.keywords == {"directory": "/var/tmp", "engine": "oddnode"}


# --- the parser on broken output ---------------------------------------------------------


def test_garbage_and_cut_output_are_parse_errors_located_by_line(kernel_run):
    stdout = parse_runner_output("localhost", kernel_run[1]).stdout
    lines = stdout.splitlines()
    with pytest.raises(ParseError, match="^node07: not oddnode disk kernel output"):
        parse_disk_output("Segmentation fault\n", "node07")
    with pytest.raises(ParseError, match="^node07:3: unexpected line in disk kernel output: 'Segmentation"):
        parse_disk_output("\n".join(lines[:2] + ["Segmentation fault"] + lines[2:]), "node07")
    with pytest.raises(ParseError, match=f"^node07:{len(lines) - 1}: truncated disk kernel output: no validation"):
        parse_disk_output("\n".join(lines[:-1]), "node07")
    cut = [line for line in lines if not line.startswith("result seq_read")]
    with pytest.raises(ParseError, match="no result line for seq_read"):
        parse_disk_output("\n".join(cut), "node07")
    direct = next(i for i, line in enumerate(lines) if line.startswith("# direct:"))
    with pytest.raises(ParseError, match=f"^node07:{direct + 1}: expected 'yes' or 'no \\(why\\)'"):
        parse_disk_output("\n".join(lines[:direct] + ["# direct: maybe"] + lines[direct + 1:]), "node07")
    with pytest.raises(ParseError, match="unsupported kernel version"):
        parse_disk_output(stdout.replace("disk kernel v1", "disk kernel v9"), "node07")
    # A login banner before our output is not ours to judge.
    assert parse_disk_output("Welcome to node07\n" + stdout, "node07").valid


def test_fio_without_its_json_report_is_a_parse_error():
    report = ToolReport("fio", "/usr/bin/fio", "fio-3.33", "CPU", 1, "", "fio: unknown option --bogus\n",
                        {"fio.json": None})
    with pytest.raises(ParseError, match=r"fio wrote no JSON report \(exit status 1\): fio: unknown option"):
        parse_fio_report(report, "node07")


# --- fio ------------------------------------------------------------------------------


@needs_fio
def test_fio_runs_into_the_same_series(node_env, tmp_path):
    needs_direct_io(tmp_path)
    stdout = run_on_this_node(fio_argv(str(tmp_path), SIZE, BLOCK), node_env)
    parsed = parse_disk_run(stdout, "localhost", directory=str(tmp_path), engine="fio")
    assert parsed.valid and parsed.problems == [] and parsed.tool == "fio"
    assert sorted(m.benchmark for m in parsed.measurements) == SERIES
    for m in parsed.measurements:
        assert m.metric == "bandwidth" and m.unit == "MB/s" and m.value > 0 and m.valid
        assert m.parameters["engine"] == "fio" and m.parameters["direct"] is True
        assert m.parameters["size_bytes"] == SIZE and m.parameters["block_bytes"] == BLOCK
        assert m.parameters["ioengine"] == "psync" and m.parameters["directory"] == str(tmp_path)
    config = parsed.configuration
    assert config["fio_version"].startswith("fio-") and config["engine_requested"] == "fio"
    assert config["jobs"] == ["seq_write", "seq_read", "verify_write", "verify_read"]
    assert config["job_options"]["verify_read"]["verify"] == "crc32c"
    assert list(tmp_path.iterdir()) == [], "fio's private directory is removed"


@needs_fio
def test_fio_check_catches_data_changed_on_disk(node_env, tmp_path):
    needs_direct_io(tmp_path)
    # A job between fio's checked write and its checked read overwrites 4 KiB
    # inside the third block with zeros, as a faulty disk would.
    corrupt = "[corrupt]\nstonewall\nrw=write\nverify=0\nsize=4096\nbs=4096\noffset=2101248\nzero_buffers=1\n\n"
    job = fio_job_text(4 * MiB, BLOCK).replace("[verify_read]", corrupt + "[verify_read]")
    stdout = run_on_this_node(fio_argv(str(tmp_path), 4 * MiB, BLOCK, job_text=job), node_env)
    parsed = parse_disk_run(stdout, "localhost")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    assert sorted(m.benchmark for m in parsed.measurements) == SERIES  # the timed passes were fine
    assert any("fio job 'verify_read' ended with error 84" in p for p in parsed.problems)
    assert any("did not read back as written (crc32c mismatch)" in p for p in parsed.problems)
    assert "fio exited with status 1: crc32c: verify failed at file oddnode-disk.dat offset 2097152" in " ".join(
        parsed.problems)


def _path_without_fio(tmp_path: Path) -> str:
    """A PATH with the compiler's programs and no fio."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("cc", "as", "ld"):
        found = shutil.which(program)
        if found is None:
            pytest.skip(f"no {program} on PATH")
        (bin_dir / program).symlink_to(found)
    return str(bin_dir)


def test_without_fio_on_the_node_auto_runs_our_kernel_and_fio_is_unavailable(node_env, tmp_path):
    env = {**node_env, "PATH": _path_without_fio(tmp_path)}
    work = tmp_path / "work"
    work.mkdir()
    auto = disk_benchmark(str(work), size=4 * MiB, engine="auto")
    parsed = auto.parse(run_on_this_node(auto.argv, env), "node05")
    assert parsed.valid and parsed.tool == "oddnode-disk"
    assert parsed.configuration["engine_requested"] == "auto"
    assert all(m.parameters["engine"] == "oddnode" for m in parsed.measurements)

    only_fio = disk_benchmark(str(work), size=4 * MiB, engine="fio")
    with pytest.raises(ToolUnavailable, match="fio is not installed on this node"):
        only_fio.parse(run_on_this_node(only_fio.argv, env), "node05")


@needs_fio
def test_with_fio_on_the_node_auto_runs_fio(node_env, tmp_path):
    needs_direct_io(tmp_path)
    spec = disk_benchmark(str(tmp_path), size=4 * MiB, engine="auto")
    parsed = spec.parse(run_on_this_node(spec.argv, node_env), "node05")
    assert parsed.valid and parsed.tool == "fio" and parsed.configuration["engine_requested"] == "auto"


# --- through the runner ---------------------------------------------------------------


@pytest.mark.parametrize("engine", ["oddnode", pytest.param("fio", marks=needs_fio)])
def test_local_node_runs_the_disk_stage_twice(store, tmp_path, monkeypatch, node_env, engine):
    # The local transport inherits this process's environment: a private build cache.
    monkeypatch.setenv("XDG_CACHE_HOME", node_env["XDG_CACHE_HOME"])
    directory = tmp_path / "disk"
    directory.mkdir()
    if engine == "fio":
        needs_direct_io(directory)
    node = local_node_name()
    spec = disk_benchmark(str(directory), size=SIZE, engine=engine)
    summary = run_benchmark(store, Target([node], get_transport("local")), spec, repetitions=2, timeout=120)

    assert summary.per_node[node]["ok"] == 2, store.con.execute("SELECT detail FROM node_status").fetchall()
    rows = store.con.execute(
        "SELECT benchmark, metric, unit, count(*), bool_and(valid) FROM results GROUP BY ALL ORDER BY 1"
    ).fetchall()
    assert rows == [(name, "bandwidth", "MB/s", 2, True) for name in SERIES]
    params = [json.loads(p) for (p,) in store.con.execute("SELECT parameters FROM results").fetchall()]
    assert all(p["engine"] == engine and p["size_bytes"] == SIZE and p["directory"] == str(directory)
               for p in params)
    assert all(p["cpu_model"] for p in params)
    assert list(directory.iterdir()) == []
