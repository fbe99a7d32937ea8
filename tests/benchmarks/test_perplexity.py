"""Perplexity (causal) and pseudo-perplexity (Salazar et al. 2020, masked and seq2seq): the benchmark equals
a direct computation on tiny models, windows and chunks score every token once, the GAP stand-in is read
and labelled, bad options are named, and the WikiText-2 data entry is pinned to a commit."""

from __future__ import annotations

import math
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from lmbias.benchmarks import catalog
from lmbias.benchmarks.perplexity import score_perplexity
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.rolling import causal_windows
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.perplexity import PerplexityOptions, perplexity_metric_rows
from lmbias.parsers import parse_benchmark, required_files
from lmbias.parsers.sources import UNPINNED, dataset_files

TEXTS = [
    "The nurse said that she would help the doctor.",
    "He was a carpenter, and his father was a teacher in London.",
]


def _tiny(tmp_path_factory, architecture, family):
    out = tmp_path_factory.mktemp("ppl") / architecture
    build_tiny_model(architecture, out, seed=0)
    return load_model(model_spec("tiny", {"path": str(out), "family": family, "revision": "local"}))


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return _tiny(tmp_path_factory, "gpt2", "clm")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return _tiny(tmp_path_factory, "bert", "mlm")


def _items(texts, source="wikitext2-test"):
    return pa.table({"text_id": list(range(len(texts))), "text": texts, "source": [source] * len(texts)})


def _value(scores, metric="perplexity"):
    rows = perplexity_metric_rows(scores, PerplexityOptions(bootstrap=0))
    return next(r for r in rows if r["metric"] == metric)


# ------------------------------------------------------------------------------------ direct computations


def _direct_causal(model, tokenizer, texts):
    """One forward pass over each whole text; cross-entropy of the shifted labels (all but the first token)."""
    nll, n = 0.0, 0
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
            logits = model(input_ids=ids).logits[0, :-1].double()
            nll += float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))
            n += ids.shape[1] - 1
    return math.exp(nll / n), n


def _direct_pseudo(model, tokenizer, texts):
    """Salazar et al.: hide each token between [CLS] and [SEP] in turn, PPPL = exp(-sum log p / N)."""
    pll, n = 0.0, 0
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text)["input_ids"]
            for i in range(1, len(ids) - 1):
                masked = torch.tensor([ids])
                masked[0, i] = tokenizer.mask_token_id
                logits = model(input_ids=masked).logits[0, i].double()
                pll += float(torch.log_softmax(logits, -1)[ids[i]])
                n += 1
    return math.exp(-pll / n), n


def test_causal_equals_direct_computation(tiny_gpt2):
    model, tokenizer = tiny_gpt2
    expected, n = _direct_causal(model, tokenizer, TEXTS)
    row = _value(score_perplexity(_items(TEXTS), LanguageModel(model, tokenizer, "clm"), {"batch_size": 2}))
    assert row["n"] == n
    assert row["value"] == pytest.approx(expected, rel=1e-6)
    assert row["variant"] == "clm=perplexity"  # WikiText: no stand-in label


def test_pseudo_perplexity_equals_direct_computation(tiny_bert):
    model, tokenizer = tiny_bert
    expected, n = _direct_pseudo(model, tokenizer, TEXTS)
    row = _value(score_perplexity(_items(TEXTS), LanguageModel(model, tokenizer, "mlm"), {}))
    assert row["n"] == n
    assert row["value"] == pytest.approx(expected, rel=1e-6)
    assert _value(score_perplexity(_items(TEXTS), LanguageModel(model, tokenizer, "mlm"), {}), "mean_nll")[
        "value"
    ] == pytest.approx(math.log(expected), rel=1e-9)


