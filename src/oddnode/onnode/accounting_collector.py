"""oddnode's process-accounting collector: runs ON a node for an interval
and prints one JSON object: per command, the executions, CPU and elapsed
seconds, and in how many distinct seconds it started.

Standard library only, for Python >= 3.6; it travels to the node with
``pacct.py`` and ``proc_sampler.py`` inside its command line (collect.py).
Nothing runs at import time; ``main`` is the entry point.

Three ways, tried in this order, the one used named in the output
(``method``):

``pacct``  the site's own accounting: a file given with ``--pacct``, or the
           accounting packages' files (Debian's acct: /var/log/account/pacct;
           Red Hat's psacct: /var/account/pacct) when the kernel is writing
           this node's processes into it.  The records appended over the
           interval are read; accounting is left exactly as it was.  With
           ``--seconds 0`` the whole file is read instead (a rotated day's
           file, .gz too), the interval being the span of its records.
``acct``   our own: acct(2) turned on into a private file for the interval,
           then off.  Root only (CAP_SYS_PACCT).  Accounting is per PID
           namespace since Linux 4.2's rework (kernel/acct.c keeps one file per
           namespace; a process is written to its own namespace's file and
           every enclosing namespace's): inside a container or a testbed node
           it records that node's processes only, and the host's accounting,
           if any, goes on untouched.
``proc``   /proc listed every 10 ms (proc_sampler.py) where accounting cannot
           be had: commands shorter than that are missed, and the output says
           so (``missed_short_lived``).

Whether a file receives this node's processes is tested, not assumed: a
marker child with a name of its own (``oddmark-`` and 7 random letters) is
forked and reaped, and its record looked for.  Found with the marker's PID,
the file accounts this PID namespace; found with another PID, an enclosing
one (a container's host: other containers' processes are in it too); not
found, accounting into it is off or suspended for want of disk space.  The
name must be the marker's own: PIDs alone repeat between sibling
namespaces that started alike (the testbed's nodes, containers).

A limit: accounting on into a file of another name cannot be seen from
user space.  Give that file with ``--pacct``; otherwise our acct(2) call
takes accounting over for the interval and turns it off after.
"""

import argparse
import ctypes
import errno
import json
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import time

from oddnode.onnode.pacct import RECORD_SIZE, PacctFile, PacctFormatError, live_command, open_pacct, tally
from oddnode.onnode.proc_sampler import PERIOD, sample_processes

COLLECTOR_VERSION = 1
DEFAULT_SECONDS = 60.0
METHOD_ACCT = "acct"
METHOD_PACCT = "pacct"
METHOD_PROC = "proc"
METHODS = ("auto", METHOD_ACCT, METHOD_PROC)
# Where the accounting packages keep the current file: Debian's and
# Ubuntu's acct, Red Hat's psacct, and older layouts.
SITE_FILES = ("/var/log/account/pacct", "/var/account/pacct", "/var/log/pacct", "/var/adm/pacct")
# The marker child's comm: this prefix and MARKER_RANDOM random letters and
# digits (15 characters, the most a comm holds: 36**7 = 8e10 names).
MARKER_PREFIX = "oddmark-"
MARKER_RANDOM = 7
MARKER_EXIT = 7
PR_SET_NAME = 15  # prctl(2): set the calling thread's comm
# Our own accounting's private directories, in the temporary directory.
ACCT_DIR_PREFIX = "oddnode-acct-"
# Where a file records the marker: this namespace, an enclosing one, nowhere.
OURS, ENCLOSING, ABSENT = "ours", "enclosing", "absent"
PROC_NOTE = ("/proc sampled every %g ms: commands that live shorter than that are missed, so these counts are "
             "lower bounds (short-lived commands like basename or sed are missed most)")

_ERRNO_REASONS = {
    errno.EPERM: "acct(2) was refused (EPERM): no CAP_SYS_PACCT here (a container without it?)",
    errno.ENOSYS: "the kernel has no process accounting (CONFIG_BSD_PROCESS_ACCT is off)",
    errno.EACCES: "acct(2) cannot write its file (EACCES)",
    errno.EROFS: "acct(2) cannot write its file: read-only file system",
}


class CollectorError(RuntimeError):
    """Accounting cannot be read as asked; the message says why and what to do."""


class Interrupted(Exception):
    """A signal ended the interval early (the transport's timeout, a hang-up)."""


def _on_signal(number, frame):
    raise Interrupted("signal %d" % number)


def _libc():
    # The interpreter's own symbols include the C library's: no lookup that
    # would spawn ldconfig (a process accounting would count).
    return ctypes.CDLL(None, use_errno=True)


def acct(path):
    """acct(2): accounting into ``path``, or off with None; 0 or the errno."""
    libc = _libc()
    libc.acct.argtypes = [ctypes.c_char_p]
    result = libc.acct(None if path is None else os.fsencode(path))
    return ctypes.get_errno() if result != 0 else 0


