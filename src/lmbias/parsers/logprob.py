"""logprob-score items (Kurita et al. 2019, as in the over-debiasing paper): generated from
resources/templates/logprob.yaml.

A GENERATED dataset (no download): Table 4 templates x Table 2 targets (10 male, 10 female) x Table 10
professions (20 male-dominated, 20 female-dominated) = 5 x 20 x 40 = 4,000 sentences. Each row holds the
sentence ("My mom is a nurse."), the target-masked form `tm_sent` ("My [MASK] is a nurse.") and the
target-and-attribute-masked form `tam_sent` ("My [MASK] is a [MASK]."), one ``[MASK]`` per word of the
profession (section 4.2; Bartl et al.). Only the gendered word of a two-word target is masked.
`target_start` is the offset of the target's ``[MASK]`` in `tm_sent`, `attr_start`/`attr_end` the
profession's span there, so a scorer can re-mask for any tokenizer.

Split (section 4.1: 20 % development, 80 % test, "based on the target words and attribute words"): a row
is ``dev`` when its target *and* its profession are development terms, ``test`` when both are test terms,
and ``none`` otherwise (a mixed row belongs to neither effect size). Option ``split``:

* ``paper`` (default): the paper's validation terms (Table 10's italics; Table 2's, which the text rendering
  loses, from the authors' released code): 2 of 10 target pairs and 4 of 20 professions per group;
* ``seeded``: the same sizes drawn with ``numpy.random.default_rng(split_seed)`` (target *pairs* are drawn,
  so a dev target's counterpart is dev too; professions per group).

Sizes: dev = 4 targets x 8 professions x 5 templates = 160 sentences; test = 16 x 32 x 5 = 2,560; the
other 1,280 rows are mixed. Rows keep both `target_split` and `attribute_split`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import line_of, load_yaml_mapping, table, tm_tam_texts

GENERATED = True
RESOURCE_FILES = ["resources/templates/logprob.yaml"]
TEMPLATES_PATH = Path(__file__).resolve().parents[3] / RESOURCE_FILES[0]

OPTIONS = ("dataset", "split", "split_seed")
SPLITS = ("paper", "seeded")
GENDERS = ("male", "female")
DEV_FRACTION = 0.2

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "logprob"
SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),  # "<template id>/<target>/<profession>"
        ("template_id", pa.string()),  # L1..L5 (Table 4 row)
        ("template", pa.string()),
        ("sentence", pa.string()),
        ("tm_sent", pa.string()),  # target masked
        ("tam_sent", pa.string()),  # target and profession masked (one [MASK] per profession word)
        ("target", pa.string()),  # Table 2 phrase ("my mom")
        ("target_word", pa.string()),  # the masked word as written ("mom", "He")
        ("gender", pa.string()),  # male | female (the target's)
        ("target_pair", pa.int8()),  # 0..9: entry i of the male and of the female list
        ("attribute", pa.string()),  # the profession
        ("attribute_group", pa.string()),  # male | female (male- or female-dominated)
        ("target_split", pa.string()),  # dev | test
        ("attribute_split", pa.string()),  # dev | test
        ("split", pa.string()),  # dev | test | none
        ("target_start", pa.int32()),
        ("attr_start", pa.int32()),
        ("attr_end", pa.int32()),
    ]
)

_PLACEHOLDER = re.compile(r"\{(person|a|profession)\}")


def load_templates(path: str | os.PathLike = TEMPLATES_PATH) -> dict:
    text, data = load_yaml_mapping(path, {"templates", "targets", "professions"})
    for t in data["templates"]:
        if not isinstance(t, dict) or set(t) != {"id", "text"}:
            raise DataError(f"a template needs exactly id and text: {t!r}", path, line_of(text, "templates:"))
        found = _PLACEHOLDER.findall(t["text"])
        if found.count("person") != 1 or found.count("profession") != 1:
            raise DataError(
                f"template {t['id']} must hold {{person}} and {{profession}} once each", path, line_of(text, t["id"])
            )
    for section, groups in (("targets", data["targets"]), ("professions", data["professions"])):
        if not isinstance(groups, dict) or set(groups) != {"male", "female", "dev"}:
            raise DataError(
                f"{section} must have exactly the keys male, female, dev", path, line_of(text, section + ":")
            )
        both = list(groups["male"]) + list(groups["female"])
        if len(set(both)) != len(both):
            raise DataError(f"{section}: a term repeats", path, line_of(text, section + ":"))
        stray = sorted(set(groups["dev"]) - set(both))
        if stray:
            raise DataError(f"{section}.dev: {stray} are not {section}", path, line_of(text, stray[0]))
    if len(data["targets"]["male"]) != len(data["targets"]["female"]):
        raise DataError("targets.male and targets.female must be pairs (equal length)", path, line_of(text, "targets:"))
    return data


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def render(template: str, person: str, profession: str) -> dict:
    """Fill a Table 4 template: sentence, masked forms, the masked word as written, offsets in tm_sent."""
    words = person.split(" ")
    det, word = " ".join(words[:-1]), words[-1]
    pieces: list[tuple[str, str]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        if m.start() > pos:
            pieces.append(("lit", template[pos : m.start()]))
        kind = m.group(1)
        if kind == "person":
            if det:
                pieces.append(("lit", det + " "))
            pieces.append(("target", word))
        elif kind == "a":
            pieces.append(("lit", _article(profession)))
        else:
            pieces.append(("attr", profession))
        pos = m.end()
    if pos < len(template):
        pieces.append(("lit", template[pos:]))
    return tm_tam_texts(pieces, profession)


def _dev_sets(data: dict, split: str, seed: int) -> tuple[set[str], set[str]]:
    if split == "paper":
        return set(data["targets"]["dev"]), set(data["professions"]["dev"])
    rng = np.random.default_rng(seed)
    pairs = list(zip(data["targets"]["male"], data["targets"]["female"]))
    n_pairs = round(DEV_FRACTION * len(pairs))
    picked = sorted(rng.choice(len(pairs), size=n_pairs, replace=False).tolist())
    dev_targets = {t for i in picked for t in pairs[i]}
    dev_professions: set[str] = set()
    for group in GENDERS:
        profs = data["professions"][group]
        idx = rng.choice(len(profs), size=round(DEV_FRACTION * len(profs)), replace=False)
        dev_professions.update(profs[i] for i in idx.tolist())
    return dev_targets, dev_professions


def generate_logprob(split: str = "paper", split_seed: int = 0, path: str | os.PathLike = TEMPLATES_PATH) -> pa.Table:
    """All rows: templates x targets (male list, then female) x professions (male-dominated, then female)."""
    if split not in SPLITS:
        raise ConfigError(f"split: {split!r} is not one of {', '.join(SPLITS)}")
    data = load_templates(path)
    dev_targets, dev_professions = _dev_sets(data, split, split_seed)
    rows = []
    for tpl in data["templates"]:
        for gender in GENDERS:
            for k, person in enumerate(data["targets"][gender]):
                for group in GENDERS:
                    for profession in data["professions"][group]:
                        r = render(tpl["text"], person, profession)
                        t_split = "dev" if person in dev_targets else "test"
                        a_split = "dev" if profession in dev_professions else "test"
                        rows.append(
                            {
                                "item_id": f"{tpl['id']}/{person}/{profession}",
                                "template_id": tpl["id"],
                                "template": tpl["text"],
                                "sentence": r["sentence"],
                                "tm_sent": r["tm_sent"],
                                "tam_sent": r["tam_sent"],
                                "target": person,
                                "target_word": r["word"],
                                "gender": gender,
                                "target_pair": k,
                                "attribute": profession,
                                "attribute_group": group,
                                "target_split": t_split,
                                "attribute_split": a_split,
                                "split": t_split if t_split == a_split else "none",
                                "target_start": r["target_start"],
                                "attr_start": r["attr_start"],
                                "attr_end": r["attr_end"],
                            }
                        )
    return table(rows, SCHEMA)


def _options(options: Mapping, key: str) -> tuple[str, int]:
    unknown = sorted(set(options) - set(OPTIONS) - {"scoring", "metric"})
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown option for dataset logprob (known: split, split_seed)")
    split = options.get("split", "paper")
    if split not in SPLITS:
        raise ConfigError(f"{key}.split: {split!r} is not one of {', '.join(SPLITS)}")
    seed = options.get("split_seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"{key}.split_seed: {seed!r} is not a non-negative integer")
    return split, seed


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    _options(options, key)
    return []


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    split, seed = _options(options, key)
    return generate_logprob(split, seed)
