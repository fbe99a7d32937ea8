"""Model specs from config and loading: families, errors that name the model and key, no hub access."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from pathlib import Path

import pytest
import torch
import yaml

from lmbias.engine.model_spec import FAMILIES, ModelSpec, model_spec
from lmbias.engine.models import load_model, load_tokenizer, mask_token
from lmbias.engine.tiny import ARCHITECTURES, FAMILY_OF, build_tiny_model
from lmbias.errors import ConfigError

SENTENCE = "The developer argued with the designer because he did not like the design."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {arch: build_tiny_model(arch, root / f"tiny-{arch}", seed=0) for arch in ARCHITECTURES}


def _spec(path: Path, family: str, name: str = "m", tiny: bool = False) -> ModelSpec:
    entry = {"path": str(path), "family": family, "revision": "local"}
    if tiny:
        entry["tiny"] = {"architecture": "bert", "seed": 0}
    return model_spec(name, entry)


# ----------------------------------------------------------------------------------------------- model_spec


def test_model_spec_local_and_hub(tmp_path):
    spec = model_spec(
        "tiny-bert",
        {
            "path": "resources/models/tiny-bert",
            "family": "mlm",
            "revision": "local",
            "tiny": {"architecture": "bert", "seed": 0},
        },
        root=tmp_path,
    )
    assert spec == ModelSpec(
        "tiny-bert", "mlm", str((tmp_path / "resources/models/tiny-bert").resolve()), "local", True, True
    )
    assert spec.build_target == "resources/models/tiny-bert"
    hub = model_spec("gpt2", {"hub_id": "gpt2", "family": "clm", "revision": "main"})
    assert (hub.source, hub.is_local, hub.revision, hub.tiny, hub.build_target) == ("gpt2", False, "main", False, None)
    absolute = model_spec("x", {"path": str(tmp_path), "family": "seq2seq"}, root="/elsewhere")
    assert absolute.source == str(tmp_path.resolve()) and absolute.revision is None


def test_model_spec_default_root_is_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert model_spec("x", {"path": "m", "family": "mlm"}).source == str((tmp_path / "m").resolve())


def test_every_configured_model_is_a_valid_spec(repo_root):
    config = yaml.safe_load((repo_root / "config.yaml").read_text(encoding="utf-8"))
    specs = [model_spec(name, entry, root=repo_root) for name, entry in config["models"].items()]
    assert {s.family for s in specs} <= set(FAMILIES)
    assert {s.name for s in specs if s.tiny} >= {"tiny-bert", "tiny-roberta", "tiny-gpt2", "tiny-bart"}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"path": "p", "family": "mlmx", "revision": "local"},
            r"^models\.tiny-bert\.family: 'mlmx' is not one of mlm, clm, seq2seq, encoder$",
        ),
        ({"path": "p", "revision": "local"}, r"^models\.tiny-bert\.family: missing"),
        (
            {"path": "p", "family": "clm", "revision": "local", "max_tokens": 0},
            r"^models\.tiny-bert\.max_tokens: 0 is not a positive integer",
        ),
        (
            {"path": "p", "hub_id": "bert-base-uncased", "family": "mlm"},
            r"^models\.tiny-bert: exactly one of models\.tiny-bert\.path and models\.tiny-bert\.hub_id .*both",
        ),
        ({"family": "mlm"}, r"^models\.tiny-bert: exactly one of .*neither"),
        (
            {"hub_id": "bert-base-uncased", "family": "mlm", "revision": 3},
            r"^models\.tiny-bert\.revision: 3 is not a string",
        ),
        (
            {"hub_id": "bert-base-uncased", "family": "mlm", "revison": "main"},
            r"^models\.tiny-bert\.revison: unknown key",
        ),
        (
            {"hub_id": "bert-base-uncased", "family": "mlm", "tiny": {"architecture": "bert"}},
            r"^models\.tiny-bert\.tiny: a tiny model is built locally and needs models\.tiny-bert\.path",
        ),
        ({"hub_id": "", "family": "mlm"}, r"^models\.tiny-bert\.hub_id: '' is not a hub id"),
        (
            {"hub_id": "b", "family": "mlm", "dtype": "bfloat16"},
            r"^models\.tiny-bert\.dtype: 'bfloat16' is not one of auto, fp32, bf16, fp16 \(the weights' dtype",
        ),
        (
            {"hub_id": "b", "family": "mlm", "attn_implementation": "flash"},
            r"^models\.tiny-bert\.attn_implementation: 'flash' is not one of eager, sdpa, flash_attention_2",
        ),
        (
            {"hub_id": "b", "family": "mlm", "dtype": "fp32", "attn_implementation": "flash_attention_2"},
            r"^models\.tiny-bert\.attn_implementation: flash_attention_2 runs in half precision only",
        ),
        ("bert-base-uncased", r"^models\.tiny-bert: expected a mapping"),
    ],
)
def test_model_spec_errors_name_the_key(entry, message):
    with pytest.raises(ConfigError, match=message):
        model_spec("tiny-bert", entry)


# ----------------------------------------------------------------------------------------------- load_model


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_each_family_loads_and_runs(tiny, arch):
    family = FAMILY_OF[arch]
    model, tok = load_model(_spec(tiny[arch], family, name=f"tiny-{arch}"))
    assert not model.training
    assert tok.padding_side == "right"
    assert tok.pad_token is not None
    enc = tok([SENTENCE, "She works as a nurse."], return_tensors="pt", padding=True)
    with torch.inference_mode():
        logits = model(**enc).logits
    assert logits.shape[:2] == enc["input_ids"].shape
    assert logits.shape[-1] == len(tok)
    assert torch.isfinite(logits).all()
    if family == "clm":  # no pad token in either checkpoint: padded with EOS
        assert tok.pad_token == tok.eos_token == {"gpt2": "<|endoftext|>", "llama": "</s>"}[arch]
    else:
        assert mask_token(tok, f"tiny-{arch}") == tok.mask_token


def test_load_model_dtype_and_device(tiny):
    model, _ = load_model(_spec(tiny["bert"], "mlm"), device="cpu", torch_dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="torch_dtype"):
        load_model(_spec(tiny["bert"], "mlm"), torch_dtype="float33")


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16), ("auto", torch.float32)],
)
def test_entry_dtype_sets_the_weights_dtype(tiny, dtype, expected):
    """models.<name>.dtype is the weights' dtype at load (auto on CPU: float32); every floating-point
    parameter and buffer follows it, and dtype_name reads it back in the config's words."""
    from lmbias.engine.models import dtype_name

    spec = model_spec("tiny-llama", {"path": str(tiny["llama"]), "family": "clm", "dtype": dtype})
    assert spec.dtype == dtype
    model, _ = load_model(spec, device="cpu")
    assert {p.dtype for p in model.parameters()} == {expected}
    assert dtype_name(model) == {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[expected]


def test_auto_dtype_follows_the_device(tiny, monkeypatch):
    """auto: bfloat16 on a CUDA device that supports it, float32 on an older GPU and on CPU (whatever the
    checkpoint's own dtype)."""
    from lmbias.engine.models import weights_dtype

    assert weights_dtype("auto", "cpu") == torch.float32
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert weights_dtype("auto", "cuda") == weights_dtype("auto", torch.device("cuda:0")) == torch.bfloat16
    assert weights_dtype("auto", "cpu") == torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert weights_dtype("auto", "cuda") == torch.float32
    assert weights_dtype("fp16", "cpu") == torch.float16


def test_attn_implementation_reaches_the_model(tiny):
    spec = model_spec("tiny-llama", {"path": str(tiny["llama"]), "family": "clm", "attn_implementation": "eager"})
    model, _ = load_model(spec)
    assert model.config._attn_implementation == "eager"
    default, _ = load_model(model_spec("tiny-llama", {"path": str(tiny["llama"]), "family": "clm"}))
    assert default.config._attn_implementation == "sdpa"  # the library's default


def test_attn_implementation_the_model_cannot_run_is_named(tiny):
    spec = model_spec(
        "tiny-llama",
        {"path": str(tiny["llama"]), "family": "clm", "dtype": "bf16", "attn_implementation": "flash_attention_2"},
    )
    with pytest.raises(
        ConfigError, match=r"^models\.tiny-llama\.attn_implementation: flash_attention_2 cannot be used"
    ):
        load_model(spec)


@pytest.mark.parametrize(
    ("arch", "family"),
    [
        ("gpt2", "mlm"),
        ("gpt2", "seq2seq"),
        ("bert", "clm"),
        ("bert", "seq2seq"),
        ("bart", "mlm"),
        ("bart", "clm"),
        ("roberta", "clm"),
        ("llama", "mlm"),
    ],
)
def test_wrong_family_is_a_config_error(tiny, arch, family):
    with pytest.raises(ConfigError, match=rf"models\.tiny-{arch}\.family: .*{family}"):
        load_model(_spec(tiny[arch], family, name=f"tiny-{arch}"))


def test_transformers_value_error_becomes_config_error(tiny, tmp_path):
    """Without `architectures` in config.json only the Auto class can tell: its ValueError is re-raised."""
    import json
    import shutil

    folder = tmp_path / "gpt2-noarch"
    shutil.copytree(tiny["gpt2"], folder)
    config = json.loads((folder / "config.json").read_text())
    del config["architectures"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"models\.noarch\.family: .*cannot be loaded as family mlm"):
        load_model(_spec(folder, "mlm", name="noarch"))


def test_missing_folder_names_model_path_and_target(tmp_path):
    absent = tmp_path / "resources" / "models" / "tiny-bert"
    with pytest.raises(
        ConfigError,
        match=r"models\.tiny-bert\.path: model folder .*tiny-bert does not exist; "
        r"build it with `snakemake --cores 1 resources/models/tiny-bert`",
    ):
        load_model(_spec(absent, "mlm", name="tiny-bert", tiny=True))
    with pytest.raises(ConfigError, match=r"models\.mine\.path: model folder .* does not exist$"):
        load_model(_spec(absent, "mlm", name="mine"))


def test_hub_model_offline_is_a_config_error():
    spec = model_spec("nowhere", {"hub_id": "lmbias-tests/no-such-model", "family": "mlm", "revision": "main"})
    with pytest.raises(ConfigError, match=r"models\.nowhere: cannot read the config of lmbias-tests/no-such-model"):
        load_model(spec)


def test_checkpoint_without_the_family_head(tiny, tmp_path):
    """A BERT encoder without its MLM head (like sentence-transformers checkpoints) would score randomly."""
    from transformers import AutoModel

    encoder = AutoModel.from_pretrained(tiny["bert"])
    encoder.save_pretrained(tmp_path / "encoder")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "encoder" / name).write_bytes((tiny["bert"] / name).read_bytes())
    spec = _spec(tmp_path / "encoder", "mlm", name="encoder")
    with pytest.raises(ConfigError, match=r"models\.encoder: .* has no weights for .*cls\.predictions"):
        load_model(spec)
    model, _ = load_model(spec, strict=False)
    assert model.config.model_type == "bert"


def test_mask_token_helper(tiny):
    gpt2_tok = load_tokenizer(_spec(tiny["gpt2"], "clm"))
    with pytest.raises(ConfigError, match=r"models\.tiny-gpt2: the tokenizer .* has no mask token"):
        mask_token(gpt2_tok, "tiny-gpt2")
    assert mask_token(load_tokenizer(_spec(tiny["bert"], "mlm"))) == "[MASK]"
    assert mask_token(load_tokenizer(_spec(tiny["roberta"], "mlm"))) == "<mask>"
