"""Manela et al.'s GPR task as their code builds it (process_ontonotes.ipynb, BERT_fine_tuning_full_ontonotes.ipynb),
as options of corpora.ontonotes.gpr, and the casing of GPR targets for cased tokenizers.

Their computations are transcribed here independently (accumulation, masking, deduplication, the sklearn
split, the GN-GloVe map) and compared with lmbias.corpora.gpr on WinoBias's CoNLL files (the OntoNotes
stand-in of tests/corpora/test_gpr.py)."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmbias.corpora.anonymise import AnonymisedSentence
from lmbias.corpora.conll import detokenize, read_conll_files
from lmbias.corpora.counterfactual import Swapper
from lmbias.corpora.gpr import (
    MASKED_PRONOUN,
    PRONOUN_PLACEHOLDER,
    SENTENCE_SEPARATOR,
    accumulate,
    example_splits,
    gn_glove_lexicon,
    gpr_examples,
)
from lmbias.corpora.jobs import build_gpr, gpr_files, gpr_options, gpr_variants, lexicon_inputs
from lmbias.corpora.swap_lexicon import load_lexicon
from lmbias.errors import ConfigError
from lmbias.training.data import encode_gpr, load_corpus
from lmbias.training.settings import TrainingSettings

THEIR_PRONOUNS = ("he", "she", "her", "his", "him")
MANELA = {
    "examples": "accumulated",
    "max_chars": 512,
    "other_pronouns": "masked",
    "pronouns": list(THEIR_PRONOUNS),
    "deduplicate": True,
    "split_by": "example",
    "seed": 2018,
}


@pytest.fixture(scope="module")
def winobias_words(shared_data) -> list[list[str]]:
    path = shared_data / "winobias" / "conll_format" / "dev_type1_anti_stereotype.v4_auto_conll"
    return [s.words for d in read_conll_files([path]) for s in d.sentences]


def _document(word_lists, name="doc") -> list[AnonymisedSentence]:
    return [
        AnonymisedSentence(doc_key=f"{name}/0", document=name, sentence_id=i, words=list(w), tags=None, persons=0)
        for i, w in enumerate(word_lists)
    ]


@pytest.fixture(scope="module")
def long_document(winobias_words) -> list[AnonymisedSentence]:
    """One document of WinoBias sentences where only every third keeps its pronouns (the others say "they"),
    a run of 11 pronoun-free sentences (their last-8 fallback) and one sentence over 512 characters (dropped)."""
    words = []
    for i, w in enumerate(winobias_words[:60]):
        keep = i % 3 == 2 and not 20 <= i < 32
        words.append([t if keep or t.lower() not in THEIR_PRONOUNS else "they" for t in w])
    giant = [t for w in winobias_words[60:70] for t in w if t.lower() not in THEIR_PRONOUNS] + ["she", "left", "."]
    words.insert(40, giant)
    assert len(detokenize(giant)) > 512
    return _document(words)


@pytest.fixture(scope="module")
def naive_swapper(shared_data):
    return Swapper(load_lexicon(winobias_dir=shared_data / "winobias", wordlists=[]), intervention="naive")


# --- transcriptions of their notebook ---------------------------------------------------------------------


def their_accumulation(strings, holds):
    """compile_pronoun_strings: gather until a string holds a pronoun; all of them if ' [SEP] '-joined they fit
    512 characters, else the last 8, 7, ..., 1; else a too-long marker (no example)."""
    stored, pending = [], []
    for string, flag in zip(strings, holds):
        pending.append(string)
        if flag:
            for candidate in [pending] + [pending[-k:] for k in (8, 7, 6, 5, 4, 3, 2, 1)]:
                if len(" [SEP] ".join(candidate)) <= 512:
                    stored.append(list(candidate))
                    break
            else:
                stored.append(None)
            pending = []
    return [s for s in stored if s is not None]


def their_examples(groups_of_words):
    """generate_training_data: every pronoun of the text -> [MASK]; one (text, label) per pronoun found, in
    order; then drop_duplicates(keep='first')."""
    rows = []
    for words in groups_of_words:
        sentences = [" ".join("[MASK]" if t.lower() in THEIR_PRONOUNS else t for t in s) for s in words]
        found = [t.lower() for s in words for t in s if t.lower() in THEIR_PRONOUNS]
        rows += [(" [SEP] ".join(sentences), label) for label in found]
    return list(dict.fromkeys(rows))


def _as_their_text(text: str) -> str:
    """Our example text with both placeholders as their [MASK], token-separated like their strings."""
    return " ".join(text.replace(PRONOUN_PLACEHOLDER, "[MASK]").replace(MASKED_PRONOUN, "[MASK]").split())


# --- (a) accumulation --------------------------------------------------------------------------------------


def test_accumulated_groups_equal_their_accumulation(long_document, naive_swapper):
    texts = [detokenize(s.words) for s in long_document]
    holds = [any(t.lower() in THEIR_PRONOUNS for t in s.words) for s in long_document]
    groups, dropped = accumulate(texts, holds, 512)
    expected = their_accumulation(texts, holds)
    assert [[texts[k] for k in g] for g in groups] == expected
    assert dropped == 1, "the one sentence over 512 characters"
    # the run of pronoun-free sentences is too long: only its last sentences that fit stay
    cut = [
        (prev, g)
        for prev, g in zip(groups, groups[1:])
        if g[0] > prev[-1] + 1
        and long_document[g[0] - 1] is not None
        and len(detokenize(long_document[g[0] - 1].words)) < 512
    ]
    assert cut and all(len(" [SEP] ".join(texts[k] for k in range(g[0] - 1, g[-1] + 1))) > 512 for _, g in cut)
    assert max(map(len, groups)) > 1
    u, _, counts = gpr_examples(long_document, naive_swapper, **{k: v for k, v in MANELA.items()})
    assert counts["groups"] == len(groups) and counts["too_long"] == 1
    # every example's text is its group, sentences joined by the separator, pronoun hidden
    firsts = {row["sentence_id"]: row["text"] for row in u.to_pylist()}
    for group in groups:
        last = long_document[group[-1]].sentence_id
        assert firsts[last].count(f" {SENTENCE_SEPARATOR} ") == len(group) - 1
        if len(group) > 1:
            assert firsts[last].split(f" {SENTENCE_SEPARATOR} ")[0] == texts[group[0]]


def test_sentences_after_the_last_pronoun_and_other_documents_start_fresh(winobias_words):
    texts = [detokenize(w) for w in winobias_words[:4]]
    assert accumulate(texts, [False, True, False, False], 512) == ([[0, 1]], 0)
    assert accumulate(texts, [True, True, True, True], 512) == ([[0], [1], [2], [3]], 0)
    assert accumulate(texts, [False, True], 10) == ([], 1)
    # nine 55-character sentences before the pronoun: all ten exceed 512 characters, the last 8 fit
    short = [("It rained again and again on the quiet little town " + str(i) + " .")[:55] for i in range(9)]
    short.append("Then she left the quiet little town for good, it seems.")
    expected = their_accumulation(short, [False] * 9 + [True])
    assert accumulate(short, [False] * 9 + [True], 512) == ([list(range(2, 10))], 0)
    assert [[short[k] for k in g] for g in accumulate(short, [False] * 9 + [True], 512)[0]] == expected


# --- (b) one example per pronoun, every pronoun masked, deduplicated ----------------------------------------


def test_one_example_per_pronoun_all_masked_deduplicated_as_theirs(long_document, winobias_words, naive_swapper):
    two = [w for w in winobias_words if sum(t.lower() in THEIR_PRONOUNS for t in w) >= 2]
    assert two, "WinoBias has sentences with two pronouns"
    same = ["He", "said", "he", "was", "late", "."]  # one label twice: their drop_duplicates keeps one
    sentences = long_document + _document(two[:5] + [same], "two")
    u, a, counts = gpr_examples(sentences, naive_swapper, **MANELA)
    rows = u.to_pylist()
    groups, _ = accumulate(
        [detokenize(s.words) for s in long_document],
        [any(t.lower() in THEIR_PRONOUNS for t in s.words) for s in long_document],
        512,
    )
    expected = their_examples([[long_document[k].words for k in g] for g in groups] + [[w] for w in two[:5] + [same]])
    assert [(_as_their_text(r["text"]), r["label"]) for r in rows] == [
        (" ".join(detokenize(t.split()).split()), lab) for t, lab in expected
    ]
    for r in rows:
        assert r["text"].count(PRONOUN_PLACEHOLDER) == 1
        assert not any(t.lower() in THEIR_PRONOUNS for t in re.findall(r"[A-Za-z]+", r["text"])), "none visible"
    masked_two = [r for r in rows if r["document"] == "two" and MASKED_PRONOUN in r["text"]]
    assert masked_two, "the other pronoun of a two-pronoun sentence is hidden too"
    assert counts["duplicates_dropped"] >= 1
    assert sum(r["text"].startswith(f"{PRONOUN_PLACEHOLDER} said {MASKED_PRONOUN}") for r in rows) == 1
    # -A: every kept original has its swapped copy, masked at the same places
    copies = [r for r in a.to_pylist() if r["augmented"]]
    assert len(copies) == len(rows)
    for original, copy in zip(rows, copies):
        assert copy["source_example"] == original["example_id"]
        assert copy["text"].count(PRONOUN_PLACEHOLDER) == 1
        assert copy["text"].count(MASKED_PRONOUN) == original["text"].count(MASKED_PRONOUN)
        assert copy["gender"] != original["gender"]


def test_masked_pronouns_have_no_target_and_the_separator_is_the_tokenizers():
    from lmbias.engine.tiny import build_tokenizer

    tok = build_tokenizer("bert", ["he", "she", "said", "left", "then", "it"])
    text = f"{PRONOUN_PLACEHOLDER} said it . {SENTENCE_SEPARATOR} then {MASKED_PRONOUN} left ."
    (ex,) = encode_gpr(tok, [text], ["she"], 64, "t")
    tokens = tok.convert_ids_to_tokens(ex.ids)
    assert tokens == ["[CLS]", "[MASK]", "said", "it", ".", "[SEP]", "then", "[MASK]", "left", ".", "[SEP]"]
    assert ex.target_pos == 1 and tok.convert_ids_to_tokens(ex.target) == "she"


# --- (c) the example-level split ----------------------------------------------------------------------------


def their_train_test_split(n, test_size=0.2, random_state=2018):
    """sklearn's train_test_split(range(n), test_size, random_state): ShuffleSplit takes ceil(test_size * n)
    test rows, the first of RandomState(random_state).permutation(n)."""
    permutation = np.random.RandomState(random_state).permutation(n)
    n_test = math.ceil(test_size * n)
    return set(permutation[n_test:].tolist()), set(permutation[:n_test].tolist())


@pytest.mark.parametrize("n", [1, 7, 15, 101])
def test_example_split_equals_sklearn_train_test_split(n):
    train, test = their_train_test_split(n)
    splits = example_splits(n, 0.2, 2018)
    assert {i for i, s in enumerate(splits) if s == "validation"} == test
    assert {i for i, s in enumerate(splits) if s == "train"} == train


def test_split_by_example_keeps_each_swapped_copy_with_its_original(long_document, naive_swapper):
    """-U: their train_test_split over the examples. -A: the originals as in -U, every copy beside its
    original (their notebook splits -A's frame on its own, leaking twins across the split: not copied)."""
    u, a, _ = gpr_examples(long_document, naive_swapper, **MANELA)
    assert u.column("split").to_pylist() == example_splits(u.num_rows, 0.2, 2018)
    rows = a.to_pylist()
    split_of = {r["example_id"]: r["split"] for r in u.to_pylist()}
    assert [r["split"] for r in rows if not r["augmented"]] == u.column("split").to_pylist()
    copies = [r for r in rows if r["augmented"]]
    assert copies and all(r["split"] == split_of[r["source_example"]] for r in copies)
    assert {r["split"] for r in copies} == {"train", "validation"}


# --- (d) the GN-GloVe -A map ----------------------------------------------------------------------------------


def their_gn_glove_map(male, female):
    """flipped_gendered_words_map less its hand-picked rows: both directions plus kingdom/queendom, pronoun
    words removed, every word with several partners removed (their drop_duplicates(keep=False))."""
    male, female = male + ["kingdom"], female + ["queendom"]
    rows = [(m, f) for m, f in zip(male, female)] + [(f, m) for m, f in zip(male, female)]
    rows = [r for r in rows if not re.search("^he$|^she$|^her$|^his$|^him$", r[0])]
    counts = {}
    for word, _ in rows:
        counts[word] = counts.get(word, 0) + 1
    return {w: p for w, p in rows if counts[w] == 1}, {w for w, c in counts.items() if c > 1}


def test_gn_glove_map_swaps_as_theirs(shared_data):
    folder = shared_data / "gn_glove"
    male = (folder / "male_word_file.txt").read_text(encoding="utf-8").splitlines()
    female = (folder / "female_word_file.txt").read_text(encoding="utf-8").splitlines()
    lex = gn_glove_lexicon(folder / "male_word_file.txt", folder / "female_word_file.txt")
    unique, ambiguous = their_gn_glove_map(male, female)
    pronouns = {"hers", "himself", "herself"}  # left to the grammatical rules (the same swaps)
    assert {w: p for w, p in lex.word_pairs.items() if w not in ambiguous} == {
        w: p for w, p in unique.items() if w not in pronouns
    }
    assert set(lex.word_pairs) - set(unique) == ambiguous
    # their hand-picked partners (a few that differ from the first listed one, and one that does not)
    for word, partner in {
        "lady": "gentleman",
        "priest": "priestess",
        "bachelor": "maiden",
        "bride": "bridegroom",
        "kingdom": "queendom",
        "queendom": "kingdom",
    }.items():
        assert lex.word_pairs[word] == partner
    swapper = Swapper(lex, intervention="naive")
    assert swapper.swap_tokens(["The", "king", "and", "his", "wife", "met", "a", "lady", "."]) == [
        "The",
        "queen",
        "and",
        "her",
        "husband",
        "met",
        "a",
        "gentleman",
        ".",
    ]


def test_gn_glove_corpus_variant_files_side_by_side(tmp_path, shared_data, long_document):
    from lmbias.corpora.anonymise import ANONYMISED_SCHEMA, sentences_table

    config = {"intervention": "naive", "variants": {"manela": {**MANELA, "wordlist": "gn_glove"}}}
    assert gpr_variants(config) == ["manela"]
    assert gpr_files(config) == [
        f"results/corpora/ontonotes/{stem}-{half}.parquet" for stem in ("gpr", "gpr-manela") for half in ("U", "A")
    ]
    opts = gpr_options(config, "manela")
    assert opts["wordlist"] == "gn_glove" and opts["intervention"] == "naive", "a variant's keys over the base"
    assert set(lexicon_inputs(False, "gn_glove")) == {"gn_glove_male", "gn_glove_female"}
    sentences = tmp_path / "sentences.parquet"
    pq.write_table(sentences_table(long_document), sentences)
    assert pq.read_schema(sentences).equals(ANONYMISED_SCHEMA)
    files = {
        "gn_glove_male": str(shared_data / "gn_glove" / "male_word_file.txt"),
        "gn_glove_female": str(shared_data / "gn_glove" / "female_word_file.txt"),
    }
    counts = build_gpr(sentences, tmp_path / "u.parquet", tmp_path / "a.parquet", files, opts, "en_core_web_sm")
    assert counts["examples_a"] == 2 * counts["examples_u"] > 0
    a = pq.read_table(tmp_path / "a.parquet").to_pylist()
    originals = [r["split"] for r in a if not r["augmented"]]
    assert originals == example_splits(len(originals), 0.2, 2018)
    assert [r["split"] for r in a if r["augmented"]] == originals  # each copy beside its original


# --- (e) casing -------------------------------------------------------------------------------------------------


def test_sentence_initial_he_is_the_cased_target_for_a_cased_tokenizer(tmp_path):
    from lmbias.engine.tiny import build_tokenizer

    words = ["He", "he", "She", "she", "said", "left", "it", "was", "late"]
    rows = [
        {
            "example_id": "0",
            "text": f"{PRONOUN_PLACEHOLDER} said it was late.",
            "label": "he",
            "surface": "He",
            "split": "train",
        },
        {
            "example_id": "1",
            "text": f"It was late, {PRONOUN_PLACEHOLDER} said.",
            "label": "she",
            "surface": "she",
            "split": "train",
        },
    ]
    path = tmp_path / "gpr.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    corpus = load_corpus(path, TrainingSettings.from_dict({"objective": "gpr"}))
    assert corpus.labels == ["He", "she"]
    roberta = build_tokenizer("roberta", words)  # byte-level BPE: cased
    assert roberta.convert_tokens_to_ids("He") != roberta.convert_tokens_to_ids("he")
    first, second = encode_gpr(roberta, corpus.texts, corpus.labels, 64, "t")
    assert first.target == roberta.convert_tokens_to_ids("He")
    assert [second.target] == roberta(" she", add_special_tokens=False)["input_ids"]
    # an uncased tokenizer's targets are unchanged: "He" and "he" are one id
    bert = build_tokenizer("bert", words)
    cased, lower = (encode_gpr(bert, corpus.texts, labels, 64, "t") for labels in (corpus.labels, ["he", "she"]))
    assert [e.target for e in cased] == [e.target for e in lower] == bert.convert_tokens_to_ids(["he", "she"])
    # a corpus without `surface` keeps its lower-cased label
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "surface"} for r in rows]), path)
    assert load_corpus(path, TrainingSettings.from_dict({"objective": "gpr"})).labels == ["he", "she"]


