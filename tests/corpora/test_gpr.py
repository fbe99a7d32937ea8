"""GPR task data (Manela et al. 3.3): masked gendered pronouns, -U and -A sets, a seeded 80/20 split by
document. Built end to end from the WinoBias conll files (users point the workflow at OntoNotes)."""

from __future__ import annotations

import collections

import pytest

from lmbias.corpora.anonymise import AnonymisedSentence, anonymise_documents
from lmbias.corpora.conll import read_conll_files
from lmbias.corpora.counterfactual import Swapper
from lmbias.corpora.gpr import GPR_SCHEMA, PRONOUN_PLACEHOLDER, PRONOUNS, assign_splits, gpr_examples, spacy_tags
from lmbias.corpora.nlp import load_spacy
from lmbias.corpora.swap_lexicon import load_lexicon
from lmbias.errors import ConfigError

OPPOSITE = {
    ("he", "she"),
    ("she", "he"),
    ("him", "her"),
    ("her", "him"),
    ("her", "his"),
    ("his", "her"),
    ("his", "hers"),
    ("hers", "his"),
    ("himself", "herself"),
    ("herself", "himself"),
}


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm", exclude=["parser", "lemmatizer", "senter"])


@pytest.fixture(scope="module")
def swapper(shared_data, nlp):
    lexicon = load_lexicon(
        cds_pairs=shared_data / "cds" / "cda_default_pairs.json", winobias_dir=shared_data / "winobias"
    )
    return Swapper(lexicon, intervention="grammatical", nlp=nlp)


@pytest.fixture(scope="module")
def winobias_gpr(shared_data, nlp, swapper):
    files = sorted((shared_data / "winobias" / "conll_format").glob("*_conll"))
    sentences, _ = anonymise_documents(read_conll_files(files), "auto", nlp=nlp)
    return sentences, gpr_examples(sentences, swapper, validation_fraction=0.2, seed=0)


def test_winobias_gpr_counts(winobias_gpr):
    sentences, (u, a, counts) = winobias_gpr
    # WinoBias's gold clusters hold occupations and pronouns, no proper noun (spaCy finds no PERSON): Lu et
    # al.'s rule (protect_proper_noun_clusters) protects nothing here
    assert all(s.protect == [] for s in sentences)
    assert u.schema.equals(GPR_SCHEMA) and a.schema.equals(GPR_SCHEMA)
    # every WinoBias sentence holds at least one pronoun; 34 hold two (e.g. "... she ... her employees")
    assert counts == {
        "sentences": 1584,
        "sentences_with_pronoun": 1584,
        "documents": 1584,
        "validation_documents": 317,
        "examples_u": 1618,
        "examples_a": 3236,
        "not_swapped": 0,
        "u_male": 810,
        "u_female": 808,
        "u_train": 1294,
        "u_validation": 324,
    }
    labels = collections.Counter(u.column("label").to_pylist())
    assert labels == {"her": 448, "him": 366, "he": 361, "she": 360, "his": 83}


def test_examples_mask_one_pronoun_and_keep_its_label(winobias_gpr):
    sentences, (u, a, _) = winobias_gpr
    words = {(s.doc_key, s.sentence_id): s.words for s in sentences}
    for row in a.to_pylist():
        assert row["text"].count(PRONOUN_PLACEHOLDER) == 1
        assert row["gender"] == PRONOUNS[row["label"]] and row["surface"].lower() == row["label"]
        assert row["tag"] is None, "WinoBias has no gold POS"
        if not row["augmented"]:
            original = words[(row["doc_id"], row["sentence_id"])]
            assert original[row["token_index"]] == row["surface"]
            masked = original[: row["token_index"]] + [PRONOUN_PLACEHOLDER] + original[row["token_index"] + 1 :]
            assert row["text"].replace(" ", "") == "".join(masked), "detokenised, the same tokens"
    first = u.to_pylist()[0]
    assert first["text"] == "The developer argued with the designer because [PRONOUN] did not like the design."
    assert first["label"] == "she" and first["example_id"] == "nw/dev_type1/not_stereotype//0#000/0/7"


