"""The least-squares line of stored series (``oddnode fit``) on the real
IMB, OSU and NetPIPE outputs in tests/fixtures, checked against numpy's
polyfit on points read from the files by the test itself."""

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from oddnode.main import app
from oddnode.readings.fit import MAX_RELATIVE_ERROR, fit_sized_times, fit_table, fittable_benchmarks, sized_times
from oddnode.store.tool_import import import_tool_outputs
from oddnode.core.model import Direction, LabelKind
from oddnode.store import ResultBatch, open_store
from support.cli import FIXTURES

pytestmark = pytest.mark.slow

IMB_PINGPONG = FIXTURES / "imb" / "IMB-MPI1_PingPong.out"
OSU_LATENCY = FIXTURES / "osu" / "osu_latency.out"
OSU_BW = FIXTURES / "osu" / "osu_bw.out"
NETPIPE = FIXTURES / "netpipe" / "NPtcp.stdout"
PAIR = "cn-a17-cn-b02"


def imb_rows(path):
    """(bytes, t[usec], Mbytes/sec) of the PingPong table, read here without the parser."""
    rows = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 4 and all(re.fullmatch(r"[\d.]+", f) for f in fields):
            rows.append((int(fields[0]), float(fields[2]), float(fields[3])))
    return rows


def osu_rows(path):
    return [(int(a), float(b)) for a, b in (line.split() for line in path.read_text().splitlines()
                                            if re.fullmatch(r"\d+\s+[\d.]+", line.strip()))]


def netpipe_rows(path):
    found = re.findall(r"(\d+) bytes\s+\d+ times -->\s+[\d.]+ Mbps in\s+([\d.]+) usec", path.read_text())
    return [(int(size), float(usec)) for size, usec in found]


def expected_line(sizes, times):
    """numpy's weighted polyfit: it minimises sum((w * (t - a - b*s))^2), with w = 1/t the relative residuals."""
    s, t = np.asarray(sizes, float), np.asarray(times, float)
    b, a = np.polyfit(s, t, 1, w=1.0 / t)
    fitted = a + b * s
    w2 = 1.0 / t**2
    mean = np.sum(w2 * t) / np.sum(w2)
    r2 = 1.0 - np.sum(w2 * (t - fitted) ** 2) / np.sum(w2 * (t - mean) ** 2)
    failing = sorted(int(x) for x, f, y in zip(s, fitted, t) if abs((f - y) / y) > MAX_RELATIVE_ERROR)
    return a, 1.0 / b, r2, failing


@pytest.fixture
def imported_db(tmp_path):
    path = tmp_path / "fit.duckdb"
    with open_store(path) as s:
        import_tool_outputs(s, "imb", [IMB_PINGPONG, FIXTURES / "imb" / "IMB-MPI1_Alltoall_np2.out"], label=PAIR)
        import_tool_outputs(s, "osu", [OSU_LATENCY], label=PAIR)
        import_tool_outputs(s, "osu", [OSU_BW], label=PAIR)
        import_tool_outputs(s, "netpipe", [NETPIPE], label="gpu003-gpu010")
    return path


def dataset(path):
    with open_store(path, read_only=True) as s:
        return s.load_dataset()


@pytest.mark.parametrize(("benchmark", "rows", "low", "high"), [
    ("imb.pingpong", [(s, t) for s, t, _ in imb_rows(IMB_PINGPONG)], 4096, None),
    ("imb.pingpong", [(s, t) for s, t, _ in imb_rows(IMB_PINGPONG)], None, 2048),
    ("osu.latency", osu_rows(OSU_LATENCY), 1024, 1048576),
    ("netpipe.tcp", netpipe_rows(NETPIPE), 1024, None),
    ("netpipe.tcp", netpipe_rows(NETPIPE), None, None),
])
def test_fit_of_imported_runs_matches_polyfit(imported_db, benchmark, rows, low, high):
    points = sized_times(dataset(imported_db).series, benchmark)
    assert points.quantity == "latency"
    assert list(points.sizes) == [s for s, _ in rows] and list(points.times_us) == pytest.approx([t for _, t in rows])
    fit = fit_sized_times(points, low, high)
    chosen = [(s, t) for s, t in rows if (low is None or s >= low) and (high is None or s <= high)]
    latency, bandwidth, r2, failing = expected_line(*zip(*chosen))
    assert fit.latency_us == pytest.approx(latency, rel=1e-7)
    assert fit.bandwidth_mb_s == pytest.approx(bandwidth, rel=1e-7)
    assert fit.r_squared == pytest.approx(r2, rel=1e-9)
    assert fit.failing_sizes == failing
    assert fit.points == len(chosen) and fit.size_range == (chosen[0][0], chosen[-1][0])


