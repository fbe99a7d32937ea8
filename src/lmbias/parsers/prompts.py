"""A prompt file of your own (dataset `prompts`): one prompt per line (.txt), or JSON lines with a "prompt" field.

The counterfactual pairs measure (lmbias.benchmarks.counterfactual) reads it like BOLD's prompts: each prompt
and its gender-swapped twin are continued by the model. Formats, by the file's extension:

* ``.jsonl`` (or ``.json``): one JSON object per line with a non-empty string ``"prompt"``; an optional
  ``"group"`` (a string: a label of yours, e.g. the use case) is kept; other fields are ignored;
* anything else (``.txt``): one prompt per line, kept as written but for the line ending (leading and trailing
  spaces included: the model continues the text exactly as given).

A blank line, a line that is not JSON or not an object, a missing or empty "prompt" or a group that is not a
string is a DataError naming the file and the line; so is an empty file. Blank lines at the end of the file
are ignored. Rows keep the file's order; `prompt_id` is the position, `line` the line number.

Which file: `data.prompts.files` names it (a local-only file: ``upstream: null`` with its sha256, read from
``data.prompts.path`` or ``data_dir``/prompts/); with several configured, the benchmark entry's ``file`` chooses
one (docs/benchmarks/counterfactual-pairs.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import iter_lines, table

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "prompts"
OPTIONS = ("file",)
#: Keys of a benchmark entry that are not the parser's.
OTHER_KEYS = ("dataset", "measure", "scoring", "metric", "reading")
JSON_SUFFIXES = (".jsonl", ".json")

SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),  # position in the file
        ("line", pa.int32()),  # 1-based line number
        ("group", pa.string()),  # the JSON line's "group" (null: none, and always for a text file)
        ("prompt", pa.string()),
    ]
)


def parse_prompts(path: str | os.PathLike) -> pa.Table:
    """The prompts of a .txt (one per line) or .jsonl ("prompt" field) file; malformed input is a DataError
    naming the file and line."""
    is_json = str(path).lower().endswith(JSON_SUFFIXES)
    rows = []
    for line, text in iter_lines(path):
        if not text.strip():
            raise DataError("blank line: every line must hold a prompt", path, line)
        group = None
        if is_json:
            record = _json_object(text, path, line)
            prompt = record.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                raise DataError(f'expected a non-empty string "prompt", got {prompt!r}', path, line)
            group = record.get("group")
            if group is not None and not isinstance(group, str):
                raise DataError(f'"group" must be a string, got {group!r}', path, line)
        else:
            prompt = text
        rows.append({"prompt_id": len(rows), "line": line, "group": group, "prompt": prompt})
    if not rows:
        raise DataError("no prompts", path)
    return table(rows, SCHEMA)


def _json_object(text: str, path, line: int) -> dict:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON: {err.msg} (column {err.colno})", path, line) from None
    if not isinstance(value, dict):
        raise DataError(f'expected a JSON object with a "prompt", got {type(value).__name__}', path, line)
    return value


def _chosen_file(options: Mapping, available: Sequence[str], key: str) -> str:
    unknown = sorted(set(options) - set(OPTIONS) - set(OTHER_KEYS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown option for dataset prompts (known: {', '.join(OPTIONS)})")
    file = options.get("file")
    if file is not None:
        if file not in available:
            raise ConfigError(f"{key}.file: {file!r} is not a file of data.prompts.files ({', '.join(available)})")
        return file
    if len(available) != 1:
        raise ConfigError(
            f"{key}.file: data.prompts.files holds {len(available)} files ({', '.join(available)}); "
            "name the one to read"
        )
    return available[0]


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return [_chosen_file(options, available, key)]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    (path,) = files.values()
    return parse_prompts(path)
