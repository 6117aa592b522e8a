"""Every reader of untrusted files, fed arbitrary and mutated inputs: the
only outcomes are a result whose numbers are all finite, or our one-line
error (ParseError or InputError) with a short message.

The mutations start from the real outputs in tests/fixtures: lines deleted,
repeated, swapped or cut; numbers replaced by nan, inf, 1e999, huge whole
numbers or words; JSON values replaced by another type; deep nesting.  The
examples are derandomized and bounded, so a run is reproducible and takes
seconds.  Explicit regression tests for each malformed input once found to
crash follow the properties.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oddnode.core.inputs import InputError
from oddnode.store.stab import import_stab
from oddnode.store.tool_import import import_tool_outputs
from oddnode.parsers import ParsedOutput, ParseError, get_parser
from oddnode.parsers.itc import parse_itc, read_itc
from oddnode.readings.profile import Profile, to_json
from oddnode.parsers.mpip import parse_mpip, read_mpip
from oddnode.store import open_store
from support.cli import FIXTURES

TOOLS = ("stream", "imb", "osu", "npb", "hpcc", "fio", "iperf3", "netpipe")
JSON_TOOLS = ("fio", "iperf3")
# The longest error message accepted: a file name and a quote of at most 200 characters, with words around them.
MESSAGE_LIMIT = 600
TICKS_PER_SECOND = 1e6  # the ITC fixtures' clock

# Small, reproducible and without a database of failures: the whole file runs in seconds on one core.
FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
# What a number in a file is replaced by: non-finite, past the float range,
# negative, past every integer column, past Python's int() digit limit, words.
BAD_NUMBERS = ("nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "-1", "0", "1e308",
               "99999999999999", str(2**63), str(2**64), "9" * 5000, "abc", "", "1.2.3", "٣")
# What a JSON value is replaced by: every other type and the extremes.
BAD_JSON = (None, True, "12", "nan", [], [1, 2], {}, {"a": None}, -1, 0, 1e308, 2**64, 10**400)
DEEP = "<deeply nested lists>"  # a value retyped_json writes as nesting


def fixtures(tool: str) -> list[Path]:
    return sorted(path for path in (FIXTURES / tool).iterdir() if path.is_file() and path.suffix != ".md")


def check_error(err: Exception) -> None:
    """Our error: one line, short."""
    message = str(err)
    assert len(message) < MESSAGE_LIMIT, message[:1000]
    assert "\n" not in message, message[:1000]


def check_output(output: ParsedOutput) -> None:
    for m in output.measurements:
        assert isinstance(m.value, (int, float)) and math.isfinite(m.value), m


def check_profile(profile: Profile) -> None:
    """All numbers finite, and its JSON strict (no NaN or Infinity)."""
    json.dumps(to_json(profile), allow_nan=False)
    for rank in profile.ranks:
        assert math.isfinite(rank.wall)
        for stats in rank.calls.values():
            assert math.isfinite(stats.time) and math.isfinite(stats.max_time)


def parse_or_refuse(tool: str, text: str) -> None:
    try:
        output = get_parser(tool)(text, "fuzzed.out")
    except ParseError as err:
        check_error(err)
    else:
        check_output(output)


def profile_or_refuse(reader, text: str) -> None:
    try:
        profile = reader(text)
    except ParseError as err:
        check_error(err)
    else:
        check_profile(profile)


def read_mpip_text(text: str) -> Profile:
    return parse_mpip(text, "fuzzed.mpiP")


def read_itc_text(text: str) -> Profile:
    return parse_itc(text, "fuzzed.dump", ticks_per_second=TICKS_PER_SECOND)


# -- mutations ----------------------------------------------------------------

@st.composite
def mutated(draw, text: str) -> str:
    """``text`` after one to four line or number mutations."""
    for _ in range(draw(st.integers(1, 4))):
        lines = text.splitlines(keepends=True) or [""]
        kind = draw(st.sampled_from(("delete", "duplicate", "swap", "truncate", "number", "number", "nest")))
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "truncate":
            joined = "".join(lines)
            lines = [joined[:draw(st.integers(0, len(joined)))]]
        elif kind == "number":
            numbers = list(NUMBER.finditer(text))
            if numbers:
                found = numbers[draw(st.integers(0, len(numbers) - 1))]
                replacement = draw(st.sampled_from(BAD_NUMBERS))
                lines = [text[:found.start()] + replacement + text[found.end():]]
        else:
            depth = draw(st.sampled_from((70, 2000, 100_000)))
            lines.insert(i, "[" * depth + "\n")
        text = "".join(lines)
    return text


def json_paths(value, path=()):
    """Every path to a value in a JSON document."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_paths(item, (*path, index))


