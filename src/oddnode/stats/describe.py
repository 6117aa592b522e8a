"""Descriptive statistics of one population (STAB's ``anal``/``danal`` table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import math
from dataclasses import asdict, dataclass

import numpy as np

from oddnode.core.model import Series
from oddnode.stats.robust import median

if TYPE_CHECKING:
    from oddnode.report import documents


@dataclass(frozen=True)
class Description:
    """The ``anal`` row: n, low, high, %variability, mean, median, std dev."""

    n: int
    low: float
    high: float
    variability_pct: float  # (high - low) / low * 100, STAB's %variability
    mean: float
    median: float
    std: float  # sample standard deviation (n - 1 in the denominator)

    def to_json(self) -> documents.Description:
        """JSON has no NaN or infinity: a value without a meaning (an empty
        series, the %variability of one whose lowest value is 0) is null."""
        return {key: None if isinstance(value, float) and not math.isfinite(value) else value
                for key, value in asdict(self).items()}


def describe_values(values: np.ndarray) -> Description:
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0:
        nan = float("nan")
        return Description(0, nan, nan, nan, nan, nan, nan)
    low, high = float(values.min()), float(values.max())
    variability = (high - low) / abs(low) * 100.0 if low != 0 else float("inf") if high != low else 0.0
    return Description(
        n=n,
        low=low,
        high=high,
        variability_pct=variability,
        mean=float(values.mean()),
        median=median(values),
        std=float(values.std(ddof=1)) if n > 1 else 0.0,
    )


def describe(series: Series) -> Description:
    """Statistics of a series' best-per-label values."""
    return describe_values(series.values)

