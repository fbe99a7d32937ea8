"""StereoSet (Nadeem et al. 2020): one row per candidate sentence, from upstream `dev.json` or its flat copy.

Two forms of the development set are read:

* `dev.json` (upstream, moinnadeem/StereoSet `data/dev.json`): {"version", "data": {"intrasentence":
  [example], "intersentence": [example]}}, example = {"id", "target", "bias_type", "context", "sentences":
  [{"id", "sentence", "labels": [{"label", "human_id"}], "gold_label"}]}. Its own ids are kept.
* the flat JSON-lines copy (`stereoset_dev_flat.jsonl`, a file name ending in `.jsonl`; see
  ../shared/data/stereoset/SOURCE.md): one example a line, {"type", "target", "bias_type", "context",
  "stereotype", "anti-stereotype", "unrelated"}, the candidate's gold label being its key. It has no ids and
  no annotator labels (`labels` is empty). Ids are derived from the content, so they are the same in every
  parse, whatever the line order or the `tasks`/`bias_types` filters:
  - `example_id` = "<type>-" + the first 16 hex digits of the sha256 of the UTF-8 JSON array
    [type, bias_type, target, context, stereotype, anti-stereotype, unrelated] (json.dumps, ensure_ascii
    off, default separators), e.g. "intrasentence-1f0c...". A whole example repeated in the file (none in
    the dev set's 4,229) gets "~2", "~3", ... after its second, third, ... copy: the copies are identical,
    so which copy is which cannot matter. Two different examples with the same id are refused.
  - `sentence_id` = "<example_id>/<gold_label>": a candidate sentence's text is not unique (71 of the dev
    set's candidate sentences repeat one in another example), but one example has one sentence per label.

Intrasentence contexts hold the word BLANK; `template_word` is the word that fills it, taken as the
official StereoSet loader does (moinnadeem/StereoSet code/dataloader.py, copied into bias-bench): the
candidate sentence's word at the word index of the context's LAST word containing BLANK (its loop
overwrites the index), punctuation stripped, so scores stay comparable with published numbers. Two dev
contexts hold BLANK twice ("brahmin is very BLANK and is strict about BLANK", "I know a performing artist
who is not BLANK and says BLANK."); their template word is the second one (the same word fills both).
"""

from __future__ import annotations

import hashlib
import json
import os
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import iter_lines, read_json, table

FILE = "dev.json"
#: The flat JSON-lines copy; read when `dev.json` is not at hand locally (lmbias.parsers.required_files).
FLAT_FILE = "stereoset_dev_flat.jsonl"
#: {required file: files that stand in for it when it is absent from the local data folder}
ALTERNATIVES = {FILE: (FLAT_FILE,)}
TASKS = ("intrasentence", "intersentence")
GOLD_LABELS = ("stereotype", "anti-stereotype", "unrelated")
BIAS_TYPES = ("gender", "profession", "race", "religion")
FLAT_KEYS = ("type", "target", "bias_type", "context") + GOLD_LABELS
_PUNCTUATION = str.maketrans("", "", string.punctuation)

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "stereoset"
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


def _require(cond: bool, message: str, path, line: int | None = None) -> None:
    if not cond:
        raise DataError(message, path, line)


def blank_word_index(context: str) -> int | None:
    """Word index (split on single spaces) of the context's last word containing BLANK, as the official
    loader takes it; None when there is none."""
    hits = [i for i, w in enumerate(context.split(" ")) if "BLANK" in w]
    return hits[-1] if hits else None


def _blank_index(context: str, where: str, path, line: int | None) -> int:
    blank = blank_word_index(context)
    _require(blank is not None, f"{where}: intrasentence context must contain BLANK: {context!r}", path, line)
    return blank


def flat_example_id(record: Mapping) -> str:
    """The content id of one flat example (see the module docstring), before any repeat suffix."""
    content = [record[k] for k in ("type", "bias_type", "target", "context") + GOLD_LABELS]
    digest = hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"{record['type']}-{digest[:16]}"


def _nested_examples(path, tasks: Sequence[str]):
    """(task, where, line, example) of upstream dev.json, in file order per task."""
    data = read_json(path)
    _require(isinstance(data, dict) and isinstance(data.get("data"), dict), "expected {'version', 'data': {...}}", path)
    for task in tasks:
        examples = data["data"].get(task)
        _require(isinstance(examples, list), f"data.{task} must be a list", path)
        for n, ex in enumerate(examples):
            where = f"data.{task}[{n}]"
            _require(isinstance(ex, dict), f"{where} must be an object", path)
            for field in ("id", "target", "bias_type", "context"):
                _require(isinstance(ex.get(field), str), f"{where}.{field} must be a string", path)
            yield task, f"{where} (id {ex['id']})", None, ex


