"""Counterfactual prompt pairs (LangFair-style): each prompt and its gender-swapped twin, continued alike.

An entry selects this measure over any prompt table with `prompt_id` and `prompt` columns: BOLD's parsed prompts
(`{dataset: bold, measure: counterfactual_pairs}`) or a prompt file of your own (`{dataset: prompts, measure:
counterfactual_pairs}`, lmbias.parsers.prompts). Scoring, in one job per (model, method, seed):

1. pairs: every prompt's twin is built here, in the scoring job, with lmbias's own swap lexicon
   (lmbias.corpora.prompt_pairs; `intervention` grammatical, the default, through the spaCy pipeline
   `spacy_model`, or naive, the dictionary alone). The parse step runs inside Snakemake's process, which should
   not load spaCy, and a parser may not import the corpora stage; building the pairs here costs a few seconds
   (BOLD's 3,204 prompts: about 4 s on one core) and keeps the parsed table the dataset's own, shared with the
   dataset's other entries. A prompt whose swap changes nothing is kept as a row without a twin (counted, never
   generated for, never paired with itself).
2. generation: the prompts and their twins go through one call of lmbias.engine.generation (lm.generate, the
   model entry's chat template applying to both), batched together; a twin has its prompt's seed key
   (request_seed(seed, prompt_id, sample)), so sampling draws the same random numbers for both texts of a pair
   and any difference between them comes from the swapped words alone.
3. cosine (optional): with `encoder` set (a local folder or a hub id of a sentence encoder, at
   `encoder_revision`), the continuations are embedded by lmbias.engine.embeddings (mean pooling of the last
   hidden states over the real tokens), batched, once generation is done, and each pair's cosine similarity is
   stored (both texts empty: 1; one empty: 0).

One row per (paired prompt, sample) and one per unpaired prompt (SCORES_SCHEMA); the metadata records the
decoding settings and pair options (``lmbias.counterfactual``), the counts, the chat template and the encoder.
The metrics (lmbias.metrics.counterfactual) are recomputed from these rows.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef
from lmbias.corpora import counterfactual as swapper_module
from lmbias.corpora import nlp, prompt_pairs, swap_rules, swap_sentence
from lmbias.corpora.swap_lexicon import wordlist_files
from lmbias.engine import chat, embeddings
from lmbias.engine.chat import CHAT_METADATA_KEY
from lmbias.engine.generation import GenerationSettings, check_generative
from lmbias.engine.lm import LanguageModel
from lmbias.errors import DataError
from lmbias.metrics import bold as bold_metric
from lmbias.metrics import counterfactual as metric
from lmbias.metrics.headline import Headline
from lmbias.options import check_block

log = logging.getLogger(__name__)

NAME = "counterfactual_pairs"
SCORING_KEY = "benchmarks.<counterfactual_pairs>.scoring"
METADATA_KEY = "lmbias.counterfactual"
#: The scoring keys that are not generation keys (GenerationSettings), with their defaults.
PAIR_DEFAULTS = {
    "intervention": "grammatical",
    "spacy_model": "en_core_web_sm",
    "prompts_per_group": None,
    "encoder": None,
    "encoder_revision": "main",
}

SCORES_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),  # the parsed item's id
        ("group", pa.string()),  # the items' group (BOLD: American_actors | American_actresses), else null
        ("prompt", pa.string()),  # as parsed (before any chat template)
        ("twin", pa.string()),  # its gender-swapped twin; null: nothing to swap (unpaired)
        ("direction", pa.string()),  # male->female | female->male | mixed; null when unpaired
        ("swaps", pa.list_(pa.struct([("prompt", pa.string()), ("twin", pa.string())]))),  # words swapped
        ("sample", pa.int32()),  # 0 .. samples_per_prompt - 1; null when unpaired
        ("continuation", pa.string()),  # the prompt's continuation
        ("twin_continuation", pa.string()),  # the twin's, same seed key
        ("new_tokens", pa.int32()),
        ("twin_new_tokens", pa.int32()),
        ("finished", pa.bool_()),  # an EOS ended the text
        ("twin_finished", pa.bool_()),
        ("cosine", pa.float64()),  # the encoder's cosine similarity of the two continuations (null: no encoder)
    ]
)


def counterfactual_settings(scoring: dict | None, key: str = SCORING_KEY) -> tuple[GenerationSettings, dict]:
    """(decoding settings, pair options with defaults) of a `scoring` block, checked against the schema's
    $defs.counterfactual_scoring; errors name `key`."""
    check_block(scoring, "$defs.counterfactual_scoring", key)
    scoring = dict(scoring or {})
    options = {k: scoring.pop(k, default) for k, default in PAIR_DEFAULTS.items()}
    return GenerationSettings.from_config(scoring, key), options


def selected_prompts(items: pa.Table, per_group: int | None) -> pa.Table:
    """The first `per_group` prompts of each group in file order (items without a `group` column, or rows with
    a null group, form one group); None: every prompt."""
    if per_group is None:
        return items
    groups = items.column("group").to_pylist() if "group" in items.column_names else [None] * items.num_rows
    seen: dict[object, int] = {}
    keep = []
    for i, group in enumerate(groups):
        seen[group] = seen.get(group, 0) + 1
        if seen[group] <= per_group:
            keep.append(i)
    return items.take(keep)


def build_pairs(items: pa.Table, options: dict) -> list[prompt_pairs.PromptPair]:
    """Every prompt's PromptPair under the options' intervention (lmbias.corpora.prompt_pairs)."""
    swapper = prompt_pairs.make_swapper(options["intervention"], options["spacy_model"])
    return prompt_pairs.build_pairs(items.column("prompt").to_pylist(), swapper)


def cosine_similarities(a: list[str], b: list[str], encoder, tokenizer, batch_size: int = 64) -> np.ndarray:
    """Cosine similarity of each (a[i], b[i]) under a sentence encoder (family encoder: mean pooling of the
    last hidden states over the real tokens, lmbias.engine.embeddings), every distinct non-empty text embedded
    once, batched; both empty: 1, one empty: 0."""
    texts = sorted({t for t in a + b if t})
    vectors = {}
    if texts:
        pooled = embeddings.sentence_embeddings(encoder, tokenizer, texts, ["mean"], "encoder", batch_size=batch_size)[
            "mean"
        ]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = pooled.astype(np.float64) / np.maximum(norms, 1e-12)
        vectors = dict(zip(texts, unit))
    out = np.empty(len(a), dtype=np.float64)
    for i, (x, y) in enumerate(zip(a, b)):
        if not x or not y:
            out[i] = 1.0 if x == y else 0.0
        else:
            out[i] = float(np.clip(vectors[x] @ vectors[y], -1.0, 1.0))
    return out


def load_encoder(source: str, revision: str, device):
    """(model, tokenizer) of a sentence encoder: a local folder, else a hub id at `revision`."""
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model

    entry = {"family": "encoder"}
    if Path(source).expanduser().is_dir():
        entry.update(path=source, revision="local")
    else:
        entry.update(hub_id=source, revision=revision)
    return load_model(model_spec("counterfactual-encoder", entry), device=str(device))


def score_counterfactual(items: pa.Table, lm: LanguageModel, scoring: dict | None = None) -> pa.Table:
    """Pairs, their generations and (with an encoder) their cosine similarities: SCORES_SCHEMA."""
    check_generative(lm.family, "counterfactual pairs")
    settings, options = counterfactual_settings(scoring)
    for column in ("prompt_id", "prompt"):
        if column not in items.column_names:
            raise DataError(
                f"counterfactual pairs: the items have no `{column}` column (columns: {items.column_names})"
            )
    chosen = selected_prompts(items, options["prompts_per_group"])
    pairs = build_pairs(chosen, options)
    ids = chosen.column("prompt_id").to_pylist()
    groups = chosen.column("group").to_pylist() if "group" in chosen.column_names else [None] * len(ids)
    paired = [i for i, p in enumerate(pairs) if p.paired]
    log.info(
        "counterfactual pairs: %d prompts, %d paired, %d without a gendered word to swap (%s intervention)",
        len(pairs),
        len(paired),
        len(pairs) - len(paired),
        options["intervention"],
    )
    texts = [pairs[i].prompt for i in paired] + [pairs[i].twin for i in paired]
    keys = [ids[i] for i in paired] * 2  # a twin draws with its prompt's seed key
    generated = lm.generate(texts, settings, prompt_keys=keys, what="counterfactual pairs") if texts else []
    originals, twins = generated[: len(paired)], generated[len(paired) :]
    records = []
    for i, pair in enumerate(pairs):
        if not pair.paired:
            base = {"prompt_id": ids[i], "group": groups[i], "prompt": pair.prompt, "swaps": []}
            records.append(base)
    for n, i in enumerate(paired):
        pair = pairs[i]
        swaps = [{"prompt": x, "twin": y} for x, y in pair.swaps]
        for k, (a, b) in enumerate(zip(originals[n], twins[n])):
            records.append(
                {
                    "prompt_id": ids[i],
                    "group": groups[i],
                    "prompt": pair.prompt,
                    "twin": pair.twin,
                    "direction": pair.direction,
                    "swaps": swaps,
                    "sample": k,
                    "continuation": a.text,
                    "twin_continuation": b.text,
                    "new_tokens": a.new_tokens,
                    "twin_new_tokens": b.new_tokens,
                    "finished": a.finished,
                    "twin_finished": b.finished,
                }
            )
    position = {pid: i for i, pid in enumerate(ids)}
    records.sort(key=lambda r: (position[r["prompt_id"]], r.get("sample") or 0))
    encoder_info = {"encoder": None}
    if options["encoder"] is not None:
        from lmbias.engine.batching import model_device
        from lmbias.engine.models import resolved_commit

        encoder, tokenizer = load_encoder(options["encoder"], options["encoder_revision"], model_device(lm.model))
        rows = [r for r in records if r.get("twin") is not None]
        similarities = cosine_similarities(
            [r["continuation"] for r in rows],
            [r["twin_continuation"] for r in rows],
            encoder,
            tokenizer,
            settings.batch_size,
        )
        for r, c in zip(rows, similarities):
            r["cosine"] = float(c)
        encoder_info = {
            "encoder": options["encoder"],
            "encoder_revision": options["encoder_revision"],
            "encoder_commit": resolved_commit(encoder),
            "pooling": "mean",
        }
        del encoder
    provenance = {
        **settings.to_dict(),
        **{k: v for k, v in options.items() if k not in ("encoder", "encoder_revision")},
        **encoder_info,
        "names": False,
        "wordlists": [p.name for p in wordlist_files()],
        "prompts": len(pairs),
        "paired": len(paired),
        "unpaired": len(pairs) - len(paired),
    }
    metadata = {
        METADATA_KEY: json.dumps(provenance, sort_keys=True),
        CHAT_METADATA_KEY: json.dumps(lm.chat_provenance(), sort_keys=True),
    }
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA).replace_schema_metadata(metadata)


BENCHMARKS = [
    BenchmarkDef(
        name=NAME,
        families=("clm", "seq2seq"),
        score=score_counterfactual,
        parse_options=metric.CounterfactualOptions.from_config,
        rows=metric.counterfactual_metric_rows,
        description=(
            "Counterfactual prompt pairs (LangFair-style): each prompt and its gender-swapped twin continued with "
            "the same seed; sentiment parity, ROUGE-L, exact match and encoder cosine similarity of the pairs"
        ),
        prompted=True,
        # the prompts' chat template (applied by lmbias.engine.lm), the swapper the pairs are built with (imported
        # on use by lmbias.corpora.prompt_pairs), VADER (lmbias.metrics.bold, through the metric module)
        library=(chat, embeddings, swapper_module, swap_rules, swap_sentence, nlp, bold_metric),
        reads="generations",
        resources=tuple(f"resources/wordlists/{p.name}" for p in wordlist_files()),
        headlines=(
            Headline("rouge_l", "all", "Counterfactual ROUGE-L of the pairs' continuations", "1"),
            Headline("sentiment_abs_diff", "all", "Counterfactual |VADER sentiment difference|", "0"),
        ),
    )
]
