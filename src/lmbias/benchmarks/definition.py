"""`BenchmarkDef`: every fact about one benchmark in one place, declared by its module in this package.

A definition says how a dataset's items become scores (the expensive forward passes) and how scores become
metric rows (cheap, from cached scores), and everything the workflow needs to know about it besides: which
model families it applies to, what it reads from a model, whether its rows may be scored in shards, which
numbers head its summary, and which library modules its results depend on. `lmbias.benchmarks.catalog`
discovers the definitions; no other table names a benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from lmbias.metrics.headline import Headline

#: What a benchmark reads from a model. A method that only rescales the output distribution (Self-Debias)
#: changes likelihoods, not embeddings (hidden states) nor, as implemented here, generations.
READS = ("likelihoods", "embeddings", "generations")


@dataclass(frozen=True)
class BenchmarkDef:
    """How one benchmark's items become scores, and scores become metric rows.

    Words: a config entry `benchmarks.<benchmark>` names its data (`dataset`, a key of `data:`, parsed by
    lmbias.parsers) and the definition that scores it (`measure`, default: the dataset's name); a definition's
    `name` is what `measure` selects. So `perplexity_gap: {dataset: gap, measure: perplexity}` is the perplexity
    definition over GAP's texts, and `crows_pairs: {dataset: crows_pairs}` CrowS-Pairs' own.

    score(items, model, tokenizer, family, scoring_cfg, stats) -> pyarrow.Table      (per-item scores)
    parse_options(metric_cfg, key) -> options                                         (ConfigError naming key)
    rows(scores, options) -> list[dict]                                               (summary-schema rows)
    paired(before, after, test, options) -> list[dict]   (optional: pre/post test of two score tables,
                                                           item by item; see lmbias.metrics.comparison)
    prompted: the scorer asks the model a prompt (WinoGender's multiple choice, BOLD's generation), so an
              instruct model's chat template applies: score also takes model_entry= and model_name= (keywords,
              score_keywords) and reads its prompts through lmbias.engine.chat. Sentence-likelihood benchmarks
              read raw text and never see them.
    reads: what the scorer reads from the model (READS): decides which methods apply (Self-Debias: likelihoods).
    row_local: the scorer returns exactly one score row per item, in item order, computed from that item alone,
               so the items may be split over processes and the parts concatenated (lmbias.engine.distributed).
               A scorer that pools items (SEAT's effect sizes) or deduplicates across them keeps False.
    headlines: the numbers that head the summary page and table, with an unbiased model's value.
    library: library modules the results depend on beyond the defining module and what it imports (a module
             the scorer reaches through another, e.g. SEAT's embeddings): editing one reruns the jobs.
    resources: files of the repository the scorer or metric reads (paths relative to the repository root, e.g.
               WinoBias' substitutions), treated like its source.
    """

    name: str  # what a config entry's `measure` selects (default: its `dataset`, e.g. crows_pairs)
    families: tuple[str, ...]
    score: Callable[..., Any]
    parse_options: Callable[[dict, str], Any]
    rows: Callable[[Any, Any], list[dict]]
    description: str = ""
    paired: Callable[[Any, Any, str, Any], list[dict]] | None = None
    prompted: bool = False
    reads: str = "likelihoods"
    row_local: bool = False
    headlines: tuple[Headline, ...] = ()
    library: tuple[ModuleType, ...] = field(default=())
    resources: tuple[str, ...] = ()

    def __post_init__(self):
        if self.reads not in READS:
            raise ValueError(f"BenchmarkDef {self.name!r}: reads={self.reads!r}; one of {', '.join(READS)}")


def score_keywords(d: BenchmarkDef, model_name: str, model_entry: dict) -> dict:
    """The keyword arguments a scoring job passes to `d.score` beyond the common ones."""
    return {"model_entry": model_entry, "model_name": model_name} if d.prompted else {}


def score_items(d: BenchmarkDef, items, model, tokenizer, model_name: str, model_entry: dict, scoring: dict, stats):
    """`d.score` of `items` as every scoring job calls it: the model's family, the entry's `scoring` block and,
    for a prompted benchmark, the model entry and name (its chat template)."""
    return d.score(
        items, model, tokenizer, model_entry["family"], scoring, stats, **score_keywords(d, model_name, model_entry)
    )
