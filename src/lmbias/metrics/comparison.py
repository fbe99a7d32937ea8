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
benchmark's definition (`BenchmarkDef.paired`); the jobs that read definitions are lmbias.jobs.comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lmbias.errors import DataError
from lmbias.metrics.summary import METRIC_COLUMNS

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
