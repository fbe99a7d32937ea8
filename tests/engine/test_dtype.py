"""Loading in half precision (models.<name>.dtype), on the tiny Llama: half the parameter bytes, scores within
a stated tolerance of float32's, provenance that records dtype and precision, float32 master weights for
full fine-tuning."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from helpers.scoring import score_one
from lmbias.benchmarks import catalog
from lmbias.engine.batching import EngineStats
from lmbias.engine.lm import LanguageModel
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import dtype_name, load_model
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.jobs.scoring import effective_precision
from lmbias.metrics.summary import file_provenance
from lmbias.parsers import parse_benchmark, required_files

#: The stated tolerance (docs/llms.md, "Weights' dtype and attention"): a bf16 load's sentence log-likelihood is
#: within this fraction of the fp32 load's (measured on every CrowS-Pairs, WinoBias and DA-Gender sentence of
#: the tiny Llama: at most 1.2e-4; fp16: 1.8e-5).
BF16_RELATIVE_TOLERANCE = 5e-4
FP16_RELATIVE_TOLERANCE = 1e-4
#: (benchmark, items scored): a few items each, CI time is a budget.
BENCHMARKS = (("crows_pairs", 12), ("winobias", 12), ("da_gender", 24))


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory) -> Path:
    return build_tiny_model("llama", tmp_path_factory.mktemp("llama") / "tiny-llama", seed=0)


def _entry(path: Path, **extra) -> dict:
    return {"path": str(path), "family": "clm", "revision": "local", **extra}


@pytest.fixture(scope="module")
def loaded(tiny_llama) -> dict:
    return {
        dtype: load_model(model_spec("tiny-llama", _entry(tiny_llama, dtype=dtype)))
        for dtype in ("fp32", "bf16", "fp16")
    }


@pytest.fixture(scope="module")
def config(repo_root) -> dict:
    return yaml.safe_load((repo_root / "config.yaml").read_text(encoding="utf-8"))


def _items(config: dict, name: str, n: int, data: Path) -> pa.Table:
    bench = config["benchmarks"][name]
    files = {f: str(data / bench["dataset"] / f) for f in required_files(bench, config["data"], name, data)}
    return parse_benchmark(bench, files, name).slice(0, n)


def _parameter_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def test_half_precision_load_holds_half_the_bytes(loaded):
    fp32 = _parameter_bytes(loaded["fp32"][0])
    assert fp32 == 4 * sum(p.numel() for p in loaded["fp32"][0].parameters())
    assert _parameter_bytes(loaded["bf16"][0]) * 2 == fp32
    assert _parameter_bytes(loaded["fp16"][0]) * 2 == fp32
    assert [dtype_name(loaded[d][0]) for d in ("fp32", "bf16", "fp16")] == ["fp32", "bf16", "fp16"]


@pytest.mark.parametrize(("name", "n"), BENCHMARKS)
def test_half_precision_scores_stay_within_the_stated_tolerance(loaded, config, shared_data, name, n):
    """Every sentence log-likelihood of a bf16 (fp16) load is within BF16 (FP16)_RELATIVE_TOLERANCE of the fp32
    load's, and not equal to it (the half-precision weights were really used)."""
    bench = config["benchmarks"][name]
    definition = catalog.definition(catalog.measure_of(bench), name)
    items = _items(config, name, n, shared_data)
    tokenizer = loaded["fp32"][1]
    scores = {
        d: definition.score(
            items, LanguageModel(model, tokenizer, "clm", stats=EngineStats()), bench.get("scoring", {})
        )
        for d, (model, _) in loaded.items()
    }
    columns = [c for c in scores["fp32"].schema.names if pa.types.is_floating(scores["fp32"].schema.field(c).type)]
    assert columns
    for dtype, tolerance in (("bf16", BF16_RELATIVE_TOLERANCE), ("fp16", FP16_RELATIVE_TOLERANCE)):
        moved, checked = False, 0
        for column in columns:
            ref = np.asarray(scores["fp32"][column].to_pylist(), dtype=float)
            got = np.asarray(scores[dtype][column].to_pylist(), dtype=float)
            assert np.array_equal(np.isnan(ref), np.isnan(got)), column
            ref, got = ref[~np.isnan(ref)], got[~np.isnan(got)]
            if not ref.size:  # a column another family or variant fills
                continue
            checked += 1
            assert np.all(ref < 0), column  # sentence log-likelihoods
            relative = np.abs(got - ref) / np.abs(ref)
            assert relative.max() <= tolerance, (dtype, column, relative.max())
            moved = moved or bool(np.any(got != ref))
        assert checked and moved, f"{dtype}: every score equals fp32's; were the weights loaded in {dtype}?"


