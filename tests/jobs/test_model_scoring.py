"""One scoring job per (model, method, seed) (lmbias.jobs.model_scoring): the model loaded once for every
benchmark, score files bit-identical to one job per benchmark, kept by their score key on a rerun
(lmbias.metrics.score_keys), a failing benchmark named while the others keep their files, an interrupted job
resumed without losing what it finished. Tiny models, a few items of real benchmarks."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.scoring import score_one
from lmbias.engine import job_timing
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import BenchmarksFailedError, ConfigError
from lmbias.io import write_table_atomic
from lmbias.jobs import model_scoring
from lmbias.jobs import scoring as job_scoring
from lmbias.jobs.description import BenchmarkTask, ScoringJob, one_benchmark_job
from lmbias.jobs.metrics import compute_seed_metrics_job
from lmbias.metrics.score_keys import SCORE_KEY_METADATA, read_manifest, stored_key
from lmbias.parsers import parse_benchmark, required_files
from lmbias.workflow.params import benchmark_scoring_slice

BENCHMARKS = ("winobias", "crows_pairs")


def score_model(job: dict) -> dict:
    """What rule score_model runs (the one way to score, with a manifest): the manifest's entries."""
    model_scoring.score_benchmarks(job)
    return read_manifest(job.manifest)


ITEMS = 12


@pytest.fixture(scope="module")
def setup(tmp_path_factory, shared_data, repo_root):
    """Items of two benchmarks, tiny BERT and GPT-2, and library fingerprint stand-ins."""
    root = tmp_path_factory.mktemp("model_scoring")
    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    for name in BENCHMARKS:
        entry = config["benchmarks"][name]
        files = {f: shared_data / entry["dataset"] / f for f in required_files(entry, config["data"], name)}
        items = parse_benchmark({k: v for k, v in entry.items() if k not in ("scoring", "metric")}, files, name)
        write_table_atomic(items.slice(0, ITEMS), root / "data" / f"{name}.parquet")
        (root / "library").mkdir(exist_ok=True)
        (root / "library" / f"{entry['dataset']}.sha256").write_text(f"0  {entry['dataset']}\n")
    models = {}
    for name, arch, family in (("tiny-bert", "bert", "mlm"), ("tiny-gpt2", "gpt2", "clm")):
        build_tiny_model(arch, root / "models" / name, seed=0)
        models[name] = {"path": str(root / "models" / name), "family": family, "revision": "local"}
    return root, config, models


def make_job(root, config, models, model, out, benchmarks=BENCHMARKS) -> ScoringJob:
    library = {name: root / "library" / f"{config['benchmarks'][name]['dataset']}.sha256" for name in benchmarks}
    tasks = {
        name: BenchmarkTask(
            benchmark_scoring_slice(config, name),
            root / "data" / f"{name}.parquet",
            out / "scores" / f"{name}.parquet",
            [library[name]],
        )
        for name in benchmarks
    }
    method = {"kind": "pretrained", "model_dir": None}
    return ScoringJob(
        model,
        models[model],
        method,
        tasks,
        weights_dir=models[model]["path"],
        threads=1,
        max_tokens=1024,
        manifest=out / "scores.json",
        timing=out / "scores.job.tsv",
    )


def scored(job) -> list[str]:
    """The benchmarks the job's last run scored (its timing rows; `kept` rows had no forward pass)."""
    rows = job_timing.read_timing_rows(job.timing)
    return [r["benchmark"] for r in rows if r["benchmark"] != job_timing.LOAD_ROW and r["status"] != "kept"]


def forward_passes(job) -> int:
    rows = job_timing.read_timing_rows(job.timing)
    return sum(int(r["forward_passes"]) for r in rows if r["forward_passes"] != "NA")