def test_seq2seq_pseudo_perplexity_equals_direct_computation(tmp_path_factory):
    """BART: the encoder reads the text with token i replaced by <mask>; the decoder, fed the decoder start
    token and the true tokens before i, scores token i (its denoising objective)."""
    model, tokenizer = _tiny(tmp_path_factory, "bart", "seq2seq")
    text = TEXTS[0]
    ids = tokenizer(text)["input_ids"]
    pll = 0.0
    with torch.no_grad():
        for i in range(1, len(ids) - 1):
            masked = torch.tensor([ids])
            masked[0, i] = tokenizer.mask_token_id
            decoder = torch.tensor([[model.config.decoder_start_token_id] + ids[:i]])
            logits = model(input_ids=masked, decoder_input_ids=decoder).logits[0, -1].double()
            pll += float(torch.log_softmax(logits, -1)[ids[i]])
    row = _value(score_perplexity(_items([text]), LanguageModel(model, tokenizer, "seq2seq"), {}))
    assert row["n"] == len(ids) - 2 and row["variant"] == "seq2seq=pseudo_perplexity"
    assert row["value"] == pytest.approx(math.exp(-pll / (len(ids) - 2)), rel=1e-6)


def test_causal_windows_score_every_token_once_with_their_context(tiny_gpt2):
    model, tokenizer = tiny_gpt2
    text = " ".join(TEXTS * 3)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    max_length, stride = 10, 4
    assert len(ids) > 3 * max_length
    # direct: each target t read with the max_length tokens that end at its chunk's end
    nll = 0.0
    with torch.no_grad():
        for first in range(1, len(ids), stride):
            end = min(first + stride, len(ids))
            begin = max(0, end - max_length)
            logits = model(input_ids=torch.tensor([ids[begin:end]])).logits[0].double()
            for t in range(first, end):
                nll -= float(torch.log_softmax(logits[t - begin - 1], -1)[ids[t]])
    scores = score_perplexity(
        _items([text]), LanguageModel(model, tokenizer, "clm"), {"max_length": max_length, "stride": stride}
    )
    assert scores.column("n_tokens").to_pylist() == [
        end - first for _, first, end in causal_windows(len(ids), max_length, stride)
    ]
    row = _value(scores)
    assert row["n"] == len(ids) - 1
    assert row["value"] == pytest.approx(math.exp(nll / (len(ids) - 1)), rel=1e-6)
    # default stride (max_length - 1): no overlap, still every token but the first exactly once
    assert causal_windows(25, 10, 9) == [(0, 1, 10), (9, 10, 19), (15, 19, 25)]


@pytest.mark.parametrize("family", ["clm", "mlm"])
def test_the_windows_are_the_models_rolling_request(family, tiny_gpt2, tiny_bert):
    """The benchmark asks the model for rolling log-likelihoods and writes what it gets: one row per window, in
    text order; a family without the request is refused by the model, naming it."""
    model, tokenizer = tiny_gpt2 if family == "clm" else tiny_bert
    lm = LanguageModel(model, tokenizer, family)
    scores = score_perplexity(_items(TEXTS), lm, {"max_length": 10, "stride": 4})
    windows = lm.rolling_nll(TEXTS, 10, 4)
    assert [(w.text, w.window, w.n_tokens) for w in windows] == list(
        zip(*(scores.column(c).to_pylist() for c in ("text_id", "window", "n_tokens")), strict=True)
    )
    assert [w.nll_sum for w in windows] == scores.column("nll_sum").to_pylist()  # bit for bit
    with pytest.raises(DataError, match="rolling log-likelihood needs .* not family 'encoder'"):
        LanguageModel(model, tokenizer, "encoder").rolling_nll(TEXTS, 10)


