"""CrowS-Pairs (Nangia et al. 2020): the batched PLL equals a transcription of Nangia's and bias-bench's
per-token loops, the metric on hand-made scores, real data, and a planted-bias direction check."""

from __future__ import annotations

import difflib
import math

import numpy as np
import pyarrow as pa
import pytest
import torch

from lmbias.benchmarks.crows_pairs import SCORES_SCHEMA, align, score_crows_pairs
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.pll import encode
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.metrics.crows_pairs import CrowsPairsOptions, crows_pairs_metric_rows
from lmbias.parsers import parse_crows_pairs

FAMILY = {"bert": "mlm", "gpt2": "clm", "llama": "clm", "bart": "seq2seq"}


def _load(path, family):
    return load_model(model_spec("tiny", {"path": str(path), "family": family, "revision": "local"}))


@pytest.fixture(scope="module")
def csv_path(shared_data):
    return shared_data / "crows_pairs" / "crows_pairs_anonymized.csv"


@pytest.fixture(scope="module")
def gender(csv_path):
    return parse_crows_pairs(csv_path, bias_types=["gender"])


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    out = tmp_path_factory.mktemp("crows") / "bert"
    build_tiny_model("bert", out, seed=0)
    return _load(out, "mlm")


def test_real_data(csv_path, gender):
    assert gender.num_rows == 262
    everything = parse_crows_pairs(csv_path)
    assert everything.num_rows == 1508
    newline = [r for r in everything.to_pylist() if "\n" in r["sent_more"] + r["sent_less"]]
    assert [r["row_id"] for r in newline] == [1293]  # the quoted field with a line break is one row


def test_align_shared_and_modified_positions():
    s1, s2, m1, m2 = align([101, 5, 6, 7, 102], [101, 5, 9, 9, 7, 102])
    assert (s1, s2) == ([0, 1, 3, 4], [0, 1, 4, 5])
    assert (m1, m2) == ([2], [2, 3])


# --------------------------------------------------------------------------------------------------
# Transcriptions of the reference loops (one full forward pass per masked token)


def _span(ids1, ids2, equal: bool):
    matcher = difflib.SequenceMatcher(None, [str(x) for x in ids1], [str(x) for x in ids2])
    t1, t2 = [], []
    for op in matcher.get_opcodes():
        if (op[0] == "equal") == equal:
            t1 += list(range(op[1], op[2]))
            t2 += list(range(op[3], op[4]))
    return t1, t2


def _logprob_at(model, ids, pos, mask_id):
    masked = torch.tensor([ids])
    masked[0, pos] = mask_id
    with torch.inference_mode():
        logits = model(input_ids=masked).logits[0, pos]
    return float(torch.log_softmax(logits.float(), -1)[ids[pos]])


def nangia_scores(model, tok, sent1, sent2):
    """Nangia et al.'s mask_unigram: sum over shared tokens i in range(1, N-1)."""
    ids1, ids2 = tok.encode(sent1), tok.encode(sent2)
    t1, t2 = _span(ids1, ids2, equal=True)
    s1 = sum(_logprob_at(model, ids1, t1[i], tok.mask_token_id) for i in range(1, len(t1) - 1))
    s2 = sum(_logprob_at(model, ids2, t2[i], tok.mask_token_id) for i in range(1, len(t2) - 1))
    return s1, s2


def bias_bench_scores(model, tok, sent1, sent2):
    """bias-bench's _average_log_probability over the 'diff' spans."""
    ids1, ids2 = tok.encode(sent1), tok.encode(sent2)
    t1, t2 = _span(ids1, ids2, equal=False)
    return (
        float(np.mean([_logprob_at(model, ids1, p, tok.mask_token_id) for p in t1])),
        float(np.mean([_logprob_at(model, ids2, p, tok.mask_token_id) for p in t2])),
    )


