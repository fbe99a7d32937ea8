"""Issue 8, robustness: each test here failed before its fix (bad input meets a named error, not a
traceback or silence)."""

from __future__ import annotations

import os
import stat

import pyarrow as pa
import pytest

from lmbias.errors import ConfigError, DataError


@pytest.fixture
def umask_027():
    before = os.umask(0o027)
    yield
    os.umask(before)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_parquet_follows_the_umask(tmp_path, umask_027):
    from lmbias.io import write_table_atomic

    out = write_table_atomic(pa.table({"a": [1]}), tmp_path / "t.parquet")
    assert _mode(out) == 0o640  # 0666 & ~027; mkstemp alone gives 0600


def test_verified_copy_follows_the_umask(tmp_path, umask_027):
    from lmbias.parsers.sources import copy_local, sha256_file

    src = tmp_path / "src.txt"
    src.write_text("x\n")
    out = copy_local(src, tmp_path / "out" / "dest.txt", sha256_file(src))
    assert _mode(out) == 0o640
