"""WinoGender schemas (Rudinger et al. 2018): one row per sentence of all_sentences.tsv (720).

Each sentence id reads `<occupation>.<participant>.<answer>.<gender>.txt`: answer 0 = the pronoun refers to the
occupation, 1 = to the participant (or "someone"); gender male | female | neutral. The sentence is checked against
its template (templates.tsv, keyed by occupation, participant and answer: "someone" sentences come from the same
template, "the/a $PARTICIPANT" written "someone"), which gives the pronoun and its slot; occupations-stats.tsv gives
each occupation's `bls_pct_female` and `bergsma_pct_female`.

Gotcha (lm-evaluation-harness's `winogender_gotcha` subset, 240 rows): a gendered sentence (male or female; a
neutral pronoun is never a gotcha) whose occupation-stereotype reading is wrong. The occupation's majority gender
is female when bls_pct_female > 50 and male when < 50 (US Bureau of Labor Statistics, 2015; a tie at exactly 50
has no majority, so that occupation has no gotcha sentence -- none of the 60 ties). A sentence is a gotcha when
the answer is the occupation and the pronoun's gender is not the majority (Rudinger et al.'s definition, also the
LLaMA paper's: 120 sentences), or the answer is the participant and the pronoun's gender is the majority (the
stereotype points to the occupation: the hub copy lm-eval reads added these, "including examples where
PARTICIPANT is correct as well", giving its 240 rows).
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.errors import DataError
from lmbias.parsers.common import check_choice, parse_int, read_delimited, table

SENTENCES = "all_sentences.tsv"
TEMPLATES = "templates.tsv"
STATS = "occupations-stats.tsv"
FILES = (SENTENCES, TEMPLATES, STATS)

GENDERS = ("male", "female", "neutral")
#: template slot -> pronoun per gender
PRONOUNS = {
    "$NOM_PRONOUN": {"male": "he", "female": "she", "neutral": "they"},
    "$POSS_PRONOUN": {"male": "his", "female": "her", "neutral": "their"},
    "$ACC_PRONOUN": {"male": "him", "female": "her", "neutral": "them"},
}
SOMEONE = "someone"

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "winogender"
SCHEMA = pa.schema(
    [
        ("sentid", pa.string()),
        ("sentence", pa.string()),
        ("occupation", pa.string()),
        ("participant", pa.string()),  # the other participant, or "someone"
        ("answer", pa.int8()),  # 0: the pronoun refers to the occupation, 1: to the participant
        ("gender", pa.string()),  # male | female | neutral
        ("pronoun", pa.string()),  # as in the sentence, lower case (he, his, him, she, her, they, ...)
        ("pronoun_slot", pa.string()),  # nominative | possessive | accusative
        ("template", pa.int32()),  # 0-based row of templates.tsv
        ("bls_pct_female", pa.float64()),
        ("bergsma_pct_female", pa.float64()),
        ("majority_gender", pa.string()),  # by bls_pct_female: female (> 50) | male (< 50) | none (= 50)
        ("gotcha", pa.bool_()),
    ]
)

_SLOT_NAMES = {"$NOM_PRONOUN": "nominative", "$POSS_PRONOUN": "possessive", "$ACC_PRONOUN": "accusative"}


def _float(value: str, what: str, path, line: int) -> float:
    try:
        return float(value)
    except ValueError:
        raise DataError(f"{what} must be a number, got {value!r}", path, line) from None


def _tsv(path, header):
    return read_delimited(path, delimiter="\t", header=header, quoting=csv.QUOTE_NONE)


def read_stats(path) -> dict[str, tuple[float, float]]:
    """occupation -> (bls_pct_female, bergsma_pct_female)."""
    stats = {}
    for line, (occupation, bergsma, bls, year) in _tsv(
        path, ["occupation", "bergsma_pct_female", "bls_pct_female", "bls_year"]
    ):
        if occupation in stats:
            raise DataError(f"occupation {occupation!r} listed twice", path, line)
        values = _float(bls, "bls_pct_female", path, line), _float(bergsma, "bergsma_pct_female", path, line)
        if not all(0 <= v <= 100 for v in values):
            raise DataError(f"percentages must lie in [0, 100], got {values}", path, line)
        parse_int(year, "bls_year", path, line)
        stats[occupation] = values
    return stats


def read_templates(path) -> dict[tuple[str, str, int], tuple[int, str]]:
    """(occupation, participant, answer) -> (0-based template row, template text)."""
    templates = {}
    for row, (line, (occupation, participant, answer, text)) in enumerate(
        _tsv(path, ["occupation(0)", "other-participant(1)", "answer", "sentence"])
    ):
        answer = parse_int(answer, "answer", path, line)
        check_choice(str(answer), {"0", "1"}, "answer", path, line)
        slots = [s for s in PRONOUNS if s in text]
        if len(slots) != 1 or text.count(slots[0]) != 1 or "$OCCUPATION" not in text or "$PARTICIPANT" not in text:
            raise DataError(
                f"a template needs $OCCUPATION, $PARTICIPANT and exactly one pronoun slot: {text!r}", path, line
            )
        key = (occupation, participant, answer)
        if key in templates:
            raise DataError(f"template {key} listed twice", path, line)
        templates[key] = (row, text)
    return templates


def render(template: str, occupation: str, participant: str, gender: str) -> tuple[str, str, str]:
    """(sentence, pronoun, slot) of a template for one participant (or "someone") and pronoun gender."""
    text = template
    if participant == SOMEONE:
        text = re.sub(r"\b(?:[Tt]he|[Aa]n?) \$PARTICIPANT", lambda m: "Someone" if m[0][0].isupper() else SOMEONE, text)
    text = text.replace("$OCCUPATION", occupation).replace("$PARTICIPANT", participant)
    slot = next(s for s in PRONOUNS if s in text)
    pronoun = PRONOUNS[slot][gender]
    at = text.index(slot)
    written = pronoun.capitalize() if at == 0 else pronoun
    return text.replace(slot, written), pronoun, _SLOT_NAMES[slot]


def _matches(sentence: str, rendered: str, gender: str) -> bool:
    """The sentence as its template renders it; a neutral pronoun may change the next verb's agreement (the file
    writes "they were" where the template gives "$NOM_PRONOUN was")."""
    if sentence == rendered:
        return True
    words, expected = sentence.split(), rendered.split()
    if gender != "neutral" or len(words) != len(expected):
        return False
    return sum(a != b for a, b in zip(words, expected)) == 1


def majority_gender(bls_pct_female: float) -> str:
    return "female" if bls_pct_female > 50 else "male" if bls_pct_female < 50 else "none"


def is_gotcha(gender: str, answer: int, majority: str) -> bool:
    """Whether the occupation's majority gender (by BLS) points the pronoun to the wrong reading."""
    if gender == "neutral" or majority == "none":
        return False
    return (gender != majority) if answer == 0 else (gender == majority)


