"""StereoSet (Nadeem et al. 2020) dev.json: one row per candidate sentence.

Schema of the original file: {"version", "data": {"intrasentence": [example], "intersentence": [example]}},
example = {"id", "target", "bias_type", "context", "sentences": [{"id", "sentence", "labels":
[{"label", "human_id"}], "gold_label"}]}, with exactly one stereotype, one anti-stereotype and one
unrelated candidate per example. Intrasentence contexts hold the word BLANK; `template_word` is the
word that fills it, taken as the official StereoSet loader does (the sentence's word at BLANK's word
index, punctuation stripped), so scores stay comparable with published numbers.
"""

from __future__ import annotations

import os
import string
from typing import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers._common import read_json, table

FILE = "dev.json"
TASKS = ("intrasentence", "intersentence")
GOLD_LABELS = ("stereotype", "anti-stereotype", "unrelated")
BIAS_TYPES = ("gender", "profession", "race", "religion")
_PUNCTUATION = str.maketrans("", "", string.punctuation)

SCHEMA = pa.schema(
    [
        ("task", pa.string()),  # intrasentence | intersentence
        ("example_id", pa.string()),
        ("target", pa.string()),
        ("bias_type", pa.string()),
        ("context", pa.string()),
        ("sentence_id", pa.string()),
        ("sentence", pa.string()),
        ("gold_label", pa.string()),  # stereotype | anti-stereotype | unrelated
        ("template_word", pa.string()),  # intrasentence: the word at BLANK; intersentence: null
        ("labels", pa.list_(pa.struct([("label", pa.string()), ("human_id", pa.string())]))),
    ]
)


def _require(cond: bool, message: str, path) -> None:
    if not cond:
        raise DataError(message, path)


def _blank_index(context: str, where: str, path) -> int:
    words = context.split(" ")
    hits = [i for i, w in enumerate(words) if "BLANK" in w]
    _require(len(hits) == 1, f"{where}: intrasentence context must contain BLANK once: {context!r}", path)
    return hits[0]


def parse_stereoset(
    path: str | os.PathLike, tasks: Sequence[str] = ("intrasentence",), bias_types: Sequence[str] | None = None
) -> pa.Table:
    data = read_json(path)
    _require(isinstance(data, dict) and isinstance(data.get("data"), dict), "expected {'version', 'data': {...}}", path)
    rows = []
    for task in tasks:
        if task not in TASKS:
            raise ConfigError(f"stereoset task must be one of {list(TASKS)}, got {task!r}")
        examples = data["data"].get(task)
        _require(isinstance(examples, list), f"data.{task} must be a list", path)
        for n, ex in enumerate(examples):
            where = f"data.{task}[{n}]"
            _require(isinstance(ex, dict), f"{where} must be an object", path)
            for field in ("id", "target", "bias_type", "context"):
                _require(isinstance(ex.get(field), str), f"{where}.{field} must be a string", path)
            where = f"{where} (id {ex['id']})"
            sentences = ex.get("sentences")
            _require(isinstance(sentences, list), f"{where}.sentences must be a list", path)
            golds = sorted(str(s.get("gold_label")) for s in sentences if isinstance(s, dict))
            _require(
                len(golds) == len(sentences) and golds == sorted(GOLD_LABELS),
                f"{where}: expected one sentence per gold label {list(GOLD_LABELS)}, found {golds}",
                path,
            )
            blank = _blank_index(ex["context"], where, path) if task == "intrasentence" else None
            if bias_types is not None and ex["bias_type"] not in bias_types:
                continue
            for s in sentences:
                _require(
                    isinstance(s.get("id"), str) and isinstance(s.get("sentence"), str) and s["sentence"].strip(),
                    f"{where}: every sentence needs a string id and non-empty sentence",
                    path,
                )
                labels = s.get("labels", [])
                _require(
                    isinstance(labels, list)
                    and all(isinstance(x, dict) and isinstance(x.get("label"), str) for x in labels),
                    f"{where}: sentence {s['id']} labels must be a list of {{label, human_id}}",
                    path,
                )
                template_word = None
                if blank is not None:
                    words = s["sentence"].split(" ")
                    _require(
                        blank < len(words),
                        f"{where}: sentence {s['id']} has no word at BLANK's position {blank}",
                        path,
                    )
                    template_word = words[blank].translate(_PUNCTUATION)
                rows.append(
                    {
                        "task": task,
                        "example_id": ex["id"],
                        "target": ex["target"],
                        "bias_type": ex["bias_type"],
                        "context": ex["context"],
                        "sentence_id": s["id"],
                        "sentence": s["sentence"],
                        "gold_label": s["gold_label"],
                        "template_word": template_word,
                        "labels": [{"label": x["label"], "human_id": str(x.get("human_id", ""))} for x in labels],
                    }
                )
    return table(rows, SCHEMA)


OPTIONS = ("tasks", "bias_types")


def _options(options: Mapping, key: str) -> tuple[list[str], list[str] | None]:
    tasks = options.get("tasks", ["intrasentence"])
    if isinstance(tasks, str) or not tasks or any(t not in TASKS for t in tasks):
        raise ConfigError(f"{key}.tasks must be a non-empty list drawn from {list(TASKS)}, got {tasks!r}")
    bias_types = options.get("bias_types")
    if bias_types is not None and (isinstance(bias_types, str) or any(b not in BIAS_TYPES for b in bias_types)):
        raise ConfigError(f"{key}.bias_types must be a list drawn from {list(BIAS_TYPES)}, got {bias_types!r}")
    return list(tasks), bias_types


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    _options(options, key)
    return [FILE]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    tasks, bias_types = _options(options, key)
    return parse_stereoset(files[FILE], tasks=tasks, bias_types=bias_types)
