"""oddnode's kernel runner: runs ON a node, builds a C kernel once, runs it,
and prints one JSON object.  It also runs installed tools (fio, hpcc) the
same way, in a private directory holding their input files.

Self-contained and stdlib-only, for Python >= 3.6 as found on older cluster
nodes (no walrus, no dataclasses, no subprocess text=/capture_output=).

The package sends this script through ``python_command`` and the job as the
last argument: a JSON spec, packed (zlib, then base64), so that nothing a user typed
ever becomes code or shell text.  Options may precede the job:

    --prepare       build the kernel (or find the tool) and stop: a
                    repeated benchmark builds before its timed runs
    --start-at=T    once built, wait until the wall clock reads T (seconds
                    since the epoch) before running, so that every node of
                    a repetition starts at the same moment

The spec:

    {"kernel": "memory", "source": C text, "cflags": [str], "defines": [str],
     "ldlibs": [str], "args": [str], "env": {name: value}, "timeout": seconds,
     "compiler": "cc" by default (mpicc for an MPI kernel),
     "launcher": [str] put before the kernel's path (mpirun -np 2 ...), none by default,
     "shared": true to build a shared library instead (see below)}

or, for an installed tool,

    {"tool": "hpcc", "version_args": [str] or null, "files": {name: text},
     "collect": [name], "args": [str], "env": {...}, "timeout": seconds,
     "parent": directory for the private one, or null for $TMPDIR}

or a schedule of such jobs, run one after the other, each held until its
own start (null: as soon as the one before it has ended), so that a node
takes part in several rounds of a measurement for one start of this runner:

    {"schedule": [{"start_at": T or null, "job": a kernel's or a tool's spec,
                   "source": i}], "sources": [C text]}

where a job's C source, which several jobs share, travels once: "source"
names its place in "sources" (the job then has none of its own).

Builds are cached under ``$XDG_CACHE_HOME/oddnode/kernels/<key[:16]>/``
(``~/.cache`` by default); the key is the sha256 of the source, the flags,
the compiler's version line and the CPU model, because ``-march=native``
makes a binary fit only the CPU it was built on.  A build goes to a
temporary name and is renamed into place, so two runs sharing a home
directory never see half a binary.

A spec with "shared": true builds a shared library, lib<kernel>.so, in the
same cache directory, with SHARED_FLAGS instead of BASE_FLAGS (it goes into
someone else's program: no -march=native, no OpenMP), and runs nothing; its
report has "library": the library's absolute path.

Output: {"runner_version": 1, "cache_key", "built", "compiler", "flags",
"cpu_model", "build_seconds", "returncode", "stdout", "stderr"}; for a tool
{"runner_version": 1, "tool", "tool_path", "tool_version", "cpu_model",
"returncode", "stdout", "stderr", "collected": {name: text or null}}
("error": "not installed" when it is not on PATH); or on a failure {"runner_version": 1, "error": what, "detail": why, ...} with as many
of those fields as were known -- never a traceback.  Every report that got
as far as running (or preparing) says when: "start": {"at": T or null,
"launched": the wall clock when the runner started, "arrived": when it was
ready to run}, and one that ran "finished": the wall clock when its run
ended; a prepared one has "prepared": true and no output.  A schedule's
report is {"runner_version": 1, "schedule": [each job's report, in order]}.
"""

import base64
import binascii
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

