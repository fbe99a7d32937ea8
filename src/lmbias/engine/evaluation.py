"""The work behind the evaluation rules: scoring jobs, metric jobs and the summary job.

Kept out of the Snakemake scripts so that it is importable and unit-tested.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lmbias import registry
from lmbias.engine import job_timing
from lmbias.engine.batching import EngineStats, scoring_budget, scoring_precision
from lmbias.errors import ConfigError
from lmbias.io import write_table_atomic
from lmbias.job_runtime import pick_device
from lmbias.lazy import lazy_module
from lmbias.metrics.summary import (
    METRIC_SCHEMA,
    SUMMARY_SCHEMA,
    AggregateSettings,
    aggregate_over_seeds,
    carried_metadata,
    dataset_sha256,
    left_out_metadata,
    provenance,
    provenance_by_benchmark,
    scores_metadata,
    scores_metadata_by_benchmark,
    training_world_size,
    with_context,
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


def score_benchmark_job(
    items_path,
    output_path,
    model_name,
    model_entry,
    method_entry,
    benchmark_name,
    benchmark_entry,
    weights_dir=None,
    threads: int | None = None,
    max_tokens: int | None = None,
    timing_path=None,
) -> None:
    """Score one benchmark's items. `max_tokens`: padded tokens per forward pass (models.<model>.max_tokens,
    the rule's resource; None: the engine's default); `timing_path`: the job's timing file with its peak
    memory (lmbias.engine.job_timing; None: none written)."""
    definition = registry.definition(registry.measure_of(benchmark_entry), benchmark_name)
    registry.check_family(benchmark_name, benchmark_entry, model_entry["family"], model_name)
    torch.manual_seed(0)
    if threads:  # the job's Snakemake threads: parallel jobs must not oversubscribe the cores
        torch.set_num_threads(threads)
    device = pick_device()
    began = time.perf_counter()
    with job_timing.recorded(timing_path, device) as record:
        model, tokenizer = load_for_method(model_name, model_entry, method_entry, device)
        items = pq.read_table(items_path)
        stats = EngineStats()
        start = time.perf_counter()
        record.update(load_s=start - began, items=items.num_rows)
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
            job_progress(f"scoring {benchmark_name}", unit="inputs"),
        ):
            try:
                scores = definition.score(
                    items,
                    model,
                    tokenizer,
                    model_entry["family"],
                    registry.scoring_config(benchmark_name, benchmark_entry, model_name, model_entry),
                    stats,
                )
            finally:  # a failed job's record too: how far it got, and what it held
                job_timing.record_scoring(record, stats, budget, time.perf_counter() - start)
        elapsed = time.perf_counter() - start
        log.info(
            "scored %d items of %s with %s on %s: %d requests, %d unique inputs, %d forward passes (%s %d, "
            "%d halving(s))",
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
        write_table_atomic(scores, output_path, metadata=scoring_provenance(model, method_entry, 1, precision))


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


def _metric_rows(benchmark: str, benchmark_entry: dict, scores_path) -> list[dict]:
    """One benchmark's metric rows from its cached scores, with the options its `metric` block sets."""
    definition = registry.definition(registry.measure_of(benchmark_entry), benchmark)
    opts = definition.parse_options(benchmark_entry.get("metric", {}), f"benchmarks.{benchmark}.metric")
    rows = [{**r, "benchmark": benchmark} for r in definition.rows(pq.read_table(scores_path), opts)]
    log.info("%s: %d metric rows (%s)", benchmark, len(rows), opts)
    return rows


def compute_metric_job(benchmark, benchmark_entry, scores_path, output_path, model, method, seed) -> None:
    """metrics/{benchmark}.parquet: one benchmark's metric rows (a target of its own, built on request)."""
    rows = _metric_rows(benchmark, benchmark_entry, scores_path)
    table = pa.Table.from_pylist(with_context(rows, model, method, seed), schema=METRIC_SCHEMA)
    write_table_atomic(table, output_path, METRIC_SCHEMA, metadata=carried_metadata(scores_path))


