"""Language-modelling ability: perplexity (causal models) and pseudo-perplexity (masked, seq2seq).

Debiasing that breaks the model is not debiasing: bias-bench reports GPT-2's perplexity on WikiText-2's
test split (experiments/perplexity.py). This measure applies to any text table with a `text` column;
a benchmark entry selects it with `measure: perplexity` (config.yaml: perplexity_wikitext2 over
data.wikitext2, and perplexity_gap, the offline stand-in over GAP's test contexts).

The windows are one request of the model, `lm.rolling_nll` (lmbias.engine.rolling: lm-eval's
loglikelihood_rolling), which reads them as the family does; this module resolves the options and writes a row per
window.

* clm: every token but a text's first is scored, log p(token | the tokens before it), no BOS added.
  A text longer than the window (`scoring.max_length`, default the model's usable context: the smaller of
  the tokenizer's model_max_length and the config's positions, lmbias.engine.context_window) is
  scored in windows of `scoring.stride` new tokens (default max_length - 1), each read with the max_length tokens
  ending at its end. bias-bench's defaults are windows of n_positions - 32 = 992 tokens without
  overlap, whose first token is never scored; `max_length: 992` gives the same windows, scored here with
  one token of carried context so that no token is skipped.
* mlm / seq2seq: Salazar et al.'s (2020) pseudo-log-likelihood, each non-special token hidden in turn, a text
  longer than max_length cut into consecutive chunks, each wrapped in the model's special tokens (stride does
  not apply; one longer than the window is refused all the same).

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

import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef
from lmbias.engine import pll, rolling
from lmbias.engine.context_window import context_window
from lmbias.engine.lm import LanguageModel
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.headline import Headline
from lmbias.metrics.perplexity import PerplexityOptions, perplexity_metric_rows
from lmbias.options import check_block

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


def text_sources(items: pa.Table) -> list[str]:
    """Where each text comes from: the parser's `source` column (WikiText-2), or GAP's split."""
    if "source" in items.column_names:
        return [str(s) for s in items.column("source").to_pylist()]
    if "split" in items.column_names and "pronoun" in items.column_names:
        return [f"gap-{s}" for s in items.column("split").to_pylist()]
    raise DataError("perplexity: the items have neither a `source` column (WikiText-2) nor GAP's `split`")


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
    lm = lm.rolling_view()  # how the windows are read (a causal LM's alone: Self-Debias puts its prefix before it)
    model, tokenizer = lm.model, lm.tokenizer
    reserved = lm.added_positions()
    context = lm.context_window()
    max_length = window_length(model, tokenizer, scoring, reserved)
    if reserved and max_length < window_length(model, tokenizer, scoring):
        log.info(
            "perplexity: windows of %d tokens, leaving %d positions for the Self-Debias prefix", max_length, reserved
        )
    stride = scoring.get("stride") or max_length - 1  # causal models' (masked chunks do not overlap)
    if stride > max_length - 1 and reserved and stride <= window_length(model, tokenizer, scoring) - 1:
        log.warning("perplexity: stride %d cut to %d, the window beside the Self-Debias prefix", stride, max_length - 1)
        stride = max_length - 1
    if stride > max_length - 1:
        raise ConfigError(f"{SCORING_KEY}.stride: {stride} must be at most max_length - 1 = {max_length - 1}")
    windows = lm.rolling_nll(
        texts, max_length, stride, batch_size=scoring.get("batch_size", 64), key=f"{SCORING_KEY}.max_length"
    )
    counts = [w.n_tokens for w in windows]
    rows = [
        {
            "text_id": w.text,
            "window": w.window,
            "source": sources[w.text],
            "score_kind": SCORE_KIND[lm.family],
            "nll_sum": w.nll_sum,
            "n_tokens": w.n_tokens,
        }
        for w in windows
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
        library=(rolling, pll),  # the windows are read through them (lmbias.engine.lm.rolling_nll)
        description="language-modelling ability: perplexity (causal) / pseudo-perplexity (Salazar et al. 2020)",
        headlines=(
            # not a bias: language-modelling ability (lower = better; a stand-in's variant says so)
            Headline("perplexity", "all", "perplexity (pseudo- for masked / seq2seq; lower is better)", "n/a"),
        ),
    )
]
