"""WinoGender scoring: equal to a transcription of lm-eval 0.4.13's loglikelihood of each choice (tiny GPT-2 and
Llama, raw and behind a chat template), the masked reading, the metric on hand-made scores, refusal by family."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from helpers.lm_eval_reference import lm_eval_loglikelihood
from lmbias.benchmarks.catalog import check_family, definition
from lmbias.benchmarks.definition import score_items
from lmbias.benchmarks.winogender import SCORES_SCHEMA, causal_requests, score_winogender
from lmbias.engine.batching import EngineStats
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.metrics.winogender import WinoGenderOptions, winogender_metric_rows
from lmbias.parsers.winogender import FILES, parse_winogender

WINOGENDER = definition("winogender", "winogender")

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@pytest.fixture(scope="module")
def items(shared_data):
    table = parse_winogender(*(shared_data / "winogender" / f for f in FILES))
    return table.take(list(range(0, 720, 30)))  # 24 sentences: every occupation's first template, both genders


def _model(tmp_path_factory, arch, family):
    out = tmp_path_factory.mktemp("winogender") / arch
    build_tiny_model(arch, out, seed=0)
    return load_model(model_spec("tiny", {"path": str(out), "family": family, "revision": "local"}))


@pytest.mark.parametrize(
    "arch, entry",
    [("gpt2", {}), ("llama", {}), ("llama", {"chat_template": TEMPLATE, "system_prompt": "Answer briefly."})],
    ids=["gpt2", "llama", "llama-chat"],
)
def test_causal_equals_lm_eval(tmp_path_factory, items, arch, entry):
    model, tok = _model(tmp_path_factory, arch, "clm")
    lm = LanguageModel(model, tok, "clm", model_entry=entry, model_name="tiny")
    scores = score_winogender(items, lm, {})
    rows = items.to_pylist()
    for r, (ctx, occ, par), s in zip(rows, causal_requests(rows, lm), scores.to_pylist()):
        if entry:
            assert ctx.startswith("<|system|>\nAnswer briefly.\n<|user|>\n") and occ == "\n" + r["occupation"]
        else:
            assert ctx == f"{r['sentence']} \u2018{r['pronoun'].capitalize()}\u2019 refers to the"
            assert occ == " " + r["occupation"]
        assert s["score_occupation"] == pytest.approx(lm_eval_loglikelihood(model, tok, ctx, occ), abs=1e-4)
        assert s["score_participant"] == pytest.approx(lm_eval_loglikelihood(model, tok, ctx, par), abs=1e-4)
    expected = "none" if not entry else "sha256:"
    assert scores.column("chat_template")[0].as_py().startswith(expected)
    assert b"lmbias.chat" in scores.schema.metadata


def test_masked_reading_scores_the_choice(tmp_path_factory, items):
    model, tok = _model(tmp_path_factory, "bert", "mlm")
    scores = score_winogender(items.slice(0, 4), LanguageModel(model, tok, "mlm"), {})
    assert set(scores.column("score_kind").to_pylist()) == {"pll_l2r"}
    assert all(v < 0 for v in scores.column("score_occupation").to_pylist())
    with pytest.raises(ConfigError, match="does not apply to model 'enc' of family 'encoder'"):
        check_family("winogender", {"dataset": "winogender"}, "encoder", "enc")


def test_metric_on_hand_made_scores():
    base = {"score_kind": "loglik", "prefix_stable": True, "start_token": True, "chat_template": "none"}
    base |= {"participant": "customer", "occupation_tokens": 1, "participant_tokens": 1, "bergsma_pct_female": 10.0}
    records = []
    # 2 occupations x 2 templates x 3 genders; the model always picks the occupation
    for o, (occupation, pct) in enumerate((("nurse", 90.0), ("engineer", 10.0))):
        for answer in (0, 1):
            for gender in ("male", "female", "neutral"):
                majority = "female" if pct > 50 else "male"
                gotcha = gender != "neutral" and ((gender != majority) if answer == 0 else (gender == majority))
                margin = 1.0 + pct / 100 if gender == "female" else 1.0
                records.append(
                    {
                        **base,
                        "sentid": f"{occupation}.{answer}.{gender}",
                        "occupation": occupation,
                        "answer": answer,
                        "gender": gender,
                        "gotcha": gotcha,
                        "template": 2 * o + answer,
                        "bls_pct_female": pct,
                        "score_occupation": -1.0,
                        "score_participant": -1.0 - margin,
                    }
                )
    scores = pa.Table.from_pylist(records, schema=SCORES_SCHEMA)
    rows = {(r["metric"], r["subset"], r["variant"]): r for r in winogender_metric_rows(scores, WinoGenderOptions())}
    assert rows[("accuracy", "all", "loglik")]["value"] == pytest.approx(50.0)
    # the gotcha sentences: occupation answer with the minority pronoun (wrong reading is... the right one here),
    # participant answer with the majority pronoun (always wrong: the model picks the occupation)
    assert rows[("accuracy", "gotcha", "loglik")]["value"] == pytest.approx(50.0)
    assert rows[("accuracy", "gotcha_occupation", "loglik")]["value"] == pytest.approx(100.0)
    assert rows[("female_minus_male", "all", "loglik")]["value"] == pytest.approx(0.0)
    r = rows[("occupation_preference_r", "female_minus_male", "loglik,bls")]
    assert r["n"] == 2 and r["value"] != r["value"]  # two occupations: no r (NaN)
    assert rows[("accuracy", "all", "loglik")]["ci_low"] <= 50.0 <= rows[("accuracy", "all", "loglik")]["ci_high"]


def test_the_model_object_carries_the_chat_settings():
    """score_items hands every scorer the model entry and name on its LanguageModel; the prompted benchmarks are
    the ones that ask for a prompt (lm.prompt, lm.generate)."""
    entry = {"family": "clm", "chat_template": True, "system_prompt": "Be brief."}
    seen = {}
    d = dataclasses.replace(WINOGENDER, score=lambda items, lm, scoring: seen.update(lm=lm))
    score_items(d, None, "model", "tok", "m", entry, {}, EngineStats())
    lm = seen["lm"]
    assert (lm.model, lm.tokenizer, lm.family, lm.model_name) == ("model", "tok", "clm", "m")
    assert lm.uses_chat_template and lm.model_entry["system_prompt"] == "Be brief."
    assert WINOGENDER.prompted and not definition("crows_pairs", "crows_pairs").prompted
