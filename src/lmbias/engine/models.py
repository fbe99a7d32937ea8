"""Model specs from config.yaml and loading them (hub id or local folder) for one of four families.

Why a family: every metric reads a model the same way within a family -- `mlm` fills a [MASK],
`clm` scores a sentence left to right, `seq2seq` (BART) fills a <mask> by generating the sentence,
`encoder` is a headless encoder (a sentence-transformers BERT such as all-MiniLM-L6-v2: no LM head,
so only the embedding benchmarks apply) -- so the config says which one, and loading fails early, naming the model, when the checkpoint does
not fit the family (a GPT-2 folder configured as mlm would otherwise come back with a random head).

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
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lmbias.errors import ConfigError, DeviceMapTrainingError, DiskOffloadError
from lmbias.engine.batching import PRECISIONS

log = logging.getLogger(__name__)

FAMILIES = ("mlm", "clm", "seq2seq", "encoder")

# `training` (defaults of the methods trained from this model) is checked by lmbias.registry, not here.
# `snapshot` is set by the workflow, not the user: the folder a hub id was fetched into (lmbias.engine.hub).
_KNOWN_KEYS = ("path", "hub_id", "family", "revision", "tiny", "precision", "dtype", "attn_implementation",
               "allow_pickle", "training", "snapshot", "device_map", "max_memory", "offload", "offload_folder",
               "max_tokens")
#: models.<name>.device_map strategies (Accelerate's big-model loading); or an explicit {module: device} map.
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
_DEVICE = re.compile(r"(cpu|disk|mps|cuda(:\d+)?|xpu(:\d+)?)")
#: models.<name>.dtype: the weights' dtype at load. auto: bf16 on a CUDA device that supports it, else fp32.
DTYPES = ("auto", "fp32", "bf16", "fp16")
_TORCH_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
#: models.<name>.attn_implementation: transformers 5's built-in kernels (hub kernel repos are not allowed:
#: they run downloaded code). Unset: transformers' default (sdpa where the model supports it, else eager).
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flash_attention_4", "flex_attention")
_COMMIT = re.compile(r"[0-9a-f]{40}")
#: What a hub model's fetched folder records about its origin (written by lmbias.engine.hub.fetch_hub_model).
SOURCE_FILE = "lmbias_source.json"


@dataclass(frozen=True)
class ModelSpec:
    """One configured model. `source` is an absolute folder (is_local) or a hub id."""

    name: str
    family: str
    source: str
    revision: str | None
    is_local: bool
    tiny: bool = False  # built by the workflow's build_tiny_model rule
    allow_pickle: bool = False  # hub ids: also accept pickled (.bin) weights
    snapshot: str | None = None  # hub ids: the folder fetch_hub_model downloaded them into, read offline
    dtype: str = "auto"  # the weights' dtype at load (DTYPES); see weights_dtype
    attn_implementation: str | None = None  # ATTN_IMPLEMENTATIONS; None: transformers' default
    # scoring over several devices (Accelerate's big-model loading): a strategy or ((module, device), ...)
    device_map: str | tuple | None = None
    max_memory: tuple | None = None  # ((device, size), ...)
    offload: bool = False  # weights may go to disk (device_map "disk" entries)
    offload_folder: str | None = None

    @property
    def build_target(self) -> str | None:
        """The snakemake target that builds this model's folder (tiny models only)."""
        return f"resources/models/{self.name}" if self.tiny else None


