"""The batched scoring engine: candidate log-probabilities at masked positions, and sentence log-likelihoods.

Most bias metrics ask "how likely is token X at this masked position?" or "how likely is this sentence?".
Every such request goes through here, so speed and correctness live in one place:

* identical inputs are deduplicated (many benchmarks share contexts between items),
* unique inputs are sorted by length and batched within a token budget (``max_tokens`` padded tokens per
  forward pass, a model's ``max_tokens`` in config.yaml; ``batch_size`` caps the rows), so padding stays small
  and a long input shares its pass with fewer others; out of CUDA memory, a batch is halved and the job goes
  on (lmbias.engine.batching.run_batches),
* the forward pass runs under ``torch.inference_mode()`` and, by default, bfloat16 autocast on GPU
  (lmbias.engine.batching.scoring_precision: a model's ``precision`` in config.yaml),
* log-softmax in float64 over the gathered rows only: a difference of two float32 log-probabilities near
  -10 moves in steps of about 1e-6, which turns near-ties into exact ties (DA-Gender margins of 0.0),
* the LM head is applied only at the positions asked for, not to every token: for masked LMs at the masks,
  for causal LMs at every real position but a row's last (lmbias.engine.scored_logits),
* results are scattered back to the caller's order.

The ``naive_*`` functions of lmbias.engine.oracles do the same computation one sentence at a time with the
model's full forward pass; tests assert the engine equals them to 1e-5, and ``bench/scoring_engine.py``
measures the speed-up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lmbias import progress
from lmbias.engine.batching import EngineStats, autocast, low_padding_runs, model_device, pad, run_batches
from lmbias.engine.context_window import context_window
from lmbias.engine.scored_logits import forward_scored, picked_logprobs
from lmbias.errors import ConfigError, DataError
from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use: DAG builds and metric jobs never need it


@dataclass(frozen=True)
class MaskedRequest:
    """Score `candidates` (token ids) at the `mask_index`-th mask token of `text`."""

    text: str
    candidates: tuple[int, ...]
    mask_index: int = 0


def word_token_ids(tokenizer, word: str, after_space: bool = True) -> list[int]:
    """Token ids of `word` as it appears inside a sentence (byte-level BPE marks a preceding space)."""
    text = (" " + word) if after_space else word
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if ids and after_space and _is_bare_space_token(tokenizer, ids[0]):
        ids = ids[1:]
    return list(ids)


def _is_bare_space_token(tokenizer, token_id: int) -> bool:
    token = tokenizer.convert_ids_to_tokens(token_id)
    return token in ("Ġ", "▁", " ")


def mlm_head(model) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The masked-LM head as a function of final hidden states, when the architecture exposes one.

    Applying the head only at masked positions avoids a (tokens x vocab) matmul per sentence. Unknown
    architectures return None and fall back to the full forward pass (same numbers, slower). A model that
    rescales its output distribution (Self-Debias, lmbias.engine.self_debias) has no head of its own: it
    computes the logits at given positions itself (`logits_at`).
    """
    if getattr(model, "rescales_output", False):
        return None
    if hasattr(model, "cls") and hasattr(model.cls, "predictions"):  # BERT
        return model.cls
    if hasattr(model, "lm_head") and model.config.model_type in ("roberta", "xlm-roberta", "camembert"):
        return model.lm_head
    if hasattr(model, "predictions") and model.config.model_type == "albert":
        return model.predictions
    if model.config.model_type == "distilbert":

        def head(hidden):
            hidden = model.vocab_transform(hidden)
            hidden = model.activation(hidden)
            hidden = model.vocab_layer_norm(hidden)
            return model.vocab_projector(hidden)

        return head
    return None


def masked_logits_at(model, head, ids, attention, rows, cols):
    """A masked LM's logits at (rows[i], cols[i]) of a padded batch: through the model's own `logits_at` (Self-Debias
    rescales them), else its head at those positions only (`mlm_head`), else the full forward pass."""
    if hasattr(model, "logits_at"):
        return model.logits_at(ids, attention, rows, cols)
    if head is not None:
        hidden = model.base_model(input_ids=ids, attention_mask=attention).last_hidden_state
        return head(hidden[rows, cols])
    return model(input_ids=ids, attention_mask=attention).logits[rows, cols]


