"""The metric jobs: one benchmark's metric rows from its cached scores (metrics/{benchmark}.parquet), every
benchmark of a (model, method, seed) (seed{k}/metrics.parquet, what summaries read) and the summary of a
(model, method) over its seeds. Each reads only score files: the definition's metric functions, no model.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lmbias.benchmarks import catalog
from lmbias.errors import ConfigError
from lmbias.io import write_table_atomic
from lmbias.metrics.classifier_scores import ClassifierScoreOptions, classifier_metric_rows
from lmbias.metrics.score_keys import resolve_scores
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
    scores_metadata_by_benchmark,
    with_context,
)

log = logging.getLogger(__name__)


def _metric_rows(benchmark: str, benchmark_entry: dict, scores_path) -> list[dict]:
    """One benchmark's metric rows from its cached scores, with the options its `metric` block sets."""
    definition = catalog.definition_of(benchmark_entry, benchmark)
    opts = definition.parse_options(benchmark_entry.get("metric", {}), f"benchmarks.{benchmark}.metric")
    rows = [{**r, "benchmark": benchmark} for r in definition.rows(pq.read_table(scores_path), opts)]
    log.info("%s: %d metric rows (%s)", benchmark, len(rows), opts)
    return rows


def classified_rows(classified_paths, scorers: dict) -> list[dict]:
    """The metric rows of the scorers' classified files (.../classified/{benchmark}/{scorer}.parquet, rule
    classify_generations), each under its benchmark, with the options of its `scorers` entry."""
    rows = []
    for path in map(Path, classified_paths or ()):
        benchmark, scorer = path.parent.name, path.stem
        if path.parent.parent.name != "classified" or scorer not in scorers:
            raise ConfigError(
                f"{path}: not a classified file of a configured scorer (.../classified/<benchmark>/<scorer>)"
            )
        options = ClassifierScoreOptions.from_config(scorer, scorers[scorer])
        found = classifier_metric_rows(pq.read_table(path), options, benchmark)
        log.info("%s: %d metric rows of scorers.%s", benchmark, len(found), scorer)
        rows += found
    return rows


def compute_metric_job(
    benchmark, benchmark_entry, scores_path, output_path, model, method, seed, classified=(), scorers=None
) -> None:
    """metrics/{benchmark}.parquet: one benchmark's metric rows (a target of its own, built on request), and its
    scorers' rows (`classified`: the scorers' files of its generations; `scorers`: their entries).
    `scores_path`: its score file, or the scores.json manifest of the job that scored it (score_keys)."""
    scores_path = resolve_scores([scores_path], [benchmark])[0]
    rows = _metric_rows(benchmark, benchmark_entry, scores_path) + classified_rows(classified, scorers or {})
    table = pa.Table.from_pylist(with_context(rows, model, method, seed), schema=METRIC_SCHEMA)
    write_table_atomic(table, output_path, METRIC_SCHEMA, metadata=carried_metadata(scores_path))


def scores_benchmark(path) -> str:
    """The benchmark a scores file holds: its name in the contract path .../scores/{benchmark}.parquet."""
    path = Path(path)
    if path.parent.name != "scores" or path.suffix != ".parquet":
        raise ConfigError(f"{path}: not a scores file (.../scores/<benchmark>.parquet)")
    return path.stem


def compute_seed_metrics_job(
    benchmarks: dict, scores_paths, output_path, model, method, seed, classified=(), scorers=None
) -> None:
    """seed{k}/metrics.parquet: the metric rows of every benchmark of one (model, method, seed), the file
    summaries read. One job per seed rather than one per benchmark: metrics are cheap (about 2 s for all of
    a seed), while each job costs Snakemake a DAG node and a Python start; a paper grid has thousands.

    `benchmarks`: {name: entry with `dataset` and `metric`}; `scores_paths`: one scores file per benchmark
    (.../scores/{name}.parquet), or the scores.json manifest naming them (lmbias.metrics.score_keys). Each
    benchmark's scores metadata is recorded under its name. `classified`, `scorers`: the scorers' files of the
    generating benchmarks and their entries (classified_rows)."""
    by_name = {}
    for path in resolve_scores(scores_paths, list(benchmarks)):
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
    rows += with_context(classified_rows(classified, scorers or {}), model, method, seed)
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
