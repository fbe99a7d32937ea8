"""Files: atomic writing (parquet tables with explicit schemas, whole folders: a failed job never leaves half an
output) and the library's one file hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

#: PyYAML's safe loader, in C (libyaml) where PyYAML was built with it: the same documents, about ten times
#: faster. Every Snakemake start reads config.yaml, its schema and the published tables through it.
SAFE_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str):
    """yaml.safe_load(text), with SAFE_YAML_LOADER (a yaml.YAMLError with its problem_mark on bad input)."""
    return yaml.load(text, Loader=SAFE_YAML_LOADER)  # noqa: S506 (a safe loader)


def current_umask() -> int:
    """The process umask (read by setting and restoring it: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode an ordinary new file gets (0666 less the umask)."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """The mode an ordinary new folder gets (0777 less the umask)."""
    return 0o777 & ~current_umask()


@contextmanager
def atomic_folder(out_dir: str | os.PathLike):
    """Yield a fresh temporary folder beside `out_dir`; when the block ends it replaces `out_dir` whole.

    If the block raises, the temporary folder is removed and `out_dir` is left as it was. mkdtemp and the
    safetensors writer create owner-only modes; the published folder follows the umask like any output.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        yield tmp
        for path in tmp.rglob("*"):
            path.chmod(dir_mode() if path.is_dir() else file_mode())
        tmp.chmod(dir_mode())
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes, read in blocks of 1 MiB (the one file hash of the library: data checksums,
    items in score keys, library fingerprints, hub snapshots, checkpoints)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_lock_holder(fd: int) -> None:
    """Write who holds a lock file (pid, host, since) into it, open as `fd` (lmbias.training.output_lock,
    lmbias.engine.score_lock)."""
    import json
    import socket
    import time

    stamp = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    os.ftruncate(fd, 0)
    os.write(fd, (json.dumps(stamp) + "\n").encode())


def lock_holder(path: str | os.PathLike) -> str:
    """Who write_lock_holder says holds the lock file `path`, in words."""
    import json

    try:
        info = json.loads(Path(path).read_text())
        return f"pid {info['pid']} on host {info['host']} (since {info['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "an unknown process"


def write_table_atomic(
    table: pa.Table, path: str | os.PathLike, schema: pa.Schema | None = None, metadata: dict[str, str] | None = None
) -> Path:
    """Write `table` (cast to `schema` when given, plus key-value `metadata`) to `path` via a temp file + rename."""
    path = Path(path)
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    if metadata:
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in metadata.items()}}
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.chmod(tmp, file_mode())  # mkstemp creates 0600; outputs follow the umask like any other file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_records_atomic(records: list[dict], path: str | os.PathLike, schema: pa.Schema) -> Path:
    """Write a list of row dicts with an explicit schema (empty lists give an empty, typed table)."""
    table = pa.Table.from_pylist(records, schema=schema)
    return write_table_atomic(table, path, schema)


def read_table(path: str | os.PathLike) -> pa.Table:
    return pq.read_table(path)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write a text file (UTF-8) via a temp file + rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
