"""Counterfactual prompt pairs, end to end on models whose answer is known in advance (tests/helpers/lookup_lm.py:
a tiny GPT-2 whose next token is a lookup of the current one): a model that ignores the gendered word is perfectly
fair; one that answers "he" with "good" and "she" with "bad" scores known lower values; sampling draws the same
numbers for a prompt and its twin; batching changes no text; the encoder's cosine; registry and options."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from helpers.lookup_lm import lookup_gpt2
from lmbias.benchmarks import catalog
from lmbias.benchmarks.counterfactual import (
    METADATA_KEY,
    SCORES_SCHEMA,
    counterfactual_settings,
    score_counterfactual,
)
from lmbias.engine.embeddings import sentence_embeddings
from lmbias.engine.generation import GenerationSettings, generate_continuations
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.bold import vader_compound
from lmbias.metrics.counterfactual import CounterfactualOptions, counterfactual_metric_rows
from lmbias.parsers.bold import FILE, parse_bold
from lmbias.parsers.prompts import parse_prompts

PROMPTS = ["Yesterday he", "The actor said", "Nothing to swap", "Today she"]


@pytest.fixture(scope="module")
def bold_items(shared_data):
    return parse_bold(shared_data / "bold" / FILE)


@pytest.fixture(scope="module")
def prompt_items(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "prompts.txt"
    path.write_text("\n".join(PROMPTS) + "\n")
    return parse_prompts(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lookup")
    return {
        "blind": lookup_gpt2(tmp / "blind", {}),  # " the" after every token
        "he_good": lookup_gpt2(tmp / "he_good", {"he": "good", "she": "bad"}),
        "uniform": lookup_gpt2(tmp / "uniform", {}, uniform=("good", "bad", "the", "happy")),
    }


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return build_tiny_model("bert", tmp_path_factory.mktemp("encoder") / "bert", seed=0)


def _lm(pair):
    return LanguageModel(pair[0], pair[1], "clm")


def _rows(scores, **options):
    rows = counterfactual_metric_rows(scores, CounterfactualOptions(bootstrap=100, **options))
    return {(r["metric"], r["subset"]): r for r in rows}


def test_a_model_blind_to_the_gendered_word_is_perfectly_fair(bold_items, models):
    lm = _lm(models["blind"])
    scores = score_counterfactual(bold_items, lm, {"prompts_per_group": 25, "max_new_tokens": 4})
    assert scores.schema.equals(SCORES_SCHEMA, check_metadata=False)
    paired = scores.filter(pc.is_valid(scores.column("twin")))
    assert set(paired.column("continuation").to_pylist()) == {" the the the the"}
    assert paired.column("continuation").equals(paired.column("twin_continuation"))
    assert lm.stats.requests == 2 * paired.num_rows  # the prompts and their twins, one generation call
    meta = json.loads(scores.schema.metadata[METADATA_KEY.encode()])
    assert meta["paired"] == paired.num_rows and meta["unpaired"] == 50 - paired.num_rows and meta["prompts"] == 50
    rows = _rows(scores)
    assert rows[("n_unpaired", "all")]["value"] == meta["unpaired"] and rows[("n_unpaired", "all")]["n"] == 50
    assert rows[("exact_match", "all")]["value"] == 100.0 and rows[("rouge_l", "all")]["value"] == 1.0
    for metric in ("sentiment_abs_diff", "sentiment_class_flip", "sentiment_diff", "weak_sentiment_parity"):
        assert rows[(metric, "all")]["value"] == 0.0
    assert rows[("strict_sentiment_parity", "all")]["value"] == 0.0
    assert rows[("exact_match", "male->female")]["n"] + rows[("exact_match", "female->male")]["n"] <= paired.num_rows
    unpaired = scores.filter(pc.is_null(scores.column("twin")))
    assert unpaired.column("continuation").null_count == unpaired.num_rows  # never generated for


def test_a_model_that_answers_the_gendered_word_scores_known_values(prompt_items, models):
    scores = score_counterfactual(prompt_items, _lm(models["he_good"]), {"max_new_tokens": 4})
    by_prompt = {r["prompt"]: r for r in scores.to_pylist()}
    assert by_prompt["Yesterday he"]["twin"] == "Yesterday she"
    assert (by_prompt["Yesterday he"]["continuation"], by_prompt["Yesterday he"]["twin_continuation"]) == (
        " good the the the",
        " bad the the the",
    )
    assert by_prompt["The actor said"]["continuation"] == by_prompt["The actor said"]["twin_continuation"]
    assert by_prompt["Nothing to swap"]["twin"] is None
    assert by_prompt["Today she"]["direction"] == "female->male"
    assert by_prompt["Yesterday he"]["swaps"] == [{"prompt": "he", "twin": "she"}]
    good, bad = vader_compound([" good the the the", " bad the the the"])
    assert good > 0 > bad
    d = good - bad
    rows = _rows(scores)
    assert rows[("n_unpaired", "all")]["value"] == 1
    assert rows[("exact_match", "all")]["value"] == pytest.approx(100 / 3)
    assert rows[("rouge_l", "all")]["value"] == pytest.approx((0.75 + 1 + 0.75) / 3)  # LCS 3 of 4 words
    assert rows[("sentiment_abs_diff", "all")]["value"] == pytest.approx(2 * d / 3)
    assert rows[("sentiment_diff", "all")]["value"] == pytest.approx(2 * d / 3)  # "he" always the good one
    assert rows[("sentiment_diff", "female->male")]["value"] == pytest.approx(d)
    assert rows[("strict_sentiment_parity", "all")]["value"] == pytest.approx(2 * d / 3)
    expected_flips = 100 * 2 / 3 if (good >= 0.5 or bad <= -0.5) else 0.0
    assert rows[("sentiment_class_flip", "all")]["value"] == pytest.approx(expected_flips)


def test_sampling_draws_the_same_numbers_for_a_prompt_and_its_twin(bold_items, models):
    """A distribution that does not depend on the prompt: with the twin's seed key its prompt's, every pair's
    texts are equal though the samples differ from each other."""
    scoring = {"prompts_per_group": 10, "max_new_tokens": 8, "decoding": "sampling", "samples_per_prompt": 3}
    scores = score_counterfactual(bold_items, _lm(models["uniform"]), scoring)
    paired = scores.filter(pc.is_valid(scores.column("twin")))
    assert paired.column("continuation").equals(paired.column("twin_continuation"))
    assert len(set(paired.column("continuation").to_pylist())) > paired.num_rows // 2  # the draws do differ
    assert _rows(scores)[("exact_match", "all")]["value"] == 100.0


def test_batched_pairs_generate_what_one_prompt_at_a_time_does(bold_items, tmp_path):
    path = build_tiny_model("gpt2", tmp_path / "gpt2", seed=0)
    model, tokenizer = load_model(model_spec("g", {"path": str(path), "family": "clm", "revision": "local"}))
    scores = score_counterfactual(bold_items, LanguageModel(model, tokenizer, "clm"), {"prompts_per_group": 6})
    paired = scores.filter(pc.is_valid(scores.column("twin"))).to_pylist()
    settings = GenerationSettings(batch_size=1)
    for row in paired:
        for text, generated in ((row["prompt"], row["continuation"]), (row["twin"], row["twin_continuation"])):
            (alone,) = generate_continuations(model, tokenizer, "clm", [text], settings)
            assert alone[0].text == generated


def test_encoder_cosine(prompt_items, models, tiny_bert):
    scoring = {"max_new_tokens": 4, "encoder": str(tiny_bert)}
    scores = score_counterfactual(prompt_items, _lm(models["he_good"]), scoring)
    by_prompt = {r["prompt"]: r for r in scores.to_pylist()}
    encoder, tokenizer = load_model(model_spec("e", {"path": str(tiny_bert), "family": "encoder", "revision": "local"}))
    a, b = sentence_embeddings(encoder, tokenizer, [" good the the the", " bad the the the"], ["mean"], "encoder")[
        "mean"
    ]
    expected = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert by_prompt["Yesterday he"]["cosine"] == pytest.approx(expected, abs=1e-5) and expected < 0.999
    assert by_prompt["The actor said"]["cosine"] == pytest.approx(1.0, abs=1e-5)
    assert by_prompt["Nothing to swap"]["cosine"] is None
    rows = _rows(scores)
    assert rows[("cosine", "all")]["value"] == pytest.approx((2 * expected + 1) / 3, abs=1e-5)
    meta = json.loads(scores.schema.metadata[METADATA_KEY.encode()])
    assert meta["encoder"] == str(tiny_bert) and meta["pooling"] == "mean"


def test_registry_settings_and_refusals(prompt_items, models):
    definition = catalog.definition("counterfactual_pairs")
    assert definition.families == ("clm", "seq2seq") and definition.prompted and definition.reads == "generations"
    entry = {"dataset": "bold", "measure": "counterfactual_pairs"}
    assert catalog.definition_of(entry, "counterfactual_bold") is definition
    with pytest.raises(ConfigError, match="does not apply to model 'tiny-bert' of family 'mlm'"):
        catalog.check_family("counterfactual_bold", entry, "mlm", "tiny-bert")
    settings, options = counterfactual_settings({"decoding": "sampling", "intervention": "naive"})
    assert settings.decoding == "sampling" and options["intervention"] == "naive" and options["encoder"] is None
    with pytest.raises(ConfigError, match=r"scoring\.stride: unknown key"):
        counterfactual_settings({"stride": 3})
    with pytest.raises(ConfigError, match=r"scoring\.intervention"):
        counterfactual_settings({"intervention": "names"})
    with pytest.raises(ConfigError, match="does not generate text"):
        score_counterfactual(prompt_items, LanguageModel(*models["blind"], "mlm"), {})
    with pytest.raises(DataError, match="no `prompt` column"):
        score_counterfactual(pa.table({"prompt_id": [0]}), _lm(models["blind"]), {})
