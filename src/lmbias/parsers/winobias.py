"""WinoBias plain-text files (`<n> <sentence>` with the antecedent and pronoun in brackets) -> one row per line.

The masked-pronoun scoring compares p(male form) with p(female form) of the line's pronoun pair. "her"
alone does not say whether the pair is his/her or him/her, so the pair is read off the counterpart
line (same type, same number, the other of pro/anti), aligned token by token: the pronoun must face
a pronoun of the other gender there. Positions are character offsets into `sentence` (brackets removed).

Facts about the real files (dev split, checked by the tests):
- some lines bracket two or three pronouns that all corefer with the antecedent
  (e.g. `[The developer] ... because [he] needed to cut [his] hair.`); the scored pronoun is the
  LAST bracketed one (the only choice that agrees between the pro and anti versions of every line),
  and the other gendered pronouns that flip between the two versions are listed in `other_pronouns`
  (Manela et al.'s code drops such lines: filter on an empty `other_pronouns` to do the same);
- a few sentences mention a third occupation or the same one twice (`professions` lists them all);
- 9 pro/anti pairs also differ by an upstream typo ("card"/"cared", "needed a desk"/"needed one",
  "because of [she]"/"because [he]", ...): the pair is still read off the aligned pronoun, and
  `counterpart_exact` is False for those rows.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import SPAN, iter_lines, table

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "winobias"
SCHEMA = pa.schema(
    [
        ("item_id", pa.string()),  # "{split}-t{type}-{pro|anti}-{line:04d}"
        ("split", pa.string()),
        ("type", pa.int8()),
        ("stereotype", pa.string()),  # pro | anti
        ("line", pa.int32()),  # the leading number n (1-based, equals the physical line)
        ("sentence", pa.string()),  # brackets removed
        ("pronoun", pa.string()),  # surface form of the scored pronoun
        ("pronoun_start", pa.int32()),
        ("pronoun_end", pa.int32()),
        ("gold_gender", pa.string()),  # male | female
        ("male_form", pa.string()),  # lower-case pronoun pair of this line: he/she, him/her, his/her, ...
        ("female_form", pa.string()),
        ("referent", pa.string()),  # the bracketed antecedent as it appears in `sentence`
        ("referent_start", pa.int32()),
        ("referent_end", pa.int32()),
        ("professions", pa.list_(SPAN)),  # every occupation mention (occupation words only)
        ("referent_profession", pa.string()),  # the occupation inside the referent span
        ("other_pronouns", pa.list_(SPAN)),  # other gendered pronouns that flip between pro and anti
        ("counterpart_exact", pa.bool_()),  # False: the pro/anti lines also differ by an upstream typo
    ]
)

PRONOUN_GENDER = {
    "he": "male",
    "him": "male",
    "his": "male",
    "himself": "male",
    "she": "female",
    "her": "female",
    "hers": "female",
    "herself": "female",
}

SPLITS = ("dev", "test")
TYPES = (1, 2)
STEREOTYPES = ("pro", "anti")
OCCUPATION_FILES = ("male_occupations.txt", "female_occupations.txt")

MAX_COUNTERPART_EDITS = 3  # upstream typos: at most 2 tokens differ besides the pronouns (dev)

_TOKEN = re.compile(r"\w+|[^\w\s]")
_LINE = re.compile(r"(\S+)[ \t]+(\S.*)$")


def sentence_file(stereotype: str, type_: int, split: str) -> str:
    return f"{stereotype}_stereotyped_type{type_}.txt.{split}"


def winobias_files(split: str = "dev", types: Sequence[int] = TYPES) -> list[str]:
    """The file names (as in config data.winobias.files) that parse_winobias needs."""
    names = [sentence_file(s, t, split) for t in types for s in STEREOTYPES]
    return names + list(OCCUPATION_FILES)


@dataclass
class _Line:
    number: int
    sentence: str
    mentions: list[tuple[int, int]]  # bracketed spans in `sentence`


def _read_sentences(path) -> dict[int, _Line]:
    lines: dict[int, _Line] = {}
    for physical, raw in iter_lines(path):
        lines[physical] = _parse_line(raw, path, physical)
    return lines


def _parse_line(raw: str, path, physical: int) -> _Line:
    match = _LINE.match(raw.strip())
    if not match:
        raise DataError(f"expected '<n> <sentence>', got {raw!r}", path, physical)
    index, body = match.groups()
    if not index.isdigit():
        raise DataError(f"line index {index!r} is not a number", path, physical)
    number = int(index)
    if number != physical:
        raise DataError(f"line index {number} out of sequence (expected {physical})", path, physical)
    chars: list[str] = []
    mentions: list[tuple[int, int]] = []
    opened: int | None = None
    for ch in body.rstrip():
        if ch == "[":
            if opened is not None:
                raise DataError("nested '[' inside a bracketed mention", path, physical)
            opened = len(chars)
        elif ch == "]":
            if opened is None:
                raise DataError("']' without a matching '['", path, physical)
            start, end = opened, len(chars)
            text = "".join(chars[start:end])
            start += len(text) - len(text.lstrip())
            end -= len(text) - len(text.rstrip())
            if start >= end:
                raise DataError("empty bracketed mention '[]'", path, physical)
            mentions.append((start, end))
            opened = None
        else:
            chars.append(ch)
    if opened is not None:
        raise DataError("'[' without a matching ']'", path, physical)
    if len(mentions) < 2:
        raise DataError(
            f"expected a bracketed antecedent and a bracketed pronoun, found {len(mentions)} bracket pair(s)",
            path,
            physical,
        )
    return _Line(number, "".join(chars), mentions)


def _plurals(word: str) -> list[str]:
    if word.endswith("person"):
        return [word[: -len("person")] + "people", word + "s"]
    if word.endswith("man"):
        return [word[:-3] + "men"]
    if re.search(r"[^aeiou]y$", word):
        return [word[:-1] + "ies"]
    if re.search(r"(s|sh|ch|x|z)$", word):
        return [word + "es"]
    return [word + "s"]


def read_occupations(path) -> list[str]:
    """One occupation per line (blank lines ignored), as written."""
    occupations = []
    for number, line in iter_lines(path):
        word = line.strip()
        if word:
            if not re.fullmatch(r"[A-Za-z][A-Za-z \-]*", word):
                raise DataError(f"unexpected occupation {word!r}", path, number)
            occupations.append(word)
    if not occupations:
        raise DataError("no occupations", path)
    return occupations


def occupation_pattern(occupations: Sequence[str]) -> re.Pattern:
    """Whole-word, case-insensitive matcher for the occupations, their plurals and multi-word forms."""
    forms = set()
    for occupation in occupations:
        words = occupation.lower().split()
        forms.add(" ".join(words))
        for plural in _plurals(words[-1]):
            forms.add(" ".join(words[:-1] + [plural]))
    alternatives = sorted(forms, key=lambda f: (-len(f), f))
    body = "|".join(r"\s+".join(re.escape(w) for w in form.split()) for form in alternatives)
    return re.compile(rf"\b(?:{body})\b", re.IGNORECASE)


def _tokens(sentence: str) -> list[re.Match]:
    return list(_TOKEN.finditer(sentence))


def _pronoun_diffs(line: _Line, path, other: _Line, other_path) -> tuple[list[re.Match], dict[int, str], int]:
    """Tokens of `line`, {token index: counterpart pronoun} for the flipped pronouns, and the number
    of other (non-pronoun) tokens that differ.

    The two lines are aligned token by token (difflib), so an upstream typo elsewhere in the
    sentence does not hide the pronoun pair; more than MAX_COUNTERPART_EDITS such tokens, or a
    pronoun paired with a pronoun of the same gender, is a DataError.
    """
    mine, theirs = _tokens(line.sentence), _tokens(other.sentence)
    a = [t.group() for t in mine]
    b = [t.group() for t in theirs]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    diffs: dict[int, str] = {}
    edits = 0
    where = f"counterpart {other_path} line {other.number}"
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        pa_ = [i for i in range(i1, i2) if a[i].lower() in PRONOUN_GENDER]
        pb_ = [j for j in range(j1, j2) if b[j].lower() in PRONOUN_GENDER]
        pairs = list(zip(pa_, pb_)) if len(pa_) == len(pb_) else []
        for i, j in pairs:
            if PRONOUN_GENDER[a[i].lower()] == PRONOUN_GENDER[b[j].lower()]:
                raise DataError(
                    f"pronoun {a[i]!r} pairs with {b[j]!r} of the same gender in its {where}",
                    path,
                    line.number,
                )
            diffs[i] = b[j]
        edits += max(i2 - i1, j2 - j1) - len(pairs)
    if edits > MAX_COUNTERPART_EDITS:
        raise DataError(
            f"sentence differs from its {where} beyond the pronouns ({edits} other tokens): "
            f"{line.sentence!r} vs {other.sentence!r}",
            path,
            line.number,
        )
    return mine, diffs, edits


def _span(sentence: str, start: int, end: int) -> dict:
    return {"start": start, "end": end, "text": sentence[start:end]}


def _row(line: _Line, path, other: _Line, other_path, *, split, type_, stereotype, occupations) -> dict:
    sentence = line.sentence
    pronouns = [m for m in line.mentions if sentence[m[0] : m[1]].lower() in PRONOUN_GENDER]
    others = [m for m in line.mentions if m not in pronouns]
    if not pronouns:
        raise DataError("no bracketed pronoun (he/she/him/her/his/hers/himself/herself)", path, line.number)
    if len(others) != 1:
        raise DataError(
            f"expected exactly one bracketed antecedent, found {len(others)}: {[sentence[s:e] for s, e in others]!r}",
            path,
            line.number,
        )
    (ref_start, ref_end) = others[0]
    p_start, p_end = pronouns[-1]
    pronoun = sentence[p_start:p_end]
    gold = PRONOUN_GENDER[pronoun.lower()]

    tokens, diffs, edits = _pronoun_diffs(line, path, other, other_path)
    index = next((i for i, t in enumerate(tokens) if t.start() == p_start and t.end() == p_end), None)
    if index is None or index not in diffs:
        raise DataError(
            f"pronoun {pronoun!r} is not swapped in the counterpart {other_path} line {other.number}",
            path,
            line.number,
        )
    counterpart = diffs.pop(index).lower()
    male_form, female_form = (pronoun.lower(), counterpart) if gold == "male" else (counterpart, pronoun.lower())

    mentions = [_span(sentence, m.start(), m.end()) for m in occupations.finditer(sentence)]
    inside = [m for m in mentions if m["start"] >= ref_start and m["end"] <= ref_end]
    if len(inside) != 1:
        raise DataError(
            f"expected one occupation in the antecedent {sentence[ref_start:ref_end]!r}, found {len(inside)}",
            path,
            line.number,
        )
    return {
        "item_id": f"{split}-t{type_}-{stereotype}-{line.number:04d}",
        "split": split,
        "type": type_,
        "stereotype": stereotype,
        "line": line.number,
        "sentence": sentence,
        "pronoun": pronoun,
        "pronoun_start": p_start,
        "pronoun_end": p_end,
        "gold_gender": gold,
        "male_form": male_form,
        "female_form": female_form,
        "referent": sentence[ref_start:ref_end],
        "referent_start": ref_start,
        "referent_end": ref_end,
        "professions": mentions,
        "referent_profession": inside[0]["text"],
        "other_pronouns": [_span(sentence, tokens[i].start(), tokens[i].end()) for i in sorted(diffs)],
        "counterpart_exact": edits == 0,
    }


def check_options(split, types, key: str = "winobias") -> tuple[str, list[int]]:
    if split not in SPLITS:
        raise ConfigError(f"{key}.split must be one of {list(SPLITS)}, got {split!r}")
    if isinstance(types, int) or not types or any(t not in TYPES for t in types) or len(set(types)) != len(types):
        raise ConfigError(f"{key}.types must be a non-empty list of distinct values from {list(TYPES)}, got {types!r}")
    return split, [int(t) for t in types]


def parse_winobias(
    files: Mapping[str, str | os.PathLike], split: str = "dev", types: Sequence[int] = TYPES
) -> pa.Table:
    """Parse the pro/anti files of `types` for `split`; `files` maps winobias_files() names to paths."""
    split, types = check_options(split, types)
    missing = [name for name in winobias_files(split, types) if name not in files]
    if missing:
        raise ConfigError(f"WinoBias parser is missing input files {missing}")
    occupations = occupation_pattern([o for name in OCCUPATION_FILES for o in read_occupations(files[name])])
    rows = []
    for type_ in types:
        paths = {s: files[sentence_file(s, type_, split)] for s in STEREOTYPES}
        parsed = {s: _read_sentences(paths[s]) for s in STEREOTYPES}
        for stereotype, other in (("pro", "anti"), ("anti", "pro")):
            for number, line in parsed[stereotype].items():
                counterpart = parsed[other].get(number)
                if counterpart is None:
                    raise DataError(
                        f"line {number} has no counterpart in {paths[other]} ({len(parsed[other])} lines there)",
                        paths[stereotype],
                        number,
                    )
                rows.append(
                    _row(
                        line,
                        paths[stereotype],
                        counterpart,
                        paths[other],
                        split=split,
                        type_=type_,
                        stereotype=stereotype,
                        occupations=occupations,
                    )
                )
    return table(rows, SCHEMA)


# -- registry interface (see lmbias.parsers) -------------------------------------------------

OPTIONS = ("split", "types")


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    split, types = check_options(options.get("split", "dev"), options.get("types", list(TYPES)), key)
    return winobias_files(split, types)


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    split, types = check_options(options.get("split", "dev"), options.get("types", list(TYPES)), key)
    return parse_winobias(files, split=split, types=types)


__all__ = ["SCHEMA", "parse_winobias", "winobias_files", "occupation_pattern", "read_occupations"]