def input_limit(model, tokenizer, max_length: int | None) -> int:
    """The longest input the engine scores: a benchmark's `max_length`, at most the model's usable context (the
    smaller of its tokenizer's and its config's limits, lmbias.engine.context_window), so that an input the
    model cannot hold is refused by name rather than crashing in its position embeddings."""
    context = context_window(model, tokenizer).tokens
    return context if max_length is None else min(int(max_length), context)


def _encode_unique(tokenizer, texts: Sequence[str], max_length: int, what: str) -> list[list[int]]:
    encoded = tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
    for text, ids in zip(texts, encoded):
        if len(ids) > max_length:
            raise DataError(f"{what}: input of {len(ids)} tokens exceeds max_length={max_length}: {text[:80]!r}")
    return encoded


def masked_logprobs(
    model,
    tokenizer,
    requests: Sequence[MaskedRequest],
    batch_size: int = 64,
    max_length: int = 512,
    max_tokens: int | None = None,
    stats: EngineStats | None = None,
) -> list[np.ndarray]:
    """log p(candidate) at the requested mask of each request, for masked LMs. One array per request.

    Texts are tokenised once per distinct text, then scored by `masked_logprobs_ids`.
    """
    max_length = input_limit(model, tokenizer, max_length)
    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise DataError("masked scoring needs a tokenizer with a mask token")
    unique_texts: dict[str, int] = {}
    for req in requests:
        unique_texts.setdefault(req.text, len(unique_texts))
    texts = list(unique_texts)
    encoded = _encode_unique(tokenizer, texts, max_length, "masked scoring")
    mask_positions = [[pos for pos, tok in enumerate(ids) if tok == mask_id] for ids in encoded]
    id_requests = []
    for req in requests:
        uid = unique_texts[req.text]
        positions = mask_positions[uid]
        if req.mask_index >= len(positions):
            raise DataError(
                f"masked scoring: text has {len(positions)} mask token(s), asked for #{req.mask_index}: "
                f"{req.text[:80]!r}"
            )
        id_requests.append(MaskedIdsRequest(tuple(encoded[uid]), positions[req.mask_index], tuple(req.candidates)))
    return masked_logprobs_ids(
        model, tokenizer, id_requests, batch_size=batch_size, max_length=max_length, max_tokens=max_tokens, stats=stats
    )


#: How a causal LM's sentence is conditioned (benchmarks' `scoring.clm_context`):
#: bos -- every token after a leading start token (BOS, or EOS where there is none: GPT-2's <|endoftext|>);
#: bias_bench -- bias-bench's generative CrowS-Pairs and StereoSet runners: the first token read from the
#: distribution after the start token alone (their separate forward pass of "<|endoftext|>"), every later
#: token from a forward pass of the sentence alone (no start token, positions from 0).
CLM_CONTEXTS = ("bos", "bias_bench")


def clm_context(scoring: dict, key: str) -> str:
    """`scoring.clm_context` checked (default bos); ConfigError naming `key`."""
    value = scoring.get("clm_context", "bos")
    if value not in CLM_CONTEXTS:
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(CLM_CONTEXTS)}")
    return value


def adds_bos(tokenizer) -> bool:
    """Whether the tokenizer puts its BOS in front of every text itself (Llama, Mistral, Gemma), unlike GPT-2,
    Pythia, Qwen2 and OLMo-2, whose encoding of a text holds the text's tokens only."""
    bos = tokenizer.bos_token_id
    if bos is None:
        return False
    ids = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    return bool(ids) and ids[0] == bos


def clm_start_id(tokenizer) -> int:
    """The token a causal LM's sentences start after: BOS, else EOS (both <|endoftext|> for GPT-2, the token
    bias-bench encodes as its unconditional start)."""
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if start is None:
        raise ConfigError(f"sentence scoring: tokenizer {type(tokenizer).__name__} has neither a BOS nor an EOS token")
    return int(start)


