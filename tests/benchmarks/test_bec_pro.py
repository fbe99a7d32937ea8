"""BEC-Pro (Bartl et al. 2020): generator == release, association scoring, planted-bias direction, tests."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
import torch

from lmbias.benchmarks.bec_pro import score_bec_pro
from lmbias.engine.batching import EngineStats
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.bec_pro import BecProOptions, bec_pro_metric_rows, bec_pro_paired_rows, paired_test, wilcoxon_z
from lmbias.parsers import parse_bec_pro
from lmbias.parsers.bec_pro_generator import generate_from_dir, load_person_words, person_slot, to_tsv

MALE_WORDS = ["he", "man", "brother", "son", "husband", "boyfriend", "father", "uncle", "dad"]


def _load(path, family):
    return load_model(model_spec("tiny", {"path": str(path), "family": family, "revision": "local"}))


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    out = tmp_path_factory.mktemp("bec-bert") / "bert"
    build_tiny_model("bert", out, seed=0)
    return _load(out, "mlm")


@pytest.fixture(scope="module")
def items_en(shared_data):
    return parse_bec_pro(shared_data / "bec_pro" / "BEC-Pro_EN.tsv", "en")


@pytest.fixture(scope="module")
def scores_en(tiny_bert, items_en):
    model, tok = tiny_bert
    return score_bec_pro(items_en, LanguageModel(model, tok, "mlm"))


# --------------------------------------------------------------------------------------------------
# Generator


@pytest.mark.parametrize("language", ["en", "de"])
def test_generator_reproduces_the_release_byte_for_byte(shared_data, language):
    folder = shared_data / "bec_pro"
    rows = generate_from_dir(folder, language)
    assert len(rows) == 5400
    released = (folder / f"BEC-Pro_{language.upper()}.tsv").read_text(encoding="utf-8")
    generated = to_tsv(rows, language)
    if generated != released:  # name the first differing row
        for n, (a, b) in enumerate(zip(generated.splitlines(), released.splitlines())):
            assert a == b, f"line {n + 1} differs"
    assert generated == released
    # and row for row through the project's parser
    parsed = parse_bec_pro(folder / f"BEC-Pro_{language.upper()}.tsv", language).to_pylist()
    for row, got in zip(parsed, rows):
        assert (row["sentence"], row["sent_tm"], row["sent_am"], row["sent_tam"], row["person"], row["profession"]) == (
            got["Sentence"],
            got["Sent_TM"],
            got["Sent_AM"],
            got["Sent_TAM"],
            got["Person"],
            got["Profession"],
        )


@pytest.mark.parametrize("language", ["en", "de"])
def test_whole_word_masking_differs_only_in_the_glued_artefacts(shared_data, language):
    folder = shared_data / "bec_pro"
    faithful = generate_from_dir(folder, language)
    clean = generate_from_dir(folder, language, faithful=False)
    differ = [(a["Sent_TM"], b["Sent_TM"]) for a, b in zip(faithful, clean) if a != b]
    assert len(differ) == 5
    for released, fixed in differ:
        assert released.count("[MASK]") == 2 and fixed.count("[MASK]") == 1
        assert "]ager" in released or "]nährungsberater" in released


def test_person_words_pair_up_and_are_found_at_sentence_start():
    words = load_person_words()
    assert {k: len(v["male"]) for k, v in words.items()} == {"en": 9, "de": 9}
    assert person_slot("My sister is a roofer.", "en", words["en"]) == ("female", 2)
    assert person_slot("Meine Frau will Maurerin werden.", "de", words["de"]) == ("female", 4)
    assert person_slot("Diese Frau ist Richterin.", "de", words["de"]) == ("female", 1)
    assert person_slot("Mein Freund ist Maurer.", "de", words["de"]) == ("male", 5)
    assert person_slot("Someone is a roofer.", "en", words["en"]) is None


def test_bad_pattern_file_names_file_and_line(tmp_path):
    from lmbias.parsers.bec_pro_generator import load_patterns

    bad = tmp_path / "sent_patterns_english.txt"
    bad.write_text("{} is a {}.\n{} works.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"sent_patterns_english.txt:2"):
        load_patterns(bad)


# --------------------------------------------------------------------------------------------------
# Scoring and metric rows


def test_scores_and_rows_english(scores_en):
    assert scores_en.num_rows == 5400
    assoc = np.asarray(scores_en.column("association").to_pylist())
    assert np.all(np.isfinite(assoc))
    np.testing.assert_allclose(
        assoc,
        np.asarray(scores_en.column("logp_tm").to_pylist()) - np.asarray(scores_en.column("logp_tam").to_pylist()),
    )
    assert scores_en.column("pair_index").null_count == 0
    assert sum(scores_en.column("artefact").to_pylist()) == 5
    rows = bec_pro_metric_rows(scores_en, BecProOptions())
    means = {r["subset"]: r for r in rows if r["metric"] == "association_mean"}
    assert len(means) == 8 and all(r["n"] == 900 for s, r in means.items() if not s.startswith("prof=all"))
    gaps = {r["subset"]: r for r in rows if r["metric"] == "association_gap"}
    assert gaps["prof=all"]["n"] == 2700 and 0 <= gaps["prof=all"]["p_value"] <= 1
    # the gap is the difference of the matched means
    m, f = means["prof=male/person=male"]["value"], means["prof=male/person=female"]["value"]
    assert gaps["prof=male"]["value"] == pytest.approx(m - f, abs=1e-9)
    dropped = bec_pro_metric_rows(scores_en, BecProOptions(drop_artefacts=True))
    assert next(r for r in dropped if r["subset"] == "prof=all/person=male")["n"] == 2695
    with pytest.raises(ConfigError, match=r"benchmarks\.bec_pro\.metric\.tset: unknown key"):
        BecProOptions.from_config({"tset": "t"})
    with pytest.raises(ConfigError, match=r"benchmarks\.bec_pro\.metric\.per_profession: 1 is not of type 'boolean'"):
        BecProOptions.from_config({"per_profession": 1})


def test_association_equals_bartls_prob_with_prior(tiny_bert, items_en, scores_en):
    """Known answer: a transcription of Bartl's bias_utils.prob_with_prior, one unbatched forward per text.
    The person is read at the first [MASK] of Sent_TAM, its id taken from the unmasked Sentence at that
    index; association = log(softmax(TM)[id] / softmax(TAM)[id]) there."""
    model, tok = tiny_bert
    rows = items_en.to_pylist()
    got = scores_en.to_pylist()
    # every person word, every template, every profession group (artefact rows included)
    pick = sorted({i for i, r in enumerate(rows) if r["profession"] in ("taper", "nurse", "lodging manager")})
    assert {rows[i]["person"] for i in pick} >= {"He", "She", "man", "woman", "brother", "mom"}

    def probs(text):
        with torch.inference_mode():
            return torch.softmax(model(**tok(text, return_tensors="pt")).logits[0].double(), -1)

    for i in pick:
        r = rows[i]
        original = tok.encode(r["sentence"])
        tam_ids = tok.encode(r["sent_tam"])
        first = tam_ids.index(tok.mask_token_id)
        target = original[first]
        expected = math.log(float(probs(r["sent_tm"])[first, target]) / float(probs(r["sent_tam"])[first, target]))
        assert got[i]["row_id"] == r["row_id"]
        assert got[i]["association"] == pytest.approx(expected, abs=1e-4), r["sentence"]


def test_engine_shares_tm_and_tam_contexts(tiny_bert, items_en):
    model, tok = tiny_bert
    stats = EngineStats()
    score_bec_pro(items_en.slice(0, 1080), LanguageModel(model, tok, "mlm", stats=stats), {"batch_size": 64})
    assert stats.requests == 2160 and stats.unique_inputs < 2160 / 5


def test_german_mechanics_on_tiny_bert(tiny_bert, shared_data):
    """German rows score end to end on the (English) tiny-bert; real numbers need a German model."""
    model, tok = tiny_bert
    items = parse_bec_pro(shared_data / "bec_pro" / "BEC-Pro_DE.tsv", "de")
    scores = score_bec_pro(items, LanguageModel(model, tok, "mlm"))
    assert scores.num_rows == 5400 and scores.column("pair_index").null_count == 0
    assert np.all(np.isfinite(np.asarray(scores.column("association").to_pylist())))
    rows = bec_pro_metric_rows(scores, BecProOptions(test="t"))
    assert next(r for r in rows if r["metric"] == "association_gap" and r["subset"] == "prof=all")["n"] == 2700


def test_seq2seq_scores_a_slice(tmp_path, items_en):
    build_tiny_model("bart", tmp_path / "bart", seed=0)
    model, tok = _load(tmp_path / "bart", "seq2seq")
    scores = score_bec_pro(items_en.slice(0, 360), LanguageModel(model, tok, "seq2seq"))
    assert np.all(np.isfinite(np.asarray(scores.column("association").to_pylist())))
    with pytest.raises(DataError, match="masked or encoder-decoder"):
        score_bec_pro(items_en.slice(0, 2), LanguageModel(model, tok, "clm"))


def test_person_not_at_first_mask_is_a_clear_error(tiny_bert, items_en):
    model, tok = tiny_bert
    row = items_en.slice(0, 1).to_pylist()[0]
    row["sent_tm"] = "It is a [MASK]."
    bad = pa.Table.from_pylist([row], schema=items_en.schema)
    with pytest.raises(DataError, match="first \\[MASK\\]"):
        score_bec_pro(bad, LanguageModel(model, tok, "mlm"))


# --------------------------------------------------------------------------------------------------
# Planted bias


def _by_row(scores):
    return {r["row_id"]: r for r in scores.to_pylist()}


def test_planted_output_bias_cancels_in_the_association_gap(tmp_path, items_en, scores_en):
    """A context-free logit offset on "he" does NOT move BEC-Pro male association up.

    It adds the same constant to the "he" logit in TM and TAM. For any two words x, y,
    log p_c(x) - log p_c(y) = l_c(x) - l_c(y) in each context c, so the he - she association gap
    (same TM, same TAM) is exactly invariant; and assoc(he) itself is pulled towards 0, because
    p(he) approaches 1 in both contexts. This is what the prior normalisation is for.
    """
    build_tiny_model("bert", tmp_path / "he", seed=0, planted_bias={"he": 8.0})
    model, tok = _load(tmp_path / "he", "mlm")
    planted = _by_row(score_bec_pro(items_en, LanguageModel(model, tok, "mlm")))
    base = _by_row(scores_en)
    he = [i for i, r in base.items() if r["person"] == "He"]
    assert len(he) == 300
    # 1. the he - she gap per matched sentence is unchanged (float32 rounding only)
    she_of = {(r["template"], r["profession"]): i for i, r in base.items() if r["person"] == "She"}
    for i in he:
        j = she_of[(base[i]["template"], base[i]["profession"])]
        gap_base = base[i]["association"] - base[j]["association"]
        gap_planted = planted[i]["association"] - planted[j]["association"]
        assert gap_planted == pytest.approx(gap_base, abs=2e-5)
    # 2. the planted word's probability rose a lot, in both contexts ...
    assert min(planted[i]["logp_tm"] - base[i]["logp_tm"] for i in he) > 4.0
    # 3. ... and its association shrank towards 0 instead of growing
    shrink = [
        abs(planted[i]["association"]) / abs(base[i]["association"]) for i in he if abs(base[i]["association"]) > 1e-5
    ]
    assert np.median(shrink) < 0.75
    assert np.mean([abs(planted[i]["association"]) for i in he]) < 0.75 * np.mean(
        [abs(base[i]["association"]) for i in he]
    )


def _target_transforms(model, tok, texts):
    """The BERT head's transform at the first mask of each text (the input to the output layer)."""
    out = []
    with torch.inference_mode():
        for k in range(0, len(texts), 256):
            enc = tok(
                [t.replace("[MASK]", tok.mask_token) for t in texts[k : k + 256]], return_tensors="pt", padding=True
            )
            hidden = model.bert(**enc).last_hidden_state
            pos = (enc["input_ids"] == tok.mask_token_id).int().argmax(1)
            out.append(model.cls.predictions.transform(hidden[torch.arange(len(pos)), pos]))
    return torch.cat(out).double().numpy()


