"""--json of dist, findn, correlate and findc: one JSON document on stdout
with the numbers the tables print, checked against scipy and numpy on a
store of known values; human lines on stderr."""

from __future__ import annotations

import json
import math

import diptest
import numpy as np
import pytest
from scipy import stats

from support.cli import invoke, write
from oddnode.stats.distribution import chi_squared_normal
from support.stab import CN, GPU, LAMMPS, NOISE, RETRANSMITS, TRIAD, plot_file


def strict(text: str):
    """The document, refusing NaN and Infinity (not JSON)."""
    def refuse(name):
        raise ValueError(f"{name} in the JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def stab_db(tmp_path):
    results = tmp_path / "results"
    plot_file(results / "plot.stream.triad", GPU, TRIAD)
    plot_file(results / "plot.lammps", GPU[1:], LAMMPS)
    plot_file(results / "plot.noise", GPU, NOISE)
    plot_file(results / "plot.iperf3.tcp:sender.retransmits", CN, RETRANSMITS)
    plot_file(results / "plot.flat", GPU, [7.0] * len(GPU))
    write(results / "units.csv", "benchmark,unit,direction\nstream.triad,MB/s,higher\nlammps,1/s,higher\n"
          "iperf3.tcp:sender.retransmits,count,lower\n")
    db = tmp_path / "r.duckdb"
    assert invoke("import", "stab", results, "--db", db).exit_code == 0
    return db


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:As of SciPy:FutureWarning")  # scipy's anderson, the reference here
def test_dist_json_has_the_series_histogram_and_tests(stab_db, tmp_path):
    result = invoke("dist", "stream.triad", "--bins", "6", "--json", "--plot", tmp_path / "h.svg", "--db", stab_db)
    assert result.exit_code == 0, result.output
    data = strict(result.stdout)
    assert data["series"] == {"name": "stream.triad", "benchmark": "stream.triad", "metric": "value",
                              "unit": "MB/s", "direction": "higher", "label_kind": "node", "n": 36}
    # The plot is written all the same, and says so on stderr only.
    assert (tmp_path / "h.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert f"histogram written to {tmp_path / 'h.svg'}" in " ".join(result.stderr.split())

    histogram = data["histogram"]
    edges = np.linspace(TRIAD.min(), TRIAD.max(), 7)
    counts, _ = np.histogram(TRIAD, edges)
    std = TRIAD.std(ddof=1)
    expected = 36 * np.diff(stats.norm.cdf(edges, TRIAD.mean(), std))
    assert histogram["bins"] == 6 and histogram["std"] == pytest.approx(std)
    assert histogram["mean"] == pytest.approx(TRIAD.mean())
    assert [r["low"] for r in histogram["rows"]] == pytest.approx(edges[:-1])
    assert [r["high"] for r in histogram["rows"]] == pytest.approx(edges[1:])
    assert [r["count"] for r in histogram["rows"]] == counts.tolist() and sum(counts) == 36
    assert [r["expected"] for r in histogram["rows"]] == pytest.approx(expected)

    tests = {t["test"]: t for t in data["tests"]}
    assert list(tests) == ["chi-squared", "shapiro-wilk", "dagostino-pearson", "anderson-darling", "skewness",
                           "excess-kurtosis", "dip"]
    chi = chi_squared_normal(TRIAD, 6)
    assert tests["chi-squared"]["statistic"] == pytest.approx(chi.x2)
    assert tests["chi-squared"]["requested_bins"] == 6 and tests["chi-squared"]["bins"] == chi.bins
    assert tests["chi-squared"]["dof"] == chi.bins - 3
    assert tests["chi-squared"]["p"] == pytest.approx(stats.chi2.sf(chi.x2, chi.bins - 3))
    w, p = stats.shapiro(TRIAD)
    assert tests["shapiro-wilk"]["statistic"] == pytest.approx(w, rel=1e-6)
    assert tests["shapiro-wilk"]["p"] == pytest.approx(p, rel=1e-4)
    k2, p = stats.normaltest(TRIAD)
    assert tests["dagostino-pearson"]["statistic"] == pytest.approx(k2, rel=1e-6)
    assert tests["dagostino-pearson"]["p"] == pytest.approx(p, rel=1e-6)
    anderson = tests["anderson-darling"]
    assert anderson["statistic"] == pytest.approx(stats.anderson(TRIAD).statistic, rel=1e-6)
    assert anderson["p"] is None and anderson["not_normal_5pct"] is (anderson["statistic"] > anderson["critical_5pct"])
    assert tests["skewness"]["statistic"] == pytest.approx(stats.skew(TRIAD, bias=False), rel=1e-6)
    assert tests["skewness"]["reading"] == ("right tail" if stats.skew(TRIAD) > 0 else "left tail")
    assert tests["excess-kurtosis"]["statistic"] == pytest.approx(stats.kurtosis(TRIAD, bias=False), rel=1e-6)
    dip, p = diptest.diptest(TRIAD, boot_pval=False)
    assert tests["dip"]["statistic"] == pytest.approx(dip) and tests["dip"]["p"] == pytest.approx(p)


def test_dist_json_whole_bins_of_a_count_metric(stab_db):
    result = invoke("dist", "iperf3.tcp:sender.retransmits", "--bins", "whole", "--json", "--db", stab_db)
    assert result.exit_code == 0, result.output
    data = strict(result.stdout)
    assert data["series"]["metric"] == "sender.retransmits" and data["series"]["unit"] == "count"
    assert data["series"]["direction"] == "lower" and data["series"]["n"] == 10
    rows = data["histogram"]["rows"]
    assert data["histogram"]["bins"] == "whole"
    assert [(r["low"], r["high"]) for r in rows] == [(k - 0.5, k + 0.5) for k in range(6)]
    assert [r["count"] for r in rows] == [6, 2, 1, 0, 0, 1]


def test_dist_json_of_a_constant_series_gives_nulls(stab_db):
    data = strict(invoke("dist", "flat", "--json", "--db", stab_db).stdout)
    assert [r["count"] for r in data["histogram"]["rows"]] == [36]
    assert data["histogram"]["rows"][0]["expected"] is None
    # Every test but the dip (0: one mode) is undefined for one value.
    tests = {t["test"]: t for t in data["tests"]}
    assert all(t["statistic"] is None and t["p"] is None for name, t in tests.items() if name != "dip")
    assert tests["dip"]["statistic"] == 0.0


@pytest.mark.slow
def test_dist_without_json_prints_the_tables(stab_db):
    result = invoke("dist", "stream.triad", "--db", stab_db)
    assert result.exit_code == 0 and "Hartigan's dip" in result.text and "│" in result.output
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


@pytest.mark.slow
def test_findn_json_gives_each_bin_count_its_fit(stab_db):
    result = invoke("findn", "stream.triad", "--json", "--db", stab_db)
    assert result.exit_code == 0, result.output
    data = strict(result.stdout)
    assert data["series"]["name"] == "stream.triad" and data["series"]["n"] == 36
    fits = data["fits"]
    # 4 up to twice ceil(sqrt(36)) bins asked for, as findn sweeps them.
    assert sorted(f["requested_bins"] for f in fits) == list(range(4, 13))
    for fit in fits:
        chi = chi_squared_normal(TRIAD, fit["requested_bins"])
        assert fit["statistic"] == pytest.approx(chi.x2) and fit["bins"] == chi.bins
        assert fit["dof"] == chi.bins - 3 and fit["scale"] == pytest.approx(chi.scale)
        assert fit["p"] == (pytest.approx(chi.p) if not math.isnan(chi.p) else None)
    # Least normal-looking first, fits without a p last.
    ps = [f["p"] for f in fits]
    known = [p for p in ps if p is not None]
    assert known == sorted(known) and ps[:len(known)] == known


@pytest.mark.slow
def test_correlate_json_has_both_series_the_correlation_and_the_pairs(stab_db, tmp_path):
    result = invoke("correlate", "stream.triad", "lammps", "--json", "--plot", tmp_path / "s.png", "--db", stab_db)
    assert result.exit_code == 0, result.output
    data = strict(result.stdout)
    assert data["x"]["name"] == "stream.triad" and data["x"]["unit"] == "MB/s" and data["x"]["n"] == 36
    assert data["y"]["name"] == "lammps" and data["y"]["unit"] == "1/s" and data["y"]["n"] == 35
    # Joined by node: gpu003 has no lammps run.
    assert [p["label"] for p in data["pairs"]] == GPU[1:]
    assert [p["x"] for p in data["pairs"]] == pytest.approx(TRIAD[1:])
    assert [p["y"] for p in data["pairs"]] == pytest.approx(LAMMPS)
    c = data["correlation"]
    assert c["x"] == "stream.triad" and c["y"] == "lammps" and c["n"] == 35
    r, p = stats.pearsonr(TRIAD[1:], LAMMPS)
    assert c["pearson"]["r"] == pytest.approx(r) and c["pearson"]["p"] == pytest.approx(p, rel=1e-6)
    assert c["pearson"]["r"] > 0.8
    rho, p = stats.spearmanr(TRIAD[1:], LAMMPS)
    assert c["spearman"]["r"] == pytest.approx(rho) and c["spearman"]["p"] == pytest.approx(p, rel=1e-6)
    slope, intercept = np.polyfit(TRIAD[1:], LAMMPS, 1)
    assert c["slope"] == pytest.approx(slope) and c["intercept"] == pytest.approx(intercept, abs=1e-6)
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "scatter plot written to" in result.stderr


@pytest.mark.slow
def test_correlate_json_with_a_constant_series_is_null_not_nan(stab_db):
    data = strict(invoke("correlate", "noise", "flat", "--json", "--db", stab_db).stdout)
    assert data["correlation"]["n"] == 36
    assert data["correlation"]["pearson"] == {"r": None, "p": None}
    assert data["correlation"]["spearman"] == {"r": None, "p": None}
    assert {p["y"] for p in data["pairs"]} == {7.0}


def pearson(x_name, y_name):
    values = {"stream.triad": dict(zip(GPU, TRIAD)), "lammps": dict(zip(GPU[1:], LAMMPS)),
              "noise": dict(zip(GPU, NOISE))}
    shared = sorted(set(values[x_name]) & set(values[y_name]))
    return stats.pearsonr([values[x_name][k] for k in shared], [values[y_name][k] for k in shared])


@pytest.mark.slow
def test_findc_json_lists_the_pairs_printed(stab_db):
    result = invoke("findc", "--limit", "2", "--json", "--db", stab_db)
    assert result.exit_code == 0, result.output
    data = strict(result.stdout)
    # Three varying gpu series: three pairs (flat is constant and left out;
    # the cn nodes share no node with them).
    assert data["total"] == 3 and data["limit"] == 2 and data["grep"] is None
    rows = data["correlations"]
    assert len(rows) == 2
    assert {rows[0]["x"], rows[0]["y"]} == {"stream.triad", "lammps"}  # the strongest pair leads
    assert abs(rows[0]["pearson"]["r"]) >= abs(rows[1]["pearson"]["r"])
    for row in rows:
        r, p = pearson(row["x"], row["y"])
        assert row["pearson"]["r"] == pytest.approx(r) and row["pearson"]["p"] == pytest.approx(p, rel=1e-6)
        assert row["n"] == (35 if "lammps" in (row["x"], row["y"]) else 36)


@pytest.mark.slow
def test_findc_json_grep_and_no_limit(stab_db):
    data = strict(invoke("findc", "--grep", "noise", "--limit", "0", "--json", "--db", stab_db).stdout)
    assert data["grep"] == "noise" and data["total"] == 2 and len(data["correlations"]) == 2
    assert all("noise" in (c["x"], c["y"]) for c in data["correlations"])
    assert {frozenset((c["x"], c["y"])) for c in data["correlations"]} == {
        frozenset(("stream.triad", "noise")), frozenset(("lammps", "noise"))}


@pytest.mark.slow
@pytest.mark.parametrize("args", [("dist", "nosuch"), ("findn", "nosuch"), ("correlate", "nosuch", "noise")])
def test_json_keeps_the_exit_status_of_an_unknown_benchmark(stab_db, args):
    result = invoke(*args, "--json", "--db", stab_db)
    assert result.exit_code == 2 and result.stdout == ""
    assert "no benchmark named 'nosuch'" in result.stderr
