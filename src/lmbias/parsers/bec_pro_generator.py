"""Build the BEC-Pro corpus (Bartl, Nissim & Gatt 2020) from its templates, professions and person words.

Why a generator when the released tsv is downloaded anyway: it documents exactly how every row (and
its masked variants) came about, it is checked against the release row for row, and it builds the same
kind of corpus from other lists (the logprob-score corpus of the DA-Gender paper is BEC-Pro's templates
with Table 2 targets and Table 10 professions).

Construction, as in the authors' corpus script and the released files:

* order: profession group (male, female, balanced) > template > person gender (male, then female)
  > person phrase > profession;
* the person phrase is capitalised at the sentence start (English: first letter; German: every word);
  the *person word* is the phrase's last word ("My brother" -> "brother");
* German templates hold ``ART``: "der" for male, "die" for female persons; male persons take the
  masculine profession form, female persons the feminine one (``Profession_EN`` keeps the English);
* ``Sent_TM``: the person word masked; ``Sent_AM``: every word of the profession masked (one
  ``[MASK]`` per space-separated word); ``Sent_TAM``: both.

The released files mask the person word wherever a word *starts* with it, so two phrase/profession
pairs per language carry a second, glued mask: "This [MASK] is a lodging [MASK]ager." (man/manager)
and "[MASK] ist [MASK]nährungsberater." (Er/Ernährungsberater), 5 rows each. ``faithful=True`` (the
default) reproduces that, so the output equals the release byte for byte; ``faithful=False`` masks
whole words only. (The published script's plain ``str.replace`` would also turn "mason" into
"ma[MASK]" for "my son"; the release does not, so the release was made with a word-start match.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from lmbias.errors import ConfigError, DataError
from lmbias.io import load_yaml

MASK = "[MASK]"
LANGUAGES = ("en", "de")
GROUPS = ("male", "female", "balanced")
GENDERS = ("male", "female")
PATTERN_FILES = {"en": "sent_patterns_english.txt", "de": "sent_patterns_german.txt"}
PROFESSION_FILES = {"en": "professions_english.json", "de": "professions_german.json"}
_REPO = Path(__file__).resolve().parents[3]
PERSON_WORDS_FILE = _REPO / "resources" / "templates" / "bec_pro_person_words.yaml"
COLUMNS = ["Sentence", "Sent_TM", "Sent_AM", "Sent_TAM", "Template", "Person", "Gender", "Profession", "Prof_Gender"]
HEADERS = {"en": COLUMNS, "de": COLUMNS + ["Profession_EN"]}


def _language(language: str) -> str:
    if language not in LANGUAGES:
        raise ConfigError(f"bec_pro language must be one of {list(LANGUAGES)}, got {language!r}")
    return language


def load_person_words(path: str | os.PathLike | None = None) -> dict[str, dict[str, list[str]]]:
    """{language: {"male": [...], "female": [...]}} from resources/templates/bec_pro_person_words.yaml."""
    path = Path(path) if path is not None else PERSON_WORDS_FILE
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("person word list not found", path) from None
    if not isinstance(data, dict):
        raise DataError("expected a mapping language -> {male: [...], female: [...]}", path)
    out = {}
    for language, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != set(GENDERS):
            raise DataError(f"{language}: expected exactly the keys male and female", path)
        lists = {g: entry[g] for g in GENDERS}
        for g, words in lists.items():
            if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
                raise DataError(f"{language}.{g}: expected a non-empty list of phrases", path)
            if any(len(w.split()) > 2 for w in words):
                raise DataError(f"{language}.{g}: a person phrase has at most two words (determiner + noun)", path)
        if len(lists["male"]) != len(lists["female"]):
            raise DataError(f"{language}: male and female lists must pair up (same length)", path)
        out[language] = lists
    return out


def load_patterns(path: str | os.PathLike) -> list[str]:
    """Sentence patterns, one per line with two ``{}`` slots (person, profession); lines are stripped."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError("pattern file not found", path) from None
    patterns = []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        if line.count("{}") != 2:
            raise DataError(f"a pattern needs exactly two {{}} slots (person, profession): {line!r}", path, number)
        patterns.append(line)
    if not patterns:
        raise DataError("no patterns", path)
    return patterns