def clm_inputs(tokenizer, texts: Sequence[str], max_length: int, context: str = "bos") -> list[list[int]]:
    """Causal-LM inputs: a leading BOS (GPT-2's <|endoftext|>) so the first word is scored too; context
    bias_bench: the sentence's tokens alone (its first token is read after the start token separately)."""
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    if context == "bos":
        seqs = [[clm_start_id(tokenizer)] + ids for ids in encoded]
    else:
        seqs = [list(ids) for ids in encoded]
    for text, ids in zip(texts, seqs):
        if len(ids) > max_length:
            raise DataError(
                f"sentence scoring: input of {len(ids)} tokens exceeds max_length={max_length}: {text[:80]!r}"
            )
        if not ids:
            raise DataError(f"sentence scoring: a text without tokens: {text!r}")
    return seqs


def sentence_alone(model):
    """The model as it reads a sentence without a start token. A Self-Debias wrapper (lmbias.engine.self_debias)
    then puts its prefix before the sentence rather than in the start token's place."""
    prepending = getattr(model, "prepending_prefix", None)
    return prepending() if callable(prepending) else model


def start_logprobs(model, tokenizer, device) -> torch.Tensor:
    """log p(first token | start token) over the vocabulary (float64): one forward pass of the start token."""
    ids = torch.tensor([[clm_start_id(tokenizer)]], dtype=torch.long, device=device)
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0, 0]
    return torch.log_softmax(logits.double(), dim=-1)


def whole_input_logprobs(model, seqs: list[list[int]], pad_id: int, device) -> np.ndarray:
    """One right-padded pass of whole token sequences: per sequence, the sum of log p(token | tokens before) over
    every token after its first (float64; 0 for a one-token sequence). The LM head runs at the real positions
    but each row's last only (lmbias.engine.scored_logits)."""
    ids, attn = pad(seqs, pad_id, device)
    keep = attn.bool()
    keep[torch.arange(len(seqs), device=device), attn.sum(1) - 1] = False  # a row's last token predicts nothing
    logits, _ = forward_scored(model, keep, input_ids=ids, attention_mask=attn)
    values = picked_logprobs(logits, list(range(len(logits))), [t for seq in seqs for t in seq[1:]])
    rows = np.repeat(np.arange(len(seqs)), [len(seq) - 1 for seq in seqs])
    return np.bincount(rows, weights=values, minlength=len(seqs))


def sentence_logprobs(
    model,
    tokenizer,
    texts: Sequence[str],
    batch_size: int = 64,
    max_length: int = 512,
    stats: EngineStats | None = None,
    context: str = "bos",
    max_tokens: int | None = None,
) -> np.ndarray:
    """Total log-likelihood of each text under a causal LM (sum over its tokens), every token conditioned on
    a BOS (context bos) or as bias-bench conditions them (context bias_bench, see CLM_CONTEXTS: one extra
    forward pass of the start token, computed once per call and read for every text's first token)."""
    max_length = input_limit(model, tokenizer, max_length)
    if context not in CLM_CONTEXTS:
        raise ConfigError(f"sentence scoring: context {context!r} is not one of {', '.join(CLM_CONTEXTS)}")
    stats = stats if stats is not None else EngineStats()
    device = model_device(model)
    unique: dict[str, int] = {}
    for text in texts:
        unique.setdefault(text, len(unique))
    seqs = clm_inputs(tokenizer, list(unique), max_length, context)
    lengths = [len(s) for s in seqs]
    order = sorted(range(len(seqs)), key=lambda i: (lengths[i], i))
    head = np.zeros(len(seqs), dtype=np.float64)  # bias_bench: log p(first token | start token)
    totals = np.zeros(len(seqs), dtype=np.float64)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def run(batch):
        totals[batch] = head[batch] + whole_input_logprobs(scorer, [seqs[i] for i in batch], pad_id, device)
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    scorer = model
    with torch.inference_mode(), autocast(device):
        if context == "bias_bench":
            first = start_logprobs(model, tokenizer, device).cpu()
            stats.forward_passes += 1
            stats.sequences_run += 1
            for uid, seq in enumerate(seqs):
                head[uid] = float(first[seq[0]])
            scorer = sentence_alone(model)
        with progress.planned(len(order)):  # several batch loops, one announcement (lmbias.progress)
            for run_of_lengths in low_padding_runs(order, lengths, batch_size):
                run_batches(run_of_lengths, lengths, batch_size, run, max_tokens, stats, "sentence scoring")
    stats.requests += len(texts)
    stats.unique_inputs += len(seqs)
    return np.array([totals[unique[t]] for t in texts], dtype=np.float64)