def _flat_examples(path, tasks: Sequence[str]):
    """(task, where, line, example) of the flat JSON-lines copy, with content-derived ids."""
    records, seen = [], {}
    for number, line in iter_lines(path):
        _require(bool(line.strip()), "blank line", path, number)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"invalid JSON: {err.msg} (column {err.colno})", path, number) from None
        _require(isinstance(record, dict), "each line must be a JSON object", path, number)
        _require(
            set(record) == set(FLAT_KEYS),
            f"expected the keys {list(FLAT_KEYS)}, found {sorted(record)}",
            path,
            number,
        )
        bad = [k for k in FLAT_KEYS if not isinstance(record[k], str)]
        _require(not bad, f"{', '.join(bad)} must be strings", path, number)
        _require(record["type"] in TASKS, f"type must be one of {list(TASKS)}, got {record['type']!r}", path, number)
        base = flat_example_id(record)
        content = tuple(record[k] for k in FLAT_KEYS)
        first = seen.setdefault(base, (content, number))
        _require(
            first[0] == content,
            f"example id {base} is also that of the different example on line {first[1]}",
            path,
            number,
        )
        records.append((number, base, record))
    repeats = Counter()
    for number, base, record in records:
        repeats[base] += 1
        if record["type"] not in tasks:
            continue
        example_id = base if repeats[base] == 1 else f"{base}~{repeats[base]}"
        sentences = [
            {"id": f"{example_id}/{label}", "sentence": record[label], "gold_label": label, "labels": []}
            for label in GOLD_LABELS
        ]
        example = {
            "id": example_id,
            "target": record["target"],
            "bias_type": record["bias_type"],
            "context": record["context"],
            "sentences": sentences,
        }
        yield record["type"], f"example {example_id}", number, example


def is_flat(path: str | os.PathLike) -> bool:
    """The flat JSON-lines form is told by its file name (`.jsonl`); anything else is read as dev.json."""
    return Path(path).suffix == ".jsonl"


def parse_stereoset(
    path: str | os.PathLike, tasks: Sequence[str] = ("intrasentence",), bias_types: Sequence[str] | None = None
) -> pa.Table:
    for task in tasks:
        if task not in TASKS:
            raise ConfigError(f"stereoset task must be one of {list(TASKS)}, got {task!r}")
    # rows come out task by task (in `tasks` order), each task's examples in file order
    if is_flat(path):
        examples = sorted(_flat_examples(path, tasks), key=lambda e: list(tasks).index(e[0]))
    else:
        examples = _nested_examples(path, tasks)
    rows = []
    for task, where, line, ex in examples:
        sentences = ex.get("sentences")
        _require(isinstance(sentences, list), f"{where}.sentences must be a list", path, line)
        golds = sorted(str(s.get("gold_label")) for s in sentences if isinstance(s, dict))
        _require(
            len(golds) == len(sentences) and golds == sorted(GOLD_LABELS),
            f"{where}: expected one sentence per gold label {list(GOLD_LABELS)}, found {golds}",
            path,
            line,
        )
        # checked for every example (a malformed file is refused whatever the filters), then filtered
        blank = _blank_index(ex["context"], where, path, line) if task == "intrasentence" else None
        if bias_types is not None and ex["bias_type"] not in bias_types:
            continue
        for s in sentences:
            _require(
                isinstance(s.get("id"), str) and isinstance(s.get("sentence"), str) and s["sentence"].strip(),
                f"{where}: every sentence needs a string id and non-empty sentence",
                path,
                line,
            )
            labels = s.get("labels", [])
            _require(
                isinstance(labels, list)
                and all(isinstance(x, dict) and isinstance(x.get("label"), str) for x in labels),
                f"{where}: sentence {s['id']} labels must be a list of {{label, human_id}}",
                path,
                line,
            )
            template_word = None
            if blank is not None:
                words = s["sentence"].split(" ")
                _require(
                    blank < len(words),
                    f"{where}: sentence {s['id']} has no word at BLANK's position {blank}",
                    path,
                    line,
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
    """dev.json; lmbias.parsers.required_files reads the flat copy instead where only it is in the local
    data folder (ALTERNATIVES)."""
    _options(options, key)
    return [FILE]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    tasks, bias_types = _options(options, key)
    present = [f for f in (FILE, FLAT_FILE) if f in files]
    if len(present) != 1:
        raise ConfigError(f"{key}: StereoSet is read from exactly one of {FILE}, {FLAT_FILE}; got {sorted(files)}")
    return parse_stereoset(files[present[0]], tasks=tasks, bias_types=bias_types)
