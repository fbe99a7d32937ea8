"""Lu et al.'s proper-noun rule where gold coreference is known (lmbias.corpora.coref): GAP's pronoun-name links
and CoNLL clusters with a proper noun keep their gendered words; the option off flips them; bad input names
file/row."""

from __future__ import annotations

import pyarrow as pa
import pytest

from helpers.conll_docs import ONTO, conll_text, tok, with_cells
from lmbias.corpora.anonymise import anonymise_document, anonymise_documents
from lmbias.corpora.augment import cda_corpus, cds_corpus, protect_from_table
from lmbias.corpora.conll import read_conll, read_conll_files
from lmbias.corpora.coref import gap_pronoun_links, mention_head, proper_clusters, protected_tokens
from lmbias.corpora.counterfactual import Swapper
from lmbias.corpora.gpr import gpr_examples
from lmbias.corpora.jobs import check_intervention, gpr_options
from lmbias.corpora.nlp import load_spacy
from lmbias.corpora.sentences import load_splitter, split_contexts
from lmbias.corpora.swap_lexicon import WORDLIST_DIR, load_lexicon
from lmbias.errors import ConfigError, DataError
from lmbias.parsers.gap import parse_gap


@pytest.fixture(scope="module")
def gap_validation(shared_data):
    return parse_gap({"validation": shared_data / "gap" / "gap-validation.tsv"})


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm")


@pytest.fixture(scope="module")
def lexicon(shared_data):
    # Lu et al.'s list (the GAP interventions' default wordlist) + the CDS name pairs
    return load_lexicon(
        wordlists=[WORDLIST_DIR / "lu2018_gender_pairs.tsv"], names=shared_data / "cds" / "names_pairs_1000_scaled.json"
    )


@pytest.fixture(scope="module")
def two_contexts(gap_validation):
    """Sentences of two real GAP rows, with their gold links:
    validation-2: "She" (offset 185) -> Kathleen (A-coref FALSE, B-coref TRUE);
    validation-4: the first "he" of "..., he said" -> Reucassel."""
    rows = {r["id"]: r for r in gap_validation.to_pylist()}
    ids = ["validation-2", "validation-4"]
    links = gap_pronoun_links(gap_validation)
    table, counts = split_contexts(
        ids, ["validation"] * 2, [rows[i]["text"] for i in ids], load_splitter("en_core_web_sm", "parser"), links=links
    )
    return table, counts, rows


# ------------------------------------------------------------------------------------------------ GAP


def test_gap_links_real_rows(gap_validation):
    links = gap_pronoun_links(gap_validation)
    assert len(links) == 454
    # 392 of the 454 validation rows link their pronoun to A or B; 62 to neither (both FALSE)
    assert sum(len(v) for v in links.values()) == 392
    assert links["validation-2"] == [(185, 188, "Kathleen")]
    assert links["validation-1"] == []  # "him": A-coref FALSE, B-coref FALSE


def test_gap_links_map_onto_the_split_sentences(two_contexts):
    table, counts, rows = two_contexts
    assert counts["protected_spans"] == 2
    by_row = {(r["doc_id"], r["sentence_id"]): r for r in table.to_pylist()}
    kathleen = by_row[("validation-2", 2)]
    assert kathleen["text"].startswith("She was educated at Mary Datchelor")
    assert kathleen["protect_spans"] == [{"start": 0, "end": 3, "name": "Kathleen"}]
    assert kathleen["start_char"] == 185  # the document offset 185 is offset 0 of this sentence
    reucassel = by_row[("validation-4", 1)]
    span = reucassel["protect_spans"][0]
    assert reucassel["text"][span["start"] : span["end"]] == "he" and span["name"] == "Reucassel"
    assert reucassel["start_char"] + span["start"] == rows["validation-4"]["pronoun_offset"]
    others = [
        r
        for r in table.to_pylist()
        if (r["doc_id"], r["sentence_id"]) not in {("validation-2", 2), ("validation-4", 1)}
    ]
    assert others and all(r["protect_spans"] == [] for r in others)


def _cda(table, swapper, option: bool):
    protect = protect_from_table(table) if option else None
    out = cda_corpus(table.select(["doc_id", "sentence_id", "split", "text"]), swapper, protect=protect)
    return {(r["doc_id"], r["sentence_id"]): r["text"] for r in out.to_pylist() if r["is_counterfactual"]}


