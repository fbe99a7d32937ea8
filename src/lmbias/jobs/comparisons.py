"""Paired pre/post comparisons (config.yaml `comparisons:`): which benchmarks have a paired test (their
definition's `paired`), the cross-checks of an entry, and the job writing results/tables/paired/{name}.parquet.
The statistics themselves are lmbias.metrics.comparison's and the benchmarks' own.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq

from lmbias.benchmarks import catalog
from lmbias.errors import ConfigError
from lmbias.io import write_table_atomic
from lmbias.metrics.comparison import PAIRED_SCHEMA, SIDES, Side, mean_over_seeds
from lmbias.metrics.summary import with_context

log = logging.getLogger(__name__)


def comparable_benchmarks(benchmarks: dict) -> list[str]:
    return sorted(
        b
        for b, cfg in benchmarks.items()
        if catalog.is_measurable(cfg) and catalog.definitions()[catalog.measure_of(cfg)].paired is not None
    )


def check_comparison(name: str, entry: dict, config: dict) -> tuple[Side, Side]:
    """Cross-checks a schema cannot express; every message names the `comparisons.<name>...` key."""
    key = f"comparisons.{name}"
    bench = entry["benchmark"]
    if bench not in config["benchmarks"]:
        raise ConfigError(
            f"{key}.benchmark: unknown benchmark {bench!r}; configured: {', '.join(sorted(config['benchmarks']))}"
        )
    if bench not in comparable_benchmarks(config["benchmarks"]):
        raise ConfigError(
            f"{key}.benchmark: {bench!r} has no paired pre/post test; "
            f"benchmarks that have one: {', '.join(comparable_benchmarks(config['benchmarks'])) or 'none'}"
        )
    sides = []
    for side in SIDES:
        model, method = entry[side]["model"], entry[side]["method"]
        if model not in config["models"]:
            raise ConfigError(
                f"{key}.{side}.model: unknown model {model!r}; configured: {', '.join(sorted(config['models']))}"
            )
        if method not in config["methods"]:
            raise ConfigError(
                f"{key}.{side}.method: unknown method {method!r}; configured: {', '.join(sorted(config['methods']))}"
            )
        try:
            catalog.check_family(bench, config["benchmarks"][bench], config["models"][model]["family"], model)
        except ConfigError as err:
            raise ConfigError(f"{key}.{side}: {err}") from None
        sides.append(Side(model, method))
    if sides[0] == sides[1]:
        raise ConfigError(f"{key}: before and after are the same model and method ({sides[0].model}/{sides[0].method})")
    return sides[0], sides[1]


def paired_rows(
    benchmark: str, benchmark_entry: dict, before: list[pa.Table], after: list[pa.Table], test: str
) -> list[dict]:
    definition = catalog.definition_of(benchmark_entry, benchmark)
    if definition.paired is None:
        raise ConfigError(f"benchmark {benchmark!r} has no paired pre/post test")
    options = definition.parse_options(benchmark_entry.get("metric", {}), f"benchmarks.{benchmark}.metric")
    rows = definition.paired(mean_over_seeds(before), mean_over_seeds(after), test, options)
    return [{**r, "benchmark": benchmark} for r in rows]


def paired_comparison_job(
    name: str, entry: dict, benchmark_entry: dict, before_paths: list[str], after_paths: list[str], output_path: str
) -> None:
    from lmbias.metrics.score_keys import resolve_scores

    # each side's score files, or the scores.json manifests of the jobs that wrote them (one per seed)
    before = [pq.read_table(p) for p in resolve_scores(before_paths, [entry["benchmark"]])]
    after = [pq.read_table(p) for p in resolve_scores(after_paths, [entry["benchmark"]])]
    rows = paired_rows(entry["benchmark"], benchmark_entry, before, after, entry.get("test", "wilcoxon"))
    context = {
        "comparison": name,
        "before_seeds": len(before),
        "after_seeds": len(after),
        **{f"{side}_{part}": entry[side][part] for side in SIDES for part in ("model", "method")},
    }
    rows = [
        {**context, **{k: v for k, v in r.items() if k not in ("model", "method", "seed")}}
        for r in with_context(rows, "", "", "")
    ]
    log.info(
        "comparison %s: %d rows (%s, %d vs %d seeds)", name, len(rows), entry["benchmark"], len(before), len(after)
    )
    write_table_atomic(pa.Table.from_pylist(rows, schema=PAIRED_SCHEMA), output_path, PAIRED_SCHEMA)
