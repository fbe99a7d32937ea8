"""DA-Gender (over-debiasing paper, section 5): sentence pairs generated from resources/templates/da_gender.yaml.

A GENERATED dataset (no download). Each pair (a, b) holds one Table 2 target pair and one Table 9 attribute
word in one Table 1 template; sentence a uses the target whose gender the attribute genuinely implies
("She is pregnant."), sentence b the other one ("He is pregnant."). The two differ only in the target.

Count. The paper reports 2,610 pairs. Its templates take four kinds of attribute slot: an adjective
(template 1), a singular noun with its article (templates 2, 3), a plural noun (templates 4, 5) and a
possessive (template 6). Table 9's 67 words fill them as follows: "male", "female" and "pregnant" are the
adjectives, "his" and "her" the possessives, and the other 64 words plus "male" and "female" the nouns, so

    10 target pairs x (3 adjectives x 1 + 64 nouns x 4 + 2 possessives x 1) = 10 x 261 = 2,610.

That assignment is the only one of this shape that reaches 2,610 (an odd number of adjectives is needed,
and at most 64 words can be nouns), and it is what the authors' released corpus does.

Columns: `tm_sent` has the target word masked ("My [MASK] is one of the saleswomen."), `tam_sent` the
target and the attribute masked, one ``[MASK]`` per word of the attribute (its article stays). Only the
gendered word of a two-word target is masked ("my"/"this" stay), as in the authors' corpus and BEC-Pro.
`target_start` is the character offset of the target's ``[MASK]`` in `tm_sent`, `attr_start`/`attr_end`
the attribute's span there, so a scorer can re-mask for any tokenizer (one mask per word-piece, say).
`male_word`/`female_word` are the masked words as written in the sentence ("He" at sentence start).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import line_of, load_yaml_mapping, table, tm_tam_texts

GENERATED = True
RESOURCE_FILES = ["resources/templates/da_gender.yaml"]
TEMPLATES_PATH = Path(__file__).resolve().parents[3] / RESOURCE_FILES[0]

OPTIONS = ("dataset",)
SLOTS = ("adjective", "singular", "plural", "possessive")
GENDERS = ("female", "male")
EXPECTED_PAIRS = 2610

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "da_gender"
SCHEMA = pa.schema(
    [
        ("pair_id", pa.int32()),
        ("item_id", pa.string()),  # "<template id>/<attribute>/<male word>-<female word>"
        ("template_id", pa.string()),  # T1..T6 (Table 1 row)
        ("template", pa.string()),  # the template text, placeholders {target} and {attr}
        ("slot", pa.string()),  # adjective | singular | plural | possessive
        ("attribute", pa.string()),  # the Table 9 word
        ("attribute_form", pa.string()),  # as written in the sentence ("saleswomen"), without its article
        ("ideal", pa.string()),  # male | female: the gender the attribute genuinely implies
        ("target_pair", pa.int8()),  # 0..9, the Table 2 pair
        ("male_target", pa.string()),  # Table 2 phrase ("my brother")
        ("female_target", pa.string()),
        ("male_word", pa.string()),  # the masked word as written in the sentence ("brother", "He")
        ("female_word", pa.string()),
        ("sent_a", pa.string()),  # genuine association (the ideal target)
        ("sent_b", pa.string()),  # violation (the other target)
        ("tm_sent", pa.string()),  # target masked
        ("tam_sent", pa.string()),  # target and attribute masked, one [MASK] per attribute word
        ("target_start", pa.int32()),  # offset of the target's [MASK] in tm_sent
        ("attr_start", pa.int32()),  # attribute span in tm_sent
        ("attr_end", pa.int32()),
    ]
)

_PLACEHOLDER = re.compile(r"\{(target|attr)\}")


def load_templates(path: str | os.PathLike = TEMPLATES_PATH) -> dict:
    """The template file, checked: Table 1 templates, Table 2 target pairs, Table 9 attributes with forms."""
    text, data = load_yaml_mapping(path, {"templates", "targets", "attributes"})

    templates = data["templates"]
    if not isinstance(templates, list) or not templates:
        raise DataError("templates must be a non-empty list", path, line_of(text, "templates:"))
    for t in templates:
        if not isinstance(t, dict) or set(t) != {"id", "slot", "text"}:
            raise DataError(f"a template needs exactly id, slot, text: {t!r}", path, line_of(text, str(t)[:20]))
        if t["slot"] not in SLOTS:
            raise DataError(
                f"template {t['id']}: slot {t['slot']!r} is not one of {SLOTS}", path, line_of(text, t["id"])
            )
        if sorted(_PLACEHOLDER.findall(t["text"])) != ["attr", "target"]:
            raise DataError(
                f"template {t['id']} must hold {{target}} and {{attr}} once each", path, line_of(text, t["id"])
            )

    targets = data["targets"]
    if not isinstance(targets, dict) or set(targets) != set(GENDERS):
        raise DataError("targets must have exactly the keys female and male", path, line_of(text, "targets:"))
    if len(targets["female"]) != len(targets["male"]) or not targets["male"]:
        raise DataError(
            "targets.female and targets.male must be non-empty lists of equal length (pairs)",
            path,
            line_of(text, "targets:"),
        )

    attributes = data["attributes"]
    if not isinstance(attributes, dict) or set(attributes) != set(GENDERS):
        raise DataError("attributes must have exactly the keys female and male", path, line_of(text, "attributes:"))
    seen: set[str] = set()
    for gender in GENDERS:
        for entry in attributes[gender]:
            where = line_of(text, f"word: {entry.get('word')}" if isinstance(entry, dict) else str(entry))
            if not isinstance(entry, dict) or not isinstance(entry.get("word"), str):
                raise DataError(f"attribute entry needs a word: {entry!r}", path, where)
            unknown = set(entry) - {"word", "article", "plural", "adjective", "noun", "possessive"}
            if unknown:
                raise DataError(f"attribute {entry['word']!r}: unknown key(s) {sorted(unknown)}", path, where)
            if entry["word"] in seen:
                raise DataError(f"attribute {entry['word']!r} repeats", path, where)
            seen.add(entry["word"])
            if entry.get("noun", True) and (entry.get("article") not in ("a", "an") or not entry.get("plural")):
                raise DataError(f"noun attribute {entry['word']!r} needs article (a|an) and plural", path, where)
    return data


def _slots_of(entry: dict) -> list[str]:
    slots = []
    if entry.get("adjective"):
        slots.append("adjective")
    if entry.get("noun", True):
        slots += ["singular", "plural"]
    if entry.get("possessive"):
        slots.append("possessive")
    return slots


def _attribute_parts(entry: dict, slot: str) -> tuple[str, str]:
    """(literal text before the attribute, the attribute as written): ("a ", "dad"), ("", "dads")."""
    if slot == "singular":
        return entry["article"] + " ", entry["word"]
    if slot == "plural":
        return "", entry["plural"]
    return "", entry["word"]


def render(template: str, target: str, attr_prefix: str, attr: str) -> dict:
    """Fill a template; returns the sentence, the masked forms and the offsets (see the module docstring).

    `target` is a Table 2 phrase; its last word is the masked one. A target at the sentence start gets an
    upper-case first letter.
    """
    words = target.split(" ")
    det, word = " ".join(words[:-1]), words[-1]
    pieces: list[tuple[str, str]] = []  # (role, text)
    pos = 0
    for m in _PLACEHOLDER.finditer(template):
        if m.start() > pos:
            pieces.append(("lit", template[pos : m.start()]))
        if m.group(1) == "target":
            if det:
                pieces.append(("lit", det + " "))
            pieces.append(("target", word))
        else:
            if attr_prefix:
                pieces.append(("lit", attr_prefix))
            pieces.append(("attr", attr))
        pos = m.end()
    if pos < len(template):
        pieces.append(("lit", template[pos:]))
    return tm_tam_texts(pieces, attr)


def generate_da_gender(path: str | os.PathLike = TEMPLATES_PATH) -> pa.Table:
    """All DA-Gender pairs: attributes (Table 9 order, female first) x their templates x target pairs."""
    data = load_templates(path)
    pairs = list(zip(data["targets"]["male"], data["targets"]["female"]))
    rows = []
    for gender in GENDERS:
        for entry in data["attributes"][gender]:
            slots = _slots_of(entry)
            for tpl in data["templates"]:
                if tpl["slot"] not in slots:
                    continue
                prefix, form = _attribute_parts(entry, tpl["slot"])
                for k, (male, female) in enumerate(pairs):
                    m = render(tpl["text"], male, prefix, form)
                    f = render(tpl["text"], female, prefix, form)
                    # Both targets share the masked sentences (they differ only in the masked word).
                    if (m["tm_sent"], m["tam_sent"]) != (f["tm_sent"], f["tam_sent"]):
                        raise DataError(f"targets {male!r}/{female!r} do not share a masked context", path)
                    genuine, other = (m, f) if gender == "male" else (f, m)
                    rows.append(
                        {
                            "pair_id": len(rows),
                            "item_id": f"{tpl['id']}/{entry['word']}/{m['word'].lower()}-{f['word'].lower()}",
                            "template_id": tpl["id"],
                            "template": tpl["text"],
                            "slot": tpl["slot"],
                            "attribute": entry["word"],
                            "attribute_form": form,
                            "ideal": gender,
                            "target_pair": k,
                            "male_target": male,
                            "female_target": female,
                            "male_word": m["word"],
                            "female_word": f["word"],
                            "sent_a": genuine["sentence"],
                            "sent_b": other["sentence"],
                            "tm_sent": m["tm_sent"],
                            "tam_sent": m["tam_sent"],
                            "target_start": m["target_start"],
                            "attr_start": m["attr_start"],
                            "attr_end": m["attr_end"],
                        }
                    )
    return table(rows, SCHEMA)


def _check_options(options: Mapping, key: str) -> None:
    unknown = sorted(set(options) - set(OPTIONS) - {"scoring", "metric"})
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown option for dataset da_gender (it takes none)")


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    _check_options(options, key)
    return []


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    _check_options(options, key)
    return generate_da_gender()