@dataclass(frozen=True)
class InfillRequest:
    """Seq2seq fill-in: the encoder reads `masked_text`; score `candidates` as the decoder's next token
    after `prefix` (the target sentence up to the masked word)."""

    masked_text: str
    prefix: str
    candidates: tuple[int, ...]


def _seq2seq_pairs(tokenizer, requests: Sequence[InfillRequest], max_length: int):
    enc_texts = [r.masked_text for r in requests]
    enc = tokenizer(enc_texts, add_special_tokens=True)["input_ids"]
    prefixes = tokenizer([r.prefix for r in requests], add_special_tokens=False)["input_ids"]
    for text, ids in zip(enc_texts, enc):
        if len(ids) > max_length:
            raise DataError(
                f"infill scoring: input of {len(ids)} tokens exceeds max_length={max_length}: {text[:80]!r}"
            )
    return enc, prefixes


def decoder_prefix(model, tokenizer, prefix_ids: list[int]) -> list[int]:
    """BART's decoder starts with </s> then <s> (decoder_start_token_id, then the BOS of the labels)."""
    start = model.config.decoder_start_token_id
    bos = tokenizer.bos_token_id
    head = [start] + ([bos] if bos is not None else [])
    return head + list(prefix_ids)


def infill_logprobs(
    model,
    tokenizer,
    requests: Sequence[InfillRequest],
    batch_size: int = 64,
    max_length: int = 512,
    stats: EngineStats | None = None,
    max_tokens: int | None = None,
) -> list[np.ndarray]:
    """log p(candidate) as the next decoder token of an encoder-decoder LM (BART text infilling)."""
    max_length = input_limit(model, tokenizer, max_length)
    stats = stats if stats is not None else EngineStats()
    device = model_device(model)
    enc, prefixes = _seq2seq_pairs(tokenizer, requests, max_length)
    keys: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    for e, p in zip(enc, prefixes):
        keys.setdefault((tuple(e), tuple(decoder_prefix(model, tokenizer, p))), len(keys))
    unique = list(keys)
    lengths = [(len(e), len(d)) for e, d in unique]
    order = sorted(range(len(unique)), key=lambda i: (sum(lengths[i]), i))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results: dict[int, torch.Tensor] = {}

    def run(batch):
        enc_ids, enc_attn = pad([list(unique[i][0]) for i in batch], pad_id, device)
        dec_ids, dec_attn = pad([list(unique[i][1]) for i in batch], pad_id, device)
        logits = model(
            input_ids=enc_ids, attention_mask=enc_attn, decoder_input_ids=dec_ids, decoder_attention_mask=dec_attn
        ).logits
        last = dec_attn.sum(1) - 1
        picked = logits[torch.arange(len(batch), device=device), last].double()
        lp = torch.log_softmax(picked, -1).cpu()
        for row, uid in enumerate(batch):
            results[uid] = lp[row]
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    with torch.inference_mode(), autocast(device):
        run_batches(order, lengths, batch_size, run, max_tokens, stats, "infill scoring")
    stats.requests += len(requests)
    stats.unique_inputs += len(unique)
    out = []
    for req, e, p in zip(requests, enc, prefixes):
        uid = keys[(tuple(e), tuple(decoder_prefix(model, tokenizer, p)))]
        out.append(results[uid][list(req.candidates)].numpy().astype(np.float64))
    return out


# --------------------------------------------------------------------------------------------------
# Token-id requests: exact control over which word-pieces are masked.
#
# Text-level requests (MaskedRequest, InfillRequest) cannot express "mask the 2nd and 3rd piece of this
# word but keep the 1st" (StereoSet), nor "mask this one token" (pseudo-log-likelihood, CrowS-Pairs):
# a byte-level BPE does not re-tokenise a word prefix into the word's own first pieces. These requests
# carry already-tokenised ids (special tokens included) and go through the same machinery: identical
# inputs deduplicated, length-sorted batches, LM head only at the positions asked for.


