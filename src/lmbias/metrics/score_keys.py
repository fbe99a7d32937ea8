"""Score keys and score manifests: how a scoring job knows that a score file on disk is still right.

One scoring job per (model, method, seed) (rule score_model) writes every benchmark's score file
(results/{model}/{method}/seed{k}/scores/{benchmark}.parquet) without declaring them as outputs: Snakemake
deletes a job's declared outputs before rerunning it, and these files are the cache a rerun keeps. They are
rule score_benchmark's outputs, which keeps a file holding its key rather than scoring it again. Each file
carries in its parquet metadata (SCORE_KEY_METADATA) the *score key*: the sha256 of canonical JSON of
everything its numbers depend on (score_key). A file whose key equals the key the job computes now is kept
without a forward pass; any other is scored again. What the job produced is listed in its declared output, the
manifest scores.json ({benchmark: score file, key, rows, seconds}), which the metric jobs read.

The folders (base weights, the method's model folder) enter the key by identity, not content:
(relative path, size, mtime_ns) of every file under them (folder_identity). Hashing a 7B model's 15 GB for
each job would cost about a minute; every way the workflow rewrites a folder (a tiny model build, a hub
fetch, a fine-tune or fit, all atomic renames of new files) gives its files new mtimes, so a rewritten folder
never keeps an old key. A copy (cp -p aside) or a fresh clone gets new mtimes too, and so rescored once: the
identity errs towards scoring again, never towards keeping a wrong file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from lmbias.errors import ConfigError
from lmbias.io import file_sha256

#: parquet metadata key of a score file's score key
SCORE_KEY_METADATA = "lmbias.score_key"

#: bumped when what a key covers changes, so every older file is scored again
KEY_VERSION = 1


def folder_identity(folder: str | os.PathLike | None) -> list | None:
    """[(path relative to `folder`, size, mtime_ns)] of every file under it, sorted; a single file's own
    [(name, size, mtime_ns)]; None for no folder (a hub id's weights are its fetched folder, a pretrained
    method has no model folder)."""
    if not folder:
        return None
    root = Path(folder)
    if root.is_file():
        stat = root.stat()
        return [[root.name, stat.st_size, stat.st_mtime_ns]]
    if not root.is_dir():
        raise ConfigError(f"{root}: the model folder to score with does not exist")
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath, name)
            stat = path.stat()
            out.append([path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns])
    return out


def score_key(
    benchmark_slice: dict,
    items_path: str | os.PathLike,
    model_entry: dict,
    method_entry: dict,
    library_paths: list,
    seed: int | str,
    weights_dir: str | os.PathLike | None = None,
    method_dir: str | os.PathLike | None = None,
    identities: dict | None = None,
) -> str:
    """The score key of one benchmark's score file (module docstring). `model_entry` without max_tokens (a
    resource: no number depends on it); `method_entry` without its model folder (that enters by identity);
    `library_paths`: the library fingerprint files the scoring reads (the benchmark's, Self-Debias'): their
    contents. `identities` caches folder_identity per folder across the benchmarks of one job."""
    cache = identities if identities is not None else {}

    def identity(folder):
        key = str(folder) if folder else ""
        if key not in cache:
            cache[key] = folder_identity(folder)
        return cache[key]

    content = {
        "version": KEY_VERSION,
        "benchmark": benchmark_slice,
        "items_sha256": file_sha256(items_path),
        "model": {k: v for k, v in model_entry.items() if k != "max_tokens"},
        "method": {k: v for k, v in method_entry.items() if k != "model_dir"},
        "weights": identity(weights_dir),
        "method_model": identity(method_dir),
        "library": [Path(p).read_text(encoding="utf-8") for p in sorted(str(p) for p in library_paths)],
        "seed": int(seed),
    }
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stored_key(path: str | os.PathLike) -> str | None:
    """The score key a score file was written with; None when it is missing, unreadable or has none (a file
    half-written by a killed job never exists: score files are written atomically)."""
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (OSError, ValueError):
        return None
    value = metadata.get(SCORE_KEY_METADATA.encode())
    return value.decode() if value is not None else None


# ------------------------------------------------------------------------------------------- manifests

MANIFEST_NAME = "scores.json"


def is_manifest(path: str | os.PathLike) -> bool:
    return Path(path).name == MANIFEST_NAME


def write_manifest(path: str | os.PathLike, entries: dict[str, dict]) -> None:
    """scores.json: {"benchmarks": {name: {scores, score_key, rows, seconds, scored}}}, written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"benchmarks": entries}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_manifest(path: str | os.PathLike) -> dict[str, dict]:
    """{benchmark: entry} of a scores.json; ConfigError naming the file when it is not one."""
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))["benchmarks"]
        if not isinstance(entries, dict):
            raise TypeError("'benchmarks' is not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a scores manifest ({exc})") from None
    return entries


def manifest_score_files(path: str | os.PathLike, benchmarks=None) -> dict[str, str]:
    """{benchmark: score file} of a manifest, each checked to hold the key the manifest recorded. A missing file
    is named with the target that scores it again alone; a file whose key changed since (replaced by hand, or
    by a one-benchmark job for another config) is named as changed. `benchmarks`: only those are checked."""
    out = {}
    for name, entry in read_manifest(path).items():
        if benchmarks is not None and name not in benchmarks:
            continue
        found = stored_key(entry["scores"])
        if found is None and not Path(entry["scores"]).exists():
            raise ConfigError(
                f"{entry['scores']}: the score file of benchmark {name!r} that {path} lists is missing (deleted "
                f"after its scoring job); ask for it (snakemake {entry['scores']}, or its metrics/{name}.parquet): "
                "that scores it again alone, then rerun"
            )
        if found != entry["score_key"]:
            raise ConfigError(
                f"{entry['scores']}: changed since {path} was written: its score key ({found or 'none'}) is not "
                f"the one recorded for benchmark {name!r}; delete the file and rerun: the scoring job scores it "
                "again"
            )
        out[name] = entry["scores"]
    return out


def resolve_scores(paths, benchmarks=None) -> list[str]:
    """Score files from a job's `scores` input: score files as they are, a manifest as the files it names
    (only those of `benchmarks` when given, in its order)."""
    out = []
    for path in paths:
        if not is_manifest(path):
            out.append(str(path))
            continue
        files = manifest_score_files(path, benchmarks)
        wanted = list(files) if benchmarks is None else [b for b in benchmarks if b in files]
        if benchmarks is not None and not wanted:
            raise ConfigError(f"{path}: holds none of the benchmarks {', '.join(benchmarks)}")
        out += [files[b] for b in wanted]
    return out
