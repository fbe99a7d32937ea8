"""Where the `scorers` block meets the workflow: which score files each configured classifier reads, where its
classified files go, and what the metric jobs take of it.

A scorer classifies the generated texts of a benchmark whose definition says that its score files hold
generations for the model's family (BenchmarkDef.classified: BOLD's continuations, HONEST's completions of causal
and encoder-decoder models; a masked model's HONEST fills are single tokens, not text to classify). Every such
benchmark of a (model, method) summary is classified by every configured scorer, one job each (rule
classify_generations): results/{model}/{method}/seed{k}/classified/{benchmark}/{scorer}.parquet. The generations
are read from their score file, never generated again for a new scorer; the metric jobs add the scorer's rows
(lmbias.metrics.classifier_scores) to the benchmark's.

What reruns what: a scorer's weights and its classification settings (kind, labels, activation, text,
max_length, batch_size, precision, dtype) are the classify job's params; its metric options (threshold, bootstrap,
seed, confidence) are the metric jobs' params only, so editing them classifies nothing again; `max_tokens` is a
resource (no number depends on it).
"""

from __future__ import annotations

import re
from pathlib import Path

from lmbias.benchmarks import catalog
from lmbias.config import hub_model_folder
from lmbias.engine.batching import DEFAULT_MAX_TOKENS
from lmbias.engine.classifiers import METRIC_KEYS, RESOURCE_KEYS, scorer_spec
from lmbias.errors import ConfigError

#: Where a scorer given by hub id is fetched to (rule fetch_hub_scorer), beside the hub models.
SCORERS_FOLDER = "scorers"


def scorers(config: dict) -> dict[str, dict]:
    """The configured scorers ({} when the block is absent)."""
    return dict(config.get("scorers") or {})


def classified_benchmark(config: dict, model: str, benchmark: str) -> bool:
    """Whether `benchmark`'s score files hold generations a scorer classifies, for `model`'s family."""
    definition = catalog.definition_of(config["benchmarks"][benchmark], benchmark)
    return config["models"][model]["family"] in definition.classified


def classified_file(model: str, method: str, seed, benchmark: str, scorer: str) -> str:
    return f"results/{model}/{method}/seed{seed}/classified/{benchmark}/{scorer}.parquet"


def classified_files(config: dict, model: str, method: str, seed, benchmarks) -> list[str]:
    """Every scorer's classified file of each of `benchmarks` whose generations it classifies."""
    return [
        classified_file(model, method, seed, b, s)
        for b in benchmarks
        if classified_benchmark(config, model, b)
        for s in scorers(config)
    ]


def scorer_folder(config: dict, scorer: str) -> str:
    """A hub scorer's fetched folder (rule fetch_hub_scorer): <models_dir>/scorers/<name>."""
    return hub_model_folder(config, f"{SCORERS_FOLDER}/{scorer}")


def scorer_weights_input(config: dict, scorer: str) -> str:
    """The folder a classify job loads: a local `path` (which must exist) or the hub id's fetched folder."""
    entry = scorers(config)[scorer]
    if "path" in entry:
        if not Path(entry["path"]).exists():
            raise ConfigError(f"scorers.{scorer}.path: classifier folder {entry['path']} does not exist")
        return entry["path"]
    return scorer_folder(config, scorer)


def classification_entry(config: dict, scorer: str) -> dict:
    """What classifying reads of a scorer entry: not its metric options nor its resources, and for a hub id the
    folder it was fetched into (`snapshot`)."""
    entry = scorers(config)[scorer]
    kept = {k: v for k, v in entry.items() if k not in METRIC_KEYS + RESOURCE_KEYS}
    if "hub_id" in entry:
        kept["snapshot"] = scorer_folder(config, scorer)
    return kept


def scorer_max_tokens(config: dict, scorer: str) -> int:
    """scorers.<name>.max_tokens: padded tokens per forward pass, a resource of the classify job (no probability
    depends on it, so editing it classifies nothing again)."""
    return int(scorers(config)[scorer].get("max_tokens", DEFAULT_MAX_TOKENS))


def scorer_metric_options(config: dict) -> dict[str, dict]:
    """{scorer: its entry as the metric jobs read it}: the metric options and what they are checked with (the
    whole entry but its resources; a metric job's rerun after a classification setting changed is the cheap one
    that follows the classify job's anyway)."""
    return {name: {k: v for k, v in entry.items() if k not in RESOURCE_KEYS} for name, entry in scorers(config).items()}


def hub_scorer_pattern(config: dict) -> str:
    """Regex of the scorers given by hub id (rule fetch_hub_scorer's wildcard)."""
    names = sorted(n for n, e in scorers(config).items() if "hub_id" in e)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def check_scorers(config: dict) -> None:
    """ConfigError naming `scorers.<name>...`: an entry the classifier module refuses (labels are checked against
    the model's own when it is loaded)."""
    for name, entry in scorers(config).items():
        scorer_spec(name, entry)
