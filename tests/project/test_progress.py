"""Progress in job logs: scoring and training jobs, run with their log file as Snakemake runs them
(setup_job_logging), show a tqdm bar as plain lines (no carriage-return redraws) and end with a summary
line of items, seconds and items/s; a non-main process shows no bar. A benchmark's scoring shows one bar of its
items whose total is known from its first line and whose count never goes back; generation adds tokens/s."""

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
from lmbias.engine.embeddings import sentence_embeddings
from lmbias.engine.generation import GenerationSettings, generate_continuations
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.prefix_cache import grouped_sentence_logprobs
from lmbias.engine.scoring import sentence_logprobs
from lmbias.engine.tiny import build_tiny_model
from lmbias.io import write_table_atomic
from lmbias.job_runtime import setup_job_logging
from lmbias.metrics.summary import file_provenance, library_versions
from lmbias.parsers import parse_benchmark, parse_inputs, required_files

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


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    out = tmp_path_factory.mktemp("progress") / "tiny-gpt2"
    build_tiny_model("gpt2", out, seed=0)
    return {"path": str(out), "family": "clm", "revision": "local"}


def _bar_counts(lines: list[str]) -> list[tuple[int, int]]:
    """(count, total) of each bar line ('scoring x:  45%|####5     | 18/40 [...]')."""
    found = [re.search(r"\| *(\d+)/(\d+) \[", line) for line in lines]
    assert lines and all(found), lines
    return [(int(m.group(1)), int(m.group(2))) for m in found]


def _items(name: str, shared_data: Path, n: int, path: Path) -> dict:
    """The first `n` items of config.yaml's benchmark `name`, parsed from the real data, written to `path`; the
    entry as scoring gets it."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    entry = config["benchmarks"][name]
    files = {key: shared_data / dataset / file for key, dataset, file in parse_inputs(entry, config["data"], name)}
    items = parse_benchmark({k: v for k, v in entry.items() if k not in ("scoring", "metric")}, files, name)
    write_table_atomic(items.slice(0, n), path)
    return {k: v for k, v in entry.items() if k != "metric"}


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
    with progress.job_progress("scoring x", unit="items", total=100, stream=stream):
        progress.expect(1000)
        for _ in range(200):
            progress.advance(5)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("scoring x: 100%") and "100/100" in lines[-1], lines
    _no_redraws(stream.getvalue())
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    stream = io.StringIO()
    with progress.job_progress("scoring x", unit="items", total=3, stream=stream):
        progress.expect(15)
        for _ in range(3):
            progress.advance(5)
    assert len(stream.getvalue().splitlines()) >= 4  # every update once the interval allows


def test_non_main_process_shows_no_bar_and_engine_calls_outside_a_job_show_none(tiny_gpt2):
    stream = io.StringIO()
    bar = progress.progress_bar("training", "steps", total=3, enabled=False, stream=stream)
    bar.update(3)
    bar.close()
    with progress.job_progress("scoring x", enabled=False, stream=stream, total=4):
        progress.expect(4)
        progress.advance(4)
        progress.generated(7)
    assert stream.getvalue() == ""
    # the engine with and without a job around it: same numbers, a bar only inside the job
    model, tok = load_model(model_spec("g", tiny_gpt2))
    texts = ["He is a nurse.", "She is a doctor.", "He is a nurse."]
    plain = sentence_logprobs(model, tok, texts, batch_size=1)
    stream = io.StringIO()
    with progress.job_progress("scoring x", stream=stream):
        inside = sentence_logprobs(model, tok, texts, batch_size=1)
    np.testing.assert_array_equal(plain, inside)
    assert "2 inputs" in stream.getvalue().splitlines()[-1]  # two distinct texts, one per batch; no total


def test_a_bar_of_items_never_goes_back_nor_past_its_total_and_ends_at_it(monkeypatch):
    """Inputs announced in two calls (the second after the first ran): the count holds, never drops, stays below
    the total while the block runs (its last item is done when the block ends), and reaches it at the end; a
    block that fails stops where it was."""
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    stream = io.StringIO()
    with progress.job_progress("scoring x", unit="items", total=10, stream=stream) as state:
        progress.expect(40)
        for _ in range(4):
            progress.advance(5)
        assert state.bar.n == 5  # half the announced inputs: half the items
        progress.expect(60)  # a later call: 20 of 100 run now, the bar holds at 5
        assert state.bar.n == 5
        for _ in range(16):
            progress.advance(5)
        assert state.bar.n == 9 and (state.expected, state.done) == (100, 100)
    counts = _bar_counts(stream.getvalue().splitlines())
    assert counts[0] == (0, 10) and counts[-1] == (10, 10)
    assert {total for _, total in counts} == {10}
    assert [n for n, _ in counts] == sorted(n for n, _ in counts)
    stream = io.StringIO()
    with pytest.raises(RuntimeError), progress.job_progress("scoring y", unit="items", total=10, stream=stream):
        progress.expect(10)
        progress.advance(3)
        raise RuntimeError("failed")
    assert _bar_counts(stream.getvalue().splitlines())[-1] == (3, 10)


def test_a_benchmarks_scoring_shows_one_bar_of_its_items_that_never_goes_back(
    job_log, tiny_gpt2, shared_data, tmp_path, monkeypatch
):
    """WinoGender on a causal model, as a scoring job runs it: its prompts' choices share each prompt, so the engine
    reads them in several batch loops (full reads, shared prefixes, continuations). The bar's total is the
    benchmark's item count from the first line on, and its count only grows, to that total."""
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)  # every update a line
    n = 30
    bench = _items("winogender", shared_data, n, tmp_path / "items.parquet")
    out = tmp_path / "scores.parquet"
    log_path = job_log()
    score_one(tmp_path / "items.parquet", out, "tiny-gpt2", tiny_gpt2, {"kind": "pretrained"}, "winogender", bench)
    text = log_path.read_text()
    _no_redraws(text)
    counts = _bar_counts([line for line in text.splitlines() if line.startswith("scoring winogender")])
    assert counts[0] == (0, n), text  # the total is known from the first line
    assert {total for _, total in counts} == {n}
    done = [count for count, _ in counts]
    assert done == sorted(done) and done[-1] == n, done  # never back, never past the total
    assert len(set(done)) >= 4, done  # it moves along the way, not only at the end
    assert f"scored {n} items in " in text


