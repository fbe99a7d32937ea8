"""Scoring by token budget (lmbias.engine.batching.run_batches): every engine call gives the same numbers
whatever the budget and the row cap; an input longer than the budget is a named error; out of CUDA memory
(injected here) the batch is halved, the job goes on with the same numbers and the log says so; a scoring
job's timing file holds its peak memory (lmbias.engine.job_timing)."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from helpers.scoring import score_one
from lmbias.engine import batching, job_timing
from lmbias.engine.batching import DEFAULT_MAX_TOKENS, EngineStats, TokenBudget, scoring_budget
from lmbias.engine.embeddings import POOLINGS, sentence_embeddings
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.pll import content_positions, encode, token_logprobs
from lmbias.engine.rolling import causal_nll
from lmbias.engine.scoring import (
    InfillIdsRequest,
    InfillRequest,
    MaskedRequest,
    infill_logprobs,
    infill_logprobs_ids,
    masked_logprobs,
    sentence_logprobs,
    word_token_ids,
)
from lmbias.engine.tiny import FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError, ScoringOutOfMemoryError, TokenBudgetError
from lmbias.io import write_table_atomic
from lmbias.parsers import parse_benchmark, required_files

TEXTS = [
    "He is a nurse.",
    "The doctor asked the nurse to help her with the patient in the room.",
    "She went home.",
    "My brother applied for the position of kindergarten teacher last week, and got it.",
    "Women don't know how to drive.",
    "Men don't know how to drive.",
    "He is a nurse.",  # a duplicate: scored once
    "A long sentence about the mechanic who repaired the car while the teacher waited outside for an hour.",
]
#: (row cap, token budget): one input per pass; a budget of a few sentences (and one padded-to-128 input);
#: three rows within the default; everything in one pass. Each gives other batches, so other padded widths.
BUDGETS = [(1, 10**6), (64, 160), (3, DEFAULT_MAX_TOKENS), (1000, 10**6)]
#: Measured across BUDGETS on the tiny BERT, RoBERTa, GPT-2, BART and Llama (CPU, float32, sdpa attention):
#: log-probabilities differ by at most 1.5e-7, embedding components by 4.8e-7. An input padded to another width sums its
#: attention and
#: matmuls over another number of (masked, zero-weight) positions, which moves float32 results by an ulp;
#: how many rows a batch holds changes nothing (test_rows_alone_change_no_bit).
TOLERANCE = 1e-6


@pytest.fixture(scope="module", params=["bert", "gpt2", "bart", "llama"])
def tiny(request, tmp_path_factory):
    arch = request.param
    out = tmp_path_factory.mktemp(f"budget-{arch}") / arch
    build_tiny_model(arch, out, seed=0)
    family = FAMILY_OF[arch]
    model, tok = load_model(model_spec(f"tiny-{arch}", {"path": str(out), "family": family, "revision": "local"}))
    return family, model, tok


def _every_engine_call(family, model, tok, batch_size, max_tokens):
    """{call: values} for every engine entry point that applies to the family, and the forward passes run."""
    stats = EngineStats()
    kw = dict(batch_size=batch_size, max_tokens=max_tokens, stats=stats)
    out = {}
    if family == "clm":
        out["sentence_bos"] = sentence_logprobs(model, tok, TEXTS, **kw)
        out["sentence_bias_bench"] = sentence_logprobs(model, tok, TEXTS, context="bias_bench", **kw)
        windows = [(list(tok(t, add_special_tokens=False)["input_ids"]), 1) for t in TEXTS]
        out["perplexity_windows"] = causal_nll(model, tok, windows, **kw)
    else:
        seqs = [encode(tok, t) for t in TEXTS]
        out["pll"] = np.concatenate(
            token_logprobs(model, tok, family, seqs, [content_positions(tok, s) for s in seqs], **kw)
        )
        cands = tuple(word_token_ids(tok, w)[0] for w in ("he", "she", "nurse"))
        masked = [t.replace("nurse", tok.mask_token).replace("teacher", tok.mask_token) for t in TEXTS]
        masked = [t for t in masked if tok.mask_token in t]
        if family == "mlm":
            reqs = [MaskedRequest(t, cands, k) for t in masked for k in range(t.count(tok.mask_token))]
            out["masked_text"] = np.concatenate(masked_logprobs(model, tok, reqs, **kw))
        else:
            reqs = [InfillRequest(t, t.split(tok.mask_token)[0].rstrip(" "), cands) for t in masked]
            out["infill_text"] = np.concatenate(infill_logprobs(model, tok, reqs, **kw))
            start = model.config.decoder_start_token_id
            ids_reqs = [
                InfillIdsRequest(tuple(s), tuple([start] + s[:p]), (s[p],)) for s in seqs[:3] for p in range(1, len(s))
            ]
            out["infill_ids"] = np.concatenate(infill_logprobs_ids(model, tok, ids_reqs, **kw))
    for name, values in sentence_embeddings(model, tok, TEXTS, POOLINGS[family], family, **kw).items():
        out[f"embedding_{name}"] = values.ravel()
    return out, stats.forward_passes


def test_numbers_equal_whatever_the_budget(tiny):
    family, model, tok = tiny
    runs = [_every_engine_call(family, model, tok, *budget) for budget in BUDGETS]
    passes = [p for _, p in runs]
    assert len(set(passes)) == len(BUDGETS), f"the budgets must batch differently: {passes}"
    reference = runs[0][0]
    for (values, _), budget in zip(runs[1:], BUDGETS[1:]):
        assert values.keys() == reference.keys()
        for name in reference:
            np.testing.assert_allclose(
                values[name],
                reference[name],
                rtol=0,
                atol=TOLERANCE,
                err_msg=f"{name} at batch_size, max_tokens = {budget}",
            )


def test_rows_alone_change_no_bit(tiny):
    """Inputs padded to one width (the DA-Gender padded mean pads every input to 128 tokens) give bit-identical
    numbers in batches of 1, 2 or all rows: the budget's only effect is the padded width."""
    family, model, tok = tiny
    padded = {"mlm": "mean_padded", "clm": "mean_padded", "seq2seq": "encoder_mean_padded"}[family]
    got = [
        sentence_embeddings(model, tok, TEXTS, [padded], family, batch_size=rows, max_tokens=rows * 128)[padded]
        for rows in (1, 2, 64)
    ]
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


