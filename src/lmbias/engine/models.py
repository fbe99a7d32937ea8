"""Loading a configured model (a ModelSpec, lmbias.engine.model_spec): its weights and tokenizer from a local
folder or a hub id, in the Auto class of its family.

Loading fails early, naming the model, when the checkpoint does not fit the family (a GPT-2 folder configured
as mlm would otherwise come back with a random head).

Loading never runs hub code (`trust_remote_code=False`), reads local folders as safetensors only and
never contacts the hub for them (`local_files_only=True`). Hub ids load safetensors only too (a pickled
`pytorch_model.bin` can run code when unpickled) unless the entry says `allow_pickle: true`; a hub id at
a moving revision (`main`, a branch or tag) loads with a warning, and the commit it resolved to is kept
(`resolved_commit`) for the summary's provenance. In the workflow a hub id's files are fetched once into a
folder (lmbias.engine.hub, rule fetch_hub_model) that the job's entry names as `snapshot`: the model loads
from there offline, and the commit comes from the folder's record.

Weights' dtype (`dtype`) and attention kernel (`attn_implementation`) are part of the entry. `dtype: auto`
(the default) loads bfloat16 weights on a CUDA device that supports them and float32 anywhere else, whatever
dtype the checkpoint was saved in (transformers 5 would otherwise follow the checkpoint's `dtype`: a hub
Llama would load in bfloat16 on CPU, a tiny model in float32 on a GPU). It is separate from `precision`, the
autocast of the scoring forward passes (lmbias.engine.batching): bf16 weights halve the memory, autocast
alone does not. `attn_implementation` unset leaves transformers' choice (sdpa where the model supports it).

`device_map` (with `max_memory`, `offload`, `offload_folder`) dispatches a model too large for one GPU over the
node's devices through Accelerate's big-model loading, for scoring only: the model is then never moved (inputs go
to its first module's device, lmbias.engine.batching.model_device); weights on disk need the entry's consent
(DiskOffloadError); fine-tuning such an entry is refused (DeviceMapTrainingError: FSDP shards it instead).

A method's model (fine-tuned folder, LoRA adapter, fitted projection) loads through lmbias.engine.method_folders.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lmbias.engine.host_memory import keep_freed_host_memory
from lmbias.engine.hub import recorded_commit, warn_unpinned
from lmbias.engine.model_spec import DTYPES, FAMILIES, ModelSpec
from lmbias.errors import ConfigError, DiskOffloadError

log = logging.getLogger(__name__)

# a model entry's dtype (model_spec.DTYPES but auto) -> the torch dtype's name
_TORCH_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def resolved_commit(model) -> str:
    """The hub commit the weights came from ("" for local folders); set by load_model."""
    return str(getattr(model, "lmbias_commit", "") or "")


def _hub_commit(spec: ModelSpec) -> str:
    """The commit the HF cache resolved `spec.revision` to (the snapshot folder the files were read from)."""
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(spec.source, "config.json", revision=spec.revision or "main")
    if isinstance(path, str) and Path(path).parent.parent.name == "snapshots":
        return Path(path).parent.name
    return ""


def _weight_files(spec: ModelSpec) -> list[Path]:
    folder = Path(spec.source)
    return sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []


def _corrupt_file(spec: ModelSpec) -> Path | None:
    """The first local safetensors file whose header does not read (truncated or not safetensors)."""
    from safetensors import safe_open

    for path in _weight_files(spec):
        if path.suffix != ".safetensors":
            continue
        try:
            with safe_open(str(path), framework="pt") as handle:
                handle.keys()
        except Exception:  # noqa: BLE001 - any failure to read the header means the file is unusable
            return path
    return None


def _auto_class(family: str):
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

    return {
        "mlm": AutoModelForMaskedLM,
        "clm": AutoModelForCausalLM,
        "seq2seq": AutoModelForSeq2SeqLM,
        "encoder": AutoModel,
    }[family]


def _source_kwargs(spec: ModelSpec) -> dict:
    if spec.is_local or spec.snapshot:
        return {"local_files_only": True}
    return {"revision": spec.revision or "main"}


def _load_path(spec: ModelSpec) -> str:
    """What from_pretrained reads: a local folder, a hub id's fetched snapshot folder, or the hub id."""
    return spec.snapshot if spec.snapshot and not spec.is_local else spec.source


