"""The node runner's shared-library mode: lib<name>.so built with
position-independent flags (none of the node-specific ones) into the
build cache, never run, its absolute path in the report, cached like any
kernel's build."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys

import pytest

from oddnode.reach.jobs import encode_job, runner_source
from oddnode.reach.scripts import python_command

LIBRARY_SOURCE = "int oddnode_answer(void) { return 42; }\n"


def run_runner(spec: dict, env: dict[str, str], *options: str) -> dict:
    argv = python_command(runner_source(), sys.executable) + list(options) + [encode_job(spec)]
    completed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=True)
    return json.loads(completed.stdout)


@pytest.fixture
def cache_env(tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("no cc on PATH")
    return dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))


def spec(**extra) -> dict:
    return {"kernel": "answer", "source": LIBRARY_SOURCE, "args": ["never", "run"], "shared": True, **extra}


def test_a_shared_library_is_built_into_the_cache_and_not_run(cache_env, tmp_path):
    report = run_runner(spec(), cache_env)
    assert "error" not in report, report
    library = report["library"]
    assert os.path.isabs(library) and os.path.basename(library) == "libanswer.so"
    assert os.path.dirname(library) == os.path.join(str(tmp_path / "cache"), "oddnode", "kernels",
                                                    report["cache_key"][:16])
    assert report["flags"] == ["-O2", "-fPIC", "-shared"]
    assert report["built"] is True and report["prepared"] is True
    assert "returncode" not in report and "stdout" not in report
    assert ctypes.CDLL(library).oddnode_answer() == 42
    # Cached: a second build (with the prepare option too) finds it.
    again = run_runner(spec(), cache_env, "--prepare")
    assert again["built"] is False and again["library"] == library


@pytest.mark.slow
def test_a_shared_build_keys_apart_from_an_executable_of_the_same_source(cache_env):
    shared = run_runner(spec(), cache_env)
    program = run_runner({"kernel": "answer", "source": LIBRARY_SOURCE + "int main(void) { return 0; }\n"},
                         cache_env, "--prepare")
    assert shared["cache_key"] != program["cache_key"]
    assert "-march=native" in program["flags"] and "-march=native" not in shared["flags"]


def test_a_shared_build_that_fails_reports_the_compiler(cache_env):
    report = run_runner(spec(source="int broken(void) { return }\n"), cache_env)
    assert report["error"] == "compile failed" and "library" not in report
    assert "error" in report["detail"]
