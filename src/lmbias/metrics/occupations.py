"""Occupation bias and aggregate occupation bias (Lu et al. 2018, section 3.1, Definitions 1 and 3).

The score s of an instance is the log-likelihood of the occupation given the prefix (the language-model
setting: "the disparities of emission log-likelihood of gender-neutral words conditioned on gendered
sentence prefixes"). For an occupation o, the matched pairs are the templates instantiated with o and
their naive-intervention partners, and the bias is the expected score difference (Definition 1):

    B(o)    = 1/|T| sum_t [ s(t_male[o]) - s(t_female[o]) ]        (positive: more likely after a male subject)
    AOB     = 1/|O| sum_o |B(o)|                                    ("expected absolute bias across class members")
    AOB_signed = 1/|O| sum_o B(o)                                   (Lu et al., Table 3: "with preserved signs")

Rows: ``occupation_bias`` per occupation (subset ``occupation/<name>``, n = templates), ``aob`` and
``aob_signed`` (subset ``all``, n = occupations) with seeded percentile-bootstrap intervals over
occupations; ``aob_signed`` carries a two-sided one-sample t-test p-value (H0: mean B(o) = 0).
Variant ``scoring=<score_kind>`` says how s was obtained (next-word, masked pieces, or seq2seq infill).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lmbias.metrics.summary import metric_row
from lmbias.options import check_block


@dataclass(frozen=True)
class OccupationOptions:
    bootstrap: int = 1000
    seed: int = 0

    @classmethod
    def from_config(cls, metric_cfg: dict, key: str = "benchmarks.occupations.metric") -> OccupationOptions:
        """The options of a metric block, checked against the schema (lmbias.options)."""
        check_block(metric_cfg, "benchmarks.occupations.metric", key)
        return cls(**(metric_cfg or {}))


def occupation_bias(scores: pa.Table) -> dict[str, tuple[float, int]]:
    """{occupation: (B(o), number of templates)} in first-seen order."""
    occ = scores.column("occupation").to_pylist()
    diff = np.asarray(scores.column("logp_male").to_numpy(), dtype=np.float64) - np.asarray(
        scores.column("logp_female").to_numpy(), dtype=np.float64
    )
    sums: dict[str, list[float]] = {}
    for o, d in zip(occ, diff):
        sums.setdefault(o, []).append(float(d))
    return {o: (float(np.mean(v)), len(v)) for o, v in sums.items()}


def aggregate_occupation_bias(biases) -> tuple[float, float]:
    """(AOB, signed AOB) of per-occupation biases."""
    b = np.asarray(list(biases), dtype=np.float64)
    return float(np.mean(np.abs(b))), float(np.mean(b))


def occupation_metric_rows(scores: pa.Table, options: OccupationOptions) -> list[dict]:
    kinds = sorted(set(scores.column("score_kind").to_pylist()))
    variant = f"scoring={'+'.join(kinds)}"
    per = occupation_bias(scores)
    rows: list[dict] = []

    def row(metric, subset, value, n, ci=(math.nan, math.nan), p=math.nan):
        rows.append(
            metric_row(
                "occupations", metric, variant, subset, value, n, ci, interval="bootstrap_occupations", p_value=p
            )
        )

    for occ, (b, n) in per.items():
        row("occupation_bias", f"occupation/{occ}", b, n)
    values = np.asarray([b for b, _ in per.values()], dtype=np.float64)
    if len(values) == 0:
        return rows
    aob, signed = aggregate_occupation_bias(values)
    rng = np.random.default_rng(options.seed)
    boot = np.empty((options.bootstrap, 2))
    for k in range(options.bootstrap):
        boot[k] = aggregate_occupation_bias(rng.choice(values, size=len(values), replace=True))

    def ci(col):
        if options.bootstrap == 0:
            return (math.nan, math.nan)
        return (float(np.percentile(boot[:, col], 2.5)), float(np.percentile(boot[:, col], 97.5)))

    p = math.nan
    if len(values) >= 2 and np.std(values, ddof=1) > 0:
        from scipy import stats

        p = float(stats.ttest_1samp(values, 0.0).pvalue)
    row("aob", "all", aob, len(values), ci(0))
    row("aob_signed", "all", signed, len(values), ci(1), p)
    return rows
