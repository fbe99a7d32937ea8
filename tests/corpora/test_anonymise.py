"""Anonymisation as in Manela et al.: person names -> [E1], [E2], ... consistent within a document."""

from __future__ import annotations

import pytest

from helpers.conll_docs import conll_text, tok, with_cells
from lmbias.corpora.anonymise import (
    ANONYMISED_SCHEMA,
    anonymise_document,
    anonymise_documents,
    gold_persons,
    resolve_ner_source,
    sentences_from_table,
    sentences_table,
)
from lmbias.corpora.conll import read_conll
from lmbias.corpora.nlp import load_spacy
from lmbias.errors import ConfigError


@pytest.fixture
def gold_doc(tmp_path):
    s0 = with_cells(
        tok("Mr. John Smith met Mary Jones in Paris .", "NNP NNP NNP VBD NNP NNP IN NNP ."),
        ner={1: "(PERSON*", 2: "*)", 4: "(PERSON*", 5: "*)", 7: "(GPE)"},
        coref={0: "(1", 2: "1)", 4: "(2", 5: "2)"},
    )
    s1 = with_cells(
        tok("He thanked her and Smith left .", "PRP VBD PRP CC NNP VBD ."),
        ner={4: "(PERSON)"},
        coref={0: "(1)", 2: "(2)"},
    )
    # "Jonesy" (a nickname) is in chain 2: the chain, not the string, makes it [E2]; Bob is new.
    s2 = with_cells(
        tok("Jonesy told Bob about Mary Jones .", "NNP VBD NNP IN NNP NNP ."),
        ner={0: "(PERSON)", 2: "(PERSON)", 4: "(PERSON*", 5: "*)"},
        coref={0: "(2)"},
    )
    path = tmp_path / "doc.v4_gold_conll"
    path.write_text(conll_text("nw/test/00/doc_0001", [s0, s1, s2]))
    return read_conll(path)[0]


def test_gold_names_replaced_consistently(gold_doc):
    out = anonymise_document(gold_doc, gold_persons(gold_doc))
    assert [s.words for s in out] == [
        ["Mr.", "[E1]", "met", "[E2]", "in", "Paris", "."],
        ["He", "thanked", "her", "and", "[E1]", "left", "."],
        ["[E2]", "told", "[E3]", "about", "[E2]", "."],
    ]
    # gold POS kept for every remaining token; a name span becomes one NNP token
    assert out[0].tags == ["NNP", "NNP", "VBD", "NNP", "IN", "NNP", "."]
    assert out[1].tags == ["PRP", "VBD", "PRP", "CC", "NNP", "VBD", "."]
    assert [s.persons for s in out] == [2, 1, 3]
    assert out[0].ner is None, "gold NER is carried along only when asked for"
    with_ner = anonymise_document(gold_doc, gold_persons(gold_doc), gold_ner=True)
    assert with_ner[0].ner == ["O", "B-PERSON", "O", "B-PERSON", "O", "B-GPE", "O"]
    assert [len(s.ner) for s in with_ner] == [len(s.words) for s in with_ner]
    assert {s.doc_key for s in out} == {"nw/test/00/doc_0001#000"} and out[2].sentence_id == 2


def test_numbering_restarts_per_document(tmp_path, gold_doc):
    other = tmp_path / "other.v4_gold_conll"
    other.write_text(
        conll_text("nw/test/00/doc_0002", [with_cells(tok("Bob slept .", "NNP VBD ."), ner={0: "(PERSON)"})])
    )
    docs = [gold_doc, read_conll(other)[0]]
    sentences, counts = anonymise_documents(docs, "auto")
    assert sentences[-1].words == ["[E1]", "slept", "."], "Bob is [E3] in the first document, [E1] in his own"
    assert counts == {"documents": 2, "sentences": 4, "ner_source": "gold", "name_mentions": 7, "entities": 4}