def test_bandwidth_only_series_is_fitted_on_bytes_over_bandwidth(imported_db):
    rows = osu_rows(OSU_BW)
    points = sized_times(dataset(imported_db).series, "osu.bw")
    assert points.quantity == "bandwidth"
    # 1 MB/s = 10^6 B/s = 1 byte/us: a size over its bandwidth is microseconds.
    times = [size / bw for size, bw in rows]
    assert list(points.times_us) == pytest.approx(times)
    fit = fit_sized_times(points, 8192)
    chosen = [(s, t) for s, t in zip([s for s, _ in rows], times) if s >= 8192]
    latency, bandwidth, _, _ = expected_line(*zip(*chosen))
    assert fit.latency_us == pytest.approx(latency, rel=1e-7)
    assert fit.bandwidth_mb_s == pytest.approx(bandwidth, rel=1e-7)


def test_imb_eager_to_rendezvous_switch_is_named(imported_db):
    # IMB's PingPong jumps from 0.30 us at 2 KiB to 2.64 us at 4 KiB: Open MPI's
    # shared-memory transport leaves its eager protocol there.
    fit = fit_sized_times(sized_times(dataset(imported_db).series, "imb.pingpong"), 512, 262144)
    assert fit.poor and 4096 in fit.failing_sizes
    assert fit.switch is not None and (fit.switch.last_below, fit.switch.first_above) == (2048, 4096)
    table = fit_table(fit)
    assert "the line fails at" in table and "4096" in table.split("the line fails at")[1]
    assert re.search(r"r\^2 = 0\.\d{6} \(weighted", table)


def test_collectives_are_fittable_but_each_benchmark_keeps_its_times(imported_db):
    known = fittable_benchmarks(dataset(imported_db).series)
    assert known["imb.pingpong"] == ("latency", "bandwidth")
    assert known["osu.bw"] == ("bandwidth",)
    assert "imb.alltoall.np2" in known  # t_min, t_max, t_avg: fitted on t_avg
    assert sized_times(dataset(imported_db).series, "imb.alltoall.np2").quantity == "t_avg"


def test_pairs_series_median_over_pairs_and_one_pair(tmp_path):
    """A ping-pong pattern: the median over its pairs at each size, or one pair's."""
    sizes = [0, 1024, 4096, 65536, 1048576]
    pairs = {"cn-a17-cn-a18": (5.0, 1000.0), "cn-b01-cn-b02": (6.0, 900.0), "gpu003-gpu010": (50.0, 100.0)}
    batch = ResultBatch()
    for label, (latency, bandwidth) in pairs.items():
        for size in sizes:
            batch.add("pingpong.sort", label, latency + size / bandwidth, metric=f"latency.{size}", unit="us",
                      direction=Direction.LOWER, label_kind=LabelKind.PAIR, repetition=1)
        batch.add("pingpong.sort", label, bandwidth, metric="fit.bandwidth", unit="MB/s",
                  direction=Direction.HIGHER, label_kind=LabelKind.PAIR, repetition=1)
    with open_store(tmp_path / "p.duckdb") as s:
        s.add_results(s.new_run("test"), batch)
        series = s.load_dataset().series
    points = sized_times(series, "pingpong.sort")
    assert points.label is None and len(points.labels) == 3 and list(points.counts) == [3] * len(sizes)
    medians = [float(np.median([lat + size / bw for lat, bw in pairs.values()])) for size in sizes]
    assert list(points.times_us) == pytest.approx(medians)
    assert "median over 3 pairs" in points.describe()
    one = fit_sized_times(sized_times(series, "pingpong.sort", label="gpu003-gpu010"))
    assert one.latency_us == pytest.approx(50.0) and one.bandwidth_mb_s == pytest.approx(100.0)
    with pytest.raises(KeyError, match="no label 'cn-a17' .*cn-a17-cn-a18, cn-b01-cn-b02, gpu003-gpu010"):
        sized_times(series, "pingpong.sort", label="cn-a17")

    from oddnode.report.fit import fit_figures
    from oddnode.core.model import Dataset

    (figure,) = fit_figures(Dataset(series=series))
    assert figure.title.endswith("pingpong.sort") and "median over 3 pairs" in figure.caption
    # The spread the median hides: gpu003-gpu010 at a ninth of the median's bandwidth.
    assert list(points.slowest_us) == pytest.approx([50.0 + size / 100.0 for size in sizes])
    assert list(points.fastest_us) == pytest.approx([5.0 + size / 1000.0 for size in sizes])
    assert points.slowest() == ("gpu003-gpu010", 1048576, pytest.approx((50 + 10485.76) / (6 + 1048576 / 900)))
    assert ("the slowest, gpu003-gpu010, takes 9 times the median's time at 1048576 bytes (11% of its "
            "bandwidth)") in figure.caption
    assert figure.svg.startswith("<svg") or "<svg" in figure.svg


