"""BBQ's template files read and checked (lmbias.parsers.bbq builds the items from them): the kept template rows
of `new_templates - <category>.csv` with their slot lists parsed, and the fillers the rows draw from (the category's
words of vocabulary.csv, the first_only names of vocabulary_proper_names.csv). Every malformed value is a DataError
naming the file and the row's first line; the rules themselves are in lmbias.parsers.bbq's docstring (the
Race_x_gender file's reader and rules: lmbias.parsers.bbq_intersectional).

Also here, shared by both builds: the generator's ten "unknown" answers, the order of a pair's four items and its
a -> an rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lmbias.errors import DataError
from lmbias.parsers.common import iter_csv_rows

#: the generator's `cat` for the gender templates: the category of the vocabulary rows and of the items
CATEGORY = "Gender_identity"
#: names drawn per proper-name slot (NAME1 from the female names, NAME2 per NAME1 from the other gender)
NAMES_PER_SLOT = 5
#: the template columns every row needs; Subcategory, version, Names, Proper_nouns_only, NAME1_info and NAME2_info
#: are read when the file has them, as the generator reads them
_TEMPLATE_COLUMNS = (
    "Q_id",
    "Ambiguous_Context",
    "Disambiguating_Context",
    "Lexical_diversity",
    "Question_negative_stereotype",
    "Question_non_negative",
    "Answer_negative",
    "Answer_non_negative",
    "Known_stereotyped_groups",
    "Notes",
)
#: the texts that get the slots filled
TEXT_COLUMNS = (
    "Ambiguous_Context",
    "Disambiguating_Context",
    "Question_negative_stereotype",
    "Question_non_negative",
    "Answer_negative",
    "Answer_non_negative",
)
_VOCABULARY_COLUMNS = ("Category", "Pilot_include", "SubCat", "Name")
#: the generator's "unknown" answers, in its order (random.choice draws from this list)
UNKNOWN_ANSWERS = (
    "Unknown",
    "Cannot be determined",
    "Can't be determined",
    "Not answerable",
    "Not known",
    "Not enough info",
    "Not enough information",
    "Cannot answer",
    "Can't answer",
    "Undetermined",
)
#: the four items of a pair, in the generator's order
VARIANTS = (("neg", "ambig"), ("neg", "disambig"), ("nonneg", "ambig"), ("nonneg", "disambig"))
_A_AN = re.compile(r"(\s[aA])(\s[aAeEiIoOuU])")
_NAMES_COLUMNS = ("Name", "First_last", "gender")
_SLOT = re.compile(r"\{\{([^{}]*)\}\}")
_LIST_PART = re.compile(r"\s*(?:\{\{(\w+)\}\}|(\w+))\s*:\s*\[([^\[\]]*)\]\s*")


def a_to_an(text: str) -> str:
    """The generator's a -> an rule (applied when a filler starts with a vowel): " a " before any word that starts
    with a vowel becomes " an ", then " an European" is put back to " a European"."""
    return _A_AN.sub(r"\1n\2", text).replace(" an European", " a European")


@dataclass(frozen=True)
class Template:
    """One kept template row, checked (its texts still hold the slots)."""

    line: int
    number: int
    q_id: int
    texts: dict[str, str]  # TEXT_COLUMNS -> raw template text
    subcategory: str  # "" when none
    version: str
    source: str
    groups: list[str]
    names: tuple[list[str], list[str]] | None  # the Names column's NAME1 and NAME2 lists
    words: tuple[list[str], list[str]] | None  # Lexical_diversity's WORD1 and WORD2 lists
    proper: bool
    slot_info: tuple[str, str]  # NAME1_info, NAME2_info
    negative_slot: int  # 0: Answer_negative is NAME1's person, 1: NAME2's


@dataclass(frozen=True)
class Pools:
    """The fillers the rows draw from: the category's vocabulary words and the first_only names."""

    words: list[str]  # Gender_identity words, unique, in file order
    subcategories: dict[str, list[str]]  # SubCat -> its words
    female: list[str]  # first_only names of gender F (as listed)
    gender: dict[str, str]  # first_only name -> its gender (first listing)


