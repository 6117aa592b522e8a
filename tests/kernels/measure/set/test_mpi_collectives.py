"""The MPI collectives kernel, built with mpicc by the node runner and run as
two and three ranks on this machine by Open MPI's mpirun: every benchmark
and size measured and checked, a rank that spoils what it sends named with
its node; the kernel's refusals; the argv checks; the parser on genuine
output (tests/fixtures/mpi_collectives) and on broken output.  No timing is
asserted beyond what any run must satisfy."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess

import pytest

from oddnode.reach.jobs import decode_job, encode_job, parse_runner_output
from oddnode.measure.set.collectives import (
    CORRUPT_RANK_VARIABLE,
    DEFAULT_BENCHMARKS,
    MAX_SIZE,
    MAX_SIZES,
    check_benchmarks,
    collectives_argv,
    collectives_launcher,
    parse_collectives_run,
    round_plan,
    run_seconds,
)
from oddnode.parsers.oddnode_mpi_collectives import (
    BENCHMARKS,
    TOOL,
    allreduce_sizes,
    benchmark_sizes,
    parse_collectives_output,
    plan_sections,
)
from oddnode.core.model import Direction
from oddnode.parsers.base import ParseError
from oddnode.core.units import canonical_unit
from support.kernels import assert_cuts_said, run_alone
from support.kernels import local_launcher
from support.cli import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "mpi_collectives"
SIZES = [0, 1, 8, 4096, 65536]
SECONDS_PER_SIZE = 0.02
US, MB_PER_S = canonical_unit("us"), canonical_unit("MB/s")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def local_argv(ranks: int, sizes=SIZES, nodes: list[str] | None = None) -> list[str]:
    # One distinct name per rank, as the argv wants; the launcher puts them all here.
    nodes = nodes or [f"rank{r}.localhost" for r in range(ranks)]
    return collectives_argv(nodes, BENCHMARKS, sizes=sizes, seconds_per_size=SECONDS_PER_SIZE,
                            launcher=local_launcher(ranks))


def job_spec(argv: list[str]) -> dict:
    return decode_job(argv[-1])


def result_lines(text: str) -> dict[tuple[str, int], list[str]]:
    """(benchmark, bytes) -> the words of its result line."""
    return {(w[1], int(w[2])): w for w in (line.split() for line in text.splitlines()) if w[:1] == ["result"]}


# --- real runs on this machine ----------------------------------------------------


@pytest.fixture(scope="module")
def mpi_env(tmp_path_factory):
    """A private build cache, where mpicc can build an MPI program."""
    missing = [tool for tool in ("mpicc", "mpirun") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} on PATH (Debian: openmpi-bin, libopenmpi-dev)")
    tmp = tmp_path_factory.mktemp("mpi_collectives")
    source = tmp / "check.c"
    source.write_text("#include <mpi.h>\nint main(int c, char **v){MPI_Init(&c, &v); return MPI_Finalize();}\n")
    built = subprocess.run(["mpicc", "-o", str(tmp / "check"), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, f"mpicc cannot build an MPI program: {built.stderr.strip()[:300]}"
    return dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))


def assert_complete(parsed, ranks: int) -> None:
    """Every benchmark at every size it runs, with numbers any run has."""
    assert parsed.configuration["processes"] == ranks and len(parsed.configuration["ranks"]) == ranks
    assert parsed.configuration["mpi_library"].startswith("Open MPI")
    assert parsed.configuration["compiler"] and parsed.configuration["cache_key"]
    times = {(m.benchmark, m.parameters["bytes"]): m for m in parsed.measurements if m.unit == US}
    assert sorted(times) == sorted((b, s) for b in BENCHMARKS for s in benchmark_sizes(b, SIZES))
    for (benchmark, size), m in times.items():
        assert 0 <= m.value <= m.parameters["median_us"] < 1e6, m
        assert m.parameters["iterations"] >= m.parameters["batches"], m
        if size > 0:
            assert m.value > 0, m
    assert_cuts_said(parsed)
    rates = sorted((m.benchmark, m.parameters["bytes"]) for m in parsed.measurements if m.unit == MB_PER_S)
    assert rates == sorted((b, s) for b in BENCHMARKS if b != "barrier" for s in benchmark_sizes(b, SIZES) if s > 0)


def test_two_ranks_run_every_benchmark_and_size_and_check_their_data(mpi_env):
    parsed = parse_collectives_run(run_alone(local_argv(2), mpi_env), "np2")
    assert parsed.valid, parsed.problems
    assert_complete(parsed, 2)
    assert "corrupt_rank" not in parsed.configuration


def test_three_ranks_run_every_benchmark_and_size_and_check_their_data(mpi_env):
    parsed = parse_collectives_run(run_alone(local_argv(3), mpi_env), "np3")
    assert parsed.valid, parsed.problems
    assert_complete(parsed, 3)


def test_a_size_out_of_time_ends_after_one_batch_and_says_so(mpi_env):
    # A millisecond cannot hold a warm-up call and a batch of 10 ms.
    argv = collectives_argv(["rank0.localhost", "rank1.localhost"], ["sendrecv", "allreduce"], sizes=[8, 65536],
                            seconds_per_size=1e-3, launcher=local_launcher(2))
    parsed = parse_collectives_run(run_alone(argv, mpi_env), "cut")
    assert parsed.valid, parsed.problems
    assert {m.parameters["batches"] for m in parsed.measurements} == {1}
    assert sorted(parsed.configuration["warnings"]) == sorted(
        f"{benchmark} size {size}: cut by its time of 0.001 s after 1 of 10 timed batches"
        for benchmark in ("sendrecv", "allreduce") for size in (8, 65536))
    assert_cuts_said(parsed)


def test_a_rank_that_spoils_what_it_sends_is_named_by_the_ranks_that_received_it(mpi_env):
    env = dict(mpi_env, **{CORRUPT_RANK_VARIABLE: "1"})
    parsed = parse_collectives_run(run_alone(local_argv(3), env), "np3-corrupt")
    assert not parsed.valid
    assert all(not m.valid for m in parsed.measurements)
    assert parsed.configuration["corrupt_rank"] == 1
    host = parsed.configuration["ranks"][1]
    # Rank 1 spoils the first timed batch of every size with data.
    spoilt = {b: sum(size > 0 for size in benchmark_sizes(b, SIZES))
              for b in ("sendrecv", "allreduce", "alltoall", "bcast")}
    seen = {(f["benchmark"], f["rank"]): f for f in parsed.configuration["validation_failures"]}
    # The chain's rank 1 sends to rank 2; its alltoall blocks go to 0 and 2
    # (not to itself); its allreduce term spoils every rank's sum; as the
    # batch's first root it broadcasts its spoilt message to all, itself too.
    assert sorted(seen) == [("allreduce", 0), ("allreduce", 1), ("allreduce", 2),
                            ("alltoall", 0), ("alltoall", 2), ("bcast", 0), ("bcast", 1), ("bcast", 2),
                            ("sendrecv", 2)]
    for (benchmark, _), failure in seen.items():
        assert failure["bad"] == spoilt[benchmark] and failure["checked"] > failure["bad"], failure
        if benchmark != "allreduce":
            assert (failure["from_rank"], failure["from_host"]) == (1, host), failure
    sendrecv = next(p for p in parsed.problems if p.startswith("sendrecv:"))
    assert f"rank 2 on {parsed.configuration['ranks'][2]} received bad data" in sendrecv
    assert f"rank 1 on {host}" in sendrecv
    assert sum(f"a bad block from rank 1 on {host}" in p for p in parsed.problems) == 2
    assert sum(f"a bad broadcast from its root, rank 1 on {host}" in p for p in parsed.problems) == 3


def test_one_launch_runs_every_set_of_every_round_of_a_plan_each_as_a_run_of_its_own(mpi_env):
    nodes = [f"rank{r}.localhost" for r in range(4)]
    rounds = [[nodes[0:2], nodes[2:4]], [[nodes[3], nodes[1]]], [[nodes[2], nodes[0]]]]
    argv = collectives_argv(nodes, BENCHMARKS, sizes=SIZES, seconds_per_size=SECONDS_PER_SIZE,
                            launcher=local_launcher(4), rounds=rounds)
    assert job_spec(argv)["args"][-2:] == ["-P", "0,1;2,3/3,1/2,0"]
    report = parse_runner_output("plan", run_alone(argv, mpi_env))
    assert report.returncode == 0, report.stderr
    sections = plan_sections(report.stdout, "plan", complete=True)
    assert sorted(sections) == [(1, 1), (1, 2), (2, 1), (3, 1)]
    # Each section is what a launch of that set alone prints: the set's
    # ranks in its order (a rank's host is this machine's name for all).
    for (number, index), text in sections.items():
        members = rounds[number - 1][index - 1]
        parsed = parse_collectives_output(text, f"round {number} set {index}")
        assert parsed.valid, parsed.problems
        assert parsed.configuration["processes"] == len(members)
        assert_complete(dataclasses.replace(parsed, configuration={
            **parsed.configuration, "compiler": report.compiler, "cache_key": report.cache_key}), len(members))


def test_a_plan_names_each_set_s_own_spoiling_rank(mpi_env):
    nodes = [f"rank{r}.localhost" for r in range(4)]
    argv = collectives_argv(nodes, ["sendrecv"], sizes=[64], seconds_per_size=SECONDS_PER_SIZE,
                            launcher=local_launcher(4), rounds=[[nodes[0:2], nodes[2:4]]])
    report = parse_runner_output("plan", run_alone(argv, dict(mpi_env, **{CORRUPT_RANK_VARIABLE: "1"})))
    for index, text in sorted(plan_sections(report.stdout, "plan", complete=True).items()):
        parsed = parse_collectives_output(text, f"set {index}")
        assert not parsed.valid
        assert {(f["rank"], f["from_rank"]) for f in parsed.configuration["validation_failures"]} == {(0, 1)}


@pytest.mark.parametrize("ranks, env, args, status, message", [
    (1, {}, [], 3, "run as two or more MPI ranks (mpirun -np K, K >= 2), not 1"),
    (2, {CORRUPT_RANK_VARIABLE: "2"}, [], 2, "ODDNODE_CORRUPT_RANK wants a rank number below the ranks' count"),
    (2, {}, ["-s", "8,8"], 2, "-s wants a comma list of distinct sizes"),
    (2, {}, ["-b", "sendrecv,gather"], 2, "-b wants a comma list of distinct benchmarks"),
    (2, {}, ["-T", "0"], 2, "-T wants seconds per size"),
    (2, {}, ["-P", "0,2"], 2, "-P wants rounds split by '/' of sets split by ';' of two or more distinct ranks"),
    (2, {}, ["-P", "0,1/0,0"], 2, "-P wants rounds"),
    (2, {}, ["-P", "0,1;"], 2, "-P wants rounds"),
    (2, {}, ["-P", "0/"], 2, "-P wants rounds"),
])
def test_the_kernel_refuses_what_it_cannot_run(mpi_env, ranks, env, args, status, message):
    spec = job_spec(local_argv(2))
    spec["launcher"] = local_launcher(ranks)
    spec["args"] = args or spec["args"]
    argv = local_argv(2)[:-1] + [encode_job(spec)]
    stdout = run_alone(argv, dict(mpi_env, **env))
    report = parse_runner_output("refused", stdout)
    assert report.returncode == status, report.stderr
    assert message in report.stderr
    with pytest.raises(ParseError, match=f"mpi_collectives kernel exited with status {status}: .*{re.escape(message)}"):
        parse_collectives_run(stdout, "refused")


# --- the argv ---------------------------------------------------------------------


def test_the_argv_builds_with_mpicc_and_starts_one_rank_per_node_in_their_order():
    spec = job_spec(collectives_argv(["node03", "node01", "node02"], ["barrier", "sendrecv"], [0, 8, 1024], 0.05))
    assert spec["kernel"] == "mpi_collectives" and spec["compiler"] == "mpicc"
    assert spec["launcher"] == ["mpirun", "-np", "3", "--host", "node03,node01,node02", "--map-by", "node"]
    # Benchmarks in the kernel's own order, whatever order they were given in.
    assert spec["args"] == ["-b", "sendrecv,barrier", "-s", "0,8,1024", "-T", "0.05"]
    assert spec["env"] == {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert spec["timeout"] > run_seconds(["sendrecv", "barrier"], [0, 8, 1024], 0.05, ranks=3)
    # One self-contained source: the package's headers pasted in.
    assert '#include "oddnode_' not in spec["source"] and "static inline uint64_t mix64" in spec["source"]


def test_a_plan_is_the_ranks_of_each_set_of_each_round_in_the_launch_s_order():
    nodes = ["node03", "node01", "node02", "node04"]
    assert round_plan(nodes, [[["node01", "node03"], ["node04", "node02"]], [["node02", "node03", "node01"]]]) == \
        "1,0;3,2/2,0,1"
    for rounds, match in (([[["node01", "node05"]]], "node05 not among the launch's nodes"),
                          ([[["node01", "node02"], ["node02", "node03"]]], "each node in one set at most"),
                          ([[["node01"]]], "each set of two or more"), ([[]], "round 1 of the plan has no set")):
        with pytest.raises(ValueError, match=match):
            round_plan(nodes, rounds)
    spec = job_spec(collectives_argv(nodes, ["sendrecv"], [8], 0.05, rounds=[[nodes[:2], nodes[2:]]] * 3))
    assert spec["args"][-2:] == ["-P", "0,1;2,3/0,1;2,3/0,1;2,3"]
    # The launch's timeout holds every round's.
    assert spec["timeout"] > 3 * run_seconds(["sendrecv"], [8], 0.05, ranks=2)
    # Sets of two are bound to a core each, as Open MPI binds a launch of two
    # ranks; larger ones as it binds larger launches; never both in one launch.
    assert spec["launcher"][:5] == ["mpirun", "-np", "4", "--bind-to", "core"]
    spec = job_spec(collectives_argv(nodes, ["sendrecv"], [8], 0.05, rounds=[[nodes[:3]], [nodes]]))
    assert "--bind-to" not in spec["launcher"]
    with pytest.raises(ValueError, match="rounds of pairs or rounds of larger sets, not both"):
        collectives_argv(nodes, ["sendrecv"], [8], 0.05, rounds=[[nodes[:2]], [nodes[:3]]])


def test_the_launcher_reaches_the_nodes_as_told():
    assert collectives_launcher(["a", "b"], "ssh -F /etc/cluster/ssh_config")[-3:] == [
        "--mca", "plm_rsh_agent", "ssh -F /etc/cluster/ssh_config"]
    assert collectives_launcher(["a", "b"], hostfile=True) == ["mpirun", "-np", "2", "--map-by", "node"]


@pytest.mark.parametrize("nodes, match", [
    (["node01"], "two or more nodes, got 1"),
    ([], "two or more nodes, got 0"),
    (["node01", "node02", "node01"], "must be distinct"),
    (["node01", "-node02"], "a host name or an address"),
    (["node01", "node02,node03"], "a host name or an address"),
    (["node01", "node 02"], "a host name or an address"),
    (["node01", ""], "a host name or an address"),
    (["node01", None], "a host name or an address"),
])
def test_bad_node_lists_are_refused(nodes, match):
    with pytest.raises(ValueError, match=match):
        collectives_argv(nodes)


@pytest.mark.parametrize("benchmarks", [["gather"], [], ["sendrecv", "sendrecv"], ["Sendrecv"]])
def test_unknown_or_repeated_benchmarks_are_refused(benchmarks):
    with pytest.raises(ValueError, match="distinct names of sendrecv, allreduce, alltoall, bcast, barrier"):
        collectives_argv(["a", "b"], benchmarks)


@pytest.mark.parametrize("sizes, match", [
    ([], "1 to 64 message sizes, got 0"),
    (list(range(MAX_SIZES + 1)), "1 to 64 message sizes, got 65"),
    ([-1], "whole bytes 0-67108864"),
    ([MAX_SIZE + 1], "whole bytes 0-67108864"),
    ([1.5], "whole bytes"),
    ([True], "whole bytes"),
    (["8"], "whole bytes"),
    ([8, 16, 8], "distinct"),
])
def test_sizes_out_of_range_are_refused(sizes, match):
    with pytest.raises(ValueError, match=match):
        collectives_argv(["a", "b"], sizes=sizes)


@pytest.mark.parametrize("seconds", [0, -0.1, 3600.5, float("nan"), True, "0.2"])
def test_seconds_per_size_out_of_range_are_refused(seconds):
    with pytest.raises(ValueError, match="seconds_per_size must be > 0 and <= 3600"):
        collectives_argv(["a", "b"], seconds_per_size=seconds)


def test_the_largest_sizes_and_longest_seconds_are_accepted():
    spec = job_spec(collectives_argv(["a", "b"], sizes=[0, MAX_SIZE], seconds_per_size=3600))
    assert spec["args"][-4:] == ["-s", f"0,{MAX_SIZE}", "-T", "3600"]


def test_allreduce_runs_whole_doubles_each_once_and_the_barrier_no_size():
    assert allreduce_sizes([0, 1, 8, 12, 9, 16, 4096]) == [0, 8, 16, 4096]
    assert benchmark_sizes("barrier", [1, 2, 3]) == [0]
    assert benchmark_sizes("alltoall", [3, 1]) == [3, 1]
    assert check_benchmarks(["barrier", "alltoall", "sendrecv"]) == ["sendrecv", "alltoall", "barrier"]


# --- the parser on genuine output -------------------------------------------------


def test_the_parser_reads_two_ranks_every_benchmark_and_size():
    text = fixture("np2.out")
    parsed = parse_collectives_output(text, "np2.out")
    assert parsed.valid and parsed.problems == [] and parsed.tool == TOOL
    config = parsed.configuration
    host = config["ranks"][0]
    assert config["ranks"] == [host, host] and config["processes"] == 2
    assert config["benchmarks"] == list(DEFAULT_BENCHMARKS)
    assert config["sizes"] == [0] + [2**k for k in range(23)]
    assert config["allreduce_sizes"] == [0] + [2**k for k in range(3, 23)]
    lines = result_lines(text)
    assert len(parsed.measurements) == len(lines) + sum(b != "barrier" and s > 0 for b, s in lines)
    factor = {"sendrecv": 2, "allreduce": 1, "alltoall": 1}  # alltoall: bytes * (2 ranks - 1)
    for m in parsed.measurements:
        words = lines[m.benchmark, m.parameters["bytes"]]
        size, min_us, median_us = int(words[2]), float(words[4]), float(words[5])
        assert m.parameters["median_us"] == median_us and m.parameters["ranks"] == 2
        assert (m.parameters["iterations"], m.parameters["batches"]) == (int(words[3]), int(words[6]))
        if m.unit == US:
            assert m.metric == ("time" if m.benchmark == "barrier" else f"time.{size}")
            assert m.value == min_us and m.direction is Direction.LOWER
        else:
            assert m.unit == MB_PER_S and m.metric == f"bandwidth.{size}" and m.direction is Direction.HIGHER
            assert m.value == pytest.approx(factor[m.benchmark] * size / min_us)
            assert m.parameters["median_MBps"] == pytest.approx(factor[m.benchmark] * size / median_us)
    by_metric = {(m.benchmark, m.metric): m for m in parsed.measurements}
    assert ("sendrecv", "bandwidth.0") not in by_metric and ("barrier", "time") in by_metric
    assert ("allreduce", "time.4") not in by_metric  # rounded down to 0, run once


def test_the_parser_reads_three_ranks_and_their_bandwidths():
    text = fixture("np3.out")
    parsed = parse_collectives_output(text, "np3.out")
    assert parsed.valid and len(parsed.configuration["ranks"]) == 3
    by_metric = {(m.benchmark, m.metric): m for m in parsed.measurements}
    alltoall = by_metric["alltoall", "bandwidth.65536"]
    assert alltoall.value == pytest.approx(2 * 65536 / float(result_lines(text)["alltoall", 65536][4]))
    assert alltoall.parameters["formula"] == "bytes*(ranks-1)/time"


def test_a_validation_failure_makes_the_run_invalid_and_names_rank_host_and_sender():
    parsed = parse_collectives_output(fixture("np3_corrupt_rank1.out"), "corrupt")
    assert not parsed.valid and all(not m.valid for m in parsed.measurements)
    hosts = parsed.configuration["ranks"]
    failures = parsed.configuration["validation_failures"]
    assert [(f["benchmark"], f["rank"], f.get("from_rank")) for f in failures] == [
        ("sendrecv", 2, 1), ("allreduce", 0, None), ("allreduce", 1, None), ("allreduce", 2, None),
        ("alltoall", 0, 1), ("alltoall", 2, 1)]
    assert len(parsed.problems) == len(failures)
    assert parsed.problems[0].startswith(f"sendrecv: rank 2 on {hosts[2]} received bad data from its left "
                                         f"neighbour, rank 1 on {hosts[1]}, in 5 of ")
    assert f"alltoall: rank 0 on {hosts[0]} received a bad block from rank 1 on {hosts[1]} in 5 of" in \
        parsed.problems[4]
    assert "allreduce: rank 1 on" in parsed.problems[2] and "got a wrong sum in 4 of" in parsed.problems[2]
    assert parsed.configuration["failing_nodes"] == sorted(set(hosts))


def test_the_runner_report_adds_the_build_to_the_kernels_output():
    text = fixture("np2_runner_report.json")
    parsed = parse_collectives_run(text, "np2_runner_report.json")
    report = parse_runner_output("np2", text)
    alone = parse_collectives_output(report.stdout, "np2")
    assert parsed.valid and parsed.measurements == alone.measurements
    assert parsed.configuration["compiler"] == report.compiler and parsed.configuration["built"] == report.built
    assert parsed.configuration["flags"] == report.flags
    failed = json.loads(text)
    failed["returncode"] = 1
    parsed = parse_collectives_run(json.dumps(failed), "exit1")
    assert not parsed.valid and parsed.problems == ["mpi_collectives kernel exited with status 1"]


# --- the parser on broken output --------------------------------------------------


def line_of(text: str, start: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if line.startswith(start))


def test_truncated_output_is_refused_naming_what_is_missing():
    text = fixture("np3.out")
    cut = text[:text.index("result alltoall 65536")]
    with pytest.raises(ParseError, match="no result line for alltoall 65536 bytes, alltoall 1048576 bytes, "
                                         "barrier 0 bytes") as error:
        parse_collectives_output(cut, "cut")
    assert error.value.line == len(cut.splitlines())
    no_verdict = text[:text.index("validation ok")]
    with pytest.raises(ParseError, match="no validation line") as error:
        parse_collectives_output(no_verdict, "cut")
    assert error.value.line == len(no_verdict.splitlines())
    with pytest.raises(ParseError, match="lacks 'allreduce_sizes'"):
        parse_collectives_output(text[:text.index("# allreduce_sizes")], "cut")


@pytest.mark.parametrize("text", [
    "",
    "Segmentation fault\n",
    "\x00\xff garbage \x1b[0m\n" * 3,
    (ALL_FIXTURES / "imb" / "IMB-MPI1_Sendrecv_np2.out").read_text(),
    "# oddnode mpi_pingpong kernel v1\n# mode: ping\nresult 0 13724 6.444 7.053 146\nvalidation ok\n",
])
def test_garbage_or_another_tools_output_is_refused(text):
    with pytest.raises(ParseError, match="not oddnode mpi_collectives kernel output"):
        parse_collectives_output(text, "foreign")


def edited(text: str, start: str, replacement: str) -> tuple[str, int]:
    """The text with the line that starts with ``start`` replaced (it may
    hold several lines); the replaced line's number."""
    lines = text.splitlines()
    at = line_of(text, start)
    lines[at - 1:at] = replacement.splitlines()
    return "\n".join(lines) + "\n", at


