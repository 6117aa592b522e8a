"""The reader of Linux process accounting files (v3 records): the layout
against the kernel's header, records we write with known fields, comp_t's
edge cases, a truncated last record, files that are not v3, and a file the
kernel wrote (tests/fixtures/pacct)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from support.cli import FIXTURES
from oddnode.onnode.pacct import (
    AFORK,
    AHZ,
    AXSIG,
    RECORD_SIZE,
    PacctFile,
    PacctFormatError,
    decode_comp_t,
    encode_comp_t,
    read_pacct,
    tally,
    unpack_record,
)
from support.outputs import OFFSETS, pack

HEADER = Path("/usr/include/linux/acct.h")
_SIZES = {"char": 1, "__u8": 1, "__u16": 2, "comp_t": 2, "__u32": 4, "float": 4}


def test_the_layout_is_the_kernel_headers_struct_acct_v3():
    if not HEADER.exists():
        pytest.skip(f"no {HEADER} (Debian: linux-libc-dev)")
    body = re.search(r"struct acct_v3\s*\{(.*?)\};", HEADER.read_text(), re.S).group(1)
    offset, seen = 0, {}
    for match in re.finditer(r"^\s*(\w+)\s+(\w+)(?:\[(\w+)\])?;", body, re.M):
        kind, name, count = match.groups()
        size = _SIZES[kind] * (16 if count == "ACCT_COMM" else int(count or 1))
        offset += -offset % min(_SIZES[kind], 4)  # natural alignment
        seen[name] = offset
        offset += size
    assert seen == OFFSETS and offset == RECORD_SIZE


def test_records_written_with_known_fields_read_back():
    data = pack(flag=AXSIG, tty=0x8801, exitcode=15, uid=1000, gid=100, pid=4242, ppid=4200, btime=1_712_345_678,
                etime=12.5 * AHZ, utime=250, stime=encode_comp_t(12_000), mem=2364, minflt=50, majflt=2,
                comm=b"spget_sy") + pack(flag=AFORK, comm=b"ksh", pid=7, etime=3.0)
    first, second = records_of(data)
    assert (first.flag, first.version, first.tty, first.exitcode, first.uid, first.gid, first.pid, first.ppid,
            first.btime) == (AXSIG, 3, 0x8801, 15, 1000, 100, 4242, 4200, 1_712_345_678)
    assert first.etime == 12.5 and first.utime == 2.5 and first.stime == 120.0 and first.cpu == 122.5
    assert (first.mem_kb, first.minflt, first.majflt, first.comm, first.command) == (2364, 50, 2, "spget_sy",
                                                                                      "spget_sy")
    assert second.forked_only and second.command == "ksh*" and second.offset == RECORD_SIZE


def records_of(data: bytes):
    """The records of bytes, as the reader unpacks them."""
    return [unpack_record(data[i:i + RECORD_SIZE], "<test>", i) for i in range(0, len(data), RECORD_SIZE)]


@pytest.mark.parametrize("raw, value", [
    (0x0000, 0),
    (0x0001, 1),
    (0x1FFF, 8191),  # the largest mantissa, exponent 0
    (0x2000 | 1024, 8192),  # exponent 1: mantissa << 3
    (0x2001, 8),  # a denormal-looking but valid encoding
    (0xE000 | 1, 8 ** 7),
    (0xFFFF, 8191 * 8 ** 7),  # the largest comp_t: 17,177,772,032 ticks
])
def test_comp_t_decodes_mantissa_and_base_8_exponent(raw, value):
    assert decode_comp_t(raw) == value


@pytest.mark.parametrize("value, encoded", [
    (0, 0), (8191, 0x1FFF),
    (8192, 0x2000 | 1024),  # exact
    (8195, 0x2000 | 1024),  # 3 dropped bits 011: rounded down
    (8196, 0x2000 | 1025),  # 100: rounded up, as the kernel does
    (8191 * 8 + 4, 0x4000 | 1024),  # rounding up overflows the mantissa: next exponent
    (8191 * 8 ** 7, 0xFFFF),
    (8192 * 8 ** 7, 0xFFFF),  # too large: saturates
])
def test_comp_t_encodes_as_the_kernel_rounds(value, encoded):
    assert encode_comp_t(value) == encoded


def test_comp_t_keeps_13_bits_of_precision():
    for value in [0, 1, 8191, 8192, 10_000, 123_456, 9_999_999, 2 ** 33]:
        assert abs(decode_comp_t(encode_comp_t(value)) - value) <= value / 4096


def test_comp_t_outside_16_bits_is_refused():
    with pytest.raises(ValueError, match="16 bits"):
        decode_comp_t(0x10000)
    with pytest.raises(ValueError, match="negative"):
        encode_comp_t(-1)


def test_a_truncated_last_record_is_left_unread_and_counted(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(pack(comm=b"a") + pack(comm=b"b") + pack(comm=b"c")[:20])
    records = PacctFile(path)
    assert [r.comm for r in records] == ["a", "b"]
    assert (records.end, records.trailing) == (2 * RECORD_SIZE, 20)
    # Read on from where it ended once the record is whole.
    path.write_bytes(pack(comm=b"a") + pack(comm=b"b") + pack(comm=b"c"))
    assert [r.comm for r in read_pacct(path, records.end)] == ["c"]


def test_a_version_2_file_is_refused_naming_the_file_and_the_record(tmp_path):
    path = tmp_path / "old.pacct"
    path.write_bytes(pack() + pack(version=2))
    with pytest.raises(PacctFormatError, match=r"old.pacct at byte 64 \(record 1\): a version 2 record, not 3: "
                                                r".*CONFIG_BSD_PROCESS_ACCT_V3") as caught:
        read_pacct(path)
    assert caught.value.offset == 64 and caught.value.path == str(path)


def test_a_file_that_is_no_accounting_file_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are not accounting records, just text that fills 64 bytes....")
    with pytest.raises(PacctFormatError, match=r"notes.txt at byte 0 \(record 0\): not a process accounting record "
                                                r"\(version byte 0x68"):
        read_pacct(path)


def test_an_offset_between_records_is_refused(tmp_path):
    path = tmp_path / "pacct"
    path.write_bytes(pack())
    with pytest.raises(PacctFormatError, match="multiples of 64"):
        read_pacct(path, 10)


def test_a_negative_elapsed_time_is_no_record():
    with pytest.raises(PacctFormatError, match="elapsed time"):
        unpack_record(pack(etime=-1.0), "x", 0)


def test_big_endian_records_read_by_their_byte_order_flag():
    (record,) = records_of(pack(big=True, pid=70000, btime=1_600_000_000, utime=0x2001, etime=150.0,
                                    comm=b"lssrc"))
    assert (record.pid, record.btime, record.utime, record.etime, record.comm) == (70000, 1_600_000_000, 0.08, 1.5,
                                                                                  "lssrc")


def test_a_rotated_gzip_file_reads_the_same(tmp_path):
    path = tmp_path / "pacct.1.gz"
    with gzip.open(path, "wb") as out:
        out.write(pack(comm=b"sed") * 3)
    assert [r.comm for r in read_pacct(path)] == ["sed"] * 3


def test_a_sixteen_character_comm_and_odd_bytes_are_kept():
    (record,) = records_of(pack(comm=b"0123456789abcdef"))
    assert record.comm == "0123456789abcdef"
    (record,) = records_of(pack(comm=b"bad\xffname\0junk"))
    assert record.comm == "bad\\xffname"


def test_tally_sums_per_command_and_counts_a_burst_once():
    data = b"".join([pack(comm=b"sed", btime=100, utime=3, stime=1, etime=20.0),
                     pack(comm=b"sed", btime=100, utime=1, etime=10.0),
                     pack(comm=b"sed", btime=107),  # the next 5-second period
                     pack(comm=b"sh", flag=AFORK, btime=101),
                     pack(comm=b"oddmark-1234567", btime=101)])
    tallies = tally(records_of(data), skip=lambda r: r.comm.startswith("oddmark-"))
    assert sorted(tallies) == ["sed", "sh*"]
    assert tallies["sed"].to_json() == {"executions": 3, "cpu_seconds": 0.05, "elapsed_seconds": 0.3,
                                        "bursts": 2, "parents": ["?"]}


def test_a_parent_is_named_from_its_own_record_else_as_it_runs_else_unknown():
    data = b"".join([pack(comm=b"cron", pid=500, ppid=1, btime=100),
                     pack(comm=b"sh", pid=501, ppid=500, btime=100), pack(comm=b"sh", pid=502, ppid=500, btime=100),
                     pack(comm=b"sed", pid=503, ppid=501, btime=100), pack(comm=b"sed", pid=504, ppid=777, btime=100),
                     pack(comm=b"sed", pid=505, ppid=888, btime=100)])
    running = {777: "collectd"}
    tallies = tally(records_of(data), live=running.get)
    assert tallies["sh"].to_json()["parents"] == ["cron"]
    # Most first, then by name; a parent neither recorded nor running is "?".
    assert tallies["sed"].to_json()["parents"] == ["?", "collectd", "sh"]
    assert tally(records_of(data))["sed"].to_json()["parents"] == ["?", "sh"]


def test_a_file_the_kernel_wrote():
    """tests/fixtures/pacct/v3_x86_64.pacct: accounting on in a fresh PID
    namespace for a known process tree (see tests/fixtures/README.md)."""
    records = read_pacct(FIXTURES / "pacct" / "v3_x86_64.pacct")
    commands = [r.command for r in records]
    assert commands == ["true"] * 3 + ["sh"] * 3 + ["sleep", "sh", "sh", "python3*", "python3"]
    by_pid = {r.pid: r for r in records}
    assert all(r.version == 3 and r.ppid == 1 for r in records[:-1])
    assert by_pid[47].exitcode == 3 << 8  # sh -c "exit 3"
    assert by_pid[50].flag & AXSIG and by_pid[50].exitcode == 15  # killed by SIGTERM
    assert 0.2 <= by_pid[48].etime <= 0.4  # sleep 0.25
    assert by_pid[49].cpu > 0.05  # the busy loop
    assert by_pid[51].forked_only  # a fork without exec
    assert records[-1].pid == 1  # acct(NULL) writes a record of its caller
