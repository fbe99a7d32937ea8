"""WEAT/SEAT statistics (lmbias.metrics.weat) on a hand-computed example, and the metric rows built from them."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from lmbias.benchmarks.seat_core import SCORES_SCHEMA, SeatOptions, seat_metric_rows, variant_name
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.weat import (
    associations,
    cosine_matrix,
    effect_size,
    partition_count,
    permutation_test,
    weat_statistic,
)

# ---------------------------------------------------------------------------------------------------------
# The hand-computed example: 2 + 2 targets, 2 + 2 attributes, 2-D embeddings.
#
#   A1 = {(1,0), (2,0)}   (both point along x: cosine with A1 = x / |w|)
#   A2 = {(0,1), (0,3)}   (both point along y: cosine with A2 = y / |w|)
#
#   target   vector  cos(.,A1)  cos(.,A2)  s = mean cos A1 - mean cos A2
#   x1 (T1)  (1,0)   1          0           1
#   x2 (T1)  (3,4)   3/5 = 0.6  4/5 = 0.8  -0.2
#   y1 (T2)  (0,1)   0          1          -1
#   y2 (T2)  (4,3)   0.8        0.6         0.2
#
#   mean s(T1) = (1 - 0.2)/2 = 0.4,  mean s(T2) = (-1 + 0.2)/2 = -0.4,  difference 0.8
#   pooled s = {1, -0.2, -1, 0.2}: mean 0, sum of squares 1 + 0.04 + 1 + 0.04 = 2.08
#     ddof=1: std = sqrt(2.08/3) = 0.8326664,  effect size = 0.8 / 0.8326664 = 0.9607689
#     ddof=0: std = sqrt(2.08/4) = 0.7211103,  effect size = 0.8 / 0.7211103 = 1.1094004
#   statistic = sum s(T1) - sum s(T2) = 0.8 - (-0.8) = 1.6
#   the C(4,2) = 6 partitions, by their first set (statistic = 2 * its sum - 0):
#     {1,-0.2} -> 1.6 (the observed one)   {1,-1} -> 0    {1,0.2} -> 2.4
#     {-0.2,-1} -> -2.4   {-0.2,0.2} -> 0   {-1,0.2} -> -1.6
#   one-sided (>= 1.6): 2 of 6 -> p = 1/3;   two-sided (|.| >= 1.6): 4 of 6 -> p = 2/3
# ---------------------------------------------------------------------------------------------------------
A1 = np.array([[1.0, 0.0], [2.0, 0.0]])
A2 = np.array([[0.0, 1.0], [0.0, 3.0]])
X = np.array([[1.0, 0.0], [3.0, 4.0]])
Y = np.array([[0.0, 1.0], [4.0, 3.0]])


def test_hand_example_associations():
    np.testing.assert_allclose(associations(X, A1, A2), [1.0, -0.2], atol=1e-12)
    np.testing.assert_allclose(associations(Y, A1, A2), [-1.0, 0.2], atol=1e-12)
    np.testing.assert_allclose(cosine_matrix(X, A2), [[0.0, 0.0], [0.8, 0.8]], atol=1e-12)


def test_hand_example_effect_size_both_ddofs():
    s_x, s_y = associations(X, A1, A2), associations(Y, A1, A2)
    assert effect_size(s_x, s_y) == pytest.approx(0.8 / math.sqrt(2.08 / 3), abs=1e-12)
    assert effect_size(s_x, s_y) == pytest.approx(0.9607689, abs=1e-7)
    assert effect_size(s_x, s_y, ddof=0) == pytest.approx(1.1094004, abs=1e-7)
    # swapping the target sets flips the sign
    assert effect_size(s_y, s_x) == pytest.approx(-0.9607689, abs=1e-7)


def test_hand_example_exact_permutation_p():
    s_x, s_y = associations(X, A1, A2), associations(Y, A1, A2)
    assert weat_statistic(s_x, s_y) == pytest.approx(1.6)
    result = permutation_test(s_x, s_y)
    assert result.method == "exact"
    assert result.partitions == 6 == partition_count(2, 2)
    assert result.exceed == 2
    assert result.p_value == pytest.approx(1 / 3)
    two = permutation_test(s_x, s_y, alternative="two-sided")
    assert (two.exceed, two.p_value) == (4, pytest.approx(2 / 3))
    # the other direction: T1 = {y1, y2} is the least associated partition but one -> 5 of 6 reach it
    assert permutation_test(s_y, s_x).p_value == pytest.approx(5 / 6)


def test_ddof_variants_differ_by_the_expected_factor():
    rng = np.random.default_rng(1)
    s_x, s_y = rng.normal(0.3, 1, 7), rng.normal(0, 1, 9)
    n = 16
    e1, e0 = effect_size(s_x, s_y, ddof=1), effect_size(s_x, s_y, ddof=0)
    assert e0 == pytest.approx(e1 * math.sqrt(n / (n - 1)), rel=1e-12)
    assert abs(e0) > abs(e1)


def test_monte_carlo_agrees_with_exact():
    # 8 + 8 targets: C(16, 8) = 12,870 partitions, so both paths are possible.
    rng = np.random.default_rng(7)
    s_x, s_y = rng.normal(0.35, 1, 8), rng.normal(0, 1, 8)
    exact = permutation_test(s_x, s_y)
    assert exact.method == "exact" and exact.partitions == 12870
    mc = permutation_test(s_x, s_y, exact_max=12869, n_samples=40_000, seed=3)
    assert mc.method == "monte_carlo" and mc.partitions == 40_000
    assert mc.p_value == pytest.approx((mc.exceed + 1) / 40_001)
    # 0.1 < p < 0.9 here; the Monte Carlo standard error is < 0.0025, so 0.01 is 4 standard errors
    assert 0.1 < exact.p_value < 0.9
    assert abs(mc.p_value - exact.p_value) < 0.01
    # seeded: the same seed gives the same p, another seed (almost surely) another one
    assert permutation_test(s_x, s_y, exact_max=1, n_samples=40_000, seed=3).p_value == mc.p_value
    assert permutation_test(s_x, s_y, exact_max=1, n_samples=40_000, seed=4).p_value != mc.p_value


def test_exact_threshold_is_inclusive_and_monte_carlo_never_zero():
    s_x, s_y = np.arange(8.0) + 100, np.arange(8.0)  # T1 dominates completely
    assert permutation_test(s_x, s_y, exact_max=12870).method == "exact"
    exact = permutation_test(s_x, s_y)
    assert exact.p_value == pytest.approx(1 / 12870)  # only the observed partition reaches itself
    mc = permutation_test(s_x, s_y, exact_max=12869, n_samples=1000, seed=0)
    assert mc.exceed == 0 and mc.p_value == pytest.approx(1 / 1001)  # pseudo-count: never 0


def test_exact_p_equals_brute_force_for_unequal_sizes_and_ties():
    """The exact path against a direct enumeration of the appendix's definition, Prob_i[s(T1^i, T2^i) >=
    s(T1, T2)] with s = sum_T1 - sum_T2, for unequal set sizes and values rounded so that many tie."""
    import itertools

    rng = np.random.default_rng(0)
    for _ in range(100):
        n1, n2 = (int(v) for v in rng.integers(1, 7, 2))
        values = np.round(rng.normal(size=n1 + n2), 1)
        observed = values[:n1].sum() - values[n1:].sum()
        hits = total = 0
        for first in itertools.combinations(range(n1 + n2), n1):
            pick = np.zeros(n1 + n2, dtype=bool)
            pick[list(first)] = True
            hits += values[pick].sum() - values[~pick].sum() >= observed - 1e-9
            total += 1
        result = permutation_test(values[:n1], values[n1:])
        assert (result.method, result.partitions, result.exceed) == ("exact", total, hits)


def test_degenerate_and_bad_input():
    assert math.isnan(effect_size([1.0, 1.0], [1.0, 1.0]))
    assert permutation_test([1.0, 1.0], [1.0, 1.0]).p_value == 1.0  # every partition ties
    with pytest.raises(DataError):
        effect_size([], [1.0])
    with pytest.raises(DataError):
        permutation_test([1.0], [])
    with pytest.raises(DataError, match="zero vector"):
        cosine_matrix(np.zeros((1, 2)), A1)
    with pytest.raises(ValueError):
        permutation_test([1.0], [2.0], alternative="less")


def _scores(version: str = "") -> pa.Table:
    s = {"targ1": [1.0, -0.2], "targ2": [-1.0, 0.2]}
    rows = []
    for role, values in s.items():
        for pos, value in enumerate(values):
            rows.append(
                {
                    "test": "hand",
                    "version": version,
                    "pooling": "mean",
                    "role": role,
                    "category": role,
                    "unit": f"{role}-{pos}",
                    "position": pos,
                    "s": value,
                    "assoc_attr1": math.nan,
                    "assoc_attr2": math.nan,
                    "n_attr1": 2,
                    "n_attr2": 2,
                }
            )
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA)


def test_metric_rows_from_cached_associations():
    rows = seat_metric_rows(_scores("v2"), SeatOptions.from_config({"ddof": [1, 0]}))
    by_variant = {r["variant"]: r for r in rows}
    assert set(by_variant) == {"version=v2,pooling=mean,ddof=1", "version=v2,pooling=mean,ddof=0"}
    assert by_variant["version=v2,pooling=mean,ddof=1"]["value"] == pytest.approx(0.9607689, abs=1e-7)
    assert by_variant["version=v2,pooling=mean,ddof=0"]["value"] == pytest.approx(1.1094004, abs=1e-7)
    for r in rows:
        assert (r["metric"], r["subset"], r["n"]) == ("effect_size", "hand", 4)
        assert r["p_value"] == pytest.approx(1 / 3)
    classic = seat_metric_rows(_scores(""), SeatOptions.from_config({"alternative": "two-sided"}))
    assert [r["variant"] for r in classic] == ["pooling=mean,ddof=1,alternative=two-sided"]
    assert classic[0]["p_value"] == pytest.approx(2 / 3)
    assert variant_name("v1", "mean_padded128", 0) == "version=v1,pooling=mean_padded128,ddof=0"


def test_metric_options_are_checked():
    assert SeatOptions.from_config({}).ddof == (1,)
    assert SeatOptions.from_config({"ddof": 0}).ddof == (0,)
    with pytest.raises(ConfigError, match=r"benchmarks\.seat\.metric\.bootstrap"):
        SeatOptions.from_config({"bootstrap": 10})
    with pytest.raises(ConfigError, match="ddof"):
        SeatOptions.from_config({"ddof": [2]}, "benchmarks.seat.metric")
    with pytest.raises(ConfigError, match="alternative"):
        SeatOptions.from_config({"alternative": "less"})
    with pytest.raises(ConfigError, match="n_samples"):
        SeatOptions.from_config({"n_samples": 0})
