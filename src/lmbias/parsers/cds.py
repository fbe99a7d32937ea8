"""Counterfactual Data Substitution word lists (Hall Maudslay et al. 2019): JSON arrays of
[masculine, feminine] pairs; `words` are Lu et al.'s gendered word pairs, `names` the 1000 name pairs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import read_json, table

FILES = {"words": "cda_default_pairs.json", "names": "names_pairs_1000_scaled.json"}

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "cds"
SCHEMA = pa.schema(
    [
        ("male", pa.string()),
        ("female", pa.string()),
        ("kind", pa.string()),  # words | names
        ("position", pa.int32()),  # index in the file's array
    ]
)


def parse_cds(paths: Mapping[str, str | os.PathLike]) -> pa.Table:
    """`paths` maps kind (words|names) to its JSON file."""
    rows = []
    for kind, path in paths.items():
        if kind not in FILES:
            raise ConfigError(f"cds list kind must be one of {list(FILES)}, got {kind!r}")
        data = read_json(path)
        if not isinstance(data, list) or not data:
            raise DataError("expected a non-empty JSON array of [male, female] pairs", path)
        for position, pair in enumerate(data):
            if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(w, str) and w.strip() for w in pair):
                raise DataError(
                    f"entry {position} must be a [male, female] pair of non-empty strings, got {pair!r}", path
                )
            rows.append({"male": pair[0], "female": pair[1], "kind": kind, "position": position})
    return table(rows, SCHEMA)


OPTIONS = ("lists",)


def _lists(options: Mapping, key: str) -> list[str]:
    lists = options.get("lists", list(FILES))
    if isinstance(lists, str) or not lists or any(k not in FILES for k in lists):
        raise ConfigError(f"{key}.lists must be a non-empty list drawn from {list(FILES)}, got {lists!r}")
    return list(lists)


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return [FILES[k] for k in _lists(options, key)]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return parse_cds({k: files[FILES[k]] for k in _lists(options, key)})
