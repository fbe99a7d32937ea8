"""Counterfactual pair metrics on hand-written texts with hand-computed values: ROUGE-L, tokens and
neutralising, sentiment parity (VADER README sentences of known compound), the unpaired count, directions and
the seeded bootstrap."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from lmbias.benchmarks.counterfactual import SCORES_SCHEMA
from lmbias.errors import ConfigError
from lmbias.metrics.bold import vader_compound
from lmbias.metrics.counterfactual import (
    CounterfactualOptions,
    counterfactual_metric_rows,
    lcs_length,
    pair_values,
    rouge_l,
    word_tokens,
)

POSITIVE, NEGATIVE = "VADER is smart, handsome, and funny.", "VADER is not smart, handsome, nor funny."
NEUTRAL = "The film was released in 1990."


def test_known_compounds():
    assert vader_compound([POSITIVE, NEGATIVE, NEUTRAL]).tolist() == [0.8316, -0.7424, 0.0]


def test_rouge_l_by_hand():
    assert lcs_length("the cat sat on the mat".split(), "the cat on the mat".split()) == 5
    # P = 5/6, R = 5/5: F1 = 2 (5/6) / (5/6 + 1) = 10/11
    assert rouge_l("the cat sat on the mat".split(), "the cat on the mat".split()) == pytest.approx(10 / 11)
    assert rouge_l("a b c d".split(), "d c b a".split()) == pytest.approx(0.25)  # LCS 1 of 4 and 4
    assert rouge_l([], []) == 1.0 and rouge_l(["a"], []) == 0.0 and rouge_l(["a"], ["b"]) == 0.0
    assert rouge_l(list("abcbdab"), list("bdcaba")) == pytest.approx(2 * 4 / 13)  # CLRS' LCS example: 4 of 7, 6


def test_tokens_and_neutralising():
    assert word_tokens("He's GREAT, isn't he?") == ["he", "s", "great", "isn", "t", "he"]
    assert word_tokens("") == [] and word_tokens(None) == []
    assert word_tokens("The actor met his wife", neutralize=True) == word_tokens(
        "The actress met her husband", neutralize=True
    )
    assert word_tokens("She saw him", neutralize=True) == ["<he/she>", "saw", "<him/his/her/hers>"]
    assert word_tokens("Kings and queens", neutralize=True) == ["<kings/queens>", "and", "<kings/queens>"]


def _scores(pairs, unpaired=1) -> pa.Table:
    """pairs: [(direction, prompt's continuation, twin's continuation)], one sample each; then `unpaired` prompts
    without a twin."""
    rows = []
    for i, (direction, a, b) in enumerate(pairs):
        rows.append(
            {
                "prompt_id": i,
                "prompt": f"p{i}",
                "twin": f"t{i}",
                "direction": direction,
                "swaps": [{"prompt": "he", "twin": "she"}],
                "sample": 0,
                "continuation": a,
                "twin_continuation": b,
            }
        )
    for j in range(unpaired):
        rows.append({"prompt_id": len(pairs) + j, "prompt": "nothing", "swaps": []})
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA)


def _rows(table, **options):
    return {(r["metric"], r["subset"]): r for r in counterfactual_metric_rows(table, CounterfactualOptions(**options))}


def test_every_value_by_hand():
    table = _scores(
        [
            ("male->female", POSITIVE, NEGATIVE),  # |0.8316 + 0.7424| = 1.574, classes + vs -
            ("female->male", NEUTRAL, POSITIVE),  # the male side is the twin's (positive), the female side neutral
            ("male->female", NEUTRAL, NEUTRAL),  # the same text
        ]
    )
    rows = _rows(table, bootstrap=200)
    assert rows[("n_unpaired", "all")]["value"] == 1 and rows[("n_unpaired", "all")]["n"] == 4
    assert math.isnan(rows[("n_unpaired", "all")]["ci_low"]) and rows[("n_unpaired", "all")]["interval"] is None
    assert rows[("exact_match", "all")]["value"] == pytest.approx(100 / 3)
    # ROUGE-L: POSITIVE vs NEGATIVE share 5 words of 6 and 7 -> 2 (5/6)(5/7) / (5/6 + 5/7) = 10/13; NEUTRAL vs
    # POSITIVE none; the last pair 1
    assert rows[("rouge_l", "all")]["value"] == pytest.approx((10 / 13 + 0 + 1) / 3)
    assert rows[("sentiment_abs_diff", "all")]["value"] == pytest.approx((1.574 + 0.8316 + 0) / 3)
    assert rows[("sentiment_class_flip", "all")]["value"] == pytest.approx(200 / 3)
    assert rows[("sentiment_diff", "all")]["value"] == pytest.approx((1.574 + 0.8316 + 0) / 3)
    # positive male-side texts: 2 of 3; female-side: 0 of 3
    assert rows[("weak_sentiment_parity", "all")]["value"] == pytest.approx(200 / 3)
    # W1 of male {0.8316, 0.8316, 0} and female {-0.7424, 0, 0}: sorted, matched in order
    assert rows[("strict_sentiment_parity", "all")]["value"] == pytest.approx((0.7424 + 0.8316 + 0.8316) / 3)
    assert rows[("exact_match", "male->female")]["value"] == 50.0 and rows[("exact_match", "male->female")]["n"] == 2
    assert rows[("sentiment_diff", "female->male")]["value"] == pytest.approx(0.8316)
    assert ("cosine", "all") not in rows  # no encoder: no cosine rows
    assert rows[("rouge_l", "all")]["variant"] == "f1,neutralized-words"
    assert rows[("weak_sentiment_parity", "all")]["variant"] == "vader,positive>=0.5,negative<=-0.5"
    for r in rows.values():
        if r["metric"] != "n_unpaired":
            assert r["ci_low"] <= r["value"] + 1e-12 and r["value"] <= r["ci_high"] + 1e-12, r
            assert r["benchmark"] == "counterfactual_pairs" and r["interval"] == "bootstrap"


def test_identical_continuations_are_perfectly_fair():
    table = _scores([("male->female", POSITIVE, POSITIVE), ("female->male", NEGATIVE, NEGATIVE)], unpaired=0)
    rows = _rows(table)
    assert rows[("exact_match", "all")]["value"] == 100.0 and rows[("rouge_l", "all")]["value"] == 1.0
    for metric in ("sentiment_abs_diff", "sentiment_class_flip", "sentiment_diff", "weak_sentiment_parity"):
        assert rows[(metric, "all")]["value"] == 0.0, metric
    assert rows[("strict_sentiment_parity", "all")]["value"] == 0.0
    assert rows[("n_unpaired", "all")]["value"] == 0


def test_neutralising_and_mixed_pairs():
    table = _scores([("male->female", "He was born.", "She was born."), ("mixed", "ok", "fine")], unpaired=0)
    neutral, raw = _rows(table), _rows(table, neutralize=False)
    assert neutral[("exact_match", "male->female")]["value"] == 100.0
    assert raw[("exact_match", "male->female")]["value"] == 0.0
    assert raw[("rouge_l", "male->female")]["value"] == pytest.approx(2 / 3)  # he was born / she was born
    assert raw[("rouge_l", "all")]["variant"] == "f1,raw"
    # a mixed pair has no male or female side: its side rows are missing and `all`'s read the other pair only
    assert ("sentiment_diff", "mixed") not in neutral and ("rouge_l", "mixed") in neutral
    assert neutral[("sentiment_diff", "all")]["n"] == 1 and neutral[("rouge_l", "all")]["n"] == 2


def test_pair_values_and_cosine_rows():
    table = _scores([("male->female", "a b", "a b"), ("female->male", "a b", "a c")], unpaired=0)
    table = table.set_column(table.schema.get_field_index("cosine"), "cosine", pa.array([1.0, 0.5]))
    values = pair_values(table)
    assert values.column("rouge_l").to_pylist() == [1.0, 0.5]
    assert values.column("exact_match").to_pylist() == [100.0, 0.0]
    rows = _rows(table)
    assert rows[("cosine", "all")]["value"] == 0.75 and rows[("cosine", "female->male")]["value"] == 0.5


def test_bootstrap_is_seeded():
    table = _scores([("male->female", POSITIVE, NEUTRAL if i % 3 else NEGATIVE) for i in range(30)], unpaired=0)

    def intervals(**options):
        return [
            (r["ci_low"], r["ci_high"]) for r in counterfactual_metric_rows(table, CounterfactualOptions(**options))
        ]

    assert intervals(seed=1) == intervals(seed=1) and intervals(seed=1) != intervals(seed=2)
    assert all(math.isnan(lo) for lo, _ in intervals(bootstrap=0))


def test_options_name_their_key():
    with pytest.raises(ConfigError, match=r"benchmarks\.cf\.metric\.toxicity: unknown key"):
        CounterfactualOptions.from_config({"toxicity": True}, "benchmarks.cf.metric")
    with pytest.raises(ConfigError, match="neutralize"):
        CounterfactualOptions.from_config({"neutralize": "yes"}, "benchmarks.cf.metric")
    assert CounterfactualOptions.from_config(None) == CounterfactualOptions()
