"""logprob-score scoring (Kurita et al. 2019, as in the over-debiasing paper, section 4.2 and appendix A).

The association of a target word t with an attribute a in a sentence is

    asso(t, a) = log p_t(TM) - log p_t(TAM)

where p_t(TM) is the probability of t at the target's mask with only the target masked ("My [MASK] is a
nurse.") and p_t(TAM) the *prior*: the probability of t at the same target mask with the attribute masked
too ("My [MASK] is a [MASK]."), one mask per word of the attribute (option ``attribute_masks: piece`` puts
one per word-piece of the model's tokenizer instead). Both are read at the **target's** mask -- Kurita et
al.'s released code reads the prior at the wrong position; here the target mask's index among the masks is
computed for each sentence (it moves when the attribute comes first: "As a [MASK], my [MASK] deserves...").

Families:

* mlm: the masked-LM distribution at the target's mask. A target word of several pieces gets one mask per
  piece and log p is the sum over its pieces, each read at its own mask (all pieces masked together).
* seq2seq (BART): fill the mask, as the paper's footnote 9: the encoder reads the masked sentence (one mask
  for the target), and log p is the decoder's next-token probability at the target position, the decoder
  prefix being the *masked* sentence up to the target (so the prior never sees an attribute that precedes
  the target); a target of several pieces is scored piece by piece (teacher-forced).
* clm: not defined. The paper does not assess GPT-2 with logprob-score ("GPT2 does not use masked
  tokens"), so the benchmark is declared for mlm and seq2seq only and asking it of a causal model fails at
  DAG-build time. (DA-Gender's causal variant compares sentence probabilities instead.)

`association_logprobs` is shared with the DA-Gender benchmark. Every forward pass goes through
`lmbias.engine.scoring` (TAM contexts are shared by many items and deduplicated there).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef, readings
from lmbias.engine.batching import EngineStats
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import InfillRequest, MaskedRequest, word_token_ids
from lmbias.errors import ConfigError, DataError
from lmbias.metrics import weat
from lmbias.metrics.headline import Headline
from lmbias.metrics.logprob import LogprobOptions, logprob_metric_rows
from lmbias.options import check_block

log = logging.getLogger(__name__)

PLACEHOLDER = "[MASK]"
ATTRIBUTE_MASKS = ("word", "piece")


@dataclass(frozen=True)
class AssociationItem:
    """One masked context: `tm_sent` holds ``[MASK]`` for the target at `target_start` and the attribute
    at [attr_start, attr_end); `words` are the candidate target words as written in the sentence."""

    tm_sent: str
    target_start: int
    attr_start: int
    attr_end: int
    words: tuple[str, ...]


@dataclass(frozen=True)
class ScoringOptions:
    batch_size: int = 64
    max_length: int = 128
    attribute_masks: str = "word"

    @classmethod
    def from_config(cls, scoring: dict | None, key: str) -> ScoringOptions:
        """`key` is the block's schema key (benchmarks.logprob.scoring or benchmarks.da_gender.scoring: the same keys),
        checked against the schema (lmbias.options)."""
        check_block(scoring, key)
        return cls(**dict(scoring or {}))


def _after_space(text: str, start: int) -> bool:
    return start > 0 and text[start - 1] == " "


def _check_item(item: AssociationItem) -> None:
    s = item.tm_sent
    if s[item.target_start : item.target_start + len(PLACEHOLDER)] != PLACEHOLDER:
        raise DataError(f"association item: no {PLACEHOLDER} at offset {item.target_start} of {s!r}")
    if not (0 <= item.attr_start < item.attr_end <= len(s)) or (
        item.attr_start < item.target_start + len(PLACEHOLDER) and item.target_start < item.attr_end
    ):
        raise DataError(f"association item: bad attribute span [{item.attr_start}, {item.attr_end}) in {s!r}")
    if s.count(PLACEHOLDER) != 1:
        raise DataError(f"association item: expected exactly one {PLACEHOLDER} (the target) in {s!r}")


def _attribute_mask_count(tokenizer, item: AssociationItem, mode: str) -> int:
    attr = item.tm_sent[item.attr_start : item.attr_end]
    if mode == "word":
        return len(attr.split())
    ids = word_token_ids(tokenizer, attr, after_space=_after_space(item.tm_sent, item.attr_start))
    if not ids:
        raise DataError(f"attribute {attr!r} has no tokens for this tokenizer")
    return len(ids)


def build_masked(item: AssociationItem, mask: str, target_masks: int, attribute_masks: int | None):
    """The context with the target as `target_masks` masks and, when `attribute_masks` is given, the
    attribute as that many masks. Returns (text, index of the target's first mask among the masks,
    text before the target without trailing spaces)."""
    s = item.tm_sent
    t0, t1 = item.target_start, item.target_start + len(PLACEHOLDER)
    target_text = " ".join([mask] * target_masks)
    attr_text = s[item.attr_start : item.attr_end] if attribute_masks is None else " ".join([mask] * attribute_masks)
    if item.attr_start < t0:
        before_target = s[: item.attr_start] + attr_text + s[item.attr_end : t0]
        text = before_target + target_text + s[t1:]
        first = attribute_masks or 0
    else:
        before_target = s[:t0]
        text = before_target + target_text + s[t1 : item.attr_start] + attr_text + s[item.attr_end :]
        first = 0
    return text, first, before_target.rstrip(" ")


def masked_word_requests(tokenizer, item: AssociationItem, word: str, pieces, attr_masks, prefix_ids) -> list:
    """A masked LM's reading of a target word: each of its pieces at its mask, every piece masked."""
    text, first, _ = build_masked(item, tokenizer.mask_token, len(pieces), attr_masks)
    return [MaskedRequest(text=text, candidates=(piece,), mask_index=first + k) for k, piece in enumerate(pieces)]