@pytest.mark.parametrize("model", ["tiny-bert", "tiny-gpt2"])
def test_one_load_scores_every_benchmark_bit_identical_to_one_job_each(setup, tmp_path, model):
    root, config, models = setup
    job = make_job(root, config, models, model, tmp_path / "model")
    loads = []
    real_load = job_scoring.load_for_method

    def counting_load(*args, **kwargs):
        loads.append(args[0])
        return real_load(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(job_scoring, "load_for_method", counting_load)
        entries = score_model(job)
    assert loads == [model]  # once, for both benchmarks
    keys = model_scoring.benchmark_keys(job)
    for name in BENCHMARKS:
        bench = job.benchmarks[name]
        alone = tmp_path / "alone" / f"{name}.parquet"
        assert score_one(
            bench.items, alone, model, models[model], job.method_entry, name, bench.entry,
            threads=1, max_tokens=1024, library=bench.library, seed=job.seed, weights_dir=job.weights_dir,
        ) == "scored"  # fmt: skip
        together = pq.read_table(bench.scores)
        # the same bytes: numbers, row order, provenance metadata and score key (NaN cells too, which
        # Table.equals never finds equal)
        assert Path(bench.scores).read_bytes() == alone.read_bytes(), name
        assert stored_key(bench.scores) == keys[name] == entries[name]["score_key"]
        assert entries[name]["rows"] == together.num_rows and entries[name]["scored"]
    rows = job_timing.read_timing_rows(job.timing)
    assert [r["benchmark"] for r in rows] == [job_timing.LOAD_ROW, *BENCHMARKS]
    assert float(rows[0]["load_s"]) > 0 and all(int(r["forward_passes"]) > 0 for r in rows[1:])
    assert all(float(r["peak_rss_mib"]) > 100 and r["status"] == "ok" for r in rows)
    assert read_manifest(job.manifest) == json.loads(json.dumps(entries))


def test_a_rerun_scores_only_what_a_config_edit_touches(setup, tmp_path, monkeypatch):
    root, config, models = setup
    out = tmp_path / "run"
    job = make_job(root, config, models, "tiny-bert", out, benchmarks=("winobias",))
    score_model(job)
    assert scored(job) == ["winobias"]
    first = (out / "scores" / "winobias.parquet").read_bytes()

    # adding a benchmark scores just the new one
    job = make_job(root, config, models, "tiny-bert", out)
    score_model(job)
    assert scored(job) == ["crows_pairs"]
    assert (out / "scores" / "winobias.parquet").read_bytes() == first

    # nothing changed, or only a metric option: no forward pass, and the model is not even loaded
    edited = copy.deepcopy(config)
    edited["benchmarks"]["winobias"]["metric"]["confidence_cutoff"] = 0.3
    job = make_job(root, edited, models, "tiny-bert", out)

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded with nothing to score")

    with monkeypatch.context() as mp:
        mp.setattr(job_scoring, "load_for_method", no_load)
        entries = score_model(job)
    assert scored(job) == [] and forward_passes(job) == 0
    assert not any(e["scored"] for e in entries.values())

    # one benchmark's scoring option: that benchmark only
    edited["benchmarks"]["crows_pairs"]["scoring"]["variants"] = ["nangia"]
    job = make_job(root, edited, models, "tiny-bert", out)
    entries = score_model(job)
    assert scored(job) == ["crows_pairs"] and forward_passes(job) > 0
    assert [n for n, e in entries.items() if e["scored"]] == ["crows_pairs"]
    assert (out / "scores" / "winobias.parquet").read_bytes() == first

    # the seed, the items and the method's model folder are in the key too
    job = dataclasses.replace(job, seed=1)
    assert model_scoring.to_score(job, model_scoring.benchmark_keys(job)) == list(BENCHMARKS)


def test_a_failing_benchmark_is_named_and_the_others_keep_their_files(setup, tmp_path, capsys):
    root, config, models = setup
    out = tmp_path / "run"
    job = make_job(root, config, models, "tiny-bert", out)
    bad = tmp_path / "bad-winobias.parquet"
    pq.write_table(pa.table({"nothing": [1, 2]}), bad)  # items without any of WinoBias' columns
    job.benchmarks["winobias"] = dataclasses.replace(job.benchmarks["winobias"], items=bad)
    with pytest.raises(BenchmarksFailedError) as failed:
        score_model(job)
    message = str(failed.value)
    assert "winobias" in message and job.benchmarks["winobias"].scores in message
    assert "crows_pairs" not in message
    assert "scoring winobias" in capsys.readouterr().err  # on the console at once, not only in the log
    assert stored_key(job.benchmarks["crows_pairs"].scores) is not None
    assert not (out / "scores" / "winobias.parquet").exists() and not (out / "scores.json").exists()
    statuses = {r["benchmark"]: r["status"] for r in job_timing.read_timing_rows(job.timing)}
    assert statuses["crows_pairs"] == "ok" and statuses["winobias"] != "ok"

    # fixed: the rerun scores only the failed one
    job = make_job(root, config, models, "tiny-bert", out)
    score_model(job)
    assert scored(job) == ["winobias"]


def test_an_interrupted_job_loses_nothing_it_finished(setup, tmp_path, monkeypatch):
    root, config, models = setup
    out = tmp_path / "run"
    job = make_job(root, config, models, "tiny-gpt2", out)
    real = job_scoring.score_loaded

    def interrupted_on_the_second(*args, **kwargs):
        if args[5] == BENCHMARKS[1]:
            raise KeyboardInterrupt  # Ctrl-C, or Snakemake killing the job
        return real(*args, **kwargs)

    with monkeypatch.context() as mp:
        mp.setattr(job_scoring, "score_loaded", interrupted_on_the_second)
        with pytest.raises(KeyboardInterrupt):
            score_model(job)
    assert stored_key(job.benchmarks[BENCHMARKS[0]].scores) is not None
    assert not (out / "scores" / f"{BENCHMARKS[1]}.parquet").exists() and not (out / "scores.json").exists()
    score_model(job)
    assert scored(job) == [BENCHMARKS[1]]


def test_metrics_read_the_files_a_manifest_names_and_refuse_a_replaced_one(setup, tmp_path):
    root, config, models = setup
    out = tmp_path / "run"
    job = make_job(root, config, models, "tiny-bert", out)
    score_model(job)
    benches = {b: {k: v for k, v in config["benchmarks"][b].items() if k in ("dataset", "metric")} for b in BENCHMARKS}
    compute_seed_metrics_job(benches, [job.manifest], out / "metrics.parquet", "tiny-bert", "pretrained", "0")
    by_files = out / "by-files.parquet"
    files = [job.benchmarks[b].scores for b in BENCHMARKS]
    compute_seed_metrics_job(benches, files, by_files, "tiny-bert", "pretrained", "0")
    assert (out / "metrics.parquet").read_bytes() == by_files.read_bytes()
    # a score file replaced after the job (another key): named, not read
    path = job.benchmarks["winobias"].scores
    table = pq.read_table(path)
    write_table_atomic(table, path, metadata={SCORE_KEY_METADATA: "0" * 64})
    with pytest.raises(ConfigError, match="winobias.parquet: changed since .* its score key"):
        compute_seed_metrics_job(benches, [job.manifest], out / "m2.parquet", "tiny-bert", "pretrained", "0")
    # a deleted one: named as missing, with the target that scores it again alone
    Path(path).unlink()
    with pytest.raises(ConfigError, match=r"winobias.parquet: the score file of benchmark 'winobias' .* is missing"):
        compute_seed_metrics_job(benches, [job.manifest], out / "m3.parquet", "tiny-bert", "pretrained", "0")


def test_a_one_benchmark_job_keeps_the_model_jobs_file_and_rescores_a_changed_one(setup, tmp_path, caplog):
    """score_benchmarks of one benchmark (rule score_benchmark): the file score_model wrote holds its key, so it is kept
    without loading the model; a file with another key is named as changed and scored again, with the same
    bytes as the model's job writes."""
    root, config, models = setup
    job = make_job(root, config, models, "tiny-gpt2", tmp_path / "run")
    score_model(job)
    bench = job.benchmarks["crows_pairs"]
    written = Path(bench.scores).read_bytes()
    one = one_benchmark_job(
        bench.items, bench.scores, "tiny-gpt2", models["tiny-gpt2"], job.method_entry, "crows_pairs",
        bench.entry, weights_dir=job.weights_dir, threads=1, max_tokens=1024,
        timing=tmp_path / "one.job.tsv", library=bench.library, seed=0,
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(job_scoring, "load_for_method", lambda *a, **k: pytest.fail("a kept file loads no model"))
        assert model_scoring.score_benchmarks(one) == {"crows_pairs": "kept"}
    assert job_timing.read_timing_rows(tmp_path / "one.job.tsv") == [
        {**dict.fromkeys(job_timing.ROWS_COLUMNS, "NA"), "benchmark": "crows_pairs", "status": "kept"}
    ]
    table = pq.read_table(bench.scores)
    write_table_atomic(table, bench.scores, metadata={SCORE_KEY_METADATA: "0" * 64})  # replaced: another key
    with caplog.at_level("INFO", logger="lmbias.jobs.model_scoring"):
        assert model_scoring.score_benchmarks(one) == {"crows_pairs": "scored"}
    assert f"its score key {'0' * 12} is not" in caplog.text
    assert Path(bench.scores).read_bytes() == written
    assert (tmp_path / "run" / "scores.lock").exists()  # the seed folder's lock, shared with score_model
