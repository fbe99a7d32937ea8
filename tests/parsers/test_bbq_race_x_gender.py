"""BBQ's Race_x_gender items (lmbias.parsers.bbq_intersectional through lmbias.parsers.bbq): the count on the real
files against the released file's 15,960, the generator's three comparisons and their order, hand-made templates
with known items (role nouns with {{GEN}} slots, proper names, lexical diversity), the biased answer, errors naming
file and line, seeds, the released jsonl format both ways, and the `subsets` option."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter, defaultdict

import pytest

from lmbias.errors import ConfigError, DataError
from lmbias.parsers import parse_benchmark
from lmbias.parsers.bbq import (
    FILES,
    NAMES,
    RACE_X_GENDER_FILES,
    RACE_X_GENDER_TEMPLATES,
    RELEASED_FIELDS,
    SCHEMA,
    VOCABULARY,
    parse,
    parse_race_x_gender,
    required_files,
)
from lmbias.parsers.bbq_intersectional import COMPARISONS
from lmbias.parsers.bbq_jsonl import read_jsonl, write_jsonl
from lmbias.parsers.bbq_templates import UNKNOWN_ANSWERS, VARIANTS

RELEASED_COUNT = 15960  # data/Race_x_gender.jsonl of nyu-mll/BBQ (the hub copies' Race_x_gender config)
GENDER_COUNT = 5672
#: the six pairs of each (target, k) in output order: (subcategory, swapped)
PAIR_ORDER = [(sub, swapped) for swapped in (False, True) for sub in COMPARISONS]


@pytest.fixture(scope="module")
def data(shared_data):
    return shared_data / "bbq"


@pytest.fixture(scope="module")
def paths(data):
    return [data / f for f in RACE_X_GENDER_FILES]


@pytest.fixture(scope="module")
def items(paths):
    return parse_race_x_gender(*paths)


@pytest.fixture(scope="module")
def rows(items):
    return items.to_pylist()


@pytest.fixture(scope="module")
def templates(data):
    with open(data / RACE_X_GENDER_TEMPLATES, newline="", encoding="utf-8") as handle:
        return [r for r in csv.DictReader(handle) if r["Ambiguous_Context"]]


def _pairs(rows):
    by_pair = defaultdict(list)
    for r in rows:
        by_pair[r["example_id"] // 4].append(r)
    return list(by_pair.values())


def _people(r) -> list[tuple[str, str]]:
    """The two people's answer_info in answer order (the unknown answer left out)."""
    return [tuple(r["answer_info"][f"ans{k}"]) for k in range(3) if k != r["unknown_loc"]]


def _gender_race(info: str) -> tuple[str, str]:
    gender, _, race = info.partition("-")
    return gender, race