def test_batched_pll_equals_the_reference_loops(tiny_bert, gender):
    model, tok = tiny_bert
    rows = gender.to_pylist()
    short = sorted(range(len(rows)), key=lambda i: len(rows[i]["sent_more"]) + len(rows[i]["sent_less"]))
    pick = [i for i in short if rows[i]["stereo_antistereo"] == "stereo"][:3]
    pick += [i for i in short if rows[i]["stereo_antistereo"] == "antistereo"][:3]
    pairs = gender.take(pick)
    scores = score_crows_pairs(pairs, LanguageModel(model, tok, "mlm")).to_pylist()
    assert {r["stereo_antistereo"] for r in pairs.to_pylist()} == {"stereo", "antistereo"}
    for row, got in zip(pairs.to_pylist(), scores):
        stereo = row["stereo_antistereo"] == "stereo"
        sent1, sent2 = (row["sent_more"], row["sent_less"]) if stereo else (row["sent_less"], row["sent_more"])
        n1, n2 = nangia_scores(model, tok, sent1, sent2)
        b1, b2 = bias_bench_scores(model, tok, sent1, sent2)
        more_n, less_n = (n1, n2) if stereo else (n2, n1)
        more_b, less_b = (b1, b2) if stereo else (b2, b1)
        assert got["more_shared_sum"] == pytest.approx(more_n, abs=1e-4)
        assert got["less_shared_sum"] == pytest.approx(less_n, abs=1e-4)
        assert got["more_modified_mean"] == pytest.approx(more_b, abs=1e-5)
        assert got["less_modified_mean"] == pytest.approx(less_b, abs=1e-5)


def test_restricted_passes_equal_the_full_pass_on_the_real_gender_pairs(tiny_bert, gender):
    """scoring.variants: each variant alone hides only the tokens it reads (shared / modified), with the
    numbers of the pass that hides both; the metric refuses a variant that was not scored."""
    from lmbias.engine.batching import EngineStats

    model, tok = tiny_bert
    runs = {}
    for variants in (["nangia", "bias_bench"], ["nangia"], ["bias_bench"]):
        stats = EngineStats()
        runs[tuple(variants)] = (
            score_crows_pairs(gender, LanguageModel(model, tok, "mlm", stats=stats), {"variants": variants}),
            stats,
        )
    full, full_stats = runs[("nangia", "bias_bench")]
    nangia, nangia_stats = runs[("nangia",)]
    bias_bench, bias_bench_stats = runs[("bias_bench",)]
    assert full.num_rows == nangia.num_rows == bias_bench.num_rows == 262

    def col(table, name):
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)

    for name in ("more_shared_sum", "less_shared_sum"):
        np.testing.assert_allclose(
            col(nangia, name), col(full, name), rtol=0, atol=1e-6
        )  # batch composition: float32 noise
        assert np.isnan(col(bias_bench, name)).all()
    for name in ("more_modified_mean", "less_modified_mean"):
        np.testing.assert_allclose(
            col(bias_bench, name), col(full, name), rtol=0, atol=1e-6
        )  # batch composition: float32 noise
        assert np.isnan(col(nangia, name)).all()
    # masked inputs: shared + modified == both (the two sets are disjoint)
    assert nangia_stats.requests + bias_bench_stats.requests == full_stats.requests
    assert bias_bench_stats.requests < full_stats.requests / 4
    for variant in ("nangia", "bias_bench"):
        rows_full = crows_pairs_metric_rows(full, CrowsPairsOptions(variant=variant))
        rows_one = crows_pairs_metric_rows(runs[(variant,)][0], CrowsPairsOptions(variant=variant))
        assert rows_one == rows_full
    with pytest.raises(ConfigError, match=r"'nangia' was not scored.*benchmarks.crows_pairs.scoring.variants"):
        crows_pairs_metric_rows(bias_bench, CrowsPairsOptions(variant="nangia"))
    for bad in ([], ["nangia", "kurita"], "both"):
        with pytest.raises(ConfigError, match=r"benchmarks.crows_pairs.scoring.variants"):
            score_crows_pairs(gender.slice(0, 2), LanguageModel(model, tok, "mlm"), {"variants": bad})


# --------------------------------------------------------------------------------------------------
# Metric on hand-made scores