RUNNER_VERSION = 1
LAUNCHED = time.time()  # when this runner started, for the start timing
COMPILER = "cc"
# Flags every build gets: the node's own instruction set, and OpenMP.
BASE_FLAGS = ["-O3", "-march=native", "-fopenmp"]
# Flags of a shared library preloaded into another program: position
# independent, and only the instructions every CPU of the family has.
SHARED_FLAGS = ["-O2", "-fPIC", "-shared"]
# Seconds `cc --version` and a compile may take; a compile of one small file
# that takes longer than this is stuck (an NFS home that hangs, say).
VERSION_TIMEOUT = 10
BUILD_TIMEOUT = 300
# Seconds a kernel may run when the spec does not say.
DEFAULT_RUN_TIMEOUT = 600
# The furthest ahead a start time may lie, in seconds: a later one is a
# mistake (a clock far off), not a plan.
MAX_START_WAIT = 3600
# The most jobs one schedule holds: a bound on what a spec may ask, far
# above any batch of rounds.
MAX_SCHEDULE = 1000
# What srun gives each task of a job step.  The runner may be such a task
# (the slurm transport), but what it starts is not: an MPI program that
# finds these believes srun launched it as a rank and, without Slurm's PMI,
# stops ("direct launched using srun").  The job's own variables
# (SLURM_JOB_ID, SLURM_JOB_NODELIST...) stay, and the ones srun narrowed to
# the step are set back to the job's (JOB_VIEW): mpirun takes its hosts and
# slots from them, and would otherwise see one node of one slot.
# SLURM_LABELIO is the transport's --label, which srun hands its tasks: an
# srun the runner starts (the ranks of a set, mpirun's daemons) would take
# it as its own and prefix every line of the ranks' output with "0: ".
STEP_VARIABLES = ("SLURM_LABELIO", "SLURM_STEPID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NPROCS", "SLURM_NTASKS",
                  "SLURM_TASK_PID", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_GTIDS", "SLURM_CPU_BIND", "SLURM_CPU_BIND_LIST",
                  "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_VERBOSE", "SLURM_DISTRIBUTION")
STEP_PREFIXES = ("SLURM_STEP_", "SLURM_SRUN_COMM_", "PMI_", "PMIX_")
JOB_VIEW = {"SLURM_NODELIST": "SLURM_JOB_NODELIST", "SLURM_NNODES": "SLURM_JOB_NUM_NODES",
            "SLURM_TASKS_PER_NODE": "SLURM_JOB_CPUS_PER_NODE"}


# Each compiler's version line, asked once per start of the runner: the
# jobs of a schedule build with the same compilers.
_COMPILER_LINES = {}