@dataclass(frozen=True)
class MaskedIdsRequest:
    """Score `candidates` at `position` of `input_ids` (a full encoder input, special tokens included)."""

    input_ids: tuple[int, ...]
    position: int
    candidates: tuple[int, ...]


def _positions_to_read(batch, needed) -> tuple[list[int], list[int], list[tuple[int, int]], list[list[int]]]:
    """For the inputs of one batch (ids into `needed`: {input id: {position: candidate ids}}), the batch row and
    position of every distribution to read, its (input id, position) key and its sorted candidates."""
    rows, cols, keys, cands = [], [], [], []
    for row, uid in enumerate(batch):
        for pos, wanted in sorted(needed[uid].items()):
            rows.append(row)
            cols.append(pos)
            keys.append((uid, pos))
            cands.append(sorted(wanted))
    return rows, cols, keys, cands


def masked_logprobs_ids(
    model,
    tokenizer,
    requests: Sequence[MaskedIdsRequest],
    batch_size: int = 64,
    max_length: int = 512,
    max_tokens: int | None = None,
    stats: EngineStats | None = None,
) -> list[np.ndarray]:
    """log p(candidate) at `position` of each request's ids, for masked LMs. One array per request."""
    max_length = input_limit(model, tokenizer, max_length)
    stats = stats if stats is not None else EngineStats()
    device = model_device(model)
    unique: dict[tuple[int, ...], int] = {}
    for req in requests:
        if not 0 <= req.position < len(req.input_ids):
            raise DataError(f"masked scoring: position {req.position} outside an input of {len(req.input_ids)} tokens")
        unique.setdefault(tuple(req.input_ids), len(unique))
    seqs = [list(s) for s in unique]
    for seq in seqs:
        if len(seq) > max_length:
            raise DataError(f"masked scoring: input of {len(seq)} tokens exceeds max_length={max_length}")
    # (input, position) -> candidate ids asked there; only those values are kept (a PLL run asks for
    # tens of thousands of positions: whole vocabulary rows would not fit in memory).
    needed: dict[int, dict[int, set[int]]] = {}
    for req in requests:
        needed.setdefault(unique[tuple(req.input_ids)], {}).setdefault(req.position, set()).update(req.candidates)
    head = mlm_head(model)
    lengths = [len(s) for s in seqs]
    order = sorted(range(len(seqs)), key=lambda i: (lengths[i], i))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results: dict[tuple[int, int], dict[int, float]] = {}

    def run(batch):
        ids, attn = pad([seqs[i] for i in batch], pad_id, device)
        rows, cols, keys, cands = _positions_to_read(batch, needed)
        logits = masked_logits_at(model, head, ids, attn, rows, cols)
        logprobs = torch.log_softmax(logits.double(), dim=-1)
        _keep_candidates(results, logprobs, keys, cands)
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    with torch.inference_mode(), autocast(device):
        run_batches(order, lengths, batch_size, run, max_tokens, stats, "masked scoring")
    stats.requests += len(requests)
    stats.unique_inputs += len(seqs)
    out = []
    for req in requests:
        values = results[(unique[tuple(req.input_ids)], req.position)]
        out.append(np.array([values[c] for c in req.candidates], dtype=np.float64))
    return out


def _keep_candidates(results: dict, logprobs: torch.Tensor, keys: list, cands: list[list[int]]) -> None:
    """Store logprobs[k, c] for the candidates c of each row k (one gather, one device-to-host copy)."""
    if not keys:
        return
    width = max(len(c) for c in cands)
    index = torch.tensor([c + [c[0]] * (width - len(c)) for c in cands], dtype=torch.long, device=logprobs.device)
    picked = logprobs.gather(1, index).cpu().tolist()
    for key, wanted, values in zip(keys, cands, picked):
        results[key] = dict(zip(wanted, values))


@dataclass(frozen=True)
class InfillIdsRequest:
    """Seq2seq: score `candidates` as the decoder's next token after `decoder_ids` (the complete decoder
    input, start tokens included) while the encoder reads `encoder_ids` (special tokens included)."""

    encoder_ids: tuple[int, ...]
    decoder_ids: tuple[int, ...]
    candidates: tuple[int, ...]


