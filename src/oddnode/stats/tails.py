"""Tails and quantiles of the normal, Student t and binomial laws.

The analysis needs these at every run, and little else of scipy.stats:
through scipy.special they cost a third of its import (scipy.stats formats
its functions' documentation as it loads, about a second at each command's
start).  The functions are the ones scipy.stats evaluates for these laws
(``norm.isf(q)`` is ``-ndtri(q)``, ``t.isf(q, df)`` is ``-stdtrit(df, q)``),
so their values are the same; the rarer tests (Mann-Whitney, the
hypergeometric, Levene, Fligner) import scipy.stats where they run.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import special


def normal_cdf(x: ArrayLike, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """P(X <= x) for X normal."""
    return special.ndtr((np.asarray(x, dtype=float) - mean) / std)


def normal_log_cdf(x: ArrayLike) -> np.ndarray:
    """log P(Z <= x) for Z standard normal, exact far into the lower tail."""
    return special.log_ndtr(np.asarray(x, dtype=float))


def normal_sf(x: ArrayLike) -> np.ndarray:
    """P(Z > x) for Z standard normal."""
    return special.ndtr(-np.asarray(x, dtype=float))


def normal_pdf(x: ArrayLike, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """The normal density."""
    z = (np.asarray(x, dtype=float) - mean) / std
    # 1/sqrt(2π) · e^(-z²/2), per unit of x
    return np.exp(-0.5 * z * z) / (np.sqrt(2.0 * np.pi) * std)


def normal_ppf(q: ArrayLike) -> np.ndarray:
    """z with P(Z <= z) = q."""
    return special.ndtri(q)


def normal_isf(q: ArrayLike) -> np.ndarray:
    """z with P(Z > z) = q, exact for tiny q."""
    return -special.ndtri(q)


def t_sf(x: ArrayLike, df: ArrayLike) -> np.ndarray:
    """P(T > x) for T Student's t with ``df`` degrees of freedom (any positive real)."""
    return special.stdtr(df, -np.asarray(x, dtype=float))


def t_isf(q: ArrayLike, df: ArrayLike) -> np.ndarray:
    """t with P(T > t) = q, ``df`` degrees of freedom."""
    return -special.stdtrit(df, q)


def binomial_sf(k: ArrayLike, n: ArrayLike, p: ArrayLike) -> np.ndarray:
    """P(X > k) for X binomial over ``n`` trials of chance ``p`` (1 for k < 0);
    ``n`` whole numbers, of any numeric type."""
    trials = np.asarray(n)
    if not np.issubdtype(trials.dtype, np.integer):
        if not np.all(trials == np.floor(trials)):
            raise ValueError(f"the trials of a binomial are whole numbers, not {trials}")
        trials = trials.astype(np.int64)
    return special.bdtrc(np.floor(k), trials, p)


def chi2_sf(x: ArrayLike, dof: ArrayLike) -> np.ndarray:
    """P(X > x) for X chi-squared with ``dof`` degrees of freedom."""
    return special.chdtrc(dof, x)
