"""BEC-Pro association scoring (Bartl et al. 2020, after Kurita et al. 2019), English and German.

For every sentence: association = log p_T(TM) - log p_T(TAM), the log-probability of the person word
at its mask with only the person masked (Sent_TM), minus the same with the profession masked as well
(Sent_TAM: one [MASK] per profession word, the prior). The person's mask is the first [MASK] of both
texts (every template opens with the person; checked per row).

* mlm: both texts go to the engine as text requests; TM and TAM contexts are shared across person words
  ("My [MASK] is a taper." serves brother, son, sister, ...) and TAM contexts across professions, so
  5,400 sentences need about a tenth as many distinct forward inputs.
* seq2seq: the encoder reads TM / TAM (masks as <mask>); the decoder, fed the text before the person,
  scores the person word (DA-Gender, footnote 9).
* A person word of several pieces (some German words under some tokenizers) gets one mask per piece in
  TM and TAM, and its log-probability is the sum over pieces (recorded in `person_pieces`).
* `artefact` marks the 10 released rows whose TM carries a second, glued mask ("lodging [MASK]ager",
  "[MASK]nährungsberater"; see lmbias.parsers.bec_pro_generator); they are scored as released.

German needs a German model (e.g. `bert-base-german`, dbmdz/bert-base-german-cased as in Bartl's code):
the tiny models are English; tiny-bert only exercises the mechanics (its vocabulary holds the German
words, lower-cased and without accents).
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc

from lmbias.benchmarks.definition import BenchmarkDef, readings
from lmbias.engine.lm import LanguageModel
from lmbias.engine.scoring import InfillIdsRequest, MaskedRequest, decoder_prefix, word_token_ids
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.bec_pro import BecProOptions, bec_pro_metric_rows, bec_pro_paired_rows
from lmbias.metrics.headline import Headline
from lmbias.parsers.bec_pro_generator import MASK, load_person_words, person_slot

log = logging.getLogger(__name__)

SCORES_SCHEMA = pa.schema(
    [
        ("row_id", pa.int32()),
        ("language", pa.string()),
        ("template", pa.string()),
        ("person", pa.string()),
        ("gender", pa.string()),  # of the person word: male | female
        ("profession", pa.string()),
        ("prof_gender", pa.string()),  # male | female | balanced
        ("profession_en", pa.string()),
        ("pair_index", pa.int32()),  # position in the person lists: pairs he/she, my brother/my sister, ...
        ("logp_tm", pa.float64()),
        ("logp_tam", pa.float64()),
        ("association", pa.float64()),  # logp_tm - logp_tam
        ("person_pieces", pa.int32()),
        ("artefact", pa.bool_()),
    ]
)


def _person_mask(row: dict) -> int:
    """Character index of the person's mask in Sent_TM, checked against the sentence."""
    tm, tam, sentence, person = row["sent_tm"], row["sent_tam"], row["sentence"], row["person"]
    at = tm.find(MASK)
    if at < 0 or tam.find(MASK) != at or sentence.find(person) != at:
        raise DataError(
            f"BEC-Pro row {row['row_id']}: the person {person!r} is not at the first [MASK] of Sent_TM/Sent_TAM "
            f"({tm!r}); the association reads the person at the first mask"
        )
    return at


def _with_person_masks(text: str, mask_token: str, pieces: int) -> str:
    head, tail = text.split(MASK, 1)
    return head + " ".join([mask_token] * pieces) + tail.replace(MASK, mask_token)


def _masked_person(lm: LanguageModel, masked: str, text: str, at: int, pieces: list[int]) -> list:
    """A masked LM's reading of the person: each of its pieces at its mask."""
    return [MaskedRequest(text=masked, candidates=(p,), mask_index=k) for k, p in enumerate(pieces)]


def _infilled_person(lm: LanguageModel, masked: str, text: str, at: int, pieces: list[int]) -> list:
    """An encoder-decoder's reading of the person: each piece written by the decoder after the text before it."""
    tokenizer = lm.tokenizer
    enc = tuple(tokenizer(masked, add_special_tokens=True)["input_ids"])
    prefix_ids = tokenizer(text[:at].rstrip(" "), add_special_tokens=False)["input_ids"] if at else []
    head = decoder_prefix(lm.model, tokenizer, list(prefix_ids))
    return [
        InfillIdsRequest(encoder_ids=enc, decoder_ids=tuple(head + pieces[:k]), candidates=(p,))
        for k, p in enumerate(pieces)
    ]