def test_masked_chunks_score_every_token(tiny_bert):
    model, tokenizer = tiny_bert
    content = tokenizer(TEXTS[1], add_special_tokens=False)["input_ids"]
    scores = score_perplexity(_items([TEXTS[1]]), LanguageModel(model, tokenizer, "mlm"), {"max_length": 8})
    assert scores.column("n_tokens").to_pylist() == [6] * (len(content) // 6) + (
        [len(content) % 6] if len(content) % 6 else []
    )
    # direct: each chunk of 6 word-pieces framed by [CLS] ... [SEP], each piece hidden in turn
    pll = 0.0
    with torch.no_grad():
        for i in range(0, len(content), 6):
            ids = [tokenizer.cls_token_id] + content[i : i + 6] + [tokenizer.sep_token_id]
            for p in range(1, len(ids) - 1):
                masked = torch.tensor([ids])
                masked[0, p] = tokenizer.mask_token_id
                pll += float(torch.log_softmax(model(input_ids=masked).logits[0, p].double(), -1)[ids[p]])
    assert _value(scores)["value"] == pytest.approx(math.exp(-pll / len(content)), rel=1e-6)


# ------------------------------------------------------------------------------------ metric and options


def test_metric_bootstrap_over_texts_and_stand_in_label():
    scores = pa.table(
        {
            "text_id": pa.array([0, 1, 1, 2], pa.int32()),
            "window": pa.array([0, 0, 1, 0], pa.int32()),
            "source": ["gap-test"] * 4,
            "score_kind": ["mlm=pseudo_perplexity"] * 4,
            "nll_sum": [10.0, 4.0, 8.0, 30.0],
            "n_tokens": pa.array([5, 2, 4, 10], pa.int32()),
        }
    )
    rows = {r["metric"]: r for r in perplexity_metric_rows(scores, PerplexityOptions(bootstrap=200, seed=1))}
    assert rows["mean_nll"]["value"] == pytest.approx(52 / 21) and rows["mean_nll"]["n"] == 21
    assert rows["perplexity"]["value"] == pytest.approx(math.exp(52 / 21))
    assert rows["perplexity"]["variant"] == "mlm=pseudo_perplexity,stand-in=gap-test"
    assert rows["perplexity"]["interval"] == "bootstrap_texts"
    assert rows["mean_nll"]["ci_low"] <= 52 / 21 <= rows["mean_nll"]["ci_high"]
    assert rows["perplexity"]["ci_low"] == pytest.approx(math.exp(rows["mean_nll"]["ci_low"]))
    # three texts, per-text ratios 2, 2, 3: the bootstrap can never leave [2, 3]
    assert 2 <= rows["mean_nll"]["ci_low"] and rows["mean_nll"]["ci_high"] <= 3


@pytest.mark.parametrize(
    "scoring, key",
    [
        ({"stride": 0}, "stride"),
        ({"limit_texts": -1}, "limit_texts"),
        ({"window": 3}, "window"),
        ({"max_length": 2}, "max_length"),
    ],
)
def test_bad_scoring_options_are_named(scoring, key, tiny_gpt2):
    model, tokenizer = tiny_gpt2
    with pytest.raises(ConfigError, match=rf"scoring\.{key}"):
        score_perplexity(_items(TEXTS), LanguageModel(model, tokenizer, "clm"), scoring)


@pytest.mark.parametrize("family", ["clm", "mlm"])
def test_stride_longer_than_window_is_refused(family, tiny_gpt2, tiny_bert):
    """Also for a masked model, whose chunks do not use it: a value that could not apply is named, not ignored."""
    model, tokenizer = tiny_gpt2 if family == "clm" else tiny_bert
    with pytest.raises(ConfigError, match=r"scoring\.stride: 10 must be at most max_length - 1 = 9"):
        score_perplexity(_items(TEXTS), LanguageModel(model, tokenizer, family), {"max_length": 10, "stride": 10})


@pytest.mark.parametrize(
    "metric, key", [({"bootstrap": -1}, "bootstrap"), ({"confidence": 1.0}, "confidence"), ({"samples": 3}, "samples")]
)
def test_bad_metric_options_are_named(metric, key):
    with pytest.raises(ConfigError, match=rf"metric\.{key}"):
        PerplexityOptions.from_config(metric, "benchmarks.perplexity_gap.metric")


# ------------------------------------------------------------------------------------ data and config


def _config(repo_root):
    return yaml.safe_load((repo_root / "config.yaml").read_text())


