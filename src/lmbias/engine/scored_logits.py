"""The LM head at the scored positions only, and the float64 log-probabilities of the tokens those positions
predict, a few vocabulary rows at a time.

A causal LM's log-likelihood of a text needs, at each position, log_softmax(logits)[next token]. Computing every
position's logits and a float64 log_softmax over them (what a plain forward pass gives) costs the vocabulary
projection at padding and at each row's last token too, and holds (rows x width x vocabulary) float32 logits plus
a float64 copy per row: on a CPU those tensors leave the caches (Gemma 3's 262,144-token vocabulary makes one
sentence's float64 rows 50 MB). Here the forward pass applies the head only where a `keep` mask is true
(transformers' ``logits_to_keep`` with a boolean mask: the logits come back flattened to (kept, vocabulary)), and
the float64 log-normaliser of those rows is a logsumexp taken over a cache-sized slice at a time. The numbers are
the full path's: logit - logsumexp(logits) in float64 is log_softmax's value (same sum, other order: 1e-16); the
projection of fewer rows may round its float32 sums in another order (about 1e-7 per token).

Used by both causal scoring paths: ``lmbias.engine.scoring.sentence_logprobs`` and
``lmbias.engine.prefix_cache.grouped_sentence_logprobs``.
"""

from __future__ import annotations

import numpy as np

from lmbias.engine.batching import forward_takes
from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use

#: Kept positions whose float64 log-normalisers are taken at a time on an accelerator (bounds the float64 copy).
LOGSUMEXP_ROWS = 256

#: On a CPU, the float64 copy of the logits' rows taken at a time is kept about this small (1.5 MiB), so it stays
#: in a core's cache: a few vocabulary rows at a time are three to four times faster than a whole pass's rows.
LOGSUMEXP_CPU_BYTES = 3 << 19


def keeps_logits(model) -> bool:
    """Whether the model's forward takes ``logits_to_keep`` (transformers' causal LMs: a boolean (rows x width)
    mask applies the LM head at the true positions only, logits flattened to (kept, vocabulary)). Not for a
    model dispatched over several devices (models.<name>.device_map): its last hidden states are not on the
    device of the mask, which the model would index them with; not for a wrapper whose forward lacks it (a
    Self-Debias model)."""
    if len(set(map(str, (getattr(model, "hf_device_map", None) or {}).values()))) > 1:
        return False
    return forward_takes(model, "logits_to_keep")


def forward_scored(model, keep, **inputs):
    """The model's forward pass with the LM head (vocabulary projection) applied only where `keep` (rows x
    width, bool) is true: (logits of the kept positions in row-major order, (kept, vocabulary); the output).
    A model without ``logits_to_keep`` computes every position's logits and the kept ones are taken."""
    if keeps_logits(model):
        out = model(**inputs, logits_to_keep=keep)
        return out.logits, out
    out = model(**inputs)
    return out.logits[keep.to(out.logits.device)], out


def picked_logprobs(logits, positions: list[int], tokens: list[int]) -> np.ndarray:
    """log_softmax(logits[p])[t] for each (p, t) of `positions` x `tokens`, in float64 (a difference of float32
    log-probabilities near -10 moves in steps of 1e-6), a few rows at a time: a whole pass's float64 vocabulary
    rows would double the logits' memory (LOGSUMEXP_ROWS, LOGSUMEXP_CPU_BYTES)."""
    if not positions:
        return np.zeros(0, dtype=np.float64)
    rows = max(1, LOGSUMEXP_CPU_BYTES // (8 * logits.shape[-1])) if logits.device.type == "cpu" else LOGSUMEXP_ROWS
    normalisers = torch.cat(
        [torch.logsumexp(logits[i : i + rows].double(), dim=-1) for i in range(0, len(logits), rows)]
    )
    at = torch.tensor(positions, dtype=torch.long, device=logits.device)
    token = torch.tensor(tokens, dtype=torch.long, device=logits.device)
    return (logits[at, token].double() - normalisers[at]).cpu().numpy()
