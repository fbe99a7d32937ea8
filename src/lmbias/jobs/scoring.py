"""Scoring one benchmark with a model: loading the model a method scores, the process-wide settings every
scoring job starts from, one benchmark's scores with an already loaded model (the definition's scorer under the
model's token budget and precision) and a score file's provenance metadata. The job scoring several benchmarks
of a model is lmbias.jobs.model_scoring; data-parallel processes are lmbias.jobs.sharded.
"""

from __future__ import annotations

import logging
import time

from lmbias.benchmarks import catalog
from lmbias.benchmarks.definition import score_items
from lmbias.engine import job_timing
from lmbias.engine.batching import EngineStats, scoring_budget, scoring_precision
from lmbias.errors import ConfigError
from lmbias.job_runtime import pick_device
from lmbias.lazy import lazy_module
from lmbias.metrics.summary import (
    scores_metadata,
    training_world_size,
)
from lmbias.progress import job_progress, rate_line

torch = lazy_module("torch")  # imported on first use: DAG builds and metric jobs never need it

log = logging.getLogger(__name__)


#: Method kinds scored on the base model as loaded (online skew is applied by the WinoBias metric).
BASE_MODEL_KINDS = frozenset({"pretrained", "online"})


def load_for_method(model_name: str, model_entry: dict, method_entry: dict, device):
    """(model, tokenizer) for one method: the base model for pretrained/online, else the method's model
    folder (`method_entry["model_dir"]`, results/{model}/{method}/seed{k}/model) through load_method_model."""
    from lmbias.engine.model_spec import model_spec
    from lmbias.engine.models import load_model

    kind = method_entry["kind"]
    spec = model_spec(model_name, {k: v for k, v in model_entry.items() if k != "training"})
    if kind in BASE_MODEL_KINDS:
        return load_model(spec, device=device)
    if kind == "self_debias":  # the base model behind the method's prefix (nothing trained)
        from lmbias.engine.self_debias import wrap

        model, tokenizer = load_model(spec, device=device)
        settings = {k: v for k, v in method_entry.items() if k in ("prefix", "decay_constant", "epsilon")}
        return wrap(model, tokenizer, spec.family, settings), tokenizer
    method_dir = method_entry.get("model_dir")
    if not method_dir:
        raise ConfigError(
            f"method kind {kind!r} of model {model_name!r}: no model folder given to score "
            "(results/{model}/{method}/seed{k}/model)"
        )
    from lmbias.engine.method_folders import load_method_model

    return load_method_model(spec, method_dir, device=device)


def prepare_scoring(threads: int | None):
    """The device to score on, after the process-wide settings every scoring job starts from: torch's seed
    (0) and the job's Snakemake threads (parallel jobs must not oversubscribe the cores)."""
    torch.manual_seed(0)
    if threads:
        torch.set_num_threads(threads)
    return pick_device()


def score_loaded(
    model, tokenizer, device, model_name, model_entry, benchmark_name, benchmark_entry, items, max_tokens, record
):
    """(scores, effective precision) of one benchmark's `items` with an already loaded model; `record` (a
    job_timing record, or None) gets the scoring's seconds, forward passes and token budget, also on failure."""
    definition = catalog.definition_of(benchmark_entry, benchmark_name)
    stats = EngineStats()
    start = time.perf_counter()
    precision = effective_precision(
        model_entry.get("precision", "auto"), model, device, f"models.{model_name}.precision"
    )
    log.info(
        "weights %s, autocast %s (models.%s.dtype %s, precision %s) on %s",
        _weights_dtype(model),
        precision,
        model_name,
        model_entry.get("dtype", "auto"),
        model_entry.get("precision", "auto"),
        device,
    )
    with (
        scoring_budget(max_tokens, f"models.{model_name}.max_tokens") as budget,
        scoring_precision(precision, f"models.{model_name}.precision"),
        job_progress(f"scoring {benchmark_name}", unit="items", total=items.num_rows) as tracker,
    ):
        try:
            scores = score_items(
                definition, items, model, tokenizer, model_name, model_entry, benchmark_entry.get("scoring", {}), stats
            )
        finally:  # a failed job's record too: how far it got, and what it held
            if record is not None:
                job_timing.record_scoring(record, stats, budget, time.perf_counter() - start)
    elapsed = time.perf_counter() - start
    log.info(
        "scored %d items of %s with %s on %s: %d requests, %d unique inputs, %d forward passes (%s %d, %d halving(s))",
        items.num_rows,
        benchmark_name,
        model_name,
        device,
        stats.requests,
        stats.unique_inputs,
        stats.forward_passes,
        budget.key,
        budget.max_tokens,
        budget.halvings,
    )
    log.info(rate_line("scored", items.num_rows, "items", elapsed))
    if tracker.tokens:  # a generated reading: the tokens written, over the benchmark's whole scoring
        log.info(rate_line("generated", tracker.tokens, "tokens", elapsed))
    return scores, precision


def score_file_metadata(model, method_entry: dict, world_size: int, precision, score_key: str | None) -> dict:
    """A score file's metadata: its provenance (scoring_provenance) and, when given, its score key."""
    from lmbias.metrics.score_keys import SCORE_KEY_METADATA

    metadata = scoring_provenance(model, method_entry, world_size, precision)
    return {**metadata, SCORE_KEY_METADATA: score_key} if score_key else metadata


def _weights_dtype(model) -> str:
    from lmbias.engine.models import dtype_name

    return dtype_name(model) if model is not None else ""


def effective_precision(precision: str, model, device, key: str = "precision") -> str:
    """The autocast a model entry's `precision` means for `model` on `device` (never `auto`): auto is fp16 on
    CUDA for fp16 weights (a bfloat16 autocast would round them to bfloat16), bf16 elsewhere on CUDA, and
    fp32 (no autocast: bf16 or fp16 weights then compute in their own dtype) on any other device."""
    from lmbias.engine.batching import PRECISIONS

    if precision not in PRECISIONS:
        raise ConfigError(f"{key}: {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    if torch.device(device).type != "cuda":
        return "fp32"
    return "fp16" if _weights_dtype(model) == "fp16" else "bf16"


def scoring_provenance(model, method_entry: dict, world_size: int, precision: str | None = None) -> dict[str, str]:
    """Scores-file metadata: the commit the weights came from, this environment's library versions, the
    number of scoring processes and (trained methods) of training processes, the weights' dtype as loaded
    and the autocast `precision` the forward passes ran under."""
    from lmbias.engine.models import resolved_commit

    return scores_metadata(
        resolved_commit(model),
        world_size,
        training_world_size(method_entry.get("model_dir")),
        weights_dtype=_weights_dtype(model),
        precision=precision,
    )