def test_gap_pronoun_linked_to_a_name_is_kept_while_other_words_flip(two_contexts, lexicon, nlp):
    table = two_contexts[0]
    grammatical = Swapper(lexicon, "grammatical", nlp=nlp)
    on = _cda(table, grammatical, True)
    # the pronoun GAP links to Kathleen stays; the school name stays (proper-name rule)
    assert on[("validation-2", 2)] == (
        "She was educated at Mary Datchelor Girls' School (now closed), London, "
        "before attending King's College, London."
    )
    # the same person's unannotated pronouns and "daughter" flip: GAP annotates one pronoun per row
    assert on[("validation-2", 1)] == (
        "His mother, Philip, was a lithographic printer, and his father, Ellen, ran a "
        "boarding house in Brixton; Kathleen was their third son."
    )
    # the first "he" refers to Reucassel: kept; "Mr" and the second "he" (Debnam) flip
    assert on[("validation-4", 1)] == (
        "When TV cameras remained focused on Reucassel rather than Mrs Debnam, he said, "
        "``Sorry, I'm not Peter Debnam, she's over there."
    )
    assert grammatical.stats.kept_in_clusters == 2
    off = _cda(table, Swapper(lexicon, "grammatical", nlp=nlp), False)
    assert off[("validation-2", 2)].startswith("He was educated")
    assert off[("validation-4", 1)].startswith(
        "When TV cameras remained focused on Reucassel rather than Mrs Debnam, she said,"
    )
    assert {k: v for k, v in on.items() if k not in {("validation-2", 2), ("validation-4", 1)}} == {
        k: v for k, v in off.items() if k not in {("validation-2", 2), ("validation-4", 1)}
    }


def test_with_names_the_pronoun_follows_its_name(two_contexts, lexicon, nlp):
    """names=True swaps Kathleen (a listed given name): her pronoun flips with her; Reucassel (not listed)
    is kept, so his pronoun is kept too."""
    table = two_contexts[0]
    swapper = Swapper(lexicon, "grammatical", names=True, nlp=nlp)
    out = cds_corpus(
        table.select(["doc_id", "sentence_id", "split", "text"]), swapper, 1.0, 0, protect=protect_from_table(table)
    )
    got = {(r["doc_id"], r["sentence_id"]): r["text"] for r in out.to_pylist()}
    assert got[("validation-2", 0)].startswith("Timothy Nott was born")
    assert got[("validation-2", 2)].startswith("He was educated")
    assert got[("validation-4", 1)].startswith(
        "When TV cameras remained focused on Reucassel rather than Mrs Debnam, he said,"
    )
    assert swapper.stats.kept_in_clusters == 1


def _edited(gap, row_id, **values):
    rows = gap.to_pylist()
    for r in rows:
        if r["id"] == row_id:
            r.update(values)
    return pa.Table.from_pylist(rows, schema=gap.schema)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"pronoun_offset": 5000}, r"GAP row 'validation-2': Pronoun-offset 5000 is outside its Text"),
        ({"pronoun_offset": 184}, r"GAP row 'validation-2': Pronoun-offset 184 does not point at 'She'"),
        ({"a_coref": None}, r"GAP row 'validation-2': a_coref is None, not TRUE/FALSE"),
        ({"a_coref": True}, r"GAP row 'validation-2': A-coref and B-coref are both TRUE"),
    ],
)
def test_bad_gap_links_name_the_table_and_row(gap_validation, values, message):
    with pytest.raises(DataError, match=r"^results/data/gap\.parquet: " + message):
        gap_pronoun_links(_edited(gap_validation, "validation-2", **values), "results/data/gap.parquet")


@pytest.mark.parametrize(
    "column, value, message",
    [(6, "YES", r"gap-validation\.tsv:3: A-coref"), (3, "9999", r"gap-validation\.tsv:3: Pronoun-offset 9999")],
)
def test_bad_gap_file_names_file_and_line(tmp_path, shared_data, column, value, message):
    # the raw TSV is checked when it is parsed (results/data/gap.parquet), before any sentence is split
    lines = (shared_data / "gap" / "gap-validation.tsv").read_text(encoding="utf-8").split("\n")
    cells = lines[2].split("\t")
    assert cells[0] == "validation-2"
    cells[column] = value
    lines[2] = "\t".join(cells)
    bad = tmp_path / "gap-validation.tsv"
    bad.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataError, match=message):
        parse_gap({"validation": bad})


def test_span_outside_every_sentence_is_an_error():
    nlp = load_splitter("en_core_web_sm", "sentencizer")
    text = "Mary left.  She came back."
    with pytest.raises(DataError, match=r"gap\.parquet: GAP row 'x': span 10\.\.12 lies inside no sentence"):
        split_contexts(["x"], ["test"], [text], nlp, links={"x": [(10, 12, "Mary")]}, source="gap.parquet")
    with pytest.raises(DataError, match=r"GAP row 'x': span 20\.\.40 is outside its text \(26 characters\)"):
        split_contexts(["x"], ["test"], [text], nlp, links={"x": [(20, 40, "Mary")]})
    table, _ = split_contexts(["x"], ["test"], [text], nlp, links={"x": [(12, 15, "Mary")]})
    assert table.column("protect_spans").to_pylist() == [[], [{"start": 0, "end": 3, "name": "Mary"}]]


