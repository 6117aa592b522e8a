"""Monte Carlo calibration of the outlier tests for small populations.

On n identical nodes with normal noise, the largest |modified z| of the
population has a distribution that depends only on n (the statistic is
location and scale free).  This script estimates its upper quantiles: a node
is an outlier when its |modified z| exceeds the (1 - alpha) quantile, so that
the probability of flagging ANY node of a healthy population is alpha.

For small n the MAD is a noisy scale estimate and these quantiles are far
above the Bonferroni normal quantile (≈25.7 instead of 4.4 for n=8 at
alpha=1e-4), hence a table rather than a formula.

The generalized ESD test (oddnode.stats.esd) needs the same kind of table:
the nominal level its critical values must be taken at so that n identical
normal nodes give a false alarm with probability alpha.  A population's ESD
test names a node at every nominal level above the smallest level at which
one of its steps is critical, so that smallest level's lower quantiles are
the table.

Two kinds of nodes among 6 to 30 (oddnode.stats.modes) are judged by the
ratio of between- to within-group sum of squares of the best split; its
table holds, for each n, the largest (1 - alpha) quantile of that ratio over
several kinds of healthy noise (MODES_NULLS): normal, heavy-tailed, skewed
and flat.

Run ``python -m oddnode.stats.calibrate`` to regenerate
``outlier_thresholds.json``, ``esd_levels.json`` and ``modes_thresholds.json``
next to this file (``--table`` for one of them).  It is seeded, so the tables are
reproducible; it draws its populations for every n in chunks that bound
memory, and takes about ten minutes for each table on one core.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from oddnode.stats import esd, modes

# The grid of the committed table; outlier_threshold interpolates in
# log n and log alpha between these points and uses a formula above the
# largest n.  Every n up to 30 is tabulated because odd and even n differ:
# for odd n the median is one of the values, so one deviation is exactly 0
# and the MAD comes out smaller (n=11 needs 7.0 at alpha=1e-2, more than
# both n=10 and n=12), which interpolation between even sizes would miss.
SIZES = tuple(range(5, 31)) + (35, 40, 45, 50, 60, 70, 85, 100, 125, 150, 175, 200)
ALPHAS = (1e-2, 1e-3, 1e-4, 1e-5)

# 4,000,000 populations per n: the 1e-5 quantile then rests on 40 exceedances
# (twice the 20/alpha rule of thumb; its sampling error is about 1/sqrt(40)
# ≈ 16% in tail probability, 1–3% in the threshold), the 1e-2 quantile on
# 40,000.
REPLICATES = 4_000_000
SEED = 20051130  # the STAB HOWTO's date; any fixed seed makes the table reproducible
# Values drawn at once: 4e6 float64 ≈ 32 MB per temporary array.
CHUNK_VALUES = 4_000_000

# 1.4826 = 1 / Φ⁻¹(3/4): it makes the MAD of normal data estimate the
# standard deviation (see oddnode.stats.robust).
MAD_TO_SIGMA = 1.4826

DEFAULT_OUTPUT = Path(__file__).with_name("outlier_thresholds.json")

# The ESD test runs on the worse side at alpha / 2 (the better side keeps the
# modified z-score), so its table reaches half of the smallest alpha.
ESD_SIZES = tuple(range(esd.MIN_N, esd.MAX_N + 1))
ESD_ALPHAS = (5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2)
# 8,000,000 populations per n: 40 false alarms at the smallest alpha, as
# for the modified z table.
ESD_REPLICATES = 8_000_000
ESD_OUTPUT = Path(__file__).with_name("esd_levels.json")

MODES_SIZES = tuple(range(modes.MIN_N, modes.MAX_N + 1))
MODES_ALPHAS = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2)
# 2,000,000 populations per n and kind of noise: 20 false alarms at the
# smallest alpha (the 20/alpha rule of thumb), for each of the five.
MODES_REPLICATES = 2_000_000
MODES_OUTPUT = Path(__file__).with_name("modes_thresholds.json")


def _lognormal_cv(cv: float) -> Callable[[np.random.Generator, tuple[int, int]], np.ndarray]:
    # A lognormal's coefficient of variation is sqrt(exp(s²) - 1).
    s = float(np.sqrt(np.log1p(cv * cv)))
    return lambda rng, shape: rng.lognormal(0.0, s, shape)


# Healthy noise the bimodality threshold must hold alpha on: the normal;
# Student t with 5 and 3 degrees of freedom, the heavy tails of nodes that
# share CPUs with other work now and then; a lognormal with CV 30%, the
# skew of run times that can only get longer; and the uniform, the flattest
# unimodal shape, whose halves lie furthest apart (the dip test's null).
MODES_NULLS: dict[str, Callable[[np.random.Generator, tuple[int, int]], np.ndarray]] = {
    "normal": lambda rng, shape: rng.standard_normal(shape),
    "t5": lambda rng, shape: rng.standard_t(5, shape),
    "t3": lambda rng, shape: rng.standard_t(3, shape),
    "lognormal-cv30": _lognormal_cv(0.30),
    "uniform": lambda rng, shape: rng.uniform(size=shape),
}


def max_abs_modified_z(rng: np.random.Generator, n: int, replicates: int) -> np.ndarray:
    """Largest |modified z| of each of ``replicates`` normal populations of size n."""
    rows_per_chunk = max(1, CHUNK_VALUES // n)
    out = np.empty(replicates, dtype=np.float64)
    done = 0
    while done < replicates:
        rows = min(rows_per_chunk, replicates - done)
        x = rng.standard_normal((rows, n))
        x -= np.median(x, axis=1, keepdims=True)
        np.abs(x, out=x)
        largest = x.max(axis=1)
        mad = np.median(x, axis=1)
        out[done : done + rows] = largest / (MAD_TO_SIGMA * mad)
        done += rows
    return out


def smallest_esd_level(rng: np.random.Generator, n: int, replicates: int) -> np.ndarray:
    """For each of ``replicates`` normal populations of size n, the smallest
    nominal level at which the low-side ESD test names a node."""
    steps = esd.max_outliers(n)
    rows_per_chunk = max(1, CHUNK_VALUES // n)
    out = np.empty(replicates, dtype=np.float64)
    done = 0
    while done < replicates:
        rows = min(rows_per_chunk, replicates - done)
        ascending = np.sort(rng.standard_normal((rows, n)), axis=1)
        levels = esd.step_levels(esd.step_statistics(ascending, steps), n)
        out[done : done + rows] = levels.min(axis=1)
        done += rows
    return out


def split_ratios(rng: np.random.Generator, n: int, replicates: int, null: str = "normal") -> np.ndarray:
    """The split ratio that find_modes judges (oddnode.stats.modes) of each of
    ``replicates`` healthy populations of n nodes with MODES_NULLS[null] noise."""
    draw = MODES_NULLS[null]
    least = modes.smallest_mode(n)
    rows_per_chunk = max(1, CHUNK_VALUES // n)
    out = np.empty(replicates, dtype=np.float64)
    done = 0
    while done < replicates:
        rows = min(rows_per_chunk, replicates - done)
        ascending = np.sort(draw(rng, (rows, n)), axis=1)
        out[done : done + rows] = modes.trimmed_splits(ascending, least).ratio
        done += rows
    return out


def _require_replicates(alphas: tuple[float, ...], replicates: int) -> None:
    too_rare = [a for a in alphas if a * replicates < 20]
    if too_rare:
        raise ValueError(f"{replicates} replicates are too few for alpha {too_rare}: need ≥ 20/alpha")


def _quantile_rows(
    draw: Callable[[np.random.Generator, int, int], np.ndarray],
    sizes: tuple[int, ...],
    probabilities: list[float],
    replicates: int,
    seed: int | list[int],
    show: Callable[[list[float]], str] | None,
) -> list[list[float]]:
    """For each n, the quantiles at ``probabilities`` of ``draw(rng, n,
    replicates)``, from one independent stream per n (so that one row can be
    regenerated alone); ``show(row)`` prints each row as it is done."""
    streams = np.random.SeedSequence(seed).spawn(len(sizes))
    rows = []
    for n, stream in zip(sizes, streams):
        started = time.perf_counter()
        values = draw(np.random.default_rng(stream), n, replicates)
        rows.append([float(np.quantile(values, p)) for p in probabilities])
        if show is not None:
            print(f"n={n:4d}  {show(rows[-1])}  ({time.perf_counter() - started:.1f} s)")
    return rows


def calibrate_esd(
    sizes: tuple[int, ...] = ESD_SIZES,
    alphas: tuple[float, ...] = ESD_ALPHAS,
    replicates: int = ESD_REPLICATES,
    seed: int = SEED,
    verbose: bool = False,
) -> dict:
    """The ESD table as a JSON-ready dict: levels[i][j] for sizes[i], alphas[j]."""
    _require_replicates(alphas, replicates)

    def show(row: list[float]) -> str:
        return "  ".join(f"{a:g}:{level / a:6.3f}" for a, level in zip(alphas, row)) + "  (level/alpha)"

    rows = _quantile_rows(smallest_esd_level, sizes, list(alphas), replicates, [seed, 1], show if verbose else None)
    return {
        "description": (
            "Nominal levels of the one-sided generalized ESD test (oddnode.stats.esd) "
            "at which n independent standard normal values give a false alarm with "
            "probability alphas[j]: levels[i][j] for n = sizes[i]."
        ),
        "generator": "python -m oddnode.stats.calibrate --table esd",
        "seed": seed,
        "replicates_per_size": replicates,
        "sizes": list(sizes),
        "alphas": list(alphas),
        "levels": [[float(f"{level:.5g}") for level in row] for row in rows],
    }


def calibrate_modes(
    sizes: tuple[int, ...] = MODES_SIZES,
    alphas: tuple[float, ...] = MODES_ALPHAS,
    replicates: int = MODES_REPLICATES,
    seed: int = SEED,
    verbose: bool = False,
) -> dict:
    """The bimodality table as a JSON-ready dict: thresholds[i][j] for
    sizes[i], alphas[j], the largest over MODES_NULLS of each one's quantile."""
    _require_replicates(alphas, replicates)

    def show(row: list[float]) -> str:
        return "  ".join(f"{a:g}:{q:9.2f}" for a, q in zip(alphas, row))

    by_null = {}
    for index, null in enumerate(MODES_NULLS):
        if verbose:
            print(f"{null}:")

        def draw(rng: np.random.Generator, n: int, count: int, null: str = null) -> np.ndarray:
            return split_ratios(rng, n, count, null)

        by_null[null] = _quantile_rows(draw, sizes, [1.0 - a for a in alphas], replicates, [seed, 2, index],
                                       show if verbose else None)
    thresholds = np.max([rows for rows in by_null.values()], axis=0)
    return {
        "description": (
            "Upper quantiles of the ratio of between- to within-group sum of squares of "
            "the trimmed best two-means split (oddnode.stats.modes) of n healthy nodes: "
            "thresholds[i][j] is the largest over the kinds of noise in quantiles_by_null "
            "of the (1 - alphas[j]) quantile for n = sizes[i]."
        ),
        "generator": "python -m oddnode.stats.calibrate --table modes",
        "seed": seed,
        "replicates_per_size": replicates,
        "sizes": list(sizes),
        "alphas": list(alphas),
        "thresholds": [[float(f"{q:.5g}") for q in row] for row in thresholds],
        "quantiles_by_null": {
            null: [[float(f"{q:.5g}") for q in row] for row in rows] for null, rows in by_null.items()
        },
    }


