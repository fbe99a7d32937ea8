"""summary.parquet across seeds: mean, std, n_seeds and the interval across seeds (t or bootstrap), the
`interval` column, the `aggregate` config block, and the provenance that travels scores -> metrics -> summary
(library versions, processes that trained and scored)."""

from __future__ import annotations

import itertools
import json
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats as sps

from lmbias.config import config_errors
from lmbias.errors import ConfigError, DataError
from lmbias.io import write_table_atomic
from lmbias.jobs.metrics import summarise_job
from lmbias.jobs.scoring import scoring_provenance
from lmbias.metrics.summary import (
    METRIC_SCHEMA,
    SUMMARY_SCHEMA,
    AggregateSettings,
    aggregate_over_seeds,
    bootstrap_interval,
    carried_metadata,
    file_provenance,
    library_versions,
    scores_metadata,
    scores_metadata_by_benchmark,
    t_interval,
    training_world_size,
    with_context,
)


def _row(value, seed, ci=(None, None), interval=None, p=None, n=10, metric="m", **extra):
    r = {
        "benchmark": "b",
        "metric": metric,
        "variant": "v",
        "subset": "all",
        "value": value,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "p_value": p,
        "n": n,
    }
    if interval:
        r["interval"] = interval
    return with_context([r], "model", "method", seed, extra or None)[0]


def _mean(table: pa.Table, metric="m") -> dict:
    rows = [r for r in table.to_pylist() if r["seed"] == "mean" and r["metric"] == metric]
    assert len(rows) == 1
    return rows[0]


# ------------------------------------------------------------------------------------------- t-interval


def test_t_interval_by_hand_and_against_scipy():
    # 1, 2, 3, 4: mean 2.5, s = sqrt(5/3), t(0.975, 3) = 3.182446 (any t table) -> 2.5 -+ 2.054260
    low, high = t_interval([1, 2, 3, 4])
    assert (low, high) == pytest.approx((2.5 - 2.054260, 2.5 + 2.054260), abs=1e-6)
    assert (low, high) == pytest.approx(sps.t.interval(0.95, 3, loc=2.5, scale=math.sqrt(5 / 3) / 2), rel=1e-12)
    # 90 %: t(0.95, 3) = 2.353363
    assert t_interval([1, 2, 3, 4], 0.90) == pytest.approx(
        (2.5 - 2.353363 * 0.645497, 2.5 + 2.353363 * 0.645497), abs=1e-5
    )
    x = np.random.default_rng(3).normal(size=7)
    assert t_interval(x, 0.99) == pytest.approx(sps.t.interval(0.99, 6, loc=x.mean(), scale=sps.sem(x)), rel=1e-12)
    with pytest.raises(ValueError):
        t_interval([1.0])


def test_mean_row_over_three_seeds_has_mean_std_and_t_interval():
    rows = [_row(v, s, ci=(v - 1, v + 1), interval="wilson", p=0.01, n=100) for s, v in enumerate([10.0, 12.0, 14.0])]
    table = aggregate_over_seeds(rows)
    assert table.schema.equals(SUMMARY_SCHEMA)
    mean = _mean(table)
    # mean 12, s = 2, t(0.975, 2) = 4.302653: 12 -+ 4.302653 * 2 / sqrt(3) = 12 -+ 4.968275
    assert mean["value"] == 12.0 and mean["std"] == pytest.approx(2.0) and mean["n_seeds"] == 3
    assert (mean["ci_low"], mean["ci_high"]) == pytest.approx((12 - 4.968275, 12 + 4.968275), abs=1e-6)
    assert mean["interval"] == "t" and mean["p_value"] is None and mean["n"] == 300
    seeds = [r for r in table.to_pylist() if r["seed"] != "mean"]
    assert [r["seed"] for r in seeds] == ["0", "1", "2"]
    assert all(r["std"] is None and r["n_seeds"] == 1 and r["interval"] == "wilson" for r in seeds)


def test_identical_seeds_give_a_zero_width_interval():
    mean = _mean(aggregate_over_seeds([_row(5.0, s) for s in range(3)]))
    assert (mean["value"], mean["std"], mean["ci_low"], mean["ci_high"]) == (5.0, 0.0, 5.0, 5.0)


def test_one_seed_mean_row_is_that_seed_with_the_metric_interval():
    mean = _mean(aggregate_over_seeds([_row(0.4, 0, ci=(0.3, 0.5), interval="wilson", p=0.02)]))
    assert (mean["value"], mean["ci_low"], mean["ci_high"], mean["interval"], mean["p_value"]) == (
        0.4,
        0.3,
        0.5,
        "wilson",
        0.02,
    )
    assert mean["std"] is None and mean["n_seeds"] == 1
    # a metric without an interval: none on the mean row either
    mean = _mean(aggregate_over_seeds([_row(0.4, 0)]))
    assert mean["interval"] is None and mean["ci_low"] is None