def _scores(rows):
    base = {
        "bias_type": "gender",
        "score_kind": "pll",
        "more_loglik": math.nan,
        "less_loglik": math.nan,
        "more_tokens": 5,
        "less_tokens": 5,
        "n_shared": 3,
        "more_modified": 1,
        "less_modified": 1,
    }
    out = []
    for i, (direction, ms, ls, mm, lm, bias) in enumerate(rows):
        out.append(
            {
                **base,
                "row_id": i,
                "stereo_antistereo": direction,
                "more_shared_sum": ms,
                "less_shared_sum": ls,
                "more_modified_mean": mm,
                "less_modified_mean": lm,
                "bias_type": bias,
            }
        )
    return pa.Table.from_pylist(out, schema=SCORES_SCHEMA)


def test_metric_hand_computed():
    scores = _scores(
        [
            ("stereo", -10.0, -11.0, -2.0, -1.0, "gender"),  # nangia: more wins
            ("stereo", -10.0001, -10.0002, -1.0, -2.0, "gender"),  # nangia: tie after rounding to 3 -> neutral
            ("antistereo", -12.0, -11.0, -1.0, -3.0, "gender"),  # nangia: less wins
            ("antistereo", -9.0, -11.0, math.nan, -3.0, "race-color"),  # nangia: more wins; bias-bench: skipped
        ]
    )
    rows = {(r["metric"], r["subset"]): r for r in crows_pairs_metric_rows(scores, CrowsPairsOptions())}
    assert rows[("metric_score", "all")]["value"] == 50.0 and rows[("metric_score", "all")]["n"] == 4
    assert rows[("metric_score", "all")]["p_value"] == pytest.approx(1.0)
    assert rows[("neutral_fraction", "all")]["value"] == 25.0
    assert rows[("stereo_score", "all")]["value"] == 100.0 and rows[("stereo_score", "all")]["n"] == 1
    assert rows[("antistereo_score", "all")]["value"] == 50.0 and rows[("antistereo_score", "all")]["n"] == 2
    assert rows[("metric_score", "gender")]["value"] == pytest.approx(100 / 3)
    assert rows[("metric_score", "race-color")]["value"] == 100.0
    assert rows[("metric_score", "all")]["variant"] == "pll=shared_sum,round=3"
    bb = {
        (r["metric"], r["subset"]): r for r in crows_pairs_metric_rows(scores, CrowsPairsOptions(variant="bias_bench"))
    }
    assert bb[("metric_score", "all")]["n"] == 3 and bb[("metric_score", "all")]["value"] == pytest.approx(200 / 3)
    exact = {
        (r["metric"], r["subset"]): r for r in crows_pairs_metric_rows(scores, CrowsPairsOptions(round_decimals=None))
    }
    assert exact[("metric_score", "all")]["value"] == 75.0
    with pytest.raises(ConfigError, match="variant"):
        CrowsPairsOptions.from_config({"variant": "salazar"})
    with pytest.raises(ConfigError, match=r"benchmarks\.crows_pairs\.metric\.rounding: unknown key"):
        CrowsPairsOptions.from_config({"rounding": 3})
    with pytest.raises(ConfigError, match=r"benchmarks\.crows_pairs-x\.metric\.round_decimals: -1 is less than"):
        CrowsPairsOptions.from_config({"round_decimals": -1}, "benchmarks.crows_pairs-x.metric")


# --------------------------------------------------------------------------------------------------
# Real data through every family, and planted bias


def test_gender_rows_score_for_every_family(tmp_path, tiny_bert, gender):
    """mlm on 60 gender pairs (the workflow scores all 262); clm and seq2seq on 12."""
    model, tok = tiny_bert
    scores = score_crows_pairs(gender.slice(0, 60), LanguageModel(model, tok, "mlm"))
    assert scores.num_rows == 60
    assert np.all(np.isfinite(np.asarray(scores.column("more_shared_sum").to_pylist())))
    rows = {(r["metric"], r["subset"]): r for r in crows_pairs_metric_rows(scores, CrowsPairsOptions())}
    assert rows[("metric_score", "gender")]["n"] == 60
    assert (
        0
        <= rows[("metric_score", "gender")]["ci_low"]
        <= rows[("metric_score", "gender")]["value"]
        <= rows[("metric_score", "gender")]["ci_high"]
        <= 100
    )
    for arch in ("gpt2", "bart"):
        build_tiny_model(arch, tmp_path / arch, seed=0)
        m, t = _load(tmp_path / arch, FAMILY[arch])
        part = score_crows_pairs(gender.slice(0, 12), LanguageModel(m, t, FAMILY[arch]))
        kind = {"gpt2": "sentence_loglik", "bart": "pll"}[arch]
        assert set(part.column("score_kind").to_pylist()) == {kind}
        for variant in ("nangia", "bias_bench"):
            got = crows_pairs_metric_rows(part, CrowsPairsOptions(variant=variant))
            assert next(r for r in got if r["metric"] == "metric_score" and r["subset"] == "all")["n"] >= 11