def test_an_input_longer_than_the_budget_is_a_named_error(tiny):
    family, model, tok = tiny
    longest = max(len(tok(t)["input_ids"]) for t in TEXTS)
    with scoring_budget(12, "models.tiny.max_tokens"), pytest.raises(TokenBudgetError) as err:
        sentence_embeddings(model, tok, TEXTS, [POOLINGS[family][0]], family)
    message = str(err.value)
    assert message.startswith("models.tiny.max_tokens: ") and "budget of 12 padded tokens" in message
    assert f"an input of {longest} tokens" in message, message
    assert isinstance(err.value, ConfigError)
    for bad in (0, -3, True, 12.5, "8192"):
        with pytest.raises(ConfigError, match="models.m.max_tokens"):
            TokenBudget(bad, "models.m.max_tokens")


class _OutOfMemoryAbove:
    """The model's inner stack raises CUDA's out-of-memory error for batches of more than `rows` rows."""

    def __init__(self, model, rows: int):
        self.inner, self.rows, self.raised = model.base_model.forward, rows, []

    def __call__(self, input_ids=None, *args, **kwargs):
        if input_ids is not None and input_ids.shape[0] > self.rows:
            self.raised.append(tuple(input_ids.shape))
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {input_ids.numel()} MiB")
        return self.inner(input_ids, *args, **kwargs)


def test_out_of_memory_halves_the_batch_and_the_job_goes_on(tiny, monkeypatch, caplog):
    family, model, tok = tiny
    whole, _ = _every_engine_call(family, model, tok, 1000, 10**6)
    oom = _OutOfMemoryAbove(model, rows=2)
    monkeypatch.setattr(model.base_model, "forward", oom)
    # every text in one batch loop: the causal path would otherwise cut these texts of unlike lengths into runs of
    # low padding (batching.low_padding_runs), too short to reach the out-of-memory error
    monkeypatch.setattr(batching, "PADDING_SLACK", float("inf"))
    stats = EngineStats()
    with (
        caplog.at_level(logging.WARNING, logger="lmbias.engine.scoring"),
        scoring_budget(4096, "models.tiny.max_tokens") as budget,
    ):
        if family == "clm":
            got = sentence_logprobs(model, tok, TEXTS, batch_size=1000, stats=stats)
            again = sentence_logprobs(model, tok, TEXTS, batch_size=1000, stats=stats)
            expected = whole["sentence_bos"]
        else:
            seqs = [encode(tok, t) for t in TEXTS]
            where = [content_positions(tok, s) for s in seqs]
            got = np.concatenate(token_logprobs(model, tok, family, seqs, where, batch_size=1000, stats=stats))
            again = np.concatenate(token_logprobs(model, tok, family, seqs, where, batch_size=1000, stats=stats))
            expected = whole["pll"]
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE)
    np.testing.assert_array_equal(again, got)  # the halved budget holds for the job's later calls
    halvings = [r.getMessage() for r in caplog.records if "out of CUDA memory" in r.getMessage()]
    assert oom.raised and len(halvings) == len(oom.raised) == budget.halvings == stats.oom_halvings >= 2
    first_rows, first_width = oom.raised[0]
    assert halvings[0].startswith(
        f"{'sentence scoring' if family == 'clm' else 'masked scoring' if family == 'mlm' else 'infill scoring'}: "
        f"out of CUDA memory on a batch of {first_rows} x "
    )
    assert "models.tiny.max_tokens now " in halvings[0] and budget.max_tokens < 4096
    assert all(rows > 2 for rows, _ in oom.raised)
    assert budget.configured == 4096 and budget.max_tokens <= 2 * max(w for _, w in oom.raised)


