"""lmbias.engine.continuations: lm-eval's loglikelihood request with each context read once for its choices,
against a plain forward pass per (context, continuation) on tiny GPT-2 (no BOS of its own) and Llama (BOS first)."""

from __future__ import annotations

import pytest
import torch

from lmbias.engine.continuations import continuation_logprobs, split_request
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.scoring import adds_bos
from lmbias.engine.tiny import build_tiny_model

CONTEXTS = ["The nurse said that ", "Q: who paid the bill?\nA:"]
CHOICES = [["she was tired.", "he was tired.", "they were tired."], [" the doctor", " the patient"]]


def _plain(model, tok, context: str, continuation: str) -> tuple[float, int]:
    context, continuation = split_request(context, continuation)
    ctx = tok(context)["input_ids"]
    whole = tok(context + continuation)["input_ids"]
    cont = whole[len(ctx) :]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([whole[:-1]])).logits[0].double(), dim=-1)
    return float(logprobs[-len(cont) :].gather(-1, torch.tensor(cont).unsqueeze(-1)).sum()), len(cont)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_each_choice_equals_a_plain_forward_pass(arch, tmp_path):
    folder = build_tiny_model(arch, tmp_path / arch, seed=0)
    model, tok = load_model(model_spec("tiny", {"path": str(folder), "family": "clm", "revision": "local"}))
    assert adds_bos(tok) == (arch == "llama")
    # GPT-2 adds no BOS: the context's first token is context only, as lm-eval reads it; Llama's BOS comes first
    got = continuation_logprobs(model, tok, CONTEXTS, CHOICES)
    for context, choices, scores in zip(CONTEXTS, CHOICES, got):
        assert len(scores) == len(choices)
        for choice, score in zip(choices, scores):
            value, tokens = _plain(model, tok, context, choice)
            assert score.logprob == pytest.approx(value, abs=1e-4) and score.tokens == tokens
            assert score.prefix_stable and score.start_token == (arch == "llama")


def test_trailing_whitespace_moves_and_empty_choices_are_refused(tmp_path):
    assert split_request("A: ", "yes") == ("A:", " yes")
    folder = build_tiny_model("gpt2", tmp_path / "gpt2", seed=0)
    model, tok = load_model(model_spec("tiny", {"path": str(folder), "family": "clm", "revision": "local"}))
    with pytest.raises(ValueError, match="at least one continuation"):
        continuation_logprobs(model, tok, ["A:"], [[]])
    with pytest.raises(ValueError, match="2 contexts but 1"):
        continuation_logprobs(model, tok, ["A:", "B:"], [["x"]])