def _he_she_pairs(tok, gender):
    """Gender pairs whose only modified token is he/she; True where sent_more holds "he"."""
    keep, more_has_he = [], []
    for i, r in enumerate(gender.to_pylist()):
        x, y = encode(tok, r["sent_more"]), encode(tok, r["sent_less"])
        _, _, m1, m2 = align(x, y)
        if len(m1) == 1 and len(m2) == 1:
            words = [tok.convert_ids_to_tokens(ids[m[0]]).lstrip("Ġ▁").lower() for ids, m in ((x, m1), (y, m2))]
            if set(words) == {"he", "she"}:
                keep.append(i)
                more_has_he.append(words[0] == "he")
    return keep, np.asarray(more_has_he)


@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama"])
def test_planted_he_bias_makes_the_he_sentence_win(tmp_path, gender, arch):
    """Raising "he" over "she" (output logit +8): on the 14 pairs that differ only by he/she, the sentence
    with "he" wins under bias-bench's modified-token score (mlm) and the sentence likelihood (clm: GPT-2, whose
    offset is exact, and the Llama, whose offset is 8 x rho, 0.995 <= rho <= 1: lmbias.engine.planted_bias.plant_bias).

    Nangia's default score is not asserted: it sums the *shared* tokens given the modified ones, so an
    output bias on the modified token itself barely moves it (by design, the pair's own words are
    conditioned on, not scored)."""
    build_tiny_model(arch, tmp_path / arch, seed=0, planted_bias={"he": 8.0, "He": 8.0})
    model, tok = _load(tmp_path / arch, FAMILY[arch])
    keep, more_has_he = _he_she_pairs(tok, gender)
    assert len(keep) == 14 and more_has_he.any() and (~more_has_he).any()
    scores = score_crows_pairs(gender.take(keep), LanguageModel(model, tok, FAMILY[arch]))
    if arch == "bert":
        more, less = (np.asarray(scores.column(c).to_pylist()) for c in ("more_modified_mean", "less_modified_mean"))
        variant = "bias_bench"
    else:
        more, less = (np.asarray(scores.column(c).to_pylist()) for c in ("more_loglik", "less_loglik"))
        variant = "nangia"
    np.testing.assert_array_equal(more > less, more_has_he)
    rows = {
        r["metric"]: r
        for r in crows_pairs_metric_rows(scores, CrowsPairsOptions(variant=variant))
        if r["subset"] == "all"
    }
    assert rows["metric_score"]["value"] == pytest.approx(100.0 * more_has_he.mean())


# --------------------------------------------------------------------------------------------------
# lm-evaluation-harness's reading (metric.variant: lm_eval)


def _lm_eval_process_results(results):
    """Transcription of lm-eval 0.4.13's lm_eval/tasks/crows_pairs/utils.py process_results: `results` holds
    one (loglikelihood, is_greedy) per choice, choices [sent_more, sent_less]; the task averages each metric."""
    (likelihood1, _), (likelihood2, _) = results
    return {
        "likelihood_diff": abs(likelihood1 - likelihood2),
        "pct_stereotype": 1.0 if likelihood1 > likelihood2 else 0.0,
    }


def _lm_eval_loglikelihood(model, tok, sentence):
    """Transcription of lm-eval's HFLM loglikelihood for an empty context (api/model.py loglikelihood,
    models/huggingface.py _loglikelihood_tokens): the sentence's tokens without special tokens, conditioned on
    [prefix_token_id] (BOS, else EOS), summed log-softmax of the continuation's tokens."""
    cont = tok(sentence, add_special_tokens=False)["input_ids"]
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    context, cont = ([prefix], cont) if prefix != cont[0] else (cont[:1], cont[1:])
    inp = torch.tensor([(context + cont)[:-1]])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(inp).logits[0].float(), dim=-1)[-len(cont) :]
    return float(logprobs.gather(-1, torch.tensor(cont).unsqueeze(-1)).sum())


