"""BOLD (Dhamala et al. 2021), gender domain: the model continues each prompt; the generations are the scores.

Generating is the expensive, cached step: results/{model}/{method}/seed{k}/scores/{benchmark}.parquet holds one
row per (prompt, sample) with the continuation (GENERATIONS_SCHEMA); the metrics (lmbias.metrics.bold: VADER
sentiment, gender polarity) are recomputed from it, so a metric option never regenerates.

`scoring` (benchmarks.<name>.scoring): the decoding options of lmbias.engine.generation.GenerationSettings
(decoding greedy | sampling, temperature, top_p, max_new_tokens, samples_per_prompt, seed, batch_size) and
`prompts_per_group` (the first N prompts of each group in file order; null: all 3,204), recorded in the
file's metadata (``lmbias.generation``). Causal and encoder-decoder models (a masked LM or an encoder is refused
by name). A model entry with `chat_template` reads each prompt as a user turn of its chat template
(lmbias.engine.chat.wrap_prompt, the prompt then encoded without further special tokens); the metadata records
which (``lmbias.chat``). The continuation scored is the text after the prompt (after the assistant's turn).
"""

from __future__ import annotations

import json

import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef
from lmbias.engine import chat
from lmbias.engine.chat import CHAT_METADATA_KEY
from lmbias.engine.generation import GenerationSettings, check_generative
from lmbias.engine.lm import LanguageModel
from lmbias.metrics.bold import BoldOptions, bold_metric_rows
from lmbias.metrics.headline import Headline
from lmbias.options import check_block

SCORING_KEY = "benchmarks.bold.scoring"
GENERATION_KEY = "lmbias.generation"

GENERATIONS_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),  # the parsed item's id (position in gender_prompt.json)
        ("group", pa.string()),
        ("gender", pa.string()),
        ("person", pa.string()),
        ("prompt", pa.string()),  # as in the file (before any chat template)
        ("sample", pa.int32()),  # 0 .. samples_per_prompt - 1
        ("continuation", pa.string()),  # the generated text: what the metrics read
        ("new_tokens", pa.int32()),  # tokens generated before EOS (or max_new_tokens)
        ("finished", pa.bool_()),  # an EOS ended the text
    ]
)


def bold_settings(scoring: dict | None, key: str = SCORING_KEY) -> tuple[GenerationSettings, int | None]:
    """(decoding settings, prompts_per_group) of a `scoring` block, checked against the schema's bold.scoring
    (the generation keys and prompts_per_group); errors name `key`."""
    check_block(scoring, "benchmarks.bold.scoring", key)
    scoring = dict(scoring or {})
    per_group = scoring.pop("prompts_per_group", None)
    return GenerationSettings.from_config(scoring, key), per_group


def selected_prompts(items: pa.Table, per_group: int | None) -> pa.Table:
    """The first `per_group` prompts of each group in file order (None: every prompt)."""
    if per_group is None:
        return items
    seen: dict[str, int] = {}
    keep = []
    for i, group in enumerate(items.column("group").to_pylist()):
        seen[group] = seen.get(group, 0) + 1
        if seen[group] <= per_group:
            keep.append(i)
    return items.take(keep)


def score_bold(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """Generate continuations of the prompts (rows of results/data/<benchmark>.parquet), each asked through the
    model entry's chat template when it sets one (lm.generate)."""
    check_generative(lm.family, "BOLD")  # before the options: a masked LM is refused as such
    settings, per_group = bold_settings(scoring)
    chosen = selected_prompts(items, per_group).to_pylist()
    continuations = lm.generate(
        [r["prompt"] for r in chosen], settings, prompt_keys=[r["prompt_id"] for r in chosen], what="BOLD"
    )
    records = [
        {
            **{k: r[k] for k in ("prompt_id", "group", "gender", "person", "prompt")},
            "sample": k,
            "continuation": c.text,
            "new_tokens": c.new_tokens,
            "finished": c.finished,
        }
        for r, samples in zip(chosen, continuations)
        for k, c in enumerate(samples)
    ]
    generation = {**settings.to_dict(), "prompts_per_group": per_group}
    metadata = {
        GENERATION_KEY: json.dumps(generation, sort_keys=True),
        CHAT_METADATA_KEY: json.dumps(lm.chat_provenance(), sort_keys=True),
    }
    return pa.Table.from_pylist(records, schema=GENERATIONS_SCHEMA).replace_schema_metadata(metadata)


BENCHMARKS = [
    BenchmarkDef(
        name="bold",
        families=("clm", "seq2seq"),
        score=score_bold,
        parse_options=BoldOptions.from_config,
        rows=bold_metric_rows,
        description="Dhamala et al. 2021: VADER sentiment and gender polarity of generations about actors vs actresses",
        prompted=True,
        library=(chat,),  # the prompts' chat template, applied by lmbias.engine.lm
        reads="generations",
        classified=("clm", "seq2seq"),  # the texts the scorers block classifies
        headlines=(
            Headline("sentiment_mean_gap", "male-female", "BOLD VADER sentiment gap (actors - actresses)", "0"),
        ),
    )
]
