"""BBQ items in the released file's format (data/<Category>.jsonl of nyu-mll/BBQ): `write_jsonl` writes a parsed
table (lmbias.parsers.bbq) so that other tools (lm-evaluation-harness, HELM, `datasets`) read it; `read_jsonl` reads
such a file, ours or the authors' released one, back into the parsed table with lmbias's own columns recomputed.

write_jsonl writes the released file's fields in its key order, question_index as a string as the released file
has it (the generator's numpy integer went through json's `default=str`); read_jsonl's docstring says how it
recomputes `template`, `label_type`, `target_loc` and the Race_x_gender `comparison`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from lmbias.errors import DataError
from lmbias.io import write_text_atomic
from lmbias.parsers import bbq_intersectional
from lmbias.parsers.bbq import METADATA_KEYS, RELEASED_FIELDS, SCHEMA, biased_answers, target_loc
from lmbias.parsers.bbq_templates import UNKNOWN_ANSWERS
from lmbias.parsers.common import iter_json_objects, table


def released_record(row: Mapping) -> dict:
    """One item as the released file writes it: its fields in its key order, question_index a string."""
    record = {field: row[field] for field in RELEASED_FIELDS}
    record["question_index"] = str(row["question_index"])
    record["answer_info"] = {f"ans{k}": list(row["answer_info"][f"ans{k}"]) for k in range(3)}
    record["additional_metadata"] = {k: row["additional_metadata"][k] for k in METADATA_KEYS}
    return record


def write_jsonl(items: pa.Table, path: str | os.PathLike) -> Path:
    """The items as the released jsonl (released_record, one JSON object a line), written to a temp file in the
    same folder and renamed: a failed write leaves no partial file."""
    lines = [json.dumps(released_record(row)) + "\n" for row in items.to_pylist()]
    return write_text_atomic(path, "".join(lines))


def _field(record: dict, name: str, kind, path, line: int):
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise DataError(f"{name} must be {getattr(kind, '__name__', kind)}, got {value!r}", path, line)
    return value


def _released_row(record: dict, path, line: int) -> dict:
    """A released-format record checked, with question_index an integer and the four metadata keys kept."""
    index = record.get("question_index")
    if isinstance(index, str) and re.fullmatch(r"-?\d+", index.strip()):
        index = int(index)
    if isinstance(index, bool) or not isinstance(index, int):
        raise DataError(f"question_index must be an integer (or its string), got {index!r}", path, line)
    row = {"example_id": _field(record, "example_id", int, path, line), "question_index": index}
    for name, allowed in (("question_polarity", ("neg", "nonneg")), ("context_condition", ("ambig", "disambig"))):
        if record.get(name) not in allowed:
            raise DataError(f"{name} must be one of {list(allowed)}, got {record.get(name)!r}", path, line)
        row[name] = record[name]
    info = record.get("answer_info")
    if not isinstance(info, dict) or not all(
        isinstance(info.get(f"ans{k}"), list)
        and len(info[f"ans{k}"]) == 2
        and all(isinstance(v, str) for v in info[f"ans{k}"])
        for k in range(3)
    ):
        raise DataError(f"answer_info must map ans0, ans1, ans2 to [text, info], got {info!r}", path, line)
    meta = record.get("additional_metadata")
    groups = meta.get("stereotyped_groups") if isinstance(meta, dict) else None
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise DataError("additional_metadata.stereotyped_groups must be a list of strings", path, line)
    row["category"] = _field(record, "category", str, path, line)
    row["answer_info"] = {f"ans{k}": list(info[f"ans{k}"]) for k in range(3)}
    row["additional_metadata"] = {k: str(meta.get(k, "None")) for k in METADATA_KEYS if k != "stereotyped_groups"}
    row["additional_metadata"]["stereotyped_groups"] = groups
    for name in ("context", "question", "ans0", "ans1", "ans2"):
        row[name] = _field(record, name, str, path, line)
    label = _field(record, "label", int, path, line)
    if label not in (0, 1, 2):
        raise DataError(f"label must be 0, 1 or 2, got {label}", path, line)
    row["label"] = label
    return row


def _unknown_loc(row: dict, path, line: int) -> int:
    """The answer whose info is "unknown" (else the one whose text is an unknown string): exactly one."""
    for found in (
        [k for k in range(3) if row["answer_info"][f"ans{k}"][1] == "unknown"],
        [k for k in range(3) if row[f"ans{k}"] in UNKNOWN_ANSWERS],
    ):
        if len(found) == 1:
            return found[0]
    raise DataError("no single answer is the unknown one", path, line)


def _info_gender(info: str) -> str:
    """The gender an answer_info names: an intersectional info's first part ("F-Black"), else the last "_" part."""
    person = bbq_intersectional.person_of(info)
    return person[0] if person else info.split("_")[-1]