@pytest.mark.parametrize("start, replacement, offset, match", [
    # A foreign line among the results.
    ("result allreduce 8 ", "ORTE: a rank died\n{line}", 0, "unexpected line in mpi_collectives kernel output"),
    # A size the header does not run; sendrecv does run 1, allreduce does not.
    ("result sendrecv 8 ", "{line3}", 0, "a result of sendrecv at 3 bytes, a size it does not run"),
    ("result allreduce 8 ", "{line1}", 0, "a result of allreduce at 1 bytes, a size it does not run"),
    ("result alltoall 8 ", "{line}\n{line}", 1, "a second result of alltoall at 8 bytes"),
    ("result barrier 0 ", "{line}\nresult barrier 0 10 1.0 2.0 10", 1, "a second result of barrier at 0 bytes"),
    ("result sendrecv 8 ", "{short}", 0, "a result line has 7 fields, found 6"),
    ("result sendrecv 8 ", "{slow}", 0, "implausible result"),
    ("result sendrecv 8 ", "{word}", 0, "expected a number, found 'fast'"),
    ("validation ok", "validation ok\nvalidation ok", 1, "a line after the validation verdict"),
    ("validation ok", "validation ok\n{first}", 1, "a line after the validation verdict"),
    ("# rank: 1 ", "# rank: 2 vm", 0, "rank lines out of order: rank 2 where rank 1 belongs"),
    ("# benchmarks:", "# benchmarks: sendrecv,gather", 0, "benchmarks must be distinct names"),
    ("# allreduce_sizes:", "# allreduce_sizes: 0,1,8", 0, "are not the sizes' whole doubles"),
])
def test_a_broken_line_is_refused_naming_it(start, replacement, offset, match):
    text = fixture("np3.out")
    line = next(line for line in text.splitlines() if line.startswith(start))
    words = line.split()
    replacement = replacement.format(
        line=line, line3=" ".join(words[:2] + ["3"] + words[3:]), line1=" ".join(words[:2] + ["1"] + words[3:]),
        short=" ".join(words[:6]), slow=" ".join(words[:4] + ["9.0", "1.0"] + words[6:]),
        word=" ".join(words[:4] + ["fast"] + words[5:]), first=text.splitlines()[line_of(text, "result ") - 1])
    broken, at = edited(text, start, replacement)
    with pytest.raises(ParseError, match=match) as error:
        parse_collectives_output(broken, "broken")
    assert error.value.line == at + offset


