"""A benchmark's target costs that benchmark (issue 35), through real Snakemake runs on a copy of the workflow:

- metrics/<benchmark>.parquet loads the model for that benchmark alone, and the model's job later keeps its file;
- both kinds of target in one run write each score file once;
- an edit of one benchmark's option gives `snakemake -n` reasons that name it, in a line;
- a deleted score file is scored again alone, a file whose key no longer holds is named and scored again;
- a benchmark failing in the model's job leaves the other benchmarks' targets building (--keep-going), fails
  the summary naming it, and a rerun scores only it;
- a reference model whose tokenizer says 512 positions but whose config has 128 scores perplexity in windows
  of 128 and builds SEAT's metrics.

The tests share one working copy and run in file order: each starts from what the one before it left.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from helpers.workflow_runs import copy_workflow, run_snakemake, scheduled_outputs
from lmbias.engine.context_window import CONTEXT_METADATA
from lmbias.engine.job_timing import read_timing_rows
from lmbias.metrics.score_keys import stored_key

pytestmark = pytest.mark.workflow

MODEL = "tiny-gpt2"
REFERENCE = "ref-bert"  # a tiny BERT whose tokenizer says 512 positions and whose config has 128
BENCHMARKS = ["crows_pairs", "winogender", "occupations", "perplexity_gap", "seat"]
SEED = f"results/{MODEL}/pretrained/seed0"
SUMMARY = f"results/{MODEL}/pretrained/summary.parquet"
MODEL_TIMING = f"benchmarks/{MODEL}/pretrained/seed0/scores.job.tsv"


def _timing(workdir: Path, benchmark: str) -> dict:
    """The benchmark's row of its own job's timing file (rule score_benchmark)."""
    rows = read_timing_rows(workdir / f"benchmarks/{MODEL}/pretrained/seed0/scores/{benchmark}.job.tsv")
    return next(row for row in rows if row["benchmark"] == benchmark)


def _model_rows(workdir: Path) -> dict[str, str]:
    """{benchmark: status} of the model job's last run ("ok": scored, "kept": its file held its key)."""
    return {row["benchmark"]: row["status"] for row in read_timing_rows(workdir / MODEL_TIMING)}


def _reasons(proc) -> dict[str, str]:
    """{job output: its reason} of a dry run."""
    text = proc.stdout + proc.stderr
    return dict(re.findall(r"^\s*output: (\S+).*?\n\s*reason: ([^\n]*)", text, re.M | re.S))


def _reference_bert(folder: Path) -> Path:
    """A tiny BERT with 128 position embeddings whose tokenizer keeps model_max_length 512 (issue 35's case)."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, BertForMaskedLM

    from lmbias.engine.tiny import build_tiny_model

    built = build_tiny_model("bert", folder / "built")
    config = AutoConfig.from_pretrained(built)
    config.max_position_embeddings = 128
    torch.manual_seed(0)
    model = BertForMaskedLM(config)
    state = BertForMaskedLM.from_pretrained(built).state_dict()
    state = {k: (v[:128] if "position_embeddings" in k else v) for k, v in state.items() if "position_ids" not in k}
    model.load_state_dict(state, strict=False)
    model.save_pretrained(folder / "ref")
    tokenizer = AutoTokenizer.from_pretrained(built)
    assert tokenizer.model_max_length == 512
    tokenizer.save_pretrained(folder / "ref")
    return folder / "ref"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, repo_root, shared_data):
    root = copy_workflow(repo_root, tmp_path_factory.mktemp("targets"))
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["only_benchmarks"] = BENCHMARKS
    config["benchmarks"]["crows_pairs"]["bias_types"] = ["gender"]
    config["models"][REFERENCE] = {
        "path": str(_reference_bert(root / "ref-models")),
        "family": "mlm",
        "revision": "local",
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def _run(workdir, shared_data, *args, check=True, config=None):
    rest = ["--configfile", str(config)] if config else []
    return run_snakemake(workdir, *args, *rest, "--config", f"data_dir={shared_data}", check=check)


def _edited(workdir: Path, edit) -> Path:
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    edit(config)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))  # the edit stays for later tests
    return workdir / "config.yaml"


def test_one_benchmarks_metrics_score_that_benchmark_alone_and_the_model_job_keeps_it(workdir, shared_data):
    _run(workdir, shared_data, f"{SEED}/metrics/crows_pairs.parquet")
    timing = _timing(workdir, "crows_pairs")
    assert timing["status"] == "ok" and int(timing["items"]) > 0  # one row: this benchmark, scored
    assert sorted(p.name for p in (workdir / SEED / "scores").iterdir()) == ["crows_pairs.parquet"]
    assert not (workdir / SEED / "scores.json").exists()  # the model's job did not run
    _run(workdir, shared_data, SUMMARY)
    rows = _model_rows(workdir)
    assert rows.pop("(load)") == "ok"
    assert rows == {b: ("kept" if b == "crows_pairs" else "ok") for b in BENCHMARKS}, rows
    assert scheduled_outputs(_run(workdir, shared_data, "-n", SUMMARY)) == []


def test_a_reference_model_with_fewer_positions_than_its_tokenizer_says(workdir, shared_data):
    seed = f"results/{REFERENCE}/pretrained/seed0"
    _run(workdir, shared_data, f"{seed}/metrics/seat.parquet", f"{seed}/metrics/perplexity_gap.parquet")
    assert pq.read_table(workdir / seed / "metrics/seat.parquet").num_rows > 0
    metadata = pq.read_schema(workdir / seed / "scores/perplexity_gap.parquet").metadata
    assert int(metadata[b"lmbias.perplexity_window"]) == 128
    context = metadata[CONTEXT_METADATA.encode()].decode()
    assert '"config_limit": 128' in context and '"tokenizer_limit": 512' in context


def test_an_edit_of_one_benchmark_gives_short_reasons_naming_it(workdir, shared_data):
    edited = _edited(workdir, lambda c: c["benchmarks"]["crows_pairs"]["scoring"].update(variants=["nangia"]))
    proc = _run(workdir, shared_data, "-n", SUMMARY, f"{SEED}/metrics/crows_pairs.parquet", config=edited)
    reasons = _reasons(proc)
    scoring = {o: r for o, r in reasons.items() if o.startswith("results/scoring/") or "/scores" in o}
    assert sorted(scoring) == [
        "results/scoring/pretrained/crows_pairs.json",
        f"{SEED}/scores.json",
        f"{SEED}/scores/crows_pairs.parquet",
    ], reasons
    for output, reason in scoring.items():
        assert "crows_pairs" in reason and len(reason) < 300, (output, reason)


def test_both_kinds_of_target_in_one_run_write_each_score_file_once(workdir, shared_data):
    """The edit above makes CrowS-Pairs' file stale for both jobs; the model's job (priority) scores it and the
    one-benchmark job, after waiting for the seed's scoring lock, keeps it."""
    before = stored_key(workdir / SEED / "scores/crows_pairs.parquet")
    _run(workdir, shared_data, SUMMARY, f"{SEED}/metrics/crows_pairs.parquet")
    statuses = [_model_rows(workdir)["crows_pairs"], _timing(workdir, "crows_pairs")["status"]]
    assert sorted(statuses) == ["kept", "ok"], statuses
    assert stored_key(workdir / SEED / "scores/crows_pairs.parquet") != before
    assert scheduled_outputs(_run(workdir, shared_data, "-n", SUMMARY, f"{SEED}/metrics/crows_pairs.parquet")) == []


