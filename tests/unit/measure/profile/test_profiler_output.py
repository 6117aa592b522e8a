"""oddnode's MPI profiler without MPI: the reader on real profiles (clear
errors with line numbers on bad ones), the launcher arguments for Open
MPI, Hydra, srun and a lone program (launchers told apart by stub
``--version`` scripts), and the wrapped calls named alike in C and Python."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from oddnode.reach.jobs import kernel_source
from oddnode.parsers.base import ParseError
from oddnode.measure.profile.profiler import ProfilerError, parse_profiler_output, profiled_argv, read_profiler_output
from oddnode.readings.profile import ZERO_BUCKET, communication_share, histogram
from oddnode.measure.profile.profiler import WRAPPED_CALLS
from oddnode.reach.launch import launcher_kind
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "mpi_profiler"
DEMO = FIXTURES / "demo_app_3ranks.txt"
MANY = FIXTURES / "many_calls_np2.txt"


def test_a_demo_application_profile_reads_per_rank_and_call():
    profile = read_profiler_output(DEMO)
    assert profile.tool == "oddnode" and profile.source == str(DEMO)
    assert profile.command == "./demo -n 40 -w 200 -h 3000 -a 4 -A 1000 -i 1"
    assert profile.notes == ["clock: TSC at 2.5962 GHz"]
    assert [r.rank for r in profile.ranks] == [0, 1, 2]
    first = profile.ranks[0]
    assert first.host == "vm" and first.wall == pytest.approx(0.043109634) and first.cpu == pytest.approx(0.4639)
    assert first.time_in_mpi == pytest.approx(0.028866622)
    for rank in profile.ranks:
        sendrecv = rank.calls[("MPI_Sendrecv", 11)]
        assert (sendrecv.count, sendrecv.bytes) == (80, 240000)
        assert rank.calls[("MPI_Alltoall", 9)].bytes == 10 * 1000
        assert rank.calls[("MPI_Barrier", None)].count == 1
        assert sum(s.count for (call, _), s in rank.calls.items() if call == "MPI_Gather") == 3
    assert histogram(profile)[("MPI_Sendrecv", 11)].count == 240
    assert 0 < communication_share(profile) < 1


def test_every_size_definition_lands_in_its_bucket():
    ranks = read_profiler_output(MANY).ranks
    zero = ranks[0].calls[("MPI_Send", ZERO_BUCKET)]
    assert (zero.count, zero.bytes) == (1, 0)
    assert ranks[0].calls[("MPI_Send", 6)].bytes == 100
    # The received size, not the 4096 B posted.
    assert ranks[1].calls[("MPI_Recv", 6)].bytes == 100 and ("MPI_Recv", 12) not in ranks[1].calls
    for rank in ranks:
        assert rank.calls[("MPI_Isend", 12)].bytes == 5 * 8000
        assert rank.calls[("MPI_Waitall", None)].count == 5
        assert rank.calls[("MPI_Alltoallv", 11)].bytes == 2048  # mean of 1024 and 3072
        assert rank.calls[("MPI_Allgather", 9)].bytes == 512
        assert rank.calls[("MPI_Bcast", 6)].bytes == 64


def test_foreign_host_names_are_kept():
    text = DEMO.read_text().replace(" vm ", " cn-a17 ", 1).replace("rank 1 vm", "rank 1 gpu003.cluster")
    profile = parse_profiler_output(text, "foreign")
    assert [r.host for r in profile.ranks] == ["cn-a17", "gpu003.cluster", "vm"]


def _spoiled(lineno: int, replacement: str | None) -> str:
    lines = DEMO.read_text().splitlines()
    if replacement is None:
        del lines[lineno - 1]
    else:
        lines[lineno - 1] = replacement
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("lineno, replacement, message", [
    (1, "mpiP 3.5", "not an oddnode MPI profile"),
    (1, "oddnode-mpi-profile 2", "format version 2"),
    (2, "ranks two", "ranks: expected a whole number"),
    (3, "clock hpet", "expected 'clock tsc HZ' or 'clock monotonic'"),
    (5, "rank 0 vm 0.04 0.02", "a rank line is 'rank R HOST WALL_S MPI_S CPU'"),
    (6, "rank 2 vm 0.04 0.02 0.5", "rank line of rank 2 where rank 1 of 3 belongs"),
    (6, "rank 1 vm -0.04 0.02 0.5", "wall time: '-0.04' is not a non-negative number"),
    (8, "call 0 MPI_Init - 0 0.2 0.2 0", "count: 0 is below 1"),
    (10, "call 0 MPI_Sendrecv 11 80 0.02 0.03 240000", "exceeds the total"),
    (10, "call 0 MPI_Sendrecv 10 80 0.02 0.001 240000", "240000 bytes in 80 calls do not fit bucket 10"),
    (10, "call 0 MPI_Sendrecv 11 80 0.02 0.001", "a call line is 'call R MPI_NAME BUCKET"),
    (10, "call 0 Sendrecv 11 80 0.02 0.001 240000", "'Sendrecv' is not an MPI call"),
    (10, "call 0 MPI_Init - 1 0.2 0.2 0", "a second line of rank 0 MPI_Init bucket -"),
    (10, "call 0 MPI_Barrier - 1 0.2 0.2 16", "16 bytes in 1 calls do not fit bucket - (no size)"),
    (10, "call 0 MPI_Sendrecv 70 80 0.02 0.001 240000", "bucket 70 is beyond 2^63 bytes"),
    (10, "garbage here", "unexpected line in an oddnode MPI profile"),
])
def test_a_malformed_line_is_named_with_its_number(lineno, replacement, message):
    with pytest.raises(ParseError, match=re.escape(message)) as caught:
        parse_profiler_output(_spoiled(lineno, replacement), "bad.txt")
    assert caught.value.line == lineno and str(caught.value).startswith(f"bad.txt:{lineno}: ")


def test_a_profile_cut_short_is_truncated():
    lines = DEMO.read_text().splitlines()
    with pytest.raises(ParseError, match="truncated profile: no 'end' line") as caught:
        parse_profiler_output("\n".join(lines[:20]) + "\n", "cut.txt")
    assert caught.value.line == 20
    with pytest.raises(ParseError, match="the rank lines of 2 ranks are missing"):
        parse_profiler_output("\n".join(lines[:5]) + "\n", "cut.txt")
    with pytest.raises(ParseError, match=r"cut.txt:3: truncated profile: no 'clock'"):
        parse_profiler_output("\n".join(lines[:2]), "cut.txt")
    with pytest.raises(ParseError, match="a line after 'end'"):
        parse_profiler_output(DEMO.read_text() + "end\n", "cut.txt")


def test_an_unreadable_file_is_named():
    with pytest.raises(ParseError, match=r"nowhere/profile.txt: cannot read the profile"):
        read_profiler_output("nowhere/profile.txt")


def test_python_names_the_calls_the_library_wraps():
    source = kernel_source("mpi_profiler")
    names = re.search(r"CALL_NAMES\[CALLS\] = \{(.*?)\};", source, re.S).group(1)
    assert tuple(re.findall(r'"(MPI_\w+)"', names)) == WRAPPED_CALLS
    for call in WRAPPED_CALLS:
        assert re.search(rf"^int {call}\(", source, re.M), call
        assert f"P{call}(" in source, call
    assert '#include "' not in source  # one self-contained file


# --- launchers ---------------------------------------------------------------------

VERSIONS = {
    "openmpi": "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n",
    "mpich": "HYDRA build details:\n    Version:                                 4.0\n",
    "intel": "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619\n",
}


def stub_launcher(directory: Path, name: str, version_text: str) -> str:
    """A fake launcher printing ``version_text`` for --version."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{version_text}EOF\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_open_mpi_gets_x_options_after_the_launcher(tmp_path, monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    launcher = stub_launcher(tmp_path / "ompi", "mpirun", VERSIONS["openmpi"])
    argv, env = profiled_argv([launcher, "-np", "4", "./app", "-x"], "/c/libmpi_profiler.so", "/w/p.txt")
    assert argv == [launcher, "-x", "LD_PRELOAD=/c/libmpi_profiler.so", "-x", "ODDNODE_PROFILE_OUTPUT=/w/p.txt",
                    "-np", "4", "./app", "-x"]
    assert env == {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert launcher_kind("orterun") == "openmpi"


@pytest.mark.parametrize("flavour", ["mpich", "intel"])
def test_hydra_gets_genv_options(tmp_path, monkeypatch, flavour):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    launcher = stub_launcher(tmp_path / flavour, "mpiexec", VERSIONS[flavour])
    argv, env = profiled_argv([launcher, "-n", "2", "app"], "/c/lib.so", "/w/p.txt")
    assert argv == [launcher, "-genv", "LD_PRELOAD", "/c/lib.so", "-genv", "ODDNODE_PROFILE_OUTPUT", "/w/p.txt",
                    "-n", "2", "app"]
    assert env == {}


def test_an_unknown_launcher_is_refused_with_its_version(tmp_path):
    launcher = stub_launcher(tmp_path / "odd", "mpirun", "SomeMPI launcher 1.0\n")
    with pytest.raises(ProfilerError, match=r"cannot tell which MPI .*SomeMPI launcher 1.0"):
        profiled_argv([launcher, "app"], "/c/lib.so", "/w/p.txt")


def test_srun_gets_export_and_joins_the_users_own(monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    argv, env = profiled_argv(["srun", "-N", "2", "app"], "/c/lib.so", "/w/p.txt")
    assert argv == ["srun", "--export=ALL,LD_PRELOAD=/c/lib.so,ODDNODE_PROFILE_OUTPUT=/w/p.txt", "-N", "2", "app"]
    assert env == {}
    argv, _ = profiled_argv(["srun", "--export=NONE,HOME", "app"], "/c/lib.so", "/w/p.txt")
    assert argv == ["srun", "--export=NONE,HOME,LD_PRELOAD=/c/lib.so,ODDNODE_PROFILE_OUTPUT=/w/p.txt", "app"]
    with pytest.raises(ProfilerError, match="comma"):
        profiled_argv(["srun", "app"], "/c/lib.so", "/w/a,b.txt")


def test_a_lone_program_gets_the_variables_in_its_environment(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "/opt/other.so")
    argv, env = profiled_argv(["./app", "--n", "3"], "/c/lib.so", "rel/p.txt")
    assert argv == ["./app", "--n", "3"]
    assert env == {"LD_PRELOAD": "/c/lib.so:/opt/other.so", "ODDNODE_PROFILE_OUTPUT": str(Path("rel/p.txt").absolute())}
    with pytest.raises(ProfilerError, match="no command"):
        profiled_argv([], "/c/lib.so", "p.txt")
