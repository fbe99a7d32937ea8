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

from lmbias.engine.lm import LanguageModel
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

    score(items, lm, scoring_cfg) -> pyarrow.Table   (per-item scores; lm: lmbias.engine.lm.LanguageModel, the
                                                      model and the requests a scorer may make of it; a
                                                      benchmark the families read differently in kind
                                                      gives one reading per family: `readings`)
    parse_options(metric_cfg, key) -> options                                         (ConfigError naming key)
    rows(scores, options) -> list[dict]                                               (summary-schema rows)
    paired(before, after, test, options) -> list[dict]   (optional: pre/post test of two score tables,
                                                           item by item; see lmbias.metrics.comparison)
    prompted: the scorer asks the model a prompt (WinoGender's multiple choice, BOLD's generation), so an
              instruct model's chat template applies (LanguageModel.prompt and .generate apply it). Sentence-
              likelihood benchmarks read raw text and never ask for it.
    reads: what the scorer reads from the model (READS): decides which methods apply (Self-Debias: likelihoods).
    row_local: the scorer returns exactly one score row per item, in item order, computed from that item alone,
               so the items may be split over processes and the parts concatenated (lmbias.engine.distributed).
               A scorer that pools items (SEAT's effect sizes) or deduplicates across them keeps False.
    headlines: the numbers that head the summary page and table, with an unbiased model's value.
    classified: the families whose score files are generated texts (GENERATIONS-like tables: a continuation and
                its group per row) that the `scorers` block's classifiers read (lmbias.workflow.scorers). A
                masked model's HONEST fills are single tokens, not text a toxicity classifier should read.
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
    classified: tuple[str, ...] = ()
    library: tuple[ModuleType, ...] = field(default=())
    resources: tuple[str, ...] = ()

    def __post_init__(self):
        if self.reads not in READS:
            raise ValueError(f"BenchmarkDef {self.name!r}: reads={self.reads!r}; one of {', '.join(READS)}")
        if not set(self.classified) <= set(self.families):
            raise ValueError(f"BenchmarkDef {self.name!r}: classified {self.classified} not among its families")
        by_family = getattr(self.score, "readings", None)
        if by_family is not None and set(by_family) != set(self.families):
            raise ValueError(
                f"BenchmarkDef {self.name!r}: families {sorted(self.families)} but readings for {sorted(by_family)}"
            )


def readings(what: str, **by_family: Callable[..., Any]) -> Callable[..., Any]:
    """A scorer that reads the model as its family's reading: `score(items, lm, scoring)` calls
    `by_family[lm.family](items, lm, scoring)`. Where the papers read the families differently in kind (a causal
    LM's sentence log-likelihood, a masked LM's tokens at their masks, an encoder-decoder's decoder writing the
    word out), the definition names each reading here and the readings themselves never ask the family. A family
    without a reading is refused with a DataError naming `what` and the family (LanguageModel.require)."""

    def score(items, lm: LanguageModel, scoring=None):
        lm.require(tuple(by_family), what)
        return by_family[lm.family](items, lm, scoring)

    score.readings = dict(by_family)  # what a test or the docs can read back
    return score


def score_items(d: BenchmarkDef, items, model, tokenizer, model_name: str, model_entry: dict, scoring: dict, stats):
    """`d.score` of `items` as every scoring job calls it: the model behind one LanguageModel (its family, entry
    and name, which holds the chat template) and the entry's `scoring` block."""
    lm = LanguageModel(
        model, tokenizer, model_entry["family"], model_entry=model_entry, model_name=model_name, stats=stats
    )
    return d.score(items, lm, scoring)
