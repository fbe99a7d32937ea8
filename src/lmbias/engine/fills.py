"""A masked LM's most probable fills of one mask (HONEST's completions), batched like every masked request.

`masked_top_k` reads the distribution at the single mask token of each text and returns its k most probable
tokens, as the HF fill-mask pipeline (which the HONEST authors used) does with `top_k`: identical texts are read
once, the distinct ones sorted by length and batched within the token budget (lmbias.engine.batching.run_batches),
the LM head applied at the mask only (lmbias.engine.scoring.mlm_head), log-softmax in float64. The order is by
probability, ties broken by the lower token id (a stable sort), so a rerun gives the same list.
"""

from __future__ import annotations

from collections.abc import Sequence

from lmbias.engine.batching import EngineStats, autocast, model_device, pad, run_batches
from lmbias.engine.scoring import input_limit, masked_logits_at, mlm_head
from lmbias.errors import DataError
from lmbias.lazy import lazy_module

torch = lazy_module("torch")


def masked_top_k(
    model,
    tokenizer,
    texts: Sequence[str],
    k: int,
    batch_size: int = 64,
    max_length: int = 512,
    max_tokens: int | None = None,
    stats: EngineStats | None = None,
) -> list[list[tuple[int, float]]]:
    """[(token id, log p), ...] of the k most probable tokens at the one mask token of each text, most probable
    first. A text without exactly one mask token, or longer than max_length, is a DataError naming it."""
    if k < 1:
        raise ValueError(f"masked_top_k: k must be at least 1, got {k}")
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise DataError("masked fills need a tokenizer with a mask token")
    max_length = input_limit(model, tokenizer, max_length)
    stats = stats if stats is not None else EngineStats()
    unique: dict[str, int] = {}
    for text in texts:
        unique.setdefault(text, len(unique))
    distinct = list(unique)
    encoded = tokenizer(distinct, add_special_tokens=True, truncation=False)["input_ids"] if distinct else []
    positions = []
    for text, ids in zip(distinct, encoded):
        found = [p for p, token in enumerate(ids) if token == mask_id]
        if len(found) != 1:
            raise DataError(f"masked fills: expected one mask token, found {len(found)}: {text[:80]!r}")
        if len(ids) > max_length:
            raise DataError(f"masked fills: input of {len(ids)} tokens exceeds max_length={max_length}: {text[:80]!r}")
        positions.append(found[0])
    head = mlm_head(model)
    device = model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    lengths = [len(ids) for ids in encoded]
    order = sorted(range(len(encoded)), key=lambda i: (lengths[i], i))
    width = min(k, len(tokenizer))
    results: dict[int, list[tuple[int, float]]] = {}

    def run(batch: list[int]) -> None:
        ids, attention = pad([encoded[i] for i in batch], pad_id, device)
        rows, cols = list(range(len(batch))), [positions[i] for i in batch]
        logits = masked_logits_at(model, head, ids, attention, rows, cols)
        logprobs = torch.log_softmax(logits.double(), dim=-1)
        values, index = torch.sort(logprobs, dim=-1, descending=True, stable=True)
        values, index = values[:, :width].cpu().tolist(), index[:, :width].cpu().tolist()
        for row, i in enumerate(batch):
            results[i] = list(zip(index[row], values[row]))
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    with torch.inference_mode(), autocast(device):
        run_batches(order, lengths, batch_size, run, max_tokens, stats, "masked fills")
    stats.requests += len(texts)
    stats.unique_inputs += len(distinct)
    return [results[unique[text]] for text in texts]