def model_spec(name: str, entry: Mapping, root: str | os.PathLike | None = None) -> ModelSpec:
    """Validate ``config["models"][name]`` and turn it into a ModelSpec.

    Exactly one of `path` (a folder; relative paths are resolved against `root`, default the current
    directory) and `hub_id`; `family` one of FAMILIES; `revision` a string when given. Errors are
    ConfigErrors naming the key, e.g. ``models.tiny-bert.family``.
    """
    key = f"models.{name}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{key}: expected a mapping with path|hub_id, family and revision, got {entry!r}")
    unknown = sorted(set(entry) - set(_KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (allowed: {', '.join(_KNOWN_KEYS)})")

    has_path = entry.get("path") is not None
    has_hub = entry.get("hub_id") is not None
    if has_path == has_hub:
        which = "both" if has_path else "neither"
        raise ConfigError(f"{key}: exactly one of {key}.path and {key}.hub_id must be set ({which} is)")

    family = entry.get("family")
    if family is None:
        raise ConfigError(f"{key}.family: missing (one of {', '.join(FAMILIES)})")
    if family not in FAMILIES:
        raise ConfigError(f"{key}.family: {family!r} is not one of {', '.join(FAMILIES)}")

    precision = entry.get("precision", "auto")
    if precision not in PRECISIONS:
        raise ConfigError(f"{key}.precision: {precision!r} is not one of {', '.join(PRECISIONS)}")

    dtype = entry.get("dtype", "auto")
    if dtype not in DTYPES:
        raise ConfigError(f"{key}.dtype: {dtype!r} is not one of {', '.join(DTYPES)} (the weights' dtype at load; "
                          f"autocast is {key}.precision)")
    attn = entry.get("attn_implementation")
    if attn is not None and attn not in ATTN_IMPLEMENTATIONS:
        raise ConfigError(f"{key}.attn_implementation: {attn!r} is not one of {', '.join(ATTN_IMPLEMENTATIONS)}")
    if attn is not None and attn.startswith("flash_attention") and dtype == "fp32":
        raise ConfigError(f"{key}.attn_implementation: {attn} runs in half precision only; it needs {key}.dtype "
                          "auto (on a GPU), bf16 or fp16, not fp32")

    # the scoring budget (lmbias.engine.batching.run_batches); the workflow hands it to jobs as a resource
    max_tokens = entry.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ConfigError(f"{key}.max_tokens: {max_tokens!r} is not a positive integer (padded tokens per forward pass)")

    revision = entry.get("revision")
    if revision is not None and not isinstance(revision, str):
        raise ConfigError(f"{key}.revision: {revision!r} is not a string (quote commit hashes)")

    allow_pickle = entry.get("allow_pickle", False)
    if not isinstance(allow_pickle, bool):
        raise ConfigError(f"{key}.allow_pickle: {allow_pickle!r} is not true or false")

    tiny = entry.get("tiny")
    if tiny is not None:
        if not isinstance(tiny, Mapping):
            raise ConfigError(f"{key}.tiny: expected a mapping with architecture, seed, planted_bias")
        if not has_path:
            raise ConfigError(f"{key}.tiny: a tiny model is built locally and needs {key}.path, not hub_id")

    if has_path:
        path = entry["path"]
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ConfigError(f"{key}.path: {path!r} is not a folder path")
        folder = Path(path).expanduser()
        if not folder.is_absolute():
            folder = Path(root if root is not None else os.getcwd()) / folder
        source = str(folder.resolve())
    else:
        source = entry["hub_id"]
        if not isinstance(source, str) or not source.strip():
            raise ConfigError(f"{key}.hub_id: {source!r} is not a hub id")
    snapshot = entry.get("snapshot")
    if snapshot is not None:
        if has_path:
            raise ConfigError(f"{key}.snapshot: only hub ids are fetched into a snapshot folder; this model has a path")
        folder = Path(snapshot).expanduser()
        snapshot = str((folder if folder.is_absolute() else Path(root if root is not None else os.getcwd()) / folder).resolve())
    placement = _placement(key, entry, root)
    return ModelSpec(name=name, family=family, source=source, revision=revision, is_local=has_path,
                     tiny=tiny is not None, allow_pickle=allow_pickle, snapshot=snapshot, dtype=dtype,
                     attn_implementation=attn, **placement)


def _device_name(value, where: str) -> str | int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value  # a CUDA device index, as Accelerate takes it
    if isinstance(value, str) and _DEVICE.fullmatch(value):
        return value
    raise ConfigError(f"{where}: {value!r} is not a device (cpu, disk, cuda, cuda:N, N, mps)")


def _placement(key: str, entry: Mapping, root) -> dict:
    """device_map, max_memory, offload, offload_folder of a model entry, checked (see load_model)."""
    device_map = entry.get("device_map")
    rest = [k for k in ("max_memory", "offload", "offload_folder") if entry.get(k) not in (None, False)]
    if device_map is None:
        if rest:
            raise ConfigError(f"{key}.{rest[0]}: only applies with {key}.device_map (auto or a {{module: device}} map)")
        return {}
    if isinstance(device_map, str):
        if device_map not in DEVICE_MAP_STRATEGIES:
            raise ConfigError(f"{key}.device_map: {device_map!r} is not one of {', '.join(DEVICE_MAP_STRATEGIES)} "
                              "or a {module: device} mapping")
        resolved = device_map
    elif isinstance(device_map, Mapping) and device_map:
        resolved = tuple((str(module), _device_name(device, f"{key}.device_map.{module}"))
                         for module, device in device_map.items())
    else:
        raise ConfigError(f"{key}.device_map: {device_map!r} is not a strategy ({', '.join(DEVICE_MAP_STRATEGIES)}) "
                          "or a non-empty {module: device} mapping")
    max_memory = entry.get("max_memory")
    if max_memory is not None:
        if not isinstance(max_memory, Mapping) or not max_memory:
            raise ConfigError(f"{key}.max_memory: {max_memory!r} is not a {{device: size}} mapping (e.g. {{0: 70GiB, cpu: 100GiB}})")
        for device, size in max_memory.items():
            _device_name(device, f"{key}.max_memory")
            if not (isinstance(size, str) and re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", size.strip())
                    or isinstance(size, int) and not isinstance(size, bool) and size > 0):
                raise ConfigError(f"{key}.max_memory.{device}: {size!r} is not a size (bytes, or e.g. 70GiB, 500MB)")
        max_memory = tuple((d, s) for d, s in max_memory.items())
    offload = entry.get("offload", False)
    if not isinstance(offload, bool):
        raise ConfigError(f"{key}.offload: {offload!r} is not true or false")
    folder = entry.get("offload_folder")
    if folder is not None:
        if not isinstance(folder, (str, os.PathLike)) or not str(folder):
            raise ConfigError(f"{key}.offload_folder: {folder!r} is not a folder path")
        folder = Path(folder).expanduser()
        folder = str((folder if folder.is_absolute() else Path(root if root is not None else os.getcwd()) / folder).resolve())
        offload = True
    if isinstance(resolved, tuple) and not offload:
        on_disk = [module for module, device in resolved if device == "disk"]
        if on_disk:
            raise DiskOffloadError(f"{key}.device_map.{on_disk[0]}: disk puts weights on disk, read back at every "
                                   f"forward pass; allow it with {key}.offload: true (or {key}.offload_folder), or "
                                   "give the module a device")
    return {"device_map": resolved, "max_memory": max_memory, "offload": offload, "offload_folder": folder}


def check_trainable(name: str, entry: Mapping, method: str | None = None) -> None:
    """Fine-tuning refuses a model entry with a device_map (DeviceMapTrainingError): a model dispatched over
    devices runs one device at a time, for scoring; FSDP shards a model too large for one GPU."""
    if isinstance(entry, Mapping) and entry.get("device_map") is not None:
        who = f"methods.{method} fine-tunes models.{name}, whose" if method else f"models.{name}:"
        raise DeviceMapTrainingError(
            f"{who} device_map is for scoring only (Accelerate's big-model loading runs the model one device at "
            f"a time); to fine-tune a model larger than one GPU, shard it with FSDP (the method's "
            f"training.distributed: fsdp) from a model entry without device_map (a second entry of the same weights "
            f"may set device_map for scoring)")


def read_source(folder: str | os.PathLike) -> dict:
    """The SOURCE_FILE record of a fetched folder ({} when there is none)."""
    import json

    path = Path(folder) / SOURCE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def recorded_commit(folder: str | os.PathLike) -> str:
    """The hub commit a fetched folder's files came from ("" when it records none)."""
    return str(read_source(folder).get("commit") or "")


def is_pinned(revision: str | None) -> bool:
    """True for a full commit hash: the only hub revision that always names the same weights."""
    return bool(revision) and bool(_COMMIT.fullmatch(revision))


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


def warn_unpinned(spec: ModelSpec, commit: str) -> None:
    if spec.is_local or is_pinned(spec.revision):
        return
    log.warning(
        "models.%s: revision %r of %s is not a commit, so these numbers cannot be reproduced exactly once the "
        "hub moves on; it resolved to commit %s (recorded in the summary's model_commit). Pin it: revision: %s",
        spec.name, spec.revision or "main", spec.source, commit or "?", commit or "<commit>",
    )


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

    return {"mlm": AutoModelForMaskedLM, "clm": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM,
            "encoder": AutoModel}[family]


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
    raise ConfigError(f"models.{spec.name}: {spec.source} has not been fetched into {spec.snapshot}; fetch it with "
                      f"`snakemake --cores 1 {spec.snapshot}` (rule fetch_hub_model, on a host that reaches the hub)")


def _check_local(spec: ModelSpec) -> None:
    folder = Path(spec.source)
    if folder.is_dir():
        return
    message = f"models.{spec.name}.path: model folder {folder} does not exist"
    if spec.tiny:
        message += f"; build it with `snakemake --cores 1 {spec.build_target}` (rule build_tiny_model)"
    raise ConfigError(message)


_CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")


def _check_family(spec: ModelSpec, config) -> None:
    """Reject checkpoints the Auto class would load with a wrong or missing head."""
    where = f"models.{spec.name}.family"
    model_type = getattr(config, "model_type", "?")
    enc_dec = bool(getattr(config, "is_encoder_decoder", False))
    if spec.family == "seq2seq" and not enc_dec:
        raise ConfigError(f"{where}: {spec.source} is a {model_type} model, not an encoder-decoder; family seq2seq does not fit")
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
            f"{where}: {spec.source} is a {model_type} causal LM ({', '.join(archs)}); family mlm does not fit (use clm)"
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
            f"allow it with models.{spec.name}.offload: true (or offload_folder), or give it more device memory")
    if resolved:
        log.info("models.%s dispatched over %s: %s", spec.name, ", ".join(sorted({str(v) for v in resolved.values()})),
                 resolved)
    return model


def _raise_attn_error(spec: ModelSpec, exc: Exception) -> None:
    """A requested attention kernel that this model, device or installation cannot run: a ConfigError naming
    the key (transformers raises ValueError or ImportError, e.g. flash-attn not installed)."""
    if spec.attn_implementation is None or "attn" not in str(exc).lower() and "attention" not in str(exc).lower():
        return
    raise ConfigError(f"models.{spec.name}.attn_implementation: {spec.attn_implementation} cannot be used for "
                      f"{spec.source}: {str(exc).splitlines()[0]}") from exc


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
        where = "a local folder" if spec.is_local else f"fetched into {spec.snapshot}" if spec.snapshot else f"hub id at revision {spec.revision or 'main'} (offline? not in the HF cache?)"
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
        model = model_class.from_config(config, dtype=dtype, **kwargs) if hasattr(model_class, "from_config") \
            else model_class._from_config(config, dtype=dtype, **kwargs)
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
        model = empty_from_config(_auto_class(spec.family), config, dtype if dtype != "auto" else torch.float32,
                                  **kwargs)
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
        hint = "" if spec.is_local or spec.allow_pickle else (
            " (hub ids load safetensors only; if it ships only pickled pytorch_model.bin weights and you "
            f"trust it, set models.{spec.name}.allow_pickle: true)")
        raise ConfigError(f"models.{spec.name}: cannot load the weights of {spec.source}: {exc}{hint}") from exc
    except Exception as exc:  # safetensors' SafetensorError, torch's unpickling errors: a damaged file
        if type(exc).__name__ not in ("SafetensorError", "UnpicklingError", "RuntimeError", "EOFError"):
            raise
        bad = _corrupt_file(spec) if spec.is_local else None
        where = str(bad) if bad else f"the weights of {spec.source}"
        raise ConfigError(
            f"models.{spec.name}: {where} is truncated or corrupt and cannot be read ({type(exc).__name__}: {exc}); "
            + (f"rebuild it with `snakemake --cores 1 {spec.build_target}`" if spec.tiny else "download or copy it again")
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
        raise ConfigError(f"{who}the tokenizer {type(tokenizer).__name__} has no mask token (needed by mlm and seq2seq)")
    return str(token)


# ------------------------------------------------------------------------------- methods' model folders

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
        raise DataError(f"not a model folder of models.{spec.name}: config.json and model.safetensors are needed "
                        f"(found: {', '.join(sorted(p.name for p in folder.iterdir())) or 'nothing'})", folder)
    return replace(spec, source=str(folder), is_local=True, revision=None, tiny=False)


def load_method_tokenizer(spec: ModelSpec, method_dir: str | os.PathLike | None):
    """The tokenizer of a method's model: the fine-tuned folder's when it has one, else the base model's."""
    if _method_kind(method_dir) == "finetuned" and any((Path(method_dir) / f).is_file() for f in _TOKENIZER_FILES):
        return load_tokenizer(_finetuned_spec(spec, method_dir))
    return load_tokenizer(spec)


def load_method_model(spec: ModelSpec, method_dir: str | os.PathLike | None, device: str = "cpu", torch_dtype=None,
                      strict: bool = True):
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
            log.warning("%s was fitted on %s (%s), now applied to models.%s = %s (%s)", method_dir, base.get("source"),
                        base.get("family"), spec.name, spec.source, spec.family)
        model, tokenizer = load_model(spec, device=device, torch_dtype=torch_dtype, strict=strict)
        install_projection(model, components, application)
        return model, tokenizer
    if kind == "inlp":
        from lmbias.engine.debias_projection import install_projection_matrix, load_projection_matrix

        matrix, info = load_projection_matrix(method_dir)
        base = info.get("base_model") or {}
        if base.get("source") not in (None, spec.source) or base.get("family") not in (None, spec.family):
            log.warning("%s was fitted on %s (%s), now applied to models.%s = %s (%s)", method_dir, base.get("source"),
                        base.get("family"), spec.name, spec.source, spec.family)
        model, tokenizer = load_model(spec, device=device, torch_dtype=torch_dtype, strict=strict)
        install_projection_matrix(model, matrix)
        return model, tokenizer
    tuned = _finetuned_spec(spec, method_dir)
    if any((Path(tuned.source) / f).is_file() for f in _TOKENIZER_FILES):
        return load_model(tuned, device=device, torch_dtype=torch_dtype, strict=strict)
    return _load_weights_only(tuned, device, torch_dtype, strict), load_tokenizer(spec)


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
        log.warning("%s: the adapter was trained on %s (commit %s), now applied to models.%s = %s (commit %s)",
                    folder, trained_on[0], trained_on[1] or "-", spec.name, now[0], now[1] or "-")
    try:
        with quiet_peft():
            peft_model = PeftModel.from_pretrained(model, str(folder), is_trainable=False)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise DataError(f"cannot load the LoRA adapter onto models.{spec.name} ({spec.source}): {exc}", folder) from exc
    return peft_model.get_base_model().eval()


def _load_weights_only(spec: ModelSpec, device, torch_dtype, strict: bool):
    """A local folder's weights without its tokenizer (a fine-tuned folder that reuses the base's)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(spec.source, trust_remote_code=False, local_files_only=True)
    _check_family(spec, config)
    kwargs = dict(config=config, trust_remote_code=False, output_loading_info=True, local_files_only=True,
                  use_safetensors=True, **_weights_kwargs(spec, device, torch_dtype))
    try:
        model, info = _auto_class(spec.family).from_pretrained(spec.source, **kwargs)
    except (OSError, ValueError, ImportError) as exc:
        _raise_attn_error(spec, exc)
        if isinstance(exc, ImportError):
            raise
        raise ConfigError(f"models.{spec.name}: cannot load the weights of {spec.source} as {spec.family}: {exc}") from exc
    missing = sorted(info.get("missing_keys") or [])
    if missing and strict:
        raise ConfigError(f"models.{spec.name}: {spec.source} has no weights for {len(missing)} parameter(s) of the "
                          f"{spec.family} model (e.g. {', '.join(missing[:3])})")
    return _placed(model, spec, device).eval()
