"""A method's model folder and how its model loads: the folder a method's job wrote holds a fine-tuned HF model,
a LoRA adapter (peft's format), a SentenceDebias subspace or an INLP projection matrix
(lmbias.engine.debias_projection); load_method_model loads the base model (lmbias.engine.models) and puts the
method in place, or loads the fine-tuned folder itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from lmbias.engine.model_spec import ModelSpec
from lmbias.engine.models import load_model, load_tokenizer, load_weights_only, resolved_commit

log = logging.getLogger(__name__)

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model")


#: peft's adapter folder: a LoRA method's model folder holds the adapter, not a copy of the base
ADAPTER_CONFIG = "adapter_config.json"


def _method_kind(method_dir) -> str:
    """'base' (None), 'sentence_debias' (a fitted subspace), 'inlp' (a fitted projection matrix), 'adapter'
    (a LoRA adapter in peft's format) or 'finetuned' (an HF model folder)."""
    from lmbias.engine.debias_projection import INLP_FILE, SUBSPACE_FILE

    if method_dir is None:
        return "base"
    folder = Path(method_dir)
    if not folder.is_dir():
        from lmbias.errors import DataError

        raise DataError("method model folder not found", folder)
    if (folder / SUBSPACE_FILE).is_file():
        return "sentence_debias"
    if (folder / INLP_FILE).is_file():
        return "inlp"
    if (folder / ADAPTER_CONFIG).is_file():
        return "adapter"
    return "finetuned"


def _finetuned_spec(spec: ModelSpec, method_dir) -> ModelSpec:
    """The fine-tuned folder as a local model of the base's family and name."""
    from dataclasses import replace

    from lmbias.errors import DataError

    folder = Path(method_dir).resolve()
    if not (folder / "config.json").is_file() or not any((folder / f).is_file() for f in _WEIGHT_FILES):
        raise DataError(
            f"not a model folder of models.{spec.name}: config.json and model.safetensors are needed "
            f"(found: {', '.join(sorted(p.name for p in folder.iterdir())) or 'nothing'})",
            folder,
        )
    return replace(spec, source=str(folder), is_local=True, revision=None, tiny=False)


def load_method_tokenizer(spec: ModelSpec, method_dir: str | os.PathLike | None):
    """The tokenizer of a method's model: the fine-tuned folder's when it has one, else the base model's."""
    if _method_kind(method_dir) == "finetuned" and any((Path(method_dir) / f).is_file() for f in _TOKENIZER_FILES):
        return load_tokenizer(_finetuned_spec(spec, method_dir))
    return load_tokenizer(spec)


def load_method_model(
    spec: ModelSpec, method_dir: str | os.PathLike | None, device: str = "cpu", torch_dtype=None, strict: bool = True
):
    """(model, tokenizer) of a method, as load_model returns them.

    `method_dir` None: the base model (`spec`). A folder with sentence_debias.safetensors: the base model with
    the SentenceDebias projection installed as its sentence_debias.json's `application` says
    (lmbias.engine.debias_projection). A folder with inlp.safetensors: the base model with INLP's projection
    matrix applied to its final hidden states (the same hook). Any other folder: a fine-tuned
    HF folder (config.json + model.safetensors [+ tokenizer]) loaded with the spec's family; its tokenizer,
    or the base's when it has none. A folder with adapter_config.json: the base model (in its entry's dtype)
    with the LoRA adapter's layers in place, unmerged (load_adapter). A missing folder or one without weights
    is a DataError naming it.
    """
    kind = _method_kind(method_dir)
    if kind == "base":
        return load_model(spec, device=device, torch_dtype=torch_dtype, strict=strict)
    if kind == "adapter":
        model, tokenizer = load_model(spec, device=device, torch_dtype=torch_dtype, strict=strict)
        return load_adapter(model, spec, method_dir), tokenizer
    if kind == "sentence_debias":
        from lmbias.engine.debias_projection import fitted_application, install_projection, load_subspace

        components, info = load_subspace(method_dir)
        application = fitted_application(method_dir, info)
        base = info.get("base_model") or {}
        if base.get("source") not in (None, spec.source) or base.get("family") not in (None, spec.family):
            log.warning(
                "%s was fitted on %s (%s), now applied to models.%s = %s (%s)",
                method_dir,
                base.get("source"),
                base.get("family"),
                spec.name,
                spec.source,
                spec.family,
            )
        model, tokenizer = load_model(spec, device=device, torch_dtype=torch_dtype, strict=strict)
        install_projection(model, components, application)
        return model, tokenizer
    if kind == "inlp":
        from lmbias.engine.debias_projection import install_projection_matrix, load_projection_matrix

        matrix, info = load_projection_matrix(method_dir)
        base = info.get("base_model") or {}
        if base.get("source") not in (None, spec.source) or base.get("family") not in (None, spec.family):
            log.warning(
                "%s was fitted on %s (%s), now applied to models.%s = %s (%s)",
                method_dir,
                base.get("source"),
                base.get("family"),
                spec.name,
                spec.source,
                spec.family,
            )
        model, tokenizer = load_model(spec, device=device, torch_dtype=torch_dtype, strict=strict)
        install_projection_matrix(model, matrix)
        return model, tokenizer
    tuned = _finetuned_spec(spec, method_dir)
    if any((Path(tuned.source) / f).is_file() for f in _TOKENIZER_FILES):
        return load_model(tuned, device=device, torch_dtype=torch_dtype, strict=strict)
    return load_weights_only(tuned, device, torch_dtype, strict), load_tokenizer(spec)


@contextlib.contextmanager
def quiet_peft():
    """Without peft's expected warnings: transformers' deprecation of is_gradient_checkpointing (peft 0.21 still
    calls it) and the fan_in_fan_out flag peft corrects itself per layer (GPT-2's Conv1D beside Linear layers)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message=r"fan_in_fan_out is set to .*", category=UserWarning)
        yield


def load_adapter(model, spec: ModelSpec, method_dir):
    """`model` (the base, as loaded for `spec`) with the peft adapter of `method_dir` in place: the same model
    object, its target layers computing W x + (alpha / r) B A x beside the frozen W (not merged, so the numbers
    are the trained ones whatever the base's dtype), in eval mode. A base other than the one the adapter was
    trained on (training.json: source, hub commit) is logged as a warning, as for SentenceDebias."""
    import json

    from peft import PeftModel

    from lmbias.errors import DataError

    folder = Path(method_dir)
    record = {}
    if (folder / "training.json").is_file():
        record = json.loads((folder / "training.json").read_text())
    trained_on = (record.get("base_model"), record.get("base_model_commit") or "")
    now = (spec.source, resolved_commit(model))
    if record and (trained_on[0] != now[0] or (trained_on[1] and now[1] and trained_on[1] != now[1])):
        log.warning(
            "%s: the adapter was trained on %s (commit %s), now applied to models.%s = %s (commit %s)",
            folder,
            trained_on[0],
            trained_on[1] or "-",
            spec.name,
            now[0],
            now[1] or "-",
        )
    try:
        with quiet_peft():
            peft_model = PeftModel.from_pretrained(model, str(folder), is_trainable=False)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise DataError(f"cannot load the LoRA adapter onto models.{spec.name} ({spec.source}): {exc}", folder) from exc
    return peft_model.get_base_model().eval()
