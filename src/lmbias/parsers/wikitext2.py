"""WikiText-2 raw (Merity et al. 2016), the Hugging Face parquet of one split: one row per line, column `text`.

unit: stream (default) joins every row, blank ones included, with "\\n\\n" into one text, exactly as
bias-bench's experiments/perplexity.py does (`"\\n\\n".join(test["text"])`); unit: line keeps each
non-blank row (a paragraph or a " = Heading = " line) as its own text, so the metric's interval can
resample texts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import table

SPLITS = ("test",)
UNITS = ("stream", "line")
OPTIONS = ("split", "unit")
#: Keys of a benchmark entry that are not the parser's.
OTHER_KEYS = ("dataset", "measure", "scoring", "metric")

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "wikitext2"
SCHEMA = pa.schema(
    [
        ("text_id", pa.int32()),
        ("text", pa.string()),
        ("source", pa.string()),  # wikitext2-<split>
    ]
)


def wikitext_file(split: str) -> str:
    return f"wikitext-2-raw-v1-{split}.parquet"


def parse_wikitext2(path: str | os.PathLike, split: str = "test", unit: str = "stream") -> pa.Table:
    import pyarrow.parquet as pq

    try:
        raw = pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise DataError(f"not a readable parquet file: {err}", path) from None
    if "text" not in raw.column_names:
        raise DataError(f"no `text` column (columns: {raw.column_names})", path)
    lines = [t if t is not None else "" for t in raw.column("text").to_pylist()]
    texts = ["\n\n".join(lines)] if unit == "stream" else [t for t in lines if t.strip()]
    if not any(t.strip() for t in texts):
        raise DataError("no text", path)
    return table([{"text_id": i, "text": t, "source": f"wikitext2-{split}"} for i, t in enumerate(texts)], SCHEMA)


def _options(options: Mapping, key: str) -> tuple[str, str]:
    unknown = sorted(set(options) - set(OPTIONS) - set(OTHER_KEYS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown option for dataset wikitext2 (known: {', '.join(OPTIONS)})")
    split, unit = options.get("split", "test"), options.get("unit", "stream")
    if split not in SPLITS:
        raise ConfigError(f"{key}.split: {split!r} is not one of {', '.join(SPLITS)}")
    if unit not in UNITS:
        raise ConfigError(f"{key}.unit: {unit!r} is not one of {', '.join(UNITS)}")
    return split, unit


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return [wikitext_file(_options(options, key)[0])]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    split, unit = _options(options, key)
    return parse_wikitext2(files[wikitext_file(split)], split=split, unit=unit)
