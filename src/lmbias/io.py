"""Atomic parquet writing with explicit schemas: a failed job never leaves half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


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


def write_table_atomic(table: pa.Table, path: str | os.PathLike, schema: pa.Schema | None = None,
                       metadata: dict[str, str] | None = None) -> Path:
    """Write `table` (cast to `schema` when given, plus key-value `metadata`) to `path` via a temp file + rename."""
    path = Path(path)
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in metadata.items()}})
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