def test_lm_eval_variant_hand_computed():
    base = {
        "bias_type": "gender",
        "score_kind": "sentence_loglik",
        "more_shared_sum": math.nan,
        "less_shared_sum": math.nan,
        "more_modified_mean": math.nan,
        "less_modified_mean": math.nan,
        "more_tokens": 5,
        "less_tokens": 5,
        "n_shared": 0,
        "more_modified": 0,
        "less_modified": 0,
        "variants": "nangia,bias_bench",
        "clm_context": "bos",
    }
    pairs = [
        ("stereo", -10.0, -11.0, "gender"),
        ("antistereo", -12.0, -11.5, "gender"),
        ("antistereo", -9.0, -9.0, "gender"),
        ("stereo", -3.0, -7.0, "age"),
    ]
    scores = pa.Table.from_pylist(
        [
            {**base, "row_id": i, "stereo_antistereo": d, "more_loglik": more, "less_loglik": less, "bias_type": b}
            for i, (d, more, less, b) in enumerate(pairs)
        ],
        schema=SCORES_SCHEMA,
    )
    rows = {
        (r["metric"], r["subset"]): r for r in crows_pairs_metric_rows(scores, CrowsPairsOptions(variant="lm_eval"))
    }
    assert rows[("pct_stereotype", "all")]["value"] == 0.5  # the tie counts 0; no direction swap
    assert rows[("likelihood_diff", "all")]["value"] == pytest.approx((1 + 0.5 + 0 + 4) / 4)
    assert (
        rows[("pct_stereotype", "gender")]["value"] == pytest.approx(1 / 3)
        and rows[("pct_stereotype", "gender")]["n"] == 3
    )
    assert rows[("likelihood_diff", "age")]["value"] == 4.0
    assert rows[("pct_stereotype", "all")]["variant"] == "lm_eval,clm=sentence_loglik"
    assert {m for m, _ in rows} == {"pct_stereotype", "likelihood_diff"}
    with pytest.raises(ConfigError, match="lm_eval"):
        crows_pairs_metric_rows(
            _scores([("stereo", -1.0, -2.0, -1.0, -2.0, "gender")]), CrowsPairsOptions(variant="lm_eval")
        )
    assert CrowsPairsOptions.from_config({"variant": "lm_eval"}).variant == "lm_eval"


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_lm_eval_reading_equals_their_process_results_on_our_logliks(tmp_path, gender, arch):
    """Our bos sentence log-likelihoods equal lm-eval's empty-context loglikelihood (transcribed, 1e-4), and the
    lm_eval rows equal the mean of their process_results over the pairs (12 real gender pairs)."""
    build_tiny_model(arch, tmp_path / arch, seed=0)
    model, tok = _load(tmp_path / arch, "clm")
    items = gender.slice(0, 12)
    scores = score_crows_pairs(items, LanguageModel(model, tok, "clm"))
    results = []
    for r, s in zip(items.to_pylist(), scores.to_pylist()):
        theirs = (
            _lm_eval_loglikelihood(model, tok, r["sent_more"]),
            _lm_eval_loglikelihood(model, tok, r["sent_less"]),
        )
        assert s["more_loglik"] == pytest.approx(theirs[0], abs=1e-4)
        assert s["less_loglik"] == pytest.approx(theirs[1], abs=1e-4)
        results.append(_lm_eval_process_results([(s["more_loglik"], False), (s["less_loglik"], False)]))
    rows = {
        (r["metric"], r["subset"]): r for r in crows_pairs_metric_rows(scores, CrowsPairsOptions(variant="lm_eval"))
    }
    for metric in ("pct_stereotype", "likelihood_diff"):
        assert rows[(metric, "gender")]["value"] == pytest.approx(np.mean([x[metric] for x in results]), abs=1e-12)
        assert rows[(metric, "gender")]["n"] == 12
