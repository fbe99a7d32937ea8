"""SEAT tests (May et al. 2019): each `.jsonl` file is ONE pretty-printed JSON object
{"targ1"|"targ2"|"attr1"|"attr2": {"category": str, "examples": [str, ...]}}; flattened to one row per example.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import line_of, read_json, read_text, table

ROLES = ("targ1", "targ2", "attr1", "attr2")
SUFFIX = ".jsonl"

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "seat"
SCHEMA = pa.schema(
    [
        ("test", pa.string()),  # file name without .jsonl, e.g. "sent-weat6"
        ("role", pa.string()),  # targ1 | targ2 | attr1 | attr2
        ("category", pa.string()),  # e.g. MaleNames
        ("position", pa.int32()),  # index in the examples list
        ("text", pa.string()),
    ]
)


def test_name(path: str | os.PathLike) -> str:
    name = Path(path).name
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name


def parse_seat(paths: Sequence[str | os.PathLike]) -> pa.Table:
    """One row per (test, role, example), tests in the order given."""
    rows = []
    for path in paths:
        text = read_text(path)
        data = read_json(path)
        if not isinstance(data, dict):
            raise DataError(f"expected one JSON object, found {type(data).__name__}", path, 1)
        if sorted(data) != sorted(ROLES):
            raise DataError(f"keys must be {list(ROLES)}, found {list(data)}", path, 1)
        for role in ROLES:
            entry = data[role]
            line = line_of(text, f'"{role}"')
            if not isinstance(entry, dict) or not isinstance(entry.get("category"), str):
                raise DataError(f"{role} must be an object with a string 'category'", path, line)
            examples = entry.get("examples")
            if not isinstance(examples, list) or not examples:
                raise DataError(f"{role}.examples must be a non-empty list", path, line)
            for position, example in enumerate(examples):
                if not isinstance(example, str) or not example.strip():
                    raise DataError(
                        f"{role}.examples[{position}] must be a non-empty string, got {example!r}", path, line
                    )
                rows.append(
                    {
                        "test": test_name(path),
                        "role": role,
                        "category": entry["category"],
                        "position": position,
                        "text": example,
                    }
                )
    return table(rows, SCHEMA)


OPTIONS = ("tests",)


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    """`tests` (file names without .jsonl); default: every configured SEAT file."""
    known = [name for name in available if name.endswith(SUFFIX)]
    tests = options.get("tests")
    if tests is None:
        return known
    if isinstance(tests, str) or not tests:
        raise ConfigError(f"{key}.tests must be a non-empty list of test names, got {tests!r}")
    unknown = [t for t in tests if f"{t}{SUFFIX}" not in known]
    if unknown:
        raise ConfigError(f"{key}.tests: unknown test(s) {unknown}; configured: {sorted(test_name(k) for k in known)}")
    return [f"{t}{SUFFIX}" for t in tests]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return parse_seat(list(files.values()))
