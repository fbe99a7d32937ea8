"""training.gradient_checkpointing: activations recomputed in the backward pass give the same training (loss
of every step and the trained weights, to float rounding) as activations kept, for full fine-tuning and a
LoRA adapter of the tiny Llama, and for an mlm (tiny BERT, its head run at the target positions only)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError
from lmbias.training.jobs import train_job
from lmbias.training.settings import TrainingSettings

TEXTS = [
    "She said that he would bring his own lunch to the meeting tomorrow.",
    "The nurse told the doctor that her shift had ended an hour ago.",
    "His sister is an engineer and works on bridges in the north.",
    "They asked whether the teacher had graded their papers yet.",
    "He thanked her for the help with the heavy boxes.",
    "The mechanic fixed the car before the storm arrived in town.",
] * 2


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gradient-checkpointing")
    pq.write_table(pa.Table.from_pylist([{"text": t} for t in TEXTS]), root / "corpus.parquet")
    return {
        "root": root,
        "corpus": root / "corpus.parquet",
        "llama": build_tiny_model("llama", root / "llama", seed=0),
        "bert": build_tiny_model("bert", root / "bert", seed=0),
    }


def test_setting_defaults_off_and_is_checked():
    assert TrainingSettings.from_dict({"objective": "clm"}).gradient_checkpointing is False
    assert TrainingSettings.from_dict({"objective": "clm", "gradient_checkpointing": True}).gradient_checkpointing
    with pytest.raises(ConfigError, match=r"methods\.m\.training\.gradient_checkpointing: expected true or false"):
        TrainingSettings.from_dict({"objective": "clm", "gradient_checkpointing": "yes"}, "methods.m.training")


def _train(setup, model: str, family: str, name: str, checkpointing: bool, **kw) -> tuple[list[float], dict]:
    out = setup["root"] / f"{name}-{'gc' if checkpointing else 'plain'}"
    settings = {
        "objective": "clm" if family == "clm" else "mlm",
        "batch_size": 4,
        "max_steps": 3,
        "epochs": 10,
        "learning_rate": 1e-2,
        "max_length": 32,
        "precision": "fp32",
        "dropout": 0.0,
        "gradient_checkpointing": checkpointing,
        **kw,
    }
    train_job({"path": str(setup[model]), "family": family}, model, str(setup["corpus"]), str(out), 0, settings)
    losses = [r["loss"] for r in pq.read_table(out / "train_log.parquet").to_pylist()]
    weights = out / ("adapter_model.safetensors" if kw.get("adapter") else "model.safetensors")
    return losses, load_file(weights)


@pytest.mark.parametrize(
    "model,family,name,kw",
    [
        ("llama", "clm", "llama-full", {}),
        ("llama", "clm", "llama-lora", {"adapter": {"kind": "lora", "r": 4, "dropout": 0.0}}),
        ("bert", "mlm", "bert-full", {}),
    ],
)
def test_checkpointing_trains_the_same_weights(setup, model, family, name, kw):
    plain_losses, plain = _train(setup, model, family, name, False, **kw)
    gc_losses, gc = _train(setup, model, family, name, True, **kw)
    assert len(plain_losses) == 3
    assert gc_losses == pytest.approx(plain_losses, rel=1e-5, abs=1e-6)
    assert sorted(gc) == sorted(plain) and plain
    moved = False
    for key, value in plain.items():
        torch.testing.assert_close(gc[key], value, rtol=1e-4, atol=1e-6, msg=key)
    # the comparison can fail: the steps moved the trained weights away from their start
    start = load_file(setup[model] / "model.safetensors") if not kw else None
    if start is not None:
        moved = any(not torch.equal(start[k], plain[k]) for k in plain if k in start)
    else:  # LoRA's B starts at zero
        moved = any(k.endswith("lora_B.weight") and plain[k].abs().max() > 0 for k in plain)
    assert moved


def test_enable_turns_it_on(setup):
    from transformers import AutoModelForCausalLM

    from lmbias.training.trainer import enable_gradient_checkpointing

    model = AutoModelForCausalLM.from_pretrained(setup["llama"])
    enable_gradient_checkpointing(model)
    assert any(getattr(m, "gradient_checkpointing", False) for m in model.modules()) and not model.config.use_cache


def test_a_method_entry_sets_it_per_family(repo_root):
    import yaml

    from lmbias.methods.resolution import resolve_method

    models = yaml.safe_load((repo_root / "config.yaml").read_text())["models"]
    entry = {"kind": "cds", "corpus": "c.parquet", "training": {"gradient_checkpointing": {"clm": True, "mlm": False}}}
    gpt2 = resolve_method("gpt2", models["gpt2"], "m", entry, list(models))["settings"]
    bert = resolve_method("bert-base", models["bert-base"], "m", entry, list(models))["settings"]
    assert (gpt2["gradient_checkpointing"], bert["gradient_checkpointing"]) == (True, False)