def test_augmented_copies_flip_gender_and_stay_in_their_split(winobias_gpr):
    _, (u, a, _) = winobias_gpr
    originals = {r["example_id"]: r for r in u.to_pylist()}
    rows = a.to_pylist()
    assert [r for r in rows if not r["augmented"]] == u.to_pylist(), "-A starts with -U unchanged"
    copies = [r for r in rows if r["augmented"]]
    assert len(copies) == len(originals)
    for copy in copies:
        source = originals[copy["source_example"]]
        assert (source["label"], copy["label"]) in OPPOSITE
        assert copy["split"] == source["split"] and copy["token_index"] == source["token_index"]
        assert copy["example_id"] == source["example_id"] + "/swapped"
    # object "her" -> "him", possessive "her" -> "his", decided by the tagger
    pairs = collections.Counter((originals[c["source_example"]]["label"], c["label"]) for c in copies)
    assert pairs[("her", "him")] > 300 and pairs[("her", "his")] > 80
    # the -A set is gender balanced by construction
    genders = collections.Counter(r["gender"] for r in rows)
    assert genders["male"] == genders["female"]


def test_split_is_by_document_and_seeded(winobias_gpr, swapper):
    sentences, (u, _, counts) = winobias_gpr
    split_of = collections.defaultdict(set)
    for r in u.to_pylist():
        split_of[r["document"]].add(r["split"])
    assert all(len(v) == 1 for v in split_of.values()), "a document lies in one split only"
    assert round(counts["documents"] * 0.2) == counts["validation_documents"]
    again = assign_splits([s.document for s in reversed(sentences)], 0.2, 0)
    assert again == assign_splits([s.document for s in sentences], 0.2, 0), "order does not matter"
    other = assign_splits([s.document for s in sentences], 0.2, 1)
    assert other != again and sum(v == "validation" for v in other.values()) == 317


def test_assign_splits_edges():
    assert set(assign_splits(["a", "b", "c"], 0.0, 0).values()) == {"train"}
    with pytest.raises(ConfigError, match=r"corpora\.ontonotes\.gpr\.validation_fraction"):
        assign_splits(["a"], 1.0, 0)


def test_gold_pos_drives_the_swap(swapper):
    # OntoNotes-style gold tags: "her" before a noun tagged PRP (object) must become "him", not "his".
    s = AnonymisedSentence(
        doc_key="d#000",
        document="d",
        sentence_id=0,
        words=["[E1]", "gave", "her", "flowers", "and", "her", "mother", "smiled", "."],
        tags=["NNP", "VBD", "PRP", "NNS", "CC", "PRP$", "NN", "VBD", "."],
        persons=1,
    )
    u, a, counts = gpr_examples([s], swapper, validation_fraction=0.0)
    assert [r["tag"] for r in u.to_pylist()] == ["PRP", "PRP$"]
    copies = [r for r in a.to_pylist() if r["augmented"]]
    assert [r["label"] for r in copies] == ["him", "his"]
    # the whole sentence is swapped (mother -> father), only the masked pronoun differs between copies
    assert copies[0]["text"] == "[E1] gave [PRONOUN] flowers and his father smiled."
    assert copies[1]["text"] == "[E1] gave him flowers and [PRONOUN] father smiled."


def test_gold_ner_reaches_the_swapper(swapper):
    calls = []

    class Recording:
        grammatical = True

        def swap_tokens(self, words, tags=None, ner=None):
            calls.append((tags, ner))
            return swapper.swap_tokens(words, tags=tags, ner=ner)

    s = AnonymisedSentence(
        doc_key="d#000",
        document="d",
        sentence_id=0,
        words=["[E1]", "left", "King", "'s", "College", "and", "she", "cried", "."],
        tags=["NNP", "VBD", "NNP", "POS", "NNP", "CC", "PRP", "VBD", "."],
        persons=1,
        ner=["B-PERSON", "O", "B-ORG", "I-ORG", "I-ORG", "O", "O", "O", "O"],
    )
    _, a, _ = gpr_examples([s], Recording(), validation_fraction=0.0)
    assert calls == [(s.tags, s.ner)]
    assert a.to_pylist()[1]["text"] == "[E1] left King's College and [PRONOUN] cried."


def test_batched_tags_equal_the_swappers_own(winobias_gpr, swapper, nlp):
    sentences, _ = winobias_gpr
    sample = [s.words for s in sentences[::40]]
    for words, (tags, ner) in zip(sample, spacy_tags(sample, nlp)):
        assert swapper.swap_tokens(words, tags=tags, ner=ner) == swapper.swap_tokens(words)


def test_sentence_without_pronoun_gives_no_example(swapper):
    s = AnonymisedSentence(
        doc_key="d#000", document="d", sentence_id=0, words=["[E1]", "slept", "."], tags=None, persons=1
    )
    u, a, counts = gpr_examples([s], swapper)
    assert u.num_rows == a.num_rows == 0 and counts["sentences_with_pronoun"] == 0
