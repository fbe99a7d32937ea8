"""The long-format results schema shared by metric files and summary.parquet, plus provenance.

One row per (model, method, seed or aggregate, benchmark, metric, variant, subset). Metric files
(`metrics/{metric}.parquet`) hold the per-seed rows; `summary.parquet` adds an aggregate over seeds
(seed = "mean": mean value, t-interval over seeds when there are at least two).

Configured benchmarks that a summary leaves out (no data and `missing_data: skip` or listed in
`optional_benchmarks`, or not in a run's `only_benchmarks`) are listed in the file's metadata with the
reason: `pandas.read_parquet(path).attrs["left_out"]` (or `left_out(path)`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy import stats as sps

from lmbias import __version__

METRIC_COLUMNS = [
    ("benchmark", pa.string()),
    ("metric", pa.string()),
    ("variant", pa.string()),
    ("subset", pa.string()),
    ("value", pa.float64()),
    ("ci_low", pa.float64()),
    ("ci_high", pa.float64()),
    ("p_value", pa.float64()),
    ("n", pa.int64()),
]
PROVENANCE_COLUMNS = [
    ("model_id", pa.string()),
    ("model_revision", pa.string()),
    ("model_commit", pa.string()),  # the hub commit the weights were read from ("" for local folders)
    ("data_sha256", pa.string()),
    ("lmbias_version", pa.string()),
    ("config_hash", pa.string()),
]
SUMMARY_SCHEMA = pa.schema(
    [("model", pa.string()), ("method", pa.string()), ("seed", pa.string())] + METRIC_COLUMNS + PROVENANCE_COLUMNS
)
METRIC_SCHEMA = pa.schema([("model", pa.string()), ("method", pa.string()), ("seed", pa.string())] + METRIC_COLUMNS)
AGGREGATE_SEED = "mean"
#: Parquet metadata keys: the hub commit a scores/metric file was computed with, and the benchmarks a
#: summary left out. PANDAS_ATTRS is what pandas restores as DataFrame.attrs.
COMMIT_KEY = "lmbias.model_commit"
LEFT_OUT_KEY = "lmbias.left_out"
PANDAS_ATTRS_KEY = "PANDAS_ATTRS"


def left_out_metadata(left_out: list[dict]) -> dict[str, str]:
    """Summary file metadata listing left-out benchmarks ({benchmark, reason, config_key} each)."""
    text = json.dumps(list(left_out), sort_keys=True)
    return {LEFT_OUT_KEY: text, PANDAS_ATTRS_KEY: json.dumps({"left_out": json.loads(text)})}


def left_out(path: str | os.PathLike) -> list[dict]:
    """The configured benchmarks a summary file left out, with the reason for each."""
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata.get(LEFT_OUT_KEY.encode(), b"[]"))


def file_commit(path: str | os.PathLike) -> str:
    """The model commit recorded in a scores or metric file ("" when none)."""
    metadata = pq.read_schema(path).metadata or {}
    return metadata.get(COMMIT_KEY.encode(), b"").decode()


def stable_hash(obj) -> str:
    """sha256 of a JSON rendering with sorted keys: the same config slice always gives the same hash."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def dataset_sha256(data_entry: dict) -> str:
    """One checksum for a dataset: sha256 over its files' names and pinned sha256 values."""
    lines = sorted(f"{name} {spec['sha256']}" for name, spec in data_entry["files"].items())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def provenance(model_entry: dict, data_sha: str, config_slices: dict, commit: str = "") -> dict:
    return {
        "model_id": model_entry.get("hub_id") or model_entry.get("path"),
        "model_revision": str(model_entry.get("revision", "")),
        "model_commit": commit,
        "data_sha256": data_sha,
        "lmbias_version": __version__,
        "config_hash": stable_hash(config_slices),
    }


def with_context(rows: Iterable[dict], model: str, method: str, seed: str | int, prov: dict | None = None) -> list[dict]:
    """Metric rows with their model/method/seed (and, for the summary, provenance); NaN becomes null."""
    out = []
    for r in rows:
        full = {"model": model, "method": method, "seed": str(seed), **r, **(prov or {})}
        for key in ("value", "ci_low", "ci_high", "p_value"):
            v = full.get(key)
            full[key] = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        out.append(full)
    return out


def aggregate_over_seeds(rows: list[dict]) -> pa.Table:
    """Per-seed rows plus one aggregate row per (benchmark, metric, variant, subset)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["benchmark"], r["metric"], r["variant"], r["subset"]), []).append(r)
    agg = []
    for key, members in groups.items():
        vals = np.array([m["value"] for m in members if m["value"] is not None], dtype=np.float64)
        first = dict(members[0])
        first["seed"] = AGGREGATE_SEED
        first["n"] = int(sum(m["n"] for m in members))
        if len(members) == 1:
            agg.append(first)  # one seed: the aggregate is that seed's row (its CI included)
            continue
        first["p_value"] = None
        if len(vals) == 0:
            first.update(value=None, ci_low=None, ci_high=None)
        else:
            mean = float(vals.mean())
            first["value"] = mean
            if len(vals) >= 2 and vals.std(ddof=1) > 0:
                half = float(sps.t.ppf(0.975, len(vals) - 1) * vals.std(ddof=1) / math.sqrt(len(vals)))
                first["ci_low"], first["ci_high"] = mean - half, mean + half
            else:
                first["ci_low"] = first["ci_high"] = mean
        agg.append(first)
    return pa.Table.from_pylist(rows + agg, schema=SUMMARY_SCHEMA)