def _check_snapshot(spec: ModelSpec) -> None:
    if spec.is_local or not spec.snapshot or Path(spec.snapshot).is_dir():
        return
    raise ConfigError(
        f"models.{spec.name}: {spec.source} has not been fetched into {spec.snapshot}; fetch it with "
        f"`snakemake --cores 1 {spec.snapshot}` (rule fetch_hub_model, on a host that reaches the hub)"
    )


def _check_local(spec: ModelSpec) -> None:
    folder = Path(spec.source)
    if folder.is_dir():
        return
    message = f"models.{spec.name}.path: model folder {folder} does not exist"
    if spec.build_target:
        message += f"; build it with `snakemake --cores 1 {spec.build_target}` (rule {spec.build_rule})"
    raise ConfigError(message)


_CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")


def _check_family(spec: ModelSpec, config) -> None:
    """Reject checkpoints the Auto class would load with a wrong or missing head."""
    where = f"models.{spec.name}.family"
    model_type = getattr(config, "model_type", "?")
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    if spec.family == "seq2seq" and not enc_dec:
        raise ConfigError(
            f"{where}: {spec.source} is a {model_type} model, not an encoder-decoder; family seq2seq does not fit"
        )
    if spec.family in ("mlm", "clm", "encoder") and enc_dec:
        raise ConfigError(
            f"{where}: {spec.source} is an encoder-decoder ({model_type}) model; use family seq2seq, not {spec.family}"
        )
    archs = list(getattr(config, "architectures", None) or [])
    if spec.family == "clm" and archs and not any(a.endswith(_CAUSAL_SUFFIXES) for a in archs):
        raise ConfigError(
            f"{where}: {spec.source} is a {model_type} checkpoint for {', '.join(archs)}, not a causal LM; "
            "family clm does not fit"
        )
    if spec.family == "encoder" and archs and all(a.endswith(_CAUSAL_SUFFIXES) for a in archs):
        raise ConfigError(
            f"{where}: {spec.source} is a {model_type} causal LM ({', '.join(archs)}); family encoder is for "
            "bidirectional encoders (use clm)"
        )
    if spec.family == "mlm" and archs and all(a.endswith(_CAUSAL_SUFFIXES) for a in archs):
        raise ConfigError(
            f"{where}: {spec.source} is a {model_type} causal LM ({', '.join(archs)}); family mlm does not "
            "fit (use clm)"
        )


def _unused_by_family(family: str, parameter: str) -> bool:
    """Weights no computation of the family reads: a headless encoder's pooler (BERT's [CLS] dense layer,
    absent from MLM checkpoints) is never used by the embedding poolings."""
    return family == "encoder" and parameter.startswith("pooler.")


def _dtype(torch_dtype):
    import torch

    if torch_dtype is None or isinstance(torch_dtype, torch.dtype) or torch_dtype == "auto":
        return torch_dtype
    value = getattr(torch, str(torch_dtype), None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"torch_dtype: {torch_dtype!r} is not a torch dtype (e.g. float32, bfloat16, float16)")
    return value


def weights_dtype(dtype: str, device="cpu"):
    """The torch dtype a model entry's `dtype` loads its weights in on `device`: `auto` is bfloat16 on a CUDA
    device that supports it (torch.cuda.is_bf16_supported()) and float32 anywhere else (CPU, MPS, older
    GPUs); fp32, bf16 and fp16 are what they say."""
    import torch

    if dtype not in DTYPES:
        raise ConfigError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if dtype == "auto":
        on_cuda = torch.device(device).type == "cuda" and torch.cuda.is_available()
        return torch.bfloat16 if on_cuda and torch.cuda.is_bf16_supported() else torch.float32
    return getattr(torch, _TORCH_DTYPE_NAMES[dtype])


def dtype_name(model) -> str:
    """The config name (fp32, bf16, fp16) of the dtype of a loaded model's floating-point weights; the torch
    name for any other; "" when it has none."""
    names = {v: k for k, v in _TORCH_DTYPE_NAMES.items()}
    for parameter in model.parameters():
        if parameter.is_floating_point():
            torch_name = str(parameter.dtype).removeprefix("torch.")
            return names.get(torch_name, torch_name)
    return ""


