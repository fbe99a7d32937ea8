"""The long-format results schema shared by metric files and summary.parquet, plus provenance.

One row per (model, method, seed or aggregate, benchmark, metric, variant, subset). Metric files hold the
per-seed rows: `seed{k}/metrics.parquet` every benchmark of one seed (what summaries read), and
`seed{k}/metrics/{benchmark}.parquet` one benchmark's (built on request). `summary.parquet` adds one
aggregate row over seeds (seed = "mean") per (benchmark, metric, variant, subset): the mean of the seeds'
non-null values, their sample std (`std`, ddof=1), how many seeds it is over (`n_seeds`) and a confidence
interval across seeds (config.yaml `aggregate`: a t-interval by default, or a seeded percentile bootstrap
over the seeds). A row's `interval` column names how its ci_low/ci_high were computed: "t" or "bootstrap"
for an aggregate over two or more seeds, otherwise the metric's own interval (e.g. "bootstrap_lines" for
WinoBias F1, "wilson" for DA-score; null when the metric gives none). A mean over exactly one seed's value
is that seed's row: its own interval and p-value.

Provenance columns state what computed the numbers: the library versions, the weights' dtype, the autocast
precision and the number of processes of the scoring job (recorded in the scores file's metadata at scoring
time, carried through the metric file: per benchmark in a seed's metrics.parquet) and of the training job (the trained
model's training.json). Where the seeds of an aggregate row differ, its string columns hold the distinct values
comma-joined and its world-size columns are null.

Configured benchmarks that a summary leaves out (no data and `missing_data: skip` or listed in
`optional_benchmarks`, or not in a run's `only_benchmarks`) are listed in the file's metadata with the
reason: `pandas.read_parquet(path).attrs["left_out"]` (or `left_out(path)`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from importlib import metadata as importlib_metadata

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lmbias import __version__
from lmbias.errors import DataError
from lmbias.lazy import lazy_module
from lmbias.options import check_block

sps = lazy_module("scipy.stats")  # imported on first use: DAG builds never run a test

METRIC_COLUMNS = [
    ("benchmark", pa.string()),
    ("metric", pa.string()),
    ("variant", pa.string()),
    ("subset", pa.string()),
    ("value", pa.float64()),
    ("ci_low", pa.float64()),
    ("ci_high", pa.float64()),
    ("interval", pa.string()),  # how ci_low/ci_high were computed (null: no interval)
    ("p_value", pa.float64()),
    ("n", pa.int64()),
]
#: Summary only: spread across seeds. Per-seed rows: std null, n_seeds 1 (0 when the value is null).
SEED_COLUMNS = [
    ("std", pa.float64()),  # sample std (ddof=1) of the seeds' values; null below two seeds
    ("n_seeds", pa.int64()),  # seeds whose (non-null) value the row's value is over
]
#: Library versions recorded in a scores file at scoring time: column name -> distribution name.
VERSION_PACKAGES = {
    "torch_version": "torch",
    "transformers_version": "transformers",
    "accelerate_version": "accelerate",
    "spacy_version": "spacy",
}
WORLD_SIZE_COLUMNS = ("train_world_size", "score_world_size")
PROVENANCE_COLUMNS = (
    [
        ("model_id", pa.string()),
        ("model_revision", pa.string()),
        ("model_commit", pa.string()),  # the hub commit the weights were read from ("" for local folders)
        ("data_sha256", pa.string()),
        ("lmbias_version", pa.string()),
        ("config_hash", pa.string()),
    ]
    + [(name, pa.string()) for name in VERSION_PACKAGES]
    + [
        ("weights_dtype", pa.string()),  # the scored model's weights at load: fp32, bf16 or fp16 (models.<m>.dtype)
        (
            "precision",
            pa.string(),
        ),  # the scoring forward passes' autocast: fp32 (none), bf16 or fp16 (models.<m>.precision)
        ("train_world_size", pa.int64()),  # processes that trained the model (null: pretrained, online, sd)
        ("score_world_size", pa.int64()),  # processes that scored the benchmark
    ]
)
_KEY_COLUMNS = [("model", pa.string()), ("method", pa.string()), ("seed", pa.string())]
SUMMARY_SCHEMA = pa.schema(_KEY_COLUMNS + METRIC_COLUMNS + SEED_COLUMNS + PROVENANCE_COLUMNS)
METRIC_SCHEMA = pa.schema(_KEY_COLUMNS + METRIC_COLUMNS)
AGGREGATE_SEED = "mean"
#: Parquet metadata keys: what a scores file was computed with (carried on to its metric file), and the
#: benchmarks a summary left out. PANDAS_ATTRS is what pandas restores as DataFrame.attrs.
COMMIT_KEY = "lmbias.model_commit"
VERSIONS_KEY = "lmbias.versions"  # JSON {column: version or null}, VERSION_PACKAGES
SCORE_WORLD_SIZE_KEY = "lmbias.score_world_size"
TRAIN_WORLD_SIZE_KEY = "lmbias.train_world_size"  # absent: a model that was not trained here
DTYPE_KEY = "lmbias.weights_dtype"  # the weights' dtype as loaded (lmbias.engine.models.dtype_name)
PRECISION_KEY = "lmbias.precision"  # the autocast the forward passes ran under, `auto` resolved
#: Scoring-side columns read from a scores file's metadata as they are: (column, metadata key).
_SCORED_STRING_COLUMNS = (("weights_dtype", DTYPE_KEY), ("precision", PRECISION_KEY))
SCORES_METADATA_KEYS = (COMMIT_KEY, VERSIONS_KEY, SCORE_WORLD_SIZE_KEY, TRAIN_WORLD_SIZE_KEY, DTYPE_KEY, PRECISION_KEY)
#: A seed's metrics.parquet holds several benchmarks, each scored by its own job: JSON {benchmark: the
#: SCORES_METADATA_KEYS of its scores file}.
BY_BENCHMARK_KEY = "lmbias.scores_metadata_by_benchmark"
LEFT_OUT_KEY = "lmbias.left_out"
PANDAS_ATTRS_KEY = "PANDAS_ATTRS"
#: A metric row with an interval but no `interval` name gets this one.
UNNAMED_INTERVAL = "metric"


@dataclass(frozen=True)
class AggregateSettings:
    """How the `mean` rows' interval across seeds is computed (config.yaml `aggregate`)."""

    interval: str = "t"  # t: Student-t interval of the mean; bootstrap: percentile bootstrap over seeds
    confidence: float = 0.95
    bootstrap_samples: int = 10000
    seed: int = 0

    @classmethod
    def from_config(cls, entry: dict | None, key: str = "aggregate") -> AggregateSettings:
        """Checked settings (against the schema's `aggregate`, lmbias.options); a ConfigError naming `key.<option>`."""
        check_block(entry, "aggregate", key)
        s = cls(**(entry or {}))
        return cls(s.interval, float(s.confidence), s.bootstrap_samples, s.seed)

    def to_dict(self) -> dict:
        return asdict(self)


