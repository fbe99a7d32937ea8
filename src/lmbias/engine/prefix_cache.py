"""Shared prefixes read once: causal-LM sentence log-likelihoods of texts that share a token prefix.

The texts of one item often begin alike: StereoSet's three intrasentence candidates share the words before
the blank, a multiple-choice prompt's choices share the whole prompt. ``grouped_sentence_logprobs`` gives the
numbers of ``lmbias.engine.scoring.sentence_logprobs`` (same inputs from ``clm_inputs``, so the same start
token: GPT-2's <|endoftext|>, Llama's BOS; the same ``clm_context``), but a causal model reads each group's
shared prefix once:

* the prefix is the longest common *token* prefix of the group's distinct inputs (token ids are compared, so
  it never cuts where tokenisation differs), kept one token short of the shortest input so every text has a
  continuation to score; a group whose prefix would be shorter than ``MIN_PREFIX_TOKENS`` tokens, or that has
  a single distinct input, is read in full (one pass per batch, no cache);
* the prefixes of several groups (sorted by length) run in one forward pass, right-padded, with
  ``use_cache=True``; their logits score the prefix tokens once per group and each text's first
  continuation token;
* the continuations of those groups then run in passes of their own (sorted by length), each row reading
  its group's keys and values (index-selected into a fresh ``DynamicCache``), right-padded, with an attention
  mask over prefix (its padding masked out) plus continuation and explicit position ids (prefix length on);
  a continuation of one token was scored whole by its prefix's pass and runs no pass;
* every pass applies the LM head (the vocabulary projection: 128,256 x 2,048 on Llama 3.2 1B, as much work
  per token as four of its layers) only at the positions whose next token is scored (transformers'
  ``logits_to_keep`` with a boolean mask), not at padding or at a row's last token, and takes the float64
  log-normalisers of those rows only, a few at a time (``lmbias.engine.scored_logits``);
* sorted inputs are cut where a long tail would pad a batch by more than ``PADDING_SLACK`` of its tokens
  (``lmbias.engine.batching.low_padding_runs``).

Numbers equal the full recomputation to about 1e-7 per token (tests hold them to 1e-5 per sentence). They
are not bit-identical because different kernels sum in a different order: attention of a continuation token
over cached keys is a (continuation x prefix+continuation) product instead of one (sentence x sentence)
product; the matmuls of the projections, the MLP and the LM head see other shapes (fewer rows: the LM head
a (scored positions x hidden) matrix instead of (rows x width x hidden)), which BLAS blocks differently; the
float64 normaliser is a logsumexp where the full path takes a log_softmax (same sum, other order, 1e-16).
The float32 rounding of those sums differs, the mathematics does not. Padded prefix slots get the mask's
minimum value, whose exp is exactly 0 in float32, so padding changes nothing.

Models that are not plain Hugging Face causal LMs (a Self-Debias wrapper rewrites what the model reads and
its output distribution) go through the full path (``supports_prefix_cache``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from lmbias import progress
from lmbias.engine.batching import EngineStats, autocast, low_padding_runs, model_device, pad, run_batches
from lmbias.engine.scored_logits import forward_scored, picked_logprobs
from lmbias.engine.scoring import (
    CLM_CONTEXTS,
    clm_inputs,
    input_limit,
    sentence_logprobs,
    start_logprobs,
    whole_input_logprobs,
)
from lmbias.errors import ConfigError
from lmbias.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use

#: A group's shared prefix must hold at least this many tokens to be read once; shorter ones (a bare start
#: token) save nothing and go through the full path.
MIN_PREFIX_TOKENS = 2

#: Groups whose prefixes run before their continuations do, in prefix batches: the continuations of that many
#: groups sort into passes of similar lengths; only their cached keys and values are held at a time.
WINDOW_BATCHES = 8


def supports_prefix_cache(model) -> bool:
    """Whether `model` can continue from cached keys and values: a Hugging Face decoder-only LM, not a wrapper
    that changes what the model reads or its output distribution (Self-Debias)."""
    if getattr(model, "rescales_output", False) or callable(getattr(model, "prepending_prefix", None)):
        return False
    config = getattr(model, "config", None)
    return config is not None and not getattr(config, "is_encoder_decoder", False)


def common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common token prefix of `seqs`, at most one token short of the shortest one (every
    sequence keeps at least one token to continue with)."""
    shortest = min(len(s) for s in seqs)
    length = 0
    while length < shortest - 1 and all(s[length] == seqs[0][length] for s in seqs):
        length += 1
    return length


def _continuation_cache(model, prefix_kv: list[list[tuple[torch.Tensor, torch.Tensor]]]):
    """A fresh DynamicCache of the rows' prefix keys and values (`prefix_kv[row][layer]`: (heads, length,
    dim) each), right-padded to the longest prefix (the attention mask hides the padding)."""
    from torch.nn.utils.rnn import pad_sequence
    from transformers import DynamicCache

    def stacked(layer: int, which: int) -> torch.Tensor:  # (rows, heads, width, dim)
        return pad_sequence([kv[layer][which].transpose(0, 1) for kv in prefix_kv], batch_first=True).transpose(1, 2)

    layers = [(stacked(layer, 0), stacked(layer, 1)) for layer in range(len(prefix_kv[0]))]
    return DynamicCache(ddp_cache_data=layers, config=model.config)


