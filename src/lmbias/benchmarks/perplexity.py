"""Language-modelling ability: perplexity (causal models) and pseudo-perplexity (masked, seq2seq).

Debiasing that breaks the model is not debiasing: bias-bench reports GPT-2's perplexity on WikiText-2's
test split (experiments/perplexity.py). This measure applies to any text table with a `text` column;
a benchmark entry selects it with `measure: perplexity` (config.yaml: perplexity_wikitext2 over
data.wikitext2, and perplexity_gap, the offline stand-in over GAP's test contexts).

* clm: every token but a text's first is scored, log p(token | the tokens before it), no BOS added.
  A text longer than the window (`scoring.max_length`, default the model's usable context: the smaller of
  the tokenizer's model_max_length and the config's positions, lmbias.engine.context_window) is
  scored in windows: the targets are cut into consecutive chunks of `scoring.stride` tokens (default
  max_length - 1), each read with the max_length tokens ending at the chunk's end as context (the
  Hugging Face sliding-window recipe). Every token is scored exactly once; a smaller stride gives each
  chunk more context. bias-bench's defaults are windows of n_positions - 32 = 992 tokens without
  overlap, whose first token is never scored; `max_length: 992` gives the same windows, scored here with
  one token of carried context so that no token is skipped.
* mlm / seq2seq: Salazar et al.'s (2020) pseudo-log-likelihood, each non-special token hidden in turn
  (`lmbias.engine.pll`, as CrowS-Pairs; seq2seq: BART's encoder reads the masked text, the decoder
  scores the token after the true prefix). A text longer than max_length is cut into consecutive chunks
  of max_length minus the special tokens, each wrapped in the model's special tokens.

Self-Debias (`lmbias.engine.self_debias`) scores the same tokens of the same texts through its rescaled
distribution, as its authors compute perplexity (Schick et al.'s perplexity.py and
GPT2Wrapper.compute_loss_self_debiasing; bias-bench's experiments/perplexity.py calls the latter):

* clm: the window alone is the regular input (no BOS, as above) and the prefix followed by the whole window
  is the prefixed one; token t of the window (t >= 1: a window's first token is context only, as theirs) is
  scored with p_debiased from the regular distribution after tokens 0..t-1 and the prefixed one after the
  prefix and tokens 0..t-1. Their windows leave 32 positions for the prefix (n_positions - 32); here a window
  is shortened by the prefix's length only where it would not fit beside it (a configured stride is then
  cut to the window), so every other window is the one the model without Self-Debias reads.
* mlm: bias-bench's perplexity_mlm.py (experiments/, --is_self_debias): each hidden token's distribution is
  the rescaled one of the input with `[CLS]` replaced by `[CLS] prefix` (get_token_logits_self_debiasing);
  a chunk leaves room for the prefix the same way. seq2seq: Self-Debias is not defined.

Cached per window: the NLL sum and the tokens scored; the metric (`lmbias.metrics.perplexity`) turns them
into exp(sum NLL / tokens). `scoring.limit_texts` keeps the first N texts (file order).
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef
from lmbias.engine import pll
from lmbias.engine.batching import EngineStats, autocast, model_device, pad, run_batches
from lmbias.engine.context_window import context_window
from lmbias.engine.lm import LanguageModel
from lmbias.errors import ConfigError, DataError
from lmbias.lazy import lazy_module
from lmbias.metrics.headline import Headline
from lmbias.metrics.perplexity import PerplexityOptions, perplexity_metric_rows
from lmbias.options import check_block

torch = lazy_module("torch")

log = logging.getLogger(__name__)

SCORES_SCHEMA = pa.schema(
    [
        ("text_id", pa.int32()),  # row of the parsed items
        ("window", pa.int32()),  # window (clm) or chunk (mlm, seq2seq) of that text
        ("source", pa.string()),  # wikitext2-<split> | gap-<split> (a stand-in)
        ("score_kind", pa.string()),  # clm=perplexity | mlm=pseudo_perplexity | seq2seq=pseudo_perplexity
        ("nll_sum", pa.float64()),  # - sum of log p over the window's scored tokens
        ("n_tokens", pa.int32()),
    ]
)

SCORING_KEY = "benchmarks.<perplexity>.scoring"
#: parquet metadata key of the window (tokens of input) the texts were scored in
WINDOW_METADATA = "lmbias.perplexity_window"
SCORE_KIND = {"clm": "clm=perplexity", "mlm": "mlm=pseudo_perplexity", "seq2seq": "seq2seq=pseudo_perplexity"}


def check_scoring(scoring: dict | None) -> dict:
    """`scoring` checked against the schema's scoring block of a measured entry ($defs.generic_benchmark.scoring:
    batch_size, max_length, stride, limit_texts); ConfigError naming the key."""
    check_block(scoring, "$defs.generic_benchmark.scoring", SCORING_KEY)
    return dict(scoring or {})


def window_length(model, tokenizer, scoring: dict, reserved: int = 0) -> int:
    """The window: scoring.max_length, at most the model's usable context (the smaller of its tokenizer's and
    its config's limits, lmbias.engine.context_window) less `reserved` positions (a Self-Debias prefix's)."""
    limit = context_window(model, tokenizer).tokens - reserved
    if limit < 4:
        raise ConfigError(
            f"{SCORING_KEY}.max_length: the model's {limit + reserved} positions leave no window beside "
            f"a {reserved}-token prefix"
        )
    wanted = scoring.get("max_length")
    return limit if wanted is None else min(wanted, limit)


def reserved_positions(model) -> int:
    """Positions a model adds to every input it reads: a Self-Debias wrapper's prefix, else none."""
    added = getattr(model, "added_positions", None)
    return int(added()) if callable(added) else 0


