"""Scoring a model dispatched over devices (models.<name>.device_map, Accelerate's big-model loading), tested on
CPU with explicit maps on the tiny Llama: the numbers equal the plain load's (with a disk-offloaded layer, so that
Accelerate's hooks really move the weights), Self-Debias and SentenceDebias work on it, a disk entry is refused
unless offload is allowed, and fine-tuning with a device_map is refused, pointing to FSDP. The split over real
GPUs runs in bench/gpu_check.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lmbias.engine.batching import input_device, model_device
from lmbias.engine.debias_projection import install_projection
from lmbias.engine.model_spec import model_spec
from lmbias.engine.models import load_model
from lmbias.engine.scoring import sentence_logprobs
from lmbias.engine.self_debias import wrap
from lmbias.engine.tiny import build_tiny_model
from lmbias.errors import ConfigError, DeviceMapTrainingError, DiskOffloadError
from lmbias.methods import resolution

TEXTS = ["The nurse said that she was tired.", "The doctor said that he was late for work.", "He is here."]
CPU_MAP = {
    "model.embed_tokens": "cpu",
    "model.layers.0": "cpu",
    "model.layers.1": "cpu",
    "model.norm": "cpu",
    "model.rotary_emb": "cpu",
    "lm_head": "cpu",
}


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return str(build_tiny_model("llama", tmp_path_factory.mktemp("dm") / "tiny-llama"))


def _entry(path, **extra):
    return {"path": path, "family": "clm", **extra}


def test_explicit_cpu_map_scores_equal_plain_load(tiny_llama):
    plain, tok = load_model(model_spec("tl", _entry(tiny_llama)))
    mapped, _ = load_model(model_spec("tl", _entry(tiny_llama, device_map=CPU_MAP)))
    np.testing.assert_array_equal(sentence_logprobs(mapped, tok, TEXTS), sentence_logprobs(plain, tok, TEXTS))


def test_disk_offloaded_layer_dispatches_and_scores_equal(tiny_llama, tmp_path):
    plain, tok = load_model(model_spec("tl", _entry(tiny_llama)))
    disk_map = dict(CPU_MAP, **{"model.layers.1": "disk"})
    entry = _entry(tiny_llama, device_map=disk_map, offload_folder=str(tmp_path / "offload"))
    mapped, _ = load_model(model_spec("tl", entry))
    assert mapped.hf_device_map["model.layers.1"] == "disk"
    assert model_device(mapped) == torch.device("cpu")
    expected = sentence_logprobs(plain, tok, TEXTS)
    np.testing.assert_allclose(sentence_logprobs(mapped, tok, TEXTS), expected, rtol=0, atol=1e-5)
    # Self-Debias' wrapper and SentenceDebias' hook on the dispatched model give the plain model's numbers
    settings = {"prefix": "The following text discriminates against people because of their gender:"}
    np.testing.assert_allclose(
        sentence_logprobs(wrap(mapped, tok, "clm", settings), tok, TEXTS),
        sentence_logprobs(wrap(plain, tok, "clm", settings), tok, TEXTS),
        rtol=0,
        atol=1e-5,
    )
    components = torch.nn.functional.normalize(
        torch.randn(1, plain.config.hidden_size, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    install_projection(plain, components, "project")
    install_projection(mapped, components, "project")
    debiased = sentence_logprobs(mapped, tok, TEXTS)
    np.testing.assert_allclose(debiased, sentence_logprobs(plain, tok, TEXTS), rtol=0, atol=1e-5)
    assert np.abs(debiased - expected).max() > 1e-3  # the projection changed the scores


def test_disk_refused_unless_offload_allowed(tiny_llama):
    disk_map = dict(CPU_MAP, **{"model.layers.1": "disk"})
    with pytest.raises(
        DiskOffloadError, match=r"models\.tl\.device_map\.model\.layers\.1: .*models\.tl\.offload: true"
    ):
        model_spec("tl", _entry(tiny_llama, device_map=disk_map))
    assert model_spec("tl", _entry(tiny_llama, device_map=disk_map, offload=True)).offload


def test_resolved_auto_map_with_disk_refused(tiny_llama, monkeypatch):
    """A strategy (auto) whose resolved map puts weights on disk (max_memory too small) is refused after Accelerate
    resolves it: simulated by the map transformers would have set."""
    from lmbias.engine import models

    spec = model_spec("tl", _entry(tiny_llama, device_map="auto", max_memory={"cpu": "1MiB"}))
    fake = torch.nn.Linear(2, 2)
    fake.hf_device_map = {"model.embed_tokens": "cpu", "lm_head": "disk"}
    with pytest.raises(DiskOffloadError, match=r"models\.tl\.device_map: auto put 1 module\(s\) on disk"):
        models._placed(fake, spec, "cpu")
    allowed = model_spec("tl", _entry(tiny_llama, device_map="auto", offload=True))
    assert models._placed(fake, allowed, "cpu") is fake


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"device_map": "everywhere"}, "device_map"),
        ({"device_map": {"lm_head": "gpu7"}}, r"device_map\.lm_head"),
        ({"device_map": {}}, "device_map"),
        ({"max_memory": {"0": "10GiB"}}, "max_memory"),
        ({"device_map": "auto", "max_memory": {0: "ten"}}, r"max_memory\.0"),
        ({"device_map": "auto", "offload": "yes"}, "offload"),
        ({"offload_folder": "/tmp/x"}, "offload_folder"),
    ],
)
def test_bad_placement_keys_name_the_key(extra, key):
    with pytest.raises(ConfigError, match=rf"models\.tl\.{key}"):
        model_spec("tl", _entry("/nonexistent", **extra))


def test_input_device_follows_accelerate():
    assert input_device({"a": 0, "b": 1}) == "cuda:0"
    assert input_device({"a": "cpu", "b": "cuda:1", "c": "disk"}) == "cuda:1"
    assert input_device({"a": "cpu", "b": "disk"}) == "cpu"


def test_finetune_with_device_map_refused_pointing_to_fsdp(tiny_llama, tmp_path):
    entry = _entry(tiny_llama, device_map="auto", training={"batch_size": 2})
    method = {"kind": "cds", "corpus": "corpus.txt", "training": {"epochs": 1}}
    with pytest.raises(
        DeviceMapTrainingError, match=r"methods\.cds fine-tunes models\.tl.*training\.distributed: fsdp"
    ):
        resolution.resolve_method("tl", entry, "cds", method)
    # scoring-only methods resolve
    assert resolution.resolve_method("tl", entry, "pretrained", {"kind": "pretrained"})["kind"] == "pretrained"
    from lmbias.training.jobs import train_job

    with pytest.raises(DeviceMapTrainingError, match="FSDP"):
        train_job(
            _entry(tiny_llama, device_map=CPU_MAP), "tl", "corpus.txt", str(tmp_path / "out"), 0, {"objective": "clm"}
        )
