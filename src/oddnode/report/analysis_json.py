"""The statistics commands' results as JSON data (``dist``, ``findn``,
``correlate``, ``findc`` with ``--json``): the same numbers their tables
print, NaN and infinities as null."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from oddnode.core.model import Series
from oddnode.stats.correlation import Correlation, join_by_label
from oddnode.stats.distribution import ChiSquared, Dip, Normality, bin_edges
from oddnode.stats.tails import normal_cdf
from oddnode.report import plain

if TYPE_CHECKING:
    from oddnode.report import documents


def series_json(series: Series) -> documents.SeriesReference:
    """Which population a result is about: its names, unit, direction and size."""
    return {"name": series.name, "benchmark": series.benchmark, "metric": series.metric, "unit": series.unit,
            "direction": series.direction.value, "label_kind": series.label_kind.value, "n": len(series)}


def histogram_json(values, bins: str | int) -> documents.Histogram:
    """The histogram ``dist`` draws: each bin's range, its count and the
    count the normal fitted to the values (sample mean and std) expects
    there (null when the values do not vary)."""
    array = np.asarray(values, dtype=np.float64).ravel()
    edges = bin_edges(array, bins)
    counts, _ = np.histogram(array, edges)
    n = len(array)
    mean = float(array.mean())
    std = float(array.std(ddof=1)) if n > 1 else 0.0
    expected = n * np.diff(normal_cdf(edges, mean, std)) if std > 0 else [None] * len(counts)
    rows = [{"low": float(low), "high": float(high), "count": int(count), "expected": e}
            for low, high, count, e in zip(edges[:-1], edges[1:], counts, expected)]
    return {"bins": bins, "mean": mean, "std": std, "rows": rows}


def chi_squared_json(chi: ChiSquared) -> documents.ChiSquaredFit:
    """One chi-squared fit to the normal: X², the bins asked for and used
    after merging sparse ones, degrees of freedom, bin width / std, p."""
    return {"statistic": chi.x2, "p": chi.p, "requested_bins": chi.requested_bins, "bins": chi.bins,
            "dof": chi.dof, "scale": chi.scale}


def distribution_tests(chi: ChiSquared, normal: Normality, dip: Dip) -> list[documents.DistributionTest]:
    """The rows of the distribution table: test, statistic, p and reading."""
    skew_reading = "right tail" if normal.skewness > 0 else "left tail"
    return [
        {"test": "chi-squared", **chi_squared_json(chi), "reading": "depends on the bins: see findn"},
        {"test": "shapiro-wilk", "statistic": normal.shapiro_w, "p": normal.shapiro_p,
         "reading": "bin-free normality"},
        {"test": "dagostino-pearson", "statistic": normal.dagostino_k2, "p": normal.dagostino_p,
         "reading": "bin-free normality"},
        {"test": "anderson-darling", "statistic": normal.anderson_stat, "p": None,
         "critical_5pct": normal.anderson_critical_5pct,
         "not_normal_5pct": (normal.anderson_stat > normal.anderson_critical_5pct
                             if math.isfinite(normal.anderson_stat) else None),
         "reading": (f"not normal at 5% if > {normal.anderson_critical_5pct:.6g}"
                     if math.isfinite(normal.anderson_critical_5pct) else "")},
        {"test": "skewness", "statistic": normal.skewness, "p": normal.skew_p, "z": normal.skew_z,
         "reading": skew_reading if math.isfinite(normal.skewness) else ""},
        {"test": "excess-kurtosis", "statistic": normal.kurtosis, "p": None, "reading": ""},
        {"test": "dip", "statistic": dip.statistic, "p": dip.p, "reading": "small p: more than one mode"},
    ]


def dist_json(series: Series, bins: str | int, chi: ChiSquared, normal: Normality, dip: Dip) -> documents.Dist:
    """``dist --json``: the series, its histogram and its distribution tests."""
    return plain({"series": series_json(series), "histogram": histogram_json(series.values, bins),
                  "tests": distribution_tests(chi, normal, dip)})


def findn_json(series: Series, sweep: Sequence[ChiSquared]) -> documents.Findn:
    """``findn --json``: the chi-squared fit for each bin count, least normal-looking first."""
    return plain({"series": series_json(series), "fits": [chi_squared_json(chi) for chi in sweep]})


def correlation_json(c: Correlation) -> documents.Correlation:
    """One correlation as ``correlate`` and ``findc`` print it, with the least-squares line."""
    return {"x": c.x, "y": c.y, "n": c.n, "pearson": {"r": c.pearson_r, "p": c.pearson_p},
            "spearman": {"r": c.spearman_r, "p": c.spearman_p}, "slope": c.slope, "intercept": c.intercept}


def correlate_json(a: Series, b: Series, correlation: Correlation) -> documents.Correlate:
    """``correlate --json``: both series, their correlation and the values
    each shared label (node or pair) has in both."""
    labels, x, y = join_by_label(a, b)
    pairs = [{"label": str(label), "x": float(u), "y": float(v)} for label, u, v in zip(labels, x, y)]
    return plain({"x": series_json(a), "y": series_json(b), "correlation": correlation_json(correlation),
                  "pairs": pairs})


def findc_json(rows: Sequence[Correlation], shown: Sequence[Correlation], grep: str | None,
               limit: int) -> documents.Findc:
    """``findc --json``: the pairs printed (``limit`` of them, 0 all), out of
    how many, strongest |r| first."""
    return plain({"grep": grep, "limit": limit, "total": len(rows),
                  "correlations": [correlation_json(c) for c in shown]})