def test_count_on_the_real_file(items, rows, templates):
    assert items.schema.equals(SCHEMA, check_metadata=False)
    assert len(templates) == 42
    counts = Counter(r["template"] for r in rows)
    for number, template in enumerate(templates):
        races = json.loads(template["Known_stereotyped_race"])
        if template["Proper_nouns_only"] == "TRUE":
            expected = 5 * 5 * 3 * 2 * 4  # 5 target names x 5 per comparison x 3 comparisons, both orders
        else:
            expected = len(races) * 5 * 3 * 2 * 4  # every stereotyped race here is a vocabulary word
        assert counts[number] == expected, (number, template["Q_id"])
    print(f"BBQ race x gender items built: {items.num_rows}; released Race_x_gender.jsonl: {RELEASED_COUNT}")
    assert items.num_rows == RELEASED_COUNT
    assert [r["example_id"] for r in rows] == list(range(RELEASED_COUNT))
    assert Counter(r["label_type"] for r in rows) == {"name": 19 * 600, "label": 4560}
    assert Counter(r["comparison"] for r in rows) == {c: RELEASED_COUNT // 3 for c in COMPARISONS.values()}
    assert {r["category"] for r in rows} == {"Race_x_gender"}
    first = rows[0]["additional_metadata"]
    assert first == {
        "subcategory": "intersectional_a",
        "stereotyped_groups": ["Black", "African American"],  # the races only, as released
        "version": "None",  # the file has no version column
        "source": "https://en.wikipedia.org/wiki/Stereotypes_of_African_Americans",
    }
    # lm-eval names example 4,320 as a released item whose answer_info is empty: the first item of the Latino
    # target of Q_id 13, the "Latina woman" (the generator's own fix defeats its substring test); here it is labelled
    item = rows[4320]
    assert item["question_index"] == 13 and item["comparison"] == "gender_differs"
    assert ["Latina woman", "F-Latino"] in item["answer_info"].values()
    assert ["Latino man", "M-Latino"] in item["answer_info"].values()


def test_slots_contexts_and_the_four_variants(rows):
    for r in rows:
        texts = [r["context"], r["question"], r["ans0"], r["ans1"], r["ans2"]]
        assert not any("{{" in t or "}}" in t for t in texts), r["example_id"]
        for k in range(3):
            text, info = r["answer_info"][f"ans{k}"]
            if k == r["unknown_loc"]:
                assert (text, info) == (r[f"ans{k}"], "unknown") and text in UNKNOWN_ANSWERS
            else:
                assert text in r[f"ans{k}"] and (r["context_condition"] == "ambig" or text in r["context"])
        assert r["label"] == r["unknown_loc"] if r["context_condition"] == "ambig" else r["label"] != r["unknown_loc"]
    for pair in _pairs(rows):
        assert [(r["question_polarity"], r["context_condition"]) for r in pair] == list(VARIANTS)
        shared = {(r["ans0"], r["ans1"], r["ans2"], json.dumps(r["answer_info"]), r["comparison"]) for r in pair}
        assert len(shared) == 1
        assert pair[1]["context"].startswith(pair[0]["context"] + " ")
    assert any(" an Asian woman" in r["context"] for r in rows)  # a -> an after a race word
    assert not any(" a Asian" in r["context"] or "Latino woman" in r["context"] for r in rows)


def test_comparisons_their_order_and_who_differs(rows):
    pairs = _pairs(rows)
    for number, pair in enumerate(pairs):
        r = pair[0]
        subcategory, swapped = PAIR_ORDER[number % 6]
        assert r["additional_metadata"]["subcategory"] == subcategory and r["comparison"] == COMPARISONS[subcategory]
        (g1, r1), (g2, r2) = (_gender_race(info) for _, info in _people(r))
        assert (g1 == g2, r1 == r2) == {
            "gender_differs": (False, True),
            "race_differs": (True, False),
            "both_differ": (False, False),
        }[r["comparison"]]
    # the swapped pair is the same two people with NAME1 and NAME2 exchanged: the first context names the other first
    first, again = pairs[0][0], pairs[3][0]
    assert sorted(_people(first)) == sorted(_people(again)) and first["context"] != again["context"]


def test_target_loc_is_the_stereotyped_gender_and_race(rows, templates):
    by_q = {int(t["Q_id"]): t for t in templates}
    for r in rows:
        template = by_q[r["question_index"]]
        races, var2 = json.loads(template["Known_stereotyped_race"]), template["Known_stereotyped_var2"]
        assert r["target_loc"] >= 0
        people = {k: _gender_race(r["answer_info"][f"ans{k}"][1]) for k in range(3) if k != r["unknown_loc"]}
        target = [k for k, (g, race) in people.items() if g == var2 and race in races]
        assert len(target) == 1  # every pair holds the stereotyped person once
        expected = target[0] if r["question_polarity"] == "neg" else next(k for k in people if k != target[0])
        assert r["target_loc"] == expected, r["example_id"]
        # lm-eval's biased answers: its groups are the races, so a gender_differs pair's people are both of them
        if r["comparison"] == "gender_differs":
            assert sorted(r["biased_locs"]) == (sorted(people) if r["question_polarity"] == "neg" else [])
        else:
            assert r["biased_locs"] == [r["target_loc"]]


# ------------------------------------------------------------------------------------------- hand-made templates


def _write(data, folder, rows: list[dict], races=None, names=None) -> list:
    """A Race_x_gender template file of the real header holding `rows` (columns not given are empty); vocabulary
    and names files of the given rows, or the real ones."""
    with open(data / RACE_X_GENDER_TEMPLATES, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    with open(folder / RACE_X_GENDER_TEMPLATES, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in header})
    if races is None:
        shutil.copy(data / VOCABULARY, folder / VOCABULARY)
    else:
        lines = ["Category,Pilot_include,SubCat,Name,Info,Source", "Gender_identity,,adult,man,,"]
        lines += [f"Race_ethnicity,,,{race},," for race in races] + ["Race_ethnicity,No,,Martian,,"]
        (folder / VOCABULARY).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if names is None:
        shutil.copy(data / NAMES, folder / NAMES)
    else:
        lines = ["Name,First_last,gender,ethnicity,source,info"] + [",".join(n) + ",," for n in names]
        (folder / NAMES).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [folder / f for f in RACE_X_GENDER_FILES]


def _gen_row(**fields) -> dict:
    base = {
        "Q_id": "1",
        "Category": "Gender_x_race",
        "Ambiguous_Context": "I saw a {{NAME1}} {{GEN1}} and a {{NAME2}} {{GEN2}} at the station.",
        "Disambiguating_Context": "The {{NAME2}} {{GEN2}} stole a bag; the {{NAME1}} {{GEN1}} called the police.",
        "Names": '["man", "woman"]',
        "Question_negative_stereotype": "Who stole the bag?",
        "Question_non_negative": "Who called the police?",
        "Answer_negative": "The {{NAME2}} {{GEN2}}",
        "Answer_non_negative": "The {{NAME1}} {{GEN1}}",
        "Known_stereotyped_race": '["Asian"]',
        "Known_stereotyped_var2": "F",
        "Var2_info": '["M", "F"]',
        "Notes": "a source",
    }
    return {**base, **fields}


HAND_RACES = ["Asian", "White", "European", "Latino", "Roma", "Arab"]


def _a(phrase: str) -> str:
    """The article the generator's a -> an rule gives (set off here by "Asian" in every pair)."""
    return f"an {phrase}" if phrase[0] in "AEIOU" and not phrase.startswith("European") else f"a {phrase}"


def test_a_gen_template_gives_the_known_items(data, tmp_path):
    paths = _write(data, tmp_path, [_gen_row()], races=HAND_RACES)
    built = parse_race_x_gender(*paths, seed=5).to_pylist()
    assert len(built) == 1 * 5 * 6 * 4  # one target race, the 5 others, six pairs each
    found = Counter()
    for pair in _pairs(built):
        r = pair[0]
        found[r["context"], r["comparison"]] += 1
        assert r["answer_info"][f"ans{r['unknown_loc']}"] == [r[f"ans{r['unknown_loc']}"], "unknown"]
    expected = Counter()
    for race in set(HAND_RACES) - {"Asian"}:
        for second, comparison in [
            ("Asian man", "gender_differs"),  # the same pair again for each other race, as the generator
            (f"{race} woman", "race_differs"),
            (f"{race} man", "both_differ"),
        ]:
            for one, two in (("Asian woman", second), (second, "Asian woman")):
                context = f"I saw {_a(one)} and {_a(two)} at the station."
                expected[context.replace("Latino woman", "Latina woman"), comparison] += 1  # the generator's fix
    assert found == expected
    assert ("I saw an Asian woman and a European man at the station.", "both_differ") in found  # " a European" back
    infos = {tuple(v) for r in built for k, v in r["answer_info"].items() if k != f"ans{r['unknown_loc']}"}
    others = {(f"{race} {gen}", f"{g}-{race}") for race in HAND_RACES for gen, g in (("woman", "F"), ("man", "M"))}
    others = {(text.replace("Latino woman", "Latina woman"), info) for text, info in others}
    assert infos == others and ("Latina woman", "F-Latino") in infos


def test_latino_woman_becomes_latina_and_is_labelled(data, tmp_path):
    row = _gen_row(Known_stereotyped_race='["Hispanic", "Latino"]')
    paths = _write(data, tmp_path, [row], races=HAND_RACES)
    built = parse_race_x_gender(*paths).to_pylist()
    assert len(built) == 120  # "Hispanic" is not a word of this vocabulary: one target race
    assert not any("Latino woman" in r["context"] for r in built)
    target = built[0]  # gender_differs: the Latina woman (NAME1) and the Latino man (NAME2)
    assert target["context"] == "I saw a Latina woman and a Latino man at the station."
    assert ["Latina woman", "F-Latino"] in target["answer_info"].values()
    assert target[f"ans{target['target_loc']}"] == "The Latina woman"  # neg question: the stereotyped person


def test_target_loc_follows_the_person_not_the_slot(data, tmp_path):
    # Answer_negative is NAME2's person (the thief); the stereotyped person (the Asian woman) is NAME1 in the first
    # order of each pair and NAME2 in the swapped one
    paths = _write(data, tmp_path, [_gen_row()], races=HAND_RACES)
    built = parse_race_x_gender(*paths).to_pylist()
    for r in built:
        biased = r[f"ans{r['target_loc']}"]
        assert (biased == "The Asian woman") == (r["question_polarity"] == "neg"), r["example_id"]
        swapped = (r["example_id"] // 4) % 6 >= 3
        if r["context_condition"] == "disambig":  # the right answer is the biased one exactly in the swapped pairs
            assert (r["label"] == r["target_loc"]) == swapped, r["example_id"]
        if r["comparison"] == "gender_differs":  # lm-eval: both Asian people for neg, neither for nonneg
            assert len(r["biased_locs"]) == (2 if r["question_polarity"] == "neg" else 0)
        else:
            assert r["biased_locs"] == [r["target_loc"]]


PROPER_NAMES = (
    [(f"Fb{i}", "first", "F", "Black") for i in range(5)]
    + [(f"Mb{i}", "first", "M", "Black") for i in range(5)]
    + [(f"Fw{i}", "first", "F", "White") for i in range(5)]
    + [(f"Mw{i}", "first", "M", "White") for i in range(5)]
    + [("Jackson", "last", "", "Black"), ("Schmidt", "last", "", "White")]
    + [("Pat", "first_only", "F", "")]  # not a "first" name: never drawn
)


def test_a_proper_name_template_gives_the_known_items(data, tmp_path):
    row = _gen_row(
        Ambiguous_Context="{{NAME1}} and {{NAME2}} were at the station.",
        Disambiguating_Context="{{NAME2}} stole a bag.",
        Names="",
        Var2_info="",
        Proper_nouns_only="TRUE",
        Answer_negative="{{NAME2}}",
        Answer_non_negative="{{NAME1}}",
        Known_stereotyped_race='["Black", "African American"]',
    )
    paths = _write(data, tmp_path, [row], races=HAND_RACES, names=PROPER_NAMES)
    built = parse_race_x_gender(*paths).to_pylist()
    assert len(built) == 5 * 5 * 6 * 4
    assert {r["label_type"] for r in built} == {"name"}
    expected_other = {"gender_differs": ("M", "Black", "Jackson"), "race_differs": ("F", "White", "Schmidt"),
                      "both_differ": ("M", "White", "Schmidt")}  # fmt: skip
    seen = defaultdict(set)
    for r in built:
        people = _people(r)
        target = [p for p in people if p[1] == "F-Black"]
        assert len(target) == 1 and target[0][0].startswith("Fb") and target[0][0].endswith(" Jackson")
        (other,) = [p for p in people if p != target[0]]
        gender, race, last = expected_other[r["comparison"]]
        assert other[1] == f"{gender}-{race}" and other[0].endswith(f" {last}")
        assert other[0][0] == gender and other[0][1] == race[0].lower()  # Mb*, Fw*, Mw*
        seen[r["comparison"]].add(other[0])
        assert r[f"ans{r['target_loc']}"] == (target[0][0] if r["question_polarity"] == "neg" else other[0])
        assert r["context"].split(" and ")[0] in (target[0][0], other[0])
    assert all(len(names) == 5 for names in seen.values())  # each group's 5 names, all drawn


def test_lexical_diversity_is_drawn_once_per_six_pairs(data, tmp_path):
    places = ("on a bench", "under a tree", "by the river")
    row = _gen_row(
        Ambiguous_Context="I saw a {{NAME1}} {{GEN1}} and a {{NAME2}} {{GEN2}} {{WORD1}}.",
        Disambiguating_Context="The {{NAME2}} {{GEN2}} bought {{WORD2}}.",
        Lexical_diversity=f"WORD1: [{', '.join(places)}]; WORD2: [pot]",
    )
    paths = _write(data, tmp_path, [row], races=HAND_RACES)
    built = parse_race_x_gender(*paths, seed=3).to_pylist()
    drawn = []
    for start in range(0, len(built), 24):  # the six pairs of one (target, k) share the WORD choices
        block = built[start : start + 24]
        chosen = {
            p for r in block for p in places if r["context_condition"] == "ambig" and r["context"].endswith(f" {p}.")
        }
        assert len(chosen) == 1
        drawn += chosen
        # a one-word WORD2 list fills its slot (the generator would leave it empty)
        assert all(r["context"].endswith(" bought pot.") for r in block if r["context_condition"] == "disambig")
    assert len(drawn) == 5 and len(set(drawn)) > 1  # drawn per k, not once per row (seed 3)


@pytest.mark.parametrize(
    "old, new, message",
    [
        (",Notes\n", ",Remarks\n", "missing column.*Notes"),
        ('"[""man"", ""woman""]"', '"[man, woman]"', "Names must be a JSON list of 2 different strings"),
        ('"[""man"", ""woman""]"', '"[""man"", ""man""]"', "Names must be a JSON list of 2 different strings"),
        ('M,"[""M"", ""F""]"', 'X,"[""M"", ""F""]"', "Known_stereotyped_var2 'X' is not one of Var2_info"),
        ('"[""Black"", ""African American""]",M', "Black,M", "Known_stereotyped_race must be a non-empty JSON list"),
        ('"[""Black"", ""African American""]",M', '"[""Martian""]",M', "no Race_ethnicity word of vocabulary.csv"),
        (",1,Gender_x_race", ",one,Gender_x_race", "Q_id must be an integer"),
        (
            "{{NAME1}} was just lost, but the other",
            "{{NAME1}} {{GEN1}} was just lost, but the other",
            r"slot \{\{GEN1\}\} would be left unfilled",
        ),  # fmt: skip  (Q_id 2: a proper-name row)
        (
            "The {{NAME2}} {{GEN2}},The {{NAME1}} {{GEN1}},drug use",
            "The {{NAME2}} {{GEN1}},The {{NAME1}} {{GEN1}},drug",
            "must each name one person",
        ),  # fmt: skip
        ("a {{NAME1}} {{GEN1}} came up", "a {{NAME3}} came up", r"slot \{\{NAME3\}\}"),
    ],
)
def test_malformed_rows_name_file_and_line(data, tmp_path, old, new, message):
    for name in RACE_X_GENDER_FILES:
        shutil.copy(data / name, tmp_path / name)
    target = tmp_path / RACE_X_GENDER_TEMPLATES
    text = target.read_text(encoding="utf-8")
    assert old in text
    line = text[: text.index(old)].count("\n") + 1  # every row of the real file is on one line
    target.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(DataError, match=message) as error:
        parse_race_x_gender(*(tmp_path / f for f in RACE_X_GENDER_FILES))
    assert f"{RACE_X_GENDER_TEMPLATES}:{line}:" in str(error.value)


def test_too_few_names_and_missing_name_columns(data, tmp_path):
    row = _gen_row(
        Names="",
        Var2_info="",
        Proper_nouns_only="TRUE",
        Answer_negative="{{NAME2}}",
        Answer_non_negative="{{NAME1}}",
        Known_stereotyped_race='["Black"]',
        Ambiguous_Context="{{NAME1}} and {{NAME2}} met.",
        Disambiguating_Context="{{NAME2}} left.",
    )
    paths = _write(data, tmp_path, [_gen_row(), row], races=HAND_RACES, names=PROPER_NAMES[1:])
    with pytest.raises(DataError, match=r"needs at least 5 'first' names of gender F .* found 4") as error:
        parse_race_x_gender(*paths)
    assert f"{RACE_X_GENDER_TEMPLATES}:3:" in str(error.value)  # the proper-name row's line
    text = (tmp_path / NAMES).read_text(encoding="utf-8").replace("ethnicity", "race", 1)
    (tmp_path / NAMES).write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match="missing column.*ethnicity") as error:
        parse_race_x_gender(*paths)
    assert f"{NAMES}:1:" in str(error.value)


def test_seed_reproducible(paths, items):
    first = parse_race_x_gender(*paths, seed=0, max_templates=4)
    assert first.equals(items.slice(0, first.num_rows))  # a prefix of the whole build, draw for draw
    assert first.num_rows == 240 + 600 + 240 + 600
    again = parse_race_x_gender(*paths, seed=0, max_templates=4)
    assert again.equals(first, check_metadata=True)
    assert json.loads(first.schema.metadata[b"lmbias.bbq_subsets"]) == ["race_x_gender"]
    other = parse_race_x_gender(*paths, seed=1, max_templates=4)
    assert other.column("context").to_pylist() != first.column("context").to_pylist()
    for column in ("template", "question_index", "question_polarity", "context_condition", "comparison"):
        assert other.column(column).equals(first.column(column)), column


def test_jsonl_round_trip(items, tmp_path):
    path = tmp_path / "Race_x_gender.jsonl"
    write_jsonl(items, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    assert len(lines) == RELEASED_COUNT and tuple(first) == RELEASED_FIELDS
    assert first["question_index"] == "1" and first["answer_info"]["ans0"][1] in ("F-Black", "M-Black", "unknown")
    back = read_jsonl(path)
    assert back.schema.equals(SCHEMA, check_metadata=False)
    for column in SCHEMA.names:
        assert back.column(column).equals(items.column(column)), column


def test_read_jsonl_of_released_style_records(items, tmp_path):
    # the released file's Latina answers have an empty answer_info, and a release without the comparison in its
    # subcategory: the comparison comes from the infos; the stereotyped gender from the template's other pairs
    records = [json.loads(json.dumps(r)) for r in items.slice(0, 240).select(list(RELEASED_FIELDS)).to_pylist()]
    for r in records:
        r["additional_metadata"]["subcategory"] = "None"
    records[0]["answer_info"][f"ans{items.slice(0, 1).column('target_loc')[0].as_py()}"] = ["", ""]
    path = tmp_path / "released.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    back = read_jsonl(path).to_pylist()
    built = items.slice(0, 240).to_pylist()
    assert [r["comparison"] for r in back[4:]] == [r["comparison"] for r in built[4:]]
    assert back[0]["comparison"] is None and back[0]["target_loc"] == -1  # one person without an info
    assert [r["target_loc"] for r in back[4:]] == [r["target_loc"] for r in built[4:]]
    assert {r["template"] for r in back} == {0} and {r["label_type"] for r in back} == {"label"}


def test_subsets_option_files_and_template_numbers(data):
    files = {f: data / f for f in {*FILES, *RACE_X_GENDER_FILES}}
    assert required_files({"subsets": ["race_x_gender"]}, list(files), "b") == list(RACE_X_GENDER_FILES)
    assert required_files({"subsets": ["gender", "race_x_gender"]}, [], "b") == [FILES[0], *RACE_X_GENDER_FILES]
    with pytest.raises(ConfigError, match=r"benchmarks\.b\.subsets: 'race_x_ses' is not a subset"):
        required_files({"subsets": ["race_x_ses"]}, [], "benchmarks.b")
    both = parse(files, {"subsets": ["gender", "race_x_gender"], "max_templates": 2}, "b")
    rows = both.to_pylist()
    gender = [r for r in rows if r["category"] == "Gender_identity"]
    race = [r for r in rows if r["category"] == "Race_x_gender"]
    assert len(gender) == 16 and len(race) == 240 + 600
    assert {r["template"] for r in gender} == {0, 1} and {r["template"] for r in race} == {2, 3}  # counting on
    assert [r["example_id"] for r in race] == list(range(len(race)))  # from 0, as the released per-category file
    assert {r["comparison"] for r in gender} == {None}
    alone = parse(files, {"subsets": ["race_x_gender"], "max_templates": 2}, "b")
    drop = ["template"]
    assert alone.drop_columns(drop).equals(both.slice(16).drop_columns(drop))  # the same items with or without gender
    table = parse_benchmark({"dataset": "bbq", "subsets": ["gender", "race_x_gender"]}, files, "bbq")
    assert table.num_rows == GENDER_COUNT + RELEASED_COUNT
    assert json.loads(table.schema.metadata[b"lmbias.bbq_subsets"]) == ["gender", "race_x_gender"]


def test_cli_bbq_items_race_x_gender(data, items, tmp_path, capsys):
    """`lmbias bbq-items --subset race_x_gender`: the Race_x_gender build as the released file's lines, the same
    records as write_jsonl of the parsed table."""
    from lmbias import cli

    out = tmp_path / "race_x_gender.jsonl"
    assert cli.main(["bbq-items", "--data-dir", str(data), "--subset", "race_x_gender", str(out)]) == 0
    assert capsys.readouterr().out.split()[0] == str(RELEASED_COUNT)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == RELEASED_COUNT and {json.loads(line)["category"] for line in lines} == {"Race_x_gender"}
    expected = tmp_path / "expected.jsonl"
    write_jsonl(items, expected)  # the module's parse of the same files, seed 0
    assert out.read_bytes() == expected.read_bytes()
