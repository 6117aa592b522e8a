"""Benchmark targets: a cluster uniformly below its target is named whole,
one above it is not; units in the value are converted; scoping; bad files
give one line naming the file and key; baseline targets hold on their data."""

from __future__ import annotations

import numpy as np
import pytest

from oddnode.core.model import Direction, LabelKind, Series
from oddnode.core.units import convert
from oddnode.findings.expectations import ExpectationError, parse_expectations
from oddnode.findings.targets import check_targets, parse_targets, targets_text

NODES = [f"r01n{i:02d}" for i in range(1, 17)]


def series(name: str, unit: str, median: float, seed: int, direction=Direction.HIGHER, labels=NODES,
           kind=LabelKind.NODE) -> Series:
    rng = np.random.default_rng(seed)
    values = median * (1 + 0.02 * rng.standard_normal(len(labels)))
    benchmark, _, metric = name.partition(":")
    return Series(benchmark, metric or "value", unit, direction, kind, np.array(labels, dtype=object), values,
                  np.full(len(labels), 3))


def judged(text: str, *data: Series):
    return check_targets(parse_targets(text, source="site.yaml"), data)


@pytest.mark.parametrize("seed", range(10))
def test_a_target_twice_the_median_names_every_node_and_half_names_none(seed):
    bw = series("stream_copy:rate", "MB/s", 20000, seed)
    median = float(np.median(bw.values))
    (finding,) = judged(f"benchmarks:\n  stream_copy:rate: {{min: {2 * median}}}\n", bw)
    assert finding.kind == "below-target" and finding.nodes == "r01n[01-16]"
    assert finding.evidence["shortfall"] == pytest.approx(0.5) and finding.evidence["missed"] == 16
    assert "all 16 miss it" in finding.message
    assert judged(f"benchmarks:\n  stream_copy:rate: {{min: {median / 2}}}\n", bw) == []


def test_only_the_nodes_below_are_named():
    bw = series("triad", "MB/s", 20000, 1)
    bw.values[3] = 9000.0
    (finding,) = judged("benchmarks:\n  triad: {min: 15000}\n", bw)
    assert finding.nodes == "r01n04" and finding.evidence["median"] == 9000.0
    assert finding.evidence["shortfall"] == pytest.approx(0.4)


def test_a_unit_in_the_value_is_converted_to_the_series_unit():
    bw = series("triad", "MB/s", 20000, 2)  # 20 GB/s
    assert judged("benchmarks:\n  triad: {min: 40 GB/s}\n", bw)[0].evidence["target"] == {"min": 40000.0}
    assert judged("benchmarks:\n  triad: {min: 10 GB/s}\n", bw) == []
    gb = series("triad", "GB/s", 20, 2)
    assert judged("benchmarks:\n  triad: {min: 10000 MB/s}\n", gb) == []
    assert judged("benchmarks:\n  triad: {min: 40000 MB/s}\n", gb)[0].nodes == "r01n[01-16]"
    assert convert(8, "Gbit/s", "GB/s") == pytest.approx(1.0)


def test_a_max_target_judges_a_lower_is_better_series():
    latency = series("osu_latency:8", "us", 1.5, 3, direction=Direction.LOWER)
    (finding,) = judged("benchmarks:\n  osu_latency:8: {max: 750 ns}\n", latency)
    assert finding.kind == "above-target" and finding.evidence["target"] == {"max": 0.75}
    assert finding.evidence["shortfall"] == pytest.approx(1.0, rel=0.05)
    assert judged("benchmarks:\n  osu_latency:8: {max: 3 us}\n", latency) == []


