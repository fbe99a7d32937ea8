"""WEAT / SEAT statistics: association, effect size and the one-sided permutation test.

Caliskan et al. (2017), May et al. (2019, SEAT) and the DA-Gender paper (appendix A) share one recipe.
For target sets T1, T2 and attribute sets A1, A2,

    s(w, A1, A2)    = mean_{a in A1} asso(w, a) - mean_{b in A2} asso(w, b)       (asso = cosine similarity)
    effect size     = (mean_{x in T1} s(x) - mean_{y in T2} s(y)) / std_{w in T1 u T2} s(w)
    test statistic  = sum_{x in T1} s(x) - sum_{y in T2} s(y)
    p               = Prob_i[ statistic(T1^i, T2^i) >= statistic(T1, T2) ]

over the partitions (T1^i, T2^i) of T1 u T2 into sets of the original sizes. Choices, each a named option:

* std: sample standard deviation, ``ddof=1`` (Caliskan's and the paper's definition, and sent-bias'
  ``np.std(..., ddof=1)``); ``ddof=0`` is what the DA-Gender code computes (``np.std`` default).
* std_epsilon: added to the std before dividing (default 0). The DA-Gender code divides by ``std + 1e-8``,
  which is not negligible with its padded-mean pooling, where the spread of s(w) is about 5e-6.
* p: *exact* over every partition when there are at most ``exact_max`` (100,000) of them -- the observed
  partition is one of them, so p >= 1/count; otherwise a seeded Monte Carlo over ``n_samples`` random
  partitions with a pseudo-count, p = (k + 1) / (n + 1), so a sampled p is never 0 (Phipson & Smyth 2010).
* alternative: ``greater`` (one-sided, the paper's appendix and sent-bias) or ``two-sided``
  (|mean difference|, what the DA-Gender code's Monte Carlo computes).

Given the scalars s(w) the permutation test needs no embeddings at all, so scoring jobs store s(w) per
target and the (cheap) metric job runs the test.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from lmbias.errors import ConfigError, DataError

EXACT_MAX = 100_000
N_SAMPLES = 100_000
ALTERNATIVES = ("greater", "two-sided")


def cosine_matrix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of `x` with every row of `y` (float64)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xn = np.linalg.norm(x, axis=1, keepdims=True)
    yn = np.linalg.norm(y, axis=1, keepdims=True)
    if np.any(xn == 0) or np.any(yn == 0):
        raise DataError("cosine similarity of a zero vector is undefined (an all-zero sentence embedding)")
    return (x / xn) @ (y / yn).T


def associations(targets: np.ndarray, attr1: np.ndarray, attr2: np.ndarray) -> np.ndarray:
    """s(w, A1, A2) for every target embedding w (rows of `targets`)."""
    return cosine_matrix(targets, attr1).mean(axis=1) - cosine_matrix(targets, attr2).mean(axis=1)


def effect_size(s_x, s_y, ddof: int = 1, std_epsilon: float = 0.0) -> float:
    """(mean s(T1) - mean s(T2)) / (std(s(T1 u T2), ddof) + std_epsilon). NaN when the divisor is 0."""
    x = np.asarray(s_x, dtype=np.float64)
    y = np.asarray(s_y, dtype=np.float64)
    if len(x) == 0 or len(y) == 0:
        raise DataError(f"effect size needs two non-empty target sets, got {len(x)} and {len(y)}")
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 or 1, got {ddof!r}")
    if not std_epsilon >= 0:
        raise ValueError(f"std_epsilon must be >= 0, got {std_epsilon!r}")
    pooled = np.concatenate([x, y])
    if len(pooled) <= ddof:
        return math.nan
    std = float(np.std(pooled, ddof=ddof)) + std_epsilon
    if std == 0.0:
        return math.nan
    return float((x.mean() - y.mean()) / std)


def check_std_epsilon(value, key: str) -> float:
    """A finite number >= 0 (the effect size's divisor is std + std_epsilon)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{key}: {value!r} must be a number >= 0 (1e-8 reproduces the DA-Gender code)")
    return float(value)


def weat_statistic(s_x, s_y) -> float:
    """sum s(T1) - sum s(T2) (the paper's s(T1, T2, A1, A2))."""
    return float(np.sum(s_x, dtype=np.float64) - np.sum(s_y, dtype=np.float64))


def partition_count(n1: int, n2: int) -> int:
    """Number of ways to split n1 + n2 targets into sets of sizes n1 and n2."""
    return math.comb(n1 + n2, n1)


@dataclass(frozen=True)
class PermutationResult:
    p_value: float
    method: str  # "exact" | "monte_carlo"
    partitions: int  # partitions enumerated (exact) or sampled (Monte Carlo)
    exceed: int  # partitions whose statistic was >= the observed one


def _first_set_sums(values: np.ndarray, n1: int, method: str, n_samples: int, seed: int) -> np.ndarray:
    """sum over the first set of each partition (every partition, or n_samples random ones)."""
    n = len(values)
    if method == "exact":
        combos = np.fromiter(
            itertools.chain.from_iterable(itertools.combinations(range(n), n1)), dtype=np.int64
        ).reshape(-1, n1)
        return values[combos].sum(axis=1)
    rng = np.random.default_rng(seed)
    sums = np.empty(n_samples, dtype=np.float64)
    chunk = max(1, min(n_samples, 2_000_000 // max(n, 1)))
    done = 0
    while done < n_samples:
        size = min(chunk, n_samples - done)
        # A uniformly random n1-subset per row: the n1 smallest of n iid uniforms.
        keys = rng.random((size, n))
        picked = np.argpartition(keys, n1 - 1, axis=1)[:, :n1] if n1 < n else np.tile(np.arange(n), (size, 1))
        sums[done : done + size] = values[picked].sum(axis=1)
        done += size
    return sums


def permutation_test(
    s_x,
    s_y,
    *,
    exact_max: int = EXACT_MAX,
    n_samples: int = N_SAMPLES,
    seed: int = 0,
    alternative: str = "greater",
) -> PermutationResult:
    """p-value of the permutation test of T1 vs T2 on the associations s(w).

    Every partition keeps the sizes |T1|, |T2|, so the statistic sum_T1 - sum_T2 = 2 sum_T1 - total is a
    monotone function of the first set's sum (and so is the difference of means); ``two-sided`` compares
    |mean_T1 - mean_T2| instead. Ties count as exceeding (>=), with a tolerance of 1e-10 x max|s| so that
    the same partition summed in another order still ties.
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    x = np.asarray(s_x, dtype=np.float64)
    y = np.asarray(s_y, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise DataError(f"permutation test needs two non-empty target sets, got {n1} and {n2}")
    values = np.concatenate([x, y])
    total = float(values.sum())
    count = partition_count(n1, n2)
    method = "exact" if count <= exact_max else "monte_carlo"
    if method == "monte_carlo" and n_samples < 1:
        raise ValueError("n_samples must be >= 1")
    sums = _first_set_sums(values, n1, method, n_samples, seed)

    def stat(first_sum):
        mean_diff = first_sum / n1 - (total - first_sum) / n2
        return np.abs(mean_diff) if alternative == "two-sided" else mean_diff

    observed = stat(float(x.sum()))
    tol = 1e-10 * float(np.abs(values).max())
    exceed = int(np.count_nonzero(stat(sums) >= observed - tol))
    if method == "exact":
        return PermutationResult(exceed / count, method, count, exceed)
    return PermutationResult((exceed + 1) / (n_samples + 1), method, n_samples, exceed)