def _weights_kwargs(spec: ModelSpec, device, torch_dtype) -> dict:
    """from_pretrained's dtype (always explicit: transformers 5 would take the checkpoint's) and
    attn_implementation (only when the entry sets it)."""
    dtype = _dtype(torch_dtype)
    out = {"dtype": dtype if dtype is not None else weights_dtype(spec.dtype, device)}
    if spec.attn_implementation is not None:
        out["attn_implementation"] = spec.attn_implementation
    out.update(_placement_kwargs(spec))
    return out


def _placement_kwargs(spec: ModelSpec) -> dict:
    """from_pretrained's device_map / max_memory / offload_folder (Accelerate's big-model loading) for an entry
    with a device_map; {} otherwise."""
    if spec.device_map is None:
        return {}
    out = {"device_map": spec.device_map if isinstance(spec.device_map, str) else dict(spec.device_map)}
    if spec.max_memory is not None:
        out["max_memory"] = dict(spec.max_memory)
    if spec.offload_folder is not None:
        out["offload_folder"] = spec.offload_folder
    return out


def _placed(model, spec: ModelSpec, device):
    """`model` on `device`, or, for an entry with a device_map, where Accelerate put it (never moved: a
    dispatched model's hooks move each module's inputs); a resolved map with weights on disk is refused
    unless the entry allows offload (DiskOffloadError)."""
    if spec.device_map is None:
        return model.to(device)
    resolved = getattr(model, "hf_device_map", None) or {}
    on_disk = [module for module, where in resolved.items() if where == "disk"]
    if on_disk and not spec.offload:
        raise DiskOffloadError(
            f"models.{spec.name}.device_map: {spec.device_map if isinstance(spec.device_map, str) else 'the map'} "
            f"put {len(on_disk)} module(s) on disk (e.g. {on_disk[0]}; the devices' max_memory is too small); "
            f"allow it with models.{spec.name}.offload: true (or offload_folder), or give it more device memory"
        )
    if resolved:
        log.info(
            "models.%s dispatched over %s: %s",
            spec.name,
            ", ".join(sorted({str(v) for v in resolved.values()})),
            resolved,
        )
    return model


def _raise_attn_error(spec: ModelSpec, exc: Exception) -> None:
    """A requested attention kernel that this model, device or installation cannot run: a ConfigError naming
    the key (transformers raises ValueError or ImportError, e.g. flash-attn not installed)."""
    if spec.attn_implementation is None or "attn" not in str(exc).lower() and "attention" not in str(exc).lower():
        return
    raise ConfigError(
        f"models.{spec.name}.attn_implementation: {spec.attn_implementation} cannot be used for "
        f"{spec.source}: {str(exc).splitlines()[0]}"
    ) from exc


def load_tokenizer(spec: ModelSpec):
    """The model's tokenizer: right padding; a clm without a pad token pads with eos."""
    from transformers import AutoTokenizer

    if spec.is_local:
        _check_local(spec)
    _check_snapshot(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(_load_path(spec), trust_remote_code=False, **_source_kwargs(spec))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"models.{spec.name}: cannot load the tokenizer of {spec.source}: {exc}") from exc
    tokenizer.padding_side = "right"
    if spec.family == "clm" and tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ConfigError(f"models.{spec.name}: the tokenizer of {spec.source} has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _load_config(spec: ModelSpec):
    """The checked config of `spec` (family, folder or fetched snapshot); a ConfigError naming the model."""
    from transformers import AutoConfig

    if spec.family not in FAMILIES:
        raise ConfigError(f"models.{spec.name}.family: {spec.family!r} is not one of {', '.join(FAMILIES)}")
    if spec.is_local:
        _check_local(spec)
    _check_snapshot(spec)
    try:
        config = AutoConfig.from_pretrained(_load_path(spec), trust_remote_code=False, **_source_kwargs(spec))
    except (OSError, ValueError) as exc:
        where = (
            "a local folder"
            if spec.is_local
            else f"fetched into {spec.snapshot}"
            if spec.snapshot
            else f"hub id at revision {spec.revision or 'main'} (offline? not in the HF cache?)"
        )
        raise ConfigError(f"models.{spec.name}: cannot read the config of {spec.source} ({where}): {exc}") from exc
    _check_family(spec, config)
    return config


def empty_from_config(model_class, config, dtype, **kwargs):
    """A `model_class` of `config` whose parameters are on the meta device (no memory, no initialisation,
    no random numbers drawn) while its buffers are computed as __init__ computes them (rotary inv_freq,
    position ids: they are in no checkpoint); tied weights tied. What the FSDP processes that load no
    weights shard (training/fsdp.py)."""
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=False):
        model = (
            model_class.from_config(config, dtype=dtype, **kwargs)
            if hasattr(model_class, "from_config")
            else model_class._from_config(config, dtype=dtype, **kwargs)
        )
    model.tie_weights()  # init_empty_weights re-creates a tied parameter on meta: tie it again
    return model


