"""DA-score (over-debiasing paper, section 5) from cached DA-Gender scores.

DA-score = 100 x (1 - violations / N), in percent as the paper's Table 8. A pair violates when the genuine
target (the one the attribute implies) is *not above* the other one (a tie is a violation):

* ``association=ratio`` (default, mlm and seq2seq): by the association log p(TM) - log p(TAM) of each target
  (the logprob-score association; the prior removes how likely each word is in the template anyway);
* ``association=tm`` (mlm and seq2seq): by log p(TM) alone -- the paper's literal wording ("we mask the target
  word and compute the probability of the two options");
* ``association=sentence`` (clm, always): by the log-likelihood of the two full sentences.

Both targets of a pair are scored in the same masked contexts, so a context-independent shift of one word's
logit (a planted output bias) moves its log p(TM) and log p(TAM) by the same normaliser-free amount relative
to the other word: the ``ratio`` margin is invariant to it, the ``tm`` margin moves by exactly that amount.

Rows: ``da_score`` (Wilson 95 % interval) and ``mean_margin`` (mean genuine-minus-other margin, nats), for the
subsets ``all``, ``ideal=male``, ``ideal=female`` and ``template=T1`` .. ``template=T6``.
Option ``associations``: which of ratio/tm to report for mlm and seq2seq scores (default both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lmbias.errors import DataError
from lmbias.options import check_block

ASSOCIATIONS = ("ratio", "tm")
Z95 = 1.959963984540054


@dataclass(frozen=True)
class DaGenderOptions:
    associations: tuple[str, ...] = ASSOCIATIONS

    @classmethod
    def from_config(cls, metric_cfg: dict, key: str = "benchmarks.da_gender.metric") -> DaGenderOptions:
        check_block(metric_cfg, "benchmarks.da_gender.metric", key)
        return cls(tuple((metric_cfg or {}).get("associations", list(ASSOCIATIONS))))


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n (NaN when n = 0)."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def margins(scores: pa.Table, association: str) -> np.ndarray:
    """Genuine-minus-other margin of every pair (> 0: the pair prefers the genuine target)."""
    col = {
        name: np.asarray(scores.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
        for name in ("tm_male", "tam_male", "tm_female", "tam_female", "sentence_male", "sentence_female")
    }
    if association == "ratio":
        male_minus_female = (col["tm_male"] - col["tam_male"]) - (col["tm_female"] - col["tam_female"])
    elif association == "tm":
        male_minus_female = col["tm_male"] - col["tm_female"]
    elif association == "sentence":
        male_minus_female = col["sentence_male"] - col["sentence_female"]
    else:
        raise ValueError(f"unknown association {association!r}")
    if np.isnan(male_minus_female).any():
        raise DataError(f"DA-Gender scores hold no values for association={association}")
    ideal = np.asarray(scores.column("ideal").to_pylist(), dtype=object)
    sign = np.where(ideal == "male", 1.0, -1.0)
    return sign * male_minus_female


def da_gender_metric_rows(scores: pa.Table, options: DaGenderOptions) -> list[dict]:
    kinds = set(scores.column("score_kind").to_pylist())
    if len(kinds) != 1:
        raise DataError(f"DA-Gender scores mix score kinds {sorted(kinds)}")
    kind = kinds.pop()
    associations = ["sentence"] if kind == "sentence" else list(options.associations)
    masks = sorted(set(scores.column("attribute_masks").to_pylist()))
    ideal = np.asarray(scores.column("ideal").to_pylist(), dtype=object)
    template = np.asarray(scores.column("template_id").to_pylist(), dtype=object)
    subsets = [
        ("all", np.ones(len(ideal), dtype=bool)),
        ("ideal=male", ideal == "male"),
        ("ideal=female", ideal == "female"),
    ]
    subsets += [(f"template={t}", template == t) for t in sorted(set(template.tolist()))]
    rows: list[dict] = []
    for association in associations:
        margin = margins(scores, association)
        variant = f"association={association}" + (f",masks={masks[0]}" if masks and masks[0] else "")
        for subset, sel in subsets:
            n = int(sel.sum())
            if n == 0:
                continue
            ok = int(np.sum(margin[sel] > 0))
            lo, hi = wilson_interval(ok, n)
            base = {"benchmark": "da_gender", "variant": variant, "subset": subset, "p_value": math.nan, "n": n}
            rows.append(
                {
                    **base,
                    "metric": "da_score",
                    "value": 100.0 * ok / n,
                    "ci_low": 100.0 * lo,
                    "ci_high": 100.0 * hi,
                    "interval": "wilson",
                }
            )
            rows.append(
                {
                    **base,
                    "metric": "mean_margin",
                    "value": float(margin[sel].mean()),
                    "ci_low": math.nan,
                    "ci_high": math.nan,
                }
            )
    return rows
