"""Winogenerated (Perez et al. 2022, "Discovering Language Model Behaviors with Model-Written Evaluations"): 2,990
WinoGender-style sentences written by a model and filtered by people, 10 for each of 299 occupations.

One row per line of winogenerated_examples.jsonl: the sentence with one blank (`_`) for a pronoun that refers to the
occupation, its three pronoun options in the file's order (male, female, neutral: he/she/they, his/her/their,
him/her/them), the other person of the sentence, and the occupation's share of women in the US Bureau of Labor
Statistics' 2019 tables (`BLS_percent_women_2019`, with the BLS title it was taken from). Every occupation must be
one of winogenerated_occupations.jsonl's 299, with the same share: the two files are checked against each other.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import iter_json_objects, table

EXAMPLES = "winogenerated_examples.jsonl"
OCCUPATIONS = "winogenerated_occupations.jsonl"
FILES = (EXAMPLES, OCCUPATIONS)
#: The order of `pronoun_options` in the released file.
GENDERS = ("male", "female", "neutral")
BLANK = "_"

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "winogenerated"
SCHEMA = pa.schema(
    [
        ("index", pa.int32()),  # the file's `index`
        ("occupation", pa.string()),
        ("other_person", pa.string()),
        ("sentence", pa.string()),  # with one `_` where the pronoun goes
        ("blank", pa.int32()),  # character offset of the `_`
        ("male", pa.string()),  # the pronoun options, as released
        ("female", pa.string()),
        ("neutral", pa.string()),
        ("bls_pct_female", pa.float64()),  # BLS_percent_women_2019
        ("bls_occupation", pa.string()),  # BLS_original_occupation
    ]
)
OPTIONS: tuple[str, ...] = ()


def _share(value, path, line: int) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"BLS_percent_women_2019 must be a number, got {value!r}", path, line)
    if not 0 <= value <= 100:
        raise DataError(f"BLS_percent_women_2019 must be a percentage (0 to 100), got {value!r}", path, line)
    return float(value)


def _text(record: dict, key: str, path, line: int) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{key} must be a non-empty string, got {value!r}", path, line)
    return value


def read_occupations(path) -> dict[str, float]:
    """{occupation: BLS share of women} of winogenerated_occupations.jsonl."""
    shares: dict[str, float] = {}
    for line, record in iter_json_objects(path):
        occupation = _text(record, "occupation", path, line)
        if occupation in shares:
            raise DataError(f"occupation {occupation!r} is listed twice", path, line)
        shares[occupation] = _share(record.get("BLS_percent_women_2019"), path, line)
    return shares


def parse_winogenerated(examples_path, occupations_path, max_occupations: int | None = None) -> pa.Table:
    """The sentences of winogenerated_examples.jsonl, checked against the occupations file (module docstring).
    `max_occupations`: only the sentences of the first N occupations of the occupations file (a stand-in of known
    size for slow machines: 10 sentences each); every line is still checked."""
    shares = read_occupations(occupations_path)
    kept = set(list(shares)[:max_occupations]) if max_occupations is not None else set(shares)
    rows, seen = [], set()
    for line, record in iter_json_objects(examples_path):
        index = record.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index in seen:
            raise DataError(f"index must be an integer not used before, got {index!r}", examples_path, line)
        seen.add(index)
        occupation = _text(record, "occupation", examples_path, line)
        sentence = _text(record, "sentence_with_blank", examples_path, line)
        if sentence.count(BLANK) != 1:
            raise DataError(
                f"sentence_with_blank must hold one {BLANK!r} for the pronoun, found {sentence.count(BLANK)}: "
                f"{sentence!r}",
                examples_path,
                line,
            )
        options = record.get("pronoun_options")
        if not (isinstance(options, list) and len(options) == 3 and all(isinstance(o, str) and o for o in options)):
            raise DataError(
                f"pronoun_options must be three pronouns (male, female, neutral), got {options!r}", examples_path, line
            )
        share = _share(record.get("BLS_percent_women_2019"), examples_path, line)
        if occupation not in shares:
            raise DataError(f"occupation {occupation!r} is not in {OCCUPATIONS}", examples_path, line)
        if shares[occupation] != share:
            raise DataError(
                f"occupation {occupation!r}: BLS_percent_women_2019 {share} here, "
                f"{shares[occupation]} in {OCCUPATIONS}",
                examples_path,
                line,
            )
        if occupation not in kept:
            continue
        rows.append(
            {
                "index": index,
                "occupation": occupation,
                "other_person": _text(record, "other_person", examples_path, line),
                "sentence": sentence,
                "blank": sentence.index(BLANK),
                **dict(zip(GENDERS, options)),
                "bls_pct_female": share,
                "bls_occupation": _text(record, "BLS_original_occupation", examples_path, line),
            }
        )
    if not rows:
        raise DataError("no sentences", examples_path)
    return table(rows, SCHEMA)


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return list(FILES)


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    limit = options.get("max_occupations")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"{key}.max_occupations: {limit!r} is not a positive integer (the first N occupations)")
    return parse_winogenerated(files[EXAMPLES], files[OCCUPATIONS], limit)
