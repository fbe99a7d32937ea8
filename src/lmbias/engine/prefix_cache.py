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


def _continuation_cache(model, cache, rows: torch.Tensor, width: int):
    """A fresh DynamicCache holding, for each continuation row, its group's prefix keys and values (the first
    `width` cached positions)."""
    from transformers import DynamicCache

    layers = [
        (layer.keys.index_select(0, rows)[:, :, :width], layer.values.index_select(0, rows)[:, :, :width])
        for layer in cache.layers
    ]
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

    def run(batch):
        prefixes = [seqs[shared[g][1][0]][: shared[g][0]] for g in batch]
        prefix_ids, prefix_attn = pad(prefixes, pad_id, device)
        out = model(input_ids=prefix_ids, attention_mask=prefix_attn, use_cache=True)
        prefix_lengths = [len(p) for p in prefixes]
        prefix_sums = _token_logprob_sums(out.logits, prefix_ids[:, 1:], [n - 1 for n in prefix_lengths])
        owners, conts, first_targets = [], [], []  # per continuation: its prefix row, tokens, first target
        for row, g in enumerate(batch):
            length, uids = shared[g]
            for uid in uids:
                owners.append(row)
                conts.append(seqs[uid][length:])
                first_targets.append(seqs[uid][length])
        owner_index = torch.tensor(owners, dtype=torch.long, device=device)
        last = torch.tensor([prefix_lengths[r] - 1 for r in owners], dtype=torch.long, device=device)
        first_logprobs = torch.log_softmax(out.logits[owner_index, last].double(), dim=-1)
        first_targets_t = torch.tensor(first_targets, dtype=torch.long, device=device)
        first = first_logprobs.gather(-1, first_targets_t.unsqueeze(-1)).squeeze(-1).cpu().tolist()
        cont_sums: dict[int, float] = {}

        def run_continuations(chunk):
            """One pass of continuations `chunk` (indices into conts), each reading its group's prefix."""
            rows = torch.tensor([owners[c] for c in chunk], dtype=torch.long, device=device)
            width = max(prefix_lengths[owners[c]] for c in chunk)  # cached columns past it are padding
            cont_ids, cont_attn = pad([conts[c] for c in chunk], pad_id, device)
            attn = torch.cat([prefix_attn.index_select(0, rows)[:, :width], cont_attn], dim=1)
            positions = last[chunk].unsqueeze(1) + 1 + torch.arange(cont_ids.shape[1], device=device).unsqueeze(0)
            cache = _continuation_cache(model, out.past_key_values, rows, width)
            logits = model(
                input_ids=cont_ids, attention_mask=attn, position_ids=positions, past_key_values=cache, use_cache=True
            ).logits
            sums = _token_logprob_sums(logits, cont_ids[:, 1:], [len(conts[c]) - 1 for c in chunk])
            cont_sums.update(zip(chunk, sums))
            stats.forward_passes += 1
            stats.sequences_run += len(chunk)

        # continuations sorted by length, so their passes hold little padding; the budget counts a row's
        # prefix too (its cached keys and values are attended to)
        widths = [prefix_lengths[owners[c]] + len(conts[c]) for c in range(len(conts))]
        order = sorted(range(len(conts)), key=lambda c: (len(conts[c]), c))
        run_batches(order, widths, batch_size, run_continuations, max_tokens, stats, "continuations")
        values = {}
        for c, (row, uid) in enumerate((row, uid) for row, g in enumerate(batch) for uid in shared[g][1]):
            values[uid] = head[uid] + prefix_sums[row] + first[c] + cont_sums[c]
        for uid, value in values.items():  # stored once the whole batch went through
            totals[uid] = value
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    if shared:
        # the prefix passes: groups sorted by prefix length
        prefix_widths = [length for length, _ in shared]
        order = sorted(range(len(shared)), key=lambda g: (prefix_widths[g], g))
        with torch.inference_mode(), autocast(device):
            if context == "bias_bench":
                start = start_logprobs(model, tokenizer, device).cpu()
                stats.forward_passes += 1
                stats.sequences_run += 1
                for _, uids in shared:
                    for uid in uids:
                        head[uid] = float(start[seqs[uid][0]])
            run_batches(order, prefix_widths, batch_size, run, max_tokens, stats, "shared prefixes")
    stats.requests += len(texts) - len(alone_texts)  # the full path counted its own
    stats.unique_inputs += len(seqs) - len(alone_texts)
    return np.array([totals[unique[t]] for t in texts], dtype=np.float64)
