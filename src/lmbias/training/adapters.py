"""LoRA adapters (through peft) for every training method: the settings' `adapter` block, the default target
modules per architecture, and what trains.

A method with `training.adapter: {kind: lora, ...}` freezes the base model and trains low-rank matrices
A (r x in) and B (out x r) beside the target layers, W x + (alpha / r) B A x (Hu et al. 2021); B starts at
zero, so the first step starts from the base model exactly. The method's folder then holds the adapter in
peft's own format (adapter_config.json + adapter_model.safetensors) and the base's record (training.json),
not a copy of the base; scoring loads base + adapter (lmbias.engine.method_folders.load_method_model).

Default `target_modules` (null) follow the model's layer names, first match wins (every name of a row must
exist among its linear layers):

- Llama-like decoders (Llama, Mistral, Qwen2/3, OLMo-2, Gemma): attention and MLP projections
  q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (as QLoRA: every linear layer of a block);
- GPT-NeoX-like decoders (Pythia, Falcon): query_key_value, dense, dense_h_to_4h, dense_4h_to_h;
- Phi-3: qkv_proj, o_proj, gate_up_proj, down_proj;
- GPT-2: c_attn (the fused query/key/value projection: Hu et al.'s GPT-2 setting, peft's default);
- BART and other q_proj/v_proj models (OPT, GPT-J): q_proj, v_proj (query and value, Hu et al.);
- BERT-like encoders (BERT, RoBERTa, XLM-R, ALBERT, ELECTRA): query, value;
- DistilBERT: q_lin, v_lin.

A model whose layers match none is a ConfigError listing its linear layers' names, to be set as
`target_modules`. The LM head (tied to the input embeddings in most of these models) never trains by
default. GPR is a task fine-tune: its default `modules_to_save` is the MLM head's transform (BERT's
cls.predictions.transform: dense + LayerNorm; RoBERTa's lm_head.dense + layer_norm), trained in full beside
the adapter, as peft trains a task head; the head's decoder (the tied vocabulary projection) stays frozen.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from lmbias.errors import ConfigError

log = logging.getLogger(__name__)

#: (architecture, target modules): the defaults, tried in order (module docstring)
DEFAULT_TARGETS = (
    ("Llama-like decoder", ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    ("GPT-NeoX-like decoder", ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")),
    ("Phi-3", ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")),
    ("GPT-2", ("c_attn",)),
    ("BART-like (query and value)", ("q_proj", "v_proj")),
    ("BERT-like encoder (query and value)", ("query", "value")),
    ("DistilBERT", ("q_lin", "v_lin")),
)
#: peft's task type per family, written into adapter_config.json so AutoPeftModelForCausalLM /
#: AutoPeftModelForSeq2SeqLM load the folder; peft has none for masked LMs (loaded with PeftModel.from_pretrained)
TASK_TYPES = {"clm": "CAUSAL_LM", "seq2seq": "SEQ_2_SEQ_LM"}
#: The MLM heads a GPR fine-tune trains in full (modules_to_save) beside the adapter: BERT, RoBERTa, ALBERT.
_MLM_HEADS = ("cls", "lm_head", "predictions")


def _linear_types() -> tuple:
    from transformers.pytorch_utils import Conv1D

    return (torch.nn.Linear, Conv1D)


def linear_layer_names(model) -> dict[str, list[str]]:
    """{last name component: full names} of the model's linear layers (torch Linear and GPT-2's Conv1D)."""
    out: dict[str, list[str]] = {}
    for name, module in model.named_modules():
        if name and isinstance(module, _linear_types()):
            out.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return out


def _matches(name: str, target: str) -> bool:
    """peft's rule for a string target: the module's full name, or its ending after a dot."""
    return name == target or name.endswith("." + target)


def default_targets(model, model_name: str = "?", key: str = "adapter.target_modules") -> tuple[str, list[str]]:
    """(architecture, target module names) of the first DEFAULT_TARGETS row whose names all name linear layers
    of `model` (the LM head excepted); a ConfigError naming `key` and the model's linear layers otherwise."""
    layers = linear_layer_names(model)
    head = _output_layer_names(model)
    available = {short for short, full in layers.items() if any(f not in head for f in full)}
    for architecture, names in DEFAULT_TARGETS:
        if all(n in available for n in names):
            return architecture, list(names)
    model_type = getattr(model.config, "model_type", "?")
    raise ConfigError(
        f"{key}: no default LoRA target modules fit models.{model_name} ({model_type}, {type(model).__name__}): "
        f"its linear layers are {', '.join(sorted(available)) or 'none'}; the defaults are "
        + "; ".join(f"{a}: {', '.join(n)}" for a, n in DEFAULT_TARGETS)
        + f". Set {key} to the layers to adapt (e.g. its attention projections)"
    )


def _output_layer_names(model) -> set[str]:
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return {name for name, module in model.named_modules() if out is not None and module is out}