def parse_winogender(sentences_path, templates_path, stats_path) -> pa.Table:
    """Every sentence of all_sentences.tsv, checked against its template and joined with its occupation's stats."""
    stats = read_stats(stats_path)
    templates = read_templates(templates_path)
    rows, seen = [], set()
    for line, (sentid, sentence) in _tsv(sentences_path, ["sentid", "sentence"]):
        parts = sentid.split(".")
        if len(parts) != 5 or parts[4] != "txt":
            raise DataError(
                f"sentence id {sentid!r} is not <occupation>.<participant>.<answer>.<gender>.txt", sentences_path, line
            )
        occupation, participant, answer, gender = parts[0], parts[1], parts[2], parts[3]
        check_choice(answer, {"0", "1"}, "answer (third part of the sentence id)", sentences_path, line)
        check_choice(gender, set(GENDERS), "gender (fourth part of the sentence id)", sentences_path, line)
        answer = int(answer)
        if sentid in seen:
            raise DataError(f"sentence id {sentid!r} listed twice", sentences_path, line)
        seen.add(sentid)
        if occupation not in stats:
            raise DataError(f"occupation {occupation!r} is not in {STATS}", sentences_path, line)
        keys = [k for k in templates if k[0] == occupation and k[2] == answer and participant in (k[1], SOMEONE)]
        if len(keys) != 1:
            raise DataError(
                f"{len(keys)} templates in {TEMPLATES} for occupation {occupation!r}, participant {participant!r}, "
                f"answer {answer}",
                sentences_path,
                line,
            )
        template_row, template = templates[keys[0]]
        expected, pronoun, slot = render(template, occupation, participant, gender)
        if not _matches(sentence, expected, gender):
            raise DataError(
                f"sentence {sentence!r} differs from its template ({TEMPLATES} row {template_row + 2}) "
                f"rendered: {expected!r}",
                sentences_path,
                line,
            )
        bls, bergsma = stats[occupation]
        majority = majority_gender(bls)
        rows.append(
            {
                "sentid": sentid,
                "sentence": sentence,
                "occupation": occupation,
                "participant": participant,
                "answer": answer,
                "gender": gender,
                "pronoun": pronoun,
                "pronoun_slot": slot,
                "template": template_row,
                "bls_pct_female": bls,
                "bergsma_pct_female": bergsma,
                "majority_gender": majority,
                "gotcha": is_gotcha(gender, answer, majority),
            }
        )
    return table(rows, SCHEMA)


OPTIONS: tuple[str, ...] = ()


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    return list(FILES)


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    return parse_winogender(files[SENTENCES], files[TEMPLATES], files[STATS])
