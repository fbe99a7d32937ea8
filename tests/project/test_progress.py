"""Progress in job logs: scoring and training jobs, run with their log file as Snakemake runs them
(setup_job_logging), show a tqdm bar as plain lines (no carriage-return redraws) and end with a summary
line of items, seconds and items/s; a non-main process shows no bar."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from helpers.gap_corpora import gap_sentences
from helpers.paths import REPO_ROOT
from helpers.scoring import score_one
from lmbias import progress
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.scoring import sentence_logprobs
from lmbias.engine.tiny import build_tiny_model
from lmbias.io import write_table_atomic
from lmbias.job_runtime import setup_job_logging
from lmbias.metrics.summary import file_provenance, library_versions
from lmbias.parsers import parse_benchmark, required_files

REPO = REPO_ROOT
RATE = r"([\d,]+) {unit} in (\d+\.\d+) s \(([\d,]+\.\d|inf) {unit}/s\)"


@pytest.fixture
def job_log(tmp_path, monkeypatch):
    """Call it in the test body to run the rest as a Snakemake job does: stderr and logging go to a log file
    (pytest swaps sys.stderr back between setup and call, hence not in the fixture). Restored afterwards."""
    from transformers.utils import logging as hf_logging

    path = tmp_path / "job.log"
    hf_bars = hf_logging.is_progress_bar_enabled()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")  # setup_job_logging sets it; monkeypatch restores it

    def start() -> Path:
        monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
        setup_job_logging(str(path))
        return path

    yield start
    sys.stderr.flush()
    root.handlers[:] = handlers
    root.setLevel(level)
    (hf_logging.enable_progress_bar if hf_bars else hf_logging.disable_progress_bar)()


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    out = tmp_path_factory.mktemp("progress") / "tiny-bert"
    build_tiny_model("bert", out, seed=0)
    return {"path": str(out), "family": "mlm", "revision": "local"}


def _no_redraws(text: str) -> None:
    assert "\r" not in text and "\x1b[" not in text, "carriage-return redraws in the log"
    assert "Loading weights" not in text, "the Hugging Face progress bars are off in a job log"


def test_scoring_job_logs_a_bar_and_a_rate_line(job_log, tiny_bert, shared_data, tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    entry = config["benchmarks"]["winobias"]
    files = {f: shared_data / "winobias" / f for f in required_files(entry, config["data"], "winobias")}
    items = parse_benchmark({k: v for k, v in entry.items() if k not in ("scoring", "metric")}, files, "winobias")
    write_table_atomic(items.slice(0, 40), tmp_path / "items.parquet")
    bench = {k: v for k, v in entry.items() if k != "metric"}
    out = tmp_path / "scores.parquet"
    log_path = job_log()
    score_one(
        tmp_path / "items.parquet", out, "tiny-bert", tiny_bert, {"kind": "pretrained"}, "winobias", bench, threads=1
    )
    text = log_path.read_text()
    _no_redraws(text)
    bars = [line for line in text.splitlines() if line.startswith("scoring winobias:")]
    assert bars and "100%" in bars[-1], text
    done, total = re.search(r"\| (\d+)/(\d+) \[", bars[-1]).groups()
    assert done == total and int(total) > 0
    m = re.search(r"scored " + RATE.format(unit="items"), text)
    assert m and m.group(1) == "40", text
    assert float(m.group(3).replace(",", "")) == pytest.approx(40 / float(m.group(2)), rel=0.2)
    prov = file_provenance(out)  # what computed the scores: this environment, one process, no training
    assert prov["score_world_size"] == 1 and prov["train_world_size"] is None
    assert {k: prov[k] for k in library_versions()} == library_versions()


def test_training_job_logs_a_bar_and_a_rate_line(job_log, tiny_bert, shared_data, tmp_path):
    from lmbias.jobs.scoring import scoring_provenance
    from lmbias.training.jobs import train_job

    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.Table.from_pylist([{"text": t} for t in gap_sentences(shared_data, 16, max_words=30)]), corpus)
    out = tmp_path / "model"
    log_path = job_log()
    train_job(
        {k: v for k, v in tiny_bert.items() if k != "revision"},
        "tiny-bert",
        str(corpus),
        str(out),
        0,
        {"objective": "mlm", "batch_size": 4, "max_steps": 2, "epochs": 1, "max_length": 48, "precision": "fp32"},
    )
    text = log_path.read_text()
    _no_redraws(text)
    bars = [line for line in text.splitlines() if line.startswith("training:")]
    assert bars and "2/2" in bars[-1] and "loss=" in bars[-1], text
    m = re.search(r"trained 2 steps, " + RATE.format(unit="tokens"), text)
    assert m, text
    logged = pq.read_table(out / "train_log.parquet").column("tokens").to_pylist()
    assert int(m.group(1).replace(",", "")) == sum(logged) > 0
    # the trained folder's world size is what a scoring job of it records
    model, _ = load_model(model_spec("trained", {"path": str(out), "family": "mlm"}))
    assert scoring_provenance(model, {"kind": "cda", "model_dir": str(out)}, 1)["lmbias.train_world_size"] == "1"


def test_log_file_bar_is_lines_at_most_every_log_interval(monkeypatch):
    """Many quick batches: the first and the final state only (LOG_INTERVAL apart), each a line of its own."""
    stream = io.StringIO()
    with progress.job_progress("scoring x", stream=stream):
        for _ in range(200):
            progress.expect(5)
            progress.advance(5)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("scoring x: 100%") and "1000/1000" in lines[-1], lines
    _no_redraws(stream.getvalue())
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    stream = io.StringIO()
    with progress.job_progress("scoring x", stream=stream):
        for _ in range(3):
            progress.expect(5)
            progress.advance(5)
    assert len(stream.getvalue().splitlines()) >= 4  # every update once the interval allows


def test_non_main_process_shows_no_bar_and_engine_calls_outside_a_job_show_none(tiny_bert):
    stream = io.StringIO()
    bar = progress.progress_bar("training", "steps", total=3, enabled=False, stream=stream)
    bar.update(3)
    bar.close()
    with progress.job_progress("scoring x", enabled=False, stream=stream):
        progress.expect(4)
        progress.advance(4)
    assert stream.getvalue() == ""
    # the engine with and without a job around it: same numbers, a bar only inside the job
    gpt2 = build_tiny_model("gpt2", Path(tiny_bert["path"]).parent / "gpt2", seed=0)
    model, tok = load_model(model_spec("g", {"path": str(gpt2), "family": "clm"}))
    texts = ["He is a nurse.", "She is a doctor.", "He is a nurse."]
    plain = sentence_logprobs(model, tok, texts, batch_size=1)
    stream = io.StringIO()
    with progress.job_progress("scoring x", stream=stream):
        inside = sentence_logprobs(model, tok, texts, batch_size=1)
    np.testing.assert_array_equal(plain, inside)
    assert "2/2" in stream.getvalue().splitlines()[-1]  # two distinct texts, one per batch


def test_rate_line_format():
    assert progress.rate_line("scored", 1508, "items", 12.3) == "scored 1,508 items in 12.3 s (122.6 items/s)"
    assert (
        progress.rate_line("trained 2 steps,", 4096, "tokens", 3.1)
        == "trained 2 steps, 4,096 tokens in 3.1 s (1,321.3 tokens/s)"
    )
    json.dumps(progress.rate_line("x", 0, "items", 0.0))  # no division by zero
    # a job under a second keeps three decimals, so its line still gives the time the rate came from
    assert progress.rate_line("scored", 40, "items", 0.0421) == "scored 40 items in 0.042 s (950.1 items/s)"