def _label_type(row: dict, unknown_loc: int) -> str:
    """ "name" when both people are bare proper names: the answer is answer_info's text and the info's gender is F
    or M (nonTrans_F, F-Black); otherwise "label" (answers such as "The man", "The female teacher", "The Black
    woman")."""
    for k in range(3):
        text, info = row["answer_info"][f"ans{k}"]
        if k != unknown_loc and not (row[f"ans{k}"] == text and _info_gender(info) in ("F", "M")):
            return "label"
    return "name"


def _intersectional_columns(rows: list[dict]) -> None:
    """target_loc and comparison of the Race_x_gender rows of a read file (lmbias.parsers.bbq_intersectional): the
    comparison from the subcategory the generator writes, else from the two people's infos; the stereotyped gender,
    which no released field holds, per template (question_index, version) from its pairs
    (bbq_intersectional.stereotyped_gender)."""
    by_template: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["category"] == bbq_intersectional.CATEGORY:
            by_template.setdefault((row["question_index"], row["additional_metadata"]["version"]), []).append(row)
    for group in by_template.values():
        var2 = bbq_intersectional.stereotyped_gender(group)
        for row in group:
            meta = row["additional_metadata"]
            row["target_loc"] = bbq_intersectional.intersectional_target_loc(
                row["answer_info"], meta["stereotyped_groups"], var2, row["question_polarity"], row["unknown_loc"]
            )
            named = bbq_intersectional.COMPARISONS.get(meta["subcategory"])
            row["comparison"] = named or bbq_intersectional.comparison_of(row["answer_info"], row["unknown_loc"])


def read_jsonl(path: str | os.PathLike) -> pa.Table:
    """Items of a released-format BBQ jsonl (write_jsonl's or the authors' released file; other keys of
    additional_metadata are dropped) with lmbias's columns recomputed: unknown_loc, target_loc, label_type
    (_label_type) and comparison from answer_info (Race_x_gender rows: _intersectional_columns), and `template`
    numbered in order of first appearance, category by category (in the order the file first names them), by
    example_id within a category, of (question_index, version, subcategory, label_type, the negative answer's
    template info); Race_x_gender rows by (question_index, version, label_type), since their subcategory is the
    pair's comparison. The negative answer's info tells apart rows that share Q_id and version (Q_id 7's two rows:
    the male or the female teacher is the negative answer): it is the info of the negative/disambiguated item's
    right answer, taken for the four items of its pair (example_id // 4, the generator's numbering), and only where
    the info is not the filler itself (labels with a NAMEk_info column). So `template` is the build's for a complete
    file in the generator's numbering (write_jsonl of a parse of several subsets included); in a file without the
    neg/disambig items, rows sharing Q_id and version share a number."""
    rows = []
    for line, record in iter_json_objects(path):
        row = _released_row(record, path, line)
        row["unknown_loc"] = _unknown_loc(row, path, line)
        groups, polarity = row["additional_metadata"]["stereotyped_groups"], row["question_polarity"]
        row["target_loc"] = target_loc(row["answer_info"], groups, polarity, row["unknown_loc"])
        row["biased_locs"] = biased_answers(row["answer_info"], groups, polarity, row["unknown_loc"])
        row["label_type"] = _label_type(row, row["unknown_loc"])
        row["comparison"] = None
        rows.append(row)
    if not rows:
        raise DataError("no items", path)
    _intersectional_columns(rows)
    categories = {c: n for n, c in enumerate(dict.fromkeys(row["category"] for row in rows))}
    negative_info = {}
    for row in rows:
        if (row["question_polarity"], row["context_condition"]) == ("neg", "disambig") and row["label_type"] == "label":
            text, info = row["answer_info"][f"ans{row['label']}"]
            negative_info[row["category"], row["example_id"] // 4] = "" if info == text else info
    numbers: dict[tuple, int] = {}
    for row in sorted(rows, key=lambda r: (categories[r["category"]], r["example_id"])):
        meta = row["additional_metadata"]
        if row["category"] == bbq_intersectional.CATEGORY:
            key = (row["category"], row["question_index"], meta["version"], row["label_type"])
        else:
            key = (
                row["category"],
                row["question_index"],
                meta["version"],
                meta["subcategory"],
                row["label_type"],
                negative_info.get((row["category"], row["example_id"] // 4), ""),
            )
        row["template"] = numbers.setdefault(key, len(numbers))
    return table(rows, SCHEMA)
