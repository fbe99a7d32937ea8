"""Reference scorers (test oracles): what the engine computes, one request at a time, with the model's full
forward pass -- no batching, no deduplication, no padding, no autocast, the LM head over every position.

Each ``naive_X`` gives the numbers of lmbias.engine.scoring's ``X``; tests assert the engine equals them to
1e-5, and ``bench/scoring_engine.py`` measures the engine's speed-up over them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmbias.engine.batching import model_device
from lmbias.engine.scoring import (
    InfillIdsRequest,
    InfillRequest,
    MaskedIdsRequest,
    MaskedRequest,
    clm_inputs,
    decoder_prefix,
    sentence_alone,
    start_logprobs,
)
from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use


def naive_masked_logprobs(model, tokenizer, requests: Sequence[MaskedRequest]) -> list[np.ndarray]:
    """Reference implementation: one full forward pass per request, no batching, no dedup."""
    out = []
    with torch.inference_mode():
        for req in requests:
            enc = tokenizer(req.text, return_tensors="pt").to(model_device(model))
            positions = (enc["input_ids"][0] == tokenizer.mask_token_id).nonzero().flatten().tolist()
            logits = model(**enc).logits[0, positions[req.mask_index]]
            out.append(torch.log_softmax(logits.double(), -1)[list(req.candidates)].cpu().numpy())
    return out


def naive_sentence_logprobs(model, tokenizer, texts: Sequence[str], context: str = "bos") -> np.ndarray:
    out = []
    device = model_device(model)
    with torch.inference_mode():
        for text in texts:
            ids = torch.tensor([clm_inputs(tokenizer, [text], 10**9, context)[0]], device=device)
            head = 0.0
            if context == "bias_bench":
                head = float(start_logprobs(model, tokenizer, device)[ids[0, 0]])
                logits = sentence_alone(model)(input_ids=ids).logits[0, :-1].double()
            else:
                logits = model(input_ids=ids).logits[0, :-1].double()
            lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:].unsqueeze(-1)).sum()
            out.append(head + float(lp))
    return np.array(out, dtype=np.float64)


def naive_infill_logprobs(model, tokenizer, requests: Sequence[InfillRequest]) -> list[np.ndarray]:
    out = []
    device = model_device(model)
    with torch.inference_mode():
        for req in requests:
            enc = tokenizer(req.masked_text, return_tensors="pt").to(device)
            prefix = tokenizer(req.prefix, add_special_tokens=False)["input_ids"]
            dec = torch.tensor([decoder_prefix(model, tokenizer, prefix)], device=device)
            logits = model(**enc, decoder_input_ids=dec).logits[0, -1].double()
            out.append(torch.log_softmax(logits, -1)[list(req.candidates)].cpu().numpy())
    return out


def naive_masked_logprobs_ids(model, tokenizer, requests: Sequence[MaskedIdsRequest]) -> list[np.ndarray]:
    """Reference for masked_logprobs_ids: one full forward pass per request."""
    out = []
    device = model_device(model)
    with torch.inference_mode():
        for req in requests:
            ids = torch.tensor([list(req.input_ids)], device=device)
            logits = model(input_ids=ids).logits[0, req.position].double()
            out.append(torch.log_softmax(logits, -1)[list(req.candidates)].cpu().numpy())
    return out


def naive_infill_logprobs_ids(model, tokenizer, requests: Sequence[InfillIdsRequest]) -> list[np.ndarray]:
    """Reference for infill_logprobs_ids: one full forward pass per request."""
    out = []
    device = model_device(model)
    with torch.inference_mode():
        for req in requests:
            enc = torch.tensor([list(req.encoder_ids)], device=device)
            dec = torch.tensor([list(req.decoder_ids)], device=device)
            logits = model(input_ids=enc, decoder_input_ids=dec).logits[0, -1].double()
            out.append(torch.log_softmax(logits, -1)[list(req.candidates)].cpu().numpy())
    return out
