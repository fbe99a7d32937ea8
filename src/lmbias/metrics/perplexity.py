"""Perplexity metric rows from cached per-window negative log-likelihoods.

perplexity = exp(sum of NLL / number of tokens scored), over every window of every text (a corpus-level
ratio, as Salazar et al. define pseudo-perplexity and as bias-bench's perplexity.py sums per window);
mean_nll = the exponent itself (nats per token). Both carry a percentile bootstrap interval: the texts
are resampled with replacement (`bootstrap` resamples, numpy generator seeded with `seed`) and the
ratio recomputed; a single text (WikiText's joined stream, bias-bench's setting) resamples its windows.

The variant says what was computed (clm=perplexity | mlm=pseudo_perplexity | seq2seq=pseudo_perplexity)
and, for any text other than WikiText-2, which stand-in it was (`stand-in=gap-test`), so no table can
pass a stand-in off as the published WikiText number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lmbias.errors import ConfigError
from lmbias.metrics.summary import metric_row
from lmbias.options import check_block

KEY = "benchmarks.<perplexity>.metric"


@dataclass(frozen=True)
class PerplexityOptions:
    bootstrap: int = 1000
    seed: int = 0
    confidence: float = 0.95

    @classmethod
    def from_config(cls, metric_cfg: dict | None, key: str = KEY) -> PerplexityOptions:
        """The options of a perplexity entry's metric block, checked against the schema's
        $defs.perplexity_metric; errors name `key`."""
        check_block(metric_cfg, "$defs.perplexity_metric", key)
        return cls(**(metric_cfg or {}))


def _units(scores: pa.Table) -> tuple[np.ndarray, np.ndarray, str]:
    """(NLL sum, tokens, unit name) per resampling unit: per text, or per window when there is a single text."""
    text = np.asarray(scores.column("text_id").to_numpy(zero_copy_only=False))
    nll = np.asarray(scores.column("nll_sum").to_numpy(zero_copy_only=False), dtype=np.float64)
    tokens = np.asarray(scores.column("n_tokens").to_numpy(zero_copy_only=False), dtype=np.float64)
    if len(np.unique(text)) <= 1:
        return nll, tokens, "windows"
    ids, inverse = np.unique(text, return_inverse=True)
    return (
        np.bincount(inverse, weights=nll, minlength=len(ids)),
        np.bincount(inverse, weights=tokens, minlength=len(ids)),
        "texts",
    )


def _bootstrap_mean_nll(nll: np.ndarray, tokens: np.ndarray, options: PerplexityOptions) -> tuple[float, float]:
    if options.bootstrap == 0 or len(nll) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(options.seed)
    draws = rng.integers(0, len(nll), size=(options.bootstrap, len(nll)))
    ratios = nll[draws].sum(1) / np.maximum(tokens[draws].sum(1), 1)
    alpha = (1 - options.confidence) / 2
    return float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha))


def variant_label(scores: pa.Table) -> str:
    kinds = sorted(set(scores.column("score_kind").to_pylist()))
    sources = sorted(set(scores.column("source").to_pylist()))
    if len(kinds) > 1:
        raise ConfigError(f"perplexity scores mix score kinds {kinds}")
    label = kinds[0] if kinds else "unknown"
    stand_ins = [s for s in sources if not s.startswith("wikitext2")]
    if stand_ins:
        label += ",stand-in=" + "+".join(stand_ins)
    return label


def perplexity_metric_rows(scores: pa.Table, options: PerplexityOptions) -> list[dict]:
    variant = variant_label(scores)
    nll, tokens, unit = _units(scores)
    total = float(tokens.sum())
    mean_nll = float(nll.sum() / total) if total else math.nan
    low, high = _bootstrap_mean_nll(nll, tokens, options)
    interval = None if math.isnan(low) else f"bootstrap_{unit}"

    def row(metric, value, ci):
        return metric_row("perplexity", metric, variant, "all", value, total, ci, interval=interval)

    return [
        row("perplexity", math.exp(mean_nll) if total else math.nan, (math.exp(low), math.exp(high))),
        row("mean_nll", mean_nll, (low, high)),
    ]
