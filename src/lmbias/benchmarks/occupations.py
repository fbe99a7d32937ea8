"""Occupation bias for language models (Lu et al. 2018, section 3.1): scoring of the generated items.

For each item (template x occupation, see lmbias.parsers.occupations) the score is log p(occupation | prefix)
under the male and under the female prefix:

* clm (the paper's setting, "He is a | [OCCUPATION]"): the log-likelihood of the occupation's tokens as the
  continuation of the prefix, i.e. LL(prefix + " " + occupation) - LL(prefix), both BOS-conditioned
  (exact: the byte-level tokenizer starts a new token at the space, which is checked per item);
* mlm (masked-occupation variant): "He is an [MASK] [MASK]." with one mask per word-piece of the
  occupation; the score is the sum over pieces of log p(piece) at its mask, all pieces masked at once
  (one forward pass per sentence, shared by all pieces);
* seq2seq (infill): the encoder reads "He is an <mask>." (one mask: BART infills spans), the decoder is fed the
  prefix and scores the occupation piece by piece (chain rule), each piece conditioned on the earlier ones.

Scoring option ``masked_suffix`` (default ".") ends the masked sentences of mlm and seq2seq (the paper's
fragment has no end, but a masked LM reading "He is a [MASK]" at the end of the input predicts punctuation).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef, readings
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import InfillRequest, MaskedRequest
from lmbias.errors import DataError
from lmbias.metrics.headline import Headline
from lmbias.metrics.occupations import OccupationOptions, occupation_metric_rows
from lmbias.options import check_block

SCORES_SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),
        ("template_id", pa.int32()),
        ("occupation", pa.string()),
        ("logp_male", pa.float64()),  # log p(occupation | male prefix)
        ("logp_female", pa.float64()),  # log p(occupation | female prefix)
        ("n_pieces", pa.int32()),  # tokens of the occupation for this tokenizer
        ("score_kind", pa.string()),
    ]
)

SCORE_KIND = {"clm": "next_word_loglik", "mlm": "masked_pieces", "seq2seq": "infill_loglik"}


def _options(scoring: dict | None, key: str = "benchmarks.occupations.scoring") -> dict:
    """The scoring block checked against the schema's occupations.scoring, with its defaults."""
    check_block(scoring, "benchmarks.occupations.scoring", key)
    scoring = scoring or {}
    return {
        "batch_size": scoring.get("batch_size", 64),
        "max_length": scoring.get("max_length", 64),
        "suffix": scoring.get("masked_suffix", "."),
    }


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def continuation_ids(tokenizer, prefix: str, occupation: str, item_id: str) -> list[int]:
    """Tokens of the occupation as they follow `prefix` in "prefix occupation" (a bare-space token of a
    byte-level BPE included). The prefix must tokenize the same alone and in the full text."""
    base, full = _ids(tokenizer, prefix), _ids(tokenizer, f"{prefix} {occupation}")
    if full[: len(base)] != base or len(full) == len(base):
        raise DataError(
            f"occupation item {item_id}: {prefix + ' ' + occupation!r} does not tokenize as the prefix followed "
            "by the occupation, so the occupation's log-likelihood is not separable from the prefix's"
        )
    return full[len(base) :]


@dataclass(frozen=True)
class _Prepared:
    """What every reading of the occupation items starts from: options, rows, the (male, female) prefixes, the
    occupation's tokens after each, and the engine's batch keywords."""

    opts: dict
    rows: list
    contexts: list
    pieces: list
    kw: dict


def _prepare(items: pa.Table, lm: LanguageModel, scoring: dict | None) -> _Prepared:
    opts = _options(scoring)
    tokenizer = lm.tokenizer
    rows = items.to_pylist()
    contexts = [(row["male_prefix"], row["female_prefix"]) for row in rows]
    # tokens of the occupation after the male and after the female prefix (the same in practice)
    pieces = [
        [continuation_ids(tokenizer, prefix, row["occupation"], row["item_id"]) for prefix in ctx]
        for row, ctx in zip(rows, contexts)
    ]
    kw = {"batch_size": opts["batch_size"], "max_length": opts["max_length"]}
    return _Prepared(opts, rows, contexts, pieces, kw)


