"""GAP sentence splitting: ids and offsets kept, exact duplicates removed and counted, bad input."""

from __future__ import annotations

import pytest

from lmbias.corpora.sentences import SENTENCES_SCHEMA, SPLITTERS, gap_sentences, load_splitter, split_contexts
from lmbias.errors import ConfigError, DataError
from lmbias.parsers.gap import parse_gap


@pytest.fixture(scope="module")
def parser_nlp():
    return load_splitter("en_core_web_sm", "parser")


@pytest.fixture(scope="module")
def gap_validation(shared_data):
    return parse_gap({"validation": shared_data / "gap" / "gap-validation.tsv"})


def test_split_keeps_ids_offsets_and_counts_duplicates(parser_nlp):
    texts = [
        "Alice met Bob in Paris. She liked him. The end.",
        "  \n\nHe left early.  He came back!\n",
        "Alice met Bob in Paris. She liked him. The end.",  # a duplicated context
        "",
        "The end. A new story begins here.",
    ]
    # gold pronoun-name links: "She" of a -> Alice; "him" of c (a's duplicate) -> Bob
    links = {"a": [(24, 27, "Alice")], "c": [(34, 37, "Bob")]}
    table, counts = split_contexts(
        ["a", "b", "c", "d", "e"], ["development"] * 4 + ["test"], texts, parser_nlp, links=links
    )
    assert table.schema.equals(SENTENCES_SCHEMA)
    rows = table.to_pylist()
    assert [(r["doc_id"], r["sentence_id"], r["text"]) for r in rows] == [
        ("a", 0, "Alice met Bob in Paris."),
        ("a", 1, "She liked him."),
        ("a", 2, "The end."),
        ("b", 0, "He left early."),
        ("b", 1, "He came back!"),
        ("e", 1, "A new story begins here."),  # "The end." (e, 0) was seen in a
    ]
    assert rows[-1]["split"] == "test"
    by_id = dict(zip("abcde", texts))
    for r in rows:  # offsets point into the context; surrounding whitespace and blank lines are trimmed
        assert by_id[r["doc_id"]][r["start_char"] : r["end_char"]] == r["text"] == r["text"].strip()
    assert counts == {
        "contexts": 5,
        "duplicate_contexts": 1,
        "sentences_split": 10,
        "duplicates_removed": 4,
        "sentences": 6,
        "protected_spans": 2,
    }
    # the removed duplicate (c) hands its link to the kept copy: the same text, the same offsets
    assert rows[1]["protect_spans"] == [
        {"start": 0, "end": 3, "name": "Alice"},
        {"start": 10, "end": 13, "name": "Bob"},
    ]
    assert all(r["protect_spans"] == [] for i, r in enumerate(rows) if i != 1)
    kept, no_dedup = split_contexts(["a", "b", "c", "d", "e"], ["x"] * 5, texts, parser_nlp, dedup=False)
    assert kept.num_rows == 10 and no_dedup["duplicates_removed"] == 0


def test_duplicate_document_ids_are_an_error(parser_nlp):
    with pytest.raises(DataError, match="document id 'a' occurs twice"):
        split_contexts(["a", "a"], ["x", "x"], ["One.", "Two."], parser_nlp)


def test_gap_validation_split(gap_validation, parser_nlp):
    table, counts = gap_sentences(gap_validation, parser_nlp)
    # pinned for en_core_web_sm 3.8.0's parser (docs/corpora.md, "GAP sentence count": ours and why it differs)
    assert counts == {
        "contexts": 454,
        "duplicate_contexts": 0,
        "sentences_split": 1403,
        "duplicates_removed": 20,
        "sentences": 1383,
        "protected_spans": 392,
    }
    rows = table.to_pylist()
    texts = {r["id"]: r["text"] for r in gap_validation.to_pylist()}
    kept = {r["text"] for r in rows}
    assert len(kept) == len(rows)
    # one context loses every sentence: it repeats an earlier window of the same Wikipedia page
    assert set(texts) - {r["doc_id"] for r in rows} == {"validation-406"}
    lost, _ = split_contexts(["x"], ["x"], [texts["validation-406"]], parser_nlp)
    assert lost.num_rows >= 2 and set(lost.column("text").to_pylist()) <= kept
    for r in rows:
        assert texts[r["doc_id"]][r["start_char"] : r["end_char"]] == r["text"]
    # every one of the 392 gold pronoun-name links (A-coref or B-coref TRUE) lands on its pronoun: in its own
    # context's sentence, or (its sentence a removed duplicate) in the kept copy of that sentence
    linked = [g for g in gap_validation.to_pylist() if g["a_coref"] or g["b_coref"]]
    landed = {}
    for r in rows:
        for span in r["protect_spans"]:
            owners = [
                g
                for g in linked
                if g["pronoun_offset"] - span["start"] >= 0
                and g["text"][g["pronoun_offset"] - span["start"] :][: len(r["text"])] == r["text"]
                and span["name"] == (g["a"] if g["a_coref"] else g["b"])
            ]
            assert owners and r["text"][span["start"] : span["end"]] == owners[0]["pronoun"]
            landed.update((g["id"], r["doc_id"]) for g in owners)
    assert len(linked) == 392 and set(landed) == {g["id"] for g in linked}
    assert sum(own != kept for own, kept in landed.items()) == 5  # links moved to a duplicate's kept copy
    # sentences of one context are in order and do not overlap
    for doc_id in ("validation-1", "validation-200"):
        spans = [(r["start_char"], r["end_char"]) for r in rows if r["doc_id"] == doc_id]
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and len(spans) >= 2


@pytest.mark.parametrize("splitter", SPLITTERS)
def test_every_splitter_splits(splitter):
    nlp = load_splitter("en_core_web_sm", splitter)
    table, _ = split_contexts(["a"], ["x"], ["Mr. Smith went home. He slept well. Then he woke up."], nlp)
    assert table.column("text").to_pylist() == ["Mr. Smith went home.", "He slept well.", "Then he woke up."]
    assert nlp.pipe_names[-1] == {"parser": "parser", "senter": "senter", "sentencizer": "sentencizer"}[splitter]
    assert "ner" not in nlp.pipe_names and "tagger" not in nlp.pipe_names


def test_unknown_splitter_names_the_key():
    with pytest.raises(ConfigError, match=r"corpora\.gap\.splitter: unknown splitter 'nltk'"):
        load_splitter("en_core_web_sm", "nltk")


def test_gap_table_without_text_column(parser_nlp, gap_validation):
    with pytest.raises(DataError, match=r"GAP table lacks columns \['text'\]"):
        gap_sentences(gap_validation.drop_columns(["text"]), parser_nlp)


def test_non_utf8_gap_file_names_file_and_line(tmp_path, shared_data):
    # Splitting reads the parsed GAP table; a bad byte in the raw TSV stops parsing with file and line.
    data = (shared_data / "gap" / "gap-validation.tsv").read_bytes().split(b"\n")
    data[3] = data[3].replace(b" ", b" \xff", 1)
    bad = tmp_path / "gap-validation.tsv"
    bad.write_bytes(b"\n".join(data))
    with pytest.raises(DataError, match=r"gap-validation\.tsv:4: not valid UTF-8: byte 0xff"):
        parse_gap({"validation": bad})