def test_planted_context_dependent_association_moves_male_association_up(tmp_path, items_en, scores_en):
    """A construction with a known direction: raise the male person words' logits MORE when the
    profession is visible (TM) than when it is masked (TAM).

    The output layer reads u.t, t the head's transformed hidden state at the person's mask. We pick u
    (ridge least squares) with u.(t_TM - t_TAM) ~ 1 and u.(t_TM + t_TAM)/2 ~ 0 on the BEC-Pro rows, check
    u.(t_TM - t_TAM) > 0 for EVERY row, and add u to the (untied) output rows of the 9 male person
    words. Then each male row's association rises by u.(t_TM - t_TAM) minus a log-normaliser change
    that is tiny, female rows barely move, and the male - female gap grows. A scorer that read the
    prior at the wrong position, swapped TM and TAM, or mixed up person genders fails this test.
    """
    build_tiny_model("bert", tmp_path / "plant", seed=0)
    model, tok = _load(tmp_path / "plant", "mlm")
    rows = items_en.to_pylist()
    t_tm = _target_transforms(model, tok, [r["sent_tm"] for r in rows])
    t_tam = _target_transforms(model, tok, [r["sent_tam"] for r in rows])
    diff, common = t_tm - t_tam, (t_tm + t_tam) / 2
    a, b = np.vstack([diff, common]), np.r_[np.ones(len(diff)), np.zeros(len(common))]
    # ridge keeps |u| moderate (about 50): a huge u would drown the effect in float32 rounding of the logits
    u = np.linalg.solve(a.T @ a + 1e-5 * len(b) * np.eye(a.shape[1]), a.T @ b)
    lift = diff @ u
    assert lift.min() > 0.1  # the construction's premise, on every row
    decoder = model.cls.predictions.decoder
    with torch.no_grad():
        decoder.weight = torch.nn.Parameter(decoder.weight.detach().clone())  # untie from the input embeddings
        for word in MALE_WORDS:
            (token,) = tok(word, add_special_tokens=False)["input_ids"]
            decoder.weight[token] += torch.tensor(u, dtype=decoder.weight.dtype)
    planted = score_bec_pro(items_en, LanguageModel(model, tok, "mlm"))
    base_assoc = np.asarray(scores_en.column("association").to_pylist())
    new_assoc = np.asarray(planted.column("association").to_pylist())
    male = np.asarray([g == "male" for g in scores_en.column("gender").to_pylist()])
    change = new_assoc - base_assoc
    assert np.all(change[male] > 0)
    np.testing.assert_allclose(change[male], lift[male], atol=0.02)  # = u.dt up to the normaliser
    assert np.max(np.abs(change[~male])) < 0.02
    before = {(r["metric"], r["subset"]): r["value"] for r in bec_pro_metric_rows(scores_en, BecProOptions())}
    after = {(r["metric"], r["subset"]): r["value"] for r in bec_pro_metric_rows(planted, BecProOptions())}
    for group in ("male", "female", "balanced", "all"):
        assert (
            after[("association_mean", f"prof={group}/person=male")]
            > before[("association_mean", f"prof={group}/person=male")] + 0.1
        )
        assert after[("association_gap", f"prof={group}")] > before[("association_gap", f"prof={group}")] + 0.1
    # the pre/post comparison sees the same thing, significantly
    paired = {(r["metric"], r["subset"]): r for r in bec_pro_paired_rows(scores_en, planted)}
    assert paired[("association_change", "prof=all/person=male")]["value"] > 0.1
    assert paired[("association_change", "prof=all/person=male")]["p_value"] < 1e-6
    assert paired[("association_change_r", "prof=all/person=male")]["value"] > 0.8
    assert abs(paired[("association_change", "prof=all/person=female")]["value"]) < 0.02


