"""CrowS-Pairs (Nangia et al. 2020): one row per sentence pair.

Read with the csv module: one quoted field holds a newline, so physical lines != rows.
`annotations` and `anon_annotators` are Python-literal lists in the file; they are parsed
with ast.literal_eval (literals only, never code).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import check_choice, parse_int, read_delimited, table

FILE = "crows_pairs_anonymized.csv"
HEADER = [
    "",
    "sent_more",
    "sent_less",
    "stereo_antistereo",
    "bias_type",
    "annotations",
    "anon_writer",
    "anon_annotators",
]
BIAS_TYPES = (
    "race-color",
    "gender",
    "socioeconomic",
    "nationality",
    "religion",
    "age",
    "sexual-orientation",
    "physical-appearance",
    "disability",
)

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "crows_pairs"
SCHEMA = pa.schema(
    [
        ("row_id", pa.int32()),  # the unnamed first column
        ("sent_more", pa.string()),  # the more stereotypical sentence
        ("sent_less", pa.string()),
        ("stereo_antistereo", pa.string()),  # stereo | antistereo
        ("bias_type", pa.string()),
        ("annotations", pa.list_(pa.list_(pa.string()))),
        ("anon_writer", pa.string()),
        ("anon_annotators", pa.list_(pa.string())),
    ]
)


def _literal(value: str, what: str, depth: int, path, line: int):
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise DataError(f"{what} is not a list literal: {value!r}", path, line) from None
    ok = isinstance(parsed, list) and all(
        isinstance(x, str) if depth == 1 else isinstance(x, list) and all(isinstance(y, str) for y in x) for x in parsed
    )
    if not ok:
        raise DataError(
            f"{what} must be a list of {'strings' if depth == 1 else 'string lists'}: {value!r}", path, line
        )
    return parsed


def parse_crows_pairs(path: str | os.PathLike, bias_types: Sequence[str] | None = None) -> pa.Table:
    """All rows (or those of `bias_types`) of crows_pairs_anonymized.csv."""
    if bias_types is not None:
        unknown = sorted(set(bias_types) - set(BIAS_TYPES))
        if unknown:
            raise ConfigError(f"crows_pairs.bias_types: unknown {unknown}; known: {list(BIAS_TYPES)}")
    rows = []
    for line, fields in read_delimited(path, delimiter=",", header=HEADER):
        index, more, less, direction, bias, annotations, writer, annotators = fields
        check_choice(direction, {"stereo", "antistereo"}, "stereo_antistereo", path, line)
        check_choice(bias, set(BIAS_TYPES), "bias_type", path, line)
        if not more.strip() or not less.strip():
            raise DataError("empty sentence", path, line)
        row = {
            "row_id": parse_int(index, "row index", path, line),
            "sent_more": more,
            "sent_less": less,
            "stereo_antistereo": direction,
            "bias_type": bias,
            "annotations": _literal(annotations, "annotations", 2, path, line),
            "anon_writer": writer,
            "anon_annotators": _literal(annotators, "anon_annotators", 1, path, line),
        }
        if bias_types is None or bias in bias_types:
            rows.append(row)
    return table(rows, SCHEMA)


OPTIONS = ("bias_types",)


def _bias_types(options: Mapping, key: str):
    value = options.get("bias_types")
    if value is not None and (isinstance(value, str) or not all(v in BIAS_TYPES for v in value)):
        raise ConfigError(f"{key}.bias_types must be a list drawn from {list(BIAS_TYPES)}, got {value!r}")
    return value


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    _bias_types(options, key)
    return [FILE]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return parse_crows_pairs(files[FILE], bias_types=_bias_types(options, key))
