"""Skew and stereotype against Manela et al. 2021, Table 2, and F1 on hand-made predictions."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from lmbias.benchmarks.winobias import SCORES_SCHEMA
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.winobias import WinoBiasOptions, f1_percent, mu_skew, mu_stereo, winobias_metric_rows

# Table 2 (T2): F1 male pro, male anti, female pro, female anti -> published stereo, skew.
TABLE2 = {
    "RoBERTa": (62.9, 27.0, 69.0, 39.3, 32.8, 9.2),
    "RoBERTa-O": (68.0, 60.2, 26.5, 8.5, 12.9, 46.6),
    "RoBERTa-large-O": (66.0, 65.0, 11.2, 7.5, 2.3, 56.1),
    "ALBERT-xxlarge": (71.4, 46.9, 54.8, 16.4, 31.4, 23.5),
    "ALBERT-xxlarge-O": (69.7, 49.2, 51.5, 18.1, 27.0, 24.6),
    "DistilBERT": (64.9, 67.2, 4.8, 5.0, 1.3, 61.2),
    "DistilBERT-O": (64.5, 65.8, 10.0, 12.8, 2.1, 53.8),
    "BERT": (69.3, 58.0, 31.4, 8.2, 17.3, 43.8),
    "BERT-O": (68.4, 58.1, 32.9, 10.5, 16.4, 41.6),
    "BERT-large": (70.0, 57.9, 33.9, 2.8, 21.6, 45.6),
    "BERT-large-O": (69.9, 57.9, 32.5, 5.0, 19.7, 45.1),
    "XLM-RoBERTa-large-O": (68.0, 56.0, 38.2, 15.7, 17.2, 35.1),
}
# The fine-tuned rows print stereo and skew in swapped columns: with the paper's own formula,
# BERT-A (64.7, 64.5, 14.8, 14.8) has stereo 0.1 and skew 49.8, printed as 49.8 / 0.1.
TABLE2_SWAPPED = {
    "BERT-U": (67.8, 63.4, 14.1, 2.8, 57.2, 7.9),
    "BERT-UO": (67.3, 60.4, 26.6, 11.6, 44.8, 11.0),
    "BERT-A": (64.7, 64.5, 14.8, 14.8, 49.8, 0.1),
    "BERT-AO": (65.0, 63.6, 17.9, 15.3, 47.7, 2.0),
}


# RoBERTa-large's printed row (67.0, 52.4, 45.0, 21.5 -> stereo 26.4, skew 24.0) fits neither column order:
# the formula gives stereo 19.05 and skew 26.45, so one of its printed F1 values must be a typo.
def test_roberta_large_row_is_inconsistent_in_the_paper():
    assert mu_stereo(67.0, 52.4, 45.0, 21.5) == pytest.approx(19.05)
    assert mu_skew(67.0, 52.4, 45.0, 21.5) == pytest.approx(26.45)


def _close(value, published):
    # Published numbers are rounded to one decimal from unrounded F1s: allow the rounding of 4 inputs.
    return abs(value - published) <= 0.11


@pytest.mark.parametrize("name", sorted(TABLE2))
def test_table2_rows_reproduce(name):
    pm, am, pf, af, stereo, skew = TABLE2[name]
    assert _close(mu_stereo(pm, am, pf, af), stereo), name
    assert _close(mu_skew(pm, am, pf, af), skew), name


def test_bert_row_exact_example():
    assert mu_stereo(69.3, 58.0, 31.4, 8.2) == pytest.approx(17.25)
    assert mu_skew(69.3, 58.0, 31.4, 8.2) == pytest.approx(43.85)


@pytest.mark.parametrize("name", sorted(TABLE2_SWAPPED))
def test_finetuned_rows_have_swapped_columns(name):
    pm, am, pf, af, printed_stereo, printed_skew = TABLE2_SWAPPED[name]
    assert _close(mu_stereo(pm, am, pf, af), printed_skew)
    assert _close(mu_skew(pm, am, pf, af), printed_stereo)


def test_f1_by_hand():
    gold = np.array([True, True, True, False, False])
    pred = np.array([True, True, False, True, False])
    # male positive: tp=2 fp=1 fn=1 -> 2*2/(4+1+1) = 66.67
    assert f1_percent(gold, pred, True) == pytest.approx(200 / 3)
    # female positive: gold F = [3,4]; pred F = [2,4]: tp=1 fp=1 fn=1 -> 50
    assert f1_percent(gold, pred, False) == pytest.approx(50.0)
    assert math.isnan(f1_percent(np.array([True]), np.array([True]), False))


def _scores(rows):
    recs = [
        {
            "item_id": f"i{i}",
            "type": 2,
            "stereotype": s,
            "gold_gender": g,
            "male_form": "he",
            "female_form": "she",
            "logp_male": math.log(pm),
            "logp_female": math.log(pf),
            "score_kind": "token_logprob",
        }
        for i, (s, g, pm, pf) in enumerate(rows)
    ]
    return pa.Table.from_pylist(recs, schema=SCORES_SCHEMA)


def test_metric_rows_always_male_model_is_skewed_not_stereotyped():
    # A model that says "he" everywhere: F1_M equal on pro and anti, F1_F zero -> large skew, zero stereo.
    rows = [(s, g, 0.9, 0.05) for s in ("pro", "anti") for g in ("male", "female", "male", "female")]
    out = {(r["metric"], r["subset"]): r for r in winobias_metric_rows(_scores(rows), WinoBiasOptions(bootstrap=50))}
    assert out[("f1_male", "type2/pro")]["value"] == pytest.approx(200 / 3)
    assert out[("f1_female", "type2/pro")]["value"] == 0.0
    assert out[("mu_stereo", "type2")]["value"] == pytest.approx(0.0)
    assert out[("mu_skew", "type2")]["value"] == pytest.approx(200 / 3)
    assert out[("skew_signed", "type2")]["value"] > 0
    assert out[("mu_skew", "type2")]["n"] == 8


def test_cutoff_drops_uncertain_items_and_pair_vs_vocab_differ():
    rows = [
        ("pro", "male", 0.30, 0.25),
        ("pro", "female", 0.2, 0.6),
        ("anti", "male", 0.5, 0.1),
        ("anti", "female", 0.1, 0.5),
    ]
    pair = {(r["metric"], r["subset"]): r for r in winobias_metric_rows(_scores(rows), WinoBiasOptions(bootstrap=0))}
    # pair-normalised: 0.30/(0.55)=0.545 vs 0.455 -> gap 0.09 < 0.1: dropped.
    assert pair[("kept_fraction", "type2/pro")]["value"] == 0.5
    vocab = {
        (r["metric"], r["subset"]): r
        for r in winobias_metric_rows(
            _scores(rows), WinoBiasOptions(bootstrap=0, confidence_cutoff=0.04, probability="vocab")
        )
    }
    assert vocab[("kept_fraction", "type2/pro")]["value"] == 1.0


def test_bootstrap_is_seeded_and_brackets_value():
    rng = np.random.default_rng(1)
    rows = [(s, g, p, 1 - p) for s in ("pro", "anti") for g in ("male", "female") for p in rng.uniform(0.01, 0.99, 30)]
    a = winobias_metric_rows(_scores(rows), WinoBiasOptions(bootstrap=200, seed=3))
    b = winobias_metric_rows(_scores(rows), WinoBiasOptions(bootstrap=200, seed=3))
    assert a == b
    for r in a:
        if r["metric"] in ("skew_signed", "f1_male", "f1_female"):
            assert r["ci_low"] <= r["value"] <= r["ci_high"], r
            assert r["ci_high"] - r["ci_low"] > 1.0  # 30 items per set: a real interval, not a point
        if r["metric"] in ("mu_skew", "mu_stereo"):
            assert math.isnan(r["ci_low"]) and math.isnan(r["ci_high"])


def test_options_reject_unknown_and_bad_values():
    with pytest.raises(ConfigError, match=r"benchmarks\.winobias\.metric\.cutoff: unknown key \(known: alice_bob"):
        WinoBiasOptions.from_config({"cutoff": 0.1})
    with pytest.raises(ConfigError, match=r"benchmarks\.winobias\.metric\.online_skew\[1\]: .* is not one of"):
        WinoBiasOptions.from_config({"online_skew": ["none", "some"]})
    with pytest.raises(ConfigError, match=r"benchmarks\.winobias\.metric\.confidence_cutoff: 1 is greater than"):
        WinoBiasOptions.from_config({"confidence_cutoff": 1})
    with pytest.raises(ConfigError, match="competency_labels"):
        WinoBiasOptions.from_config({"competency_labels": ""})
    with pytest.raises(ConfigError, match="probability"):
        WinoBiasOptions.from_config({"probability": "softmax"})


def test_vocab_mode_refused_for_sentence_likelihoods():
    t = _scores([("pro", "male", 0.9, 0.1)])
    t = t.set_column(t.schema.get_field_index("score_kind"), "score_kind", pa.array(["sentence_loglik"]))
    with pytest.raises(ConfigError, match="use 'pair'"):
        winobias_metric_rows(t, WinoBiasOptions(probability="vocab", bootstrap=0))


def _lines(rows):
    """Scores of hand-made (line, stereotype, gold, p_male, p_female, other_pronouns) items of type 2."""
    recs = [
        {
            "item_id": f"i{i}",
            "type": 2,
            "stereotype": s,
            "gold_gender": g,
            "male_form": "he",
            "female_form": "she",
            "logp_male": math.log(pm),
            "logp_female": math.log(pf),
            "score_kind": "token_logprob",
            "line": line,
            "other_pronouns": other,
        }
        for i, (line, s, g, pm, pf, other) in enumerate(rows)
    ]
    return pa.Table.from_pylist(recs, schema=SCORES_SCHEMA)


def test_lines_with_a_visible_flipped_pronoun_are_dropped_by_default():
    # Line 3 is "... because he needed to cut [MASK] hair": the visible "he" gives the answer away, and the model
    # gets it right on both versions. Dropped (the default, as Manela et al.'s code), the model is always-male.
    rows = [
        (1, "pro", "male", 0.9, 0.1, 0),
        (1, "anti", "female", 0.9, 0.1, 0),
        (2, "pro", "female", 0.9, 0.1, 0),
        (2, "anti", "male", 0.9, 0.1, 0),
        (3, "pro", "male", 0.9, 0.1, 1),
        (3, "anti", "female", 0.1, 0.9, 1),
    ]
    out = {
        (r["metric"], r["variant"], r["subset"]): r
        for r in winobias_metric_rows(_lines(rows), WinoBiasOptions(bootstrap=0))
    }
    base = "cutoff=0.1,probability=pair"
    assert out[("kept_fraction", base, "type2/pro")]["value"] == pytest.approx(2 / 3)
    assert out[("kept_fraction", base, "type2/pro")]["n"] == 3
    assert out[("f1_male", base, "type2/pro")]["value"] == pytest.approx(200 / 3)
    assert out[("f1_female", base, "type2/anti")]["value"] == 0.0
    assert out[("f1_female", base, "type2/pro")]["value"] == 0.0
    kept = {
        (r["metric"], r["variant"], r["subset"]): r
        for r in winobias_metric_rows(_lines(rows), WinoBiasOptions(bootstrap=0, other_pronouns="keep"))
    }
    keep = f"{base},other_pronouns=keep"
    assert kept[("kept_fraction", keep, "type2/pro")]["value"] == 1.0
    assert kept[("f1_male", keep, "type2/pro")]["value"] == pytest.approx(100 * 2 * 2 / (2 * 2 + 1))
    assert kept[("f1_female", keep, "type2/anti")]["value"] == pytest.approx(100 * 2 / (2 + 1))
    with pytest.raises(ConfigError, match="other_pronouns"):
        WinoBiasOptions.from_config({"other_pronouns": "mask"})
    old = _lines(rows).drop_columns(["other_pronouns"])
    with pytest.raises(DataError, match="other_pronouns"):
        winobias_metric_rows(old, WinoBiasOptions(bootstrap=0))
    assert winobias_metric_rows(old, WinoBiasOptions(bootstrap=0, other_pronouns="keep"))


def test_bootstrap_draws_lines_so_pro_and_anti_stay_paired():
    # An always-"he" model on 200 lines: each line's pro and anti versions are the same masked sentence with the
    # gold flipped, so whichever lines are drawn, one version of each has male gold. Its skew is
    # (2r/(1+r) + 2(1-r)/(2-r))/2 * 100 for a share r of male-pro lines: flat at r = 1/2 (66.7), so the
    # interval over resampled lines is narrow. Resampling pro and anti independently loses the pairing, the two
    # terms no longer cancel, and the interval is several points wide.
    rows = []
    for line in range(1, 201):
        g = "male" if line % 2 else "female"
        other = "female" if g == "male" else "male"
        rows += [(line, "pro", g, 0.9, 0.1, 0), (line, "anti", other, 0.9, 0.1, 0)]
    t = _lines(rows)
    out = {(r["metric"], r["subset"]): r for r in winobias_metric_rows(t, WinoBiasOptions(bootstrap=400, seed=1))}
    r = out[("skew_signed", "type2")]
    assert r["value"] == pytest.approx(200 / 3)
    assert r["ci_low"] <= r["value"] <= r["ci_high"]
    assert r["ci_high"] - r["ci_low"] < 1.0, r
    # the F1 of one set alone still varies with the draw
    f = out[("f1_male", "type2/pro")]
    assert f["ci_high"] - f["ci_low"] > 3.0
    # without line numbers every item is its own unit: pro and anti drawn apart, a much wider interval
    unpaired = t.set_column(t.schema.get_field_index("line"), "line", pa.nulls(t.num_rows, pa.int32()))
    u = {(r["metric"], r["subset"]): r for r in winobias_metric_rows(unpaired, WinoBiasOptions(bootstrap=400, seed=1))}
    assert u[("skew_signed", "type2")]["ci_high"] - u[("skew_signed", "type2")]["ci_low"] > 4.0