@st.composite
def retyped_json(draw, text: str) -> str:
    """A JSON fixture with one to three values replaced by another type, or nested deeply."""
    document = json.loads(text)
    deep = "[" * draw(st.sampled_from((10, 70, 5000)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from([path for path in json_paths(document) if path]))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = copy.deepcopy(draw(st.sampled_from((*BAD_JSON, DEEP))))  # never one shared list
    # Nesting written out after dumping: json.dumps itself stops at a depth.
    return json.dumps(document).replace(json.dumps(DEEP), deep + "]" * len(deep))


def fixture_texts(tool: str) -> st.SearchStrategy[str]:
    return st.sampled_from([path.read_text(encoding="utf-8", errors="replace") for path in fixtures(tool)])


# -- the parsers ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOLS)
@FUZZ
@given(text=st.text(max_size=2000))
def test_parsers_on_arbitrary_text(tool, text):
    parse_or_refuse(tool, text)


@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOLS)
@FUZZ
@given(data=st.data())
def test_parsers_on_mutated_fixtures(tool, data):
    text = data.draw(fixture_texts(tool).flatmap(mutated))
    parse_or_refuse(tool, text)


@pytest.mark.slow
@pytest.mark.parametrize("tool", JSON_TOOLS)
@FUZZ
@given(data=st.data())
def test_json_parsers_on_values_of_another_type(tool, data):
    json_fixtures = [path.read_text() for path in fixtures(tool) if path.suffix == ".json"]
    text = data.draw(st.sampled_from(json_fixtures).flatmap(retyped_json))
    parse_or_refuse(tool, text)


@pytest.fixture(scope="module")
def fuzz_store(tmp_path_factory):
    """One store for every example: an import that fails leaves it as it was."""
    with open_store(tmp_path_factory.mktemp("store") / "fuzz.duckdb") as store:
        yield store


@pytest.mark.parametrize("tool", TOOLS)
@settings(FUZZ, max_examples=25)
@given(data=st.binary(max_size=2000))
def test_tool_import_of_arbitrary_bytes(tool, data, fuzz_store, tmp_path_factory):
    path = tmp_path_factory.mktemp("bytes") / "node01.out"
    path.write_bytes(data)
    try:
        import_tool_outputs(fuzz_store, tool, [path], label="node01")
    except (ParseError, InputError) as err:
        check_error(err)


# -- the profile readers --------------------------------------------------------

PROFILES = {"mpip": read_mpip_text, "itc": read_itc_text}


@pytest.mark.parametrize("kind", PROFILES)
@FUZZ
@given(text=st.text(max_size=2000))
def test_profile_readers_on_arbitrary_text(kind, text):
    profile_or_refuse(PROFILES[kind], text)


@pytest.mark.slow
@pytest.mark.parametrize("kind", PROFILES)
@FUZZ
@given(data=st.data())
def test_profile_readers_on_mutated_fixtures(kind, data):
    profile_or_refuse(PROFILES[kind], data.draw(fixture_texts(kind).flatmap(mutated)))


# -- long lines ------------------------------------------------------------------

