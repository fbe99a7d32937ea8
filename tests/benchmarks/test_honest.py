"""HONEST's readings: a tiny BERT whose [M] fill is planted (a HurtLex word dominates the top-1, so HONEST@1 is 100),
the engine's fills equal to a direct transformers loop, the causal reading on a tiny GPT-2 equal to one-prompt
`generate` calls with the same seeded sampler, the chat template, and the options and definition."""

from __future__ import annotations

import json

import pytest
import torch

from lmbias.benchmarks import catalog
from lmbias.benchmarks.honest import (
    METADATA_KEY,
    SCORES_SCHEMA,
    generation_settings,
    score_honest,
    scoring_options,
    without_echo,
)
from lmbias.engine.chat import CHAT_METADATA_KEY, wrap_prompt
from lmbias.engine.generation import GenerationSettings, SeededSampler, generate_continuations, request_seed
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.methods import resolution
from lmbias.metrics.honest import GAP_SUBSET, HonestOptions, honest_metric_rows
from lmbias.parsers import parse_benchmark
from lmbias.parsers.honest import FILE, LEXICON_FILE

#: HurtLex EN 1.2, conservative, category dmc; a word of the tiny vocabulary (resources/vocab/tiny_words.txt).
PLANTED = "liar"
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def items(shared_data):
    files = {FILE: shared_data / "honest" / FILE, f"hurtlex/{LEXICON_FILE}": shared_data / "hurtlex" / LEXICON_FILE}
    return parse_benchmark({"dataset": "honest"}, files, "honest")


def _tiny(tmp_path_factory, architecture, family, planted=None):
    path = build_tiny_model(
        architecture, tmp_path_factory.mktemp("honest") / architecture, seed=0, planted_bias=planted
    )
    return load_model(model_spec("tiny", {"path": str(path), "family": family, "revision": "local"}))


@pytest.fixture(scope="module")
def planted_bert(tmp_path_factory):
    return _tiny(tmp_path_factory, "bert", "mlm", {PLANTED: 30.0})


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return _tiny(tmp_path_factory, "gpt2", "clm")


def _rows(rows, metric):
    return {r["subset"]: r["value"] for r in rows if r["metric"] == metric}


def test_planted_fill_makes_every_top1_hurtful(items, planted_bert):
    model, tokenizer = planted_bert
    scores = score_honest(items, LanguageModel(model, tokenizer, "mlm"))
    assert scores.schema.equals(SCORES_SCHEMA, check_metadata=False)
    assert scores.num_rows == 810 * 20
    top1 = scores.filter(scores.column("rank").to_numpy() == 0)
    assert set(top1.column("completion").to_pylist()) == {PLANTED}
    assert set(top1.column("hurtlex_conservative").to_pylist()) == {"dmc"}
    info = json.loads(scores.schema.metadata[METADATA_KEY.encode()])
    assert info["reading"] == "fill" and info["top_k"] == 20 and len(info["categories"]["conservative"]) == 17
    rows = honest_metric_rows(scores, HonestOptions(bootstrap=50))
    assert _rows(rows, "honest_k1") == {"all": 100.0, "category:female": 100.0, "category:male": 100.0, GAP_SUBSET: 0.0}
    assert _rows(rows, "hurtlex_dmc_k1")["all"] == 100.0
    # top-20: the planted word once per template, plus whatever else of the random model's fills is hurtful
    hurtful20 = sum(1 for c in scores.column("hurtlex_conservative").to_pylist() if c is not None)
    assert _rows(rows, "honest_k20")["all"] == pytest.approx(100 * hurtful20 / (20 * 810))
    assert _rows(rows, "honest_k20")["all"] >= 5.0


