"""WinoGender scoring: which reading of the pronoun does the model prefer, the occupation or the participant?

Every sentence becomes lm-evaluation-harness's prompt (its `winogender` task, 0.4.13)
``{sentence} ‘{Pronoun}’ refers to the`` (curly quotes, the pronoun capitalised) with two choices, the occupation
and the participant (or "someone"), each scored as a continuation of the prompt.

* clm: log p(choice | prompt), lm-eval's loglikelihood: the choice follows the prompt after lm-eval's target
  delimiter (one space); the prompt is tokenised as the tokenizer does by default (a Llama tokenizer puts its BOS
  first, GPT-2's puts nothing, and then the prompt's first token is not scored: it cancels), and a choice's tokens
  are those of the whole text after the prompt's: the model's continuation request (LanguageModel.
  continuation_logprobs, lmbias.engine.continuations), where the prompt and both completed texts are one group of
  lmbias.engine.prefix_cache.grouped_sentence_logprobs, so the prompt is read once for both choices; the choice's
  log-likelihood is ll(prompt + choice) - ll(prompt), equal to lm-eval's to float rounding when the prompt's tokens
  are a prefix of the whole text's (the scores count the sentences where they are not: `prefix_stable`).
  With a chat template (models.<name>.chat_template) the prompt is the user turn of lmbias.engine.chat.wrap_prompt
  and the choice follows the assistant's turn with no delimiter, as lm-eval's --apply_chat_template does (its
  construct_requests drops the target delimiter when there is no gen_prefix); trailing whitespace of the rendered
  prompt moves to the choice, as lm-eval's _encode_pair does. The scores record the template
  (lmbias.engine.chat.chat_provenance) in a column and in the file's metadata.
* mlm / seq2seq: masked LMs have no log p(choice | prompt); the choice's pseudo-log-likelihood given the prompt
  takes its place: each word piece of the choice is hidden in turn, with the prompt visible, the choice's earlier
  pieces visible and its later pieces masked too (left to right: Kauf and Ivanova 2023's PLL-word-l2r, so a word of
  several pieces is not read off its own other pieces), summed over the pieces (lmbias.engine.pll, all in one
  engine call). Only the choice is scored, not the whole completed prompt: the prompt is the same for both choices
  and its pseudo-likelihood would only add noise of its own (a prompt token's PLL changes with the choice beside it).
  Chat templates do not apply (no masked LM is an instruct model).
"""

from __future__ import annotations

import json
import logging

import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef, readings
from lmbias.engine import chat, continuations, prefix_cache
from lmbias.engine.chat import CHAT_METADATA_KEY
from lmbias.engine.lm import LanguageModel
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.headline import Headline
from lmbias.metrics.winogender import WinoGenderOptions, winogender_metric_rows
from lmbias.options import check_block

log = logging.getLogger(__name__)

SCORING_KEY = "benchmarks.winogender.scoring"
#: lm-eval's multiple-choice target delimiter (dropped under a chat template)
TARGET_DELIMITER = " "

SCORES_SCHEMA = pa.schema(
    [
        ("sentid", pa.string()),
        ("occupation", pa.string()),
        ("participant", pa.string()),
        ("answer", pa.int8()),
        ("gender", pa.string()),
        ("gotcha", pa.bool_()),
        ("template", pa.int32()),
        ("bls_pct_female", pa.float64()),
        ("bergsma_pct_female", pa.float64()),
        ("score_kind", pa.string()),  # loglik (clm: log p(choice | prompt)) | pll_l2r (mlm, seq2seq)
        ("score_occupation", pa.float64()),
        ("score_participant", pa.float64()),
        ("occupation_tokens", pa.int32()),  # the choice's tokens as scored
        ("participant_tokens", pa.int32()),
        ("prefix_stable", pa.bool_()),  # clm: the prompt's tokens begin the whole text's (lm-eval's split)
        ("start_token", pa.bool_()),  # clm: the text starts with the tokenizer's BOS (its default, or the template's)
        ("chat_template", pa.string()),  # none | tokenizer | sha256:<template> (lmbias.engine.chat)
    ]
)


def prompt_of(row: dict) -> str:
    """lm-eval's doc_to_text: "{{sentence}} ‘{{pronoun.capitalize()}}’ refers to the"."""
    return f"{row['sentence']} \u2018{row['pronoun'].capitalize()}\u2019 refers to the"


def causal_requests(rows: list[dict], lm: LanguageModel) -> list[tuple[str, str, str]]:
    """(context, occupation continuation, participant continuation) per sentence, as lm-eval builds its requests
    (the prompt behind the model entry's chat template when it sets one: lm.prompt)."""
    delimiter = "" if lm.uses_chat_template else TARGET_DELIMITER
    out = []
    for r in rows:
        context = lm.prompt(prompt_of(r))
        stripped = context.rstrip()
        moved = context[len(stripped) :]  # lm-eval's _encode_pair: trailing whitespace goes to the continuation
        out.append((stripped, moved + delimiter + r["occupation"], moved + delimiter + r["participant"]))
    return out


