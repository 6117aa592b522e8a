"""Processes started over an interval, seen by sampling /proc fast: the
fallback where kernel accounting cannot be had (not root, a kernel without
CONFIG_BSD_PROCESS_ACCT, EPERM in a container).

Standard library only, for Python >= 3.6 (it travels to the nodes with the
collector).  Every PERIOD seconds the sampler lists /proc and reads the
stat of each process it has not seen: its command and start time.  A
process that starts and ends between two samples is never seen, so counts
are lower bounds and the shortest commands (a ``basename``, a ``sed``: a
millisecond or two) are missed most; the result says so.
"""

import os
import time

from oddnode.onnode.node_probe import parse_stat
from oddnode.onnode.pacct import BURST_SECONDS, UNKNOWN_PARENT, top_parents

# Seconds between two listings of /proc: 10 ms, about what a listing and
# the stat of a few new processes cost on a busy node, so the sampler takes
# a few percent of one CPU.
PERIOD = 0.010
# A process is re-read while younger than this (seconds since first seen):
# a fork shows its parent's comm until it execs, within a few milliseconds.
YOUNG = 0.2
# /proc/<pid>/stat's flags bit of kernel threads (include/linux/sched.h):
# they are the kernel's, not commands anything ran.
PF_KTHREAD = 0x00200000
# USER_HZ on every Linux architecture, when sysconf cannot say.
DEFAULT_TICKS = 100


def read_stat(proc, pid):
    """The parsed stat of one process, or None when it is gone or unreadable."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as handle:
            return parse_stat(handle.read().decode("utf-8", "replace"))
    except (OSError, IOError):
        return None


def boot_time(proc="/proc"):
    """Seconds since the epoch at boot (/proc/stat's btime), or None."""
    try:
        with open(os.path.join(proc, "stat")) as handle:
            for line in handle:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, IOError, ValueError, IndexError):
        pass
    return None


def ticks_per_second():
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return DEFAULT_TICKS


class Seen(object):
    """One process the sampler saw."""

    __slots__ = ("pid", "ppid", "comm", "start", "first_ticks", "ticks", "first_seen", "new")

    def __init__(self, pid, ppid, comm, start, ticks, first_seen, new):
        self.pid = pid
        self.ppid = ppid
        self.comm = comm
        self.start = start  # start tick since boot
        self.first_ticks = ticks  # CPU ticks when first seen
        self.ticks = ticks  # CPU ticks when last read
        self.first_seen = first_seen
        self.new = new  # started after the sampling began


class ProcSampler(object):
    """Watches /proc; ``sample()`` once per period, ``finish()`` at the end."""

    def __init__(self, proc="/proc", exclude=(), clock=time.monotonic):
        self.proc = proc
        self.exclude = set(exclude)
        self.clock = clock
        self.live = {}  # pid -> Seen, those in the last listing
        self.ended = []  # Seen of processes gone from /proc
        self.samples = 0
        self.denied = set()  # pids whose stat could not be read for want of permission
        # The first listing: what runs already is not an execution of the interval.
        for pid, stat in self._listing():
            self._track(pid, stat, new=False)

    def _listing(self):
        """(pid, stat) of every readable user-space process not excluded."""
        for entry in os.listdir(self.proc):
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid in self.exclude:
                continue
            if pid in self.live:
                yield pid, None
                continue
            parsed = read_stat(self.proc, pid)
            if parsed is None:
                if pid not in self.denied and os.path.exists(os.path.join(self.proc, entry)) and not os.access(
                        os.path.join(self.proc, entry, "stat"), os.R_OK):
                    self.denied.add(pid)  # /proc mounted with hidepid: another user's process
                continue
            if parsed[2] & PF_KTHREAD or pid == 2:
                continue
            yield pid, parsed

    def _track(self, pid, stat, new):
        comm, ppid, _, ticks, start = stat
        self.live[pid] = Seen(pid, ppid, comm, start, ticks, self.clock(), new)

    def sample(self):
        """One listing: new processes tracked, young ones re-read (an exec
        changes their comm), those gone kept with what was last seen."""
        self.samples += 1
        now = self.clock()
        present = set()
        for pid, stat in self._listing():
            present.add(pid)
            if stat is not None:
                self._track(pid, stat, new=True)
                continue
            seen = self.live[pid]
            if now - seen.first_seen < YOUNG:
                fresh = read_stat(self.proc, pid)
                if fresh is None:
                    continue
                if fresh[4] != seen.start:  # the pid was reused between two samples
                    self.ended.append(seen)
                    self._track(pid, fresh, new=True)
                else:
                    seen.comm, seen.ticks = fresh[0], fresh[3]
        for pid in [pid for pid in self.live if pid not in present]:
            self.ended.append(self.live.pop(pid))

    def finish(self):
        """Read the CPU time of every process still alive; every process seen, as Seen."""
        for pid, seen in self.live.items():
            fresh = read_stat(self.proc, pid)
            if fresh is not None and fresh[4] == seen.start:
                seen.ticks = fresh[3]
        return self.ended + list(self.live.values())


def tally_seen(processes, boot, ticks):
    """{command: {executions, cpu_seconds, elapsed_seconds, bursts}}
    of the processes that started while sampling (bursts: the distinct
    BURST_SECONDS periods of the clock in which one started); CPU seconds
    count every process seen (those already running, from their first
    sighting).  Elapsed time is unknown (when a process ended is not seen): 0.
    Parents: the commands that started those processes, as sampled."""
    processes = list(processes)
    commands = dict((seen.pid, seen.comm) for seen in processes)
    out = {}
    seconds = {}
    parents = {}
    for seen in processes:
        entry = out.get(seen.comm)
        if entry is None:
            entry = out[seen.comm] = {"executions": 0, "cpu_seconds": 0.0, "elapsed_seconds": 0.0,
                                      "bursts": 0}
            seconds[seen.comm] = set()
            parents[seen.comm] = {}
        used = seen.ticks - (0 if seen.new else seen.first_ticks)
        entry["cpu_seconds"] += float(max(0, used)) / ticks
        if seen.new:
            entry["executions"] += 1
            seconds[seen.comm].add(int(((boot or 0) + float(seen.start) / ticks) // BURST_SECONDS))
            parent = commands.get(seen.ppid, UNKNOWN_PARENT)
            parents[seen.comm][parent] = parents[seen.comm].get(parent, 0) + 1
    for comm, entry in out.items():
        entry["bursts"] = len(seconds[comm])
        entry["cpu_seconds"] = round(entry["cpu_seconds"], 3)
        entry["parents"] = top_parents(parents[comm])
    return dict((comm, entry) for comm, entry in out.items() if entry["executions"] or entry["cpu_seconds"])


def sample_processes(seconds, period=PERIOD, proc="/proc", exclude=(), sleep=time.sleep, clock=time.monotonic):
    """Sample /proc every ``period`` for ``seconds`` (on fixed deadlines);
    (tally as tally_seen gives it, samples taken, unreadable processes)."""
    sampler = ProcSampler(proc, exclude, clock)
    started = clock()
    deadline = started + seconds
    tick = 1
    while True:
        now = clock()
        if now >= deadline:
            break
        target = min(deadline, started + tick * period)
        if target > now:
            sleep(target - now)
        tick = max(tick + 1, int((clock() - started) / period) + 1)  # a late sample skips, never bunches
        sampler.sample()
    processes = sampler.finish()
    return tally_seen(processes, boot_time(proc), ticks_per_second()), sampler.samples, len(sampler.denied)