def spawn_marker():
    """Fork a child with a new marker name that exits at once; (its name,
    its PID) once reaped: its accounting record is written before the
    parent can reap it."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    name = MARKER_PREFIX + "".join(random.SystemRandom().choice(alphabet) for _ in range(MARKER_RANDOM))
    pid = os.fork()
    if pid == 0:  # the child: name itself and end, nothing else
        try:
            _libc().prctl(PR_SET_NAME, name.encode("ascii"), 0, 0, 0)
        finally:
            os._exit(MARKER_EXIT)
    os.waitpid(pid, 0)
    return name, pid


def is_marker(record):
    """A marker of any collector (left out of every count)."""
    return record.comm.startswith(MARKER_PREFIX) and len(record.comm) == len(MARKER_PREFIX) + MARKER_RANDOM


def find_marker(path, offset, marker):
    """OURS, ENCLOSING or ABSENT: whether the records of ``path`` after
    ``offset`` hold ``marker`` (its name and PID, as spawn_marker gives
    them) as this namespace numbers it."""
    name, pid = marker
    for record in PacctFile(path, offset):
        if record.comm == name:
            return OURS if record.pid == pid and record.ppid == os.getpid() else ENCLOSING
    return ABSENT


def _aligned_size(path):
    size = os.stat(path).st_size
    return size - size % RECORD_SIZE


def _sleep(seconds):
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(left)


def report(method, source, start, seconds, tallies, notes, **extra):
    out = {
        "collector_version": COLLECTOR_VERSION, "hostname": socket.gethostname(), "method": method,
        "source": source, "start": round(start, 3), "seconds": round(seconds, 3),
        "commands": dict((name, entry if isinstance(entry, dict) else entry.to_json())
                         for name, entry in sorted(tallies.items())),
        "notes": notes, "missed_short_lived": method == METHOD_PROC,
    }
    out.update(extra)
    return out


# ---------------------------------------------------------------- the site's file


def whole_file(path, notes):
    """Every record of an accounting file; the interval is their span, from
    the first start to the last end."""
    records = PacctFile(path)
    span = {}

    def watched():
        for record in records:
            span["first"] = min(span.get("first", record.btime), record.btime)
            span["last"] = max(span.get("last", 0.0), record.btime + record.etime)
            yield record

    tallies = tally(watched())
    if records.trailing:
        notes.append("%s ends in a partial record (%d bytes), not read" % (path, records.trailing))
    if not tallies:
        notes.append("%s holds no records" % path)
    first = float(span.get("first", 0))
    return report(METHOD_PACCT, path, first, max(0.0, span.get("last", first) - first), tallies, notes,
                  records=sum(entry.executions for entry in tallies.values()))


def site_interval(path, seconds, notes, given):
    """The records a site's accounting file gets over the interval; None
    (with a note) when the file does not account this node's processes and
    was not ``given``, CollectorError when it was."""
    try:
        handle = open_pacct(path)
    except (OSError, IOError) as err:
        raise CollectorError("cannot read %s: %s" % (path, err.strerror or err))
    try:
        inode = os.fstat(handle.fileno()).st_ino
        offset = _aligned_size(path)
        where = find_marker(path, offset, spawn_marker())
        if where != OURS:
            if where == ENCLOSING:
                problem = ("%s records the processes of an enclosing PID namespace (a container's host), "
                           "other containers' with them, so its counts would not be this node's" % path)
            else:
                problem = ("%s did not record a process that ended here: accounting into it is off, or "
                           "suspended for want of disk space (/proc/sys/kernel/acct)" % path)
            if given:
                raise CollectorError(problem + ("; leave out --pacct to account this node's own processes"
                                                if where == ENCLOSING else "; turn it on (accton %s) or leave "
                                                "out --pacct" % path))
            notes.append(problem + ": not used")
            return None
        start = time.time()
        _sleep(seconds)
        end = time.time()
        records = PacctFile(path, offset, handle=handle)
        tallies = tally(records, skip=is_marker, live=live_command)
        rotated = os.path.exists(path) and os.stat(path).st_ino != inode
        if rotated:  # logrotate moved it and accounting went on in a new file of the same name
            fresh = PacctFile(path)
            for name, entry in tally(fresh, skip=is_marker, live=live_command).items():
                if name in tallies:
                    tallies[name].merge(entry)
                else:
                    tallies[name] = entry
            notes.append("%s was rotated during the interval: both files were read" % path)
    finally:
        handle.close()
    return report(METHOD_PACCT, path, start, end - start, tallies, notes,
                  records=sum(entry.executions for entry in tallies.values()))


# ---------------------------------------------------------------- our own accounting


def _owner(directory):
    """The PID in an own-accounting directory's name (oddnode-acct-<pid>-...), or None."""
    parts = os.path.basename(directory).split("-")
    return int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else None


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError as err:
        return err.errno == errno.EPERM
    return True


