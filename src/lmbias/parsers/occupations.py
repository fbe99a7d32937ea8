"""Occupation-bias items of Lu et al. 2018 (section 3.1 and the Supplemental Material), generated, not downloaded.

Each language-modelling template ("He is a | [OCCUPATION]") is instantiated with every occupation of the
paper's list; the matched pair swaps the gendered words of the prefix with the paper's naive intervention
("He is a" -> "She is a", "The man is a" -> "The woman is a"), and the article "a" becomes "an" before a
vowel-initial occupation (footnote 3). As in the paper, multi-word occupations are left out for language
models (option ``multi_word: true`` keeps them, e.g. for masked models). The list prints "attorney" twice;
the repeat is dropped. One row per (template, occupation):

    item_id, template_id, template, occupation, article, male_prefix, female_prefix, multi_word

The templates and the occupation list live in resources/templates/lu2018_occupations.yaml (transcribed from
the paper, with a header citing it); that file is an input of the parse job, so editing it re-parses.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import line_of, load_yaml_mapping, table

GENERATED = True
RESOURCE_FILES = ["resources/templates/lu2018_occupations.yaml"]
TEMPLATE_FILE = Path(__file__).resolve().parents[3] / RESOURCE_FILES[0]

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "occupations"
SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),  # "t{template_id}-{occupation with spaces as _}"
        ("template_id", pa.int32()),  # 0-based position in the template list
        ("template", pa.string()),  # as written in the resource file (male form)
        ("occupation", pa.string()),
        ("article", pa.string()),  # "a" or "an" (what the prefix ends with), "" if the prefix has no article
        ("male_prefix", pa.string()),  # e.g. "He is an"
        ("female_prefix", pa.string()),  # e.g. "She is an"
        ("multi_word", pa.bool_()),
    ]
)

OPTIONS = ("multi_word",)
PLACEHOLDER = "[OCCUPATION]"
_TEMPLATE = re.compile(r"^(?P<prefix>\S.*?) \| \[OCCUPATION\]$")


def load_templates(path: str | os.PathLike = TEMPLATE_FILE) -> dict:
    """The resource file, checked: {templates: [str], intervention: {male: female}, occupations: [str]}."""
    text, data = load_yaml_mapping(path, {"templates", "intervention", "occupations"})
    templates, intervention, occupations = data["templates"], data["intervention"], data["occupations"]
    if not isinstance(templates, list) or not templates:
        raise DataError("templates: expected a non-empty list", path)
    if (
        not isinstance(intervention, dict)
        or not intervention
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in intervention.items())
    ):
        raise DataError("intervention: expected a mapping male word -> female word", path)
    if not isinstance(occupations, list) or not occupations:
        raise DataError("occupations: expected a non-empty list", path)
    for t in templates:
        if not isinstance(t, str) or not _TEMPLATE.match(t):
            raise DataError(f"template {t!r} is not '<prefix> | {PLACEHOLDER}'", path, line_of(text, str(t)))
        words = _TEMPLATE.match(t)["prefix"].split()
        if not any(w in intervention for w in words):
            raise DataError(f"template {t!r} has no gendered word of the intervention", path, line_of(text, t))
    for o in occupations:
        if not isinstance(o, str) or not re.fullmatch(r"[a-z][a-z' \-]*[a-z]", o):
            raise DataError(f"occupation {o!r}: expected lower-case words", path, line_of(text, f"- {o}"))
    return data


def article_for(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _prefix(template_prefix: str, occupation: str) -> tuple[str, str]:
    words = template_prefix.split()
    article = ""
    if words[-1].lower() in ("a", "an"):
        article = article_for(occupation)
        words[-1] = article
    return " ".join(words), article


def generate_occupation_items(path: str | os.PathLike = TEMPLATE_FILE, multi_word: bool = False) -> pa.Table:
    """Every (template, occupation) item of the resource file; see the module docstring."""
    data = load_templates(path)
    swap = data["intervention"]
    seen: set[str] = set()
    occupations = []
    for o in data["occupations"]:
        if o not in seen:
            seen.add(o)
            occupations.append(o)
    rows = []
    for tid, template in enumerate(data["templates"]):
        prefix = _TEMPLATE.match(template)["prefix"]
        for occ in occupations:
            multi = " " in occ
            if multi and not multi_word:
                continue
            male, article = _prefix(prefix, occ)
            female = " ".join(swap.get(w, w) for w in male.split())
            rows.append(
                {
                    "item_id": f"t{tid}-{occ.replace(' ', '_')}",
                    "template_id": tid,
                    "template": template,
                    "occupation": occ,
                    "article": article,
                    "male_prefix": male,
                    "female_prefix": female,
                    "multi_word": multi,
                }
            )
    return table(rows, SCHEMA)


# -- registry interface (see lmbias.parsers) -------------------------------------------------


def _options(options: Mapping, key: str) -> bool:
    unknown = sorted(set(options) - set(OPTIONS) - {"dataset"})
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (allowed: dataset, {', '.join(OPTIONS)})")
    multi = options.get("multi_word", False)
    if not isinstance(multi, bool):
        raise ConfigError(f"{key}.multi_word: expected true or false, got {multi!r}")
    return multi


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    _options(options, key)
    return []


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return generate_occupation_items(TEMPLATE_FILE, multi_word=_options(options, key))


__all__ = ["SCHEMA", "GENERATED", "RESOURCE_FILES", "generate_occupation_items", "load_templates"]
