"""GAP coreference (Webster et al. 2018): three tab-separated splits, no quoting, 11 columns.

Offsets are character offsets into Text; they are checked against the quoted names.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import check_choice, parse_int, read_delimited, table

SPLITS = ("development", "validation", "test")
HEADER = ["ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref", "B", "B-offset", "B-coref", "URL"]

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "gap"
SCHEMA = pa.schema(
    [
        ("split", pa.string()),
        ("id", pa.string()),
        ("text", pa.string()),
        ("pronoun", pa.string()),
        ("pronoun_offset", pa.int32()),
        ("a", pa.string()),
        ("a_offset", pa.int32()),
        ("a_coref", pa.bool_()),
        ("b", pa.string()),
        ("b_offset", pa.int32()),
        ("b_coref", pa.bool_()),
        ("url", pa.string()),
    ]
)


def gap_file(split: str) -> str:
    return f"gap-{split}.tsv"


def _offset(text: str, mention: str, value: str, what: str, path, line: int) -> int:
    offset = parse_int(value, what, path, line)
    if text[offset : offset + len(mention)] != mention:
        raise DataError(f"{what} {offset} does not point at {mention!r} in Text", path, line)
    return offset


def parse_gap(paths: Mapping[str, str | os.PathLike]) -> pa.Table:
    """`paths` maps split name (development|validation|test) to its file; rows keep that order."""
    rows = []
    for split, path in paths.items():
        if split not in SPLITS:
            raise ConfigError(f"gap split must be one of {list(SPLITS)}, got {split!r}")
        for line, f in read_delimited(path, delimiter="\t", header=HEADER, quoting=csv.QUOTE_NONE):
            ident, text, pronoun, p_off, a, a_off, a_coref, b, b_off, b_coref, url = f
            if not ident or not text:
                raise DataError("empty ID or Text", path, line)
            rows.append(
                {
                    "split": split,
                    "id": ident,
                    "text": text,
                    "pronoun": pronoun,
                    "pronoun_offset": _offset(text, pronoun, p_off, "Pronoun-offset", path, line),
                    "a": a,
                    "a_offset": _offset(text, a, a_off, "A-offset", path, line),
                    "a_coref": check_choice(a_coref, {"TRUE", "FALSE"}, "A-coref", path, line) == "TRUE",
                    "b": b,
                    "b_offset": _offset(text, b, b_off, "B-offset", path, line),
                    "b_coref": check_choice(b_coref, {"TRUE", "FALSE"}, "B-coref", path, line) == "TRUE",
                    "url": url,
                }
            )
    return table(rows, SCHEMA)


OPTIONS = ("splits",)


def _splits(options: Mapping, key: str) -> list[str]:
    splits = options.get("splits", list(SPLITS))
    if isinstance(splits, str) or not splits or any(s not in SPLITS for s in splits):
        raise ConfigError(f"{key}.splits must be a non-empty list drawn from {list(SPLITS)}, got {splits!r}")
    return list(splits)


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return [gap_file(s) for s in _splits(options, key)]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return parse_gap({s: files[gap_file(s)] for s in _splits(options, key)})
