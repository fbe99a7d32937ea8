"""Pseudo-log-likelihood: log p(token_i | the sentence with token i hidden), one token at a time.

Masked LMs have no sentence likelihood; Salazar et al. (2020) and Nangia et al. (2020, CrowS-Pairs) use
the sum of these per-token terms instead. A sentence of n tokens needs n masked inputs, so every input
is built here as a token-id request and handed to the scoring engine in one call (deduplicated,
length-sorted, batched, LM head only at the masked position).

* mlm: the input is the sentence with token i replaced by the mask token; read log p(token i) there.
* seq2seq (BART): the encoder reads the sentence with token i replaced by <mask>; the decoder,
  teacher-forced on the tokens before i, scores token i (BART's denoising objective). The engine runs
  one decoder pass per encoder input.

Positions are indices into the tokenizer's ids *with* special tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmbias.engine.batching import EngineStats
from lmbias.engine.oracles import naive_infill_logprobs_ids, naive_masked_logprobs_ids
from lmbias.engine.scoring import InfillIdsRequest, MaskedIdsRequest, infill_logprobs_ids, masked_logprobs_ids
from lmbias.errors import ConfigError, DataError

FAMILIES = ("mlm", "seq2seq")


def encode(tokenizer, text: str) -> list[int]:
    """Token ids of `text` with the model's special tokens ([CLS] ... [SEP], <s> ... </s>)."""
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


def content_positions(tokenizer, ids: Sequence[int]) -> list[int]:
    """Positions of `ids` that are not special tokens."""
    special = tokenizer.get_special_tokens_mask(list(ids), already_has_special_tokens=True)
    return [i for i, s in enumerate(special) if not s]


def word_l2r_inputs(ids: Sequence[int], pieces: Sequence[int], mask_id: int) -> list[tuple[list[int], int]]:
    """(input, position) per piece of one word for its left-to-right pseudo-log-likelihood (Kauf and Ivanova
    2023's PLL-word-l2r): the piece is read at `position` with the word's later pieces masked too, so a word of
    several pieces is not read off its own other pieces. The pieces' log p at their positions sum to the word's."""
    inputs = []
    for j, position in enumerate(pieces):
        masked = list(ids)
        for later in pieces[j + 1 :]:
            masked[later] = mask_id
        inputs.append((masked, position))
    return inputs


def choice_l2r_inputs(
    tokenizer, prompts: Sequence[str], choices: Sequence[Sequence[str]], delimiter: str = " "
) -> list[list[list[tuple[list[int], int]]]]:
    """For each prompt, for each of its choices: (input, position) per word piece of the choice after prompt +
    `delimiter`, for its left-to-right pseudo-log-likelihood given the prompt (word_l2r_inputs over the choice's
    pieces: the tokens of prompt + delimiter + choice that are not special tokens and not the prompt's own leading
    tokens). Only the choice is read: the prompt is the same for every choice, and its own pseudo-likelihood would
    change with the choice beside it. The texts are tokenised in two batched calls (the prompts once each).
    DataError naming the prompt's number when a choice has no token of its own."""
    mask = _mask_id(tokenizer)
    prompt_ids = tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
    pairs = zip(prompts, choices, strict=True)
    texts = [prompt + delimiter + choice for prompt, options in pairs for choice in options]
    whole_ids = iter(tokenizer(texts, add_special_tokens=True)["input_ids"]) if texts else iter(())
    out = []
    for i, (prompt, options) in enumerate(zip(prompts, choices)):
        own = []
        for choice in options:
            ids, head = list(next(whole_ids)), prompt_ids[i]
            shared = 0
            while shared < min(len(ids), len(head)) and ids[shared] == head[shared]:
                shared += 1
            pieces = [p for p in content_positions(tokenizer, ids) if p >= shared]
            if not pieces:
                raise DataError(f"prompt {i}: the choice {choice!r} has no token of its own after {prompt[-60:]!r}")
            own.append(word_l2r_inputs(ids, pieces, mask))
        out.append(own)
    return out