def grouped_sentence_logprobs(
    model,
    tokenizer,
    texts: Sequence[str],
    groups: Sequence[Hashable],
    batch_size: int = 64,
    max_length: int = 512,
    stats: EngineStats | None = None,
    context: str = "bos",
    max_tokens: int | None = None,
    score_prefix: bool = True,
) -> np.ndarray:
    """``sentence_logprobs(model, tokenizer, texts, ...)`` with the token prefix shared by the texts of one
    group (``groups[i]`` names text i's group, e.g. its item) read once per group; see the module docstring.

    ``score_prefix=False``: a text of a group read once gets the log-probability of its tokens *after* the
    group's shared prefix only (the start-token term too is left out), and the prefix pass applies the LM head
    at its last position alone. For a caller that only compares texts of one group (a multiple-choice item:
    log p(prompt + choice) - log p(prompt)) the prefix's terms cancel, and reading them costs one vocabulary
    projection per prompt token. Texts read in full (no shared prefix) keep their whole log-likelihood, so
    differences within a group are the same either way.

    The token budget counts a group of k distinct inputs of at most n tokens as k x n padded tokens (its
    continuation pass holds k rows; the prefix pass is smaller), so a batch stays within ``max_tokens``."""
    max_length = input_limit(model, tokenizer, max_length)
    if context not in CLM_CONTEXTS:
        raise ConfigError(f"sentence scoring: context {context!r} is not one of {', '.join(CLM_CONTEXTS)}")
    if len(groups) != len(texts):
        raise ValueError(f"grouped sentence scoring: {len(texts)} texts but {len(groups)} group keys")
    stats = stats if stats is not None else EngineStats()
    if not supports_prefix_cache(model):
        return sentence_logprobs(model, tokenizer, texts, batch_size, max_length, stats, context, max_tokens)
    unique: dict[str, int] = {}
    for text in texts:
        unique.setdefault(text, len(unique))
    seqs = clm_inputs(tokenizer, list(unique), max_length, context)
    members: dict[Hashable, list[int]] = {}  # group -> its distinct inputs (ids into seqs)
    for text, group in zip(texts, groups):
        uid = unique[text]
        if uid not in members.setdefault(group, []):
            members[group].append(uid)
    shared, alone = [], set()  # (prefix length, members) of the groups read once; inputs read in full
    for uids in members.values():
        length = common_prefix_length([seqs[u] for u in uids]) if len(uids) > 1 else 0
        if length >= MIN_PREFIX_TOKENS:
            shared.append((length, uids))
        else:
            alone.update(uids)
    head = np.zeros(len(seqs), dtype=np.float64)  # bias_bench: log p(first token | start token)
    totals = np.full(len(seqs), np.nan, dtype=np.float64)
    device = model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def run_alone(batch):
        """One pass of whole inputs `batch` (ids into seqs), no cache: every token after the first scored."""
        sums = whole_input_logprobs(model, [seqs[u] for u in batch], pad_id, device)
        totals[batch] = head[batch] + sums  # stored once the whole batch went through
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    # per group, once its prefix ran: (keys and values per layer, log p of the prefix, log p of each member's
    # first continuation token)
    prefix_runs: dict[int, tuple[list[tuple[torch.Tensor, torch.Tensor]], float, np.ndarray]] = {}

    def run_prefixes(batch):
        """One pass of the prefixes of groups `batch` (indices into shared): every prefix position is scored
        (unless score_prefix is false), the last one for each member's first continuation token."""
        prefixes = [seqs[shared[g][1][0]][: shared[g][0]] for g in batch]
        prefix_ids, prefix_attn = pad(prefixes, pad_id, device)
        if score_prefix:
            keep = prefix_attn.bool()
        else:  # the last position alone: each member's first continuation token
            keep = torch.zeros_like(prefix_attn, dtype=torch.bool)
            keep[torch.arange(len(batch), device=device), prefix_attn.sum(1) - 1] = True
        positions, tokens, offset = [], [], 0
        for prefix, g in zip(prefixes, batch):
            length, uids = shared[g]
            own = length - 1 if score_prefix else 0  # the prefix's own scored tokens; then its last position
            positions += list(range(offset, offset + own)) + [offset + own] * len(uids)
            tokens += prefix[1 : 1 + own] + [seqs[u][length] for u in uids]
            offset += own + 1
        logits, out = forward_scored(model, keep, input_ids=prefix_ids, attention_mask=prefix_attn, use_cache=True)
        values = picked_logprobs(logits, positions, tokens)
        runs, start = {}, 0
        for row, g in enumerate(batch):
            length, uids = shared[g]
            own = length - 1 if score_prefix else 0  # the prefix's own scored tokens
            kv = [(layer.keys[row, :, :length], layer.values[row, :, :length]) for layer in out.past_key_values.layers]
            end = start + own + len(uids)
            runs[g] = (kv, float(values[start : start + own].sum()), values[start + own : end])
            start = end
        prefix_runs.update(runs)  # stored once the whole batch went through
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    def run_continuations(chunk):
        """One pass of continuations `chunk` (indices into conts), each reading its group's cached prefix."""
        owners = [conts[c][0] for c in chunk]
        cont_ids, cont_attn = pad([conts[c][2] for c in chunk], pad_id, device)
        lengths = [shared[g][0] for g in owners]
        prefix_attn = pad([[0] * n for n in lengths], 0, device)[1]  # ones over each row's prefix
        attn = torch.cat([prefix_attn, cont_attn], dim=1)
        offsets = torch.tensor(lengths, dtype=torch.long, device=device)
        positions = offsets.unsqueeze(1) + torch.arange(cont_ids.shape[1], device=device).unsqueeze(0)
        cache = _continuation_cache(model, [prefix_runs[g][0] for g in owners])
        keep = cont_attn.bool()
        # a row's last token predicts nothing scored
        keep[torch.arange(len(chunk), device=device), cont_attn.sum(1) - 1] = False
        logits, _ = forward_scored(
            model,
            keep,
            input_ids=cont_ids,
            attention_mask=attn,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        )
        tokens = [t for c in chunk for t in conts[c][2][1:]]
        values = picked_logprobs(logits, list(range(len(logits))), tokens)
        sums = np.add.reduceat(values, np.cumsum([0] + [len(conts[c][2]) - 1 for c in chunk[:-1]]))
        for c, value in zip(chunk, sums):
            g, k, _ = conts[c]
            _, prefix_sum, first = prefix_runs[g]
            uid = shared[g][1][k]
            totals[uid] = lead[uid] + prefix_sum + first[k] + value
        stats.forward_passes += 1
        stats.sequences_run += len(chunk)

    # every row the batch loops below run (full reads, prefixes, continuations), announced at once (progress)
    rows = sum(len(seqs[u]) > 1 for u in alone) + len(shared)
    rows += sum(len(seqs[u]) - length > 1 for length, uids in shared for u in uids)
    with torch.inference_mode(), autocast(device), progress.planned(rows):
        if context == "bias_bench":
            start = start_logprobs(model, tokenizer, device).cpu()
            stats.forward_passes += 1
            stats.sequences_run += 1
            head[:] = [float(start[seq[0]]) for seq in seqs]
        # the start-token term of a text read through a shared prefix (left out with the prefix's own terms)
        lead = head if score_prefix else np.zeros_like(head)
        for u in alone:
            totals[u] = head[u]  # a one-token input (bias_bench) has nothing more to score
        reads = sorted((u for u in alone if len(seqs[u]) > 1), key=lambda u: (len(seqs[u]), u))
        read_lengths = [len(s) for s in seqs]
        for run in low_padding_runs(reads, read_lengths, batch_size):
            run_batches(run, read_lengths, batch_size, run_alone, max_tokens, stats, "sentence scoring")
        # groups sorted by prefix length; a window of them at a time runs its prefixes (batched), then all
        # the window's continuations sorted by their length, so both kinds of pass hold little padding while
        # only one window's keys and values are kept
        by_prefix = sorted(range(len(shared)), key=lambda g: (shared[g][0], g))
        prefix_widths = [length for length, _ in shared]
        for begin in range(0, len(by_prefix), WINDOW_BATCHES * batch_size):
            window = by_prefix[begin : begin + WINDOW_BATCHES * batch_size]
            for run in low_padding_runs(window, prefix_widths, batch_size):
                run_batches(run, prefix_widths, batch_size, run_prefixes, max_tokens, stats, "shared prefixes")
            # (group, member, continuation tokens); the budget counts a row's cached prefix too. A continuation
            # of one token was scored whole by its prefix's pass.
            conts = []
            for g in window:
                length, uids = shared[g]
                for k, u in enumerate(uids):
                    if len(seqs[u]) - length > 1:
                        conts.append((g, k, seqs[u][length:]))
                    else:
                        totals[u] = lead[u] + prefix_runs[g][1] + prefix_runs[g][2][k]
            widths = [shared[g][0] + len(cont) for g, _, cont in conts]
            order = sorted(range(len(conts)), key=lambda c: (len(conts[c][2]), c))
            for run in low_padding_runs(order, [len(cont) for _, _, cont in conts], batch_size):
                run_batches(run, widths, batch_size, run_continuations, max_tokens, stats, "continuations")
            prefix_runs.clear()
    stats.requests += len(texts)
    stats.unique_inputs += len(seqs)
    return np.array([totals[unique[t]] for t in texts], dtype=np.float64)