def infilled_word_requests(tokenizer, item: AssociationItem, word: str, pieces, attr_masks, prefix_ids) -> list:
    """An encoder-decoder's reading of a target word: one mask in the encoder's text, each piece written by the
    decoder after the text before the target and the pieces before it (which must re-tokenise as themselves;
    `prefix_ids` caches the prefixes' ids)."""
    text, _, prefix = build_masked(item, tokenizer.mask_token, 1, attr_masks)
    requests = []
    for k, piece in enumerate(pieces):
        prefix_k = prefix
        if k:
            if prefix not in prefix_ids:
                prefix_ids[prefix] = tokenizer(prefix, add_special_tokens=False)["input_ids"]
            prefix_k = prefix + tokenizer.decode(pieces[:k])
            got = tokenizer(prefix_k, add_special_tokens=False)["input_ids"]
            if got != list(prefix_ids[prefix]) + list(pieces[:k]):
                raise DataError(
                    f"target word {word!r}: its first {k} piece(s) do not re-tokenise after "
                    f"{prefix!r}; cannot teacher-force it piece by piece"
                )
        requests.append(InfillRequest(masked_text=text, prefix=prefix_k, candidates=(piece,)))
    return requests


def association_logprobs(
    items: Sequence[AssociationItem],
    lm: LanguageModel,
    attribute_masks: str,
    batch_size: int,
    max_length: int,
    word_requests,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """log p_w(TM) and log p_w(TAM) of every candidate word w of every item, both read at the target's mask, as
    `word_requests` (masked_word_requests or infilled_word_requests: the model's reading) asks for a word.

    Returns two lists (TM, TAM) with one array per item (one value per word, in `words` order).
    """
    lm.require(("mlm", "seq2seq"), "TM/TAM association")
    tokenizer, stats = lm.tokenizer, lm.stats
    if attribute_masks not in ATTRIBUTE_MASKS:
        raise ConfigError(f"attribute_masks: {attribute_masks!r} is not one of {', '.join(ATTRIBUTE_MASKS)}")
    if tokenizer.mask_token is None:
        raise DataError("TM/TAM association needs a tokenizer with a mask token")
    before = EngineStats(**vars(stats))

    pieces_cache: dict[tuple[str, bool], list[int]] = {}
    prefix_ids: dict[str, list[int]] = {}

    def pieces_of(word: str, after_space: bool) -> list[int]:
        if (word, after_space) not in pieces_cache:
            pieces_cache[(word, after_space)] = word_token_ids(tokenizer, word, after_space=after_space)
        return pieces_cache[(word, after_space)]

    # (item, word, which) -> list of request indices whose log-probs add up to log p_word
    slots: dict[tuple[int, int, int], list[int]] = {}
    requests: list = []
    for i, item in enumerate(items):
        _check_item(item)
        n_attr = _attribute_mask_count(tokenizer, item, attribute_masks)
        after_space = _after_space(item.tm_sent, item.target_start)
        for j, word in enumerate(item.words):
            pieces = pieces_of(word, after_space)
            if not pieces:
                raise DataError(f"target word {word!r} has no tokens for this tokenizer")
            for which, attr_masks in ((0, None), (1, n_attr)):
                asked = word_requests(tokenizer, item, word, pieces, attr_masks, prefix_ids)
                slots[(i, j, which)] = list(range(len(requests), len(requests) + len(asked)))
                requests += asked
    out = lm.candidate_logprobs(requests, batch_size=batch_size, max_length=max_length)
    tm = [np.zeros(len(item.words)) for item in items]
    tam = [np.zeros(len(item.words)) for item in items]
    for (i, j, which), reqs in slots.items():
        (tm if which == 0 else tam)[i][j] = float(sum(out[r][0] for r in reqs))
    log.info(
        "TM/TAM association (%s, attribute masks per %s): %d items, %d requests -> %d unique inputs, %d forward passes",
        lm.family,
        attribute_masks,
        len(items),
        stats.requests - before.requests,
        stats.unique_inputs - before.unique_inputs,
        stats.forward_passes - before.forward_passes,
    )
    return tm, tam


SCORES_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("template_id", pa.string()),
        ("target", pa.string()),
        ("target_word", pa.string()),
        ("gender", pa.string()),
        ("target_pair", pa.int8()),
        ("attribute", pa.string()),
        ("attribute_group", pa.string()),
        ("target_split", pa.string()),
        ("attribute_split", pa.string()),
        ("split", pa.string()),
        ("logp_tm", pa.float64()),  # log p_t(TM)
        ("logp_tam", pa.float64()),  # log p_t(TAM), the prior, read at the target's mask
        ("attribute_masks", pa.string()),  # word | piece
    ]
)


