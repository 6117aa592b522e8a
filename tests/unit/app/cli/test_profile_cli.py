"""``oddnode profile`` and ``oddnode import mpip|itc``: the command reaches
the profiler whole, profiles are stored and reported, exit statuses."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.cli import invoke
from oddnode.parsers.itc import read_itc
from oddnode.parsers.mpip import read_mpip
from oddnode.store import open_store
from support.profiles import scripted
from support.cli import FIXTURES



class FakeProfilerError(Exception):
    pass


@dataclass
class FakeRun:
    profile: object
    returncode: int
    output: Path
    seconds: float


@pytest.fixture
def profiler(monkeypatch, tmp_path):
    """The profiler's driver, scripted: records its calls, returns ``scripted()``
    with the status in ``calls.returncode`` (or raises ``calls.error``)."""
    calls = types.SimpleNamespace(runs=[], returncode=0, error=None)

    def run_profiled(argv, *, target=None, timeout=None, work_dir=None):
        calls.runs.append({"argv": argv, "target": target, "timeout": timeout, "work_dir": work_dir})
        if calls.error:
            raise FakeProfilerError(calls.error)
        profile = scripted()
        profile.command = None
        return FakeRun(profile, calls.returncode, tmp_path, 12.5)

    module = types.ModuleType("oddnode.measure.profile.profiler")
    module.run_profiled = run_profiled
    module.ProfilerError = FakeProfilerError
    module.build_profiler_library = lambda target=None: tmp_path / "libprofiler.so"
    monkeypatch.setitem(sys.modules, "oddnode.measure.profile.profiler", module)
    return calls


def test_profile_runs_the_command_after_the_dashes_and_stores_it(profiler, tmp_path):
    db = tmp_path / "p.duckdb"
    result = invoke("profile", "--db", db, "--timeout", 30, "--", "mpirun", "-np", 2, "./halo", "--json", "-x")
    assert result.exit_code == 0, result.output
    assert profiler.runs == [{"argv": ["mpirun", "-np", "2", "./halo", "--json", "-x"], "target": None,
                              "timeout": 30.0, "work_dir": None}]
    # The application's --json is its own: the report is the table, not JSON.
    assert "Profile 1 (oddnode): 2 ranks on 2 hosts, wall 10 s, 55.0% of it in MPI" in result.text
    assert "MPI_Alltoall" in result.text and "stored as profile 1" in result.text
    with open_store(db, read_only=True) as store:
        stored = store.profile(1)
        (listed,) = store.profiles()
    assert stored.command == "mpirun -np 2 ./halo --json -x" and stored.ranks == scripted().ranks
    assert listed.run_id is not None


def test_a_failed_application_is_stored_and_its_status_returned(profiler, tmp_path):
    profiler.returncode = 3
    result = invoke("profile", "--db", tmp_path / "p.duckdb", "--", "./crash")
    assert result.exit_code == 3
    assert "the application failed: ./crash exited with status 3 after 12.5 s" in result.text
    profiler.returncode = -9  # killed by SIGKILL: 128 + 9, as a shell says
    assert invoke("profile", "--db", tmp_path / "p.duckdb", "--", "./crash").exit_code == 137
    with open_store(tmp_path / "p.duckdb", read_only=True) as store:
        assert len(store.profiles()) == 2


def test_usage_errors_exit_2(profiler, tmp_path):
    db = tmp_path / "p.duckdb"
    assert invoke("profile", "--db", db).exit_code == 2
    assert invoke("profile", "--db", db, "--").exit_code == 2
    assert invoke("profile", "--db", db, "--list", "--", "./app").exit_code == 2
    assert invoke("profile", "--db", db, "--show", "1", "--list").exit_code == 2
    assert profiler.runs == []


def test_a_profiler_error_is_one_line_and_exit_2(profiler, tmp_path):
    profiler.error = "mpicc not found: install an MPI development package"
    result = invoke("profile", "--db", tmp_path / "p.duckdb", "--", "mpirun", "./app")
    assert result.exit_code == 2 and "error: mpicc not found" in result.text


def test_nodes_build_on_the_target(profiler, tmp_path, monkeypatch):
    from oddnode.app.cli import common

    seen = []
    monkeypatch.setattr(common, "selected_target", lambda *args: seen.append(args) or "TARGET")
    result = invoke("profile", "--db", tmp_path / "p.duckdb", "-w", "cn-a[17-18]", "--transport", "ssh",
                    "--work-dir", tmp_path, "--", "srun", "./app")
    assert result.exit_code == 0, result.output
    assert seen[0][:3] == (["cn-a[17-18]"], None, None) and seen[0][3].transport == "ssh"
    assert profiler.runs[0]["target"] == "TARGET" and profiler.runs[0]["work_dir"] == tmp_path


@pytest.mark.slow
def test_json_plot_show_and_list(profiler, tmp_path):
    db, plot = tmp_path / "p.duckdb", tmp_path / "p.png"
    result = invoke("profile", "--db", db, "--json", "--plot", plot, "--", "./app")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["id"] == 1 and document["tool"] == "oddnode" and document["command"] == "./app"
    assert {"ranks", "histogram", "time_by_call", "communication_share", "imbalance"} <= set(document)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    shown = invoke("profile", "--db", db, "--show", "latest", "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout) == document
    table = invoke("profile", "--db", db, "--show", 1)
    assert table.exit_code == 0 and "Profile 1 (oddnode)" in table.text and "MPI_Barrier" in table.text
    listed = invoke("profile", "--db", db, "--list", "--json")
    assert [(p["id"], p["tool"], p["ranks"], p["hosts"], p["command"]) for p in json.loads(listed.stdout)] == [
        (1, "oddnode", 2, 2, "./app")]
    assert "Stored MPI profiles" in invoke("profile", "--db", db, "--list").text


@pytest.mark.slow
def test_show_of_a_missing_profile_or_an_empty_store(tmp_path):
    db = tmp_path / "p.duckdb"
    open_store(db).close()
    result = invoke("profile", "--db", db, "--show", "latest")
    assert result.exit_code == 2 and "no profile in" in result.text
    assert invoke("profile", "--db", db, "--show", "x").exit_code == 2
    assert invoke("profile", "--db", db, "--show", 4).exit_code == 2
    assert "No profiles stored" in invoke("profile", "--db", db, "--list").text


def test_import_mpip_stores_the_report_as_read(tmp_path):
    db, path = tmp_path / "i.duckdb", FIXTURES / "mpip" / "halo_alltoall_np4.mpiP"
    result = invoke("import", "mpip", path, "--db", db)
    assert result.exit_code == 0, result.output
    assert "Profile 1 (mpip): 4 ranks on 2 hosts, wall 20 s, 30.0% of it in MPI" in result.text
    with open_store(db, read_only=True) as store:
        assert store.profile(1) == read_mpip(path)
    document = json.loads(invoke("import", "mpip", path, "--db", db, "--json").stdout)
    assert document["id"] == 2 and document["tool"] == "mpip" and len(document["ranks"]) == 4


def test_import_itc_with_ticks_and_hosts(tmp_path):
    db, path = tmp_path / "i.duckdb", FIXTURES / "itc" / "alltoall_np2.dump"
    result = invoke("import", "itc", path, "--ticks-per-second", 1e6, "--hosts", "cn-a17,gpu003", "--db", db)
    assert result.exit_code == 0, result.output
    assert "MPI_Alltoall" in result.text and "cn-a17" in result.text
    with open_store(db, read_only=True) as store:
        assert store.profile(1) == read_itc(path, ticks_per_second=1e6, hosts={0: "cn-a17", 1: "gpu003"})
    assert invoke("import", "itc", path, "--db", db).exit_code == 2  # --ticks-per-second is required


def test_malformed_files_name_the_line_and_exit_2(tmp_path):
    bad_mpip = tmp_path / "bad.mpiP"
    bad_mpip.write_text("@ mpiP\n@--- MPI Time (seconds) ---\nTask AppTime MPITime MPI%\n 0 x 1 2\n")
    result = invoke("import", "mpip", bad_mpip, "--db", tmp_path / "i.duckdb")
    assert result.exit_code == 2 and f"{bad_mpip}:4: AppTime: expected a number" in result.text
    bad_itc = tmp_path / "bad.dump"
    bad_itc.write_text("100 GLOBALOP MPI_Bcast ON 0:1 SENT 4 RECVD 0 DURATION x\n")
    result = invoke("import", "itc", bad_itc, "--ticks-per-second", 1e9, "--db", tmp_path / "i.duckdb")
    assert result.exit_code == 2 and f"{bad_itc}:1: DURATION needs a whole number" in result.text
    assert invoke("import", "itc", FIXTURES / "itc" / "seed_bcast.dump", "--ticks-per-second", 0,
                  "--db", tmp_path / "i.duckdb").exit_code == 2
    assert not (tmp_path / "i.duckdb").exists()  # read before the store is opened: nothing written