def read_csv(path, required: Sequence[str]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(first physical line of the row, {column: value})]) of a csv file with a header line; a missing
    column, a bad quote or a row with another number of fields names the file and line."""
    rows, header = [], None
    for start, fields in iter_csv_rows(path, what="csv"):
        if header is None:
            header = fields
            missing = [c for c in required if c not in header]
            if missing:
                raise DataError(f"missing column(s) {', '.join(missing)} (header: {', '.join(header)})", path, 1)
            continue
        if not any(f.strip() for f in fields):
            continue  # a blank line (pandas skips them too)
        if len(fields) != len(header):
            raise DataError(f"expected {len(header)} fields, found {len(fields)}", path, start)
        rows.append((start, dict(zip(header, fields))))
    if header is None:
        raise DataError("file is empty", path)
    return header, rows


def slot_lists(value: str, keys: tuple[str, str], column: str, path, line: int) -> dict[str, list[str]]:
    """{key: words} of a "KEY1: [a, b]; KEY2: [c]" string (keys also written {{KEY1}}); at least keys[0]."""
    found: dict[str, list[str]] = {}
    for part in value.split(";"):
        if not part.strip():
            continue
        match = _LIST_PART.fullmatch(part)
        key = (match.group(1) or match.group(2)) if match else None
        words = [w.strip() for w in match.group(3).split(",")] if match else []
        if key not in keys or key in found or not all(words):
            raise DataError(
                f"{column} must read like '{keys[0]}: [a, b]; {keys[1]}: [c, d]', got {value!r}", path, line
            )
        found[key] = words
    if keys[0] not in found:
        raise DataError(f"{column} has no {keys[0]} list: {value!r}", path, line)
    return found


def _stereotyped_groups(value: str, path, line: int) -> list[str]:
    try:
        groups = json.loads(value)
    except json.JSONDecodeError:
        groups = None
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise DataError(f"Known_stereotyped_groups must be a JSON list of strings, got {value!r}", path, line)
    return groups


def check_slots(texts: dict[str, str], allowed: set[str], path, line: int) -> None:
    """DataError naming the column, file and line where a text holds a slot the row does not fill (the generator
    would write "{{WORD1}}" or "" into the question)."""
    for column, text in texts.items():
        unknown = sorted(slots_of(text) - allowed)
        if unknown:
            raise DataError(
                f"{column}: slot {{{{{unknown[0]}}}}} would be left unfilled (this row fills {sorted(allowed)})",
                path,
                line,
            )


def draw_words(words: tuple[list[str], list[str]] | None, rng) -> tuple[str, str]:
    """A pair's {{WORD1}} and {{WORD2}} fillers (Lexical_diversity): one choice from each list, WORD1's first; a
    WORD2 list of one word fills its slot with it (the generator draws only from two or more and fills "")."""
    if not words:
        return "", ""
    word1 = rng.choice(words[0])
    word2 = rng.choice(words[1]) if len(words[1]) > 1 else (words[1][0] if words[1] else "")
    return word1, word2


def slots_of(text: str) -> set[str]:
    return set(_SLOT.findall(text))


def _template(row: dict[str, str], number: int, path, line: int) -> Template:
    q_id = row["Q_id"].strip()
    if not re.fullmatch(r"-?\d+", q_id):
        raise DataError(f"Q_id must be an integer, got {row['Q_id']!r}", path, line)
    proper = row.get("Proper_nouns_only", "")
    if proper not in ("TRUE", "FALSE", ""):
        raise DataError(f"Proper_nouns_only must be TRUE, FALSE or empty, got {proper!r}", path, line)
    names = None
    if row.get("Names", "").strip():
        lists = slot_lists(row["Names"], ("NAME1", "NAME2"), "Names", path, line)
        if "NAME2" not in lists:
            raise DataError(f"Names has no NAME2 list: {row['Names']!r}", path, line)
        names = (lists["NAME1"], lists["NAME2"])
    words = None
    if row["Lexical_diversity"].strip():
        lists = slot_lists(row["Lexical_diversity"], ("WORD1", "WORD2"), "Lexical_diversity", path, line)
        words = (lists["WORD1"], lists.get("WORD2", []))
    texts = {column: row[column] for column in TEXT_COLUMNS}
    allowed = {"NAME1", "NAME2"} | ({"WORD1"} if words else set()) | ({"WORD2"} if words and words[1] else set())
    check_slots(texts, allowed, path, line)
    held = [slots_of(texts[c]) & {"NAME1", "NAME2"} for c in ("Answer_negative", "Answer_non_negative")]
    if not (len(held[0]) == len(held[1]) == 1 and held[0] != held[1]):
        raise DataError(
            "Answer_negative and Answer_non_negative must each name one of {{NAME1}} and {{NAME2}}, a different "
            f"one: {texts['Answer_negative']!r}, {texts['Answer_non_negative']!r}",
            path,
            line,
        )
    return Template(
        line=line,
        number=number,
        q_id=int(q_id),
        texts=texts,
        subcategory=row.get("Subcategory", "").strip(),
        version=row["version"] if "version" in row else "None",
        source=row["Notes"],
        groups=_stereotyped_groups(row["Known_stereotyped_groups"], path, line),
        names=names,
        words=words,
        proper=proper == "TRUE",
        slot_info=(row.get("NAME1_info", "").strip(), row.get("NAME2_info", "").strip()),
        negative_slot=0 if held[0] == {"NAME1"} else 1,
    )


def kept_rows(path, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """(line, row) of a template file's rows whose Ambiguous_Context is not blank (the generator's kept rows), in
    file order; DataError naming the file when there is none."""
    _, rows = read_csv(path, required)
    kept = [(line, row) for line, row in rows if row["Ambiguous_Context"].strip()]
    if not kept:
        raise DataError("no template row has an Ambiguous_Context", path)
    return kept


def read_templates(path) -> list[Template]:
    """The kept template rows (non-empty Ambiguous_Context), checked, numbered in file order."""
    kept = kept_rows(path, _TEMPLATE_COLUMNS)
    return [_template(row, number, path, line) for number, (line, row) in enumerate(kept)]


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


def read_pools(vocabulary_path, names_path) -> Pools:
    """The Gender_identity words of vocabulary.csv and the first_only names of vocabulary_proper_names.csv."""
    _, rows = read_csv(vocabulary_path, _VOCABULARY_COLUMNS)
    vocabulary = [r for _, r in rows if r["Category"] == CATEGORY and r["Pilot_include"] != "No"]
    subcategories: dict[str, list[str]] = {}
    for r in vocabulary:
        subcategories.setdefault(r["SubCat"], [])
        if r["Name"] not in subcategories[r["SubCat"]]:
            subcategories[r["SubCat"]].append(r["Name"])
    _, rows = read_csv(names_path, _NAMES_COLUMNS)
    first_only = [(r["Name"], r["gender"]) for _, r in rows if r["First_last"] == "first_only"]
    gender: dict[str, str] = {}
    for name, g in first_only:
        gender.setdefault(name, g)
    female = [name for name, g in first_only if g == "F"]
    for what, names in (("female", female), ("male", [n for n in gender if gender[n] != "F"])):
        if len(_unique(names)) < NAMES_PER_SLOT:
            raise DataError(
                f"needs at least {NAMES_PER_SLOT} {what} first_only names, found {len(_unique(names))}", names_path
            )
    return Pools(_unique(r["Name"] for r in vocabulary), subcategories, female, gender)


def pair_items(template, filled: dict[str, str], people, rng, first_id: int, category: str, subcategory: str, groups):
    """The four items of one pair, in VARIANTS order with example_id counting up from `first_id`, as both builds
    (gender, race x gender) write them: one of the generator's unknown strings drawn from `rng`, then the answer
    order shuffled (the generator's draws, in its order), answer_info ([text, info] of each person: `people` holds
    NAME1's and NAME2's (text, info)), the stripped contexts and questions, the released fields, `template`,
    `label_type` and `unknown_loc`. `template` needs q_id, version, source, number, proper and negative_slot; the
    caller adds its own target columns (target_loc, biased_locs, comparison)."""
    unknown = rng.choice(UNKNOWN_ANSWERS)
    order = [0, 1, 2]  # Answer_negative, Answer_non_negative, unknown; shuffled as the generator shuffles the texts
    rng.shuffle(order)
    answers = [(filled["Answer_negative"], filled["Answer_non_negative"], unknown)[k] for k in order]
    negative, non_negative, unknown_loc = order.index(0), order.index(1), order.index(2)
    slots = {negative: template.negative_slot, non_negative: 1 - template.negative_slot}
    answer_info = {f"ans{k}": [unknown, "unknown"] if k == unknown_loc else list(people[slots[k]]) for k in range(3)}
    ambiguous = filled["Ambiguous_Context"].strip()
    contexts = {"ambig": ambiguous, "disambig": f"{ambiguous} {filled['Disambiguating_Context']}".strip()}
    questions = {
        "neg": filled["Question_negative_stereotype"].strip(),
        "nonneg": filled["Question_non_negative"].strip(),
    }
    metadata = {
        "subcategory": subcategory,
        "stereotyped_groups": list(groups),
        "version": template.version,
        "source": template.source,
    }
    items = []
    for offset, (polarity, condition) in enumerate(VARIANTS):
        items.append(
            {
                "example_id": first_id + offset,
                "question_index": template.q_id,
                "question_polarity": polarity,
                "context_condition": condition,
                "category": category,
                "answer_info": answer_info,
                "additional_metadata": metadata,
                "context": contexts[condition],
                "question": questions[polarity],
                "ans0": answers[0],
                "ans1": answers[1],
                "ans2": answers[2],
                "label": unknown_loc if condition == "ambig" else negative if polarity == "neg" else non_negative,
                "template": template.number,
                "label_type": "name" if template.proper else "label",
                "unknown_loc": unknown_loc,
            }
        )
    return items