def _score(items: pa.Table, lm: LanguageModel, scoring: dict | None, word_requests) -> pa.Table:
    """log p_t(TM) and log p_t(TAM) of each row's target (rows of results/data/logprob.parquet)."""
    opts = ScoringOptions.from_config(scoring, "benchmarks.logprob.scoring")
    rows = items.to_pylist()
    assoc = [
        AssociationItem(r["tm_sent"], r["target_start"], r["attr_start"], r["attr_end"], (r["target_word"],))
        for r in rows
    ]
    tm, tam = association_logprobs(assoc, lm, opts.attribute_masks, opts.batch_size, opts.max_length, word_requests)
    keep = [f.name for f in SCORES_SCHEMA if f.name in items.schema.names]
    records = [
        {
            **{k: r[k] for k in keep},
            "logp_tm": float(a[0]),
            "logp_tam": float(b[0]),
            "attribute_masks": opts.attribute_masks,
        }
        for r, a, b in zip(rows, tm, tam)
    ]
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA)


def score_masked_targets(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A masked LM's reading: the target's pieces at their masks."""
    return _score(items, lm, scoring, masked_word_requests)


def score_infilled_targets(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """An encoder-decoder's reading: the target's pieces written by the decoder."""
    return _score(items, lm, scoring, infilled_word_requests)


#: log p_t(TM) and log p_t(TAM) of each row's target, each family by its reading (no causal one: section 4.2).
score_logprob = readings("TM/TAM association", mlm=score_masked_targets, seq2seq=score_infilled_targets)

BENCHMARKS = [
    BenchmarkDef(
        name="logprob",
        families=("mlm", "seq2seq"),
        score=score_logprob,
        parse_options=LogprobOptions.from_config,
        rows=logprob_metric_rows,
        description=(
            "Kurita et al. 2019 logprob-score (over-debiasing paper, appendix A): effect size and permutation p "
            "of log p_t(TM)/p_t(TAM); not defined for causal LMs (the paper, section 4.2: GPT-2 has no mask token)"
        ),
        row_local=True,
        headlines=(Headline("effect_size", "test", "logprob-score effect size (test terms)", "0"),),
        library=(weat,),
    )
]