# --- (f) bad options --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, key",
    [
        ({"examples": "paragraph"}, "corpora.ontonotes.gpr.examples"),
        ({"split_by": "sentence"}, "corpora.ontonotes.gpr.split_by"),
        ({"other_pronouns": "hidden"}, "corpora.ontonotes.gpr.other_pronouns"),
        ({"wordlist": "glove"}, "corpora.ontonotes.gpr.wordlist"),
        ({"max_chars": 0}, "corpora.ontonotes.gpr.max_chars"),
        ({"deduplicate": "yes"}, "corpora.ontonotes.gpr.deduplicate"),
        ({"pronouns": ["he", "they"]}, "corpora.ontonotes.gpr.pronouns"),
        ({"seed": -1}, "corpora.ontonotes.gpr.seed"),
        ({"exampels": "accumulated"}, "corpora.ontonotes.gpr.exampels"),
        ({"variants": {"manela": {"split_by": "doc"}}}, "corpora.ontonotes.gpr.variants.manela.split_by"),
        ({"variants": {"Bad-Name": {}}}, "corpora.ontonotes.gpr.variants.Bad-Name"),
    ],
)
def test_bad_options_name_their_key(options, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        gpr_options(options)
        gpr_variants(options)


def test_defaults_keep_todays_task():
    opts = gpr_options(None)
    assert (opts["examples"], opts["other_pronouns"], opts["deduplicate"], opts["split_by"], opts["wordlist"]) == (
        "sentence",
        "visible",
        False,
        "document",
        "winobias",
    )
    assert gpr_files({}) == ["results/corpora/ontonotes/gpr-U.parquet", "results/corpora/ontonotes/gpr-A.parquet"]