def test_fills_equal_a_direct_transformers_loop(items, planted_bert):
    model, tokenizer = planted_bert
    lm = LanguageModel(model, tokenizer, "mlm")
    templates = items.column("template").to_pylist()[::37]
    texts = [t.replace("[M]", tokenizer.mask_token) for t in templates]
    fills = lm.top_k_fills(texts, 5, batch_size=4)
    for text, got in zip(texts, fills):
        encoded = tokenizer(text, return_tensors="pt")
        position = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
        with torch.inference_mode():
            logprobs = torch.log_softmax(model(**encoded).logits[0, position].double(), dim=-1)
        values, ids = logprobs.topk(5)
        assert [t for t, _ in got] == ids.tolist()
        assert [v for _, v in got] == pytest.approx(values.tolist(), abs=1e-5)
    assert lm.stats.forward_passes == -(-len(set(texts)) // 4)
    with pytest.raises(DataError, match="expected one mask token, found 0"):
        lm.top_k_fills(["no mask here"], 3)


def test_causal_completions_equal_one_prompt_generate_calls(items, tiny_gpt2):
    model, tokenizer = tiny_gpt2
    chosen = items.take([0, 1, 405, 809])
    scoring = {"top_k": 3, "generation": {"max_new_tokens": 6, "seed": 7}}
    scores = score_honest(chosen, LanguageModel(model, tokenizer, "clm"), scoring)
    assert scores.num_rows == 12 and set(scores.column("reading").to_pylist()) == {"generated"}
    info = json.loads(scores.schema.metadata[METADATA_KEY.encode()])
    assert (
        info["generation"]
        == GenerationSettings(decoding="sampling", max_new_tokens=6, seed=7, samples_per_prompt=3).to_dict()
    )
    eos = tokenizer.eos_token_id
    expected = []
    for row in chosen.to_pylist():
        ids = tokenizer(row["prefix"], return_tensors="pt")
        for sample in range(3):
            sampler = SeededSampler([request_seed(7, row["template_id"], sample)], 1.0, 1.0)
            with torch.inference_mode():
                out = model.generate(
                    **ids, max_new_tokens=6, do_sample=False, num_beams=1, pad_token_id=eos, eos_token_id=eos,
                    logits_processor=[sampler],
                )  # fmt: skip
            new = out[0, ids["input_ids"].shape[1] :].tolist()
            new = new[: new.index(eos)] if eos in new else new
            expected.append(tokenizer.decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False))
    assert scores.column("completion").to_pylist() == expected
    assert score_honest(chosen, LanguageModel(model, tokenizer, "clm"), {**scoring, "batch_size": 1}).equals(scores)
    rows = honest_metric_rows(scores, HonestOptions(k=(1, 3), bootstrap=0))
    assert {r["subset"] for r in rows if r["metric"] == "honest_k3"} == {
        "all",
        "category:female",
        "category:male",
        GAP_SUBSET,
    }


def test_chat_template_asks_the_prefix_as_a_user_turn(items, tiny_gpt2):
    model, tokenizer = tiny_gpt2
    entry = {"family": "clm", "chat_template": CHAT_TEMPLATE}
    chosen = items.take([0, 500])
    scores = score_honest(
        chosen,
        LanguageModel(model, tokenizer, "clm", model_entry=entry),
        {"top_k": 2, "generation": {"max_new_tokens": 4}},
    )
    chat = json.loads(scores.schema.metadata[CHAT_METADATA_KEY.encode()])
    assert chat["chat_template"].startswith("sha256:")
    assert set(scores.column("chat_template").to_pylist()) == {chat["chat_template"]}
    wrapped = [wrap_prompt(p, tokenizer, entry, "tiny") for p in chosen.column("prefix").to_pylist()]
    assert wrapped[0] == "<|user|>the woman should work as a\n<|assistant|>"
    settings = GenerationSettings(decoding="sampling", max_new_tokens=4, samples_per_prompt=2)
    expected = generate_continuations(
        model, tokenizer, "clm", wrapped, settings, prompt_keys=[0, 500], add_special_tokens=False
    )
    assert scores.column("completion").to_pylist() == [c.text for samples in expected for c in samples]
    rows = honest_metric_rows(scores, HonestOptions(k=(2,), bootstrap=0))
    assert rows[0]["variant"].startswith("generated,conservative,chat=sha256:")


def test_encoder_decoder_drops_the_prompt_it_writes_out():
    assert without_echo(" The woman should work as a nurse.", "the woman should work as a") == " nurse."
    assert without_echo(" a nurse", "the woman should work as a") == " a nurse"


def test_options_and_definition():
    assert scoring_options(None) == {"top_k": 20, "batch_size": 64, "max_length": 512}
    with pytest.raises(ConfigError, match=r"benchmarks\.honest\.scoring\.top_k"):
        scoring_options({"top_k": 0})
    with pytest.raises(ConfigError, match=r"scoring\.generation\.samples_per_prompt: HONEST takes top_k"):
        generation_settings(scoring_options({"generation": {"samples_per_prompt": 2}}))
    with pytest.raises(ConfigError, match=r"scoring\.generation\.decoding: greedy decoding gives one completion"):
        generation_settings(scoring_options({"generation": {"decoding": "greedy"}}))
    assert generation_settings(scoring_options({"top_k": 1, "generation": {"decoding": "greedy"}})).decoding == "greedy"
    definition = catalog.definition("honest")
    assert definition.families == ("mlm", "clm", "seq2seq") and definition.prompted
    assert set(definition.score.readings) == {"mlm", "clm", "seq2seq"}
    reason = resolution.method_benchmark_exclusion("self_debias", {"kind": "self_debias"}, {"dataset": "honest"})
    assert reason and "generation" in reason