def test_scores_file_records_dtype_and_precision(tiny_llama, config, shared_data, tmp_path):
    """A scoring job's scores file records the weights' dtype as loaded and the autocast its forward passes ran
    under; both reach the summary's provenance columns."""
    items = tmp_path / "crows_pairs.parquet"
    pq.write_table(_items(config, "crows_pairs", 4, shared_data), items)
    for dtype, precision, expected in (("bf16", "auto", ("bf16", "fp32")), ("auto", "bf16", ("fp32", "bf16"))):
        out = tmp_path / dtype / "scores" / "crows_pairs.parquet"
        score_one(
            items,
            out,
            "tiny-llama",
            _entry(tiny_llama, dtype=dtype, precision=precision),
            {"kind": "pretrained"},
            "crows_pairs",
            config["benchmarks"]["crows_pairs"],
            threads=1,
        )
        prov = file_provenance(out)
        assert (prov["weights_dtype"], prov["precision"]) == expected, (dtype, precision)


def test_auto_precision_resolves_for_the_weights_and_device(loaded):
    fp32, bf16, fp16 = (loaded[d][0] for d in ("fp32", "bf16", "fp16"))
    assert [effective_precision("auto", m, "cpu") for m in (fp32, bf16, fp16)] == ["fp32"] * 3
    # on a GPU: bfloat16 autocast, but float16 weights are not rounded to bfloat16
    assert [effective_precision("auto", m, "cuda") for m in (fp32, bf16, fp16)] == ["bf16", "bf16", "fp16"]
    assert effective_precision("fp32", bf16, "cuda") == "fp32" and effective_precision("fp16", fp32, "cpu") == "fp16"
    with pytest.raises(ConfigError, match=r"models\.x\.precision: 'half' is not one of"):
        effective_precision("half", fp32, "cpu", "models.x.precision")


def test_full_fine_tuning_keeps_float32_master_weights(tiny_llama, loaded, shared_data, tmp_path):
    """A checkpoint saved in bfloat16 (as hub Llamas are) still fine-tunes in float32: CLM training of the tiny
    Llama (BOS added by its tokenizer, EOS as pad) runs, and the folder it writes is float32."""
    from safetensors import safe_open

    from lmbias.training.jobs import train_job

    half = tmp_path / "tiny-llama-bf16"
    loaded["bf16"][0].save_pretrained(half, safe_serialization=True)
    loaded["bf16"][1].save_pretrained(half)
    with safe_open(str(half / "model.safetensors"), framework="pt") as handle:
        assert {handle.get_tensor(k).dtype for k in handle.keys()} == {torch.bfloat16}
    texts = ["He is a nurse.", "She works as an engineer.", "The doctor said she was late.", "His sister is a pilot."]
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "doc_id": f"d{i}",
                    "sentence_id": 0,
                    "split": "development",
                    "text": t,
                    "is_counterfactual": False,
                    "changed": False,
                }
                for i, t in enumerate(texts)
            ]
        ),
        corpus,
    )
    out = tmp_path / "model"
    train_job(
        _entry(half, dtype="bf16"),
        "tiny-llama",
        str(corpus),
        str(out),
        0,
        {
            "objective": "clm",
            "batch_size": 2,
            "max_steps": 2,
            "epochs": 1,
            "learning_rate": 1e-3,
            "max_length": 32,
            "precision": "fp32",
        },
    )
    info = json.loads((out / "training.json").read_text())
    assert info["weights_dtype"] == "fp32" and info["steps"] == 2
    losses = pq.read_table(out / "train_log.parquet").column("loss").to_pylist()
    assert losses and all(np.isfinite(losses))
    with safe_open(str(out / "model.safetensors"), framework="pt") as handle:
        assert {handle.get_tensor(k).dtype for k in handle.keys()} == {torch.float32}