def test_without_coreference_names_group_by_string_and_surname(tmp_path):
    s0 = with_cells(tok("John Smith met Anna Smith ."), ner={0: "(PERSON*", 1: "*)", 3: "(PERSON*", 4: "*)"})
    s1 = with_cells(
        tok("John Smith waved ; Anna smiled ; Smith left ."), ner={0: "(PERSON*", 1: "*)", 4: "(PERSON)", 7: "(PERSON)"}
    )
    path = tmp_path / "d.v4_gold_conll"
    path.write_text(conll_text("d", [s0, s1]))
    doc = read_conll(path)[0]
    out = anonymise_document(doc, gold_persons(doc))
    assert out[0].words == ["[E1]", "met", "[E2]", "."]
    # "Anna" belongs to one earlier name only -> [E2]; "Smith" to two -> ambiguous, a new entity
    assert out[1].words == ["[E1]", "waved", ";", "[E2]", "smiled", ";", "[E3]", "left", "."]
    assert out[0].tags is None, "no gold POS: the swapper will tag"


def test_spacy_ner_when_the_corpus_has_no_gold_ner(tmp_path):
    s0 = tok("John Smith met Mary Jones in Paris .")
    s1 = with_cells(tok("Later Mary Jones thanked him ."), coref={1: "(7", 2: "7)"})
    path = tmp_path / "d.v4_auto_conll"
    path.write_text(conll_text("d", [s0, s1]))
    docs = read_conll(path)
    assert resolve_ner_source(docs, "auto") == "spacy"
    nlp = load_spacy("en_core_web_sm", exclude=["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"])
    sentences, counts = anonymise_documents(docs, "auto", nlp=nlp)
    assert [s.words for s in sentences] == [
        ["[E1]", "met", "[E2]", "in", "Paris", "."],
        ["Later", "[E2]", "thanked", "him", "."],
    ]
    assert counts["ner_source"] == "spacy" and counts["entities"] == 2
    with pytest.raises(ConfigError, match=r"corpora\.ontonotes\.ner: spaCy NER is needed"):
        anonymise_documents(docs, "spacy", nlp=None)


def test_ner_source_choice(gold_doc):
    assert resolve_ner_source([gold_doc], "auto") == "gold"
    assert resolve_ner_source([gold_doc], "spacy") == "spacy"
    with pytest.raises(ConfigError, match=r"corpora\.ontonotes\.ner: unknown value 'stanza'"):
        resolve_ner_source([gold_doc], "stanza")


def test_winobias_conll_has_no_names(shared_data):
    # WinoBias talks about occupations, never named people: nothing may be anonymised.
    docs = read_conll(shared_data / "winobias" / "conll_format" / "dev_type2_pro_stereotype.v4_auto_conll")
    nlp = load_spacy("en_core_web_sm", exclude=["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"])
    sentences, counts = anonymise_documents(docs, "auto", nlp=nlp)
    assert counts["ner_source"] == "spacy" and counts["sentences"] == 396
    assert counts["name_mentions"] == 0, [s.words for s in sentences if s.persons]
    assert [s.words for s in sentences] == [d.sentences[0].words for d in docs]


def test_table_round_trip(gold_doc):
    sentences = anonymise_document(gold_doc, gold_persons(gold_doc))
    table = sentences_table(sentences)
    assert table.schema.equals(ANONYMISED_SCHEMA)
    assert table.column("text").to_pylist()[0] == "Mr. [E1] met [E2] in Paris."
    assert table.column("document").to_pylist() == ["nw/test/00/doc_0001"] * 3
    back = sentences_from_table(table)
    assert [(s.words, s.tags, s.persons, s.doc_key, s.ner) for s in back] == [
        (s.words, s.tags, s.persons, s.doc_key, s.ner) for s in sentences
    ]
    sentences, _ = anonymise_documents([gold_doc], "auto")
    assert sentences_from_table(sentences_table(sentences))[2].ner == [
        "B-PERSON",
        "O",
        "B-PERSON",
        "O",
        "B-PERSON",
        "O",
    ]
