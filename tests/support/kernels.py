"""Building and running our kernels on this machine."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest


def openmp_problem(tmp: Path) -> str | None:
    """Why our kernels cannot be built here (the node runner builds with
    ``cc -fopenmp``), or None when they can."""
    if shutil.which("cc") is None:
        return "no 'cc' on PATH"
    source = tmp / "omp_check.c"
    source.write_text("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
    built = subprocess.run(["cc", "-fopenmp", "-o", str(tmp / "omp_check"), str(source)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return f"'cc -fopenmp' cannot build an OpenMP program: {built.stderr.strip()[:200]}"
    return None


# Seconds a test waits for one end before it kills it: far beyond a run.
RUN_LIMIT = 120


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


HAS_IPV6 = _ipv6_loopback()


def free_port() -> int:
    """A port free on 0.0.0.0 and, where there is IPv6, on [::]: the server
    listens on both."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as v4:
            v4.bind(("0.0.0.0", 0))
            port = v4.getsockname()[1]
            if not HAS_IPV6:
                return port
            try:
                with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as v6:
                    v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    v6.bind(("::", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """An environment whose build cache is private to this module's tests."""
    tmp = tmp_path_factory.mktemp("pingpong_kernel")
    if shutil.which("cc") is None:
        pytest.skip("the pingpong kernel needs a C compiler: no 'cc' on PATH")
    source = tmp / "check.c"
    source.write_text("#include <omp.h>\n#include <pthread.h>\n"
                      "int main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
    built = subprocess.run(["cc", "-fopenmp", "-o", str(tmp / "check"), str(source), "-lpthread"],
                           capture_output=True, text=True, check=False)
    if built.returncode != 0:
        pytest.skip(f"'cc -fopenmp ... -lpthread' cannot build a program: {built.stderr.strip()[:200]}")
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    return env


def with_interpreter(argv: list[str]) -> list[str]:
    """The same argv run by this interpreter: the runner is stdlib-only."""
    return [sys.executable] + argv[1:]


@contextmanager
def started(argv: list[str], env: dict[str, str]):
    """One end, running in its own process group; whatever happens, that
    group (the runner and the kernel under it) is gone afterwards."""
    process = subprocess.Popen(with_interpreter(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.communicate()


def finish(process: subprocess.Popen) -> str:
    stdout, stderr = process.communicate(timeout=RUN_LIMIT)
    assert process.returncode == 0, stderr  # the runner always exits 0 with its report
    return stdout


def run_alone(argv: list[str], env: dict[str, str]) -> str:
    """One end by itself; its runner's stdout."""
    with started(argv, env) as process:
        return finish(process)


def local_launcher(ranks: int) -> list[str]:
    """Every rank on this machine over Open MPI's TCP transport (no shared
    memory, as between nodes), more ranks than cores allowed: ranks that
    wait yield their CPU, else three polling ranks on two cores take
    milliseconds a call."""
    return ["mpirun", "-np", str(ranks), "--host", f"localhost:{ranks}", "--oversubscribe",
            "--mca", "btl", "self,tcp", "--mca", "mpi_yield_when_idle", "1"]


# The oldest Python the probe promises to run on, where this machine has it.
OLD_PYTHONS = [
    path
    for path in (shutil.which("python3.6"), "/root/.pyenv/versions/3.6.15/bin/python3.6")
    if path and os.access(path, os.X_OK) and subprocess.run([path, "-V"], capture_output=True).returncode == 0
]


# The batches our pair and set kernels want per size (oddnode_batches.h's
# MIN_BATCHES): a size timed in fewer ran out of its time.
MIN_BATCHES = 10


def assert_cuts_said(parsed) -> None:
    """Every size of a parsed pair or set kernel run has a batch at least;
    those with fewer than MIN_BATCHES, and only those, are marked cut and
    named by a warning of the kernel."""
    warnings = parsed.configuration.get("warnings", [])
    for m in parsed.measurements:
        batches, size = m.parameters["batches"], m.parameters["bytes"]
        assert batches >= 1, m
        cut = batches < MIN_BATCHES
        assert m.parameters.get("cut_by_time", False) is cut, m
        said = [w for w in warnings if f"size {size}: cut by its time" in w and f"after {batches} of" in w]
        assert bool(said) is cut, (m, warnings)
