"""Shared prefixes read once: causal-LM sentence log-likelihoods of texts that share a token prefix.

The texts of one item often begin alike: StereoSet's three intrasentence candidates share the words before
the blank, a multiple-choice prompt's choices share the whole prompt. ``grouped_sentence_logprobs`` gives the
numbers of ``lmbias.engine.scoring.sentence_logprobs`` (same inputs from ``clm_inputs``, so the same start
token: GPT-2's <|endoftext|>, Llama's BOS; the same ``clm_context``), but a causal model reads each group's
shared prefix once:

* the prefix is the longest common *token* prefix of the group's distinct inputs (token ids are compared, so
  it never cuts where tokenisation differs), kept one token short of the shortest input so every text has a
  continuation to score; a group whose prefix would be shorter than ``MIN_PREFIX_TOKENS`` tokens, or that has
  a single distinct input, goes through the full path;
* the prefixes of several groups (sorted by length) run in one forward pass, right-padded, with
  ``use_cache=True``; their logits score the prefix tokens once per group and each text's first
  continuation token;
* the continuations of those groups then run in passes of their own (sorted by length), each row reading
  its group's keys and values (index-selected into a fresh ``DynamicCache``), right-padded, with an attention
  mask over prefix (its padding masked out) plus continuation and explicit position ids (prefix length on).

Numbers equal the full recomputation to about 1e-7 per token (tests hold them to 1e-5 per sentence). They
are not bit-identical because different kernels sum in a different order: attention of a continuation token
over cached keys is a (continuation x prefix+continuation) product instead of one (sentence x sentence)
product, and the matmuls of the projections and MLP see other shapes (fewer rows), which BLAS blocks
differently; the float32 rounding of those sums differs, the mathematics does not. Padded prefix slots get
the mask's minimum value, whose exp is exactly 0 in float32, so padding changes nothing.

Models that are not plain Hugging Face causal LMs (a Self-Debias wrapper rewrites what the model reads and
its output distribution) go through the full path (``supports_prefix_cache``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from lmbias.engine.batching import EngineStats, autocast, model_device, pad, run_batches
from lmbias.engine.scoring import CLM_CONTEXTS, clm_inputs, sentence_logprobs, start_logprobs
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


def _token_logprob_sums(logits: torch.Tensor, targets: torch.Tensor, counts: list[int]) -> list[float]:
    """Per row r: sum of log_softmax(logits[r, t])[targets[r, t]] over t < counts[r], in float64 one row at a
    time (a whole batch of float64 vocabulary rows would double the logits' memory)."""
    sums = []
    for row, count in enumerate(counts):
        if count == 0:
            sums.append(0.0)
            continue
        logprobs = torch.log_softmax(logits[row, :count].double(), dim=-1)
        sums.append(float(logprobs.gather(-1, targets[row, :count].unsqueeze(-1)).sum().cpu()))
    return sums


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
) -> np.ndarray:
    """``sentence_logprobs(model, tokenizer, texts, ...)`` with the token prefix shared by the texts of one
    group (``groups[i]`` names text i's group, e.g. its item) read once per group; see the module docstring.

    The token budget counts a group of k distinct inputs of at most n tokens as k x n padded tokens (its
    continuation pass holds k rows; the prefix pass is smaller), so a batch stays within ``max_tokens``."""
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
    shared, alone = [], []  # (prefix length, members) of the groups read once; inputs for the full path
    for uids in members.values():
        length = common_prefix_length([seqs[u] for u in uids]) if len(uids) > 1 else 0
        if length >= MIN_PREFIX_TOKENS:
            shared.append((length, uids))
        else:
            alone.extend(u for u in uids if u not in alone)
    totals = np.full(len(seqs), np.nan, dtype=np.float64)
    alone_texts = [text for text, uid in unique.items() if uid in set(alone)]
    if alone_texts:
        values = sentence_logprobs(model, tokenizer, alone_texts, batch_size, max_length, stats, context, max_tokens)
        for text, value in zip(alone_texts, values):
            totals[unique[text]] = value
    device = model_device(model)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    head = np.zeros(len(seqs), dtype=np.float64)  # bias_bench: log p(first token | start token)

    # per group, once its prefix ran: (keys and values per layer, log p of the prefix, log p of each member's
    # first continuation token)
    prefix_runs: dict[int, tuple[list[tuple[torch.Tensor, torch.Tensor]], float, list[float]]] = {}

    def run_prefixes(batch):
        """One pass of the prefixes of groups `batch` (indices into shared)."""
        prefixes = [seqs[shared[g][1][0]][: shared[g][0]] for g in batch]
        prefix_ids, prefix_attn = pad(prefixes, pad_id, device)
        out = model(input_ids=prefix_ids, attention_mask=prefix_attn, use_cache=True)
        prefix_sums = _token_logprob_sums(out.logits, prefix_ids[:, 1:], [len(p) - 1 for p in prefixes])
        runs = {}
        for row, g in enumerate(batch):
            length, uids = shared[g]
            first = torch.log_softmax(out.logits[row, length - 1].double(), dim=-1)
            targets = torch.tensor([seqs[u][length] for u in uids], dtype=torch.long, device=device)
            kv = [(layer.keys[row, :, :length], layer.values[row, :, :length]) for layer in out.past_key_values.layers]
            runs[g] = (kv, prefix_sums[row], first[targets].cpu().tolist())
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
        logits = model(
            input_ids=cont_ids, attention_mask=attn, position_ids=positions, past_key_values=cache, use_cache=True
        ).logits
        sums = _token_logprob_sums(logits, cont_ids[:, 1:], [len(conts[c][2]) - 1 for c in chunk])
        for c, value in zip(chunk, sums):
            g, k, _ = conts[c]
            _, prefix_sum, first = prefix_runs[g]
            uid = shared[g][1][k]
            totals[uid] = head[uid] + prefix_sum + first[k] + value
        stats.forward_passes += 1
        stats.sequences_run += len(chunk)

    if shared:
        # groups sorted by prefix length; a window of them at a time runs its prefixes (batched), then all
        # the window's continuations sorted by their length, so both kinds of pass hold little padding while
        # only one window's keys and values are kept
        by_prefix = sorted(range(len(shared)), key=lambda g: (shared[g][0], g))
        prefix_widths = [length for length, _ in shared]
        with torch.inference_mode(), autocast(device):
            if context == "bias_bench":
                start = start_logprobs(model, tokenizer, device).cpu()
                stats.forward_passes += 1
                stats.sequences_run += 1
                for _, uids in shared:
                    for uid in uids:
                        head[uid] = float(start[seqs[uid][0]])
            for begin in range(0, len(by_prefix), WINDOW_BATCHES * batch_size):
                window = by_prefix[begin : begin + WINDOW_BATCHES * batch_size]
                run_batches(window, prefix_widths, batch_size, run_prefixes, max_tokens, stats, "shared prefixes")
                # (group, member, continuation tokens); the budget counts a row's cached prefix too
                conts = [(g, k, seqs[u][shared[g][0] :]) for g in window for k, u in enumerate(shared[g][1])]
                widths = [shared[g][0] + len(cont) for g, _, cont in conts]
                order = sorted(range(len(conts)), key=lambda c: (len(conts[c][2]), c))
                run_batches(order, widths, batch_size, run_continuations, max_tokens, stats, "continuations")
                prefix_runs.clear()
    stats.requests += len(texts) - len(alone_texts)  # the full path counted its own
    stats.unique_inputs += len(seqs) - len(alone_texts)
    return np.array([totals[unique[t]] for t in texts], dtype=np.float64)
