"""DA-Gender scoring (over-debiasing paper, section 5): per-pair scores behind the DA-score.

Each pair shares its masked contexts between its two targets (they differ only in the target word), so:

* mlm / seq2seq: log p(TM) and log p(TAM) of the male and of the female target word, read at the target's
  mask in both (`lmbias.benchmarks.logprob.association_logprobs`; TAM contexts repeat across attributes of
  the same template and target pair and are scored once);
* clm: the log-likelihood of the whole sentence with the male and with the female target (the paper:
  "For GPT2, we compute sentence probabilities").

The DA-score (`lmbias.metrics.da_gender`) is computed from these, so changing its variant never reruns
a forward pass.
"""

from __future__ import annotations

import logging
import math

import pyarrow as pa

from lmbias.benchmarks import logprob as logprob_benchmark  # the module, not its names: importable in either order
from lmbias.benchmarks.definition import BenchmarkDef, readings
from lmbias.engine.lm import LanguageModel
from lmbias.metrics.da_gender import DaGenderOptions, da_gender_metric_rows
from lmbias.metrics.headline import Headline

log = logging.getLogger(__name__)

SCORES_SCHEMA = pa.schema(
    [
        ("pair_id", pa.int32()),
        ("item_id", pa.string()),
        ("template_id", pa.string()),
        ("attribute", pa.string()),
        ("ideal", pa.string()),  # male | female
        ("target_pair", pa.int8()),
        ("male_word", pa.string()),
        ("female_word", pa.string()),
        ("tm_male", pa.float64()),  # log p(male word | TM)          (mlm, seq2seq; NaN for clm)
        ("tam_male", pa.float64()),  # log p(male word | TAM)
        ("tm_female", pa.float64()),
        ("tam_female", pa.float64()),
        ("sentence_male", pa.float64()),  # log-likelihood of the sentence with the male target (clm; NaN otherwise)
        ("sentence_female", pa.float64()),
        ("score_kind", pa.string()),  # association | sentence
        ("attribute_masks", pa.string()),  # word | piece ("" for clm)
    ]
)


def _records(rows: list[dict], values, kind: str, masks: str) -> pa.Table:
    keys = ("pair_id", "item_id", "template_id", "attribute", "ideal", "target_pair", "male_word", "female_word")
    records = [
        {
            **{k: r[k] for k in keys},
            "tm_male": v[0],
            "tam_male": v[1],
            "tm_female": v[2],
            "tam_female": v[3],
            "sentence_male": v[4],
            "sentence_female": v[5],
            "score_kind": kind,
            "attribute_masks": masks,
        }
        for r, v in zip(rows, values)
    ]
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA)


def score_sentences(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A causal LM's reading: the log-likelihood of the pair's male and female sentence."""
    opts = logprob_benchmark.ScoringOptions.from_config(scoring, "benchmarks.da_gender.scoring")
    rows = items.to_pylist()
    nan = math.nan
    texts = []
    for r in rows:
        male_sent, female_sent = (r["sent_a"], r["sent_b"]) if r["ideal"] == "male" else (r["sent_b"], r["sent_a"])
        texts += [male_sent, female_sent]
    lls = lm.sentence_logprobs(texts, batch_size=opts.batch_size, max_length=opts.max_length)
    values = [(nan, nan, nan, nan, float(lls[2 * i]), float(lls[2 * i + 1])) for i in range(len(rows))]
    return _records(rows, values, "sentence", "")


def _associations(items: pa.Table, lm: LanguageModel, scoring: dict | None, word_requests) -> pa.Table:
    """The TM/TAM association of the male and the female word (lmbias.benchmarks.logprob), each word read as
    `word_requests` asks."""
    opts = logprob_benchmark.ScoringOptions.from_config(scoring, "benchmarks.da_gender.scoring")
    rows = items.to_pylist()
    nan = math.nan
    assoc = [
        logprob_benchmark.AssociationItem(
            r["tm_sent"], r["target_start"], r["attr_start"], r["attr_end"], (r["male_word"], r["female_word"])
        )
        for r in rows
    ]
    tm, tam = logprob_benchmark.association_logprobs(
        assoc, lm, opts.attribute_masks, opts.batch_size, opts.max_length, word_requests
    )
    values = [(float(a[0]), float(b[0]), float(a[1]), float(b[1]), nan, nan) for a, b in zip(tm, tam)]
    return _records(rows, values, "association", opts.attribute_masks)


def score_masked_associations(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A masked LM's reading: the TM/TAM association, each word's pieces at their masks."""
    return _associations(items, lm, scoring, logprob_benchmark.masked_word_requests)


def score_infilled_associations(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """An encoder-decoder's reading: the TM/TAM association, each word's pieces written by the decoder."""
    return _associations(items, lm, scoring, logprob_benchmark.infilled_word_requests)


#: Score every DA-Gender pair (rows of results/data/da_gender.parquet), each family by its reading.
score_da_gender = readings(
    "DA-Gender scoring", clm=score_sentences, mlm=score_masked_associations, seq2seq=score_infilled_associations
)


BENCHMARKS = [
    BenchmarkDef(
        name="da_gender",
        families=("mlm", "seq2seq", "clm"),
        score=score_da_gender,
        parse_options=DaGenderOptions.from_config,
        rows=da_gender_metric_rows,
        description=(
            "over-debiasing paper: DA-score (share of DA-Gender pairs preferring the genuine target), per ideal gender"
        ),
        row_local=True,
        headlines=(
            Headline(
                "da_score", "all", "DA-score (genuine associations kept)", "100", variant_contains="association=ratio"
            ),
        ),
    )
]
