"""BBQ's Race_x_gender items (Parrish et al., Findings of ACL 2022), built from `new_templates - Race_x_gender.csv`,
vocabulary.csv and vocabulary_proper_names.csv of nyu-mll/BBQ (the `race_x_gender` subset of the `bbq` dataset;
lmbias.parsers.bbq is the parser module and adds lm-eval's `biased_locs`). The code is ours.

Where the rules come from. The upstream commit lmbias pins (`bea11bd`) holds only the generator of the
single-category files (generate_from_template_all_categories.py, utils.py); the authors' generator of the
intersectional files is not in it, and the paper's text on the intersectional templates could not be read while this
was written (only its abstract). What could be read, and what these rules follow:

* a copy of an intersectional generator for Race_x_gender and Race_x_SES in a third-party repository (a vendored
  "BBQ_Full" package importing the authors' utils.py, read for its rules and not copied; its repository could not be
  identified, so it is not certain to be the authors' own). Two facts make it the generator of the
  released data/Race_x_gender.jsonl: its rules give 15,960 items from these files, the released count as far as it
  can be checked (the paper's table of counts was not at hand; the model hub's viewer of the released
  data shows Race_x_gender with "16k rows"), and they put a Latino target first in template Q_id 13 at example_id
  4,320, the very item lm-evaluation-harness's bbq utils.py names as one whose answer_info is empty ("Some rows have
  missing data, e.g., example id 4,320 for Race_x_gender": the generator's "Latino woman" -> "Latina woman" fix
  defeats its own substring test, difference 1 below). That the released subcategory holds intersectional_a/_b/_c
  is this generator's doing, not checked against the released file (not at hand);
* nyu-mll/BBQ's analysis_scripts/BBQ_results_metadata.R, which reads the released file: answer_info holds
  "<gender>-<race>" ("F-Black"), the gender the first character, the race from the third; the pairs are "Match
  Race"/"Mismatch Race" x "Match Gender"/"Mismatch Gender"; the target is the answer whose gender is the template's
  Known_stereotyped_var2 and whose race is one of its Known_stereotyped_race;
* the template file's own columns (read below) and the authors' utils.py (do_slotting, create_templating_dicts).

So, as for the gender build, these are the generator's rules where they are sound, our fixes where it has bugs
(listed at the end), with random.Random(seed); and `comparison`, `target_loc`'s intersectional rule and the errors are
lmbias's.

Templates: every row whose Ambiguous_Context is not empty, numbered 0, 1, ... in file order (`template`;
lmbias.parsers.bbq.parse numbers them after the gender templates when both subsets are read). Slots:
{{NAME1}}/{{NAME2}} (a race word, or a full name on Proper_nouns_only rows), {{GEN1}}/{{GEN2}} (the gender word of
that person; not on proper-name rows), {{WORD1}}/{{WORD2}} (Lexical_diversity, as in the gender build). Names holds
the two gender words (["man", "woman"]), Var2_info their genders (["M", "F"]), Known_stereotyped_var2 the
stereotyped gender and Known_stereotyped_race the stereotyped races (a JSON list).

The target: the person of the stereotyped race and gender.

* Role-noun rows: the target races are the Race_ethnicity words of vocabulary.csv (Pilot_include not "No", file order)
  that are in Known_stereotyped_race (a sample of 5 where more than 4; never with the real files); the target's gender
  word is the Names word whose Var2_info is Known_stereotyped_var2. Per target race, a sample of 5 other race words
  (every Race_ethnicity word not among the target races: "African" is another race than "Black"/"African American",
  as in the generator), and per other race word three non-targets, the three comparisons of the generator:
  `intersectional_a` the same race and the other gender word, `intersectional_b` the other race and the same gender,
  `intersectional_c` the other race and the other gender. So a role-noun row's same-race pair (a) comes once per
  other race word, 5 times per target with only the WORD choices, the unknown string and the answer order drawn
  anew, as the generator writes it (and as the released count holds).
* Proper-name rows: a sample of 5 "first" names of vocabulary_proper_names.csv of the target gender whose ethnicity is
  a stereotyped race, each with a last name drawn from that ethnicity's "last" names; per target name, 5 first names
  drawn for each comparison (a: same ethnicity, other gender; b: other ethnicity, same gender; c: both other), each with
  a last name of its own ethnicity drawn, taken in threes (the k-th of a, b and c).

Each (target, non-target) pair gives four items, then the same pair with NAME1/GEN1 and NAME2/GEN2 swapped
("counterbalancing"): per target and k the order is a, b, c, a swapped, b swapped, c swapped, four items each with
example_id counting up from 0 in each subset (the released file's own numbering). So a role-noun row gives per target
race 5 x 3 x 2 x 4 = 120 items and a proper-name row 5 x 5 x 3 x 2 x 4 = 600; with the real files: 23 role-noun rows
(15 with two target races, 8 with one: 4,560 items) and 19 proper-name rows (11,400), 15,960 items, the released
count.

The four items of a pair, their order, the contexts, the shared shuffled answers and the unknown string (one of the
ten, drawn per pair) are the gender build's (lmbias.parsers.bbq). Filling: NAME, GEN, WORD slots, then the generator's
two text fixes ("Latino woman" -> "Latina woman", "lesbian man" -> "lesbian woman"), then its a -> an rule when a NAME
or GEN filler starts with a vowel ("an African American man", "an Asian woman").

Released fields: answer_info is [person, "<gender>-<race>"] for a person, where person is "<race> <gender word>" on
role-noun rows (text fixes applied: "Latina woman") and the full name on proper-name rows, and race the vocabulary
word or the name's ethnicity ("F-Latino", "M-Arab"); the unknown answer [its string, "unknown"].
additional_metadata: subcategory the comparison as the generator writes it (intersectional_a, _b, _c),
stereotyped_groups Known_stereotyped_race (the races only, as released: the stereotyped gender is in no released
field), version "None" (the file has no version column), source Notes. category "Race_x_gender".

lmbias's columns: `comparison` (lmbias's name for the subcategory: gender_differs for a, race_differs for b,
both_differ for c), `label_type` (name on Proper_nouns_only rows, else label), `unknown_loc`, and `target_loc`, the
biased answer for the intersection (our reading of the paper's bias score for these templates): for a neg question
the person of the stereotyped gender and race, for a nonneg question the other person; always exactly one. lm-eval
counts other answers (`biased_locs`, lmbias.parsers.bbq.biased_answers): its groups are the races only, so in a
gender_differs pair both people are biased for the neg question and neither for the nonneg one.

Draws, in the generator's order from random.Random(seed) (option `seed`): per row the target-race sample (where more
than 4) or the 5 target names; per target the 5 other race words (drawn on proper-name rows too, unused there, as the
generator draws them), then for proper names the target's last name, the a, b and c samples (pandas .sample in the
generator, numpy's generator: so no seed makes the generator's output reproducible item for item, unlike the gender
build) and per k the a, b and c last names; per k the WORD choices, then the unknown string and the shuffle of each
of the six pairs in output order.

Where this differs from the generator (each a bug or a silent gap of the generator):

1. Which person an answer is comes from the template's slots, not from the generator's substring tests of the
   fillers in the answer texts. These fail on the real templates: "Latina woman" (after its own fix) does not contain
   "Latino", so the released file leaves that answer's answer_info ["", ""] (lm-eval's example 4,320); "Asian" is in
   "Caucasian" and "African" in "African American", "men" in "women" (Q_id 21), so the other person's answer_info
   overwrites the right one in those pairs. Here the Latina answer is ["Latina woman", "F-Latino"].
2. A WORD2 list of one word fills {{WORD2}} (the gender build's difference 3).
3. Malformed input is an error naming file and line: a missing column, a Names/Var2_info that is not a JSON list of
   two different strings or a Known_stereotyped_var2 not in Var2_info (role-noun rows), a Known_stereotyped_race
   that is not a non-empty JSON list of strings (the generator would take every race as a target and no stereotyped
   group), a slot left unfilled ({{GEN1}} on a proper-name row), an answer that does not name exactly one person (a
   role-noun answer naming {{NAME1}} must hold {{GEN1}}, not {{GEN2}}), too few words or names to draw 5 from, a
   pair of two identical people.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from lmbias.errors import DataError
from lmbias.parsers.bbq_templates import (
    NAMES_PER_SLOT,
    TEXT_COLUMNS,
    a_to_an,
    check_slots,
    draw_words,
    kept_rows,
    pair_items,
    read_csv,
    slot_lists,
    slots_of,
)

#: the released file's category (the csv's Category column says "Gender_x_race")
CATEGORY = "Race_x_gender"
TEMPLATES = "new_templates - Race_x_gender.csv"
#: the vocabulary.csv category of the race words
RACE_CATEGORY = "Race_ethnicity"
#: the generator's subcategory of a pair -> lmbias's `comparison`, in the generator's order
COMPARISONS = {
    "intersectional_a": "gender_differs",  # same race, the other gender
    "intersectional_b": "race_differs",  # another race, the same gender
    "intersectional_c": "both_differ",
}
_TEMPLATE_COLUMNS = (
    "Q_id",
    "Ambiguous_Context",
    "Disambiguating_Context",
    "Names",
    "Lexical_diversity",
    "Proper_nouns_only",
    "Question_negative_stereotype",
    "Question_non_negative",
    "Answer_negative",
    "Answer_non_negative",
    "Known_stereotyped_race",
    "Known_stereotyped_var2",
    "Var2_info",
    "Notes",
)
_VOCABULARY_COLUMNS = ("Category", "Pilot_include", "Name")
_NAMES_COLUMNS = ("Name", "First_last", "gender", "ethnicity")
#: the generator's text fixes (utils.do_slotting), applied to every filled text
_TEXT_FIXES = (("lesbian man", "lesbian woman"), ("Latino woman", "Latina woman"))


@dataclass(frozen=True)
class RaceGenderTemplate:
    """One kept row of the Race_x_gender file, checked (its texts still hold the slots)."""

    line: int
    number: int
    q_id: int
    texts: dict[str, str]
    version: str
    source: str
    races: list[str]  # Known_stereotyped_race
    var2: str  # Known_stereotyped_var2: the stereotyped gender
    genders: tuple[str, str] | None  # role-noun rows: (the target's gender word, the other one)
    other_var2: str | None  # role-noun rows: the other gender (Var2_info)
    words: tuple[list[str], list[str]] | None
    proper: bool
    negative_slot: int  # 0: Answer_negative is NAME1's person, 1: NAME2's


@dataclass(frozen=True)
class RaceGenderPools:
    races: list[str]  # Race_ethnicity words of vocabulary.csv, unique, in file order
    first: list[tuple[str, str, str]]  # (name, gender, ethnicity) of the "first" names, in file order
    last: dict[str, list[str]]  # ethnicity -> its "last" names, unique, in file order


class Person(NamedTuple):
    name: str  # the NAME filler: a race word or a full name
    gen: str | None  # the GEN filler (role-noun rows)
    info: str  # "<gender>-<race>"
    text: str  # answer_info's text


# ---------------------------------------------------------------------------------------------------- reading


def _json_strings(value: str, column: str, path, line: int, length: int | None = None) -> list[str]:
    try:
        found = json.loads(value)
    except json.JSONDecodeError:
        found = None
    ok = isinstance(found, list) and found and all(isinstance(v, str) and v.strip() for v in found)
    if ok and length is not None:
        ok = len(found) == length and len(set(found)) == length
    if not ok:
        what = f"a JSON list of {length} different strings" if length else "a non-empty JSON list of strings"
        raise DataError(f"{column} must be {what}, got {value!r}", path, line)
    return [v.strip() for v in found]


def _template(row: dict[str, str], number: int, path, line: int) -> RaceGenderTemplate:
    q_id = row["Q_id"].strip()
    if not re.fullmatch(r"-?\d+", q_id):
        raise DataError(f"Q_id must be an integer, got {row['Q_id']!r}", path, line)
    proper = row["Proper_nouns_only"].strip()
    if proper not in ("TRUE", "FALSE", ""):
        raise DataError(f"Proper_nouns_only must be TRUE, FALSE or empty, got {proper!r}", path, line)
    proper = proper == "TRUE"
    races = _json_strings(row["Known_stereotyped_race"], "Known_stereotyped_race", path, line)
    var2 = row["Known_stereotyped_var2"].strip()
    if not var2:
        raise DataError("Known_stereotyped_var2 is empty: no stereotyped gender", path, line)
    genders = other_var2 = None
    if not proper:
        names = _json_strings(row["Names"], "Names", path, line, length=2)
        infos = _json_strings(row["Var2_info"], "Var2_info", path, line, length=2)
        if var2 not in infos:
            raise DataError(f"Known_stereotyped_var2 {var2!r} is not one of Var2_info {infos}", path, line)
        at = infos.index(var2)
        genders, other_var2 = (names[at], names[1 - at]), infos[1 - at]
    words = None
    if row["Lexical_diversity"].strip():
        lists = slot_lists(row["Lexical_diversity"], ("WORD1", "WORD2"), "Lexical_diversity", path, line)
        words = (lists["WORD1"], lists.get("WORD2", []))
    texts = {column: row[column] for column in TEXT_COLUMNS}
    allowed = {"NAME1", "NAME2"} | (set() if proper else {"GEN1", "GEN2"})
    allowed |= ({"WORD1"} if words else set()) | ({"WORD2"} if words and words[1] else set())
    check_slots(texts, allowed, path, line)
    held = [slots_of(texts[c]) for c in ("Answer_negative", "Answer_non_negative")]
    people = [h & {"NAME1", "NAME2"} for h in held]
    ok = len(people[0]) == len(people[1]) == 1 and people[0] != people[1]
    if ok and not proper:  # the answer naming NAMEk holds GENk and not the other GEN
        ok = all(h & {"GEN1", "GEN2"} == {"GEN" + next(iter(p))[-1]} for h, p in zip(held, people))
    if not ok:
        what = "{{NAME1}} {{GEN1}} or {{NAME2}} {{GEN2}}" if not proper else "{{NAME1}} or {{NAME2}}"
        raise DataError(
            f"Answer_negative and Answer_non_negative must each name one person ({what}), a different one: "
            f"{texts['Answer_negative']!r}, {texts['Answer_non_negative']!r}",
            path,
            line,
        )
    return RaceGenderTemplate(
        line=line,
        number=number,
        q_id=int(q_id),
        texts=texts,
        version=row["version"] if "version" in row else "None",
        source=row["Notes"],
        races=races,
        var2=var2,
        genders=genders,
        other_var2=other_var2,
        words=words,
        proper=proper,
        negative_slot=0 if people[0] == {"NAME1"} else 1,
    )


def read_race_gender_templates(path) -> list[RaceGenderTemplate]:
    """The kept template rows (non-empty Ambiguous_Context), checked, numbered in file order."""
    kept = kept_rows(path, _TEMPLATE_COLUMNS)
    return [_template(row, number, path, line) for number, (line, row) in enumerate(kept)]


def read_race_gender_pools(vocabulary_path, names_path) -> RaceGenderPools:
    """The Race_ethnicity words of vocabulary.csv and the "first"/"last" names of vocabulary_proper_names.csv."""
    _, rows = read_csv(vocabulary_path, _VOCABULARY_COLUMNS)
    races = [r["Name"] for _, r in rows if r["Category"] == RACE_CATEGORY and r["Pilot_include"] != "No"]
    _, rows = read_csv(names_path, _NAMES_COLUMNS)
    first = [(r["Name"], r["gender"], r["ethnicity"]) for _, r in rows if r["First_last"] == "first"]
    last: dict[str, list[str]] = {}
    for _, r in rows:
        if r["First_last"] == "last" and r["Name"] not in last.setdefault(r["ethnicity"], []):
            last[r["ethnicity"]].append(r["Name"])
    return RaceGenderPools(list(dict.fromkeys(races)), first, last)


# ---------------------------------------------------------------------------------------------------- the target


def person_of(info: str) -> tuple[str, str] | None:
    """(gender, race) of an intersectional answer_info ("F-Black" -> ("F", "Black")); None for anything else (the
    unknown answer, the released file's empty infos)."""
    gender, dash, race = info.partition("-")
    return (gender, race) if dash and gender and race else None


def stereotyped_people(answer_info: Mapping, races: Sequence[str], var2: str | None, unknown_loc: int) -> list[int]:
    """The answers (0-2) that are a person of the stereotyped gender `var2` and one of the stereotyped `races`."""
    wanted = {r.lower() for r in races}
    found = []
    for k in range(3):
        person = person_of(answer_info[f"ans{k}"][1]) if k != unknown_loc else None
        if person and var2 is not None and person[0] == var2 and person[1].lower() in wanted:
            found.append(k)
    return found


def intersectional_target_loc(
    answer_info: Mapping, races: Sequence[str], var2: str | None, polarity: str, unknown_loc: int
) -> int:
    """The biased answer: for a neg question the person of the stereotyped gender and race, for a nonneg question the
    other person; -1 when that is not exactly one answer (never in a build; a read file whose gender is unknown)."""
    members = stereotyped_people(answer_info, races, var2, unknown_loc)
    found = members if polarity == "neg" else [k for k in range(3) if k != unknown_loc and k not in members]
    return found[0] if len(found) == 1 else -1


def stereotyped_gender(records: Sequence[Mapping]) -> str | None:
    """The stereotyped gender of one template's items where no released field holds it (read_jsonl): the gender of
    the one person of a stereotyped race in the pairs that have exactly one (the race_differs and both_differ pairs,
    whose target is that person); None unless every such pair says the same."""
    votes = set()
    for r in records:
        races = {g.lower() for g in r["additional_metadata"]["stereotyped_groups"]}
        people = [person_of(r["answer_info"][f"ans{k}"][1]) for k in range(3) if k != r["unknown_loc"]]
        of_race = [p for p in people if p and p[1].lower() in races]
        if all(people) and len(of_race) == 1:
            votes.add(of_race[0][0])
    return votes.pop() if len(votes) == 1 else None


def comparison_of(answer_info: Mapping, unknown_loc: int) -> str | None:
    """The comparison of a pair from its two people's infos (the authors' metadata script's Match/Mismatch Race x
    Gender), None where an info is not "<gender>-<race>"."""
    people = [person_of(answer_info[f"ans{k}"][1]) for k in range(3) if k != unknown_loc]
    if not all(people):
        return None
    same = (people[0][0] == people[1][0], people[0][1] == people[1][1])  # (gender, race)
    return {(True, False): "race_differs", (False, True): "gender_differs", (False, False): "both_differ"}.get(same)


# ---------------------------------------------------------------------------------------------------- building


def _fix(text: str) -> str:
    for old, new in _TEXT_FIXES:
        text = text.replace(old, new)
    return text


def _fill(text: str, people: tuple[Person, Person], words: tuple[str, str], vowel: bool) -> str:
    """do_slotting for one text: NAME, GEN and WORD slots, the text fixes, the a -> an rule."""
    for k, person in enumerate(people, 1):
        text = text.replace(f"{{{{NAME{k}}}}}", person.name)
        if person.gen is not None:
            text = text.replace(f"{{{{GEN{k}}}}}", person.gen)
    text = _fix(text.replace("{{WORD1}}", words[0]).replace("{{WORD2}}", words[1]))
    return a_to_an(text) if vowel else text


def _label_person(race: str, gen: str, gender: str) -> Person:
    return Person(race, gen, f"{gender}-{race}", _fix(f"{race} {gen}"))


def _pair_items(template, rng, people, subcategory, words, first_id, path) -> list[dict]:
    """The four items of one pair (people: NAME1's, NAME2's): unknown string and answer order drawn here."""
    if people[0].text == people[1].text:
        raise DataError(
            f"NAME1 and NAME2 are both {people[0].text!r}: two people who cannot be told apart", path, template.line
        )
    fillers = [p.name for p in people] + [p.gen or "" for p in people]
    vowel = any(re.match(r"[aeiou]", f.lower()) for f in fillers)
    filled = {c: _fill(t, people, words, vowel) for c, t in template.texts.items()}
    texts = [(p.text, p.info) for p in people]
    items = pair_items(template, filled, texts, rng, first_id, CATEGORY, subcategory, template.races)
    for item in items:
        where = (item["answer_info"], template.races, template.var2, item["question_polarity"], item["unknown_loc"])
        item.update(target_loc=intersectional_target_loc(*where), comparison=COMPARISONS[subcategory])
    return items


def _sample(rng: random.Random, population: list, what: str, path, line: int) -> list:
    if len(population) < NAMES_PER_SLOT:
        raise DataError(f"needs at least {NAMES_PER_SLOT} {what} to draw from, found {len(population)}", path, line)
    return rng.sample(population, NAMES_PER_SLOT)


def _full_name(rng: random.Random, pools: RaceGenderPools, first: str, ethnicity: str, path, line: int) -> str:
    names = pools.last.get(ethnicity, [])
    if not names:
        raise DataError(f"vocabulary_proper_names.csv has no 'last' name of ethnicity {ethnicity!r}", path, line)
    return f"{first} {rng.choice(names)}"


def _targets(template: RaceGenderTemplate, pools: RaceGenderPools, rng: random.Random, path) -> list:
    """The row's targets: race words (role-noun rows) or (name, gender, ethnicity) of first names."""
    targeted = [w for w in pools.races if w in template.races]
    targets = rng.sample(targeted, 5) if len(targeted) > 4 else targeted
    if template.proper:
        first = [f for f in pools.first if f[2] in template.races and f[1] == template.var2]
        what = f"'first' names of gender {template.var2} and an ethnicity in {template.races}"
        return _sample(rng, first, what, path, template.line)
    if not targets:
        what = f"no {RACE_CATEGORY} word of vocabulary.csv is in Known_stereotyped_race {template.races}"
        raise DataError(what, path, template.line)
    return targets


def _proper_people(template, pools, rng, target, path) -> tuple[Person, list[tuple[Person, Person, Person]]]:
    """The target person of a first name and the (a, b, c) non-targets of each k, drawn in the generator's order."""
    name, gender, ethnicity = target
    full = _full_name(rng, pools, name, ethnicity, path, template.line)
    person = Person(full, None, f"{gender}-{ethnicity}", full)
    groups = {
        "of the same ethnicity and another gender": [f for f in pools.first if f[2] == ethnicity and f[1] != gender],
        "of another ethnicity and the same gender": [f for f in pools.first if f[2] != ethnicity and f[1] == gender],
        "of another ethnicity and gender": [f for f in pools.first if f[2] != ethnicity and f[1] != gender],
    }
    samples = [
        _sample(rng, group, f"'first' names {what} than {name} ({gender}-{ethnicity})", path, template.line)
        for what, group in groups.items()
    ]
    trios = []
    for k in range(NAMES_PER_SLOT):
        trio = []
        for sample in samples:
            other, other_gender, other_ethnicity = sample[k]
            full = _full_name(rng, pools, other, other_ethnicity, path, template.line)
            trio.append(Person(full, None, f"{other_gender}-{other_ethnicity}", full))
        trios.append(tuple(trio))
    return person, trios


def _row_items(template, pools, rng, first_id, path) -> list[dict]:
    """Every item of one template row, drawing in the generator's order (module docstring)."""
    items: list[dict] = []
    targets = _targets(template, pools, rng, path)
    for target in targets:
        # drawn on every row (on proper-name rows the targets are names, so every race word; unused there)
        others = [w for w in pools.races if w not in targets]
        what = f"{RACE_CATEGORY} words of vocabulary.csv outside Known_stereotyped_race {template.races}"
        drawn = _sample(rng, others, what, path, template.line)
        if template.proper:
            person, trios = _proper_people(template, pools, rng, target, path)
        else:
            gen, other = template.genders
            person = _label_person(target, gen, template.var2)
            trios = [
                (
                    _label_person(target, other, template.other_var2),  # a: the same race, the other gender
                    _label_person(word, gen, template.var2),  # b: another race, the same gender
                    _label_person(word, other, template.other_var2),  # c: both other
                )
                for word in drawn
            ]
        for trio in trios:
            word1, word2 = draw_words(template.words, rng)  # a one-word WORD2 list fills its slot (difference 2)
            for swapped in (False, True):
                for subcategory, second in zip(COMPARISONS, trio):
                    people = (second, person) if swapped else (person, second)
                    first = first_id + len(items)
                    items += _pair_items(template, rng, people, subcategory, (word1, word2), first, path)
    return items


def build_items(templates_path, vocabulary_path, names_path, seed: int = 0, max_templates: int | None = None):
    """The Race_x_gender items (dicts of lmbias.parsers.bbq.SCHEMA's columns but `biased_locs`) built with
    random.Random(seed) (module docstring); `max_templates`: the first N template rows only."""
    templates = read_race_gender_templates(templates_path)
    pools = read_race_gender_pools(vocabulary_path, names_path)
    rng = random.Random(seed)
    records: list[dict] = []
    for template in templates[:max_templates]:
        records += _row_items(template, pools, rng, len(records), templates_path)
    return records
