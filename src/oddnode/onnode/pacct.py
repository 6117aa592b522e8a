"""Linux BSD process accounting files: version 3 records (``struct acct_v3``
of <linux/acct.h>), read and summed per command.

Standard library only, for Python >= 3.6: the collector carries this module
to the nodes (see collect.py).  No annotations, dataclasses or walrus.

The kernel appends one 64-byte record to the accounting file when a process
ends (the last thread of it: ``AGROUP``).  Layout, no padding (checked
against /usr/include/linux/acct.h by tests/unit/onnode/test_pacct.py)::

    offset  size  field        meaning
     0      1     ac_flag      AFORK 0x01 (forked, no exec), ASU 0x02, ACORE 0x08, AXSIG 0x10, AGROUP 0x20
     1      1     ac_version   3; bit 0x80 (ACCT_BYTEORDER) set when the file is big-endian
     2      2     ac_tty       controlling terminal
     4      4     ac_exitcode  the wait status as do_exit got it (exit code << 8, or the signal)
     8      4     ac_uid       real user id
    12      4     ac_gid       real group id
    16      4     ac_pid       process id, as the accounting file's PID namespace numbers it
    20      4     ac_ppid      parent's process id, likewise
    24      4     ac_btime     start time, seconds since the epoch
    28      4     ac_etime     elapsed time, an IEEE-754 float of AHZ ticks
    32      2     ac_utime     user CPU time, comp_t of AHZ ticks
    34      2     ac_stime     system CPU time, comp_t of AHZ ticks
    36      2     ac_mem       average memory use, comp_t of kB
    38      2     ac_io        characters transferred, comp_t (always 0 since Linux 2.6)
    40      2     ac_rw        blocks read or written, comp_t (always 0)
    42      2     ac_minflt    minor page faults, comp_t
    44      2     ac_majflt    major page faults, comp_t
    46      2     ac_swaps     swaps, comp_t (always 0)
    48     16     ac_comm      command name, NUL-padded (at most 15 characters and a NUL)

Byte order: each record says its own in ac_version's top bit; the kernel
writes the machine's native order, little-endian on x86-64 and arm64.

AHZ: v3 records count ticks of 1/100 s whatever the kernel's HZ
(``#define AHZ 100`` under CONFIG_BSD_PROCESS_ACCT_V3 in the kernel's own
include/linux/acct.h; the uapi header's ``AHZ (HZ)`` and ACCT_VERSION 2 are
those of the v1/v2 ``struct acct``).

comp_t: 16 bits, a 13-bit mantissa and a 3-bit base-8 exponent above it:
value = mantissa << (3 * exponent), at most 8191 * 8**7 = 17,177,772,032
ticks (5.4 years of CPU time); beyond 8191 the kernel rounds the mantissa
to nearest.  Version 1 and 2 records (a kernel without
CONFIG_BSD_PROCESS_ACCT_V3) are refused with the file and the offset of the
first one: their fields lie elsewhere.
"""

import gzip
import os
import struct

RECORD_SIZE = 64
ACCT_VERSION = 3
# ac_version's top bit: the record is big-endian (ACCT_BYTEORDER).
BIG_ENDIAN_FLAG = 0x80
# Ticks per second of v3 records' times (kernel include/linux/acct.h).
AHZ = 100
COMM_BYTES = 16

AFORK = 0x01  # forked but did not exec: its comm is its parent's
ASU = 0x02  # used super-user privileges
ACORE = 0x08  # dumped core
AXSIG = 0x10  # killed by a signal
AGROUP = 0x20  # the last task of its process

# Fields after ac_flag and ac_version, in file order: H tty, I exitcode, uid,
# gid, pid, ppid, btime, f etime, 8 H comp_t (utime, stime, mem, io, rw,
# minflt, majflt, swaps), 16s comm.
_BODY = "HIIIIIIf8H16s"
_LITTLE = struct.Struct("<BB" + _BODY)
_BIG = struct.Struct(">BB" + _BODY)
assert _LITTLE.size == RECORD_SIZE and _BIG.size == RECORD_SIZE

COMP_MANTISSA_BITS = 13
COMP_MANTISSA_MASK = (1 << COMP_MANTISSA_BITS) - 1
COMP_EXPONENT_BASE_BITS = 3  # the exponent counts powers of 8 = 2**3
# Bytes read at once: 64 Ki records.
CHUNK = RECORD_SIZE * 65536
# How a command name is spelled when the process forked without exec (as
# sa(8) marks it): a shell's subshell is "sh*", not a run of sh.
FORK_SUFFIX = "*"
# Processes come in bursts: a login's shell start-up, an admin's few
# commands, a script each start a handful to dozens of processes within a
# few seconds.  Starts within one period of this many seconds of the clock
# (epoch-aligned, the same periods on every node) count as one burst, so a
# burst is one or two events however many processes it starts, while a
# spawner that persists through the interval starts some in every period.
BURST_SECONDS = 5