def load_empty_model(spec: ModelSpec, torch_dtype=None):
    """(model, tokenizer) of `spec` as load_model returns them (eval mode) but with no weights read:
    parameters on the meta device, buffers computed (empty_from_config)."""
    import torch

    config = _load_config(spec)
    kwargs = {} if spec.attn_implementation is None else {"attn_implementation": spec.attn_implementation}
    dtype = _dtype(torch_dtype) or weights_dtype(spec.dtype)
    try:
        model = empty_from_config(
            _auto_class(spec.family), config, dtype if dtype != "auto" else torch.float32, **kwargs
        )
    except (ValueError, ImportError) as exc:
        _raise_attn_error(spec, exc)
        raise
    model.eval()
    return model, load_tokenizer(spec)


#: safetensors' names of the floating dtypes a checkpoint may be read in exactly (then upcast to float32)
_STORED_FLOAT = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def stored_dtypes(spec: ModelSpec) -> set[str] | None:
    """The safetensors dtype names (F32, BF16, ...) of the floating tensors of `spec`'s weights, read off
    the files' headers (no tensor read); None when there are no safetensors files on disk (a hub id not
    fetched, pickled weights)."""
    from safetensors import safe_open

    folder = Path(_load_path(spec))
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        return None
    found = set()
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            names = {handle.get_slice(key).get_dtype() for key in handle.keys()}
        found |= {name for name in names if name.startswith("F") or name == "BF16"}
    return found


def lossless_dtype(spec: ModelSpec, master=None):
    """The dtype to read `spec`'s checkpoint in so that casting it to `master` (float32) later gives the very
    values that loading it in `master` gives: its stored dtype when all its floating tensors share one
    (bfloat16 or float16: upcast exactly; a 70B hub checkpoint read in bfloat16 takes 140 GB, not 280),
    else `master` (mixed dtypes, float64, no safetensors on disk)."""
    import torch

    master = master or torch.float32
    stored = stored_dtypes(spec)
    if master != torch.float32 or not stored or len(stored) != 1:
        return master
    return getattr(torch, _STORED_FLOAT.get(next(iter(stored)), "float32"))


