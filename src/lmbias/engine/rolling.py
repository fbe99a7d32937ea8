"""Rolling log-likelihood: every token of a text scored once, the text read in windows the model can hold.

lm-evaluation-harness calls this request `loglikelihood_rolling` (its perplexity tasks); here it serves
`lmbias.benchmarks.perplexity`, and the family decides how a window is read:

* clm: every token but a text's first is scored, log p(token | the tokens before it), no BOS added. The targets
  are cut into consecutive chunks of `stride` tokens (default max_length - 1), each read with the max_length
  tokens ending at the chunk's end as context (the Hugging Face sliding-window recipe): every token is scored
  exactly once, and a smaller stride gives each chunk more context. The window is read alone: a Self-Debias
  wrapper puts its prefix before it (`rolling_view`, lmbias.engine.scoring.sentence_alone).
* mlm / seq2seq: Salazar et al.'s (2020) pseudo-log-likelihood, each token of the text hidden in turn
  (lmbias.engine.pll); a text longer than max_length is cut into consecutive chunks of max_length minus the
  special tokens, each framed by the model's own special tokens. The chunks do not overlap: stride does not
  apply.

Each window's result is the negative log-likelihood of the tokens it scores and their count; a caller turns them
into exp(sum NLL / tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lmbias.engine import pll
from lmbias.engine.batching import EngineStats, autocast, model_device, pad, run_batches
from lmbias.engine.scoring import sentence_alone
from lmbias.errors import ConfigError, DataError
from lmbias.lazy import lazy_module

torch = lazy_module("torch")


@dataclass(frozen=True)
class RollingWindow:
    """One window of one text: which text (its index in the request) and which window of it (chunks that hold no
    token to score are skipped, their numbers too), - sum log p over the tokens it scores, and their count."""

    text: int
    window: int
    nll_sum: float
    n_tokens: int


def rolling_view(model, family: str):
    """The model as a rolling request reads a text: a causal LM's window alone (a Self-Debias wrapper then puts its
    prefix before it); a masked or encoder-decoder model's chunk framed by its special tokens, as it is."""
    return sentence_alone(model) if family == "clm" else model


def added_positions(model) -> int:
    """Positions a model adds to every input it reads: a Self-Debias wrapper's prefix, else none."""
    added = getattr(model, "added_positions", None)
    return int(added()) if callable(added) else 0


def causal_windows(n_tokens: int, max_length: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, first target, end) of each window over a text of n_tokens: targets 1..n-1 in chunks of
    `stride`, each read with at most max_length tokens of input ending at the chunk's end."""
    windows = []
    first = 1
    while first < n_tokens:
        end = min(first + stride, n_tokens)
        windows.append((max(0, end - max_length), first, end))
        first = end
    return windows


def causal_nll(
    model,
    tokenizer,
    windows: list[tuple[list[int], int]],
    batch_size: int = 8,
    stats: EngineStats | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """- sum log p(ids[t] | ids[:t]) for t >= first, for each (ids, first) window (length-sorted batches within
    the token budget, lmbias.engine.batching.run_batches)."""
    stats = stats if stats is not None else EngineStats()
    device = model_device(model)
    lengths = [len(ids) for ids, _ in windows]
    order = sorted(range(len(windows)), key=lambda i: (lengths[i], i))
    out = np.zeros(len(windows), dtype=np.float64)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def run(batch):
        ids, attn = pad([windows[i][0] for i in batch], pad_id, device)
        logits = model(input_ids=ids, attention_mask=attn).logits
        totals = []
        for row, i in enumerate(batch):
            first, n = windows[i][1], lengths[i]
            # float64 log-softmax over the predicting rows only, in slices (a 1024 x 50k float64
            # block per row would be 400 MB)
            total = 0.0
            for lo in range(first, n, 256):
                hi = min(lo + 256, n)
                lp = torch.log_softmax(logits[row, lo - 1 : hi - 1].double(), dim=-1)
                total += float(lp.gather(-1, ids[row, lo:hi].unsqueeze(-1)).sum().cpu())
            totals.append(-total)
        out[batch] = totals  # stored once the whole batch went through
        stats.forward_passes += 1
        stats.sequences_run += len(batch)

    with torch.inference_mode(), autocast(device):
        run_batches(order, lengths, batch_size, run, max_tokens, stats, "perplexity")
    stats.requests += len(windows)
    stats.unique_inputs += len(windows)
    return out


def masked_chunks(tokenizer, text: str, max_length: int, key: str = "max_length") -> list[tuple[list[int], list[int]]]:
    """(ids with special tokens, positions of the text's own tokens) per chunk that fits max_length.
    Every token of the text is scored, [UNK] included; only the added [CLS]/[SEP] (<s>/</s>) are not.
    A chunk is the text's own special-token frame (what the tokenizer adds around it) around a slice; `key` names
    max_length's option in the error of a window too short for one token."""
    content = list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    framed = list(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])
    start = next((k for k in range(len(framed) - len(content) + 1) if framed[k : k + len(content)] == content), None)
    if start is None:
        raise DataError(
            f"rolling log-likelihood: {type(tokenizer).__name__} does not keep a text's ids together when adding "
            f"special tokens: {text[:80]!r}"
        )
    head, tail = framed[:start], framed[start + len(content) :]
    room = max_length - len(head) - len(tail)
    if room < 1:
        raise ConfigError(f"{key}: {max_length} leaves no room for a token")
    return [
        (head + content[i : i + room] + tail, list(range(len(head), len(head) + len(content[i : i + room]))))
        for i in range(0, len(content), room)
    ]


def rolling_nll(
    model,
    tokenizer,
    family: str,
    texts: Sequence[str],
    max_length: int,
    stride: int | None = None,
    batch_size: int = 64,
    stats: EngineStats | None = None,
    key: str = "max_length",
) -> list[RollingWindow]:
    """Every window of every text in text order (module docstring); `model` is the rolling view (rolling_view).
    `stride` (causal: new tokens scored per window, default max_length - 1) must leave a window's first token as
    context: at most max_length - 1."""
    if family == "clm":
        stride = stride or max_length - 1
        if stride > max_length - 1:
            raise ValueError(f"rolling log-likelihood: stride {stride} is more than max_length - 1 = {max_length - 1}")
        windows, plan = [], []
        for t, text in enumerate(texts):
            ids = list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
            for w, (begin, first, end) in enumerate(causal_windows(len(ids), max_length, stride)):
                windows.append((ids[begin:end], first - begin))
                plan.append((t, w))
        nll = causal_nll(model, tokenizer, windows, batch_size=batch_size, stats=stats)
        counts = [len(ids) - first for ids, first in windows]
    else:
        seqs, positions, plan = [], [], []
        for t, text in enumerate(texts):
            for w, (ids, where) in enumerate(masked_chunks(tokenizer, text, max_length, key)):
                if where:
                    seqs.append(ids)
                    positions.append(where)
                    plan.append((t, w))
        values = pll.token_logprobs(
            model, tokenizer, family, seqs, positions, batch_size=batch_size, max_length=max_length, stats=stats
        )
        nll = [-float(v.sum()) for v in values]
        counts = [len(p) for p in positions]
    return [
        RollingWindow(text=t, window=w, nll_sum=float(nll[k]), n_tokens=int(counts[k])) for k, (t, w) in enumerate(plan)
    ]
