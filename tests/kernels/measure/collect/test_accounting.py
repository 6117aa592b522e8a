"""Process accounting for real on this machine (root): the collector turns
the kernel's accounting on for a process tree and counts it exactly, reads
a site's accounting without disturbing it, refuses a file that an
enclosing PID namespace writes, turns off what a killed run left on, and
samples /proc where asked.

Every scenario runs inside ``unshare --pid --fork --mount-proc``: the
kernel keeps one accounting file per PID namespace, so accounting turned
on there records that namespace's processes only, never the rest of this
machine.  The record layout is checked against the kernel's header with
the C compiler."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oddnode.measure.collect.accounting import collector_argv, parse_collector_output
from oddnode.onnode.pacct import RECORD_SIZE
from support.kernels import OLD_PYTHONS

HEADER = Path("/usr/include/linux/acct.h")
needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="turning accounting on needs root (CAP_SYS_PACCT) and unshare")

# The scenarios run by one Python process that is PID 1 of a fresh PID
# namespace: it starts the collector, runs a known process tree beside it,
# and prints what it saw as JSON.
DRIVER = r'''
import ctypes, json, os, signal, subprocess, sys, time
collector = json.loads(sys.argv[1])
scenario = sys.argv[2]
tmp = sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
libc.acct.argtypes = [ctypes.c_char_p]

def tree():
    """30 basename, 20 sed, 5 sh: started once the collector's interval has begun."""
    time.sleep(0.7)
    for _ in range(30):
        subprocess.run(["basename", "/x/y"], stdout=subprocess.DEVNULL)
    for _ in range(20):
        subprocess.run(["sed", "-n", "1p", "/etc/hostname"], stdout=subprocess.DEVNULL)
    for _ in range(5):
        subprocess.run(["sh", "-c", ":"])

def run(argv, background=None):
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                             env=dict(os.environ, TMPDIR=tmp))
    if background:
        background()
    out, err = child.communicate(timeout=60)
    return {"rc": child.returncode, "stdout": out, "stderr": err}

def acct_on(path):
    open(path, "ab").close()
    assert libc.acct(path.encode()) == 0, ctypes.get_errno()

def grows(path):
    size = os.path.getsize(path)
    subprocess.run(["true"])
    return os.path.getsize(path) > size

result = {}
if scenario == "own":
    result["first"] = run(collector, tree)
    result["second"] = run(collector)  # accounting was turned off: a second run starts clean
    result["left"] = sorted(os.listdir(tmp))
elif scenario == "site":
    site = os.path.join(tmp, "site.pacct")
    acct_on(site)
    result["run"] = run(collector + ["--site-file=" + site], tree)
    result["still_on"] = grows(site)
    libc.acct(None)
elif scenario == "enclosing":
    outer = os.path.join(tmp, "outer.pacct")
    acct_on(outer)
    inner = ["unshare", "--pid", "--fork"]
    result["given"] = run(inner + collector + ["--pacct=" + outer])
    result["auto"] = run(inner + collector + ["--site-file=" + outer])
    result["still_on"] = grows(outer)
    libc.acct(None)
elif scenario == "leftover":
    directory = os.path.join(tmp, "oddnode-acct-999999-x")
    os.mkdir(directory)
    acct_on(os.path.join(directory, "pacct"))  # as if a collector with PID 999999 had been killed
    result["run"] = run(collector)
    result["left"] = sorted(os.listdir(tmp))
elif scenario == "signal":
    child = subprocess.Popen(collector, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                             env=dict(os.environ, TMPDIR=tmp))
    time.sleep(1.0)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    result["run"] = {"rc": child.returncode, "stdout": out, "stderr": err}
    result["left"] = sorted(os.listdir(tmp))
elif scenario == "proc":
    def slow():
        time.sleep(0.5)
        for _ in range(3):
            subprocess.run(["sleep", "0.3"])
    result["run"] = run(collector, slow)