def test_the_last_section_naming_a_node_decides():
    labels = [f"gpu{i:03d}" for i in range(1, 9)] + [f"cn-{i:04d}" for i in range(1, 9)]
    dgemm = series("dgemm", "GFLOP/s", 1000, 4, labels=labels)
    dgemm.values[:8] *= 3  # the GPU nodes are three times faster
    text = ("benchmarks:\n  dgemm: {min: 800}\n"
            "nodes:\n  'gpu[001-008]':\n    gpu_count: 8\n    benchmarks:\n      dgemm: {min: 2500}\n")
    assert judged(text, dgemm) == []
    strict = text.replace("2500", "6000")
    (finding,) = judged(strict, dgemm)
    assert finding.nodes == "gpu[001-008]" and finding.evidence["scope"] == "gpu[001-008]"
    assert "gpu_count on gpu[001-008]" in parse_expectations(text)  # the facts read on, targets left out


def test_pairs_are_judged_per_label_and_name_their_nodes():
    pairs = [f"cn-{2 * i + 1:04d}-cn-{2 * i + 2:04d}" for i in range(6)]
    bw = series("pingpong.sort:bandwidth", "MB/s", 12000, 5, labels=pairs, kind=LabelKind.PAIR)
    bw.values[2] = 3000.0
    (finding,) = judged("benchmarks:\n  pingpong.sort:bandwidth: {min: 10 GB/s}\n", bw)
    assert finding.nodes == "cn-[0005-0006]"


def test_a_node_without_a_value_misses_nothing():
    bw = series("triad", "MB/s", 20000, 6)
    bw.values[0] = np.nan
    (finding,) = judged("benchmarks:\n  triad: {min: 40000}\n", bw)
    assert "r01n01" not in finding.nodes.replace("r01n[01", "") and finding.evidence["judged"] == 15


@pytest.mark.parametrize("text, says", [
    ("benchmarks:\n  nosuch: {min: 5}\n", "site.yaml:2: benchmarks: nosuch: no series named"),
    ("benchmarks:\n  triad: {min: 5 us}\n", "site.yaml:2: benchmarks: triad: min '5 us': us cannot be converted"),
    ("benchmarks:\n  triad: {min: fast}\n", "site.yaml:2: benchmarks: triad: min must be a number"),
    ("benchmarks:\n  triad: {min: 5 furlongs}\n", "site.yaml:2: benchmarks: triad: min '5 furlongs': unknown unit"),
    ("benchmarks:\n  triad: 5\n", "site.yaml:2: benchmarks: triad: expected {min: VALUE}"),
    ("benchmarks:\n  triad: {least: 5}\n", "site.yaml:2: benchmarks: triad: unknown option"),
])
def test_bad_targets_give_one_line_naming_file_and_key(text, says):
    with pytest.raises(ExpectationError) as raised:
        judged(text, series("triad", "MB/s", 20000, 7))
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)


@pytest.mark.parametrize("seed", range(10))
def test_targets_written_from_results_hold_on_them(seed):
    data = [series("triad", "MB/s", 20000, seed), series("osu_latency:8", "us", 1.5, seed, Direction.LOWER),
            series("hpl", "GFLOP/s", 900, seed + 100)]
    data[2].values[0] *= 0.8  # an accepted check's slowest node, further than the margin
    text = targets_text(data)
    targets = parse_targets(text)
    assert {t.series for t in targets} == {"triad", "osu_latency:8", "hpl"}
    assert check_targets(targets, data) == []
    lower = [t for t in targets if t.series == "osu_latency:8"][0]
    assert lower.maximum is not None and lower.maximum.endswith(" us")


def test_the_documented_example_reads():
    from pathlib import Path

    text = (Path(__file__).parents[3] / "docs" / "formats.md").read_text()
    block = text.split("**Benchmark targets.**")[1].split("```yaml\n")[1].split("```")[0]
    targets = parse_targets(block)
    assert [(t.series, t.scope) for t in targets] == [
        ("memory.triad:bandwidth", None), ("compute.dgemm:performance", None), ("pingpong.sort:latency.8", None),
        ("memory.triad:bandwidth", "gpu[001-016]")]
    assert targets[0].threshold("min", "MB/s") == 180000 and targets[2].threshold("max", "ns") == 2500
    assert "gpu_count on gpu[001-016]" in parse_expectations(block)