# Lines that make a backtracking pattern take quadratic or cubic time when it
# lets two parts take the same characters (spaces, digits): a 16 MB line of
# them would hang the import.  At 100,000 characters a linear parse takes
# milliseconds, a quadratic one minutes.
LONG = 100_000
LONG_LINES = (
    "[" * LONG, "a" + " " * LONG + "b", "@ " + " " * LONG + ":", "@--- " + " -" * (LONG // 2) + "x",
    "# " + " " * LONG + "x", " Class = " + " " * LONG + "y", "1" * LONG, "!! Benchmark " + " " * LONG + "x",
    "1 " * (LONG // 2), "# OSU MPI " + "Test " * (LONG // 5) + "x", "correct " * (LONG // 8),
    "1 GLOBALOP " + "a " * (LONG // 2), "\t" * LONG + "x", "  0: 1 bytes 1 times --> " + "1" * LONG,
)
LONG_LINE_SECONDS = 2.0  # per parse: a thousand times what a linear parse takes


@pytest.mark.slow
@pytest.mark.parametrize("reader", [*TOOLS, *PROFILES])
def test_long_lines_take_linear_time(reader):
    parse = PROFILES.get(reader) or (lambda text, tool=reader: get_parser(tool)(text, "long.out"))
    lines = fixtures(reader)[0].read_text(errors="replace").splitlines()
    for at in range(0, len(lines) + 1, max(1, len(lines) // 6)):
        for long_line in LONG_LINES:
            started = time.perf_counter()
            try:
                parse("\n".join([*lines[:at], long_line, *lines[at:]]))
            except ParseError as err:
                check_error(err)
            assert time.perf_counter() - started < LONG_LINE_SECONDS, (at, long_line[:40])


# -- STAB directories -------------------------------------------------------------

STAB = {
    "plot.c.ppc64": "# STREAM triad\n2077.5 node001\n2069.0 node002 extra\n\n2031.4 node003\n",
    "plot.lat": "5.1 node001-node002\n5.3 node003-node004\n",
    "units.csv": "benchmark,unit,direction\nc.ppc64,MB/s,higher\nlat,usec,lower\n",
    "inventory.csv": "node,key,value\nnode001,bios_date,10/21/2004\nnode002,bios_date,09/02/2004\n",
    "topology.csv": "node,group\nnode001,bc01\nnode002,bc01\nnode003,bc02\n",
    "failed": "xhpl.ppc64.node483.3\n# comment\nxhpl.ppc64.node003.10\n",
    "nodes": "node[001-004] slots=2\nnode483\n",
}


@pytest.mark.slow
@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_stab_import_of_mutated_directories(fuzz_store, tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("results")
    for name, text in STAB.items():
        mutate = data.draw(st.sampled_from(("keep", "keep", "mutate", "bytes")), label=name)
        if mutate == "bytes":
            (directory / name).write_bytes(data.draw(st.binary(max_size=300), label=f"{name} bytes"))
            continue
        if mutate == "mutate":
            text = data.draw(mutated(text), label=f"{name} text")
        (directory / name).write_text(text, encoding="utf-8")
    try:
        import_stab(fuzz_store, [directory])
    except InputError as err:
        check_error(err)


# -- regressions: each once a traceback -------------------------------------------

def _fio() -> dict:
    return json.loads((FIXTURES / "fio" / "randread.json").read_text())


def _iperf3() -> dict:
    return json.loads((FIXTURES / "iperf3" / "tcp.json").read_text())


def _with(document: dict, path: tuple, value) -> str:
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return json.dumps(document)


@pytest.mark.parametrize(("tool", "text", "message"), [
    ("fio", _with(_fio(), ("jobs",), [1, 2]), r"job 1 is int 1, not an object"),
    ("fio", _with(_fio(), ("jobs", 0, "read", "bw_bytes"), None), r"read\.bw_bytes None is not a number"),
    ("fio", _with(_fio(), ("jobs", 0, "read", "bw_bytes"), "12"), r"read\.bw_bytes '12' is not a number"),
    ("fio", _with(_fio(), ("jobs", 0, "read", "lat_ns"), [1]), r"lat_ns is list"),
    ("fio", _with(_fio(), ("jobs", 0, "read", "io_bytes"), -5), r"io_bytes -5 is out of range"),
    ("fio", _with(_fio(), ("jobs", 0, "error"), 2**70), r"error \d+ is out of range"),
    ("fio", _with(_fio(), ("jobs", 0, "job options"), "x"), r"'job options' is str"),
    ("fio", json.dumps(_fio()).replace('"iops": ', '"iops": 1e999, "x": ', 1), r"'1e999' is out of range"),
    ("fio", json.dumps(_fio()).replace('"iops": ', '"iops": NaN, "x": ', 1), r"NaN is not a finite number"),
    ("fio", '{"fio version": "3", "jobs": ' + "[" * 100_000, r"nested"),
    ("fio", '{"fio version": "3", "jobs": ' + "[" * 70 + "]" * 70 + "}", r"nested deeper than 64"),
    ("iperf3", _with(_iperf3(), ("start",), []), r"start is list \[\], not an object"),
    ("iperf3", _with(_iperf3(), ("end", "sum_sent"), [1]), r"end\.sum_sent is list"),
    ("iperf3", _with(_iperf3(), ("end", "sum_sent", "bits_per_second"), None), r"bits_per_second None"),
    ("iperf3", _with(_iperf3(), ("start", "test_start"), 3), r"test_start is int"),
    ("iperf3", json.dumps(_iperf3()).replace('"bits_per_second":', '"bits_per_second": Infinity, "x":', 1),
     r"Infinity is not a finite number"),
])
def test_malformed_json_outputs_are_refused(tool, text, message):
    with pytest.raises(ParseError, match=message) as caught:
        get_parser(tool)(text, "out.json")
    check_error(caught.value)
    assert str(caught.value).startswith("out.json:")


def _replace(tool: str, name: str, old: str, new: str) -> str:
    text = (FIXTURES / tool / name).read_text()
    assert old in text, old
    return text.replace(old, new, 1)


NON_FINITE = ("nan", "inf", "-inf", "1e999")


@pytest.mark.parametrize("bad", NON_FINITE)
@pytest.mark.parametrize(("tool", "name", "anchor"), [
    ("stream", "stream_c.out", "Triad:"),
    ("stream", "stream_c.out", "Copy:           38910.5 "),
    ("imb", "IMB-MPI1_PingPong.out", "      4194304           10   "),
    ("osu", "osu_bw.out", "4194304"),
    ("npb", "cg.S.omp2.out", "Mop/s total     ="),
    ("hpcc", "hpccoutf.txt", "HPL_Tflops="),
    ("netpipe", "np.out", "       2 "),
    ("netpipe", "NPtcp.stdout", "13404 times -->"),
    ("netpipe", "NPtcp.stdout", "0.27 Mbps in"),
])
def test_non_finite_numbers_are_refused_with_the_line(tool, name, anchor, bad):
    """The first number after ``anchor`` replaced by nan, inf or 1e999: refused, naming its line."""
    text = (FIXTURES / tool / name).read_text()
    number = NUMBER.search(text, text.index(anchor) + len(anchor))
    text = text[:number.start()] + bad + text[number.end():]
    with pytest.raises(ParseError, match="not a finite number|not a number") as caught:
        get_parser(tool)(text, "x.out")
    assert caught.value.line == text.count("\n", 0, number.start()) + 1
    check_error(caught.value)


@pytest.mark.parametrize(("tool", "name", "old", "new", "message"), [
    ("stream", "stream_c.out", "Array size = 40000000", "Array size = " + "9" * 5000, "Array size|array_size"),
    ("stream", "stream_c.out", "Memory per array = 305.2", "Memory per array = 30.5.2", "memory_per_array_mib"),
    ("imb", "IMB-MPI1_PingPong.out", "#processes = 2", "#processes = " + "9" * 30, "#processes"),
    ("osu", "osu_bw.out", "4194304", "1e300", "bytes|size"),
    ("npb", "cg.S.omp2.out", "Iterations      =", "Iterations      = 1e99 ", "Iterations"),
    ("hpcc", "hpccoutf.txt", "HPL_N=4000", "HPL_N=abc", "HPL_N"),
    ("hpcc", "hpccoutf.txt", "MPIRandomAccess_ErrorsFraction=", "MPIRandomAccess_ErrorsFraction=x", "ErrorsFraction"),
    ("netpipe", "NPtcp.stdout", ":       1 bytes", ":       " + "9" * 5000 + " bytes", "bytes"),
])
def test_out_of_range_and_malformed_numbers_are_refused(tool, name, old, new, message):
    with pytest.raises(ParseError, match=message) as caught:
        get_parser(tool)(_replace(tool, name, old, new), "x.out")
    check_error(caught.value)


def test_hpcc_value_that_overflows_once_scaled_is_refused():
    text = _replace("hpcc", "hpccoutf.txt", "HPL_Tflops=", "HPL_Tflops=1e307\nX=")
    with pytest.raises(ParseError, match="HPL_Tflops .* not a finite number"):
        get_parser("hpcc")(text, "x.out")


@pytest.mark.slow
def test_a_16_mb_bad_line_is_quoted_short():
    text = (FIXTURES / "osu" / "osu_bw.out").read_text() + "4194304 " + "x" * 16_000_000 + "\n"
    with pytest.raises(ParseError) as caught:
        get_parser("osu")(text, "x.out")
    check_error(caught.value)


@pytest.mark.parametrize("bad", NON_FINITE)
@pytest.mark.parametrize(("kind", "name", "old"), [
    ("mpip", "ring_np2.mpiP", "   1         12          6    50.00"),
    ("mpip", "ring_np2.mpiP", "Send                 1    1   1000      6.1"),
])
def test_mpip_refuses_non_finite_numbers(kind, name, old, bad):
    fields = old.split()
    new = old.replace(fields[-1], bad) if kind == "mpip" else old
    text = _replace(kind, name, old, new)
    with pytest.raises(ParseError, match="not a finite number|expected a number") as caught:
        parse_mpip(text, "run.mpiP")
    assert caught.value.line == next(i for i, line in enumerate(text.splitlines(), 1) if new in line)


def test_mpip_rank_past_32_bits_is_refused():
    text = _replace("mpip", "ring_np2.mpiP", "   1         12          6    50.00", "2147483648  12  6  50.00")
    with pytest.raises(ParseError, match=r"Task '2147483648' is out of range") as caught:
        parse_mpip(text, "run.mpiP")
    assert caught.value.line == 21


def test_mpip_huge_count_is_refused_not_an_overflow():
    text = (FIXTURES / "mpip" / "ring_np2.mpiP").read_text()
    old = "Send                 1    1   1000      6.1"
    text = text.replace(old, old.replace("1000", "9" * 5000), 1)
    with pytest.raises(ParseError, match="Count") as caught:
        parse_mpip(text, "run.mpiP")
    check_error(caught.value)


@pytest.mark.parametrize(("record", "message"), [
    ("1 GLOBALOP MPI_Bcast ON 0:1 COM X(2) SENT 4 RECVD 4 DURATION " + "9" * 5000, "DURATION"),
    ("1 GLOBALOP MPI_Bcast ON 0:1 COM X(2) SENT 1e999 RECVD 4 DURATION 5", "SENT"),
    ("1 GLOBALOP MPI_Bcast ON 0:1 COM X(2) SENT 4 RECVD 4 DURATION 9223372036854775807", "seconds"),
    ("9" * 5000 + " GLOBALOP MPI_Bcast ON 0:1 COM X(2) SENT 4 RECVD 4 DURATION 5", "timestamp"),
    ("1 GLOBALOP MPI_Bcast ON 0:" + "9" * 30 + " COM X(2) SENT 4 RECVD 4 DURATION 5", "thread"),
    ("1 GLOBALOP MPI_Bcast ON 2147483648:1 COM X(2) SENT 4 RECVD 4 DURATION 5", "process"),  # past 32 bits
])
def test_itc_refuses_out_of_range_numbers(record, message):
    with pytest.raises(ParseError, match=message) as caught:
        read_itc_text(record + "\n")
    check_error(caught.value)
    assert caught.value.line == 1


@pytest.mark.parametrize("ticks", [math.nan, math.inf, 0.0, -1.0])
def test_itc_ticks_per_second_must_be_finite_and_positive(ticks):
    with pytest.raises(ValueError, match="ticks_per_second"):
        parse_itc("1 EXCHEXT CPU 0:1 DOWNTO \"MPI:Bcast\"\n", "d", ticks_per_second=ticks)


@pytest.mark.parametrize("reader", [read_mpip, lambda path: read_itc(path, ticks_per_second=1e6)])
def test_profile_readers_refuse_a_fifo_before_reading(reader, tmp_path):
    fifo = tmp_path / "report"
    os.mkfifo(fifo)
    with pytest.raises(ParseError, match="not a regular file"):
        reader(fifo)


def test_tool_import_refuses_a_fifo_before_reading(store, tmp_path):
    fifo = tmp_path / "node01.out"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        import_tool_outputs(store, "stream", [fifo], label="node01")


# -- STAB regressions ----------------------------------------------------------------

def _stab(tmp_path: Path, **files: str) -> Path:
    directory = tmp_path / "results"
    directory.mkdir()
    for name, text in {"plot.c": "1 node01\n2 node02\n", **files}.items():
        (directory / name.replace("_", ".")).write_text(text)
    return directory


@pytest.mark.parametrize(("name", "header"), [
    ("units.csv", "benchmark,unit,direction"), ("inventory.csv", "node,key,value"), ("topology.csv", "node,group")])
def test_stab_csv_field_over_the_csv_limit(store, tmp_path, name, header):
    directory = _stab(tmp_path)
    (directory / name).write_text(f"{header}\nnode01,\"{'x' * 200_000}\n")
    with pytest.raises(InputError, match=rf"{name}:2: not CSV: field larger than field limit") as caught:
        import_stab(store, [directory])
    check_error(caught.value)
    assert store.runs() == []


def test_stab_failed_run_number_past_32_bits(store, tmp_path):
    directory = _stab(tmp_path)
    (directory / "failed").write_text("# runs\nxhpl.ppc64.node483.99999999999\n")
    with pytest.raises(InputError, match=r"failed:2: run number '99999999999' .* out of range"):
        import_stab(store, [directory])
    assert store.runs() == []


@pytest.mark.parametrize("bad", NON_FINITE)
def test_stab_plot_values_must_be_finite(store, tmp_path, bad):
    directory = _stab(tmp_path, plot_d=f"1 node01\n{bad} node02\n")
    with pytest.raises(InputError, match=r"plot\.d:2: value .* not finite"):
        import_stab(store, [directory])


@pytest.mark.slow
def test_stab_16_mb_bad_line_is_quoted_short(store, tmp_path):
    directory = _stab(tmp_path, plot_d="x" * 16_000_000 + " node01\n")
    with pytest.raises(InputError, match=r"plot\.d:1: value 'xxx") as caught:
        import_stab(store, [directory])
    check_error(caught.value)


@pytest.mark.parametrize("name", ["units.csv", "failed", "nodes", "plot.d"])
def test_stab_refuses_a_fifo_before_reading(store, tmp_path, name):
    directory = _stab(tmp_path)
    os.mkfifo(directory / name)
    with pytest.raises(InputError, match="not a regular file"):
        import_stab(store, [directory])


def test_stab_refuses_a_fifo_given_as_a_plot_file(store, tmp_path):
    fifo = tmp_path / "plot.c"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        import_stab(store, [fifo])


# -- the command line: exit 2 and one line -------------------------------------------

@pytest.mark.parametrize(("command", "name", "text"), [
    (["import", "fio"], "node01.json", _with(_fio(), ("jobs",), [1, 2])),
    (["import", "iperf3"], "node01.json", _with(_iperf3(), ("start",), [])),
    (["import", "stream"], "node01.out", _replace("stream", "stream_c.out", "Triad:          44164.1",
                                                  "Triad:          inf")),
    (["import", "mpip"], "run.mpiP", _replace("mpip", "ring_np2.mpiP", "   1         12 ", "   1        nan ")),
    (["import", "itc", "--ticks-per-second", "1e6"], "run.dump",
     "1 GLOBALOP MPI_Bcast ON 0:1 SENT 1e999 RECVD 4 DURATION 5\n"),
])
def test_the_command_line_says_one_line_and_exits_2(tmp_path, command, name, text):
    from support.cli import invoke

    path = tmp_path / name
    path.write_text(text)
    label = ["--label", "node01"] if command[1] not in ("mpip", "itc") else ["--json"]
    result = invoke(*command, path, *label, "--db", tmp_path / "s.duckdb")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1, result.output
    assert "Traceback" not in result.output and "NaN" not in result.output and "Infinity" not in result.output