print(json.dumps(result))
'''


def scenario(tmp_path: Path, name: str, *arguments: str, seconds: float = 3.0, interpreter: str = sys.executable) -> dict:
    """Run one scenario of DRIVER in a fresh PID namespace, the collector
    run by ``interpreter``; what it printed."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    argv = collector_argv(seconds, interpreter=interpreter) + list(arguments)
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(driver),
                           json.dumps(argv), name, str(scratch)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(run: dict):
    assert run["rc"] == 0, run["stderr"]
    return parse_collector_output("node", run["stdout"])


def test_the_layout_is_what_the_compiler_makes_of_the_kernels_header(tmp_path):
    if shutil.which("cc") is None or not HEADER.exists():
        pytest.skip("needs cc and /usr/include/linux/acct.h")
    fields = ("ac_flag", "ac_version", "ac_tty", "ac_exitcode", "ac_uid", "ac_gid", "ac_pid", "ac_ppid", "ac_btime",
              "ac_etime", "ac_utime", "ac_stime", "ac_mem", "ac_io", "ac_rw", "ac_minflt", "ac_majflt", "ac_swaps",
              "ac_comm")
    source = tmp_path / "layout.c"
    source.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <linux/acct.h>\nint main(void){\n"
                      'printf("size %zu\\n", sizeof(struct acct_v3));\n'
                      + "".join(f'printf("{f} %zu\\n", offsetof(struct acct_v3, {f}));\n' for f in fields)
                      + "return 0;}\n")
    subprocess.run(["cc", "-o", str(tmp_path / "layout"), str(source)], check=True)
    printed = dict(line.split() for line in subprocess.run([str(tmp_path / "layout")], capture_output=True,
                                                           text=True, check=True).stdout.splitlines())
    from support.outputs import OFFSETS

    assert int(printed.pop("size")) == RECORD_SIZE
    assert {name: int(offset) for name, offset in printed.items()} == OFFSETS


@pytest.mark.timing
@needs_root
def test_our_own_accounting_counts_a_process_tree_exactly_and_only_it(tmp_path):
    result = scenario(tmp_path, "own")
    first = report(result["first"])
    assert first.method == "acct" and first.source == "acct(2)" and not first.notes
    counts = {name: count.executions for name, count in first.commands.items()}
    assert counts["basename"] == 30 and counts["sed"] == 20 and counts["sh"] == 5
    # The namespace holds the driver and its children only: nothing of this machine's other processes.
    assert set(counts) <= {"basename", "sed", "sh", "python3", "python3*", "python", "python*"}
    assert first.commands["basename"].bursts >= 1 and 2.5 <= first.seconds <= 4.0
    second = report(result["second"])
    assert second.method == "acct" and "basename" not in second.commands and not second.notes
    assert result["left"] == []  # the private file and its directory are gone


# Timing too, as every scenario that counts the tree: its 55 processes must
# end inside the collector's 3-second interval, which a loaded machine (the
# testbed tier beside) can stretch them beyond.
@pytest.mark.timing
@needs_root
@pytest.mark.skipif(not OLD_PYTHONS, reason="no Python 3.6 on this machine")
def test_the_collector_runs_on_python_3_6(tmp_path):
    run = report(scenario(tmp_path, "own", interpreter=OLD_PYTHONS[0])["first"])
    assert run.method == "acct" and run.commands["basename"].executions == 30


@pytest.mark.timing
@needs_root
def test_a_sites_accounting_is_read_and_left_on(tmp_path):
    result = scenario(tmp_path, "site")
    run = report(result["run"])
    assert run.method == "pacct" and run.source.endswith("site.pacct")
    counts = {name: count.executions for name, count in run.commands.items()}
    assert counts["basename"] == 30 and counts["sed"] == 20 and counts["sh"] == 5
    assert not any(name.startswith("oddmark-") for name in counts)
    assert result["still_on"]


@needs_root
def test_a_file_an_enclosing_namespace_writes_is_refused_and_left_alone(tmp_path):
    result = scenario(tmp_path, "enclosing")
    given = result["given"]
    assert given["rc"] == 2
    assert "records the processes of an enclosing PID namespace" in given["stderr"]
    assert "leave out --pacct" in given["stderr"]
    auto = report(result["auto"])
    assert auto.method == "acct"  # its own namespace's accounting instead
    assert any("enclosing PID namespace" in note and "not used" in note for note in auto.notes)
    assert result["still_on"]  # the outer accounting goes on


@needs_root
def test_accounting_a_killed_run_left_on_is_turned_off(tmp_path):
    result = scenario(tmp_path, "leftover", seconds=1.0)
    run = report(result["run"])
    assert run.method == "acct"
    assert any("left on by a collector that was killed, was turned off" in note for note in run.notes)
    assert result["left"] == []


@needs_root
def test_a_signal_ends_the_interval_and_turns_accounting_off(tmp_path):
    result = scenario(tmp_path, "signal", seconds=30.0)
    assert result["run"]["rc"] == 3
    assert "stopped by signal 15 before the interval ended" in result["run"]["stderr"]
    assert result["left"] == []


@pytest.mark.timing
@needs_root
def test_proc_sampling_sees_processes_that_live_long_enough(tmp_path):
    result = scenario(tmp_path, "proc", "--method=proc", seconds=2.5)
    run = report(result["run"])
    assert run.method == "proc" and any("missed" in note for note in run.notes)
    assert run.commands["sleep"].executions == 3