def _score(items: pa.Table, lm: LanguageModel, scoring: dict | None, person_requests) -> pa.Table:
    """Every BEC-Pro sentence (rows of results/data/<benchmark>.parquet) with one engine call, the person read as
    `person_requests(lm, masked text, text, the person's character index, its pieces)` asks."""
    scoring = scoring or {}
    batch_size, max_length = scoring.get("batch_size", 64), scoring.get("max_length", 128)
    tokenizer = lm.tokenizer
    if tokenizer.mask_token_id is None:
        raise ConfigError("BEC-Pro association needs a tokenizer with a mask token")
    words = load_person_words()
    rows = items.to_pylist()
    requests, plan = [], []
    for row in rows:
        at = _person_mask(row)
        after_space = at > 0 and row["sent_tm"][at - 1] == " "
        pieces = word_token_ids(tokenizer, row["person"], after_space=after_space)
        if not pieces:
            raise DataError(f"BEC-Pro row {row['row_id']}: person {row['person']!r} has no tokens")
        spans = []
        for text in (row["sent_tm"], row["sent_tam"]):
            masked = _with_person_masks(text, tokenizer.mask_token, len(pieces))
            first = len(requests)
            requests += person_requests(lm, masked, text, at, pieces)
            spans.append((first, len(requests)))
        plan.append((spans, len(pieces)))
    out = lm.candidate_logprobs(requests, batch_size=batch_size, max_length=max_length)
    records = []
    for row, (spans, n_pieces) in zip(rows, plan):
        tm, tam = (float(sum(o[0] for o in out[a:b])) for a, b in spans)
        slot = (
            person_slot(row["sentence"], row["language"], words[row["language"]]) if row["language"] in words else None
        )
        records.append(
            {
                "row_id": row["row_id"],
                "language": row["language"],
                "template": row["template"],
                "person": row["person"],
                "gender": row["gender"],
                "profession": row["profession"],
                "prof_gender": row["prof_gender"],
                "profession_en": row["profession_en"],
                "pair_index": slot[1] if slot is not None and slot[0] == row["gender"] else None,
                "logp_tm": tm,
                "logp_tam": tam,
                "association": tm - tam,
                "person_pieces": n_pieces,
                "artefact": row["sent_tm"].count(MASK) != 1,
            }
        )
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA)


def score_masked_persons(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A masked LM's reading: the person's pieces at their masks."""
    return _score(items, lm, scoring, _masked_person)


def score_infilled_persons(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """An encoder-decoder's reading: the person's pieces written by the decoder."""
    return _score(items, lm, scoring, _infilled_person)


#: Score every BEC-Pro sentence, each family by its reading.
score_bec_pro = readings("BEC-Pro association", mlm=score_masked_persons, seq2seq=score_infilled_persons)


def paired_bec_pro_rows(before: pa.Table, after: pa.Table, test: str, options: BecProOptions) -> list[dict]:
    """Pre/post test per profession group x person gender (lmbias.metrics.comparison), honouring drop_artefacts."""
    if options.drop_artefacts:
        before, after = (t.filter(pc.invert(t.column("artefact"))) for t in (before, after))
    variant = BecProOptions(test=test, drop_artefacts=options.drop_artefacts).variant
    return [{**r, "variant": variant} for r in bec_pro_paired_rows(before, after, test)]


BENCHMARKS = [
    BenchmarkDef(
        name="bec_pro",
        families=("mlm", "seq2seq"),
        score=score_bec_pro,
        parse_options=BecProOptions.from_config,
        rows=bec_pro_metric_rows,
        description="Bartl et al. 2020: association log(p_T(TM)/p_T(TAM)) per profession group x person gender",
        paired=paired_bec_pro_rows,
        row_local=True,
        headlines=(Headline("association_gap", "prof=all", "BEC-Pro male - female association gap", "0"),),
    )
]