# ------------------------------------------------------------------------------------------------ CoNLL


@pytest.mark.parametrize(
    "words, tags, head",
    [
        ("the Queen of England", "DT NNP IN NNP", 1),
        ("Bill Clinton 's wife", "NNP NNP POS NN", 3),
        ("Mary , who left", "NNP , WP VBD", 0),
        ("his wife", "PRP$ NN", 1),
        ("The developer", None, 1),
        ("the mother of the boy", None, 1),
        ("Queen Elizabeth 's", "NNP NNP POS", 1),
    ],
)
def test_mention_head(words, tags, head):
    w = words.split()
    assert mention_head(w, tags.split() if tags else None, 0, len(w)) == head


def test_ontonotes_style_clusters_with_a_proper_noun(tmp_path):
    path = tmp_path / "cnn_0001.v4_gold_conll"
    path.write_text(ONTO)
    doc = read_conll(path)[0]
    # "John Smith met Mary ( again ) . / He liked her sister ." chains: 1 John Smith/He, 2 Mary/her,
    # 3 "her sister" (head "sister", NN): not proper
    assert proper_clusters(doc) == {"1", "2"}
    assert protected_tokens(doc) == {0: {0, 1, 3}, 1: {0, 2}}
    swapper = Swapper(load_lexicon(wordlists=[WORDLIST_DIR / "lu2018_gender_pairs.tsv"]), "grammatical")
    s1 = doc.sentences[1]
    # "sister" belongs to cluster 3 (its innermost mention): flipped; "He" and "her" are kept
    assert swapper.swap_tokens(s1.words, tags=s1.tags, protect=protected_tokens(doc)[1]) == [
        "He",
        "liked",
        "her",
        "brother",
        ".",
    ]
    assert swapper.swap_tokens(s1.words, tags=s1.tags) == ["She", "liked", "his", "brother", "."]
    # anonymisation collapses "John Smith" to one token: the protected indices move with the words
    anonymised = anonymise_document(
        doc, [e for s in doc.sentences for e in s.entities if e.label == "PERSON"], gold_ner=True
    )
    assert anonymised[0].words == ["[E1]", "met", "[E2]", "(", "again", ")", "."]
    assert anonymised[0].protect == [] and anonymised[1].protect == [0, 2]  # names are [E1], [E2] now


def test_protected_indices_follow_a_collapsed_name(tmp_path):
    text = conll_text(
        "nw/x/0",
        [
            with_cells(
                tok("Mary Ann Evans said she was tired .", "NNP NNP NNP VBD PRP VBD JJ ."),
                ner={0: "(PERSON*", 2: "*)"},
                coref={0: "(1", 2: "1)", 4: "(1)"},
            )
        ],
    )
    path = tmp_path / "x.v4_gold_conll"
    path.write_text(text)
    doc = read_conll(path)[0]
    assert protected_tokens(doc) == {0: {0, 1, 2, 4}}
    sentence = anonymise_documents([doc], "gold")[0][0]
    assert sentence.words == ["[E1]", "said", "she", "was", "tired", "."] and sentence.protect == [2]


def _winobias_doc_with_a_name(shared_data, tmp_path):
    """Two real WinoBias type-1 documents as one two-sentence document; in the first, the occupation the
    pronoun refers to ("The developer") becomes the name "Mary" (Manela et al.'s names variant of WinoBias),
    a PERSON in the NER column; the second keeps its occupation (no proper noun: its pronoun flips)."""
    src = (shared_data / "winobias" / "conll_format" / "dev_type1_pro_stereotype.v4_auto_conll").read_text()
    docs = src.split("#end document\n")
    first, second = (d.strip().split("\n")[1:] for d in docs[:2])
    assert first[0].split("\t")[3:5] == ["The", "-"] and first[1].split("\t")[3] == "developer"
    rows = []
    for i, line in enumerate(["Mary"] + first[2:]):
        cells = (first[1] if i == 0 else line).split("\t")
        if i == 0:
            cells[3], cells[10], cells[-1] = "Mary", "(PERSON)", "(1)"  # POS stays "-": the NER cell marks it
        cells[0], cells[2] = "nw/names/0", str(i)
        rows.append("\t".join(cells))
    rows.append("")
    for line in second:
        cells = line.split("\t")
        cells[0], cells[-1] = "nw/names/0", cells[-1].replace("1", "2")
        rows.append("\t".join(cells))
    path = tmp_path / "names.v4_gold_conll"
    path.write_text("#begin document (nw/names/0); part 000\n" + "\n".join(rows) + "\n\n#end document\n")
    return path