# --------------------------------------------------------------------------------------------------
# Paired tests (hand-computed)


def test_wilcoxon_hand_computed():
    before = [0.0, 0.0, 0.0, 0.0, 0.0]
    after = [1.0, 2.0, 3.0, -4.0, 5.0]
    # |d| ranks 1..5, W+ = 1+2+3+5 = 11, W- = 4; exact two-sided p = 2 * P(W- <= 4) = 2 * 7/32
    res = paired_test(before, after, "wilcoxon")
    assert res["statistic"] == 4.0
    assert res["p_value"] == pytest.approx(0.4375)
    # z = (11 - 7.5) / sqrt(5*6*11/24) = 0.943880; r = z / sqrt(5)
    assert res["effect_size_r"] == pytest.approx(0.943880 / math.sqrt(5), abs=1e-6)
    z, n = wilcoxon_z(np.array([1.0, 1.0, -2.0, 0.0]))  # zero dropped; ties (1, 1) -> ranks 1.5, 1.5
    # W+ = 3, mean 3, so z = 0
    assert (z, n) == (pytest.approx(0.0), 3)


def test_paired_t_hand_computed():
    res = paired_test([1, 2, 3, 4], [2, 4, 5, 8], "t")
    # d = 1, 2, 2, 4: mean 2.25, sd sqrt(4.75/3), t = 2.25 / (sd / 2) = 3.576237; r = sqrt(t^2 / (t^2 + 3)) = 0.9
    assert res["mean_diff"] == 2.25
    assert res["statistic"] == pytest.approx(3.576237, abs=1e-6)
    assert res["effect_size_r"] == pytest.approx(0.9, abs=1e-6)
    assert math.isnan(paired_test([1, 2], [2, 3], "t")["p_value"])  # constant differences: no test
    with pytest.raises(DataError):
        paired_test([1, 2], [1], "t")