def test_too_few_points_in_the_range_is_a_clear_error(imported_db):
    points = sized_times(dataset(imported_db).series, "imb.pingpong")
    with pytest.raises(ValueError, match=r"imb\.pingpong: 0 points from 5000 to 6000 bytes: a line needs at "
                                         r"least 2 \(its sizes: 0, 1, 2, "):
        fit_sized_times(points, 5000, 6000)
    with pytest.raises(ValueError, match="1 point from 4194304 bytes on"):
        fit_sized_times(points, 4194304)


def test_unknown_names_list_the_known_ones(imported_db):
    series = dataset(imported_db).series
    with pytest.raises(KeyError, match=r"'imb\.pingpon' cannot be fitted: no benchmark of that name.*"
                                       r"imb\.alltoall\.np2, imb\.pingpong, netpipe\.tcp, osu\.bw, osu\.latency"):
        sized_times(series, "imb.pingpon")
    with pytest.raises(KeyError, match=r"osu\.bw has no 'latency'.*it has: bandwidth"):
        sized_times(series, "osu.bw", "latency")


def invoke(*args):
    return CliRunner().invoke(app, ["fit", *map(str, args)])


def test_cli_prints_the_line_and_the_table(imported_db):
    result = invoke("imb.pingpong", "--db", imported_db, "--from", 4096)
    assert result.exit_code == 0, result.output
    rows = [(s, t) for s, t, _ in imb_rows(IMB_PINGPONG) if s >= 4096]
    latency, bandwidth, _, _ = expected_line(*zip(*rows))
    assert f"a = latency = {latency:.6g} us" in result.output
    assert f"1/b = bandwidth = {bandwidth:.6g} MB/s" in result.output
    assert "        4096         2.640" in result.output
    assert "the line fails at 4194304 bytes" in result.output


def test_cli_json_and_each_label(imported_db):
    result = invoke("imb.pingpong:bandwidth", "--db", imported_db, "--from", 1024, "--to", 65536, "--json", "--each")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["quantity"] == "bandwidth" and document["labels"] == [PAIR]
    assert document["fit"]["size_range"] == [1024, 65536] and document["each"][0]["label"] == PAIR
    assert {"latency_us", "bandwidth_mb_s", "r_squared", "failing_sizes", "rows"} <= set(document["fit"])


def test_cli_errors_name_what_is_wrong(imported_db):
    result = invoke("nosuch", "--db", imported_db)
    assert result.exit_code == 2 and "benchmarks with a time per message size: imb.alltoall.np2" in result.output
    result = invoke("osu.latency", "--db", imported_db, "--from", 5000, "--to", 6000)
    assert result.exit_code == 2 and "0 points from 5000 to 6000 bytes" in result.output


def test_cli_reads_result_directories(imported_db, tmp_path):
    out = tmp_path / "plots"
    assert CliRunner().invoke(app, ["export", "plot", str(out), "--db", str(imported_db)]).exit_code == 0
    from_store = invoke("osu.latency", "--db", imported_db, "--from", 1024, "--json")
    from_files = invoke("osu.latency", out, "--from", 1024, "--json")
    assert from_files.exit_code == 0, from_files.output
    assert json.loads(from_files.output)["fit"] == json.loads(from_store.output)["fit"]


def test_report_draws_point_to_point_fits_only(imported_db):
    from oddnode.judge.analysis import analyze
    from oddnode.report.html import render_report

    html = render_report(analyze(dataset(imported_db)))
    for name in ("imb.pingpong", "osu.latency", "osu.bw", "netpipe.tcp"):
        assert f"Latency and bandwidth against message size: {name}<" in html
    assert "against message size: imb.alltoall" not in html
    assert "Least-squares line time = a + b·L" in html