def compiler_version(compiler):
    """The first line of `<compiler> --version`; raises OSError if it cannot run."""
    completed = subprocess.run(
        [compiler, "--version"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=VERSION_TIMEOUT,
    )
    lines = completed.stdout.strip().splitlines()
    return lines[0].strip() if lines else ""


def cpu_model(cpuinfo="/proc/cpuinfo"):
    """The CPU's model as /proc/cpuinfo names it, or the machine type."""
    try:
        with open(cpuinfo) as handle:
            text = handle.read()
    except OSError:
        return platform.machine()
    # x86 says "model name"; ARM says "CPU implementer"/"CPU part"; POWER says "cpu".
    wanted = ("model name", "cpu model", "cpu")
    parts = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key not in parts:
            parts[key] = value.strip()
    for key in wanted:
        if parts.get(key):
            return parts[key]
    if "cpu implementer" in parts or "cpu part" in parts:
        return "arm implementer {} part {}".format(parts.get("cpu implementer", "?"), parts.get("cpu part", "?"))
    return platform.machine()


def c_string(text):
    """Text as a C string literal, for -DODDNODE_CFLAGS."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cache_key(source, flags, compiler_line, model):
    """sha256 over everything that makes two builds differ; NUL-separated so
    that no two different inputs can run together into the same bytes."""
    digest = hashlib.sha256()
    for part in [source, "\0".join(flags), compiler_line, model]:
        digest.update(part.encode("utf-8"))
        digest.update(b"\0\0")
    return digest.hexdigest()


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "oddnode", "kernels")


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def build(compiler, source, flags, kernel, directory, ldlibs=(), output=None):
    """Compile into directory/kernel (or directory/output) unless it is there;
    returns (built, seconds, error_or_None, compiler_stderr).  ``ldlibs``
    (-lm, -ldl) go after the source, where linkers that drop unneeded
    libraries want them."""
    executable = os.path.join(directory, output or kernel)
    if os.access(executable, os.X_OK):
        return False, None, None, ""
    os.makedirs(directory, exist_ok=True)
    tag = "{}.{}".format(os.getpid(), base64.b32encode(os.urandom(5)).decode("ascii").lower())
    fd, source_tmp = tempfile.mkstemp(prefix=".{}.{}.".format(kernel, tag), suffix=".c", dir=directory)
    exe_tmp = os.path.join(directory, ".{}.{}.tmp".format(kernel, tag))
    started = time.monotonic()
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(source)
        command = [compiler] + flags + ["-o", exe_tmp, source_tmp] + list(ldlibs)
        try:
            completed = subprocess.run(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                universal_newlines=True,
                timeout=BUILD_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            return False, time.monotonic() - started, "compile timed out after {} s".format(BUILD_TIMEOUT), ""
        if completed.returncode != 0 or not os.path.exists(exe_tmp):
            return False, time.monotonic() - started, "compile failed", completed.stderr + completed.stdout
        # rename() replaces atomically: a concurrent run sees either no binary
        # or a whole one, and two concurrent builds of the same key are alike.
        os.chmod(source_tmp, 0o644)  # mkstemp made it private; it is only a record
        os.rename(source_tmp, os.path.join(directory, kernel + ".c"))
        os.rename(exe_tmp, executable)  # the linker made it executable, a shared library too
        return True, time.monotonic() - started, None, completed.stderr
    finally:
        _remove(source_tmp)
        _remove(exe_tmp)


def wait_for_start(report, start_at, prepare):
    """Record when the runner is ready; unless preparing, sleep until
    ``start_at`` (None: start now).  Returns False when only preparing."""
    report["start"] = {"at": start_at, "launched": LAUNCHED, "arrived": time.time()}
    if prepare:
        report["prepared"] = True
        return False
    if start_at is not None:
        left = start_at - time.time()
        while left > 0:
            time.sleep(left)
            left = start_at - time.time()
    return True


def run(spec, start_at=None, prepare=False):
    """Build if needed and run; returns the report as a dict."""
    report = {"runner_version": RUNNER_VERSION}
    kernel = spec["kernel"]
    if not kernel or "/" in kernel or kernel.startswith("."):
        report.update(error="bad spec", detail="kernel name {!r} is not a plain file name".format(kernel))
        return report
    compiler = spec.get("compiler") or COMPILER
    if not _plain_name(compiler):
        report.update(error="bad spec", detail="compiler {!r} is not a plain command name".format(compiler))
        return report
    try:
        compiler_line = _COMPILER_LINES.get(compiler) or compiler_version(compiler)
        _COMPILER_LINES[compiler] = compiler_line
    except (OSError, subprocess.SubprocessError) as problem:
        report.update(error="no compiler", detail="{} --version: {}".format(compiler, problem))
        return report
    extra = list(spec.get("cflags", [])) + ["-D" + define for define in spec.get("defines", [])]
    ldlibs = [str(lib) for lib in spec.get("ldlibs", [])]
    shared = bool(spec.get("shared"))
    base = SHARED_FLAGS if shared else BASE_FLAGS
    described = base + extra + ldlibs
    flags = base + extra + ["-DODDNODE_CFLAGS=" + c_string(" ".join(described))]
    model = cpu_model()
    key = cache_key(spec["source"], described, compiler_line, model)
    report.update(cache_key=key, compiler=compiler_line, flags=described, cpu_model=model)

    directory = os.path.join(cache_root(), key[:16])
    output = "lib{}.so".format(kernel) if shared else None
    try:
        built, seconds, error, compiler_stderr = build(compiler, spec["source"], flags, kernel, directory, ldlibs,
                                                       output)
    except OSError as problem:
        report.update(error="build failed", detail="{}: {}".format(directory, problem))
        return report
    report.update(built=built, build_seconds=seconds)
    if error:
        report.update(error=error, detail=compiler_stderr, compiler_stderr=compiler_stderr)
        return report
    if shared:
        # A library is built, never run: the report says where it is.
        report.update(library=os.path.abspath(os.path.join(directory, output)))
        wait_for_start(report, None, True)
        return report
    if not wait_for_start(report, start_at, prepare):
        return report

    env = process_environment(spec.get("env", {}))
    timeout = spec.get("timeout") or DEFAULT_RUN_TIMEOUT
    try:
        completed = subprocess.run(
            [str(a) for a in spec.get("launcher", [])] + [os.path.join(directory, kernel)]
            + [str(a) for a in spec.get("args", [])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        report.update(
            error="run timed out",
            detail="{} did not finish in {} s".format(kernel, timeout),
            returncode=None,
            stdout=_text(expired.stdout),
            stderr=_text(expired.stderr),
            finished=time.time(),
        )
        return report
    except OSError as problem:
        report.update(error="run failed", detail=str(problem))
        return report
    report.update(returncode=completed.returncode, stdout=completed.stdout, stderr=completed.stderr,
                  finished=time.time())
    return report


def process_environment(extra):
    """The environment of what the runner starts: its own, less a job
    step's variables and with the job's view (STEP_VARIABLES), plus the
    spec's ``extra``."""
    env = {name: value for name, value in os.environ.items()
           if name not in STEP_VARIABLES and not name.startswith(STEP_PREFIXES)}
    if "SLURM_STEP_ID" in os.environ:
        env.update({name: env[job] for name, job in JOB_VIEW.items() if job in env})
    env.update({str(k): str(v) for k, v in extra.items()})
    return env


def _plain_name(name):
    return bool(name) and "/" not in name and not name.startswith(".")


def _run_killable(argv, cwd, env, timeout):
    """Run argv in its own session; on timeout kill the whole session (mpirun
    and its ranks, not just the first process).  Returns
    (returncode or None on timeout, stdout, stderr)."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        return process.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        _kill_session(process)
        stdout, stderr = process.communicate()
        return None, stdout, stderr
    except BaseException:  # Stopped: the session goes with the runner
        _kill_session(process)
        process.wait()
        raise


def _kill_session(process):
    """SIGKILL the process group a start_new_session child leads (its leader
    is not reaped yet, so the id still names it)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass


class Stopped(BaseException):
    """The runner was told to stop (SIGTERM, SIGHUP, SIGINT): what it
    started in a session of its own is killed, and it exits 128 + signal.
    A BaseException, so that no report-making ``except Exception`` keeps it."""

    def __init__(self, signum):
        BaseException.__init__(self, signum)
        self.signum = signum


# The signals that stop the runner: coreutils timeout (at the timeout, or
# when oddnode's ssh connection closed) and slurmstepd send SIGTERM; a lost
# terminal SIGHUP; Ctrl-C on a local run SIGINT.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _stop(signum, frame):
    raise Stopped(signum)


def run_tool(spec, start_at=None, prepare=False):
    """Run an installed tool in a fresh private directory that holds the
    spec's input files; report its output and the files named in "collect",
    then remove the directory (and whatever the tool wrote there)."""
    tool = spec["tool"]
    report = {"runner_version": RUNNER_VERSION, "tool": tool, "cpu_model": cpu_model()}
    if not _plain_name(tool):
        report.update(error="bad spec", detail="tool name {!r} is not a plain command name".format(tool))
        return report
    path = shutil.which(tool)
    if path is None:
        report.update(error="not installed", detail="{} is not on PATH".format(tool))
        return report
    report["tool_path"] = path
    version_args = spec.get("version_args")
    report["tool_version"] = None
    if version_args:
        try:
            code, out, err = _run_killable([path] + list(version_args), None, None, VERSION_TIMEOUT)
            lines = (out or err or "").strip().splitlines()
            report["tool_version"] = lines[0].strip() if lines else None
        except OSError:
            pass
    files = spec.get("files", {})
    wanted = list(spec.get("collect", []))
    for name in list(files) + wanted:
        if not _plain_name(name):
            report.update(error="bad spec", detail="file name {!r} is not a plain file name".format(name))
            return report
    env = process_environment(spec.get("env", {}))
    try:
        workdir = tempfile.mkdtemp(prefix="oddnode-{}-".format(tool), dir=spec.get("parent") or None)
    except OSError as problem:
        report.update(error="no work directory", detail=str(problem))
        return report
    try:
        for name, text in files.items():
            with open(os.path.join(workdir, name), "w") as handle:
                handle.write(text)
        if not wait_for_start(report, start_at, prepare):
            return report
        timeout = spec.get("timeout") or DEFAULT_RUN_TIMEOUT
        try:
            code, out, err = _run_killable([path] + [str(a) for a in spec.get("args", [])], workdir, env, timeout)
        except OSError as problem:
            report.update(error="run failed", detail=str(problem))
            return report
        collected = {}
        for name in wanted:
            try:
                with open(os.path.join(workdir, name), errors="replace") as handle:
                    collected[name] = handle.read()
            except OSError:
                collected[name] = None
        report.update(returncode=code, stdout=out, stderr=err, collected=collected, finished=time.time())
        if code is None:
            report.update(error="run timed out", detail="{} did not finish in {} s".format(tool, timeout))
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _text(data):
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data


def checked_start(start_at):
    """A start time as a number of epoch seconds, refused when it lies
    more than MAX_START_WAIT ahead (or is not a number)."""
    start_at = float(start_at)
    if not start_at - time.time() <= MAX_START_WAIT:
        raise ValueError("start time {} is more than {} s ahead".format(start_at, MAX_START_WAIT))
    return start_at


def parse_options(options):
    """(start_at, prepare) from the options before the job."""
    start_at, prepare = None, False
    for option in options:
        if option == "--prepare":
            prepare = True
        elif option.startswith("--start-at="):
            start_at = checked_start(option[len("--start-at="):])
        else:
            raise ValueError("unknown option {!r}".format(option))
    return start_at, prepare


def run_job(spec, start_at=None, prepare=False):
    """One job's report: a kernel's or an installed tool's run."""
    if not isinstance(spec, dict) or "schedule" in spec:
        raise ValueError("a job is one kernel's or tool's spec")
    return (run_tool if "tool" in spec else run)(spec, start_at, prepare)


def run_schedule(spec):
    """Each job of a schedule in turn, held until its own start; the report
    of each, in order.  A job that fails does not stop the ones after it."""
    jobs, sources = spec["schedule"], spec.get("sources", [])
    if not isinstance(jobs, list) or not 0 < len(jobs) <= MAX_SCHEDULE:
        raise ValueError("a schedule is a list of 1 to {} jobs".format(MAX_SCHEDULE))
    if not isinstance(sources, list) or not all(isinstance(source, str) for source in sources):
        raise ValueError("a schedule's sources are a list of texts")
    for item in jobs:
        if not isinstance(item, dict) or not isinstance(item.get("job"), dict):
            raise ValueError("a schedule's item is {\"start_at\": T or null, \"job\": spec}")
        if item.get("start_at") is not None:
            checked_start(item["start_at"])
        source = item.get("source")
        if source is not None and not (isinstance(source, int) and 0 <= source < len(sources)):
            raise ValueError("a schedule's item names source {!r} of {}".format(source, len(sources)))
    reports = []
    for item in jobs:
        start_at = None if item.get("start_at") is None else float(item["start_at"])
        job = dict(item["job"])
        if item.get("source") is not None:
            job["source"] = sources[item["source"]]
        reports.append(report_of(lambda: run_job(job, start_at)))
    return {"runner_version": RUNNER_VERSION, "schedule": reports}


def report_of(make_report):
    """The report ``make_report()`` makes, or one that says why it made none:
    the output stays one JSON object, whatever broke."""
    try:
        return make_report()
    except (ValueError, KeyError, TypeError) as problem:
        return {"runner_version": RUNNER_VERSION, "error": "bad spec", "detail": str(problem)}
    except Exception as problem:
        return {"runner_version": RUNNER_VERSION, "error": "runner failed", "detail": repr(problem)}


def unpack(word):
    """The text of a packed argument: base64 of zlib-compressed UTF-8
    (oddnode.reach.base.pack_text)."""
    try:
        return zlib.decompress(base64.b64decode(word)).decode("utf-8")
    except (binascii.Error, zlib.error, UnicodeDecodeError) as problem:
        raise ValueError("the spec is not packed JSON: {}".format(problem))


def run_argv(argv):
    """The report of the job (or the schedule) argv holds last, run with
    the options before it."""
    if len(argv) < 2:
        raise ValueError("expected the packed JSON spec as the last argument")
    start_at, prepare = parse_options(argv[1:-1])
    spec = json.loads(unpack(argv[-1]))
    if isinstance(spec, dict) and "schedule" in spec:
        if start_at is not None or prepare:
            raise ValueError("a schedule's jobs carry their own starts and are not prepared")
        return run_schedule(spec)
    return run_job(spec, start_at, prepare)


def main(argv):
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
    try:
        return _main(argv)
    except Stopped as stopped:
        return 128 + stopped.signum


def _main(argv):
    report = report_of(lambda: run_argv(argv))
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