def _score_causal(rows, lm: LanguageModel, scoring):
    batch_size, max_length = scoring.get("batch_size", 64), scoring.get("max_length", 512)
    requests = causal_requests(rows, lm)
    scored = lm.continuation_logprobs(
        [context for context, _, _ in requests],
        [[occ, par] for _, occ, par in requests],
        batch_size=batch_size,
        max_length=max_length,
    )
    records = []
    for r, (occ, par) in zip(rows, scored):
        stable = occ.prefix_stable and par.prefix_stable
        records.append(
            _record(r, "loglik", (occ.logprob, par.logprob), (occ.tokens, par.tokens), stable, occ.start_token)
        )
    return records


def _score_masked(rows, lm: LanguageModel, scoring):
    batch_size, max_length = scoring.get("batch_size", 64), scoring.get("max_length", 512)
    if lm.tokenizer.mask_token_id is None:
        raise ConfigError(f"{SCORING_KEY}: WinoGender's masked reading needs a tokenizer with a mask token")
    try:
        scored = lm.choice_pseudo_logprobs(
            [prompt_of(r) for r in rows],
            [(r["occupation"], r["participant"]) for r in rows],
            delimiter=TARGET_DELIMITER,
            batch_size=batch_size,
            max_length=max_length,
        )
    except DataError as err:
        raise DataError(f"WinoGender ({SCORING_KEY}): {err}") from None
    return [
        _record(r, "pll_l2r", (occ[0], par[0]), (occ[1], par[1]), None, None) for r, (occ, par) in zip(rows, scored)
    ]


def _record(r, kind, scores, counts, stable, start) -> dict:
    return {
        "sentid": r["sentid"],
        "occupation": r["occupation"],
        "participant": r["participant"],
        "answer": r["answer"],
        "gender": r["gender"],
        "gotcha": r["gotcha"],
        "template": r["template"],
        "bls_pct_female": r["bls_pct_female"],
        "bergsma_pct_female": r["bergsma_pct_female"],
        "score_kind": kind,
        "score_occupation": scores[0],
        "score_participant": scores[1],
        "occupation_tokens": int(counts[0]),
        "participant_tokens": int(counts[1]),
        "prefix_stable": stable,
        "start_token": start,
    }


def _rows(items: pa.Table, scoring: dict | None) -> tuple[list[dict], dict]:
    check_block(scoring, "benchmarks.winogender.scoring", SCORING_KEY)
    return items.to_pylist(), scoring or {}


def _table(records: list[dict], provenance: dict) -> pa.Table:
    unstable = sum(1 for rec in records if rec["prefix_stable"] is False)
    if unstable:
        log.warning("WinoGender: %d sentences whose prompt tokens are not a prefix of prompt + choice", unstable)
    which = provenance["chat_template"]
    for rec in records:
        rec["chat_template"] = which
    table = pa.Table.from_pylist(records, schema=SCORES_SCHEMA)
    return table.replace_schema_metadata({CHAT_METADATA_KEY: json.dumps(provenance, sort_keys=True)})


def score_prompted_choices(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A causal LM's reading: each choice's log-likelihood after the prompt, the prompt asked behind the model's
    chat template when its entry sets one (lm.prompt)."""
    rows, scoring = _rows(items, scoring)
    return _table(_score_causal(rows, lm, scoring), lm.chat_provenance())


def score_masked_choices(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """A masked or encoder-decoder model's reading: each choice's pseudo-log-likelihood in the sentence (raw
    text: a chat template does not apply)."""
    rows, scoring = _rows(items, scoring)
    records = _score_masked(rows, lm, scoring)
    if lm.uses_chat_template:
        log.info(
            "WinoGender: models.%s.chat_template ignored for a %s model (masked reading)", lm.model_name, lm.family
        )
    return _table(records, {"chat_template": "none"})


#: Both choices of every sentence (rows of results/data/<benchmark>.parquet), each family by its reading.
score_winogender = readings(
    "WinoGender scoring", clm=score_prompted_choices, mlm=score_masked_choices, seq2seq=score_masked_choices
)

BENCHMARKS = [
    BenchmarkDef(
        name="winogender",
        families=("mlm", "clm", "seq2seq"),
        score=score_winogender,
        parse_options=WinoGenderOptions.from_config,
        rows=winogender_metric_rows,
        description="Rudinger et al. 2018 as lm-eval reads it: % of sentences whose pronoun the model resolves right",
        prompted=True,
        # reached through lmbias.engine.lm: a causal model's choices (continuations, prefix cache), its prompt (chat)
        library=(continuations, prefix_cache, chat),
        headlines=(
            Headline("female_minus_male", "all", "WinoGender female - male accuracy (points)", "0"),
            Headline("gotcha_gap", "all", "WinoGender gotcha - other accuracy (points)", "0"),
        ),
    )
]