def t_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean of `values` (sample std, ddof=1): mean -+ t_{(1+c)/2, n-1} s/sqrt(n)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2:
        raise ValueError(f"a t-interval needs at least two values, got {len(x)}")
    mean = float(x.mean())
    half = float(sps.t.ppf(0.5 + confidence / 2, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mean - half, mean + half


def bootstrap_interval(values, confidence: float = 0.95, samples: int = 10000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean: `samples` resamples of the values with replacement,
    drawn from numpy's default generator seeded with `seed` (the same inputs give the same interval)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2:
        raise ValueError(f"a bootstrap interval over seeds needs at least two values, got {len(x)}")
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(samples, len(x)))].mean(axis=1)
    tail = 100.0 * (1.0 - confidence) / 2
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(low), float(high)


def metric_row(
    benchmark: str,
    metric: str,
    variant,
    subset: str,
    value,
    n,
    ci=(math.nan, math.nan),
    interval: str | None = None,
    p_value=math.nan,
) -> dict:
    """One row of the metric columns (METRIC_COLUMNS' keys), as every metrics module returns it: `ci` the
    (low, high) pair, `interval` how it was computed (null without one), `n` the items it counts."""
    return {
        "benchmark": benchmark,
        "metric": metric,
        "variant": variant,
        "subset": subset,
        "value": value,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "interval": interval,
        "p_value": p_value,
        "n": int(n),
    }


def percentile_interval(draws, confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap draws at `confidence` (0.95: the 2.5th and 97.5th percentiles), the
    draws that are not finite left out (a resample where the statistic is undefined); (nan, nan) when none is left."""
    values = np.asarray(draws, dtype=np.float64)
    values = values[np.isfinite(values)]
    if not len(values):
        return math.nan, math.nan
    tail = 100.0 * (1.0 - confidence) / 2
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


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


def library_versions() -> dict[str, str | None]:
    """{torch_version: ..., transformers_version: ..., ...} of this environment (null: not installed)."""
    out = {}
    for column, package in VERSION_PACKAGES.items():
        try:
            out[column] = importlib_metadata.version(package)
        except importlib_metadata.PackageNotFoundError:
            out[column] = None
    return out


def scores_metadata(
    commit: str,
    score_world_size: int,
    train_world_size: int | None,
    weights_dtype: str | None = None,
    precision: str | None = None,
) -> dict[str, str]:
    """Metadata of a scores file: what computed it (model commit, library versions, processes, the weights'
    dtype and the forward passes' autocast)."""
    meta = {
        COMMIT_KEY: commit,
        VERSIONS_KEY: json.dumps(library_versions(), sort_keys=True),
        SCORE_WORLD_SIZE_KEY: str(int(score_world_size)),
    }
    for key, value in ((DTYPE_KEY, weights_dtype), (PRECISION_KEY, precision)):
        if value:
            meta[key] = str(value)
    if train_world_size is not None:
        meta[TRAIN_WORLD_SIZE_KEY] = str(int(train_world_size))
    return meta


def carried_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The provenance metadata of a scores file, to be written into the metric file computed from it."""
    metadata = pq.read_schema(path).metadata or {}
    return {k: metadata[k.encode()].decode() for k in SCORES_METADATA_KEYS if k.encode() in metadata}


def _file_metadata(path: str | os.PathLike) -> dict[str, str]:
    return {
        k.decode(): v.decode()
        for k, v in (pq.read_schema(path).metadata or {}).items()
        if k.decode().startswith("lmbias.")
    }


def _provenance_of(metadata: dict[str, str], path) -> dict:
    try:
        versions = json.loads(metadata.get(VERSIONS_KEY, "{}"))
        score_ws = metadata.get(SCORE_WORLD_SIZE_KEY)
        train_ws = metadata.get(TRAIN_WORLD_SIZE_KEY)
        out = {
            "model_commit": metadata.get(COMMIT_KEY, ""),
            "score_world_size": int(score_ws) if score_ws is not None else None,
            "train_world_size": int(train_ws) if train_ws is not None else None,
        }
    except (ValueError, TypeError) as exc:
        raise DataError(f"unreadable lmbias provenance metadata: {exc}", path) from exc
    for column in VERSION_PACKAGES:
        out[column] = versions.get(column) if isinstance(versions, dict) else None
    for column, key in _SCORED_STRING_COLUMNS:
        out[column] = metadata.get(key)
    return out


def file_provenance(path: str | os.PathLike) -> dict:
    """Provenance columns recorded in a scores or metric file's metadata (model_commit, *_version,
    weights_dtype, precision, score_world_size, train_world_size); files written before a key existed give
    null for it."""
    return _provenance_of(_file_metadata(path), path)


def provenance_by_benchmark(path: str | os.PathLike) -> tuple[dict, dict[str, dict]]:
    """(the file's own provenance columns, {benchmark: provenance columns}) of a metric file: a seed's
    metrics.parquet records each benchmark's scores metadata; a one-benchmark file only its own."""
    metadata = _file_metadata(path)
    try:
        by_benchmark = json.loads(metadata.get(BY_BENCHMARK_KEY, "{}"))
        if not isinstance(by_benchmark, dict):
            raise TypeError(f"{BY_BENCHMARK_KEY} is not a JSON object")
    except (ValueError, TypeError) as exc:
        raise DataError(f"unreadable lmbias provenance metadata: {exc}", path) from exc
    return _provenance_of(metadata, path), {b: _provenance_of(meta, path) for b, meta in by_benchmark.items()}


def scores_metadata_by_benchmark(scores_paths: dict[str, str | os.PathLike]) -> dict[str, str]:
    """The metadata of a seed's metrics.parquet: each benchmark's scores-file provenance (BY_BENCHMARK_KEY)."""
    return {
        BY_BENCHMARK_KEY: json.dumps({b: carried_metadata(p) for b, p in sorted(scores_paths.items())}, sort_keys=True)
    }


def training_world_size(model_dir: str | os.PathLike | None) -> int | None:
    """`world_size` of a trained model folder's training.json; None for folders without one (SentenceDebias,
    or no folder: pretrained and online)."""
    if not model_dir:
        return None
    path = os.path.join(model_dir, "training.json")
    if not os.path.isfile(path):
        return None
    try:
        info = json.loads(open(path, encoding="utf-8").read())
        return int(info["world_size"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"training.json without a usable world_size: {exc}", path) from exc


def stable_hash(obj) -> str:
    """sha256 of a JSON rendering with sorted keys: the same config slice always gives the same hash."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def dataset_sha256(data_entry: dict) -> str:
    """One checksum for a dataset: sha256 over its files' names and pinned sha256 values."""
    lines = sorted(f"{name} {spec['sha256']}" for name, spec in data_entry["files"].items())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def provenance(model_entry: dict, data_sha: str, config_slices: dict, commit: str = "") -> dict:
    """The config-side provenance columns (model_commit as given; the scoring-side columns come from
    file_provenance)."""
    return {
        "model_id": model_entry.get("hub_id") or model_entry.get("path"),
        "model_revision": str(model_entry.get("revision", "")),
        "model_commit": commit,
        "data_sha256": data_sha,
        "lmbias_version": __version__,
        "config_hash": stable_hash(config_slices),
    }


def _is_null(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def with_context(
    rows: Iterable[dict], model: str, method: str, seed: str | int, prov: dict | None = None
) -> list[dict]:
    """Metric rows with their model/method/seed (and, for the summary, provenance); NaN becomes null.

    `interval` is kept only where the row has an interval (UNNAMED_INTERVAL when a metric gave none)."""
    out = []
    for r in rows:
        full = {"model": model, "method": method, "seed": str(seed), **r, **(prov or {})}
        for key in ("value", "ci_low", "ci_high", "p_value"):
            v = full.get(key)
            full[key] = None if _is_null(v) else float(v)
        has_ci = full["ci_low"] is not None or full["ci_high"] is not None
        full["interval"] = (full.get("interval") or UNNAMED_INTERVAL) if has_ci else None
        out.append(full)
    return out


def _joined(values: list) -> str | None:
    """Distinct non-null values, sorted and comma-joined (one value: itself; none: null)."""
    distinct = sorted({str(v) for v in values if v is not None})
    return ",".join(distinct) if distinct else None


def _common(values: list) -> int | None:
    """The value every member shares (null when they differ or none has one)."""
    distinct = {v for v in values if v is not None}
    return distinct.pop() if len(distinct) == 1 and None not in values else None


def aggregate_over_seeds(rows: list[dict], settings: AggregateSettings | None = None) -> pa.Table:
    """Per-seed rows plus one `mean` row per (benchmark, metric, variant, subset).

    Seeds whose value is null are left out of the mean, std and interval (and counted out of n_seeds).
    One seed with a value: the mean row is that seed's row. Two or more: mean, sample std, and the
    settings' interval across seeds (a zero std gives the interval [mean, mean]); p_value is null.
    """
    settings = settings or AggregateSettings()
    groups: dict[tuple, list[dict]] = {}
    seeds = []
    for r in rows:
        seed_row = {**r, "std": None, "n_seeds": 0 if _is_null(r.get("value")) else 1}
        seeds.append(seed_row)
        groups.setdefault((r["benchmark"], r["metric"], r["variant"], r["subset"]), []).append(seed_row)
    agg = []
    for members in groups.values():
        valued = [m for m in members if m["n_seeds"]]
        base = dict(valued[0] if len(valued) == 1 else members[0])
        base["seed"] = AGGREGATE_SEED
        for column in ["model_commit", "lmbias_version", *VERSION_PACKAGES, *(c for c, _ in _SCORED_STRING_COLUMNS)]:
            if column in base:
                base[column] = _joined([m.get(column) for m in members])
        for column in WORLD_SIZE_COLUMNS:
            if column in base:
                base[column] = _common([m.get(column) for m in members])
        vals = np.array([m["value"] for m in valued], dtype=np.float64)
        if len(valued) == 1:  # that seed's row, its own interval and p-value included
            agg.append(base)
            continue
        base.update(
            n=int(sum(m["n"] or 0 for m in valued)) if valued else int(sum(m["n"] or 0 for m in members)),
            n_seeds=len(valued),
            p_value=None,
            std=None,
            value=None,
            ci_low=None,
            ci_high=None,
            interval=None,
        )
        if len(valued) >= 2:
            base.update(value=float(vals.mean()), std=float(vals.std(ddof=1)), interval=settings.interval)
            if settings.interval == "t":
                base["ci_low"], base["ci_high"] = t_interval(vals, settings.confidence)
            else:
                base["ci_low"], base["ci_high"] = bootstrap_interval(
                    vals, settings.confidence, settings.bootstrap_samples, settings.seed
                )
        agg.append(base)
    return pa.Table.from_pylist(seeds + agg, schema=SUMMARY_SCHEMA)
