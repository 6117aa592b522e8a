"""Where running processes may run, where they do run, and where their
memory lives, sampled on the node.

For each process: its cpuset (``/proc/PID/cpuset`` and the CPUs that
cgroup grants), ``Cpus_allowed_list`` and ``Mems_allowed_list``
(``/proc/PID/status``), the pages of every NUMA node (``numa_maps``); for
each of its threads, the same affinity and, every PERIOD seconds over the
interval, the CPU it is on (field 39, ``processor``, of its stat) and its
CPU time (utime + stime), which says whether it is busy.

Standard library only, for Python >= 3.6: it travels to the nodes with
the topology reader (``oddnode.measure.collect.affinity``).
"""

import os
import re
import time

from oddnode.onnode.node_probe import read_text, run_tool, stat_fields

# Seconds between two samples of every thread's CPU: 20 ms, a few
# scheduler ticks, so that a thread that moves every few tens of
# milliseconds is seen moving, while reading a few hundred stat files
# costs well under a millisecond a sample.
PERIOD = 0.020
# USER_HZ on every Linux architecture, when sysconf cannot say.
DEFAULT_TICKS = 100
# /proc/PID/comm holds at most 15 characters (TASK_COMM_LEN 16 with the NUL).
COMM_LENGTH = 15
# The cgroup mounts where a cpuset's CPUs are read: the unified hierarchy
# (cgroup v2: cpuset.cpus.effective) and v1's cpuset controller.
CGROUP_ROOT = "/sys/fs/cgroup"
# numa_maps fields: N<node>=<pages> and the mapping's page size.
_NODE_PAGES = re.compile(r"^N(\d+)=(\d+)$")


class SelectionError(ValueError):
    """Processes that cannot be selected as asked (a bad PID, no scontrol)."""


def ticks_per_second():
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return DEFAULT_TICKS


def status_fields(text):
    """{name: value} of a /proc/PID/status text."""
    fields = {}
    for line in (text or "").splitlines():
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip()] = value.strip()
    return fields


def parse_numa_maps(text):
    """({NUMA node: kB}, kB interleaved) of a /proc/PID/numa_maps text.

    Each line is a mapping: its address, its memory policy, then fields
    such as ``anon=12 N0=8 N1=4 kernelpagesize_kB=4``.  Pages are counted
    in kB (huge pages are 2048 or 1048576 kB each); the pages of mappings
    whose policy interleaves them over nodes on purpose are counted apart,
    as they say nothing of where the process chose to put its memory."""
    placed = {}
    interleaved = 0
    for line in (text or "").splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        page_kb = 4
        counts = []
        for word in words[2:]:
            match = _NODE_PAGES.match(word)
            if match:
                counts.append((int(match.group(1)), int(match.group(2))))
            elif word.startswith("kernelpagesize_kB="):
                page_kb = int(word.split("=", 1)[1])
        if words[1].startswith("interleave") or words[1].startswith("weighted interleave"):
            interleaved += sum(pages for _, pages in counts) * page_kb
            continue
        for node, pages in counts:
            placed[node] = placed.get(node, 0) + pages * page_kb
    return placed, interleaved


def cpuset_cpus(cpuset, cgroup_root=CGROUP_ROOT):
    """The CPUs (list text) a cpuset path grants, from cgroup v2 or v1, or None."""
    if not cpuset:
        return None
    relative = cpuset.lstrip("/")
    for path in (os.path.join(cgroup_root, relative, "cpuset.cpus.effective"),
                 os.path.join(cgroup_root, "unified", relative, "cpuset.cpus.effective"),
                 os.path.join(cgroup_root, "cpuset", relative, "cpuset.effective_cpus"),
                 os.path.join(cgroup_root, "cpuset", relative, "cpuset.cpus")):
        text = read_text(path)
        if text:
            return text
    return None


def parse_listpids(text, job):
    """The PIDs of ``scontrol listpids JOBID``: a header line, then one
    process a line with its PID first (the columns after it vary between
    Slurm versions)."""
    pids = []
    for line in (text or "").splitlines():
        words = line.split()
        if not words or words[0] == "PID":
            continue
        if not words[0].isdigit():
            raise SelectionError("scontrol listpids %s: unexpected line %r" % (job, line.strip()[:80]))
        pids.append(int(words[0]))
    return sorted(set(pids))


def _comm(proc, pid):
    parsed = stat_fields(read_text(os.path.join(proc, str(pid), "stat")) or "")
    return parsed[0] if parsed else None


def select_pids(pids=None, command=None, slurm_job=None, proc="/proc", notes=None):
    """The PIDs of the processes asked for: given, by command name (comm),
    or a Slurm job's processes on this node; never this sampler itself."""
    notes = notes if notes is not None else []
    own = set([os.getpid(), os.getppid()])
    if pids:
        chosen = []
        for pid in pids:
            if os.path.isdir(os.path.join(proc, str(pid))):
                chosen.append(pid)
            else:
                notes.append("pid %d: no such process" % pid)
        return chosen
    if command:
        name = command[:COMM_LENGTH]
        chosen = [int(entry) for entry in os.listdir(proc)
                  if entry.isdigit() and int(entry) not in own and _comm(proc, entry) == name]
        if not chosen:
            notes.append("no process named %s" % command)
        return sorted(chosen)
    if slurm_job:
        notes_before = len(notes)
        text = run_tool(["scontrol", "listpids", str(slurm_job)], notes)
        if text is None:
            if len(notes) == notes_before:
                notes.append("scontrol not found: the processes of job %s cannot be listed" % slurm_job)
            return []
        chosen = [pid for pid in parse_listpids(text, slurm_job) if pid not in own]
        if not chosen:
            notes.append("job %s has no processes on this node" % slurm_job)
        return chosen
    return []