def _seq2seq_logits_at(model, enc_ids, enc_attn, dec_ids, dec_attn, rows, cols) -> torch.Tensor:
    """Decoder logits at (rows, cols) only. BART-like models: the LM head (plus final_logits_bias) is
    applied to those hidden states alone; other architectures run the full forward pass."""
    kwargs = dict(
        input_ids=enc_ids, attention_mask=enc_attn, decoder_input_ids=dec_ids, decoder_attention_mask=dec_attn
    )
    if getattr(model.config, "model_type", None) in ("bart", "mbart") and hasattr(model, "lm_head"):
        hidden = model.model(**kwargs).last_hidden_state[rows, cols]
        logits = model.lm_head(hidden)
        if hasattr(model, "final_logits_bias"):
            logits = logits + model.final_logits_bias[0].to(logits.dtype)
        return logits
    return model(**kwargs).logits[rows, cols]


def infill_logprobs_ids(
    model,
    tokenizer,
    requests: Sequence[InfillIdsRequest],
    batch_size: int = 64,
    max_length: int = 512,
    stats: EngineStats | None = None,
    max_tokens: int | None = None,
) -> list[np.ndarray]:
    """log p(candidate) as the next decoder token of an encoder-decoder LM, for token-id requests.

    Besides deduplicating identical (encoder, decoder) pairs, a decoder input that is a prefix of a longer
    one with the same encoder input is read off the longer one's run (the decoder is causal: logits at
    position t depend only on decoder tokens <= t), so scoring every piece of a word, or every token of
    a sentence, costs one decoder pass per encoder input.
    """
    max_length = input_limit(model, tokenizer, max_length)
    stats = stats if stats is not None else EngineStats()
    device = model_device(model)
    by_encoder: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
    for req in requests:
        if not req.decoder_ids:
            raise DataError("infill scoring: empty decoder input (it must hold at least the start token)")
        if len(req.encoder_ids) > max_length or len(req.decoder_ids) > max_length:
            raise DataError(f"infill scoring: input exceeds max_length={max_length}")
        by_encoder.setdefault(tuple(req.encoder_ids), set()).add(tuple(req.decoder_ids))
    # Each decoder input is served by the longest decoder input of its encoder group that extends it.
    runs: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    served_by: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    for enc, decs in by_encoder.items():
        chosen: list[tuple[int, ...]] = []
        for dec in sorted(decs, key=lambda d: (-len(d), d)):
            host = next((i for i, c in enumerate(chosen) if c[: len(dec)] == dec), None)
            if host is None:
                chosen.append(dec)
                runs.append((enc, dec))
                served_by[(enc, dec)] = len(runs) - 1
            else:
                served_by[(enc, dec)] = served_by[(enc, chosen[host])]
    needed: dict[int, dict[int, set[int]]] = {}
    for req in requests:
        run = served_by[(tuple(req.encoder_ids), tuple(req.decoder_ids))]
        needed.setdefault(run, {}).setdefault(len(req.decoder_ids) - 1, set()).update(req.candidates)
    lengths = [(len(e), len(d)) for e, d in runs]
    order = sorted(range(len(runs)), key=lambda i: (sum(lengths[i]), i))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results: dict[tuple[int, int], dict[int, float]] = {}

    def run(batch):
        enc_ids, enc_attn = pad([list(runs[i][0]) for i in batch], pad_id, device)
        dec_ids, dec_attn = pad([list(runs[i][1]) for i in batch], pad_id, device)
        rows, cols, keys, cands = _positions_to_read(batch, needed)
        logits = _seq2seq_logits_at(model, enc_ids, enc_attn, dec_ids, dec_attn, rows, cols)
        _keep_candidates(results, torch.log_softmax(logits.double(), -1), keys, cands)
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    with torch.inference_mode(), autocast(device):
        run_batches(order, lengths, batch_size, run, max_tokens, stats, "infill scoring")
    stats.requests += len(requests)
    stats.unique_inputs += len(runs)
    out_list = []
    for req in requests:
        key = (tuple(req.encoder_ids), tuple(req.decoder_ids))
        values = results[(served_by[key], len(req.decoder_ids) - 1)]
        out_list.append(np.array([values[c] for c in req.candidates], dtype=np.float64))
    return out_list