def check_targets(model, targets: list[str], model_name: str, key: str) -> None:
    """Every configured target names at least one linear layer (peft would fail on the first that does not,
    or adapt a layer of a kind it cannot)."""
    names = [n for full in linear_layer_names(model).values() for n in full]
    for target in targets:
        if not any(_matches(n, target) for n in names):
            raise ConfigError(
                f"{key}: {target!r} names no linear layer of models.{model_name} "
                f"({getattr(model.config, 'model_type', '?')}); its linear layers are "
                f"{', '.join(sorted(linear_layer_names(model)))}"
            )


def gpr_head_modules(model) -> list[str]:
    """GPR's default modules_to_save: the leaf modules with parameters of the model's MLM head, its output
    projection (tied to the input embeddings) excepted."""
    head = next((h for h in _MLM_HEADS if isinstance(getattr(model, h, None), torch.nn.Module)), None)
    if head is None:
        return []
    output = model.get_output_embeddings()
    out = []
    for name, module in getattr(model, head).named_modules():
        if module is output or list(module.children()) or not list(module.parameters(recurse=False)):
            continue
        out.append(f"{head}.{name}")
    return out


@dataclass
class Adapter:
    """A base model with a LoRA adapter attached: `peft_model` saves it in peft's format; `model` is the base
    model object with the adapter's layers in place (what the trainer runs: the HF model's attributes, its
    `base_model`, its heads, are all as without the adapter)."""

    peft_model: object
    model: object
    architecture: str
    target_modules: list[str]
    modules_to_save: list[str]
    trainable: int
    total: int

    def record(self, settings: dict) -> dict:
        """What training.json keeps of the adapter: the settings as resolved and the parameter counts."""
        import peft

        return {
            **settings,
            "target_modules": self.target_modules,
            "modules_to_save": self.modules_to_save,
            "architecture": self.architecture,
            "trainable_parameters": self.trainable,
            "total_parameters": self.total,
            "peft": peft.__version__,
        }


def attach(
    model, settings: dict, objective: str, family: str, model_name: str = "?", key: str = "settings.adapter"
) -> Adapter:
    """Freeze `model` and attach the LoRA adapter `settings` (TrainingSettings.adapter) to it; the trainable
    parameter count is logged. Call under the trainer's seed: A's initialisation draws from torch's RNG."""
    from peft import LoraConfig, get_peft_model

    targets = settings.get("target_modules")
    if targets is None:
        architecture, targets = default_targets(model, model_name, f"{key}.target_modules")
    else:
        architecture = "configured"
        check_targets(model, targets, model_name, f"{key}.target_modules")
    to_save = settings.get("modules_to_save")
    if to_save is None:
        to_save = gpr_head_modules(model) if objective == "gpr" else []
    elif to_save:
        names = [n for n, _ in model.named_modules()]
        for target in to_save:
            if not any(_matches(n, target) for n in names):
                raise ConfigError(f"{key}.modules_to_save: {target!r} names no module of models.{model_name}")
    from transformers.pytorch_utils import Conv1D

    # GPT-2's Conv1D stores its weight transposed (in x out); peft corrects the flag per layer (with a warning)
    # where targets mix Conv1D and Linear layers (GPT-2's c_attn and lm_head)
    adapted = [m for n, m in model.named_modules() if any(_matches(n, t) for t in targets)]
    transposed = bool(adapted) and all(isinstance(m, Conv1D) for m in adapted)
    config = LoraConfig(
        r=settings["r"],
        lora_alpha=settings["alpha"],
        lora_dropout=settings["dropout"],
        target_modules=list(targets),
        modules_to_save=list(to_save) or None,
        bias="none",
        fan_in_fan_out=transposed,
        task_type=TASK_TYPES.get(family),
    )
    from lmbias.engine.method_folders import quiet_peft

    with quiet_peft():
        peft_model = get_peft_model(model, config)
    trainable, total = parameter_counts(peft_model)
    log.info(
        "LoRA adapter (r %d, alpha %s, dropout %s) on %s [%s]%s: %s trainable parameters of %s (%.3f %%)",
        settings["r"],
        settings["alpha"],
        settings["dropout"],
        ", ".join(targets),
        architecture,
        f", modules_to_save {', '.join(to_save)}" if to_save else "",
        f"{trainable:,}",
        f"{total:,}",
        100.0 * trainable / max(total, 1),
    )
    return Adapter(
        peft_model, peft_model.get_base_model(), architecture, list(targets), list(to_save), trainable, total
    )


def parameter_counts(model) -> tuple[int, int]:
    """(trainable, all) parameters, each shared tensor counted once."""
    seen: dict[int, tuple[int, bool]] = {}
    for p in model.parameters():
        seen[id(p)] = (p.numel(), p.requires_grad)
    return sum(n for n, t in seen.values() if t), sum(n for n, _ in seen.values())


def set_base_record(adapter: Adapter, source: str, revision: str | None) -> None:
    """Name the base in adapter_config.json as peft users load it: the hub id (or local folder) and, for a hub
    model, the commit its weights came from (AutoPeftModel reads both)."""
    for config in adapter.peft_model.peft_config.values():
        config.base_model_name_or_path = source
        config.revision = revision or None