def test_a_single_input_out_of_memory_is_a_named_error(tiny, monkeypatch):
    family, model, tok = tiny
    monkeypatch.setattr(model.base_model, "forward", _OutOfMemoryAbove(model, rows=0))
    with pytest.raises(ScoringOutOfMemoryError, match=r"out of CUDA memory on a single input of \d+ tokens"):
        sentence_embeddings(model, tok, TEXTS, [POOLINGS[family][0]], family)


# ------------------------------------------------------------------------------------------- timing file


def test_timing_file_round_trip(tmp_path):
    path = tmp_path / "deep" / "job.tsv"
    rows = [
        {"benchmark": job_timing.LOAD_ROW, "load_s": 1.5, "status": "ok"},
        {"benchmark": "winobias", "items": 10, "items_per_s": None, "status": "TokenBudgetError"},
    ]
    job_timing.write_timing_rows(path, rows)
    load, failed = job_timing.read_timing_rows(path)
    assert list(load) == list(job_timing.ROWS_COLUMNS)
    assert load["load_s"] == "1.500" and failed["status"] == "TokenBudgetError" and failed["items_per_s"] == "NA"
    with pytest.raises(ValueError, match="unknown column"):
        job_timing.write_timing_rows(path, [{"peak": 1}])
    assert job_timing.largest(
        [{"peak_rss_mib": 3.0, "peak_cuda_allocated_mib": None}, {"peak_rss_mib": 5.0, "peak_cuda_allocated_mib": None}]
    ) == {"peak_rss_mib": 5.0, "peak_cuda_allocated_mib": None}


def test_scoring_job_records_its_peak_memory(tmp_path, shared_data, repo_root):
    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    entry = config["benchmarks"]["winobias"]
    files = {f: shared_data / "winobias" / f for f in required_files(entry, config["data"], "winobias")}
    items = parse_benchmark({k: v for k, v in entry.items() if k not in ("scoring", "metric")}, files, "winobias")
    write_table_atomic(items.slice(0, 20), tmp_path / "items.parquet")
    build_tiny_model("bert", tmp_path / "tiny-bert", seed=0)
    model = {"path": str(tmp_path / "tiny-bert"), "family": "mlm", "revision": "local"}
    bench = {k: v for k, v in entry.items() if k != "metric"}
    timing = tmp_path / "benchmarks" / "winobias.job.tsv"
    score_one(
        tmp_path / "items.parquet",
        tmp_path / "scores.parquet",
        "tiny-bert",
        model,
        {"kind": "pretrained"},
        "winobias",
        bench,
        threads=1,
        max_tokens=512,
        timing=timing,
    )
    assert pq.read_table(tmp_path / "scores.parquet").num_rows > 0
    load, row = job_timing.read_timing_rows(timing)  # the model's loading, then the benchmark's scoring
    assert load["benchmark"] == job_timing.LOAD_ROW and float(load["load_s"]) > 0 and row["benchmark"] == "winobias"
    assert row["status"] == "ok" and row["device"] == "cpu" and row["processes"] == "1" and row["items"] == "20"
    assert row["max_tokens"] == row["max_tokens_final"] == "512" and row["oom_halvings"] == "0"
    assert int(row["forward_passes"]) > 0 and float(row["items_per_s"]) > 0
    assert float(row["peak_rss_mib"]) > 100, row  # torch, transformers and the model: far more than 100 MiB
    assert row["peak_cuda_allocated_mib"] == "NA"  # on CPU
