"""Monte Carlo tables shipped with oddnode (``oddnode.stats.calibrate``
writes them): one value per population size n and level alpha, read at
any alpha in the table's range by linear interpolation in log alpha and
log value (the tails calibrated here are close to power laws, straight
lines there)."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources

import numpy as np


@dataclass(frozen=True)
class SizeAlphaTable:
    """``values[i][j]`` for ``sizes[i]`` and ascending ``alphas[j]``, as logarithms."""

    name: str
    rows: dict[int, int]  # n -> row
    log_alphas: np.ndarray
    log_values: np.ndarray

    def at(self, n: int, alpha: float, what: str) -> float:
        """The value for n at alpha; ``what`` names the calibrated test in errors."""
        if n not in self.rows:
            sizes = sorted(self.rows)
            raise ValueError(f"{what} is calibrated for {sizes[0]} to {sizes[-1]} values, not {n}")
        point = math.log(alpha)
        if not self.log_alphas[0] - 1e-9 <= point <= self.log_alphas[-1] + 1e-9:
            raise ValueError(f"{what} is calibrated for alpha in [{math.exp(self.log_alphas[0]):g}, "
                             f"{math.exp(self.log_alphas[-1]):g}], not {alpha:g}")
        return float(math.exp(np.interp(point, self.log_alphas, self.log_values[self.rows[n]])))


@functools.cache
def load_table(filename: str, key: str) -> SizeAlphaTable:
    """The table in ``oddnode/stats/<filename>``, its values under ``key``."""
    table = json.loads(resources.files("oddnode.stats").joinpath(filename).read_text())
    sizes, alphas = table["sizes"], np.asarray(table["alphas"], dtype=np.float64)
    values = np.asarray(table[key], dtype=np.float64)
    if values.shape != (len(sizes), len(alphas)) or list(alphas) != sorted(alphas):
        raise ValueError(f"{filename}: {key} are not sizes × ascending alphas")
    return SizeAlphaTable(filename, {n: i for i, n in enumerate(sizes)}, np.log(alphas), np.log(values))