def test_a_deleted_score_file_is_scored_again_alone(workdir, shared_data):
    (workdir / SEED / "scores/winogender.parquet").unlink()
    _run(workdir, shared_data, f"{SEED}/metrics/winogender.parquet")
    assert _timing(workdir, "winogender")["status"] == "ok"
    # through the summary: the model's job is not rerun, the file is scored alone before the seed's metrics
    (workdir / SEED / "scores/occupations.parquet").unlink()
    outputs = scheduled_outputs(_run(workdir, shared_data, "-n", SUMMARY))
    assert f"{SEED}/scores/occupations.parquet" in outputs and f"{SEED}/scores.json" not in outputs, outputs
    _run(workdir, shared_data, SUMMARY)
    assert _timing(workdir, "occupations")["status"] == "ok"


def test_a_file_whose_key_no_longer_holds_is_named_and_scored_again(workdir, shared_data):
    """Perplexity's window edited, then asked for alone: the file the model's job wrote (an older key, and no
    Snakemake record of its own) is seen as older than the edited spec, named as changed and scored again."""
    path = workdir / SEED / "scores/perplexity_gap.parquet"
    old = stored_key(path)
    edited = _edited(
        workdir, lambda c: c["benchmarks"]["perplexity_gap"].setdefault("scoring", {}).update(max_length=64)
    )
    proc = _run(workdir, shared_data, f"{SEED}/metrics/perplexity_gap.parquet", config=edited)
    log = (workdir / f"logs/{MODEL}/pretrained/seed0/scores/perplexity_gap.log").read_text()
    assert f"its score key {old[:12]} is not" in log and "scored again" in log, proc.stdout[-2000:]
    assert stored_key(path) != old and pq.read_schema(path).metadata[b"lmbias.perplexity_window"] == b"64"


def test_a_failing_benchmark_stays_local_and_a_rerun_scores_only_it(workdir, shared_data):
    items = workdir / "results/data/occupations.parquet"
    good = items.read_bytes()
    items.write_bytes(b"not a parquet file")  # newer than the model's manifest: its job runs, and fails there
    (workdir / SEED / "scores/occupations.parquet").unlink()  # so that the rerun has something to score
    summary_written = (workdir / SUMMARY).stat().st_mtime_ns
    proc = _run(workdir, shared_data, "--keep-going", SUMMARY, f"{SEED}/metrics/seat.parquet", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "lmbias: scoring occupations" in text and "going on with the other benchmarks" in text
    assert "--keep-going" in text  # the error says the other targets build with it
    assert (workdir / SEED / "metrics/seat.parquet").exists()  # the other benchmark's target built
    assert (workdir / SUMMARY).stat().st_mtime_ns == summary_written  # the summary was not made without it
    rows = _model_rows(workdir)
    assert rows["occupations"] not in ("ok", "kept") and rows["winogender"] == "kept"
    items.write_bytes(good)
    _run(workdir, shared_data, SUMMARY)
    rows = _model_rows(workdir)
    assert {b for b, status in rows.items() if status == "ok"} == {"(load)", "occupations"}, rows
    assert scheduled_outputs(_run(workdir, shared_data, "-n", SUMMARY, f"{SEED}/metrics/seat.parquet")) == []
