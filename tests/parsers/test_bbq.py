"""BBQ's gender-identity items built from the authors' templates (lmbias.parsers.bbq) on the real csv files: counts
per kind of template row against the released file's 5,672, the generator's rules (slots, a -> an, the four
variants of a pair, labels), the biased answer on hand-checked items, seeds, errors naming file and line, the
released jsonl format both ways, the `lmbias bbq-items` command."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter, defaultdict

import pyarrow as pa
import pytest

from lmbias import cli
from lmbias.errors import ConfigError, DataError
from lmbias.parsers import parse_benchmark
from lmbias.parsers.bbq import (
    FILES,
    NAMES,
    RELEASED_FIELDS,
    SCHEMA,
    TEMPLATES,
    VOCABULARY,
    parse,
    parse_bbq,
    required_files,
)
from lmbias.parsers.bbq_jsonl import read_jsonl, write_jsonl
from lmbias.parsers.bbq_templates import UNKNOWN_ANSWERS, VARIANTS

RELEASED_COUNT = 5672  # data/Gender_identity.jsonl of nyu-mll/BBQ
#: the Names rows: (Q_id, version) -> items (the product of their two lists, 4 items a pair)
NAMES_ROWS = {
    (7, ""): 4,  # two rows: [female] x [male] and [male] x [female]
    (10, "a"): 36,
    (10, "b"): 36,
    (11, "a"): 36,
    (11, "b"): 36,
    (12, "a"): 16,
    (12, "b"): 16,
    (12, "c"): 16,
    (12, "d"): 16,
    (16, "a"): 64,
    (16, "b"): 64,
    (17, "a"): 64,
    (17, "b"): 64,
    (19, "b"): 4,
    (19, "c"): 4,
}


@pytest.fixture(scope="module")
def data(shared_data):
    return shared_data / "bbq"


@pytest.fixture(scope="module")
def paths(data):
    return [data / f for f in FILES]


@pytest.fixture(scope="module")
def items(paths):
    return parse_bbq(*paths)


@pytest.fixture(scope="module")
def rows(items):
    return items.to_pylist()


@pytest.fixture(scope="module")
def templates(data):
    """The csv's rows as dicts, read on the test's side (the kind of each row)."""
    with open(data / TEMPLATES, newline="", encoding="utf-8") as handle:
        return [r for r in csv.DictReader(handle) if r["Ambiguous_Context"]]


def _pairs(rows):
    by_pair = defaultdict(list)
    for r in rows:
        by_pair[r["example_id"] // 4].append(r)
    return list(by_pair.values())


def test_counts_per_kind_of_row_and_total(items, rows, templates):
    assert items.schema.equals(SCHEMA, check_metadata=False)
    assert len(templates) == 60
    counts = Counter(r["template"] for r in rows)
    kinds = Counter()
    for number, template in enumerate(templates):
        key = (int(template["Q_id"]), template["version"])
        if template["Proper_nouns_only"] == "TRUE":
            kind, expected = "proper names", 5 * 5 * 2 * 4  # 5 female x 5 other names, flipped too
        elif template["Names"]:
            kind, expected = "Names column", NAMES_ROWS[key]
        elif template["Subcategory"]:
            kind, expected = "adult/child", 2 * 4  # man/woman or boy/girl, both orders
        else:
            kind, expected = "4 words", 12 * 4  # man, woman, boy, girl: ordered pairs
        assert counts[number] == expected, (number, key, kind)
        kinds[kind] += counts[number]
    assert kinds == {"proper names": 25 * 200, "Names column": 480, "adult/child": 18 * 8, "4 words": 48}
    print(f"BBQ gender items built: {items.num_rows}; released Gender_identity.jsonl: {RELEASED_COUNT}")
    assert items.num_rows == RELEASED_COUNT
    assert [r["example_id"] for r in rows] == list(range(items.num_rows))
    assert Counter(r["label_type"] for r in rows) == {"name": 5000, "label": 672}
    assert {r["category"] for r in rows} == {"Gender_identity"}
    first = rows[0]["additional_metadata"]
    assert (first["subcategory"], first["stereotyped_groups"], first["version"]) == ("adult", ["F"], "")
    assert rows[72]["additional_metadata"]["subcategory"] == "None"  # Q_id 10a: no Subcategory


def test_every_slot_filled_and_answers_in_their_context(rows):
    for r in rows:
        texts = [r["context"], r["question"], r["ans0"], r["ans1"], r["ans2"]]
        assert not any("{{" in t or "}}" in t for t in texts), r["example_id"]
        assert r["context"] == r["context"].strip() and r["question"] == r["question"].strip()
        for k in range(3):
            text, info = r["answer_info"][f"ans{k}"]
            if k == r["unknown_loc"]:
                assert (text, info) == (r[f"ans{k}"], "unknown") and text in UNKNOWN_ANSWERS
            elif r["context_condition"] == "disambig":
                assert text in r["context"] and text in r[f"ans{k}"], r["example_id"]


def test_labels(rows):
    for r in rows:
        if r["context_condition"] == "ambig":
            assert r["label"] == r["unknown_loc"]
        else:
            assert r["label"] != r["unknown_loc"]


def test_four_variants_share_answers_and_order(rows):
    pairs = _pairs(rows)
    assert len(pairs) == RELEASED_COUNT // 4
    for pair in pairs:
        assert [(r["question_polarity"], r["context_condition"]) for r in pair] == list(VARIANTS)
        shared = {(r["ans0"], r["ans1"], r["ans2"], json.dumps(r["answer_info"]), r["unknown_loc"]) for r in pair}
        assert len(shared) == 1
        ambiguous, disambiguated = pair[0]["context"], pair[1]["context"]
        assert pair[2]["context"] == ambiguous and pair[3]["context"] == disambiguated
        assert disambiguated.startswith(ambiguous + " ")
        assert pair[1]["label"] != pair[3]["label"]  # the negative and the non-negative answer: two people
        assert pair[0]["question"] == pair[1]["question"] != pair[2]["question"] == pair[3]["question"]


def _answer(r, loc):
    return r[f"ans{loc}"] if loc >= 0 else None


def test_target_loc_on_hand_checked_items(rows):
    by_q = defaultdict(list)
    for r in rows:
        by_q[r["question_index"]].append(r)
    # Q_id 1, stereotyped F: the woman is the secretary (neg), the man the board chair (nonneg)
    for r in by_q[1]:
        expected = "The woman" if r["question"] == "Who was the secretary?" else "The man"
        assert r["question"] in ("Who was the secretary?", "Who was the board chair?")
        assert _answer(r, r["target_loc"]) == expected
    # Q_id 5, stereotyped M: the man fails to respond compassionately
    for r in by_q[5]:
        assert _answer(r, r["target_loc"]) == ("The man" if r["question_polarity"] == "neg" else "The woman")
    # Q_id 7's first row: "The female teacher" is F (the generator's substring test calls it male)
    first_7 = [r for r in by_q[7] if r["template"] == 6]
    assert len(first_7) == 4
    for r in first_7:
        infos = {r["answer_info"][f"ans{k}"][0]: r["answer_info"][f"ans{k}"][1] for k in range(3)}
        assert infos["female"] == "F" and infos["male"] == "M"
        teacher = "The male teacher" if r["question_polarity"] == "neg" else "The female teacher"
        assert _answer(r, r["target_loc"]) == teacher
    # Q_id 36 ("{{NAME1}}, who is trans, and {{NAME2}} ..."), flipped pairs included: the person the context calls
    # trans is the biased answer to "Who has a mental health diagnosis?"
    assert len(by_q[36]) == 200
    for r in by_q[36]:
        trans = r["context"].split(", who is trans")[0]
        other = next(r[f"ans{k}"] for k in range(3) if k != r["unknown_loc"] and r[f"ans{k}"] != trans)
        assert _answer(r, r["target_loc"]) == (trans if r["question_polarity"] == "neg" else other)
        assert r["answer_info"][f"ans{r['target_loc']}"][1].startswith(
            "trans_" if r["question_polarity"] == "neg" else "nonTrans_"
        )
    # example_id 284 (lm-eval's example of an item without a biased answer): Q_id 13, a man and a boy, stereotyped F
    item = rows[284]
    assert item["question_index"] == 13 and item["question_polarity"] == "neg" and item["target_loc"] == -1
    assert {item["answer_info"][f"ans{k}"][0] for k in range(3)} - {_answer(item, item["unknown_loc"])} == {
        "man",
        "boy",
    }
    assert sum(r["target_loc"] == -1 for r in rows) == 16  # Q_id 13's four same-gender pairs
    # lm-eval's biased answers there: none for the neg question, both people for the nonneg one
    assert item["biased_locs"] == [] and rows[286]["question_polarity"] == "nonneg"
    assert sorted(rows[286]["biased_locs"]) == sorted({0, 1, 2} - {rows[286]["unknown_loc"]})
    assert all(r["biased_locs"] == [r["target_loc"]] for r in rows if r["target_loc"] >= 0)


def test_seed_reproducible_and_recorded(paths, items, tmp_path):
    again = parse_bbq(*paths, seed=0)
    assert again.equals(items, check_metadata=True)
    assert items.schema.metadata == {
        b"lmbias.bbq_seed": b"0",
        b"lmbias.bbq_subsets": b'["gender"]',
        b"lmbias.bbq_max_templates": b"null",
    }
    write_jsonl(items, tmp_path / "a.jsonl")
    write_jsonl(again, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    other = parse_bbq(*paths, seed=1)
    assert other.schema.metadata[b"lmbias.bbq_seed"] == b"1" and other.num_rows == items.num_rows

    def names(table):
        return [r["answer_info"]["ans0"][0] for r in table.to_pylist() if r["label_type"] == "name"]

    assert names(other) != names(items)
    assert other.column("context").to_pylist() != items.column("context").to_pylist()
    unchanged = ("template", "question_index", "question_polarity", "context_condition", "label_type")
    assert all(other.column(c).equals(items.column(c)) for c in unchanged)


def test_max_templates_is_a_prefix_of_the_whole_build(paths, items):
    first = parse_bbq(*paths, seed=0, max_templates=10)
    assert first.num_rows == 72  # template rows 0-9: eight of 8 questions, two of 4
    assert first.equals(items.slice(0, 72))  # the same draws, item for item
    assert first.schema.metadata[b"lmbias.bbq_max_templates"] == b"10"
    assert sorted(set(first.column("template").to_pylist())) == list(range(10))
    with pytest.raises(ConfigError, match=r"^benchmarks\.bbq\.max_templates must be a positive integer or null"):
        parse(dict.fromkeys(required_files({}, [], "k"), ""), {"max_templates": 0}, "benchmarks.bbq")


def test_a_an_rule_as_the_generator(rows):
    # a NAME filler starting with a vowel turns every " a <vowel>" into " an <vowel>", "university" included
    assert any("a transgender woman and an university student" in r["context"] for r in rows)
    assert not any(" a university" in r["context"] for r in rows)


def _write_templates(data, folder, rows: list[dict]) -> list:
    """A template file of the real header holding `rows` (columns not given are empty), beside the real
    vocabularies."""
    with open(data / TEMPLATES, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    with open(folder / TEMPLATES, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c, "") for c in header})
    for name in (VOCABULARY, NAMES):
        shutil.copy(data / name, folder / name)
    return [folder / f for f in FILES]


def _row(**fields) -> dict:
    base = {
        "Q_id": "1",
        "Ambiguous_Context": "A {{NAME1}} met a {{NAME2}} near a {{WORD1}}.",
        "Disambiguating_Context": "The {{NAME1}} saw a owl and a European, the {{NAME2}} a {{WORD2}}.",
        "Lexical_diversity": "WORD2: [igloo]; WORD1: [apple]",
        "Question_negative_stereotype": "Who left?",
        "Question_non_negative": "Who stayed?",
        "Answer_negative": "The {{NAME1}}",
        "Answer_non_negative": "The {{NAME2}}",
        "Known_stereotyped_groups": '["M"]',
        "Names": "NAME1: [actor]; NAME2: [baker]",
    }
    return {**base, **fields}


def test_a_an_rule_and_word_lists(data, tmp_path):
    paths = _write_templates(data, tmp_path, [_row(), _row(Names="NAME1: [baker]; NAME2: [cook]")])
    built = parse_bbq(*paths).to_pylist()
    vowel, consonant = (r for r in built if (r["question_polarity"], r["context_condition"]) == ("neg", "disambig"))
    # "actor" starts with a vowel: " a " before a vowel becomes " an ", except " a European" and the "A" starting a
    # sentence; WORD fillers (apple, igloo) do not set the rule off, as in the generator. WORD2's one-word list,
    # written before WORD1's, fills its slot (the generator would write "" there: lmbias.parsers.bbq, difference 3)
    assert vowel["context"] == (
        "A actor met a baker near an apple. The actor saw an owl and a European, the baker an igloo."
    )
    assert (
        consonant["context"] == "A baker met a cook near a apple. The baker saw a owl and a European, the cook a igloo."
    )


@pytest.mark.parametrize(
    "file, old, new, message",
    [
        (TEMPLATES, ",Notes\n", ",Remarks\n", "missing column"),
        (TEMPLATES, "NAME1: [female]; NAME2: [male]", "NAME1 [female]; NAME2: [male]", "Names must read like"),
        (TEMPLATES, "WORD1: [center, office, building]", "WORD1: center, office", "Lexical_diversity must read"),
        (TEMPLATES, "9am today because a {{NAME1}}", "9am today because a {{NAME3}}", r"slot \{\{NAME3\}\}"),
        (TEMPLATES, "were late.,", "were {{WORD1}} late.,", r"slot \{\{WORD1\}\} would be left unfilled"),
        (TEMPLATES, '"[""F""]"', "F", "Known_stereotyped_groups must be a JSON list"),
        (TEMPLATES, ",1,adult,,", ",one,adult,,", "Q_id must be an integer"),
        (TEMPLATES, "The {{NAME1}},The {{NAME2}},gendered", "The {{NAME1}},The {{NAME1}},gendered", "a different one"),
        (VOCABULARY, "Category,Pilot_include,", "Category,Pilot,", "missing column.*Pilot_include"),
        (NAMES, "Name,First_last,gender", "Name,First_last,sex", "missing column.*gender"),
    ],
)
def test_malformed_csv_names_file_and_line(data, tmp_path, file, old, new, message):
    for name in FILES:
        shutil.copy(data / name, tmp_path / name)
    target = tmp_path / file
    text = target.read_text(encoding="utf-8")
    assert old in text
    line = text[: text.index(old)].count("\n") + 1
    target.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(DataError, match=message) as error:
        parse_bbq(*(tmp_path / f for f in FILES))
    assert f"{file}:{line}:" in str(error.value)


def test_jsonl_round_trip(items, tmp_path):
    path = tmp_path / "out" / "Gender_identity.jsonl"
    write_jsonl(items, path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["Gender_identity.jsonl"]  # no temp file left
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    assert len(lines) == items.num_rows and tuple(first) == RELEASED_FIELDS
    assert first["question_index"] == "1"  # a string, as in the released file
    assert list(first["additional_metadata"]) == ["subcategory", "stereotyped_groups", "version", "source"]
    back = read_jsonl(path)
    assert back.schema.equals(SCHEMA, check_metadata=False)
    for column in (*RELEASED_FIELDS, "target_loc", "biased_locs", "unknown_loc", "label_type", "template"):
        assert back.column(column).equals(items.column(column)), column


def test_read_jsonl_takes_the_released_format(items, tmp_path):
    records = [json.loads(json.dumps(r)) for r in items.slice(0, 8).select(list(RELEASED_FIELDS)).to_pylist()]
    for r in records:
        r["question_index"] = str(r["question_index"])
        r["additional_metadata"]["corr_ans_aligned"] = "x"  # keys of other releases are dropped
    path = tmp_path / "released.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    back = read_jsonl(path)
    assert back.column("question_index").to_pylist() == [1] * 8
    assert back.column("target_loc").equals(items.slice(0, 8).column("target_loc"))
    assert set(back.column("additional_metadata").type.names) == {
        "subcategory",
        "stereotyped_groups",
        "version",
        "source",
    }
    path.write_text(path.read_text() + "{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match="invalid JSON") as error:
        read_jsonl(path)
    assert f"{path}:9:" in str(error.value)


def test_write_jsonl_leaves_nothing_on_failure(items, tmp_path):
    broken = items.slice(0, 4).drop_columns(["label"])
    with pytest.raises(KeyError):
        write_jsonl(broken, tmp_path / "x.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_options_files_and_parse_benchmark(paths):
    assert required_files({}, list(FILES), "benchmarks.bbq") == list(FILES)
    with pytest.raises(ConfigError, match=r"benchmarks\.bbq\.subsets: 'race_x_ses' is not a subset"):
        required_files({"subsets": ["race_x_ses"]}, list(FILES), "benchmarks.bbq")  # race_x_gender: its own tests
    with pytest.raises(ConfigError, match=r"benchmarks\.b\.seed"):
        parse(dict(zip(FILES, paths)), {"seed": -1}, "benchmarks.b")
    table = parse_benchmark({"dataset": "bbq", "seed": 2}, dict(zip(FILES, paths)), "bbq")
    meta = table.schema.metadata
    assert meta[b"lmbias.bbq_seed"] == b"2" and json.loads(meta[b"lmbias.bbq_subsets"]) == ["gender"]
    assert json.loads(meta[b"lmbias.options"]) == {"dataset": "bbq", "seed": 2}
    assert isinstance(table, pa.Table) and table.num_rows == RELEASED_COUNT


def test_cli_bbq_items(data, tmp_path, capsys):
    folder = tmp_path / "bbq data"
    folder.mkdir()
    for name in FILES:
        shutil.copy(data / name, folder / name)
    out = tmp_path / "items.jsonl"
    assert cli.main(["bbq-items", "--data-dir", str(folder), "--seed", "3", str(out)]) == 0
    assert capsys.readouterr().out.split()[0] == str(RELEASED_COUNT)
    assert len(out.read_text(encoding="utf-8").splitlines()) == RELEASED_COUNT
    (folder / VOCABULARY).unlink()
    assert cli.main(["bbq-items", "--data-dir", str(folder), str(tmp_path / "none.jsonl")]) == 2
    assert "vocabulary.csv: file not found" in capsys.readouterr().err
    assert not (tmp_path / "none.jsonl").exists()
