"""The health program ``oddnode health --install DIR`` writes for nodes
without oddnode: one executable file and its settings, run here as a node
would run it (its own interpreter, none of our packages importable), judging
facts, memory and address as ``oddnode health`` does, draining through
scontrol, logging to a file, and refusing a bad settings file by name."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from oddnode.onnode import health_node
from support.cli import invoke
from support.slurm import fake_slurm, nodes_of

# This machine's own name, which resolves here (to loopback: the address
# check skips it), as a node's does in its cluster.
NODE = socket.gethostname().split(".")[0]
# A memory run small enough for a unit test: 200,000 doubles an array, one pass a loop.
BASELINE = """\
# oddnode health baseline
source: {{store: results.duckdb, check: 4, nodes: "cn-a[01-32]", written: 2026-11-26T09:00:00+00:00}}
expect: |
  arch: {arch}
memory:
  options: {{elements: 200000, threads: 1, min_loop_seconds: 0.001}}
  triad: {{median: {median}, mad: 10.0, nodes: 32, unit: MB/s, minimum: {minimum}}}
"""


def install(tmp_path: Path, *options) -> Path:
    result = invoke("health", "--install", tmp_path / "health", *options)
    assert result.exit_code == 0, result.output
    assert f"HealthCheckProgram={tmp_path / 'health' / 'oddnode-health'}" in result.output
    return tmp_path / "health" / "oddnode-health"


def run_program(program: Path, *args, env=None) -> subprocess.CompletedProcess:
    """The program as slurmd starts it: its file, by its shebang's python3,
    in an environment where oddnode cannot be imported."""
    environment = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")} | (env or {})
    return subprocess.run([str(program), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=environment, cwd=program.parent)


@pytest.fixture
def site(tmp_path):
    """An expectations file with one rule this machine meets and, for
    cn-a[10-19] only, one it cannot."""
    path = tmp_path / "site.yaml"
    path.write_text(f"arch: {platform.machine()}\nnodes:\n  cn-a[10-19]:\n    cpu_threads: {{min: 100000}}\n")
    return path


@pytest.mark.slow
def test_the_program_is_one_executable_file_with_its_settings_beside_it(tmp_path, site):
    program = install(tmp_path, "--expect", site, "--benchmarks", "never", "--log", tmp_path / "health.log")
    assert os.access(program, os.X_OK) and program.read_text().startswith("#!/usr/bin/env python3\n")
    settings = json.loads(program.with_suffix(".json").read_text())
    assert settings["format"] == health_node.FORMAT and settings["memory"] is None
    assert settings["run"] == {"drain": False, "resume_when_healthy": False, "benchmarks": "never",
                               "log": str(tmp_path / "health.log")}
    scoped = [rule for rule in settings["expectations"][0]["rules"] if rule["scope"]]
    assert scoped[0]["scope_nodes"] == [f"cn-a{i}" for i in range(10, 20)]
    # No argument, as slurmd starts it: a healthy node says so and logs it.
    done = run_program(program, env={"SLURMD_NODENAME": NODE})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{NODE}: healthy in ") and "facts ok: 1 expectations met" in done.stdout
    assert f"oddnode-health[" in (tmp_path / "health.log").read_text()


@pytest.mark.slow
def test_a_node_of_a_section_it_fails_has_the_problem_oddnode_health_names(tmp_path, site):
    program = install(tmp_path, "--expect", site, "--benchmarks", "never")
    done = run_program(program, "--node", "cn-a12", "--log", "none")
    assert done.returncode == 1
    first = done.stdout.splitlines()[0]
    assert first.startswith("cn-a12: cpu_threads must be at least 100000 on cn-a[10-19]; cn-a12: ")
    same = invoke("health", "--node", "cn-a12", "--expect", site, "--benchmarks", "never")
    assert same.exit_code == 1 and first in same.output.splitlines()


@pytest.mark.slow
def test_its_json_is_the_health_document(tmp_path, site):
    from support.schema import schema_errors

    program = install(tmp_path, "--expect", site, "--benchmarks", "never")
    done = run_program(program, "--node", "cn-a12", "--log", "none", "--json")
    document = json.loads(done.stdout)
    assert document["healthy"] is False and [c["name"] for c in document["checks"]] == ["facts", "memory", "address"]
    assert schema_errors(document, ("health",)) == []


@pytest.mark.slow
@pytest.mark.parametrize("minimum, status, said", [(1.0, 0, "memory ok: triad"), (1e12, 1, "memory bandwidth triad")])
def test_the_memory_kernel_is_built_on_the_node_and_judged_against_the_baseline(tmp_path, minimum, status, said):
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(BASELINE.format(arch=platform.machine(), median=minimum * 1.25, minimum=minimum))
    program = install(tmp_path, "--baseline", baseline, "--benchmarks", "always")
    settings = json.loads(program.with_suffix(".json").read_text())
    assert settings["memory"]["job"]["kernel"] == "memory" and settings["memory"]["minimum"] == minimum
    done = run_program(program, "--node", NODE, "--log", "none", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == status, done.stdout + done.stderr
    assert said in done.stdout


@pytest.mark.slow
def test_it_drains_its_node_for_a_problem_and_resumes_it_once_healthy(tmp_path, monkeypatch, site):
    slurm = fake_slurm(tmp_path, monkeypatch, ("cn-a12", "cn-a13"))
    program = install(tmp_path, "--expect", site, "--drain", "--resume-when-healthy", "--benchmarks", "never")
    done = run_program(program, "--node", "cn-a12", "--log", "none", "--dry-run")
    assert done.returncode == 1 and "would run: scontrol update NodeName=cn-a12 State=DRAIN" in done.stdout
    assert nodes_of(slurm)["cn-a12"]["state"] == "IDLE"

    done = run_program(program, "--node", "cn-a12", "--log", tmp_path / "log")
    assert done.returncode == 1, done.stderr
    node = nodes_of(slurm)["cn-a12"]
    assert node["state"] == "IDLE+DRAIN" and node["reason"].startswith("oddnode: cpu_threads=")
    assert "cn-a12: drained (oddnode: cpu_threads=" in (tmp_path / "log").read_text()

    slurm.write_text(json.dumps(nodes_of(slurm) | {"cn-a20": node}))  # the same node, outside the section
    done = run_program(program, "--node", "cn-a20", "--log", "none")
    assert done.returncode == 0 and "cn-a20: resumed" in done.stdout
    assert nodes_of(slurm)["cn-a20"]["state"] == "IDLE"


def test_without_slurm_it_cannot_drain_and_says_so(tmp_path, site):
    program = install(tmp_path, "--expect", site, "--drain", "--benchmarks", "never")
    only_python = tmp_path / "only-python"
    only_python.mkdir()
    (only_python / "python3").symlink_to(sys.executable)
    done = run_program(program, "--node", NODE, "--log", "none", env={"PATH": str(only_python)})
    assert done.returncode == 3 and "scontrol not found" in done.stderr


@pytest.mark.parametrize("text, said", [
    ("{not json", "not JSON"),
    ('{"format": "something else"}', "not an oddnode health settings file"),
    ('{"format": "oddnode-health 1", "expectations": [{"rules": [{"key": 3}]}]}', "expectations"),
    ('{"format": "oddnode-health 1", "memory": {"job": {}, "minimum": "fast"}}', "memory"),
    ('{"format": "oddnode-health 1", "expectations": [{"rules": [{"key": "smt", "conditions": {"min": "x"}}]}]}',
     "smt: min must be a number"),
    ('{"format": "oddnode-health 1", "expectations": [{"rules": [{"key": "k", "conditions": {"regex": "("}}]}]}',
     "does not compile"),
    ('{"format": "oddnode-health 1", "expectations": [{"rules": [{"key": "k", "conditions": {"near": 1}}]}]}',
     "unknown condition near"),
    ('{"format": "oddnode-health 1", "run": ["drain"]}', "run: a mapping"),
])
@pytest.mark.slow
def test_a_bad_settings_file_is_refused_by_its_name(tmp_path, site, text, said):
    program = install(tmp_path, "--expect", site)
    program.with_suffix(".json").write_text(text)
    done = run_program(program, "--node", NODE, "--log", "none")
    assert done.returncode == 2 and done.stderr.startswith(f"error: {program.with_suffix('.json')}: ")
    assert said in done.stderr and "Traceback" not in done.stderr


def test_install_needs_something_to_compare_with(tmp_path):
    result = invoke("health", "--install", tmp_path / "health")
    assert result.exit_code == 2 and not (tmp_path / "health").exists()


def test_install_makes_its_directory_but_never_a_missing_parent(tmp_path, site):
    """As every output directory: a parent that is missing (or a file) is a typo to say, not to make."""
    for parent in (tmp_path / "missing", tmp_path / "file"):
        (tmp_path / "file").write_text("not a directory\n")
        result = invoke("health", "--install", parent / "health", "--expect", site)
        assert result.exit_code == 2 and f"cannot write {parent / 'health'}" in result.text, result.output
        assert "Traceback" not in result.output and not (tmp_path / "missing").exists()


def test_a_relative_directory_is_installed_under_its_absolute_path(tmp_path, site, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("health", "--install", "health", "--expect", site)
    assert result.exit_code == 0 and f"HealthCheckProgram={tmp_path / 'health' / 'oddnode-health'}" in result.text


def test_the_program_runs_on_the_interpreter_alone(tmp_path, site):
    """-I: no site-packages, no environment, no current directory: the
    program brings every module it imports."""
    program = install(tmp_path, "--expect", site, "--benchmarks", "never")
    done = subprocess.run([sys.executable, "-I", str(program), "--node", NODE, "--log", "none"], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def oldest_python() -> str | None:
    """A Python 3.6 on this machine that runs, if any (pyenv's, a distribution's)."""
    for candidate in (shutil.which("python3.6"), *sorted(Path("/root/.pyenv/versions").glob("3.6*/bin/python3.6")),
                      *sorted(Path("/opt/python").glob("3.6*/bin/python3.6"))):
        if candidate and subprocess.run([str(candidate), "-c", "pass"], capture_output=True).returncode == 0:
            return str(candidate)
    return None


@pytest.mark.slow
@pytest.mark.skipif(oldest_python() is None, reason="no Python 3.6 on this machine (the syntax check covers it)")
def test_the_program_runs_on_python_3_6(tmp_path):
    """The oldest python3 of the clusters oddnode meets: facts, the memory
    kernel built by the node runner, and the JSON document."""
    baseline = tmp_path / "baseline.yaml"
    baseline.write_text(BASELINE.format(arch=platform.machine(), median=1.25, minimum=1.0))
    program = install(tmp_path, "--baseline", baseline, "--benchmarks", "always")
    done = subprocess.run([oldest_python(), "-I", str(program), "--node", NODE, "--log", str(tmp_path / "log"),
                           "--json"], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    checks = {check["name"]: check["status"] for check in json.loads(done.stdout)["checks"]}
    assert (checks["facts"], checks["memory"]) == ("ok", "ok") and checks["address"] in ("ok", "skipped"), checks
    assert "healthy in " in (tmp_path / "log").read_text()