class PacctFormatError(ValueError):
    """An accounting file that is not what the kernel writes as v3; names the file and the record's offset."""

    def __init__(self, path, offset, problem):
        self.path = path
        self.offset = offset
        self.problem = problem
        where = "%s at byte %d (record %d)" % (path, offset, offset // RECORD_SIZE)
        ValueError.__init__(self, "%s: %s" % (where, problem))


def decode_comp_t(value):
    """The integer a comp_t holds: 13-bit mantissa << 3 * (3-bit exponent)."""
    if not 0 <= value <= 0xFFFF:
        raise ValueError("a comp_t is 16 bits, not %r" % (value,))
    return (value & COMP_MANTISSA_MASK) << (COMP_EXPONENT_BASE_BITS * (value >> COMP_MANTISSA_BITS))


def encode_comp_t(value):
    """A comp_t for a non-negative integer, rounded to nearest as the kernel
    does (kernel/acct.c encode_comp_t); saturates at the largest comp_t."""
    if value < 0:
        raise ValueError("a comp_t holds no negative number: %r" % (value,))
    exponent = 0
    rounding = 0
    while value > COMP_MANTISSA_MASK:
        rounding = value & 4  # the highest bit shifted out, of the 3 dropped
        value >>= COMP_EXPONENT_BASE_BITS
        exponent += 1
    if rounding:
        value += 1
        if value > COMP_MANTISSA_MASK:
            value >>= COMP_EXPONENT_BASE_BITS
            exponent += 1
    if exponent > 7:
        return 0xFFFF
    return (exponent << COMP_MANTISSA_BITS) | value


class PacctRecord(object):
    """One process, as its accounting record tells it; times in seconds."""

    __slots__ = ("offset", "flag", "version", "tty", "exitcode", "uid", "gid", "pid", "ppid", "btime",
                 "etime", "utime", "stime", "mem_kb", "minflt", "majflt", "comm")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields[name])

    @property
    def cpu(self):
        """User and system CPU seconds."""
        return self.utime + self.stime

    @property
    def forked_only(self):
        return bool(self.flag & AFORK)

    @property
    def command(self):
        """The command name as the summaries count it: comm, and "*" after it
        for a process that forked without exec (sa's notation)."""
        return self.comm + (FORK_SUFFIX if self.forked_only else "")

    def __repr__(self):
        return "PacctRecord(%s)" % ", ".join("%s=%r" % (name, getattr(self, name)) for name in self.__slots__)


def unpack_record(data, path="<pacct>", offset=0):
    """A PacctRecord from 64 bytes; PacctFormatError unless it is a v3 record."""
    if len(data) != RECORD_SIZE:
        raise PacctFormatError(path, offset, "a record is %d bytes, not %d" % (RECORD_SIZE, len(data)))
    version_byte = bytearray(data[1:2])[0]
    version = version_byte & ~BIG_ENDIAN_FLAG
    if version != ACCT_VERSION:
        if version in (1, 2):
            problem = ("a version %d record, not 3: the kernel was built without CONFIG_BSD_PROCESS_ACCT_V3, "
                       "whose records oddnode reads" % version)
        else:
            problem = "not a process accounting record (version byte 0x%02x, v3 records have 0x03 or 0x83)" % (
                version_byte,)
        raise PacctFormatError(path, offset, problem)
    layout = _BIG if version_byte & BIG_ENDIAN_FLAG else _LITTLE
    (flag, _, tty, exitcode, uid, gid, pid, ppid, btime, etime, utime, stime, mem, _io, _rw, minflt, majflt,
     _swaps, comm) = layout.unpack(data)
    if not etime >= 0.0:  # negative or NaN: not a time the kernel writes
        raise PacctFormatError(path, offset, "elapsed time %r is not a time" % (etime,))
    name = comm.split(b"\0", 1)[0].decode("utf-8", "backslashreplace")
    return PacctRecord(
        offset=offset, flag=flag, version=version, tty=tty, exitcode=exitcode, uid=uid, gid=gid, pid=pid,
        ppid=ppid, btime=btime, etime=float(etime) / AHZ, utime=float(decode_comp_t(utime)) / AHZ,
        stime=float(decode_comp_t(stime)) / AHZ, mem_kb=decode_comp_t(mem), minflt=decode_comp_t(minflt),
        majflt=decode_comp_t(majflt), comm=name)


