"""The batched engine equals a naive one-sentence-at-a-time loop, for every family, to 1e-5."""

from __future__ import annotations

import numpy as np
import pytest

from lmbias.engine.batching import EngineStats, scoring_precision
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.oracles import naive_infill_logprobs, naive_masked_logprobs, naive_sentence_logprobs
from lmbias.engine.scoring import (
    InfillRequest,
    MaskedRequest,
    infill_logprobs,
    masked_logprobs,
    sentence_logprobs,
    word_token_ids,
)
from lmbias.engine.tiny import build_tiny_model

SENTENCES = [
    "The developer argued with the designer because {} did not like the design.",
    "The mechanic gave the clerk a present because {} won the lottery.",
    "The physician hired the secretary because {} was overwhelmed with clients.",
    "The nurse notified the patient that {} shift would be ending in an hour.",
    "The developer argued with the designer because {} did not like the design.",  # duplicate on purpose
    "{} is a nurse.",
]
FAMILY = {"bert": "mlm", "roberta": "mlm", "gpt2": "clm", "bart": "seq2seq"}


@pytest.fixture(scope="module", params=["bert", "roberta", "gpt2", "bart"])
def tiny(request, tmp_path_factory):
    arch = request.param
    out = tmp_path_factory.mktemp(f"tiny-{arch}") / arch
    build_tiny_model(arch, out, seed=0)
    spec = model_spec(f"tiny-{arch}", {"path": str(out), "family": FAMILY[arch], "revision": "local"})
    model, tok = load_model(spec)
    return arch, FAMILY[arch], model, tok


def _masked_requests(tok):
    reqs = []
    for s in SENTENCES:
        after_space = not s.startswith("{}")
        cands = tuple(
            word_token_ids(tok, w if after_space else w.capitalize(), after_space)[0] for w in ("he", "she", "his")
        )
        reqs.append(MaskedRequest(text=s.format(tok.mask_token), candidates=cands))
    return reqs


def test_engine_equals_naive(tiny):
    arch, family, model, tok = tiny
    stats = EngineStats()
    if family == "mlm":
        reqs = _masked_requests(tok)
        fast = masked_logprobs(model, tok, reqs, batch_size=4, stats=stats)
        slow = naive_masked_logprobs(model, tok, reqs)
    elif family == "seq2seq":
        reqs = []
        for r, s in zip(_masked_requests(tok), SENTENCES):
            reqs.append(InfillRequest(masked_text=r.text, prefix=s.split("{}")[0].rstrip(" "), candidates=r.candidates))
        fast = infill_logprobs(model, tok, reqs, batch_size=4, stats=stats)
        slow = naive_infill_logprobs(model, tok, reqs)
    else:
        texts = [s.format(w) for s in SENTENCES for w in ("he", "she")]
        fast = sentence_logprobs(model, tok, texts, batch_size=3, stats=stats)
        slow = naive_sentence_logprobs(model, tok, texts)
    np.testing.assert_allclose(
        np.concatenate([np.atleast_1d(x) for x in fast]),
        np.concatenate([np.atleast_1d(x) for x in slow]),
        atol=1e-5,
        rtol=0,
    )
    # the duplicate sentence was run once
    assert stats.unique_inputs < stats.requests


def _engine(family, model, tok):
    if family == "mlm":
        return np.concatenate(masked_logprobs(model, tok, _masked_requests(tok), batch_size=4))
    if family == "seq2seq":
        reqs = [
            InfillRequest(masked_text=r.text, prefix=s.split("{}")[0].rstrip(" "), candidates=r.candidates)
            for r, s in zip(_masked_requests(tok), SENTENCES)
        ]
        return np.concatenate(infill_logprobs(model, tok, reqs, batch_size=4))
    return sentence_logprobs(model, tok, [s.format(w) for s in SENTENCES for w in ("he", "she")], batch_size=3)


