"""Data-parallel scoring through Accelerate (lmbias.engine.distributed): real 2-process gloo launches on CPU
equal the one-process CLI and the in-process job, item order included; the shard/reassembly logic
in-process."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.paths import REPO_ROOT
from helpers.scoring import score_one
from lmbias.benchmarks import catalog
from lmbias.engine import job_timing
from lmbias.engine.batching import EngineStats
from lmbias.engine.distributed import launch_command, launch_env, main_process_port
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.io import write_table_atomic
from lmbias.jobs.description import BenchmarkTask, ScoringJob, one_benchmark_job
from lmbias.jobs.model_scoring import benchmark_keys
from lmbias.jobs.sharded import reassemble, score_table_sharded, shard_bounds
from lmbias.metrics.summary import file_provenance
from lmbias.parsers import parse_benchmark, required_files

REPO = REPO_ROOT
METHOD = {"kind": "pretrained"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_tables_equal(a: pa.Table, b: pa.Table, tol: float = 1e-5) -> None:
    assert a.schema.equals(b.schema, check_metadata=False), (a.schema, b.schema)
    assert a.num_rows == b.num_rows
    for name in a.column_names:
        x, y = a[name].to_pylist(), b[name].to_pylist()
        if pa.types.is_floating(a.schema.field(name).type):
            # float32 forward passes in differently composed batches: sentence sums of ~150 differ in the 7th digit
            np.testing.assert_allclose(
                np.array(x, dtype=float),
                np.array(y, dtype=float),
                rtol=1e-6 if tol else 0,
                atol=tol,
                equal_nan=True,
                err_msg=name,
            )
        else:
            assert x == y, name


@pytest.fixture(scope="module")
def setup(tmp_path_factory, shared_data):
    """tiny-bert, tiny-gpt2 and a seeded shuffle of 301 WinoBias items (odd: the shards differ in size;
    shuffled: the scorer's length sort cannot restore the order by accident)."""
    root = tmp_path_factory.mktemp("distributed")
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    entry = config["benchmarks"]["winobias"]
    folder = shared_data / "winobias"
    files = {f: folder / f for f in required_files(entry, config["data"], "winobias")}
    items = parse_benchmark({k: v for k, v in entry.items() if k not in ("scoring", "metric")}, files, "winobias")
    order = np.random.default_rng(0).permutation(items.num_rows)[:301]
    items = items.take(pa.array(order))
    write_table_atomic(items, root / "items.parquet")
    write_table_atomic(items.slice(0, 101), root / "items-101.parquet")
    models = {}
    for name, arch, family in (("tiny-bert", "bert", "mlm"), ("tiny-gpt2", "gpt2", "clm")):
        build_tiny_model(arch, root / name, seed=0)
        models[name] = {"path": str(root / name), "family": family, "revision": "local"}
    bench = {k: v for k, v in entry.items() if k != "metric"}
    return root, items, models, bench


def _job_args(root, out, model, entry, bench, n=301, **options) -> list[str]:
    """`--job FILE` of `lmbias score` for one benchmark: the job description the scoring rules launch with
    (lmbias.jobs.model_scoring), with its score key."""
    items = root / ("items.parquet" if n == 301 else f"items-{n}.parquet")
    job = one_benchmark_job(items, out, model, entry, METHOD, "winobias", bench, threads=2, **options)
    job = job.launched(benchmark_keys(job))
    path = Path(out).with_suffix(".job.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(job.to_json(), encoding="utf-8")
    return ["--job", str(path)]


def _run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, env=launch_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


@pytest.mark.parametrize(
    "model,n,conditions,precision", [("tiny-bert", 301, None, None), ("tiny-gpt2", 101, ["names"], "bf16")]
)
def test_two_gloo_processes_equal_one_process(setup, model, n, conditions, precision):
    """Also: a model's `precision` reaches every process (bf16 autocast on CPU here: its numbers differ
    from float32 ones, and the processes agree with the one-process job at bf16's resolution)."""
    root, items, models, bench = setup
    entry, items = models[model], items.slice(0, n)
    if precision is not None:
        entry = {**entry, "precision": precision}
    if conditions is not None:  # fewer rewrites per line: causal scoring is the slower path on CPU
        bench = {**bench, "scoring": {**bench["scoring"], "conditions": conditions}}
    folder = root / model
    two, one, job = (folder / side / "scores" / "winobias.parquet" for side in ("two", "one", "job"))
    timing = folder / "two.job.tsv"
    args = _job_args(root, two, model, entry, bench, n=n, timing=timing, max_tokens=1024)
    proc = _run(launch_command(2, _free_port(), args, cpu=True), root)
    # really two processes, each with its own shard (ceil(n/2) + floor(n/2) items), gathered by the main one
    log = proc.stdout + proc.stderr
    assert "process 0/2" in log and "process 1/2" in log, log[-3000:]
    assert f"{(n + 1) // 2} rows of {n} items" in log and f"{n // 2} rows of {n} items" in log
    assert "from 2 processes" in log
    # one progress bar, the main process's, as plain lines; one summary line for all items
    finals = [
        line for line in log.splitlines() if line.startswith("scoring winobias (process 0 of 2):") and "100%" in line
    ]
    assert len(finals) == 1 and "\r" not in log, log[-3000:]
    assert log.count(f"scored {n:,} items in ") == 1
    # the main process's timing file: both processes' passes, the largest peak memory of the two
    load, row = job_timing.read_timing_rows(timing)
    assert load["benchmark"] == job_timing.LOAD_ROW and row["benchmark"] == "winobias"
    assert row["status"] == "ok" and row["processes"] == "2" and row["items"] == str(n), row
    assert row["max_tokens"] == row["max_tokens_final"] == "1024" and row["oom_halvings"] == "0"
    assert int(row["forward_passes"]) >= 2 and float(row["peak_rss_mib"]) > 100
    _run([sys.executable, "-m", "lmbias.cli", "score", *_job_args(root, one, model, entry, bench, n=n)], root)
    items_path = root / ("items.parquet" if n == 301 else f"items-{n}.parquet")
    score_one(items_path, job, model, entry, METHOD, "winobias", bench, threads=2)

    got, single, reference = pq.read_table(two), pq.read_table(one), pq.read_table(job)
    assert [file_provenance(p)["score_world_size"] for p in (two, one, job)] == [2, 1, 1]
    assert file_provenance(two)["torch_version"] == file_provenance(job)["torch_version"] is not None
    for path in (two, one, job):  # the weights as loaded and the autocast every process ran under
        assert (file_provenance(path)["weights_dtype"], file_provenance(path)["precision"]) == (
            "fp32",
            precision or "fp32",
        )
    assert_tables_equal(single, reference, tol=0.0)  # one process *is* the in-process job
    if precision is None:
        assert_tables_equal(got, reference)
    else:  # bf16 sums over differently padded batches agree only to bf16's resolution
        assert_tables_equal(got, reference, tol=0.05)
        fp32 = folder / "fp32" / "scores" / "winobias.parquet"
        score_one(items_path, fp32, model, models[model], METHOD, "winobias", bench, threads=2)
        for table in (got, reference):
            diff = np.abs(
                np.array(table["logp_male"].to_pylist()) - np.array(pq.read_table(fp32)["logp_male"].to_pylist())
            )
            assert diff.max() > 1e-4, "the bf16 setting did not reach the forward pass"
    # item order preserved: the shuffled input order, not a sorted or shard-interleaved one
    assert got["item_id"].to_pylist() == items["item_id"].to_pylist()


def test_multi_gpu_config_launch_falls_back_to_gloo_without_cuda(setup):
    """What the score_benchmark rule runs for resources.gpu = 2 (multi_gpu.yaml, bf16), on a CUDA-less host."""
    root, items, models, bench = setup
    out = root / "rule" / "scores" / "winobias.parquet"
    args = _job_args(root, out, "tiny-bert", models["tiny-bert"], bench, n=101)  # the launch is what is tested
    cmd = launch_command(2, main_process_port(str(out)), args)
    assert "multi_gpu.yaml" in cmd[cmd.index("--config_file") + 1]
    proc = _run(cmd, root)
    assert "from 2 processes" in proc.stdout + proc.stderr
    assert pq.read_table(out)["item_id"].to_pylist() == items.slice(0, 101)["item_id"].to_pylist()


def test_shard_bounds_tile_in_rank_order():
    for n in (0, 1, 2, 5, 301):
        for world in (1, 2, 3, 8):
            bounds = [shard_bounds(n, world, r) for r in range(world)]
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
            sizes = [b - a for a, b in bounds]
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    with pytest.raises(ValueError):
        shard_bounds(10, 2, 2)


def test_fake_two_process_split_equals_whole_table(setup):
    """The split/reassembly in-process: ranks 0 and 1 of a fake world of 2, gathered out of order."""
    root, items, models, bench = setup
    model, tokenizer = load_model(model_spec("tiny-bert", models["tiny-bert"]))
    definition = catalog.definition("winobias")

    def score(part):
        return definition.score(part, LanguageModel(model, tokenizer, "mlm", stats=EngineStats()), bench["scoring"])

    parts = [score_table_sharded(items, definition, rank, 2, score) for rank in (1, 0)]
    assert [p[1].num_rows for p in parts] == [150, 151]
    assert_tables_equal(reassemble(parts), score(items))
    # more processes than items: the idle ranks contribute nothing
    few = items.slice(0, 2)
    parts = [score_table_sharded(few, definition, rank, 4, score) for rank in range(4)]
    assert [p[1] is None for p in parts] == [False, False, True, True]
    assert reassemble(parts)["item_id"].to_pylist() == few["item_id"].to_pylist()


def test_cross_item_scorers_run_whole_on_the_main_process():
    items = pa.table({"x": list(range(7))})
    seen = []

    def score(part):
        seen.append(part.num_rows)
        return pa.table({"total": [sum(part["x"].to_pylist())]})  # aggregates across items

    seat_templates = catalog.definition("seat_templates")
    assert not seat_templates.row_local and not catalog.definition("seat").row_local
    parts = [score_table_sharded(items, seat_templates, rank, 3, score) for rank in range(3)]
    assert seen == [7] and reassemble(parts)["total"].to_pylist() == [21]


def test_row_local_scorer_with_wrong_row_count_is_refused():
    items = pa.table({"x": list(range(6))})
    with pytest.raises(RuntimeError, match="one row per item"):
        score_table_sharded(items, catalog.definition("winobias"), 0, 2, lambda part: part.slice(0, 1))


def test_row_local_definitions_are_the_per_item_scorers():
    """The definitions that say their rows shard: every likelihood scorer that maps one item to one row.
    SEAT (pooled effect sizes), perplexity (windows across texts), BOLD and WinoGender (batched prompts,
    not yet checked shard by shard) stay whole on the main process."""
    row_local = {name for name, d in catalog.definitions().items() if d.row_local}
    assert row_local == {"winobias", "crows_pairs", "da_gender", "logprob", "occupations", "stereoset", "bec_pro"}


def test_main_process_port_depends_on_the_job_and_is_free():
    a, b = (
        main_process_port("results/a/scores/winobias.parquet"),
        main_process_port("results/b/scores/winobias.parquet"),
    )
    assert a != b and 20000 <= a < 40200 and a != 29500
    with socket.socket() as s:  # a busy port is skipped
        s.bind(("127.0.0.1", a))
        assert main_process_port("results/a/scores/winobias.parquet") != a


def test_one_launch_scores_several_benchmarks_like_one_process(setup, tmp_path):
    """The score_model job with resources.gpu = 2 (lmbias.jobs.model_scoring): one `accelerate launch ...
    lmbias score --job FILE` for every benchmark to score, the model loaded once per process; the score files
    equal the one-process job's (keys included), and a rerun keeps them without launching."""
    from lmbias.jobs import model_scoring
    from lmbias.metrics.score_keys import read_manifest, stored_key

    root, items, models, bench = setup
    (tmp_path / "library.sha256").write_text("0  winobias\n")
    write_table_atomic(items.slice(0, 25), tmp_path / "items.parquet")  # a few: the launch is what is tested
    names_only = {**bench, "scoring": {**bench["scoring"], "conditions": ["names"]}}

    def job(out):
        return ScoringJob(
            "tiny-bert",
            models["tiny-bert"],
            {"kind": "pretrained", "model_dir": None},
            {
                name: BenchmarkTask(
                    entry, tmp_path / "items.parquet", out / "scores" / f"{name}.parquet", [tmp_path / "library.sha256"]
                )
                for name, entry in (("winobias", bench), ("winobias-names", names_only))
            },
            weights_dir=models["tiny-bert"]["path"],
            seed=0,
            threads=2,
            max_tokens=1024,
            manifest=out / "scores.json",
            timing=out / "scores.job.tsv",
        )

    two, one = job(tmp_path / "two"), job(tmp_path / "one")
    model_scoring.score_benchmarks(two, gpus=2)
    model_scoring.score_benchmarks(one, gpus=1)
    rows = job_timing.read_timing_rows(two.timing)
    assert [r["benchmark"] for r in rows] == [job_timing.LOAD_ROW, "winobias", "winobias-names"], rows
    assert all(r["processes"] == "2" and r["status"] == "ok" for r in rows), rows
    for name in two.benchmarks:
        a, b = two.benchmarks[name].scores, one.benchmarks[name].scores
        assert_tables_equal(pq.read_table(a), pq.read_table(b))
        assert file_provenance(a)["score_world_size"] == 2 and stored_key(a) == stored_key(b) is not None
        assert read_manifest(two.manifest)[name]["scored"]
    model_scoring.score_benchmarks(two, gpus=2)  # nothing to score: no launch, no load
    assert [r["status"] for r in job_timing.read_timing_rows(two.timing)] == ["kept", "kept"]