def _mask_id(tokenizer) -> int:
    if tokenizer.mask_token_id is None:
        raise ConfigError(
            f"pseudo-log-likelihood needs a tokenizer with a mask token ({type(tokenizer).__name__} has none)"
        )
    return tokenizer.mask_token_id


def _decoder_start(model) -> int:
    start = getattr(model.config, "decoder_start_token_id", None)
    if start is None:
        raise ConfigError("seq2seq pseudo-log-likelihood needs model.config.decoder_start_token_id")
    return int(start)


def pll_requests(
    model, tokenizer, family: str, sequences: Sequence[Sequence[int]], positions: Sequence[Sequence[int]]
) -> list:
    """One engine request per (sequence, position): hide that token, ask for its log-probability."""
    if family not in FAMILIES:
        raise ConfigError(f"pseudo-log-likelihood applies to families {FAMILIES}, not {family!r}")
    mask = _mask_id(tokenizer)
    start = _decoder_start(model) if family == "seq2seq" else None
    requests = []
    for ids, where in zip(sequences, positions):
        ids = list(ids)
        for pos in where:
            if not 0 <= pos < len(ids):
                raise DataError(f"pseudo-log-likelihood: position {pos} outside a sequence of {len(ids)} tokens")
            masked = ids.copy()
            masked[pos] = mask
            if family == "mlm":
                requests.append(MaskedIdsRequest(input_ids=tuple(masked), position=pos, candidates=(ids[pos],)))
            else:
                requests.append(
                    InfillIdsRequest(
                        encoder_ids=tuple(masked), decoder_ids=tuple([start] + ids[:pos]), candidates=(ids[pos],)
                    )
                )
    return requests


def _split(values: list[np.ndarray], positions: Sequence[Sequence[int]]) -> list[np.ndarray]:
    out, k = [], 0
    for where in positions:
        out.append(np.array([float(v[0]) for v in values[k : k + len(where)]], dtype=np.float64))
        k += len(where)
    return out


def token_logprobs(
    model,
    tokenizer,
    family: str,
    sequences: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    batch_size: int = 64,
    max_length: int = 512,
    stats: EngineStats | None = None,
    max_tokens: int | None = None,
) -> list[np.ndarray]:
    """For each sequence, log p(ids[i]) with token i hidden, for i in its positions (same order)."""
    requests = pll_requests(model, tokenizer, family, sequences, positions)
    engine = masked_logprobs_ids if family == "mlm" else infill_logprobs_ids
    values = engine(
        model, tokenizer, requests, batch_size=batch_size, max_length=max_length, max_tokens=max_tokens, stats=stats
    )
    return _split(values, positions)


def naive_token_logprobs(
    model, tokenizer, family: str, sequences: Sequence[Sequence[int]], positions: Sequence[Sequence[int]]
) -> list[np.ndarray]:
    """Reference for token_logprobs: one full forward pass per hidden token."""
    requests = pll_requests(model, tokenizer, family, sequences, positions)
    if family == "mlm":
        values = naive_masked_logprobs_ids(model, tokenizer, requests)
    else:
        values = naive_infill_logprobs_ids(model, tokenizer, requests)
    return _split(values, positions)


def sentence_pll(
    model,
    tokenizer,
    family: str,
    texts: Sequence[str],
    batch_size: int = 64,
    max_length: int = 512,
    stats: EngineStats | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Pseudo-log-likelihood of each text: the sum over its non-special tokens."""
    seqs = [encode(tokenizer, t) for t in texts]
    where = [content_positions(tokenizer, s) for s in seqs]
    per_token = token_logprobs(model, tokenizer, family, seqs, where, batch_size, max_length, stats, max_tokens)
    return np.array([float(v.sum()) for v in per_token], dtype=np.float64)
