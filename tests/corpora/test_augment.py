"""lmbias.corpora.augment: CDA doubles the corpus, CDS swaps a seeded fraction of the sentences (or of whole
documents, unit="document")."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from lmbias.corpora.augment import cda_corpus, cds_corpus, check_swap_rate, choose_documents
from lmbias.corpora.counterfactual import Swapper
from lmbias.corpora.swap_lexicon import load_lexicon
from lmbias.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def naive():
    # resources/wordlists only: no spaCy model and no shared data needed
    return Swapper(load_lexicon(), "naive")


def sentences(n_docs: int = 10, per_doc: int = 3) -> pa.Table:
    rows = []
    for d in range(n_docs):
        for s in range(per_doc):
            text = ["He met his brother.", "The weather was fine.", "She thanked the king."][s % 3]
            rows.append({"doc_id": f"doc{d:02d}", "sentence_id": s, "text": text, "split": "development"})
    return pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [("doc_id", pa.string()), ("sentence_id", pa.int32()), ("text", pa.string()), ("split", pa.string())]
        ),
    )


def test_cda_doubles_rows_and_pairs_each_original_with_its_counterfactual(naive, caplog):
    table = sentences(4, 3)
    with caplog.at_level(logging.INFO, logger="lmbias.corpora.augment"):
        out = cda_corpus(table, naive)
    assert out.num_rows == 2 * table.num_rows
    assert out.column_names == ["doc_id", "sentence_id", "text", "split", "is_counterfactual", "changed"]
    assert out.schema.field("sentence_id").type == pa.int32()
    rows = out.to_pylist()
    for original, copy, source in zip(rows[::2], rows[1::2], table.to_pylist()):
        assert original["text"] == source["text"] and not original["is_counterfactual"] and not original["changed"]
        assert copy["is_counterfactual"] and (copy["doc_id"], copy["sentence_id"], copy["split"]) == (
            source["doc_id"],
            source["sentence_id"],
            source["split"],
        )
        assert copy["changed"] == (copy["text"] != original["text"])
    assert rows[1]["text"] == "She met her sister."
    # the sentence with nothing to swap is kept (twice), flagged unchanged
    assert [r["text"] for r in rows[2:4]] == ["The weather was fine."] * 2 and rows[3]["changed"] is False
    assert "12 sentences in (4 documents) -> 24 rows out" in caplog.text and "8 of them changed" in caplog.text


def test_cds_swap_rate_one_swaps_every_document(naive):
    table = sentences(10, 3)
    out = cds_corpus(table, naive, swap_rate=1.0, seed=0)
    assert out.num_rows == table.num_rows
    assert out.column_names == ["doc_id", "sentence_id", "text", "split", "is_counterfactual", "changed", "swapped"]
    assert all(out.column("swapped").to_pylist()) and all(out.column("is_counterfactual").to_pylist())
    assert out.column("text").to_pylist()[:3] == [
        "She met her sister.",
        "The weather was fine.",
        "He thanked the queen.",
    ]


@pytest.mark.parametrize("n_docs, rate", [(10, 0.6), (7, 0.6), (13, 0.8), (5, 0.1)])
def test_cds_swaps_round_rate_times_n_whole_documents(naive, n_docs, rate):
    table = sentences(n_docs, 3)
    out = cds_corpus(table, naive, swap_rate=rate, seed=3, unit="document")
    by_doc: dict[str, set] = {}
    for row in out.to_pylist():
        by_doc.setdefault(row["doc_id"], set()).add(row["swapped"])
    assert all(len(flags) == 1 for flags in by_doc.values()), "all sentences of a chosen document are swapped"
    assert sum(flags == {True} for flags in by_doc.values()) == round(rate * n_docs)
    # unchosen documents are byte-identical to the input
    for row, source in zip(out.to_pylist(), table.to_pylist()):
        if not row["swapped"]:
            assert row["text"] == source["text"] and not row["changed"]
        else:
            assert row["changed"] == (row["text"] != source["text"])


def test_cds_choice_is_seeded_and_independent_of_row_order(naive):
    table = sentences(20, 2)

    def chosen(t, seed):
        return {r["doc_id"] for r in cds_corpus(t, naive, 0.6, seed, unit="document").to_pylist() if r["swapped"]}

    first = chosen(table, 7)
    assert chosen(table, 7) == first
    assert chosen(table.take(pa.array(list(range(table.num_rows))[::-1])), 7) == first
    assert any(chosen(table, seed) != first for seed in (8, 9, 10))
    assert choose_documents(["a", "b", "c", "d", "e"], 0.6, 1) == choose_documents(["e", "d", "c", "b", "a"], 0.6, 1)


@pytest.mark.parametrize("rate", [0, 0.0, -0.1, 1.01, 2, "0.5", None, True, float("nan")])
def test_bad_swap_rate_is_a_config_error(naive, rate):
    with pytest.raises(ConfigError, match="swap_rate"):
        cds_corpus(sentences(2, 1), naive, swap_rate=rate, seed=0)
    with pytest.raises(ConfigError, match="swap_rate"):
        check_swap_rate(rate)


def test_bad_seed_and_bad_tables(naive):
    with pytest.raises(ConfigError, match="seed"):
        cds_corpus(sentences(2, 1), naive, swap_rate=0.5, seed="x")
    with pytest.raises(DataError, match="lacks column.*text"):
        cda_corpus(pa.table({"doc_id": ["a"], "sentence_id": [0]}), naive)
    nulls = pa.table({"doc_id": ["a", "b"], "sentence_id": [0, 0], "text": ["He left.", None]})
    with pytest.raises(DataError, match="row 1 .*null text"):
        cda_corpus(nulls, naive)
    with pytest.raises(DataError, match="null text"):
        cds_corpus(nulls, naive, 1.0, 0)


def test_empty_table(naive):
    empty = sentences(0, 0)
    assert cda_corpus(empty, naive).num_rows == 0
    assert cds_corpus(empty, naive, 0.6, 0).num_rows == 0


def test_cds_names_are_consistent_within_a_document(shared_data):
    lexicon = load_lexicon(names=shared_data / "cds" / "names_pairs_1000_scaled.json")
    swapper = Swapper(lexicon, "grammatical", names=True)
    table = pa.table(
        {
            "doc_id": ["d1", "d1", "d2"],
            "sentence_id": [0, 1, 0],
            "text": ["John met Mary at the station.", "Then John went home.", "John slept."],
        }
    )
    out = cds_corpus(table, swapper, swap_rate=1.0, seed=0).column("text").to_pylist()
    assert out == ["Mary met John at the station.", "Then Mary went home.", "Mary slept."]
    cda = cda_corpus(table, swapper).column("text").to_pylist()
    assert cda[1::2] == out


def test_cds_sentence_unit_swaps_a_fraction_of_sentences(naive):
    """swap_unit sentence (the over-debiasing paper, section 7.3): round(rate * sentences) sentences, drawn
    across documents; document: whole documents."""
    table = sentences(10, 3)
    by_sentence = cds_corpus(table, naive, 0.6, seed=3, unit="sentence").to_pylist()
    swapped = [(r["doc_id"], r["sentence_id"]) for r in by_sentence if r["swapped"]]
    assert len(swapped) == round(0.6 * 30)
    partly = {d for d, _ in swapped if 0 < sum(1 for e, _ in swapped if e == d) < 3}
    assert partly, "a sentence-level draw must split some documents"
    by_doc = cds_corpus(table, naive, 0.6, seed=3, unit="document").to_pylist()
    docs = {r["doc_id"] for r in by_doc if r["swapped"]}
    assert len(docs) == 6 and sum(r["swapped"] for r in by_doc) == 18
    with pytest.raises(ConfigError, match="swap_unit"):
        cds_corpus(table, naive, 0.6, seed=3, unit="paragraph")