def leftover_accounting(notes, parent=None):
    """Turn off our own accounting that a killed collector left on in this
    namespace (its file still records our processes); CollectorError when
    a live collector's is on: two cannot share one namespace's accounting."""
    parent = parent or tempfile.gettempdir()
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return
    for name in names:
        directory = os.path.join(parent, name)
        path = os.path.join(directory, "pacct")
        if not name.startswith(ACCT_DIR_PREFIX) or not os.path.isfile(path):
            continue
        try:
            where = find_marker(path, _aligned_size(path), spawn_marker())
        except (OSError, IOError, PacctFormatError):
            continue
        if where != OURS:
            continue  # another namespace's (a testbed node beside this one), or off
        owner = _owner(directory)
        if owner is not None and owner != os.getpid() and _alive(owner):
            raise CollectorError("another oddnode accounting run (PID %d) has accounting on here into %s: "
                                 "wait for it to end" % (owner, path))
        acct(None)
        shutil.rmtree(directory, ignore_errors=True)
        notes.append("accounting into %s, left on by a collector that was killed, was turned off" % path)


def own_interval(seconds, notes):
    """Accounting on into a private file for the interval, then off; None
    (with a note why) where it cannot be had."""
    if os.geteuid() != 0:
        notes.append("not root: acct(2) needs CAP_SYS_PACCT")
        return None
    leftover_accounting(notes)
    # Mode 0700, ours alone; named with our PID so that a later run can tell a live run's from a leftover.
    directory = tempfile.mkdtemp(prefix="%s%d-" % (ACCT_DIR_PREFIX, os.getpid()))
    path = os.path.join(directory, "pacct")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        failure = acct(path)
        if failure:
            notes.append(_ERRNO_REASONS.get(failure, "acct(2) failed: %s" % os.strerror(failure)))
            return None
        try:
            start = time.time()
            try:
                where = find_marker(path, 0, spawn_marker())
            except PacctFormatError as err:
                notes.append("the kernel's accounting records cannot be read: %s" % err.problem)
                return None
            if where != OURS:
                notes.append("acct(2) took the file but recorded nothing (accounting suspended for want of "
                             "disk space? see /proc/sys/kernel/acct)")
                return None
            _sleep(seconds)
        finally:
            acct(None)  # this also writes a record of this very process, left out below
            end = time.time()
        me = os.getpid()
        tallies = tally(PacctFile(path), skip=lambda record: is_marker(record) or record.pid == me,
                        live=live_command)
        return report(METHOD_ACCT, "acct(2)", start, end - start, tallies, notes,
                      records=sum(entry.executions for entry in tallies.values()))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------- /proc


def proc_interval(seconds, notes, period=PERIOD):
    start = time.time()
    tallies, samples, denied = sample_processes(seconds, period=period, exclude=(os.getpid(),))
    end = time.time()
    notes.append(PROC_NOTE % (period * 1000))
    if denied:
        notes.append("%d processes could not be read (/proc mounted with hidepid): their commands are missing"
                     % denied)
    return report(METHOD_PROC, "/proc", start, end - start, tallies, notes, samples=samples)


# ---------------------------------------------------------------- the whole


def collect(seconds, pacct=None, method="auto", site_files=SITE_FILES):
    """The report of one node over ``seconds``: the given accounting file, a
    site's file that accounts this node, our own accounting, or /proc."""
    notes = []
    if pacct is not None:
        if seconds == 0:
            return whole_file(pacct, notes)
        return site_interval(pacct, seconds, notes, given=True)
    if method != METHOD_PROC:
        if method == "auto":
            for path in site_files:
                if os.path.isfile(path) and os.access(path, os.R_OK):
                    try:
                        found = site_interval(path, seconds, notes, given=False)
                    except PacctFormatError as err:  # a v2 file: the kernel's own records are v2 too
                        notes.append("%s: not used" % err)
                        continue
                    if found is not None:
                        return found
        found = own_interval(seconds, notes)
        if found is not None:
            return found
        if method == METHOD_ACCT:
            raise CollectorError("kernel accounting is not available: " + "; ".join(notes))
    return proc_interval(seconds, notes)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog="oddnode-accounting", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    parser.add_argument("--pacct", help="an existing accounting file to read")
    parser.add_argument("--method", choices=METHODS, default="auto")
    parser.add_argument("--site-file", action="append", dest="site_files",
                        help="a place to look for a site's accounting file (default: the packages' places)")
    arguments = parser.parse_args(argv)
    if arguments.seconds < 0 or (arguments.seconds == 0 and arguments.pacct is None):
        parser.error("--seconds must be > 0 (0 only with --pacct: the whole file)")
    return arguments


def main(argv=None):
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(number, _on_signal)
    try:
        out = collect(arguments.seconds, arguments.pacct, arguments.method,
                      tuple(arguments.site_files) if arguments.site_files else SITE_FILES)
    except (CollectorError, PacctFormatError) as err:
        sys.stderr.write("oddnode accounting: %s\n" % err)
        return 2
    except Interrupted as err:
        sys.stderr.write("oddnode accounting: stopped by %s before the interval ended (our own accounting, if "
                         "on, was turned off)\n" % err)
        return 3
    sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