def test_precision_setting_reaches_the_forward_pass(tiny):
    """`auto` is float32 on CPU (bit-identical to fp32); bf16 autocast really runs (numbers move, slightly),
    and the setting ends with its block."""
    arch, family, model, tok = tiny
    reference = _engine(family, model, tok)
    with scoring_precision("auto"):
        np.testing.assert_array_equal(_engine(family, model, tok), reference)
    with scoring_precision("bf16"):
        low = _engine(family, model, tok)
    assert not np.array_equal(low, reference)
    np.testing.assert_allclose(low, reference, atol=0.25)  # bfloat16 keeps about 3 significant digits
    np.testing.assert_array_equal(_engine(family, model, tok), reference)


def test_unknown_precision_names_the_key():
    from lmbias.errors import ConfigError

    with pytest.raises(ConfigError, match=r"models.bert-large.precision: 'fp8' is not one of auto, fp32, bf16, fp16"):
        with scoring_precision("fp8", "models.bert-large.precision"):
            pass


def test_mask_index_out_of_range_is_a_clear_error(tmp_path):
    from lmbias.errors import DataError

    build_tiny_model("bert", tmp_path / "bert", seed=0)
    model, tok = load_model(
        model_spec("tiny-bert", {"path": str(tmp_path / "bert"), "family": "mlm", "revision": "local"})
    )
    with pytest.raises(DataError, match="1 mask token"):
        masked_logprobs(model, tok, [MaskedRequest(text=f"He is a {tok.mask_token}.", candidates=(5,), mask_index=1)])


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-llama") / "llama"
    build_tiny_model("llama", out, seed=0)
    return load_model(model_spec("tiny-llama", {"path": str(out), "family": "clm", "revision": "local"}))


def test_causal_head_runs_at_scored_positions_only(tiny_llama, monkeypatch):
    """sentence_logprobs asks the model for the logits of each row's real positions but its last (padding and the
    last token predict nothing scored), and a model that cannot be asked gives the same numbers from its full
    logits; both equal the one-sentence loop. Texts of very different lengths pad the shorter rows of a batch."""
    from lmbias.engine import scored_logits

    model, tok = tiny_llama
    texts = [s.format(w) for s in SENTENCES for w in ("he", "she")] + ["He left.", "She"]
    kept_counts = []
    forward = model.forward

    def counting(*args, logits_to_keep=0, **kwargs):
        kept_counts.append(int(logits_to_keep.sum()))
        return forward(*args, logits_to_keep=logits_to_keep, **kwargs)

    monkeypatch.setattr(model, "forward", counting)
    kept = sentence_logprobs(model, tok, texts, batch_size=16)
    monkeypatch.undo()
    unique = list(dict.fromkeys(texts))
    assert sum(kept_counts) == sum(len(tok(t)["input_ids"]) - 1 for t in unique)  # BOS first, no last token
    monkeypatch.setattr(scored_logits, "keeps_logits", lambda model: False)
    every = sentence_logprobs(model, tok, texts, batch_size=16)
    np.testing.assert_allclose(every, kept, rtol=0, atol=1e-5)
    np.testing.assert_allclose(kept, naive_sentence_logprobs(model, tok, texts), rtol=0, atol=1e-5)


def test_bias_bench_context_scores_a_one_token_text_by_its_start_term(tiny_llama):
    """With context bias_bench a one-token text has no position to score in its own pass: its log-likelihood is
    the start token's term alone, and the other rows of its batch keep theirs."""
    model, tok = tiny_llama
    one = "he"
    assert len(tok(one, add_special_tokens=False)["input_ids"]) == 1
    texts = [one, "The nurse said that she was tired."]
    together = sentence_logprobs(model, tok, texts, batch_size=8, context="bias_bench")
    alone = [sentence_logprobs(model, tok, [t], context="bias_bench")[0] for t in texts]
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-5)
    assert together[0] < 0