def test_a_seed_with_a_null_value_is_left_out_not_fatal():
    rows = [_row(10.0, 0), _row(None, 1, n=0), _row(14.0, 2)]
    mean = _mean(aggregate_over_seeds(rows))
    # two values: mean 12, s = 2 * sqrt(2), t(0.975, 1) = 12.706205: 12 -+ 12.706205 * 2
    assert mean["value"] == 12.0 and mean["n_seeds"] == 2 and mean["std"] == pytest.approx(2 * math.sqrt(2))
    assert (mean["ci_low"], mean["ci_high"]) == pytest.approx((12 - 25.41241, 12 + 25.41241), abs=1e-4)
    assert [r["n_seeds"] for r in aggregate_over_seeds(rows).to_pylist()[:3]] == [1, 0, 1]
    # one value left: the mean row is that seed's row (its own interval)
    mean = _mean(aggregate_over_seeds([_row(None, 0), _row(3.0, 1, ci=(2.0, 4.0), interval="wilson")]))
    assert (mean["value"], mean["n_seeds"], mean["std"], mean["interval"], mean["ci_low"]) == (
        3.0,
        1,
        None,
        "wilson",
        2.0,
    )
    # none left: a null mean, not a crash (NaN from a metric reads as null too)
    mean = _mean(aggregate_over_seeds([_row(None, 0), _row(float("nan"), 1)]))
    assert (mean["value"], mean["n_seeds"], mean["std"], mean["ci_low"], mean["interval"]) == (
        None,
        0,
        None,
        None,
        None,
    )


# -------------------------------------------------------------------------------------------- bootstrap


def test_bootstrap_over_seeds_is_seeded_and_matches_the_exact_bootstrap_distribution():
    values = [0.0, 1.0, 5.0]
    # every one of the 27 equally likely resamples: the exact bootstrap distribution of the mean
    exact = np.array([np.mean(t) for t in itertools.product(values, repeat=3)])
    low, high = bootstrap_interval(values, confidence=0.5, samples=200_000, seed=1)
    assert np.quantile(exact, 0.24, method="inverted_cdf") <= low <= np.quantile(exact, 0.26, method="inverted_cdf")
    assert np.quantile(exact, 0.74, method="inverted_cdf") <= high <= np.quantile(exact, 0.76, method="inverted_cdf")
    assert bootstrap_interval(values, 0.9, 1000, 7) == bootstrap_interval(values, 0.9, 1000, 7)
    assert bootstrap_interval([0.0, 1.0, 5.0, 2.0], 0.9, 1000, 7) != bootstrap_interval(
        [0.0, 1.0, 5.0, 2.0], 0.9, 1000, 8
    )
    settings = AggregateSettings(interval="bootstrap", confidence=0.9, bootstrap_samples=1000, seed=7)
    mean = _mean(aggregate_over_seeds([_row(v, s) for s, v in enumerate(values)], settings))
    assert mean["interval"] == "bootstrap" and (mean["ci_low"], mean["ci_high"]) == bootstrap_interval(
        values, 0.9, 1000, 7
    )
    assert min(values) <= mean["ci_low"] <= mean["value"] <= mean["ci_high"] <= max(values)


# ------------------------------------------------------------------------------------------------- config


