"""Shared helpers for the dataset parsers: strict decoding and errors that name file and line.

Every parser reads the whole file as bytes first, so a non-UTF-8 byte, an empty file or a
truncated JSON document is reported with the line it sits on instead of a bare traceback.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from lmbias.errors import DataError
from lmbias.io import load_yaml

MASK = "[MASK]"  # the generated datasets' mask; scorers swap in each tokenizer's own

SPAN = pa.struct([("start", pa.int32()), ("end", pa.int32()), ("text", pa.string())])


def read_text(path: str | os.PathLike) -> str:
    """The file decoded as strict UTF-8 (a leading BOM is dropped); empty -> DataError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError("file not found", path) from None
    if not data.strip():
        raise DataError("file is empty", path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise DataError(f"not valid UTF-8: byte 0x{data[err.start]:02x} at offset {err.start}", path, line) from None
    return text.removeprefix("\ufeff")


def read_json(path: str | os.PathLike):
    """Parse a whole-file JSON document; truncated or malformed JSON names the line."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON: {err.msg} (column {err.colno})", path, err.lineno) from None


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line ending) for every physical line.

    Blank lines at the end of the file are dropped; blank lines elsewhere reach the parser.
    """
    text = read_text(path)
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()  # the final newline (and trailing blank lines) do not start another line
    for number, line in enumerate(lines, start=1):
        yield number, line.removesuffix("\r")


def iter_json_objects(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """(line, object) of every line of a JSON-lines file; a line that is not a JSON object is a DataError naming
    it."""
    for line, text in iter_lines(path):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"invalid JSON: {err.msg} (column {err.colno})", path, line) from None
        if not isinstance(value, dict):
            raise DataError(f"expected a JSON object, got {type(value).__name__}", path, line)
        yield line, value


def iter_csv_rows(
    path: str | os.PathLike, *, delimiter: str = ",", quoting: int = csv.QUOTE_MINIMAL, what: str = "delimited"
) -> Iterator[tuple[int, list[str]]]:
    """(first physical line of the row, fields) of every row of a delimited file, the header included (quoted
    fields may hold newlines); a bad quote raises DataError naming the row's first line ("malformed <what> row")."""
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting, strict=True)
    previous_end = 0
    while True:
        start = previous_end + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise DataError(f"malformed {what} row: {err}", path, start) from None
        previous_end = reader.line_num
        yield start, row


def read_delimited(
    path: str | os.PathLike,
    *,
    delimiter: str,
    header: list[str],
    quoting: int = csv.QUOTE_MINIMAL,
) -> Iterator[tuple[int, list[str]]]:
    """Rows of a delimited file after checking its header: (first physical line of the row, fields).

    Uses the csv module (quoted fields may hold newlines); a row with the wrong number of
    fields, a bad quote or a header that differs from `header` raises DataError.
    """
    first = True
    for start, row in iter_csv_rows(path, delimiter=delimiter, quoting=quoting):
        if first:
            first = False
            if row != header:
                raise DataError(f"unexpected header {row!r}; expected {header!r}", path, start)
            continue
        if not row:
            raise DataError("blank line", path, start)
        if len(row) != len(header):
            raise DataError(f"expected {len(header)} fields, found {len(row)}", path, start)
        yield start, row
    if first:
        raise DataError("file is empty", path)


def parse_int(value: str, what: str, path, line: int) -> int:
    try:
        return int(value)
    except ValueError:
        raise DataError(f"{what} must be an integer, got {value!r}", path, line) from None


def check_choice(value: str, allowed, what: str, path, line: int) -> str:
    if value not in allowed:
        raise DataError(f"{what} must be one of {sorted(allowed)}, got {value!r}", path, line)
    return value


def table(records: list[dict], schema: pa.Schema) -> pa.Table:
    """A table with exactly `schema` (no inference: an empty list still gives typed columns)."""
    return pa.Table.from_pylist(records, schema=schema)


def line_of(text: str, needle: str) -> int | None:
    """1-based line of the first occurrence of `needle` in `text` (for errors naming a line), or None."""
    at = text.find(needle)
    return None if at < 0 else text.count("\n", 0, at) + 1


def load_yaml_mapping(path: str | os.PathLike, keys: set[str]) -> tuple[str, dict]:
    """(text, data) of a project-authored YAML resource whose top level must have exactly `keys`."""
    import yaml

    text = read_text(path)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise DataError(f"invalid YAML: {err}", path, mark.line + 1 if mark else None) from None
    if not isinstance(data, dict) or set(data) != set(keys):
        raise DataError(f"expected exactly the keys {', '.join(sorted(keys))}", path, 1)
    return text, data


def join_pieces(pieces, target_text: str, attr_text: str) -> tuple[str, dict]:
    """Fill a template split into (role, text) pieces (role "target", "attr" or "lit") and return the
    sentence with the character span of each filled slot: the TM/TAM builders of DA-Gender and logprob."""
    out, offsets, length = [], {}, 0
    for role, text in pieces:
        s = target_text if role == "target" else attr_text if role == "attr" else text
        if role != "lit":
            offsets[role] = (length, length + len(s))
        out.append(s)
        length += len(s)
    return "".join(out), offsets


def tm_tam_texts(pieces, attr: str) -> dict:
    """A template's pieces (the first capitalised here) -> the sentence, Sent_TM (target masked) and
    Sent_TAM (target masked and one mask per word of the attribute), with the slots' character offsets."""
    role, first = pieces[0]
    pieces = [(role, first[:1].upper() + first[1:])] + list(pieces[1:])
    written = next(t for r, t in pieces if r == "target")
    sentence, _ = join_pieces(pieces, written, attr)
    tm, offsets = join_pieces(pieces, MASK, attr)
    tam, _ = join_pieces(pieces, MASK, " ".join([MASK] * len(attr.split())))
    return {
        "sentence": sentence,
        "word": written,
        "tm_sent": tm,
        "tam_sent": tam,
        "target_start": offsets["target"][0],
        "attr_start": offsets["attr"][0],
        "attr_end": offsets["attr"][1],
    }
