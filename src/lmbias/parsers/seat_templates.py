"""SEAT-v1 and SEAT-v2 of the DA-Gender paper, generated from resources/templates/seat_templates.yaml.

A GENERATED dataset (no download): the paper's Table 2 target phrases (male = T1, female = T2) and
Table 10 professions (male-dominated = A1, female-dominated = A2) fill its templates. One row per
association asso(t, a) that the effect size averages, so both versions share one scorer:

* v1 (Table 5, May et al.): target sentences ("There is my mom.") and attribute sentences ("There is a
  nurse."); every target sentence is paired with every attribute sentence and the *target sentence* is
  the unit of the permutation test, as in SEAT and the authors' released SEAT-v1 code.
* v2 (Table 4, Kurita et al.'s variant): one template holds both words; the pair compared is the sentence
  with the attribute masked ("My mom is a [MASK].", one mask per word of the profession) and the same
  template's sentence with the target masked ("My [MASK] is a nurse."). As in the authors' code, only the
  gendered word of a two-word target is masked (the paper's Table 3 draws one mask for "my mom"), pairs
  never cross templates, and the *target phrase* is the unit: s(t) averages over professions and templates.

Choices where the paper and the released code leave room, made explicit: pronouns fill only templates
whose person is the subject ("He is here.", never "There is he.", as in the released v1 data); the article
follows the profession ("an electrician"; the released v1 file writes "a electrician"); sentence-initial
letters are upper-cased. Masks are the literal ``[MASK]``; the scorer swaps in the model's mask token (a
model without one, GPT-2, reads the literal text, as in the authors' GPT-2 code).

Options: ``version`` (v1 | v2, required), ``split`` (test | dev | all; default test: the paper reports the
80 % test split; dev = the italic validation terms of Tables 2 and 10).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import line_of, load_yaml_mapping, table

GENERATED = True
RESOURCE_FILES = ["resources/templates/seat_templates.yaml"]
TEMPLATES_PATH = Path(__file__).resolve().parents[3] / RESOURCE_FILES[0]

MASK = "[MASK]"
VERSIONS = ("v1", "v2")
SPLITS = ("test", "dev", "all")
OPTIONS = ("dataset", "version", "split")

TARGET_CATEGORIES = {"targ1": "MaleTargets", "targ2": "FemaleTargets"}
ATTRIBUTE_CATEGORIES = {"attr1": "MaleDominatedProfessions", "attr2": "FemaleDominatedProfessions"}

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "seat_templates"
SCHEMA = pa.schema(
    [
        ("test", pa.string()),  # subset name, e.g. "occupations-test"
        ("version", pa.string()),  # v1 | v2
        ("unit", pa.string()),  # what the permutation test permutes: target sentence (v1) or target phrase (v2)
        ("target_role", pa.string()),  # targ1 (male) | targ2 (female)
        ("target_category", pa.string()),
        ("target", pa.string()),  # the target phrase, e.g. "my mom"
        ("target_sentence", pa.string()),
        ("target_template", pa.int32()),  # 1-based row of Table 5 (v1) / Table 4 (v2)
        ("attribute_role", pa.string()),  # attr1 (male-dominated) | attr2 (female-dominated)
        ("attribute_category", pa.string()),
        ("attribute", pa.string()),  # the profession
        ("attribute_sentence", pa.string()),
        ("attribute_template", pa.int32()),
    ]
)


def _string_list(value, what: str, path, text: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise DataError(
            f"{what} must be a non-empty list of non-empty strings", path, line_of(text, what.split(".")[-1] + ":")
        )
    if len(set(value)) != len(value):
        dup = sorted({v for v in value if value.count(v) > 1})
        raise DataError(f"{what} repeats {dup}", path, line_of(text, dup[0]))
    return list(value)


def load_templates(path: str | os.PathLike = TEMPLATES_PATH) -> dict:
    """The template file, checked: targets/attributes {male, female, dev}, targets.pronouns, v1 and v2."""
    text, data = load_yaml_mapping(path, {"targets", "attributes", "v1", "v2"})
    out: dict = {}
    for kind in ("targets", "attributes"):
        entry = data[kind]
        if not isinstance(entry, dict):
            raise DataError(f"{kind} must be a mapping", path, line_of(text, f"{kind}:"))
        lists = {k: _string_list(entry.get(k), f"{kind}.{k}", path, text) for k in ("male", "female", "dev")}
        overlap = set(lists["male"]) & set(lists["female"])
        if overlap:
            raise DataError(
                f"{kind}: {sorted(overlap)} listed as both male and female", path, line_of(text, f"{kind}:")
            )
        stray = set(lists["dev"]) - set(lists["male"]) - set(lists["female"])
        if stray:
            raise DataError(
                f"{kind}.dev: {sorted(stray)} are neither male nor female {kind}", path, line_of(text, sorted(stray)[0])
            )
        out[kind] = lists
    out["pronouns"] = set(_string_list(data["targets"].get("pronouns"), "targets.pronouns", path, text))
    v1 = data["v1"]
    if (
        not isinstance(v1, list)
        or not v1
        or not all(isinstance(r, dict) and set(r) == {"target", "attribute"} for r in v1)
    ):
        raise DataError("v1 must be a list of {target, attribute} template pairs", path, line_of(text, "v1:"))
    v2 = data["v2"]
    if not isinstance(v2, list) or not v2 or not all(isinstance(t, str) for t in v2):
        raise DataError("v2 must be a list of template strings", path, line_of(text, "v2:"))
    for template in [r["target"] for r in v1] + [r["attribute"] for r in v1] + v2:
        line = line_of(text, template)
        try:
            template.format(person="x", profession="y", a="a")
        except (KeyError, IndexError, ValueError) as err:
            raise DataError(f"template {template!r}: unknown or malformed placeholder ({err})", path, line) from None
    for row in v1:
        if "{person}" not in row["target"] or "{profession}" not in row["attribute"]:
            raise DataError(
                f"v1 pair {row}: the target template needs {{person}}, the attribute template {{profession}}",
                path,
                line_of(text, row["target"]),
            )
    for template in v2:
        if "{person}" not in template or "{profession}" not in template:
            raise DataError(
                f"v2 template {template!r} needs {{person}} and {{profession}}", path, line_of(text, template)
            )
    out["v1"] = [dict(r) for r in v1]
    out["v2"] = list(v2)
    return out


def article(profession: str) -> str:
    return "an" if profession[:1].lower() in "aeiou" else "a"


def _sentence(template: str, person: str, profession: str | None, article_of: str | None) -> str:
    text = template.format(person=person, profession=profession or "", a=article(article_of or "x"))
    return text[:1].upper() + text[1:]


def _mask_target(phrase: str) -> str:
    """Mask the gendered word: 'my mom' -> 'my [MASK]', 'he' -> '[MASK]'."""
    words = phrase.split()
    return " ".join(words[:-1] + [MASK])


def _mask_attribute(profession: str) -> str:
    """One mask per word of the profession."""
    return " ".join([MASK] * len(profession.split()))


def _pick(lists: dict, split: str) -> dict[str, list[str]]:
    dev = set(lists["dev"])
    keep = {"test": lambda w: w not in dev, "dev": lambda w: w in dev, "all": lambda w: True}[split]
    return {g: [w for w in lists[g] if keep(w)] for g in ("male", "female")}


def generate(version: str, split: str = "test", path: str | os.PathLike = TEMPLATES_PATH) -> pa.Table:
    """The pair table of one SEAT version and split (see the module docstring)."""
    if version not in VERSIONS:
        raise ConfigError(f"version: {version!r} is not one of {', '.join(VERSIONS)}")
    if split not in SPLITS:
        raise ConfigError(f"split: {split!r} is not one of {', '.join(SPLITS)}")
    spec = load_templates(path)
    targets = _pick(spec["targets"], split)
    attributes = _pick(spec["attributes"], split)
    test = f"occupations-{split}"
    target_roles = (("targ1", targets["male"]), ("targ2", targets["female"]))
    attribute_roles = (("attr1", attributes["male"]), ("attr2", attributes["female"]))
    rows = []
    if version == "v1":
        target_sents = []  # (role, phrase, sentence, template index)
        for role, phrases in target_roles:
            for phrase in phrases:
                for k, pair in enumerate(spec["v1"], start=1):
                    if phrase in spec["pronouns"] and not pair["target"].startswith("{person}"):
                        continue
                    target_sents.append((role, phrase, _sentence(pair["target"], phrase, None, None), k))
        attribute_sents = [
            (role, prof, _sentence(pair["attribute"], "", prof, prof), k)
            for role, profs in attribute_roles
            for prof in profs
            for k, pair in enumerate(spec["v1"], start=1)
        ]
        for t_role, phrase, t_sent, t_k in target_sents:
            for a_role, prof, a_sent, a_k in attribute_sents:
                rows.append(_row(test, version, t_sent, t_role, phrase, t_sent, t_k, a_role, prof, a_sent, a_k))
    else:
        for t_role, phrases in target_roles:
            for phrase in phrases:
                for a_role, profs in attribute_roles:
                    for prof in profs:
                        for k, template in enumerate(spec["v2"], start=1):
                            t_sent = _sentence(template, phrase, _mask_attribute(prof), prof)  # attribute masked
                            a_sent = _sentence(template, _mask_target(phrase), prof, prof)  # target masked
                            rows.append(_row(test, version, phrase, t_role, phrase, t_sent, k, a_role, prof, a_sent, k))
    return table(rows, SCHEMA)


def _row(test, version, unit, t_role, target, t_sent, t_k, a_role, attribute, a_sent, a_k) -> dict:
    return {
        "test": test,
        "version": version,
        "unit": unit,
        "target_role": t_role,
        "target_category": TARGET_CATEGORIES[t_role],
        "target": target,
        "target_sentence": t_sent,
        "target_template": t_k,
        "attribute_role": a_role,
        "attribute_category": ATTRIBUTE_CATEGORIES[a_role],
        "attribute": attribute,
        "attribute_sentence": a_sent,
        "attribute_template": a_k,
    }


def _options(options: Mapping, key: str) -> tuple[str, str]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown option (allowed: {', '.join(OPTIONS)}, scoring, metric)")
    version = options.get("version")
    if version not in VERSIONS:
        raise ConfigError(f"{key}.version: {version!r} is not one of {', '.join(VERSIONS)} (required)")
    split = options.get("split", "test")
    if split not in SPLITS:
        raise ConfigError(f"{key}.split: {split!r} is not one of {', '.join(SPLITS)}")
    return version, split


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    _options(options, key)
    return []


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    version, split = _options(options, key)
    return generate(version, split)
