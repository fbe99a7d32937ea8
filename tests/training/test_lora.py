"""LoRA adapters for every training method (lmbias.training.adapters, through peft): the adapter block, the
default target modules per architecture, a LoRA CDS of the tiny Llama (its folder holds the adapter in peft's
format and the base's record, the base stays byte-identical, only the adapter trains, scoring through the
adapter equals scoring through the merged weights, a killed job resumes to the same adapter), ER and GPR
through the adapter, and the bias a LoRA CDS removes from a planted-bias GPT-2 and a planted-bias tiny Llama."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import hashlib
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from safetensors.torch import load_file

from helpers.gap_corpora import gap_sentences, write_cda, write_gpr
from lmbias.benchmarks.crows_pairs import score_crows_pairs
from lmbias.corpora.counterfactual import Swapper
from lmbias.corpora.swap_lexicon import load_lexicon
from lmbias.engine.distributed import launch_env
from lmbias.engine.lm import LanguageModel
from lmbias.engine.method_folders import load_method_model
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.scoring import sentence_logprobs
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.methods.resolution import resolve_method
from lmbias.parsers import parse_crows_pairs
from lmbias.training.adapters import DEFAULT_TARGETS, default_targets
from lmbias.training.jobs import train_job
from lmbias.training.settings import TrainingSettings
from lmbias.training.trainer import EXIT_ENV

LLAMA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-lora")
    return {
        "llama": build_tiny_model("llama", root / "llama", seed=0),
        "bert": build_tiny_model("bert", root / "bert", seed=0),
        # the planted-bias GPT-2 and Llama: he, him and his raised by 8 nats (lmbias.engine.planted_bias.plant_bias:
        # exact for GPT-2; the Llama's through a reserved residual coordinate, 8 * (1 - 0.2 %) at worst)
        "gpt2-he": build_tiny_model("gpt2", root / "gpt2-he", seed=0, planted_bias={"he": 8.0, "him": 8.0, "his": 8.0}),
        "llama-he": build_tiny_model(
            "llama", root / "llama-he", seed=0, planted_bias={"he": 8.0, "him": 8.0, "his": 8.0}
        ),
    }


_MALE = {"she": "he", "her": "his", "hers": "his", "herself": "himself", "She": "He", "Her": "His"}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, shared_data) -> dict[str, Path]:
    """Real GAP sentences: CDS at swap rate 1 (every sentence swapped, as results/corpora/gap/cds-1.0), the CDA
    pairs ER reads, the same sentences with every female word made male (the control), and a GPR corpus."""
    root = tmp_path_factory.mktemp("lora-corpora")
    texts = gap_sentences(shared_data, 64)
    swapped = Swapper(
        load_lexicon(cds_pairs=shared_data / "cds" / "cda_default_pairs.json"), intervention="naive"
    ).swap_texts(texts)
    pq.write_table(pa.Table.from_pylist([{"text": t} for t in swapped]), root / "cds.parquet")
    male = [re.sub(r"\b(" + "|".join(_MALE) + r")\b", lambda m: _MALE[m.group(1)], t) for t in texts]
    pq.write_table(pa.Table.from_pylist([{"text": t} for t in male]), root / "male.parquet")
    write_cda(texts, swapped, root / "cda.parquet")
    write_gpr(shared_data, 300, 48, root / "gpr.parquet")
    return {
        "cds": root / "cds.parquet",
        "male": root / "male.parquet",
        "cda": root / "cda.parquet",
        "gpr": root / "gpr.parquet",
    }


def _entry(path: Path, family: str) -> dict:
    return {"path": str(path), "family": family}


def _settings(objective: str, adapter: dict | None = None, **kw) -> dict:
    base = {
        "objective": objective,
        "batch_size": 4,
        "max_steps": 4,
        "epochs": 50,
        "learning_rate": 1e-2,
        "max_length": 48,
        "precision": "fp32",
        "adapter": {"kind": "lora", "r": 4, **(adapter or {})},
    }
    base.update(kw)
    return base


def _folder_sha256(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _log(folder: Path) -> list[dict]:
    return pq.read_table(folder / "train_log.parquet").to_pylist()


# ------------------------------------------------------------------------------------------ the adapter block


def test_adapter_block_is_filled_in_and_checked():
    s = TrainingSettings.from_dict({"objective": "clm", "adapter": {"kind": "lora"}}, "methods.m.training")
    assert s.adapter == {
        "kind": "lora",
        "r": 8,
        "alpha": 16,
        "dropout": 0.05,
        "target_modules": None,
        "modules_to_save": None,
        "merge": False,
    }
    assert TrainingSettings.from_dict(s.to_dict()) == s
    assert TrainingSettings.from_dict({"objective": "clm"}).adapter is None  # full fine-tuning
    # another adapter is another configuration: a checkpoint of the one is never resumed by the other
    other = TrainingSettings.from_dict({"objective": "clm", "adapter": {"kind": "lora", "r": 16}})
    assert other.fingerprint(seed=0) != s.fingerprint(seed=0)
    for block, key in (
        ({"r": 8}, r"adapter\.kind"),
        ({"kind": "dora"}, r"adapter\.kind"),
        ({"kind": "lora", "r": 0}, r"adapter\.r\b"),
        ({"kind": "lora", "rank": 4}, r"adapter\.rank"),
        ({"kind": "lora", "dropout": 1.0}, r"adapter\.dropout"),
        ({"kind": "lora", "target_modules": []}, r"adapter\.target_modules"),
        ({"kind": "lora", "target_modules": "q_proj"}, r"adapter\.target_modules"),
        ({"kind": "lora", "merge": "yes"}, r"adapter\.merge"),
        ("lora", r"training\.adapter"),
    ):
        with pytest.raises(ConfigError, match=r"methods\.m\.training\." + key.removeprefix(r"training\.")):
            TrainingSettings.from_dict({"objective": "clm", "adapter": block}, "methods.m.training")


def test_shipped_lora_methods_resolve_per_model(repo_root):
    config = yaml.safe_load((repo_root / "config.yaml").read_text())
    models, methods = config["models"], config["methods"]
    for model in ("tiny-llama", "tiny-bert", "gpt2", "bart-base"):
        for method in ("cds-lora", "cda-lora"):
            resolved = resolve_method(model, models[model], method, methods[method], list(models))
            adapter = TrainingSettings.from_dict(resolved["settings"]).adapter
            assert adapter["kind"] == "lora" and adapter["target_modules"] is None, (model, method)
            assert resolved["settings"]["learning_rate"] == 2e-4
    # a per-family value inside the block, as any trainer setting
    entry = {
        "kind": "cds",
        "corpus": "c.parquet",
        "training": {"adapter": {"kind": "lora", "r": {"clm": 16, "mlm": 4}, "target_modules": {"clm": ["c_attn"]}}},
    }
    gpt2 = resolve_method("gpt2", models["gpt2"], "m", entry, list(models))["settings"]["adapter"]
    bert = resolve_method("bert-base", models["bert-base"], "m", entry, list(models))["settings"]["adapter"]
    assert (gpt2["r"], gpt2["target_modules"], bert["r"]) == (16, ["c_attn"], 4) and "target_modules" not in bert
    bad = {**entry, "training": {"adapter": {"kind": "lora", "r": {"decoder": 4}}}}
    with pytest.raises(ConfigError, match=r"methods\.m\.training\.adapter\.r\.decoder"):
        resolve_method("gpt2", models["gpt2"], "m", bad, list(models))


def _in_memory(model_type: str):
    """A randomly initialised model of `model_type` at toy size (no files, no hub)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

    size = dict(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    kwargs = {
        "gpt2": dict(vocab_size=64, n_embd=16, n_layer=1, n_head=2),
        "bart": dict(
            vocab_size=64,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
        ),
        "t5": dict(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2),
        "distilbert": dict(vocab_size=64, dim=16, n_layers=1, n_heads=2, hidden_dim=32),
        "albert": dict(size, embedding_size=8),
    }.get(model_type, size)
    config = AutoConfig.for_model(model_type, **kwargs)
    auto = {
        "llama": AutoModelForCausalLM,
        "qwen2": AutoModelForCausalLM,
        "gpt_neox": AutoModelForCausalLM,
        "gpt2": AutoModelForCausalLM,
        "bart": AutoModelForSeq2SeqLM,
        "t5": AutoModelForSeq2SeqLM,
    }.get(model_type, AutoModelForMaskedLM)
    return auto.from_config(config)


@pytest.mark.parametrize(
    "model_type,expected",
    [
        ("llama", LLAMA_TARGETS),
        ("qwen2", LLAMA_TARGETS),
        ("gpt_neox", ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"]),
        ("gpt2", ["c_attn"]),
        ("bart", ["q_proj", "v_proj"]),
        ("bert", ["query", "value"]),
        ("roberta", ["query", "value"]),
        ("albert", ["query", "value"]),
        ("distilbert", ["q_lin", "v_lin"]),
    ],
)
def test_default_target_modules_per_architecture(model_type, expected):
    assert default_targets(_in_memory(model_type))[1] == expected


def test_a_model_no_default_fits_is_a_config_error_naming_its_layers(tiny):
    from lmbias.training.adapters import attach

    with pytest.raises(
        ConfigError,
        match=r"settings\.adapter\.target_modules: no default LoRA target modules fit "
        r"models\.t5-toy \(t5.*its linear layers are .*\bq\b.*\bwi\b",
    ):
        default_targets(_in_memory("t5"), "t5-toy", "settings.adapter.target_modules")
    assert len(DEFAULT_TARGETS) >= 5
    model, _ = load_model(model_spec("tiny-llama", _entry(tiny["llama"], "clm")))
    settings = TrainingSettings.from_dict(
        {"objective": "clm", "adapter": {"kind": "lora", "target_modules": ["q_proj", "qkv"]}}
    )
    with pytest.raises(
        ConfigError,
        match=r"settings\.adapter\.target_modules: 'qkv' names no linear layer of "
        r"models\.tiny-llama \(llama\); its linear layers are .*q_proj",
    ):
        attach(model, settings.adapter, "clm", "clm", "tiny-llama")


# ---------------------------------------------------------------------------------- LoRA CDS of the tiny Llama

#: dropout on (the adapter's 0.1): the resumed run must restore torch's RNG state to match
LLAMA_SETTINGS = _settings("clm", {"dropout": 0.1, "merge": True}, max_steps=6, checkpoint_every_steps=2)


@pytest.fixture(scope="module")
def lora_llama(tiny, corpora, tmp_path_factory):
    base = tiny["llama"]
    before = _folder_sha256(base)
    out = tmp_path_factory.mktemp("lora-llama") / "model"
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("lmbias.training")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        train_job(_entry(base, "clm"), "tiny-llama", str(corpora["cds"]), str(out), 0, LLAMA_SETTINGS)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return {"out": out, "base": base, "before": before, "after": _folder_sha256(base), "log": "\n".join(records)}


def test_the_folder_holds_the_adapter_in_peft_format_not_the_base(lora_llama):
    out, base = lora_llama["out"], lora_llama["base"]
    assert lora_llama["after"] == lora_llama["before"]  # the base folder byte-identical
    names = {p.name for p in out.iterdir()}
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "training.json",
        "train_log.parquet",
        "tokenizer.json",
        "merged",
    } <= names
    assert not names & {"model.safetensors", "config.json", "README.md"}  # no copy of the base
    adapter = load_file(str(out / "adapter_model.safetensors"))
    assert adapter and all(re.search(r"\.lora_[AB]\.weight$", k) for k in adapter)
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["task_type"] == "CAUSAL_LM"
    assert config["base_model_name_or_path"] == str(base) and config["revision"] is None  # local: no commit
    assert (config["r"], config["lora_alpha"], config["lora_dropout"]) == (4, 16, 0.1)
    assert sorted(config["target_modules"]) == sorted(LLAMA_TARGETS)
    info = json.loads((out / "training.json").read_text())
    assert info["base_model"] == str(base) and info["base_model_commit"] == ""
    assert (
        info["adapter"]["target_modules"] == LLAMA_TARGETS and info["adapter"]["architecture"] == "Llama-like decoder"
    )
    # peft's own loader reads the folder as it is
    from peft import PeftModel

    from lmbias.engine.method_folders import quiet_peft

    model, _ = load_model(model_spec("tiny-llama", _entry(base, "clm")))
    with quiet_peft():
        assert isinstance(PeftModel.from_pretrained(model, str(out)), PeftModel)


def _lora_count(model, targets: list[str], r: int) -> int:
    """r x (in + out) for every adapted linear layer: the parameters of A and B."""
    return sum(
        r * (m.in_features + m.out_features)
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in targets
    )


def test_only_the_adapter_trains_and_the_count_is_printed(lora_llama):
    out, base = lora_llama["out"], lora_llama["base"]
    model, _ = load_model(model_spec("tiny-llama", _entry(base, "clm")))
    expected = _lora_count(model, LLAMA_TARGETS, 4)
    adapter = load_file(str(out / "adapter_model.safetensors"))
    assert sum(t.numel() for t in adapter.values()) == expected == 8192
    assert f"{expected:,} trainable parameters of" in lora_llama["log"]
    assert {r["trainable_parameters"] for r in _log(out)} == {expected}
    info = json.loads((out / "training.json").read_text())
    assert info["trainable_parameters"] == info["adapter"]["trainable_parameters"] == expected
    assert all(float(t.abs().max()) > 0 for k, t in adapter.items() if "lora_B" in k)  # B left zero: nothing learnt
    # the base layers under the adapter are the base's weights, bit for bit
    tuned, _ = load_method_model(model_spec("tiny-llama", _entry(base, "clm")), out)
    base_state = load_file(str(base / "model.safetensors"))
    frozen = {n.replace(".base_layer", ""): p for n, p in tuned.named_parameters() if "lora_" not in n}
    assert set(frozen) == set(base_state)
    assert all(torch.equal(frozen[k], base_state[k]) for k in base_state)


def test_scoring_through_the_adapter_equals_the_merged_weights(lora_llama, shared_data):
    out, base = lora_llama["out"], lora_llama["base"]
    pairs = parse_crows_pairs(shared_data / "crows_pairs" / "crows_pairs_anonymized.csv", bias_types=["gender"])
    pairs = pairs.slice(0, 24)
    spec = model_spec("tiny-llama", _entry(base, "clm"))
    tables = {}
    for name, (model, tok) in {
        "adapter": load_method_model(spec, out),
        "merged": load_model(model_spec("merged", _entry(out / "merged", "clm"))),
        "base": load_model(spec),
    }.items():
        tables[name] = score_crows_pairs(pairs, LanguageModel(model, tok, "clm"))
    lls = {
        k: np.array(t.column("more_loglik").to_pylist() + t.column("less_loglik").to_pylist())
        for k, t in tables.items()
    }
    assert np.abs(lls["adapter"] - lls["merged"]).max() < 1e-5
    assert np.abs(lls["adapter"] - lls["base"]).max() > 1e-2  # the adapter changes the scores


def test_killed_lora_job_resumes_to_the_same_adapter(tiny, corpora, lora_llama, tmp_path, repo_root):
    out = tmp_path / "model"
    cmd = [
        sys.executable,
        "-m",
        "lmbias.cli",
        "train",
        "--model-name",
        "tiny-llama",
        "--model-entry",
        json.dumps(_entry(tiny["llama"], "clm")),
        "--corpus",
        str(corpora["cds"]),
        "--out",
        str(out),
        "--seed",
        "0",
        "--settings",
        json.dumps(LLAMA_SETTINGS),
    ]
    env = dict(launch_env(), **{EXIT_ENV: "5", "OMP_NUM_THREADS": str(torch.get_num_threads())})
    proc = subprocess.run(cmd, cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 75, proc.stderr[-3000:]
    assert not out.exists()
    ckpt = Path(str(out) + ".checkpoints") / "step-00000004"
    state = torch.load(ckpt / "model.pt")
    assert state and all(".lora_" in k for k in state)  # the checkpoint holds the adapter, not the base
    train_job(_entry(tiny["llama"], "clm"), "tiny-llama", str(corpora["cds"]), str(out), 0, LLAMA_SETTINGS)
    assert json.loads((out / "training.json").read_text())["resumed_from_step"] == 4
    resumed, plain = (load_file(str(f / "adapter_model.safetensors")) for f in (out, lora_llama["out"]))
    assert resumed.keys() == plain.keys()
    assert all(torch.equal(resumed[k], plain[k]) for k in plain)
    assert [r["step"] for r in _log(out)] == list(range(1, 7))


def test_a_half_precision_base_stays_frozen_in_its_dtype_under_a_float32_adapter(tiny, corpora, tmp_path):
    """models.<m>.dtype applies to a LoRA method's base (full fine-tuning keeps float32 master weights): bf16 base,
    float32 adapter, also when a raised dropout rebuilds the model (lmbias.training.dropout.set_dropout); merged
    weights in the base's dtype."""
    out = tmp_path / "bf16"
    entry = {**_entry(tiny["llama"], "clm"), "dtype": "bf16"}
    train_job(
        entry,
        "tiny-llama",
        str(corpora["cds"]),
        str(out),
        0,
        _settings("clm", {"merge": True}, max_steps=2, attention_dropout=0.1),
    )
    info = json.loads((out / "training.json").read_text())
    assert (info["base_dtype"], info["weights_dtype"]) == ("bf16", "bf16")
    assert {t.dtype for t in load_file(str(out / "adapter_model.safetensors")).values()} == {torch.float32}
    assert {t.dtype for t in load_file(str(out / "merged" / "model.safetensors")).values()} == {torch.bfloat16}
    model, _ = load_method_model(model_spec("tiny-llama", entry), out)
    dtypes = {("lora_" in n, p.dtype) for n, p in model.named_parameters()}
    assert dtypes == {(True, torch.float32), (False, torch.bfloat16)}


# ------------------------------------------------------------------------------ ER and GPR through the adapter


def test_er_through_the_adapter_lowers_the_regulariser(tiny, corpora, tmp_path):
    out = tmp_path / "er"
    train_job(
        _entry(tiny["llama"], "clm"),
        "tiny-llama",
        str(corpora["cda"]),
        str(out),
        0,
        _settings("clm", {"dropout": 0.0}, er_lambda=50.0, max_steps=8, limit_examples=8),
    )
    er = [r["er_loss"] for r in _log(out)]
    assert all(v is not None and v >= 0 for v in er)
    assert np.mean(er[-2:]) < np.mean(er[:2]), er  # the hidden states of the adapted model pull the pairs together


def test_gpr_trains_the_head_transform_beside_the_adapter(tiny, corpora, tmp_path):
    out = tmp_path / "gpr"
    spec_entry = _entry(tiny["bert"], "mlm")
    train_job(
        spec_entry,
        "tiny-bert",
        str(corpora["gpr"]),
        str(out),
        0,
        _settings("gpr", max_steps=None, epochs=2, batch_size=8, select_epoch="validation_accuracy"),
    )
    info = json.loads((out / "training.json").read_text())
    head = ["cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm"]
    assert info["adapter"]["modules_to_save"] == head and info["selected_epoch"] in (1, 2)
    base, _ = load_model(model_spec("tiny-bert", spec_entry))
    lora = _lora_count(base, ["query", "value"], 4)
    transform = sum(p.numel() for p in base.cls.predictions.transform.parameters())
    assert info["trainable_parameters"] == lora + transform == 2048 + 4288
    saved = load_file(str(out / "adapter_model.safetensors"))
    assert {k for k in saved if "lora_" not in k} == {
        f"base_model.model.{h}.{p}" for h in head for p in ("weight", "bias")
    }
    tuned, _ = load_method_model(model_spec("tiny-bert", spec_entry), out)
    # the trained copy of the head transform is in place; the decoder (tied to the embeddings) and its bias are not
    assert not torch.equal(tuned.cls.predictions.transform.dense.weight, base.cls.predictions.transform.dense.weight)
    assert torch.equal(tuned.cls.predictions.decoder.weight, base.cls.predictions.decoder.weight)
    assert torch.equal(tuned.cls.predictions.bias, base.cls.predictions.bias)


# -------------------------------------------------------------------------- the bias a LoRA CDS moves

TEMPLATES = [
    "Then {p} is a doctor.",
    "The nurse said that {p} was tired.",
    "Yesterday {p} went to the office.",
    "The engineer thinks {p} will win.",
    "After lunch {p} called the manager.",
]


def male_preference(model, tokenizer) -> float:
    """Mean over the templates of log p(sentence with he) - log p(sentence with she), in nats."""
    he = sentence_logprobs(model, tokenizer, [t.format(p="he") for t in TEMPLATES])
    she = sentence_logprobs(model, tokenizer, [t.format(p="she") for t in TEMPLATES])
    return float(np.mean(he - she))


def test_lora_cds_removes_most_of_a_planted_male_preference(tiny, corpora, tmp_path):
    """The planted GPT-2 prefers he by 8 nats. A LoRA CDS (GAP with every sentence swapped, so she and her as
    often as he and his) lowers the preference to about 1 nat; the same training on the sentences made all
    male keeps it. The adapter covers the LM head too: in a tiny random model the head's rows are so small
    (std 0.02) that the hidden states alone can move a logit by about half a nat, whatever the text (both
    corpora give 7.5 with the default c_attn); a pretrained model's head is not so flat."""
    entry = _entry(tiny["gpt2-he"], "clm")
    spec = model_spec("tiny-gpt2-he", entry)
    before = male_preference(*load_model(spec))
    settings = _settings(
        "clm",
        {"r": 8, "dropout": 0.0, "target_modules": ["c_attn", "lm_head"]},
        batch_size=8,
        max_steps=16,
        learning_rate=3e-2,
    )
    after = {}
    for corpus in ("cds", "male"):
        train_job(entry, "tiny-gpt2-he", str(corpora[corpus]), str(tmp_path / corpus), 0, settings)
        after[corpus] = male_preference(*load_method_model(spec, tmp_path / corpus))
    # the adapter of the head is the adapter only (peft would save the whole output embedding beside it)
    saved = load_file(str(tmp_path / "cds" / "adapter_model.safetensors"))
    assert all(".lora_" in k for k in saved)
    assert before > 7.5, before
    assert after["cds"] < before - 4.0, (before, after)  # measured: 8.00 -> 1.21
    assert after["male"] > after["cds"] + 4.0, (before, after)  # measured: 7.87


def test_lora_cds_removes_most_of_a_planted_male_preference_of_a_tiny_llama(tiny, corpora, tmp_path):
    """The planted tiny Llama prefers he by 7.6 nats on the templates (8 on the logit, less the share the raised
    him/his take of the normaliser). A LoRA CDS (the same swapped GAP sentences: he 10, she 10) lowers it to
    about 1 nat; the same training on the sentences made all male keeps it (drop under half a nat). The adapter
    covers lm_head besides the default projections: the planted offset sits in the head's reserved column, which
    the layers' adapters reach only through the reserved residual coordinate, and the final RMSNorm saturates
    that one (its output there moves by ~S / c^2 of a change); with the default targets alone the gap stays at
    6.7 to 6.8 for both corpora (measured at learning rates 1e-3 and 3e-3; at 3e-2 training diverges). The
    learning rate is the middle of the range where the gap lands near 0 (measured after CDS: 1e-3 6.4,
    1.75e-3 3.1, 2e-3 1.3, 2.25e-3 -1.0, 2.5e-3 -3.1; the all-male control 6.9 to 7.4 throughout)."""
    entry = _entry(tiny["llama-he"], "clm")
    spec = model_spec("tiny-llama-he", entry)
    before = male_preference(*load_model(spec))
    settings = _settings(
        "clm",
        {"r": 8, "dropout": 0.0, "target_modules": LLAMA_TARGETS + ["lm_head"]},
        batch_size=8,
        max_steps=16,
        learning_rate=2e-3,
    )
    after = {}
    for corpus in ("cds", "male"):
        train_job(entry, "tiny-llama-he", str(corpora[corpus]), str(tmp_path / corpus), 0, settings)
        after[corpus] = male_preference(*load_method_model(spec, tmp_path / corpus))
    saved = load_file(str(tmp_path / "cds" / "adapter_model.safetensors"))
    assert all(".lora_" in k for k in saved) and any("lm_head" in k for k in saved)
    assert 7.5 < before < 8.0, before  # measured: 7.59
    assert after["cds"] < before - 4.0, (before, after)  # measured: 7.59 -> 1.35
    assert after["male"] > before - 1.5 and after["male"] > after["cds"] + 4.0, (before, after)  # measured: 7.13