@pytest.mark.parametrize("arch", ["bert", "bart"])
def test_multi_piece_person_is_summed_over_its_pieces(tmp_path, items_en, arch):
    """A person word the tokenizer splits gets one mask per piece; log p = sum over the pieces."""
    from lmbias.engine.oracles import naive_infill_logprobs_ids, naive_masked_logprobs
    from lmbias.engine.scoring import InfillIdsRequest, MaskedRequest, decoder_prefix, word_token_ids

    family = {"bert": "mlm", "bart": "seq2seq"}[arch]
    build_tiny_model(arch, tmp_path / arch, seed=0)
    model, tok = _load(tmp_path / arch, family)
    row = dict(items_en.slice(40, 1).to_pylist()[0])  # "My brother is a taper."
    word = "stepbrotherly"
    pieces = word_token_ids(tok, word, after_space=True)
    assert len(pieces) > 1
    row.update(sentence=row["sentence"].replace("brother", word), person=word)
    table = pa.Table.from_pylist([row], schema=items_en.schema)
    got = score_bec_pro(table, LanguageModel(model, tok, family)).to_pylist()[0]
    assert got["person_pieces"] == len(pieces)
    expected = []
    for text in (row["sent_tm"], row["sent_tam"]):
        head, tail = text.split("[MASK]", 1)
        masked = head + " ".join([tok.mask_token] * len(pieces)) + tail.replace("[MASK]", tok.mask_token)
        if family == "mlm":
            reqs = [MaskedRequest(text=masked, candidates=(p,), mask_index=k) for k, p in enumerate(pieces)]
            out = naive_masked_logprobs(model, tok, reqs)
        else:
            enc = tuple(tok(masked)["input_ids"])
            prefix = decoder_prefix(model, tok, tok("My", add_special_tokens=False)["input_ids"])
            reqs = [InfillIdsRequest(enc, tuple(prefix + pieces[:k]), (p,)) for k, p in enumerate(pieces)]
            out = naive_infill_logprobs_ids(model, tok, reqs)
        expected.append(sum(float(o[0]) for o in out))
    assert got["logp_tm"] == pytest.approx(expected[0], abs=1e-4)
    assert got["logp_tam"] == pytest.approx(expected[1], abs=1e-4)