def load_model(spec: ModelSpec, device: str = "cpu", torch_dtype=None, strict: bool = True):
    """Load (model, tokenizer) for `spec`, in eval mode on `device`.

    mlm -> AutoModelForMaskedLM, clm -> AutoModelForCausalLM, seq2seq -> AutoModelForSeq2SeqLM;
    `trust_remote_code=False`; local folders: safetensors only, no hub access; hub ids: `spec.revision`.
    Weights in `torch_dtype` when given, else in `spec.dtype` resolved for `device` (weights_dtype);
    attention through `spec.attn_implementation` when set.
    A missing folder, a checkpoint that does not fit the family or (with `strict`) one whose
    weights lack part of the family's head is a ConfigError naming the model.
    """
    keep_freed_host_memory()  # vocabulary-sized temporaries reuse freed blocks (lmbias.engine.host_memory)
    config = _load_config(spec)
    kwargs = _source_kwargs(spec)
    load_kwargs = dict(kwargs, config=config, trust_remote_code=False, output_loading_info=True)
    if spec.is_local or not spec.allow_pickle:
        load_kwargs["use_safetensors"] = True
    load_kwargs.update(_weights_kwargs(spec, device, torch_dtype))
    try:
        model, info = _auto_class(spec.family).from_pretrained(_load_path(spec), **load_kwargs)
    except (ValueError, ImportError) as exc:
        _raise_attn_error(spec, exc)
        if isinstance(exc, ImportError):
            raise
        if "Unrecognized configuration class" in str(exc):
            raise ConfigError(
                f"models.{spec.name}.family: {spec.source} ({getattr(config, 'model_type', '?')}) cannot be loaded "
                f"as family {spec.family}: {str(exc).splitlines()[0]}"
            ) from exc
        raise ConfigError(f"models.{spec.name}: cannot load {spec.source} as {spec.family}: {exc}") from exc
    except OSError as exc:
        hint = (
            ""
            if spec.is_local or spec.allow_pickle
            else (
                " (hub ids load safetensors only; if it ships only pickled pytorch_model.bin weights and you "
                f"trust it, set models.{spec.name}.allow_pickle: true)"
            )
        )
        raise ConfigError(f"models.{spec.name}: cannot load the weights of {spec.source}: {exc}{hint}") from exc
    except Exception as exc:  # safetensors' SafetensorError, torch's unpickling errors: a damaged file
        if type(exc).__name__ not in ("SafetensorError", "UnpicklingError", "RuntimeError", "EOFError"):
            raise
        bad = _corrupt_file(spec) if spec.is_local else None
        where = str(bad) if bad else f"the weights of {spec.source}"
        raise ConfigError(
            f"models.{spec.name}: {where} is truncated or corrupt and cannot be read ({type(exc).__name__}: {exc}); "
            + (
                f"rebuild it with `snakemake --cores 1 {spec.build_target}`"
                if spec.build_target
                else "download or copy it again"
            )
        ) from exc
    if not spec.is_local:
        if spec.snapshot:
            model.lmbias_commit = recorded_commit(spec.snapshot)
        else:
            model.lmbias_commit = _hub_commit(spec)
        warn_unpinned(spec, model.lmbias_commit)

    missing = sorted(k for k in info.get("missing_keys") or [] if not _unused_by_family(spec.family, k))
    if missing:
        message = (
            f"models.{spec.name}: {spec.source} has no weights for {len(missing)} parameter(s) of the "
            f"{spec.family} model (e.g. {', '.join(missing[:3])}); they would be random"
        )
        if strict:
            raise ConfigError(message + " (is it a checkpoint without the family's head?)")
        log.warning(message)

    tokenizer = load_tokenizer(spec)
    model = _placed(model, spec, device)
    model.eval()
    return model, tokenizer


def mask_token(tokenizer, model_name: str | None = None) -> str:
    """The tokenizer's mask token; a ConfigError when it has none (mlm/seq2seq metrics need one)."""
    token = getattr(tokenizer, "mask_token", None)
    if token is None or getattr(tokenizer, "mask_token_id", None) is None:
        who = f"models.{model_name}: " if model_name else ""
        raise ConfigError(
            f"{who}the tokenizer {type(tokenizer).__name__} has no mask token (needed by mlm and seq2seq)"
        )
    return str(token)


def load_weights_only(spec: ModelSpec, device, torch_dtype, strict: bool):
    """A local folder's weights without its tokenizer (a fine-tuned folder that reuses the base's)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(spec.source, trust_remote_code=False, local_files_only=True)
    _check_family(spec, config)
    kwargs = dict(
        config=config,
        trust_remote_code=False,
        output_loading_info=True,
        local_files_only=True,
        use_safetensors=True,
        **_weights_kwargs(spec, device, torch_dtype),
    )
    try:
        model, info = _auto_class(spec.family).from_pretrained(spec.source, **kwargs)
    except (OSError, ValueError, ImportError) as exc:
        _raise_attn_error(spec, exc)
        if isinstance(exc, ImportError):
            raise
        raise ConfigError(
            f"models.{spec.name}: cannot load the weights of {spec.source} as {spec.family}: {exc}"
        ) from exc
    missing = sorted(info.get("missing_keys") or [])
    if missing and strict:
        raise ConfigError(
            f"models.{spec.name}: {spec.source} has no weights for {len(missing)} parameter(s) of the "
            f"{spec.family} model (e.g. {', '.join(missing[:3])})"
        )
    return _placed(model, spec, device).eval()