def load_professions(path: str | os.PathLike, language: str) -> dict[str, list]:
    """{group: professions}; English: strings; German: [english, masculine, feminine] triples."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("profession file not found", path) from None
    except json.JSONDecodeError as err:
        raise DataError(f"invalid JSON: {err.msg}", path, err.lineno) from None
    if not isinstance(data, dict) or not set(data) <= set(GROUPS) or not data:
        raise DataError(f"expected a mapping with keys among {list(GROUPS)}", path)
    for group, items in data.items():
        ok = isinstance(items, list) and all(
            (isinstance(p, str) and p.strip())
            if language == "en"
            else (isinstance(p, list) and len(p) == 3 and all(isinstance(x, str) and x.strip() for x in p))
            for p in items
        )
        if not ok:
            shape = "strings" if language == "en" else "[english, masculine, feminine] triples"
            raise DataError(f"{group}: expected a list of {shape}", path)
    return data


def person_phrase(phrase: str, language: str) -> str:
    """The phrase as it opens a sentence: English capitalises the first letter, German every word."""
    if _language(language) == "en":
        return phrase.capitalize()
    return " ".join(word.capitalize() for word in phrase.split())


def person_word(phrase: str) -> str:
    words = phrase.split()
    return words[1] if len(words) == 2 else phrase


def _mask_word(text: str, word: str, faithful: bool) -> str:
    tail = "" if faithful else r"(?!\w)"
    return re.sub(r"\b" + re.escape(word) + tail, lambda _: MASK, text)


def _mask_profession(text: str, profession: str) -> str:
    for part in profession.split():
        text = text.replace(part, MASK)
    return text


def make_row(
    pattern: str, phrase: str, gender: str, profession: str, group: str, language: str, faithful: bool = True
) -> dict:
    """One corpus row (column name -> value, without the index)."""
    word = person_phrase(phrase, language)
    person = person_word(word)
    if language == "de":
        pattern = pattern.replace("ART", "der" if gender == "male" else "die")
    sentence = pattern.format(word, profession)
    tm = _mask_word(sentence, person, faithful)
    return {
        "Sentence": sentence,
        "Sent_TM": tm,
        "Sent_AM": _mask_profession(sentence, profession),
        "Sent_TAM": _mask_profession(tm, profession),
        "Template": pattern.format("<person subject>", "<profession>"),
        "Person": person,
        "Gender": gender,
        "Profession": profession,
        "Prof_Gender": group,
    }


def generate(
    language: str,
    patterns: Sequence[str],
    professions: Mapping[str, list],
    person_words: Mapping[str, Sequence[str]],
    faithful: bool = True,
) -> list[dict]:
    """All rows, in the release's order. `professions` as from load_professions (German: triples)."""
    _language(language)
    rows = []
    for group in GROUPS:
        if group not in professions:
            continue
        for pattern in patterns:
            for gender in GENDERS:
                for phrase in person_words[gender]:
                    for prof in professions[group]:
                        if language == "en":
                            row = make_row(pattern, phrase, gender, prof, group, language, faithful)
                        else:
                            english, masculine, feminine = prof
                            form = masculine if gender == "male" else feminine
                            row = make_row(pattern, phrase, gender, form, group, language, faithful)
                            row["Profession_EN"] = english
                        rows.append(row)
    return rows


def generate_from_dir(
    data_dir: str | os.PathLike,
    language: str,
    faithful: bool = True,
    person_words_file: str | os.PathLike | None = None,
) -> list[dict]:
    """Rows from the pattern and profession files in `data_dir` (the bec_pro data folder)."""
    data_dir = Path(data_dir)
    _language(language)
    patterns = load_patterns(data_dir / PATTERN_FILES[language])
    professions = load_professions(data_dir / PROFESSION_FILES[language], language)
    words = load_person_words(person_words_file)
    if language not in words:
        raise DataError(f"no person words for language {language!r}", person_words_file or PERSON_WORDS_FILE)
    return generate(language, patterns, professions, words[language], faithful)


def to_tsv(rows: Sequence[dict], language: str) -> str:
    """The release's format: tab-separated, an unnamed index column, a header, '\\n' line ends."""
    header = HEADERS[_language(language)]
    lines = ["\t".join([""] + header)]
    for i, row in enumerate(rows):
        values = [str(i)] + [row[c] for c in header]
        if any(("\t" in v) or ("\n" in v) for v in values):
            raise DataError(f"row {i}: a field holds a tab or newline and cannot be written unquoted")
        lines.append("\t".join(values))
    return "\n".join(lines) + "\n"


def person_slot(sentence: str, language: str, person_words: Mapping[str, Sequence[str]]) -> tuple[str, int] | None:
    """(gender, index in its list) of the person phrase that opens `sentence`, or None.

    Index i of the male and of the female list are a matched pair (he/she, my brother/my sister, ...).
    """
    best = None
    for gender in GENDERS:
        for index, phrase in enumerate(person_words[gender]):
            opener = person_phrase(phrase, language)
            rest = sentence[len(opener) :]
            if sentence.startswith(opener) and not (rest[:1].isalnum()):
                if best is None or len(opener) > best[2]:
                    best = (gender, index, len(opener))
    return None if best is None else (best[0], best[1])


def main(argv: list[str] | None = None) -> int:
    """``python -m lmbias.parsers.bec_pro_generator --data-dir DIR --language en --out FILE [--whole-words]``."""
    parser = argparse.ArgumentParser(
        prog="python -m lmbias.parsers.bec_pro_generator", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--data-dir", required=True, help="folder with sent_patterns_*.txt and professions_*.json")
    parser.add_argument("--language", choices=LANGUAGES, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--whole-words", action="store_true", help="mask whole words only (not the release)")
    args = parser.parse_args(argv)
    rows = generate_from_dir(args.data_dir, args.language, faithful=not args.whole_words)
    out = Path(args.out)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(to_tsv(rows, args.language), encoding="utf-8")
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
