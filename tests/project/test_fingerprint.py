"""lmbias.job_runtime.write_source_fingerprint: the file that stands for a set of library modules in the DAG."""

from __future__ import annotations

import hashlib

from lmbias.job_runtime import write_source_fingerprint


def test_fingerprint_lists_each_source_with_its_sha256_relative_to_the_root(tmp_path):
    (tmp_path / "src").mkdir()
    b, a = tmp_path / "src/b.py", tmp_path / "a.yaml"
    b.write_text("x = 1\n")
    a.write_text("key: value\n")
    out = tmp_path / "results/library/set.sha256"
    write_source_fingerprint([str(b), a], out, tmp_path)
    sha = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b)}
    assert out.read_text() == f"{sha[a]}  a.yaml\n{sha[b]}  src/b.py\n"  # sorted by path, one line each
    b.write_text("x = 2\n")  # an edit changes its line
    write_source_fingerprint([a, b], out, tmp_path)
    assert hashlib.sha256(b"x = 2\n").hexdigest() in out.read_text()
    assert [p.name for p in out.parent.iterdir()] == ["set.sha256"]  # written atomically: no temp file left