def scores_benchmark(path) -> str:
    """The benchmark a scores file holds: its name in the contract path .../scores/{benchmark}.parquet."""
    path = Path(path)
    if path.parent.name != "scores" or path.suffix != ".parquet":
        raise ConfigError(f"{path}: not a scores file (.../scores/<benchmark>.parquet)")
    return path.stem


def compute_seed_metrics_job(benchmarks: dict, scores_paths, output_path, model, method, seed) -> None:
    """seed{k}/metrics.parquet: the metric rows of every benchmark of one (model, method, seed), the file
    summaries read. One job per seed rather than one per benchmark: metrics are cheap (about 2 s for all of
    a seed), while each job costs Snakemake a DAG node and a Python start; a paper grid has thousands.

    `benchmarks`: {name: entry with `dataset` and `metric`}; `scores_paths`: one scores file per benchmark
    (.../scores/{name}.parquet). Each benchmark's scores metadata is recorded under its name."""
    by_name = {}
    for path in scores_paths:
        name = scores_benchmark(path)
        if name in by_name:
            raise ConfigError(f"{path}: benchmark {name!r} is given twice")
        by_name[name] = path
    if set(by_name) != set(benchmarks):
        raise ConfigError(
            f"{output_path}: the scores files ({', '.join(sorted(by_name)) or 'none'}) do not match "
            f"the benchmarks to compute ({', '.join(sorted(benchmarks)) or 'none'})"
        )
    start = time.perf_counter()
    rows = []
    for name in sorted(benchmarks):
        rows += with_context(_metric_rows(name, benchmarks[name], by_name[name]), model, method, seed)
    table = pa.Table.from_pylist(rows, schema=METRIC_SCHEMA)
    log.info("%d metric rows of %d benchmarks in %.1f s", table.num_rows, len(benchmarks), time.perf_counter() - start)
    write_table_atomic(table, output_path, METRIC_SCHEMA, metadata=scores_metadata_by_benchmark(by_name))


def summarise_job(metric_paths, output_path, slices, left_out=(), aggregate: dict | None = None) -> None:
    """summary.parquet from metric files; `left_out` ({benchmark, reason, config_key}) goes to its metadata;
    `aggregate` is config.yaml's `aggregate` block (the interval across seeds)."""
    settings = AggregateSettings.from_config(aggregate)
    # The aggregation settings shape the mean rows, so they are part of what config_hash covers.
    hashed = {**slices, "aggregate": settings.to_dict()}
    # Generated benchmarks (no `data` entry) are pinned by the code and templates, i.e. by lmbias_version.
    data_sha = {
        name: dataset_sha256(slices["data"][entry["dataset"]])
        for name, entry in slices["benchmarks"].items()
        if entry["dataset"] in slices["data"]
    }
    config_side = {b: provenance(slices["model"], data_sha.get(b, ""), hashed) for b in slices["benchmarks"]}
    rows = []
    for path in metric_paths:
        # commit, versions and world sizes of the job that scored each benchmark
        scored, scored_by_benchmark = provenance_by_benchmark(path)
        for r in pq.read_table(path).to_pylist():
            prov = config_side.get(r["benchmark"]) or provenance(slices["model"], "", hashed)
            rows.append({**r, **prov, **scored_by_benchmark.get(r["benchmark"], scored)})
    table = aggregate_over_seeds(rows, settings)
    log.info(
        "summary: %d rows from %d metric files (interval across seeds: %s, confidence %g)",
        table.num_rows,
        len(metric_paths),
        settings.interval,
        settings.confidence,
    )
    for entry in left_out:
        log.warning("left out of the summary: %s (%s; %s)", entry["benchmark"], entry["reason"], entry["config_key"])
    write_table_atomic(table, output_path, SUMMARY_SCHEMA, metadata=left_out_metadata(list(left_out)))