def test_winobias_document_with_a_name_keeps_its_pronoun_in_gpr(shared_data, tmp_path):
    doc = read_conll(_winobias_doc_with_a_name(shared_data, tmp_path))[0]
    assert " ".join(doc.sentences[0].words) == "Mary argued with the designer because he did not like the design ."
    assert protected_tokens(doc) == {0: {0, 6}}
    sentences, _ = anonymise_documents([doc], "gold")
    assert sentences[0].words[:2] == ["[E1]", "argued"] and sentences[0].protect == [6]  # [E1] is no word to flip
    swapper = Swapper(load_lexicon(winobias_dir=shared_data / "winobias", wordlists=[]), "grammatical")
    _, on, counts_on = gpr_examples(sentences, swapper, protect=True)
    _, off, counts_off = gpr_examples(sentences, swapper, protect=False)
    swapped_on = {r["sentence_id"]: r["label"] for r in on.to_pylist() if r["augmented"]}
    swapped_off = {r["sentence_id"]: r["label"] for r in off.to_pylist() if r["augmented"]}
    # Mary's "he" (a WinoBias pro-stereotypical "he" now pointing at Mary) is kept: no swapped copy
    assert swapped_on == {1: swapped_off[1]} and swapped_off[0] == "she"
    assert counts_on["not_swapped"] == 1 and counts_off["not_swapped"] == 0


def test_winobias_has_no_proper_noun_clusters(shared_data):
    """Known answer: WinoBias's clusters are occupations and pronouns, no names (spaCy finds no PERSON)."""
    files = sorted((shared_data / "winobias" / "conll_format").glob("*_conll"))
    docs = read_conll_files(files)
    assert all(not d.sentences[0].tags for d in docs)
    assert sum(len(protected_tokens(d)) for d in docs) == 0


# ------------------------------------------------------------------------------------------------ config


def test_the_option_belongs_to_the_grammatical_intervention():
    key = "corpora.gap.interventions.x"
    assert check_intervention({"method": "cda", "intervention": "grammatical"}, key)["protect_proper_noun_clusters"]
    assert not check_intervention({"method": "cda", "intervention": "naive"}, key)["protect_proper_noun_clusters"]
    assert not check_intervention(
        {"method": "cda", "intervention": "grammatical", "protect_proper_noun_clusters": False}, key
    )["protect_proper_noun_clusters"]
    with pytest.raises(
        ConfigError,
        match=r"corpora\.gap\.interventions\.x\.protect_proper_noun_clusters: true "
        r"needs intervention: grammatical",
    ):
        check_intervention({"method": "cda", "intervention": "naive", "protect_proper_noun_clusters": True}, key)
    with pytest.raises(ConfigError, match=r"x\.protect_proper_noun_clusters: must be true or false, got 'yes'"):
        check_intervention({"method": "cda", "intervention": "grammatical", "protect_proper_noun_clusters": "yes"}, key)
    assert gpr_options(None)["protect_proper_noun_clusters"] is False  # Manela et al.: every pronoun
    with pytest.raises(ConfigError, match=r"corpora\.ontonotes\.gpr\.protect_proper_noun_clusters: true needs"):
        gpr_options({"intervention": "naive", "protect_proper_noun_clusters": True})


def test_texts_without_coreference_flip_everything(lexicon, nlp):
    """A sentence table without protect_spans (a plain text corpus): the option has nothing to act on."""
    table = pa.table(
        {"doc_id": ["d"], "sentence_id": [0], "split": ["x"], "text": ["Queen Elizabeth said she would come."]}
    )
    assert protect_from_table(table) is None
    out = cda_corpus(table, Swapper(lexicon, "grammatical", nlp=nlp), protect=None)
    assert out.column("text").to_pylist()[1] == "Queen Elizabeth said he would come."


def test_swap_texts_protect_checks_its_input(lexicon, nlp):
    swapper = Swapper(lexicon, "grammatical", nlp=nlp)
    with pytest.raises(ValueError, match="protect has 1 entries for 2 texts"):
        swapper.swap_texts(["He left.", "She left."], protect=[[]])
    with pytest.raises(ValueError, match=r"protect span 7\.\.12 is outside its text \(8 characters\)"):
        swapper.swap_texts(["He left."], protect=[[(7, 12)]])
    # a span keeps every token it overlaps, and only those
    assert swapper.swap_texts(["He said he left.", "He said he left."], protect=[[(8, 10)], [(0, 2, "Tom")]]) == [
        "She said he left.",
        "He said she left.",
    ]
