"""The interconnect commands' results as data, for ``--json``: the tables
``pairs``, ``bisection``, ``matrix`` and ``switchbench`` print, each as
plain JSON (NaN and infinities as null), and the document that puts a
command's runs, tables and findings together."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oddnode.readings.interconnect_series import split_network
from oddnode.core.model import Dataset
from oddnode.report import plain
from oddnode.report.interconnect import sized_series

if TYPE_CHECKING:
    from oddnode.report import documents


def document(command: str, runs: Mapping[str, dict[str, Any]], tables: Mapping[str, Any],
             findings: Iterable[Any] = ()) -> documents.InterconnectDocument:
    """One command's JSON document: ``command``, ``runs`` (each run's
    ``to_json()`` with its repetitions), the tables it prints and the
    findings it names."""
    return plain({"command": command, "runs": dict(runs), **tables, "findings": [f.to_json() for f in findings]})


def _stats(values: tuple[float, float, float, float] | None) -> dict[str, float] | None:
    return None if values is None else dict(zip(("min", "median", "mean", "max"), values))


def pattern_json(dataset: Dataset, benchmarks: Sequence[str]) -> list[documents.PairPattern]:
    """Per pair benchmark (``pingpong.sort``, ``mpi.cut``): the statistics
    per message size the pattern table prints, its slowest pairs, and every
    pair's best latency (us) and bandwidth (MB/s) per message size."""
    from oddnode.report.interconnect import pattern_tables

    tables = {t.benchmark: t for t in pattern_tables(dataset)}
    out = []
    for benchmark in benchmarks:
        table = tables.get(benchmark)
        if table is None:
            continue
        pairs: dict[str, dict[str, dict[str, float]]] = {}
        units = {}
        for quantity in ("latency", "bandwidth"):
            for size, series in sorted(sized_series(dataset, benchmark, quantity).items()):
                units[quantity] = series.unit
                for label, value in zip(series.labels.tolist(), series.values.tolist()):
                    pairs.setdefault(label, {"latency": {}, "bandwidth": {}})[quantity][str(size)] = value
        # A family's pattern (pingpong.cut: cut; pingpong.cut@ib: cut over ib), a site's own name whole.
        pattern, network = split_network(benchmark.partition(".")[2])
        out.append({
            "benchmark": benchmark, "pattern": pattern or benchmark, "network": network,
            "latency_unit": units.get("latency", "us"), "bandwidth_unit": units.get("bandwidth", "MB/s"),
            "sizes": [{"size": row.size, "n": row.n, "bandwidth": _stats(row.bandwidth),
                       "latency": _stats(row.latency)} for row in table.rows],
            "fit_latency_median": table.fit_latency_median, "fit_bandwidth_median": table.fit_bandwidth_median,
            "slowest_metric": table.slowest_metric,
            "slowest": [{"pair": s.label, "value": s.value, "percent_of_median": s.percent_of_median}
                        for s in table.slowest],
            "pairs": [{"pair": label, **values} for label, values in sorted(pairs.items())],
        })
    return out


def bisection_json(summary) -> documents.BisectionResult:
    """The bisection figures the command prints (MB/s) and each cut pair's
    best bandwidth all at once and alone."""
    figures = summary.figures
    return {"nodes": summary.nodes, "message_size": summary.options.message_size, "unit": "MB/s",
            "pairs": figures.pairs, "demonstrated": figures.demonstrated, "single_pair": figures.single_pair,
            "full": figures.full, "fraction": figures.fraction, "sums": list(summary.sums),
            "cut_pairs": [{"pair": label, "concurrent": summary.concurrent.get(label),
                           "alone": summary.alone.get(label)} for label in summary.plan.labels]}


def matrix_json(dataset: Dataset, summary) -> documents.MatrixResult | None:
    """The all-pairs matrix: node order, bandwidth (largest message size)
    and latency (smallest) as rows from each node to each node (null on the
    diagonal and where not measured), the slow limit and each slow pair's
    verdict; None when no matrix was stored."""
    from oddnode.findings.registry import Sensitivity
    from oddnode.report.interconnect import matrix

    grid = matrix(dataset, Sensitivity())
    if grid is None:
        return None
    return {"nodes": grid.nodes, "bandwidth_metric": grid.bandwidth_metric, "bandwidth_unit": grid.bandwidth_unit,
            "bandwidth": grid.bandwidth, "latency_metric": grid.latency_metric, "latency_unit": grid.latency_unit,
            "latency": grid.latency, "limit": summary.limit, "verdicts": dict(summary.verdicts),
            "retested": dict(summary.retest_values)}


def chain_json(summary) -> documents.ChainResult:
    """The daisy chain table: per chain length the node that joined, the
    best end-to-end and aggregate throughput (MB/s), the gain in hops over
    the previous length, and where the switch stopped scaling."""
    return {"unit": "MB/s", "hop_rate": summary.hop_rate(), "saturation": summary.saturation,
            "lengths": summary.lengths()}


def stream_json(summary) -> documents.StreamPattern:
    """One pattern's streaming table: per pair its best repetition's rate
    each way and both together (MB/s) and percent of the median total,
    failed pairs with their problem; slowest first, failed first of all."""
    best, problems = summary.best_directions()
    median = statistics.median(sum(pair) for pair in best.values()) if best else None
    failed = sorted(label for label in problems if label not in best)
    rows = [{"pair": label, "client_to_server": None, "server_to_client": None, "total": None,
             "percent_of_median": None, "problem": problems[label]} for label in failed]
    for label in sorted(best, key=lambda label: sum(best[label])):
        forth, back = best[label]
        rows.append({"pair": label, "client_to_server": forth, "server_to_client": back, "total": forth + back,
                     "percent_of_median": (forth + back) / median * 100 if median else None, "problem": None})
    return {"pattern": summary.pattern, "unit": "MB/s", "median_total": median, "pairs": rows}


def alltoall_json(summary, charged: Iterable[str]) -> documents.AlltoallResult:
    """The all-to-all as printed: its best complete repetition's total time
    (s), aggregate (MB/s) and phases, the best minimum bandwidth per phase
    over valid repetitions, the nodes charged with a failed or invalid
    repetition and the repetitions' problems."""
    from oddnode.report.summaries import complete_alltoall

    best = complete_alltoall(summary)
    return {"nodes": list(summary.nodes), "message_size": summary.message_size, "unit": "MB/s",
            "best_repetition": best.repetition if best else None,
            "total_seconds": best.total_seconds if best else None,
            "aggregate_bandwidth": best.aggregate_bandwidth if best else None,
            "phases": [{"phase": p.phase, "min_bandwidth": p.min_bandwidth, "median_bandwidth": p.median_bandwidth,
                        "slowest_receiver": p.slowest_receiver, "slowest_sender": p.slowest_sender}
                       for p in best.phases] if best else [],
            "phase_min_bandwidth": [{"phase": phase, "min_bandwidth": value}
                                    for phase, value in summary.phase_min_bandwidth().items()],
            "charged_nodes": sorted(charged),
            "problems": list(dict.fromkeys(p for r in summary.repetitions for p in r.problems))}