def _table(p: _Prepared, values, kind: str) -> pa.Table:
    rows, pieces = p.rows, p.pieces
    records = [
        {
            "item_id": row["item_id"],
            "template_id": row["template_id"],
            "occupation": row["occupation"],
            "logp_male": float(male),
            "logp_female": float(female),
            "n_pieces": len(ids[0]),
            "score_kind": kind,
        }
        for row, ids, (male, female) in zip(rows, pieces, values)
    ]
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA)


def _summed_pairs(out, spans) -> list[tuple[float, float]]:
    """(male, female) log-probabilities of each item: its pieces' log-probs summed over each (start, count) span,
    the male prefix's span before the female's."""
    sums = [float(sum(out[s][0] for s in range(start, start + n))) for start, n in spans]
    return [(sums[2 * i], sums[2 * i + 1]) for i in range(len(sums) // 2)]


def score_next_words(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A causal LM's reading: log p(occupation | prefix) = ll(prefix occupation) - ll(prefix)."""
    p = _prepare(items, lm, scoring)
    rows, contexts, kw = p.rows, p.contexts, p.kw
    texts = []
    for row, ctx in zip(rows, contexts):
        for prefix in ctx:
            texts += [prefix, f"{prefix} {row['occupation']}"]
    ll = lm.sentence_logprobs(texts, **kw)
    values = [(ll[4 * i + 1] - ll[4 * i], ll[4 * i + 3] - ll[4 * i + 2]) for i in range(len(rows))]
    return _table(p, values, SCORE_KIND["clm"])


def score_masked_pieces(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A masked LM's reading: the occupation's pieces at their masks after the prefix."""
    p = _prepare(items, lm, scoring)
    tokenizer, opts, contexts, pieces, kw = lm.tokenizer, p.opts, p.contexts, p.pieces, p.kw
    mask = tokenizer.mask_token
    requests, spans = [], []
    for ctx, both in zip(contexts, pieces):
        for prefix, ids in zip(ctx, both):
            text = f"{prefix} " + " ".join([mask] * len(ids)) + opts["suffix"]
            spans.append((len(requests), len(ids)))
            requests += [MaskedRequest(text=text, candidates=(tok,), mask_index=k) for k, tok in enumerate(ids)]
    values = _summed_pairs(lm.candidate_logprobs(requests, **kw), spans)
    return _table(p, values, SCORE_KIND["mlm"])


def score_infilled_pieces(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """An encoder-decoder's reading: the occupation's pieces written by the decoder after the prefix."""
    p = _prepare(items, lm, scoring)
    tokenizer, opts, rows, contexts, pieces, kw = lm.tokenizer, p.opts, p.rows, p.contexts, p.pieces, p.kw
    mask = tokenizer.mask_token
    requests, spans = [], []
    for row, ctx, both in zip(rows, contexts, pieces):
        for prefix, ids in zip(ctx, both):
            encoder = f"{prefix} {mask}{opts['suffix']}"
            base = _ids(tokenizer, prefix)
            spans.append((len(requests), len(ids)))
            for k, tok in enumerate(ids):
                dec = prefix + tokenizer.decode(ids[:k], clean_up_tokenization_spaces=False) if k else prefix
                if _ids(tokenizer, dec) != base + ids[:k]:
                    raise DataError(
                        f"occupation item {row['item_id']}: the decoder prefix {dec!r} does not re-tokenize into "
                        f"the occupation's first {k} piece(s); piece-by-piece infill scoring would not be exact"
                    )
                requests.append(InfillRequest(masked_text=encoder, prefix=dec, candidates=(tok,)))
    values = _summed_pairs(lm.candidate_logprobs(requests, **kw), spans)
    return _table(p, values, SCORE_KIND["seq2seq"])


#: log p(occupation | male prefix) and log p(occupation | female prefix) for every item, each family by its reading.
score_occupations = readings(
    "occupation scoring", clm=score_next_words, mlm=score_masked_pieces, seq2seq=score_infilled_pieces
)

BENCHMARKS = [
    BenchmarkDef(
        name="occupations",
        families=("clm", "mlm", "seq2seq"),
        score=score_occupations,
        parse_options=OccupationOptions.from_config,
        rows=occupation_metric_rows,
        description="Lu et al. 2018: per-occupation bias and aggregate occupation bias (AOB) from "
        "'He is a | [OCCUPATION]' templates; masked-occupation variant for MLMs, infill for seq2seq",
        row_local=True,
        headlines=(Headline("aob", "all", "occupation bias (AOB)", "0"),),
    )
]