def open_pacct(path):
    """The file for reading; a rotated file compressed by logrotate (.gz) is read through gzip."""
    if str(path).endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


class PacctFile(object):
    """The records of an accounting file from ``offset`` (a multiple of 64)
    to its end, read as iterated.

    A last record cut short (a copy of a file being written, or the kernel
    writing it as we read) is not read: after iterating, ``end`` is the
    offset after the last whole record and ``trailing`` the bytes left over.
    ``handle``: a file opened earlier, read instead of opening ``path``
    (logrotate may have renamed it since).
    """

    def __init__(self, path, offset=0, handle=None):
        if offset < 0 or offset % RECORD_SIZE:
            raise PacctFormatError(path, offset, "records start at multiples of %d bytes" % RECORD_SIZE)
        self.path = str(path)
        self.offset = offset
        self.handle = handle  # a file opened before: read it, whatever the path names now
        self.end = offset
        self.trailing = 0

    def __iter__(self):
        handle = self.handle if self.handle is not None else open_pacct(self.path)
        try:
            if self.offset:
                handle.seek(self.offset)
            position = self.offset
            pending = b""
            while True:
                chunk = handle.read(CHUNK)
                if not chunk:
                    break
                data = pending + chunk
                whole = len(data) - len(data) % RECORD_SIZE
                for start in range(0, whole, RECORD_SIZE):
                    yield unpack_record(data[start:start + RECORD_SIZE], self.path, position + start)
                position += whole
                self.end = position
                pending = data[whole:]
            self.trailing = len(pending)
        finally:
            if self.handle is None:
                handle.close()


def read_pacct(path, offset=0):
    """Every whole record of an accounting file from ``offset``, as a list."""
    return list(PacctFile(path, offset))


# How many parent commands a command's tally names, the most frequent first.
PARENTS_SHOWN = 3
# A parent whose command is not known (it ended before the interval and left
# no record, or /proc could not be read).
UNKNOWN_PARENT = "?"


class CommandTally(object):
    """What one command's processes added up to, and whose children they were."""

    __slots__ = ("executions", "cpu", "elapsed", "periods", "parents")

    def __init__(self):
        self.executions = 0
        self.cpu = 0.0
        self.elapsed = 0.0
        self.periods = set()  # the BURST_SECONDS periods of the clock in which one started
        self.parents = {}  # parent command -> processes of this one it started

    def add(self, cpu, elapsed, started, parent=None):
        self.executions += 1
        self.cpu += cpu
        self.elapsed += elapsed
        self.periods.add(int(started // BURST_SECONDS))
        if parent is not None:
            self.parents[parent] = self.parents.get(parent, 0) + 1

    def merge(self, other):
        """Add another tally of the same command (a rotated file's)."""
        self.executions += other.executions
        self.cpu += other.cpu
        self.elapsed += other.elapsed
        self.periods |= other.periods
        for parent, count in other.parents.items():
            self.parents[parent] = self.parents.get(parent, 0) + count

    def to_json(self):
        """executions, CPU and elapsed seconds, bursts (in how many distinct
        BURST_SECONDS periods one of them started) and parents (the commands
        that started them, most first)."""
        return {"executions": self.executions, "cpu_seconds": round(self.cpu, 3),
                "elapsed_seconds": round(self.elapsed, 3), "bursts": len(self.periods),
                "parents": top_parents(self.parents)}


def top_parents(parents):
    """The PARENTS_SHOWN commands that started the most, most first (then by name)."""
    ranked = sorted(parents.items(), key=lambda item: (-item[1], item[0]))
    return [name for name, _ in ranked[:PARENTS_SHOWN]]


def live_command(pid, proc="/proc"):
    """The command of a running process (its comm), or None."""
    try:
        with open(os.path.join(proc, str(pid), "comm"), "rb") as handle:
            return handle.read().decode("utf-8", "replace").strip() or None
    except (OSError, IOError):
        return None


def tally(records, skip=None, live=None):
    """{command: CommandTally} of records, leaving out those ``skip(record)``
    is true for.  A record's parent is the command of the record of its
    parent's PID (a parent that ended in the interval), else ``live(ppid)``
    (a parent still running, read on the node), else UNKNOWN_PARENT."""
    kept = [record for record in records if skip is None or not skip(record)]
    commands = dict((record.pid, record.command) for record in kept)
    tallies = {}
    for record in kept:
        entry = tallies.get(record.command)
        if entry is None:
            entry = tallies[record.command] = CommandTally()
        parent = commands.get(record.ppid) or (live(record.ppid) if live is not None else None)
        entry.add(record.cpu, record.etime, record.btime, parent or UNKNOWN_PARENT)
    return tallies
