"""CoNLL-2012 reader: the real WinoBias conll files, an OntoNotes-style document, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.conll_docs import ONTO, onto_row
from lmbias.corpora.conll import Span, detokenize, find_conll_files, read_conll, read_conll_files
from lmbias.errors import ConfigError, DataError

WINOBIAS_FILES = [
    "dev_type1_anti_stereotype.v4_auto_conll",
    "dev_type1_pro_stereotype.v4_auto_conll",
    "dev_type2_anti_stereotype.v4_auto_conll",
    "dev_type2_pro_stereotype.v4_auto_conll",
]
PRONOUNS = {"he", "she", "him", "her", "his", "hers", "himself", "herself"}


@pytest.fixture
def onto(tmp_path) -> Path:
    path = tmp_path / "cnn_0001.v4_gold_conll"
    path.write_text(ONTO)
    return path


def test_winobias_dev_conll_files(shared_data):
    folder = shared_data / "winobias" / "conll_format"
    for name in WINOBIAS_FILES:
        docs = read_conll(folder / name)
        assert len(docs) == 396, name
        kind = "stereotype" if "_pro_" in name else "not_stereotype"
        assert all(d.doc_id.startswith(f"nw/dev_type{name[8]}/{kind}//") for d in docs)
        assert len({d.key for d in docs}) == 396
        for d in docs:
            assert len(d.sentences) == 1 and d.part == 0
            s = d.sentences[0]
            assert s.tags is None, "WinoBias has no POS column values: spaCy must tag"
            assert s.entities == [] and not d.has_gold_ner
            assert set(s.speakers) == {"Speaker#1"}
            # one chain: the occupation, then the pronoun(s) that refer to it, each a single token
            assert list(d.chains) == ["1"] and len(d.chains["1"]) >= 2, (name, d.doc_id, d.chains)
            occupation, *pronouns = d.chains["1"]
            assert s.words[occupation.start].lower() not in PRONOUNS
            assert all(p.end - p.start == 1 and s.words[p.start].lower() in PRONOUNS for p in pronouns)
        mentions = sum(len(d.chains["1"]) for d in docs)
        assert mentions == (801 if "type1" in name else 798), (name, mentions)
    first = read_conll(folder / WINOBIAS_FILES[0])[0].sentences[0]
    assert " ".join(first.words) == "The developer argued with the designer because she did not like the design ."
    assert len(read_conll_files(folder / n for n in WINOBIAS_FILES)) == 4 * 396


def test_ontonotes_style_document(onto):
    first, second = read_conll(onto)
    assert (first.doc_id, first.part, first.line) == ("bc/cnn/00/cnn_0001", 0, 1)
    assert second.key == "bc/cnn/00/cnn_0001#001" and second.sentences[0].words == ["Bye"]
    s0, s1 = first.sentences
    assert s0.words == ["John", "Smith", "met", "Mary", "(", "again", ")", "."]
    assert s0.tags[:4] == ["NNP", "NNP", "VBD", "NNP"] and s1.tags[2] == "PRP$"
    assert s0.entities == [Span(0, 0, 2, "PERSON"), Span(0, 3, 4, "PERSON")]
    assert s0.speakers[0] == "A" and s1.speakers[0] == "B" and s1.line == 12
    assert first.chains == {
        "1": [Span(0, 0, 2, "1"), Span(1, 0, 1, "1")],
        "2": [Span(0, 3, 4, "2"), Span(1, 2, 3, "2")],
        "3": [Span(1, 2, 4, "3")],
    }
    assert first.has_gold_ner and first.n_tokens == 13


def _write(tmp_path, text: str | bytes) -> Path:
    path = tmp_path / "bad.v4_gold_conll"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _lines():
    return ONTO.split("\n")


@pytest.mark.parametrize(
    "edit, line, message",
    [
        (lambda ls: ls.__setitem__(2, ls[2] + "   extra"), 3, "14 columns where this document's lines have 13"),
        (
            lambda ls: ls.__setitem__(1, "bc/cnn/00/cnn_0001 0 0 John"),
            2,
            "4 columns; a CoNLL-2012 token line has at least 12",
        ),
        (lambda ls: ls.__setitem__(18, "#end document"), 19, "#end document without #begin"),
        (lambda ls: ls.__setitem__(17, ""), 19, "#begin inside document 'bc/cnn/00/cnn_0001' (opened at line 1"),
        (lambda ls: ls.__delitem__(slice(9, 11)), 10, "word index '0' where 8 was expected (is a blank line"),
        (
            lambda ls: (
                ls.__setitem__(9, onto_row("bc/cnn/00/cnn_0001", 8, "x"))
                or ls.__setitem__(10, onto_row("bc/cnn/00/cnn_0001", 10, "y"))
            ),
            11,
            "word index '10' where 9 was expected",
        ),
        (lambda ls: ls.__setitem__(2, ls[2].replace("1)", "-")), 2, "coreference mention (1 is never closed"),
        (lambda ls: ls.__setitem__(1, ls[1].replace("(1", "-")), 3, "coreference mention 1) closes without (1"),
        (
            lambda ls: ls.__setitem__(4, ls[4].replace("(PERSON)", "(PERSON*")),
            5,
            "named entity (PERSON is never closed",
        ),
        (lambda ls: ls.__setitem__(2, ls[2].replace("*)", "*")), 5, "named entity (PERSON opens inside (PERSON"),
        (
            lambda ls: ls.__setitem__(1, ls[1].replace("(PERSON*", "*)")),
            2,
            "named entity closes (*) without an open one",
        ),
        (
            lambda ls: ls.__setitem__(3, ls[3].replace("cnn_0001", "cnn_0002", 1)),
            4,
            "document id 'bc/cnn/00/cnn_0002' differs",
        ),
        (
            lambda ls: ls.__setitem__(3, ls[3].replace("   0   ", "   1   ", 1)),
            4,
            "part '1' differs from its #begin (part 0)",
        ),
        (lambda ls: ls.__setitem__(0, "#begin document bc/cnn"), 1, "malformed #begin line"),
        (lambda ls: ls.insert(3, "# a comment"), 4, "unexpected directive"),
        (lambda ls: ls.insert(0, onto_row("bc/cnn/00/cnn_0001", 0, "x")), 1, "token line outside a document"),
        (lambda ls: ls.__setitem__(20, ""), 19, "document 'bc/cnn/00/cnn_0001' has no #end document"),
        (lambda ls: ls.__setitem__(1, ls[1].replace("John", "[WORD]")), 2, "skeleton file"),
        (lambda ls: ls.__setitem__(2, ls[2].replace("1)", "1)|x")), 3, "malformed coreference cell"),
    ],
)
def test_bad_conll_names_file_and_line(tmp_path, edit, line, message):
    lines = _lines()
    edit(lines)
    path = _write(tmp_path, "\n".join(lines))
    with pytest.raises(DataError) as err:
        read_conll(path)
    assert f"{path}:{line}: " in str(err.value), str(err.value)
    assert message in str(err.value)
    assert err.value.line == line


def test_non_utf8_bytes_name_the_line(tmp_path):
    data = ONTO.encode().replace(b"again", b"ag\xe9in")
    path = _write(tmp_path, data)
    with pytest.raises(DataError, match=r"bad\.v4_gold_conll:7: not valid UTF-8: byte 0xe9"):
        read_conll(path)


def test_blank_and_crlf_lines_pass_through(tmp_path, onto):
    # Blank lines only end sentences (however many, with stray spaces); CRLF line endings are accepted.
    text = ONTO.replace("\n\n", "\n  \n\t\n\n").replace("\n", "\r\n")
    path = _write(tmp_path, "\n\n" + text)
    assert [[s.words for s in d.sentences] for d in read_conll(path)] == [
        [s.words for s in d.sentences] for d in read_conll(onto)
    ]


def test_empty_file_and_duplicate_documents(tmp_path, onto):
    with pytest.raises(DataError, match="file is empty"):
        read_conll(_write(tmp_path, "\n\n"))
    with pytest.raises(
        DataError, match=r"document 'bc/cnn/00/cnn_0001' part 0 already read from .*cnn_0001.v4_gold_conll:1"
    ):
        read_conll_files([onto, onto])


def test_find_conll_files(tmp_path, onto):
    assert find_conll_files(tmp_path, "*_gold_conll") == [onto]
    with pytest.raises(ConfigError, match=r"corpora\.ontonotes\.pattern: no file under .* matches '\*_auto_conll'"):
        find_conll_files(tmp_path, "*_auto_conll")
    with pytest.raises(ConfigError, match=r"corpora\.ontonotes\.path: .* is not a folder"):
        find_conll_files(tmp_path / "nope", "*")


def test_detokenize():
    words = "He does n't like [E1] 's ( big ) car , `` he said '' /.".split()
    assert detokenize(words) == "He doesn't like [E1]'s (big) car, \"he said\"."