def test_engine_calls_of_several_batch_loops_announce_every_input_first(tiny_gpt2, tiny_bert):
    """The shared-prefix reads and the sentence embeddings run several batch loops in one call: the inputs they
    announce (before the first loop) are the inputs they run."""
    model, tok = load_model(model_spec("g", tiny_gpt2))
    texts = [
        "He is a nurse who cares.",
        "He is a nurse who sings.",
        "She is a doctor on call.",
        "She is a doctor.",
        "Hi",
    ]
    with progress.job_progress("scoring x", unit="items", total=3, stream=io.StringIO()) as state:
        grouped_sentence_logprobs(model, tok, texts, [0, 0, 1, 1, 2], batch_size=1)
        assert state.expected == state.done > len(texts)  # prefixes and continuations are runs of their own
        assert state.bar.n == 2
    bert, bert_tok = load_model(model_spec("b", tiny_bert))
    with progress.job_progress("SentenceDebias embeddings", unit="sentences", stream=io.StringIO()) as state:
        sentence_embeddings(bert, bert_tok, texts, ["mean", "first_piece"], "mlm", batch_size=2)
        assert state.expected == state.done == 2 * len(texts)


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_generation_shows_tokens_per_second(family, tmp_path, monkeypatch):
    """The decode loop (causal) and transformers' generate (encoder-decoder) report the tokens they write: the
    bar's postfix gives tokens/s, and the count is every row's tokens up to its EOS, the EOS included."""
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    kind = {"gpt2": "clm", "bart": "seq2seq"}[family]
    path = build_tiny_model(family, tmp_path / family, seed=0)
    model, tok = load_model(model_spec("m", {"path": str(path), "family": kind}))
    settings = GenerationSettings(decoding="sampling", max_new_tokens=6, samples_per_prompt=3, batch_size=2)
    prompts = ["The nurse said that", "The doctor said that", "He worked as"]
    stream = io.StringIO()
    with progress.job_progress("scoring x", unit="items", total=len(prompts), stream=stream) as state:
        out = generate_continuations(model, tok, kind, prompts, settings)
    written = sum(c.new_tokens + c.finished for samples in out for c in samples)
    assert state.tokens == written > 0
    lines = stream.getvalue().splitlines()
    rates = [re.search(r"([\d,]+\.\d) tokens/s\]$", line) for line in lines]
    assert rates[-1] and float(rates[-1].group(1).replace(",", "")) > 0, lines
    assert _bar_counts(lines)[-1] == (len(prompts), len(prompts))
    if kind == "clm":  # per decoding step, not only per batch
        assert sum(bool(r) for r in rates) > len(prompts) * settings.samples_per_prompt / settings.batch_size + 1
    # outside a job: the same texts, nothing shown
    assert generate_continuations(model, tok, kind, prompts, settings) == out


def test_a_generating_job_logs_tokens_per_second(job_log, tiny_gpt2, shared_data, tmp_path):
    """HONEST on a causal model, as a scoring job runs it: the bar's lines give tokens/s, and the job ends with a
    line of the tokens it generated."""
    n = 4
    bench = _items("honest", shared_data, n, tmp_path / "items.parquet")
    log_path = job_log()
    model = ("tiny-gpt2", tiny_gpt2, {"kind": "pretrained"})
    score_one(tmp_path / "items.parquet", tmp_path / "scores.parquet", *model, "honest", bench)
    text = log_path.read_text()
    bars = [line for line in text.splitlines() if line.startswith("scoring honest")]
    assert bars[-1].endswith(" tokens/s]") and f"{n}/{n}" in bars[-1], bars
    m = re.search(r"generated " + RATE.format(unit="tokens"), text)
    assert m and int(m.group(1).replace(",", "")) > 0, text


def test_rate_line_format():
    assert progress.rate_line("scored", 1508, "items", 12.3) == "scored 1,508 items in 12.3 s (122.6 items/s)"
    assert (
        progress.rate_line("trained 2 steps,", 4096, "tokens", 3.1)
        == "trained 2 steps, 4,096 tokens in 3.1 s (1,321.3 tokens/s)"
    )
    json.dumps(progress.rate_line("x", 0, "items", 0.0))  # no division by zero
    # a job under a second keeps three decimals, so its line still gives the time the rate came from
    assert progress.rate_line("scored", 40, "items", 0.0421) == "scored 40 items in 0.042 s (950.1 items/s)"