def test_gap_stand_in_is_read_from_shared_data_and_labelled(shared_data, repo_root, tiny_gpt2):
    entry = _config(repo_root)["benchmarks"]["perplexity_gap"]
    assert catalog.measure_of(entry) == "perplexity" and entry["splits"] == ["test"]
    files = required_files(entry, _config(repo_root)["data"], "perplexity_gap")
    assert files == ["gap-test.tsv"]
    items = parse_benchmark(entry, {f: shared_data / "gap" / f for f in files}, "perplexity_gap")
    assert items.num_rows == 2000 and set(items.column("split").to_pylist()) == {"test"}
    model, tokenizer = tiny_gpt2
    scores = score_perplexity(items, LanguageModel(model, tokenizer, "clm"), {"limit_texts": 3})
    assert sorted(set(scores.column("text_id").to_pylist())) == [0, 1, 2]
    assert _value(scores)["variant"] == "clm=perplexity,stand-in=gap-test"


def test_measure_makes_gap_entries_measurable_only_when_asked(repo_root):
    benchmarks = _config(repo_root)["benchmarks"]
    assert not catalog.is_measurable(benchmarks["gap"])  # the CDS corpus entry is never scored
    assert {"perplexity_gap", "perplexity_wikitext2"} <= set(catalog.benchmarks_for("seq2seq", benchmarks))
    with pytest.raises(ConfigError, match=r"benchmarks\.ppl\.measure: 'perplexty' is not a measure"):
        catalog.measure_of({"dataset": "gap", "measure": "perplexty"}, "ppl")


def test_wikitext_data_entry_is_pinned_to_a_commit(repo_root):
    config = _config(repo_root)
    entry = config["data"]["wikitext2"]
    assert re.fullmatch(
        r"https://huggingface\.co/datasets/Salesforce/wikitext/resolve/[0-9a-f]{40}/", entry["base_url"]
    )
    url, sha = dataset_files(entry, "wikitext2")["wikitext-2-raw-v1-test.parquet"]
    assert url.endswith("/wikitext-2-raw-v1/test-00000-of-00001.parquet")
    assert sha == UNPINNED  # no copy at hand to checksum: the first download logs it (docs/benchmarks/perplexity.md)
    assert "CC-BY-SA" in entry["license"]
    assert "perplexity_wikitext2" in config["optional_benchmarks"]
    bench = config["benchmarks"]["perplexity_wikitext2"]
    assert required_files(bench, config["data"], "perplexity_wikitext2") == ["wikitext-2-raw-v1-test.parquet"]


def test_wikitext_parser_stream_and_lines(tmp_path):
    path = tmp_path / "wikitext-2-raw-v1-test.parquet"
    pq.write_table(pa.table({"text": ["", " = Robert = \n", "", " He was an actor . \n", " He died . \n"]}), path)
    entry = {"dataset": "wikitext2", "measure": "perplexity", "split": "test"}
    stream = parse_benchmark(entry, {path.name: path}, "perplexity_wikitext2")
    # bias-bench's "\n\n".join(test["text"]): blank rows included
    assert stream.column("text").to_pylist() == [
        "\n\n" + " = Robert = \n" + "\n\n" + "\n\n" + " He was an actor . \n" + "\n\n" + " He died . \n"
    ]
    lines = parse_benchmark({**entry, "unit": "line"}, {path.name: path}, "perplexity_wikitext2")
    assert lines.column("text").to_pylist() == [" = Robert = \n", " He was an actor . \n", " He died . \n"]
    assert set(lines.column("source").to_pylist()) == {"wikitext2-test"}
    with pytest.raises(ConfigError, match=r"perplexity_wikitext2\.unit"):
        parse_benchmark({**entry, "unit": "page"}, {path.name: path}, "perplexity_wikitext2")
    with pytest.raises(ConfigError, match=r"perplexity_wikitext2\.limit"):
        parse_benchmark({**entry, "limit": 3}, {path.name: path}, "perplexity_wikitext2")