def test_aggregate_settings_defaults_and_errors_name_the_key():
    assert AggregateSettings.from_config(None) == AggregateSettings("t", 0.95, 10000, 0)
    assert AggregateSettings.from_config({"interval": "bootstrap", "confidence": 0.9}).interval == "bootstrap"
    for bad, key in [
        ({"interval": "z"}, "aggregate.interval"),
        ({"confidence": 1.0}, "aggregate.confidence"),
        ({"confidence": 0}, "aggregate.confidence"),
        ({"confidence": True}, "aggregate.confidence"),
        ({"bootstrap_samples": 0}, "aggregate.bootstrap_samples"),
        ({"bootstrap_samples": 10.5}, "aggregate.bootstrap_samples"),
        ({"seed": -1}, "aggregate.seed"),
        ({"intervals": "t"}, "aggregate.intervals: unknown key (known: bootstrap_samples, confidence, interval, seed)"),
        ("t", "aggregate: 't' is not of type 'object'"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(key)):
            AggregateSettings.from_config(bad)


def test_schema_checks_the_aggregate_block(repo_root):
    import yaml

    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    schema = repo_root / "schemas" / "config.schema.yaml"
    assert AggregateSettings.from_config(config["aggregate"]) == AggregateSettings()  # shipped = defaults
    assert config_errors(config, schema) == []
    config["aggregate"] = {"interval": "normal", "confidence": 95, "samples": 10}
    errors = config_errors(config, schema)
    assert any(e.startswith("aggregate.interval:") for e in errors), errors
    assert any(e.startswith("aggregate.confidence:") for e in errors), errors
    assert "aggregate.samples: unknown key" in errors


# --------------------------------------------------------------------------------------------- provenance


def _metric_file(path, seed, value, meta):
    rows = with_context(
        [
            {
                "benchmark": "seat",
                "metric": "effect_size",
                "variant": "",
                "subset": "all",
                "value": value,
                "ci_low": None,
                "ci_high": None,
                "p_value": 0.1,
                "n": 8,
            }
        ],
        "m",
        "cds",
        seed,
    )
    return write_table_atomic(pa.Table.from_pylist(rows, schema=METRIC_SCHEMA), path, METRIC_SCHEMA, metadata=meta)


SLICES = {
    "model": {"path": "resources/models/tiny-bert", "revision": "local"},
    "method": {"kind": "cds"},
    "benchmarks": {"seat": {"dataset": "seat"}},
    "data": {},
    "seeds": [0, 1],
}


def test_versions_and_world_sizes_travel_to_the_summary_and_differences_are_named(tmp_path):
    a = scores_metadata("", 1, 2)
    b = json.loads(a["lmbias.versions"])
    b["torch_version"] = "9.9.9"
    b = {**a, "lmbias.versions": json.dumps(b), "lmbias.train_world_size": "4"}
    paths = [_metric_file(tmp_path / "s0.parquet", 0, 1.0, a), _metric_file(tmp_path / "s1.parquet", 1, 3.0, b)]
    summarise_job(paths, tmp_path / "summary.parquet", SLICES)
    table = pq.read_table(tmp_path / "summary.parquet")
    assert table.schema.equals(SUMMARY_SCHEMA, check_metadata=False)
    rows = {r["seed"]: r for r in table.to_pylist()}
    here = library_versions()
    assert here["torch_version"] and here["transformers_version"] and here["accelerate_version"]
    assert rows["0"]["torch_version"] == here["torch_version"] and rows["1"]["torch_version"] == "9.9.9"
    assert rows["mean"]["torch_version"] == ",".join(sorted([here["torch_version"], "9.9.9"]))
    for column in ("transformers_version", "accelerate_version", "spacy_version"):
        assert rows["0"][column] == rows["1"][column] == rows["mean"][column] == here[column], column
    assert (rows["0"]["train_world_size"], rows["1"]["train_world_size"], rows["mean"]["train_world_size"]) == (
        2,
        4,
        None,
    )
    assert {r["score_world_size"] for r in rows.values()} == {1}
    assert rows["mean"]["value"] == 2.0 and rows["mean"]["n_seeds"] == 2 and rows["mean"]["interval"] == "t"


def test_a_seed_metrics_file_gives_each_benchmark_the_provenance_of_its_own_scores(tmp_path):
    """seed{k}/metrics.parquet holds several benchmarks, each scored by its own job (maybe months apart, in
    another environment): the summary takes each row's commit, versions and world sizes from its benchmark."""
    scores = {}
    for name, meta in (("seat", scores_metadata("", 1, 2)), ("crows_pairs", scores_metadata("abc", 4, 2))):
        scores[name] = write_table_atomic(
            pa.Table.from_pylist([{"item_id": "i0"}]), tmp_path / f"{name}.parquet", metadata=meta
        )
    versions = json.loads(scores_metadata("", 1, 2)["lmbias.versions"])
    rows = with_context(
        [
            {
                "benchmark": b,
                "metric": "m",
                "variant": "",
                "subset": "all",
                "value": 1.0,
                "ci_low": None,
                "ci_high": None,
                "p_value": None,
                "n": 3,
            }
            for b in scores
        ],
        "m",
        "cds",
        0,
    )
    path = write_table_atomic(
        pa.Table.from_pylist(rows, schema=METRIC_SCHEMA),
        tmp_path / "metrics.parquet",
        METRIC_SCHEMA,
        metadata=scores_metadata_by_benchmark(scores),
    )
    slices = {
        **SLICES,
        "benchmarks": {"seat": {"dataset": "seat"}, "crows_pairs": {"dataset": "crows_pairs"}},
        "seeds": [0],
    }
    summarise_job([path], tmp_path / "summary.parquet", slices)
    got = {(r["benchmark"], r["seed"]): r for r in pq.read_table(tmp_path / "summary.parquet").to_pylist()}
    for seed in ("0", "mean"):
        assert (got[("seat", seed)]["model_commit"], got[("seat", seed)]["score_world_size"]) == ("", 1)
        assert (got[("crows_pairs", seed)]["model_commit"], got[("crows_pairs", seed)]["score_world_size"]) == (
            "abc",
            4,
        )
        assert got[("crows_pairs", seed)]["train_world_size"] == 2
        assert got[("seat", seed)]["torch_version"] == versions["torch_version"]
    broken = write_table_atomic(
        pa.Table.from_pylist(rows, schema=METRIC_SCHEMA),
        tmp_path / "broken.parquet",
        METRIC_SCHEMA,
        metadata={"lmbias.scores_metadata_by_benchmark": "[1, 2]"},
    )
    with pytest.raises(DataError, match="broken.parquet"):
        summarise_job([broken], tmp_path / "x.parquet", slices)
    assert not (tmp_path / "x.parquet").exists()


def test_aggregate_settings_change_the_mean_rows_and_the_config_hash(tmp_path):
    meta = scores_metadata("", 1, None)
    paths = [_metric_file(tmp_path / f"s{s}.parquet", s, v, meta) for s, v in enumerate([1.0, 2.0, 4.0])]
    summarise_job(paths, tmp_path / "t.parquet", SLICES)
    summarise_job(paths, tmp_path / "b.parquet", SLICES, aggregate={"interval": "bootstrap", "bootstrap_samples": 500})
    t, b = (_mean(pq.read_table(tmp_path / f"{x}.parquet"), "effect_size") for x in "tb")
    assert (t["interval"], b["interval"]) == ("t", "bootstrap") and t["value"] == b["value"]
    assert (t["ci_low"], t["ci_high"]) != (b["ci_low"], b["ci_high"]) and t["config_hash"] != b["config_hash"]
    assert t["train_world_size"] is None and t["score_world_size"] == 1
    with pytest.raises(ConfigError, match="aggregate.interval"):
        summarise_job(paths, tmp_path / "x.parquet", SLICES, aggregate={"interval": "normal"})
    assert not (tmp_path / "x.parquet").exists()


def test_scores_provenance_is_carried_and_read_back(tmp_path):
    scores = tmp_path / "scores.parquet"
    rows = [{"item_id": f"i{i}", "margin_log_ratio": m} for i, m in enumerate([0.5, -0.1, 0.2])]
    meta = scores_metadata("abc", 2, 3)
    write_table_atomic(pa.Table.from_pylist(rows), scores, metadata=meta)
    assert carried_metadata(scores) == meta
    assert file_provenance(scores)["score_world_size"] == 2 and file_provenance(scores)["train_world_size"] == 3
    # an older file without the keys: nulls, not an error
    plain = write_table_atomic(pa.Table.from_pylist(rows), tmp_path / "old.parquet")
    prov = file_provenance(plain)
    assert prov["model_commit"] == "" and prov["torch_version"] is None and prov["score_world_size"] is None
    bad = write_table_atomic(
        pa.Table.from_pylist(rows), tmp_path / "bad.parquet", metadata={"lmbias.score_world_size": "two"}
    )
    with pytest.raises(DataError, match="bad.parquet"):
        file_provenance(bad)


def test_a_metric_interval_without_a_name_is_marked_unnamed():
    from lmbias.metrics.summary import UNNAMED_INTERVAL

    row = _row(1.0, 0, ci=(0.5, 1.5))
    assert row["interval"] == UNNAMED_INTERVAL
    assert _row(1.0, 0, interval="wilson")["interval"] is None  # no interval: no name, whatever was given


def test_training_world_size_and_scoring_provenance(tmp_path):
    assert training_world_size(None) is None and training_world_size(tmp_path) is None  # pretrained; sd folders
    (tmp_path / "training.json").write_text(json.dumps({"world_size": 4}))
    assert training_world_size(tmp_path) == 4
    meta = scoring_provenance(None, {"kind": "cds", "model_dir": str(tmp_path)}, 2)
    assert meta["lmbias.train_world_size"] == "4" and meta["lmbias.score_world_size"] == "2"
    assert "lmbias.train_world_size" not in scoring_provenance(None, {"kind": "pretrained"}, 1)
    (tmp_path / "training.json").write_text("{}")
    with pytest.raises(DataError, match="training.json"):
        training_world_size(tmp_path)
