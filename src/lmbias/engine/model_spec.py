"""Model entries of config.yaml (``models.<name>``), checked and turned into a ModelSpec of one of four families.

Why a family: every metric reads a model the same way within a family -- `mlm` fills a [MASK],
`clm` scores a sentence left to right, `seq2seq` (BART) fills a <mask> by generating the sentence,
`encoder` is a headless encoder (a sentence-transformers BERT such as all-MiniLM-L6-v2: no LM head,
so only the embedding benchmarks apply) -- so the config says which one, and loading (lmbias.engine.models)
fails early, naming the model, when the checkpoint does not fit the family.

An entry names its weights by exactly one of `path` (a local folder) and `hub_id` (at `revision`; `allow_pickle`;
`snapshot`, the folder the workflow fetched it into: lmbias.engine.hub). How it loads (`dtype`,
`attn_implementation`, `device_map` with `max_memory`, `offload`, `offload_folder`: lmbias.engine.models) and how
it is scored (`precision`, the autocast of lmbias.engine.batching; `max_tokens`, its token budget) are checked
here too, each error a ConfigError (or DiskOffloadError) naming its key. Fine-tuning refuses an entry with a
device_map (check_trainable: DeviceMapTrainingError).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lmbias.engine.batching import PRECISIONS
from lmbias.errors import ConfigError, DeviceMapTrainingError, DiskOffloadError

FAMILIES = ("mlm", "clm", "seq2seq", "encoder")

# `training` (defaults of the methods trained from this model) is checked by lmbias.methods.resolution, not here.
# `snapshot` is set by the workflow, not the user: the folder a hub id was fetched into (lmbias.engine.hub).
_KNOWN_KEYS = (
    "path",
    "hub_id",
    "family",
    "revision",
    "tiny",
    # a GGUF file dequantized into `path` by the workflow (lmbias.engine.gguf)
    "gguf",
    "precision",
    "dtype",
    "attn_implementation",
    "allow_pickle",
    "training",
    "snapshot",
    "device_map",
    "max_memory",
    "offload",
    "offload_folder",
    "max_tokens",
    # which benchmark entries the model's summaries read (lmbias.workflow.stand_ins): not the weights' concern
    "stand_ins",
    # prompted benchmarks only (lmbias.engine.chat)
    "chat_template",
    "system_prompt",
)
#: models.<name>.device_map strategies (Accelerate's big-model loading); or an explicit {module: device} map.
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
_DEVICE = re.compile(r"(cpu|disk|mps|cuda(:\d+)?|xpu(:\d+)?)")
#: models.<name>.dtype: the weights' dtype at load. auto: bf16 on a CUDA device that supports it, else fp32.
DTYPES = ("auto", "fp32", "bf16", "fp16")
#: models.<name>.attn_implementation: transformers 5's built-in kernels (hub kernel repos are not allowed:
#: they run downloaded code). Unset: transformers' default (sdpa where the model supports it, else eager).
ATTN_IMPLEMENTATIONS = (
    "eager",
    "sdpa",
    "flash_attention_2",
    "flash_attention_3",
    "flash_attention_4",
    "flex_attention",
)


@dataclass(frozen=True)
class ModelSpec:
    """One configured model. `source` is an absolute folder (is_local) or a hub id."""

    name: str
    family: str
    source: str
    revision: str | None
    is_local: bool
    tiny: bool = False  # built by the workflow's build_tiny_model rule
    gguf: bool = False  # dequantized from a GGUF file by the workflow's dequantize_gguf rule
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
        """The snakemake target that builds this model's folder (tiny models and GGUF entries only)."""
        return f"resources/models/{self.name}" if self.tiny or self.gguf else None

    @property
    def build_rule(self) -> str | None:
        """The rule that builds build_target."""
        return "build_tiny_model" if self.tiny else "dequantize_gguf" if self.gguf else None


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
        raise ConfigError(
            f"{key}.dtype: {dtype!r} is not one of {', '.join(DTYPES)} (the weights' dtype at load; "
            f"autocast is {key}.precision)"
        )
    attn = entry.get("attn_implementation")
    if attn is not None and attn not in ATTN_IMPLEMENTATIONS:
        raise ConfigError(f"{key}.attn_implementation: {attn!r} is not one of {', '.join(ATTN_IMPLEMENTATIONS)}")
    if attn is not None and attn.startswith("flash_attention") and dtype == "fp32":
        raise ConfigError(
            f"{key}.attn_implementation: {attn} runs in half precision only; it needs {key}.dtype "
            "auto (on a GPU), bf16 or fp16, not fp32"
        )

    # the scoring budget (lmbias.engine.batching.run_batches); the workflow hands it to jobs as a resource
    max_tokens = entry.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ConfigError(
            f"{key}.max_tokens: {max_tokens!r} is not a positive integer (padded tokens per forward pass)"
        )

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
    gguf = entry.get("gguf")
    if gguf is not None:
        from lmbias.engine.gguf import gguf_source

        if tiny is not None:
            raise ConfigError(f"{key}.gguf: a model is either tiny (built here) or read from a GGUF file, not both")
        if not has_path:
            raise ConfigError(
                f"{key}.gguf: a GGUF file is dequantized into a folder of its own; set {key}.path to "
                f"resources/models/{name} (a hub repository of the file goes in {key}.gguf.hub_id)"
            )
        if family != "clm":
            raise ConfigError(f"{key}.family: a GGUF entry is a decoder read as a causal model; set family: clm")
        gguf_source(name, entry, root)

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
        snapshot = str(
            (folder if folder.is_absolute() else Path(root if root is not None else os.getcwd()) / folder).resolve()
        )
    placement = _placement(key, entry, root)
    return ModelSpec(
        name=name,
        family=family,
        source=source,
        revision=revision,
        is_local=has_path,
        tiny=tiny is not None,
        gguf=gguf is not None,
        allow_pickle=allow_pickle,
        snapshot=snapshot,
        dtype=dtype,
        attn_implementation=attn,
        **placement,
    )


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
            raise ConfigError(
                f"{key}.device_map: {device_map!r} is not one of {', '.join(DEVICE_MAP_STRATEGIES)} "
                "or a {module: device} mapping"
            )
        resolved = device_map
    elif isinstance(device_map, Mapping) and device_map:
        resolved = tuple(
            (str(module), _device_name(device, f"{key}.device_map.{module}")) for module, device in device_map.items()
        )
    else:
        raise ConfigError(
            f"{key}.device_map: {device_map!r} is not a strategy ({', '.join(DEVICE_MAP_STRATEGIES)}) "
            "or a non-empty {module: device} mapping"
        )
    max_memory = entry.get("max_memory")
    if max_memory is not None:
        if not isinstance(max_memory, Mapping) or not max_memory:
            raise ConfigError(
                f"{key}.max_memory: {max_memory!r} is not a {{device: size}} mapping (e.g. {{0: 70GiB, cpu: 100GiB}})"
            )
        for device, size in max_memory.items():
            _device_name(device, f"{key}.max_memory")
            if not (
                isinstance(size, str)
                and re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", size.strip())
                or isinstance(size, int)
                and not isinstance(size, bool)
                and size > 0
            ):
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
        folder = str(
            (folder if folder.is_absolute() else Path(root if root is not None else os.getcwd()) / folder).resolve()
        )
        offload = True
    if isinstance(resolved, tuple) and not offload:
        on_disk = [module for module, device in resolved if device == "disk"]
        if on_disk:
            raise DiskOffloadError(
                f"{key}.device_map.{on_disk[0]}: disk puts weights on disk, read back at every "
                f"forward pass; allow it with {key}.offload: true (or {key}.offload_folder), or "
                "give the module a device"
            )
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
            f"may set device_map for scoring)"
        )