def calibrate(
    sizes: tuple[int, ...] = SIZES,
    alphas: tuple[float, ...] = ALPHAS,
    replicates: int = REPLICATES,
    seed: int = SEED,
    verbose: bool = False,
) -> dict:
    """The calibration table as a JSON-ready dict: quantiles[i][j] for sizes[i], alphas[j]."""
    _require_replicates(alphas, replicates)

    def show(row: list[float]) -> str:
        return "  ".join(f"{a:g}:{q:9.3f}" for a, q in zip(alphas, row))

    rows = _quantile_rows(max_abs_modified_z, sizes, [1.0 - a for a in alphas], replicates, seed,
                          show if verbose else None)
    return {
        "description": (
            "Upper quantiles of max |modified z| (median/MAD, MAD scaled by 1.4826) "
            "over n independent standard normal values: quantiles[i][j] is the "
            "(1 - alphas[j]) quantile for n = sizes[i]."
        ),
        "generator": "python -m oddnode.stats.calibrate --table mad",
        "seed": seed,
        "replicates_per_size": replicates,
        "sizes": list(sizes),
        "alphas": list(alphas),
        "quantiles": [[round(q, 4) for q in row] for row in rows],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=("mad", "esd", "modes", "all"), default="all")
    parser.add_argument("--replicates", type=int, help="populations per n (default: each table's own)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    jobs = {
        "mad": (calibrate, REPLICATES, DEFAULT_OUTPUT),
        "esd": (calibrate_esd, ESD_REPLICATES, ESD_OUTPUT),
        "modes": (calibrate_modes, MODES_REPLICATES, MODES_OUTPUT),
    }
    for name in jobs if args.table == "all" else (args.table,):
        make, replicates, output = jobs[name]
        table = make(replicates=args.replicates or replicates, seed=args.seed, verbose=True)
        output.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {output}")


if __name__ == "__main__":
    main()