def text_sources(items: pa.Table) -> list[str]:
    """Where each text comes from: the parser's `source` column (WikiText-2), or GAP's split."""
    if "source" in items.column_names:
        return [str(s) for s in items.column("source").to_pylist()]
    if "split" in items.column_names and "pronoun" in items.column_names:
        return [f"gap-{s}" for s in items.column("split").to_pylist()]
    raise DataError("perplexity: the items have neither a `source` column (WikiText-2) nor GAP's `split`")


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


def _masked_chunks(tokenizer, text: str, max_length: int) -> list[tuple[list[int], list[int]]]:
    """(ids with special tokens, positions of the text's own tokens) per chunk that fits max_length.
    Every token of the text is scored, [UNK] included; only the added [CLS]/[SEP] (<s>/</s>) are not.
    A chunk is the text's own special-token frame (what the tokenizer adds around it) around a slice."""
    content = list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    framed = list(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"])
    start = next((k for k in range(len(framed) - len(content) + 1) if framed[k : k + len(content)] == content), None)
    if start is None:
        raise DataError(
            f"perplexity: {type(tokenizer).__name__} does not keep a text's ids together when adding "
            f"special tokens: {text[:80]!r}"
        )
    head, tail = framed[:start], framed[start + len(content) :]
    room = max_length - len(head) - len(tail)
    if room < 1:
        raise ConfigError(f"{SCORING_KEY}.max_length: {max_length} leaves no room for a token")
    return [
        (head + content[i : i + room] + tail, list(range(len(head), len(head) + len(content[i : i + room]))))
        for i in range(0, len(content), room)
    ]


def score_perplexity(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """One row per window of every text (texts without a token to score have none)."""
    scoring = check_scoring(scoring or {})
    lm.require(tuple(SCORE_KIND), "perplexity")
    if "text" not in items.column_names:
        raise DataError("perplexity: the items have no `text` column")
    limit = scoring.get("limit_texts")
    if limit is not None:
        items = items.slice(0, limit)
    texts = [str(t) for t in items.column("text").to_pylist()]
    sources = text_sources(items)
    if lm.causal:  # a window is read alone; Self-Debias puts its prefix before it (module docstring)
        lm = lm.reading_alone()
    model, tokenizer = lm.model, lm.tokenizer
    reserved = reserved_positions(model)
    context = lm.context_window()
    max_length = window_length(model, tokenizer, scoring, reserved)
    if reserved and max_length < window_length(model, tokenizer, scoring):
        log.info(
            "perplexity: windows of %d tokens, leaving %d positions for the Self-Debias prefix", max_length, reserved
        )
    batch_size = scoring.get("batch_size", 64)
    plan: list[tuple[int, int]] = []  # (text, window) per scored window
    if lm.causal:
        stride = scoring.get("stride") or max_length - 1
        if stride > max_length - 1 and reserved and stride <= window_length(model, tokenizer, scoring) - 1:
            log.warning(
                "perplexity: stride %d cut to %d, the window beside the Self-Debias prefix", stride, max_length - 1
            )
            stride = max_length - 1
        if stride > max_length - 1:
            raise ConfigError(f"{SCORING_KEY}.stride: {stride} must be at most max_length - 1 = {max_length - 1}")
        windows = []
        for t, text in enumerate(texts):
            ids = list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
            for w, (begin, first, end) in enumerate(causal_windows(len(ids), max_length, stride)):
                windows.append((ids[begin:end], first - begin))
                plan.append((t, w))
        nll = causal_nll(model, tokenizer, windows, batch_size=batch_size, stats=lm.stats)
        counts = [len(ids) - first for ids, first in windows]
    else:
        seqs, positions = [], []
        for t, text in enumerate(texts):
            for w, (ids, where) in enumerate(_masked_chunks(tokenizer, text, max_length)):
                if where:
                    seqs.append(ids)
                    positions.append(where)
                    plan.append((t, w))
        values = lm.pseudo_logprobs(seqs, positions, batch_size=batch_size, max_length=max_length)
        nll = [-float(v.sum()) for v in values]
        counts = [len(p) for p in positions]
    rows = [
        {
            "text_id": t,
            "window": w,
            "source": sources[t],
            "score_kind": SCORE_KIND[lm.family],
            "nll_sum": float(nll[k]),
            "n_tokens": int(counts[k]),
        }
        for k, (t, w) in enumerate(plan)
    ]
    log.info(
        "perplexity: %d texts, %d windows, %d tokens scored (max_length %d; the model's context %d: tokenizer %s, "
        "config %s %s)",
        len(texts),
        len(rows),
        sum(counts),
        max_length,
        context.tokens,
        context.tokenizer_limit,
        context.config_key,
        context.config_limit,
    )
    # the context the windows were cut to, in the score file's metadata beside the window itself
    metadata = {**context.metadata(), WINDOW_METADATA: str(max_length)}
    return pa.Table.from_pylist(rows, schema=SCORES_SCHEMA.with_metadata(metadata))


BENCHMARKS = [
    BenchmarkDef(
        name="perplexity",
        families=("mlm", "clm", "seq2seq"),
        score=score_perplexity,
        parse_options=PerplexityOptions.from_config,
        rows=perplexity_metric_rows,
        library=(pll,),  # masked and seq2seq windows are read through it (lmbias.engine.lm)
        description="language-modelling ability: perplexity (causal) / pseudo-perplexity (Salazar et al. 2020)",
        headlines=(
            # not a bias: language-modelling ability (lower = better; a stand-in's variant says so)
            Headline("perplexity", "all", "perplexity (pseudo- for masked / seq2seq; lower is better)", "n/a"),
        ),
    )
]
