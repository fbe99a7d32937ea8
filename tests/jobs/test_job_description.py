"""lmbias.jobs.description: a scoring job's description survives the JSON an `accelerate launch` reads, and a file
with a field this version does not know is refused, naming the file and the field."""

from __future__ import annotations

import json

import pytest

from lmbias.errors import ConfigError
from lmbias.jobs.description import BenchmarkTask, ScoringJob, one_benchmark_job


def _job(tmp_path) -> ScoringJob:
    return ScoringJob(
        "tiny-bert",
        {"path": "/models/tiny-bert", "family": "mlm"},
        {"kind": "pretrained", "model_dir": None},
        {
            "winobias": BenchmarkTask({"dataset": "winobias"}, tmp_path / "w.parquet", tmp_path / "s" / "w.parquet"),
            "crows_pairs": BenchmarkTask(
                {"dataset": "crows_pairs", "scoring": {"variants": ["nangia"]}},
                tmp_path / "c.parquet",
                tmp_path / "s" / "c.parquet",
                [tmp_path / "crows_pairs.sha256"],
            ),
        },
        weights_dir=tmp_path / "weights",
        seed=2,
        threads=4,
        max_tokens=2048,
        manifest=tmp_path / "scores.json",
        timing=tmp_path / "scores.job.tsv",
    )


def test_paths_are_strings_and_the_json_reads_back_equal(tmp_path):
    job = _job(tmp_path)
    assert job.manifest == str(tmp_path / "scores.json") and job.benchmarks["crows_pairs"].library == (
        str(tmp_path / "crows_pairs.sha256"),
    )
    launched = job.launched({"crows_pairs": "ab" * 32})
    assert list(launched.benchmarks) == ["crows_pairs"] and launched.benchmarks["crows_pairs"].score_key == "ab" * 32
    assert job.benchmarks["crows_pairs"].score_key is None  # the job itself is not changed
    for one in (job, launched):
        path = tmp_path / "job.json"
        path.write_text(one.to_json())
        assert ScoringJob.read(path) == one


def test_a_one_benchmark_job_has_no_manifest(tmp_path):
    job = one_benchmark_job("i.parquet", "o.parquet", "m", {"family": "clm"}, {"kind": "pretrained"}, "bold", {})
    assert job.manifest is None and job.timing is None and list(job.benchmarks) == ["bold"]


def test_an_unknown_field_is_named_with_the_file(tmp_path):
    data = json.loads(_job(tmp_path).to_json())
    data["gpus"] = 2
    data["benchmarks"]["winobias"]["split"] = "dev"
    path = tmp_path / "old.job.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"old\.job\.json: unknown field\(s\) gpus, benchmarks\.winobias\.split"):
        ScoringJob.read(path)
