"""Transcriptions of lm-evaluation-harness 0.4.13 computations the readings are checked against."""

from __future__ import annotations

import torch


def lm_eval_loglikelihood(model, tok, context: str, continuation: str) -> float:
    """A transcription of lm-eval 0.4.13's HFLM loglikelihood of one (context, continuation) request: the context's
    trailing whitespace moves to the continuation, both are encoded with the tokenizer's default special tokens
    (none added to a context that starts with the BOS text), the continuation is the whole's tokens after the
    context's, and its log-softmax terms are summed (float64)."""
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    bos = tok.decode(tok.bos_token_id) if tok.bos_token_id is not None else None
    special = {"add_special_tokens": False} if bos and context.startswith(bos) else {}
    whole, ctx = tok.encode(context + continuation, **special), tok.encode(context, **special)
    cont = whole[len(ctx) :]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([(ctx + cont)[:-1]])).logits[0].double(), dim=-1)
    return float(logprobs[-len(cont) :].gather(-1, torch.tensor(cont).unsqueeze(-1)).sum())