@pytest.mark.parametrize("edit, match", [
    (lambda line: line.replace("from_rank=1", "from_rank=7"), "from_rank=7 from_host=.* is not a rank"),
    (lambda line: line.replace("rank=2 host=", "rank=2 host=elsewhere"), "host=elsewhere.* is not a rank"),
    (lambda line: line.replace(" batch=", " "), "has the fields rank, host, from_rank, from_host, bad"),
    (lambda line: line.replace("bad=", "bad=x"), "expected a whole number"),
    (lambda line: line + "\n" + line, "a second sendrecv failure of rank 2"),
    (lambda line: line + "\nvalidation ok", "both 'validation ok' and validation failures"),
    (lambda line: line + "\nresult sendrecv 8 10 1.0 2.0 10", "a line after the validation verdict"),
    (lambda line: line.replace("sendrecv", "barrier"), "a validation failure of no benchmark run with data"),
])
def test_a_broken_validation_failure_is_refused_naming_its_line(edit, match):
    text = fixture("np3_corrupt_rank1.out")
    start = "validation failed sendrecv"
    line = next(line for line in text.splitlines() if line.startswith(start))
    broken, at = edited(text, start, edit(line))
    with pytest.raises(ParseError, match=match) as error:
        parse_collectives_output(broken, "broken")
    assert error.value.line in (at, at + 1)
