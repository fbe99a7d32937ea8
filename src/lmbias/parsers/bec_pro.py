"""BEC-Pro (Bartl et al. 2020), English and German: one row per sentence.

German rows carry `Profession_EN`, the English profession they translate; for English rows
`profession_en` repeats `profession`, so both languages share one schema.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import check_choice, parse_int, read_delimited, table

FILES = {"en": "BEC-Pro_EN.tsv", "de": "BEC-Pro_DE.tsv"}
_COLUMNS = [
    "",
    "Sentence",
    "Sent_TM",
    "Sent_AM",
    "Sent_TAM",
    "Template",
    "Person",
    "Gender",
    "Profession",
    "Prof_Gender",
]
HEADERS = {"en": _COLUMNS, "de": _COLUMNS + ["Profession_EN"]}
MASK = "[MASK]"

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "bec_pro"
SCHEMA = pa.schema(
    [
        ("row_id", pa.int32()),
        ("language", pa.string()),  # en | de
        ("sentence", pa.string()),
        ("sent_tm", pa.string()),  # target (person word) masked
        ("sent_am", pa.string()),  # attribute (profession) masked, one [MASK] per word
        ("sent_tam", pa.string()),  # both masked
        ("template", pa.string()),
        ("person", pa.string()),
        ("gender", pa.string()),  # male | female
        ("profession", pa.string()),
        ("prof_gender", pa.string()),  # male | female | balanced
        ("profession_en", pa.string()),
    ]
)


def parse_bec_pro(path: str | os.PathLike, language: str) -> pa.Table:
    if language not in FILES:
        raise ConfigError(f"bec_pro.language must be one of {list(FILES)}, got {language!r}")
    rows = []
    for line, fields in read_delimited(path, delimiter="\t", header=HEADERS[language], quoting=csv.QUOTE_NONE):
        index, sentence, tm, am, tam, template, person, gender, profession, prof_gender = fields[:10]
        check_choice(gender, {"male", "female"}, "Gender", path, line)
        check_choice(prof_gender, {"male", "female", "balanced"}, "Prof_Gender", path, line)
        for name, text in (("Sent_TM", tm), ("Sent_AM", am), ("Sent_TAM", tam)):
            if MASK not in text:
                raise DataError(f"{name} has no {MASK}: {text!r}", path, line)
        if not sentence.strip() or not person.strip() or not profession.strip():
            raise DataError("empty Sentence, Person or Profession", path, line)
        rows.append(
            {
                "row_id": parse_int(index, "row index", path, line),
                "language": language,
                "sentence": sentence,
                "sent_tm": tm,
                "sent_am": am,
                "sent_tam": tam,
                "template": template,
                "person": person,
                "gender": gender,
                "profession": profession,
                "prof_gender": prof_gender,
                "profession_en": fields[10] if language == "de" else profession,
            }
        )
    return table(rows, SCHEMA)


OPTIONS = ("language",)


def _language(options: Mapping, key: str) -> str:
    language = options.get("language", "en")
    if language not in FILES:
        raise ConfigError(f"{key}.language must be one of {list(FILES)}, got {language!r}")
    return language


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return [FILES[_language(options, key)]]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    language = _language(options, key)
    return parse_bec_pro(files[FILES[language]], language)