def cpu_times(proc="/proc"):
    """{cpu: (busy ticks, all ticks)} from /proc/stat's cpuN lines (idle and
    iowait are not busy)."""
    times = {}
    for line in (read_text(os.path.join(proc, "stat")) or "").splitlines():
        words = line.split()
        if not words or not words[0].startswith("cpu") or words[0] == "cpu":
            continue
        try:
            cpu = int(words[0][3:])
            values = [int(word) for word in words[1:]]
        except ValueError:
            continue
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        total = sum(values[:8])
        times[cpu] = (total - idle, total)
    return times


def _thread_state(proc, pid, tid):
    """(state, CPU, CPU ticks) of one thread, or None when it has ended."""
    parsed = stat_fields(read_text(os.path.join(proc, str(pid), "task", str(tid), "stat")) or "")
    if parsed is None:
        return None
    _, fields = parsed
    try:
        # proc(5): field 3 state, 14 + 15 utime + stime, 39 processor.
        return fields[0], int(fields[36]), int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


def _tids(proc, pid):
    try:
        return sorted(int(entry) for entry in os.listdir(os.path.join(proc, str(pid), "task")) if entry.isdigit())
    except (OSError, IOError):
        return []


class _Thread(object):
    """What the samples saw of one thread."""

    __slots__ = ("first_ticks", "ticks", "runs", "last_cpu")

    def __init__(self, ticks, cpu):
        self.first_ticks = ticks
        self.ticks = ticks
        self.runs = []  # [[cpu, samples in a row], ...] of the samples it ran in
        self.last_cpu = cpu

    def see(self, state, cpu, ticks):
        # Counted when it was running or runnable, or used CPU time since
        # the last sample: the samples of a sleeping thread show only the
        # CPU it last left, which says nothing of where it runs.
        if state == "R" or ticks > self.ticks:
            if self.runs and self.runs[-1][0] == cpu:
                self.runs[-1][1] += 1
            else:
                self.runs.append([cpu, 1])
        self.ticks = ticks
        self.last_cpu = cpu


def _affinity(proc, path):
    status = status_fields(read_text(os.path.join(proc, path, "status")))
    return {
        "cpuset": read_text(os.path.join(proc, path, "cpuset")),
        "cpus_allowed": status.get("Cpus_allowed_list"),
        "mems_allowed": status.get("Mems_allowed_list"),
    }


def sample(pids, seconds, proc="/proc", period=PERIOD, cgroup_root=CGROUP_ROOT):
    """Sample the processes ``pids`` for ``seconds``: (processes, cpu_busy,
    window, samples), each process a dict (see the module), cpu_busy the
    busy fraction of every CPU of the node over the window (/proc/stat)."""
    threads = {}
    start_times = cpu_times(proc)
    started = time.monotonic()
    taken = 0
    while True:
        for pid in pids:
            for tid in _tids(proc, pid):
                state = _thread_state(proc, pid, tid)
                if state is None:
                    continue
                seen = threads.get((pid, tid))
                if seen is None:
                    threads[(pid, tid)] = seen = _Thread(state[2], state[1])
                seen.see(*state)
        taken += 1
        elapsed = time.monotonic() - started
        if elapsed >= seconds:
            break
        time.sleep(max(0.0, min(period, seconds - elapsed)))
    window = time.monotonic() - started
    end_times = cpu_times(proc)
    cpu_busy = {}
    for cpu, (busy, total) in end_times.items():
        before = start_times.get(cpu)
        if before is not None and total > before[1]:
            cpu_busy[cpu] = round(float(busy - before[0]) / (total - before[1]), 4)
    hertz = float(ticks_per_second())
    processes = []
    for pid in pids:
        process = _affinity(proc, str(pid))
        parsed = stat_fields(read_text(os.path.join(proc, str(pid), "stat")) or "")
        comm = parsed[0] if parsed else None
        placed, interleaved = parse_numa_maps(read_text(os.path.join(proc, str(pid), "numa_maps")))
        process.update({
            "pid": pid,
            "comm": comm,
            "ended": parsed is None or parsed[1][:1] == ["Z"],  # gone, or a zombie not yet reaped
            "cpuset_cpus": cpuset_cpus(process["cpuset"], cgroup_root),
            "memory_kb": dict((str(node), kb) for node, kb in sorted(placed.items())),
            "interleaved_kb": interleaved,
            "threads": [],
        })
        for (owner, tid), seen in sorted(threads.items()):
            if owner != pid:
                continue
            thread = _affinity(proc, os.path.join(str(pid), "task", str(tid)))
            thread.update({
                "tid": tid,
                "comm": _comm(os.path.join(proc, str(pid), "task"), tid),
                "cpu_seconds": round((seen.ticks - seen.first_ticks) / hertz, 3),
                "runs": seen.runs,
                "last_cpu": seen.last_cpu,
            })
            process["threads"].append(thread)
        processes.append(process)
    return processes, cpu_busy, window, taken
