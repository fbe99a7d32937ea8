"""Paired pre/post comparisons: one benchmark's per-item scores of two (model, method) pairs, item by item.

Bartl et al. (2020) test whether fine-tuning changed BEC-Pro associations with a paired test over the
same sentences before and after. A comparison in config.yaml names the benchmark and the two sides:

    comparisons:
      bert-base-cds:
        benchmark: bec_pro_en
        before: {model: bert-base, method: pretrained}
        after: {model: bert-base, method: cds}
        test: wilcoxon                      # or t

and `results/tables/paired/{name}.parquet` holds the test's rows. The two sides may also be two models
(a checkpoint fine-tuned elsewhere, configured as its own model, against its base).

A side with several seeds is first averaged item by item over its seeds: the test then asks whether the
method moves the items, not whether one seed does. Which benchmarks can be compared is declared by the
benchmark module (`BenchmarkDef.paired`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lmbias import registry
from lmbias.errors import ConfigError, DataError
from lmbias.io import write_table_atomic
from lmbias.metrics.summary import METRIC_COLUMNS, with_context

log = logging.getLogger(__name__)

SIDES = ("before", "after")
PAIRED_SCHEMA = pa.schema(
    [
        ("comparison", pa.string()),
        ("before_model", pa.string()),
        ("before_method", pa.string()),
        ("before_seeds", pa.int64()),
        ("after_model", pa.string()),
        ("after_method", pa.string()),
        ("after_seeds", pa.int64()),
    ]
    + METRIC_COLUMNS
)


@dataclass(frozen=True)
class Side:
    model: str
    method: str


def comparable_benchmarks(benchmarks: dict) -> list[str]:
    return sorted(
        b
        for b, cfg in benchmarks.items()
        if registry.is_measurable(cfg) and registry.definitions()[registry.measure_of(cfg)].paired is not None
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
            registry.check_family(bench, config["benchmarks"][bench], config["models"][model]["family"], model)
        except ConfigError as err:
            raise ConfigError(f"{key}.{side}: {err}") from None
        sides.append(Side(model, method))
    if sides[0] == sides[1]:
        raise ConfigError(f"{key}: before and after are the same model and method ({sides[0].model}/{sides[0].method})")
    return sides[0], sides[1]


def mean_over_seeds(tables: list[pa.Table], key: str = "row_id") -> pa.Table:
    """One score table whose floating-point columns are the item-wise means over `tables` (one per seed).

    The seeds must score the same items: the same keys and the same non-float columns (the item's words),
    else the comparison would pair different sentences.
    """
    if not tables:
        raise DataError("paired comparison: no score tables")
    first = tables[0].sort_by(key)
    if len(tables) == 1:
        return first
    floats = [f.name for f in first.schema if pa.types.is_floating(f.type)]
    others = [n for n in first.column_names if n not in floats]
    sums = {name: np.asarray(first.column(name).to_numpy(zero_copy_only=False), dtype=np.float64) for name in floats}
    for i, table in enumerate(tables[1:], start=1):
        table = table.sort_by(key)
        if table.select(others).to_pylist() != first.select(others).to_pylist():
            raise DataError(f"paired comparison: seed table {i} scores different items than seed table 0")
        for name in floats:
            sums[name] = sums[name] + np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)
    out = first
    for name in floats:
        out = out.set_column(out.column_names.index(name), name, pa.array(sums[name] / len(tables)))
    return out


def paired_rows(
    benchmark: str, benchmark_entry: dict, before: list[pa.Table], after: list[pa.Table], test: str
) -> list[dict]:
    definition = registry.definition(registry.measure_of(benchmark_entry), benchmark)
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
