"""BBQ (Parrish et al., Findings of ACL 2022, "BBQ: A Hand-Built Bias Benchmark for Question Answering"): the
gender-identity items, built from the authors' templates because the released data/Gender_identity.jsonl is not
at hand. The rules are those of the authors' generator (generate_from_template_all_categories.py and utils.py of
nyu-mll/BBQ, category Gender_identity); the code is ours. The optional second subset, Race_x_gender (option
`subsets: [race_x_gender]` or `[gender, race_x_gender]`), has its rules in lmbias.parsers.bbq_intersectional.

Templates (`new_templates - Gender_identity.csv`): every row whose Ambiguous_Context is not empty, numbered 0, 1,
... in file order (`template`, the unit the metrics bootstrap over). Each row gives pairs of fillers for its slots
{{NAME1}} and {{NAME2}}:

* a `Names` column ("NAME1: [a, b]; NAME2: [c]", the slot names also written "{{NAME1}}") overrides everything
  else: every NAME1 word with every NAME2 word (the cross product, not flipped);
* proper-name rows (Proper_nouns_only TRUE): 5 female `first_only` names of vocabulary_proper_names.csv drawn for
  NAME1 and, for each of them, 5 names of the other gender drawn for NAME2; every pair is generated twice, as
  drawn and flipped (NAME1 and NAME2 swapped), so a row gives 5 * 5 * 2 = 50 pairs;
* otherwise the Gender_identity words of vocabulary.csv (Pilot_include not "No": man, woman, boy, girl), only
  those of the row's Subcategory when it is set (adult: man, woman; child: boy, girl): every ordered pair of two
  different words, which already holds both orders, so these rows are not flipped (adult rows: 2 pairs; the row
  without a subcategory: 4 * 3 = 12 pairs). As in the generator, a word list of more than 4 words (more than 5
  for a subcategory) is cut to a sample of 5; with the real vocabulary that never happens, and nothing is drawn.

{{WORD1}}/{{WORD2}} (Lexical_diversity "WORD1: [..]; WORD2: [..]") get one random choice of their list per pair,
kept for the flipped pair. After filling, the generator's a -> an rule: when a NAME filler starts with a vowel
(a WORD filler never sets it off), " a " before any word that starts with a vowel becomes " an " everywhere in
the pair's texts, then " an European" is put back to " a European". As in the generator this writes "an
university student" (Q_id 10 and 11) and "an" before a WORD filler, and never touches an "A" that starts a text
(the rule wants a space before the article). Each pair
gives four items, example_id counting up in this order: (neg, ambig), (neg, disambig), (nonneg, ambig), (nonneg,
disambig). The ambiguous context is the filled Ambiguous_Context, the disambiguated one the filled ambiguous
context, stripped, a space and the filled Disambiguating_Context; both and the questions are stripped, the answers
are not. The answers are Answer_negative, Answer_non_negative and one of the generator's ten "unknown" strings
(UNKNOWN_ANSWERS), shuffled once per pair: the four items share answers and order. `label` is the unknown answer
for ambig items and the negative/non-negative answer for disambig items.

answer_info {"ans0": [text, info], ...}: the unknown answer has [its string, "unknown"]; a person has [the filler,
its info]: for proper names the name's gender (F/M), "<NAMEk_info>_<gender>" where the template has an info for
the slot; otherwise the slot's NAMEk_info, or the filler itself where the template has none (Race_x_gender items:
"<gender>-<race>", "F-Black"). additional_metadata: subcategory (the row's Subcategory, "None" when empty),
stereotyped_groups (Known_stereotyped_groups, a JSON list), version (the version column, "" when the row leaves it
empty as in the released file; "None" only when the file has no version column) and source (Notes). category is
"Gender_identity" (the generator's `cat`, not the csv's "GenderIdentity").

lmbias's own columns: `label_type` ("name" for proper-name rows, "label" otherwise, as the BBQ repository's
supplemental metadata), `unknown_loc` (0-2) and `target_loc`, the biased answer: for a neg question the answer of
a stereotyped group, for a nonneg question the person who is not of one; -1 when that is not exactly one answer
(the 4-word row's same-gender pairs: "a man or a boy", stereotyped F, has no biased answer to the neg question
and two to the nonneg one; `biased_locs` lists every answer the rule finds, as lm-eval counts them: both people
of those nonneg questions). An answer's groups are the lowercased "_"-separated parts of its info, plus "f" for
the words woman/girl and "m" for man/boy in its text or info, an intersectional info's gender and race taken apart
("F-Black": f, black); this is lm-evaluation-harness's bbq `process_docs` rule, and bench/lm_eval_bbq_items.py checks
that both give the same biased answers for every item. `comparison` is null for the gender items (Race_x_gender:
which of race and gender the pair's two people differ in).

Randomness: the generator draws with Python's `random` without a seed; here `random.Random(seed)` (option
`seed`, default 0) draws in the generator's order (per row: the vocabulary samples; the 5 female names; per
female name the 5 others; per pair the WORD choices, then the unknown string and the shuffle, then those of the
flipped pair), so the same seed gives the same table, and the generator run alone on this category after
`random.seed(seed)` draws the same names, words, unknown strings and orders: bench/lm_eval_bbq_items.py
--generator runs it so, and for seeds 0 and 7 its 5,672 JSON lines are write_jsonl's, byte for byte, but for the
answer_info of the 204 items of differences 1 and 2 below. A build is the same templates with another sample than
the released file, which cannot be rebuilt item for item (its draws came after those of the categories the
generator built before this one).

Counts: 60 template rows, 25 of them proper-name rows (200 items each), 18 adult/child rows (8 items), the 4-word
row (48), 16 Names rows (their two lists' product * 4: 1 * 1, 3 * 3, 2 * 2 or 4 * 4 pairs; 480 items in all):
5,672 items, the released file's count.

Where this differs from the generator (each a bug or a silent gap of the generator; only the first two occur in
the real templates):

1. Which person an answer is comes from the template (Answer_negative names {{NAME1}} or {{NAME2}}), not from
   the generator's substring tests of the fillers in the answer texts. Those mislabel template Q_id 7's first row
   (NAME1 female, NAME2 male): "male" is a substring of "The female teacher", so both answers get ["male", "M"]
   (4 items; lm-eval then counts both people as biased for the neg question and neither for the nonneg one).
2. In a flipped proper-name pair the template's NAME1_info/NAME2_info stays with its slot (the person the text
   calls trans) and the gender with the name. The generator hands each name the info of the slot it had before
   the flip, so in the flipped halves of Q_id 35 and 36 ("{{NAME1}}, who is trans, ...") the trans person is
   labelled nonTrans and the other trans (2 rows * 25 pairs * 4 = 200 items).
3. A WORD2 list of one word fills {{WORD2}} with it (the generator draws only from lists of two or more and
   fills an empty string); WORD1/WORD2 and NAME1/NAME2 lists are found by their keys in any order (the
   generator forgets WORD2 when it is not the last part of the string).
4. Each slot takes its own NAMEk_info (the generator looks only at NAME1_info to decide whether both are set).
5. Malformed input is an error naming file and line instead of odd items: a missing column, a Names or
   Lexical_diversity string that does not parse, a Known_stereotyped_groups that is not a JSON list of strings,
   a Q_id that is not an integer, a slot left unfilled (the generator writes "{{WORD1}}" or "" into the text), an
   answer that does not name exactly one of the two slots, a pair whose two fillers are the same word, a row
   without a pair. A whitespace-only Ambiguous_Context counts as empty.
6. The generator's fixes for other categories ("lesbian man", "Latino woman") are not applied (no gender template
   can produce them), nor its GEN/OCC slots (intersectional templates only: the Race_x_gender build applies both).

Reading and checking the csv files: lmbias.parsers.bbq_templates. Subsets (option `subsets`, default [gender]):
`gender` (this build) and `race_x_gender` (`new_templates - Race_x_gender.csv`, 15,960 items, the released count;
lmbias.parsers.bbq_intersectional). Several subsets are concatenated in the order given, each built with its own
random.Random(seed) (so its items do not depend on the others), example_id counting from 0 in each (as in the
released per-category files: (category, example_id) is the key of a table of several) and `template` counting on
across them (parse), so the metrics' bootstrap units never collide; the metrics report race_x_gender apart
(lmbias.metrics.bbq).

The released jsonl format (write_jsonl, read_jsonl): lmbias.parsers.bbq_jsonl.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lmbias.errors import ConfigError, DataError
from lmbias.parsers import bbq_intersectional
from lmbias.parsers.bbq_templates import (
    CATEGORY,
    NAMES_PER_SLOT,
    Pools,
    Template,
    a_to_an,
    draw_words,
    pair_items,
    read_pools,
    read_templates,
)
from lmbias.parsers.common import table

TEMPLATES = "new_templates - Gender_identity.csv"
VOCABULARY = "vocabulary.csv"
NAMES = "vocabulary_proper_names.csv"
FILES = (TEMPLATES, VOCABULARY, NAMES)
RACE_X_GENDER_TEMPLATES = bbq_intersectional.TEMPLATES
#: the race_x_gender subset's files (lmbias.parsers.bbq_intersectional)
RACE_X_GENDER_FILES = (RACE_X_GENDER_TEMPLATES, VOCABULARY, NAMES)
#: subset (option `subsets`) -> its template file
SUBSET_FILES = {"gender": TEMPLATES, "race_x_gender": RACE_X_GENDER_TEMPLATES}
#: the released file's fields, in its key order (write_jsonl)
RELEASED_FIELDS = (
    "example_id",
    "question_index",
    "question_polarity",
    "context_condition",
    "category",
    "answer_info",
    "additional_metadata",
    "context",
    "question",
    "ans0",
    "ans1",
    "ans2",
    "label",
)
METADATA_KEYS = ("subcategory", "stereotyped_groups", "version", "source")

_ANSWER = pa.list_(pa.string())

#: The dataset (config.yaml `data.<dataset>`, a benchmark's `dataset`) this module parses.
DATASET = "bbq"
SCHEMA = pa.schema(
    [
        ("example_id", pa.int32()),
        ("question_index", pa.int32()),  # the template's Q_id
        ("question_polarity", pa.string()),  # neg | nonneg
        ("context_condition", pa.string()),  # ambig | disambig
        ("category", pa.string()),
        ("answer_info", pa.struct([("ans0", _ANSWER), ("ans1", _ANSWER), ("ans2", _ANSWER)])),
        (
            "additional_metadata",
            pa.struct(
                [
                    ("subcategory", pa.string()),
                    ("stereotyped_groups", pa.list_(pa.string())),
                    ("version", pa.string()),
                    ("source", pa.string()),
                ]
            ),
        ),
        ("context", pa.string()),
        ("question", pa.string()),
        ("ans0", pa.string()),
        ("ans1", pa.string()),
        ("ans2", pa.string()),
        ("label", pa.int32()),  # the right answer (0-2)
        ("template", pa.int32()),  # 0-based template row among the kept rows (the bootstrap unit)
        ("label_type", pa.string()),  # name (proper names) | label (role nouns: "the man")
        ("unknown_loc", pa.int32()),  # the unknown answer (0-2)
        ("target_loc", pa.int32()),  # the biased answer (0-2), -1: none
        ("biased_locs", pa.list_(pa.int32())),  # every answer lm-eval counts as biased (biased_answers)
        # race_x_gender: gender_differs | race_differs | both_differ (the pair's comparison); null for gender items
        ("comparison", pa.string()),
    ]
)
OPTIONS = ("seed", "subsets", "max_templates")
#: the template reader's source: an input of rule parse_benchmark like this module (editing it re-parses)
RESOURCE_FILES = ["src/lmbias/parsers/bbq_templates.py", "src/lmbias/parsers/bbq_intersectional.py"]

_GENDER_WORDS = {"woman": "f", "girl": "f", "man": "m", "boy": "m"}
#: lm-eval's separators of intersectional infos ("F-Black" -> "F_Black")
_INTERSECTIONAL_INFO = re.compile(r"(M|F|lowSES|highSES)-")


# ---------------------------------------------------------------------------------------------------- building


def _fill(text: str, name1: str, name2: str, word1: str, word2: str, vowel: bool) -> str:
    """do_slotting for one text: the slots, then the a -> an rule when a NAME filler starts with a vowel."""
    text = text.replace("{{NAME1}}", name1).replace("{{NAME2}}", name2)
    text = text.replace("{{WORD1}}", word1).replace("{{WORD2}}", word2)
    return a_to_an(text) if vowel else text


def _vocabulary_words(template: Template, pools: Pools, rng: random.Random) -> list[str]:
    """The row's word list from the vocabulary, with the generator's draws: a sample of 5 when the category has
    more than 4 words, the row's subcategory's words (a sample of 5 when more than 5). Drawn for every row, as the
    generator does, even where Names or proper names replace the list."""
    words = pools.words
    if len(words) > 4:
        words = rng.sample(words, 5)
    elif len(words) < 2:
        words = []
    if template.subcategory:
        words = pools.subcategories.get(template.subcategory, [])
        if len(words) > 5:
            words = rng.sample(words, 5)
    return words


def answer_groups(text: str, info: str) -> set[str]:
    """An answer's group labels: the lowercased "_"-separated parts of its info, an intersectional info's gender and
    race apart ("F-Black": f, black), plus "f" for the words woman/girl and "m" for man/boy in its text or info
    (lm-eval's bbq process_docs rule)."""
    groups = {part.lower() for part in _INTERSECTIONAL_INFO.sub(r"\1_", info).split("_")}
    for word in re.findall(r"[a-z]+", f"{text} {info}".lower()):
        if word in _GENDER_WORDS:
            groups.add(_GENDER_WORDS[word])
    return groups


def biased_answers(answer_info: Mapping, stereotyped_groups: Sequence[str], polarity: str, unknown_loc: int):
    """The answers (0-2) that are the biased one: for a neg question those of a stereotyped group, for a nonneg
    question the people (not the unknown answer) of none."""
    stereotyped = {g.lower() for g in stereotyped_groups}
    found = []
    for k in range(3):
        text, info = answer_info[f"ans{k}"]
        member = bool(answer_groups(text, info) & stereotyped)
        if (polarity == "neg" and member) or (polarity == "nonneg" and k != unknown_loc and not member):
            found.append(k)
    return found


def target_loc(answer_info: Mapping, stereotyped_groups: Sequence[str], polarity: str, unknown_loc: int) -> int:
    """The biased answer, -1 when there is not exactly one (biased_answers)."""
    found = biased_answers(answer_info, stereotyped_groups, polarity, unknown_loc)
    return found[0] if len(found) == 1 else -1


def _info(template: Template, slot: int, filler: str, pools: Pools) -> str:
    info = template.slot_info[slot]
    if template.proper:
        gender = pools.gender.get(filler, filler)
        return f"{info}_{gender}" if info else gender
    return info or filler


def _pair_items(template, pools, rng, fillers, words, first_id, path) -> list[dict]:
    """The four items of one pair (fillers: NAME1, NAME2): unknown string and answer order drawn here."""
    word1, word2 = words
    vowel = any(re.match(r"[aeiou]", f.lower()) for f in fillers)
    filled = {c: _fill(t, *fillers, word1, word2, vowel) for c, t in template.texts.items()}
    if fillers[0] == fillers[1]:
        raise DataError(
            f"NAME1 and NAME2 are both {fillers[0]!r}: two people who cannot be told apart", path, template.line
        )
    people = [(fillers[k], _info(template, k, fillers[k], pools)) for k in range(2)]
    subcategory = template.subcategory or "None"
    items = pair_items(template, filled, people, rng, first_id, CATEGORY, subcategory, template.groups)
    for item in items:
        where = (item["answer_info"], template.groups, item["question_polarity"], item["unknown_loc"])
        item.update(target_loc=target_loc(*where), biased_locs=biased_answers(*where), comparison=None)
    return items


def _row_items(template: Template, pools: Pools, rng: random.Random, first_id: int, path) -> list[dict]:
    """Every item of one template row, drawing in the generator's order (module docstring)."""
    vocabulary = _vocabulary_words(template, pools, rng)
    if template.proper:
        # NAME1: a sample of the female names; NAME2, drawn per NAME1 name: the names of another gender
        first = rng.sample(pools.female, NAMES_PER_SLOT)
        plan = []
        for name in first:
            others = [n for n in pools.gender if pools.gender[n] != pools.gender[name]]  # unique, in file order
            plan.append((name, lambda others=others: rng.sample(others, NAMES_PER_SLOT)))
    elif template.names:
        plan = [(w, lambda: template.names[1]) for w in template.names[0]]
    else:
        if not vocabulary:
            what = f"subcategory {template.subcategory!r}" if template.subcategory else CATEGORY
            raise DataError(f"no vocabulary.csv words for {what}: no pairs", path, template.line)
        plan = [(w, lambda w=w: [v for v in vocabulary if v != w]) for w in vocabulary]
    items: list[dict] = []
    for name1, seconds in plan:
        for name2 in seconds():  # drawn here: after the previous NAME1's pairs, as the generator draws
            words = draw_words(template.words, rng)  # a one-word WORD2 list fills its slot (docstring, 3)
            items += _pair_items(template, pools, rng, (name1, name2), words, first_id + len(items), path)
            if template.proper:
                flipped = (name2, name1)
                items += _pair_items(template, pools, rng, flipped, words, first_id + len(items), path)
    if not items:
        raise DataError("this row gives no pair of people", path, template.line)
    return items


def _metadata(seed: int, subsets: Sequence[str], max_templates: int | None = None) -> dict[bytes, bytes]:
    return {
        b"lmbias.bbq_seed": str(seed).encode(),
        b"lmbias.bbq_subsets": json.dumps(list(subsets)).encode(),
        b"lmbias.bbq_max_templates": json.dumps(max_templates).encode(),
    }


def parse_bbq(templates_path, vocabulary_path, names_path, seed: int = 0, max_templates: int | None = None) -> pa.Table:
    """The gender-identity items built from the three csv files with random.Random(seed) (module docstring).

    `max_templates`: the items of the first N template rows only (quick runs). The draws run in the file's order,
    so they are the first items of the whole build, item for item."""
    templates = read_templates(templates_path)
    pools = read_pools(vocabulary_path, names_path)
    rng = random.Random(seed)
    records: list[dict] = []
    for template in templates[:max_templates]:
        records += _row_items(template, pools, rng, len(records), templates_path)
    return table(records, SCHEMA).replace_schema_metadata(_metadata(seed, ["gender"], max_templates))


def _with_biased_locs(records: list[dict]) -> list[dict]:
    for r in records:
        groups = r["additional_metadata"]["stereotyped_groups"]
        r["biased_locs"] = biased_answers(r["answer_info"], groups, r["question_polarity"], r["unknown_loc"])
    return records


def parse_race_x_gender(
    templates_path, vocabulary_path, names_path, seed: int = 0, max_templates: int | None = None
) -> pa.Table:
    """The Race_x_gender items built from the three csv files with random.Random(seed) (the rules:
    lmbias.parsers.bbq_intersectional); `max_templates` as parse_bbq's."""
    records = bbq_intersectional.build_items(templates_path, vocabulary_path, names_path, seed, max_templates)
    metadata = _metadata(seed, ["race_x_gender"], max_templates)
    return table(_with_biased_locs(records), SCHEMA).replace_schema_metadata(metadata)


#: subset -> its build (templates, vocabulary, names, seed, max_templates)
SUBSET_BUILDS = {"gender": parse_bbq, "race_x_gender": parse_race_x_gender}


# ---------------------------------------------------------------------------------------------------- options


def _options(options: Mapping, key: str) -> tuple[int, list[str], int | None]:
    seed = options.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"{key}.seed must be a non-negative integer, got {seed!r}")
    subsets = options.get("subsets", ["gender"])
    if not isinstance(subsets, list) or not subsets or len(set(map(str, subsets))) != len(subsets):
        raise ConfigError(f"{key}.subsets must be a non-empty list of subsets without repeats, got {subsets!r}")
    for subset in subsets:
        if subset not in SUBSET_FILES:
            raise ConfigError(f"{key}.subsets: {subset!r} is not a subset (one of {sorted(SUBSET_FILES)})")
    max_templates = options.get("max_templates")
    if max_templates is not None and (
        isinstance(max_templates, bool) or not isinstance(max_templates, int) or max_templates < 1
    ):
        raise ConfigError(f"{key}.max_templates must be a positive integer or null, got {max_templates!r}")
    return seed, subsets, max_templates


def required_files(options: Mapping, available: Sequence[str], key: str) -> list[str]:
    _, subsets, _ = _options(options, key)
    return [SUBSET_FILES[s] for s in subsets] + [VOCABULARY, NAMES]


def parse(files: Mapping[str, str | os.PathLike], options: Mapping, key: str) -> pa.Table:
    """The items of every subset in the order of `subsets`, each built with its own random.Random(seed) (a subset's
    items are the same with or without the others). example_id counts from 0 in each subset, as in the released
    per-category files; `template` counts on across the subsets (the second subset's first template row is the
    number after the first subset's last), so template numbers never collide."""
    seed, subsets, max_templates = _options(options, key)
    parsed, offset = [], 0
    for subset in subsets:
        built = SUBSET_BUILDS[subset](files[SUBSET_FILES[subset]], files[VOCABULARY], files[NAMES], seed, max_templates)
        templates = built.column("template")
        at = built.schema.get_field_index("template")
        built = built.set_column(at, SCHEMA.field("template"), pc.add(templates, pa.scalar(offset, pa.int32())))
        offset += pc.max(templates).as_py() + 1
        parsed.append(built)
    return pa.concat_tables(parsed).replace_schema_metadata(_metadata(seed, subsets, max_templates))
