"""Small CoNLL-2012 documents written in tests: hand-built sentences and an OntoNotes-style document."""

from __future__ import annotations


def conll_text(doc_id: str, sentences: list[list[tuple]], part: int = 0) -> str:
    """sentences: lists of (word, pos, ner, coref) tuples -> one CoNLL-2012 document."""
    lines = [f"#begin document ({doc_id}); part {part:03d}"]
    for sentence in sentences:
        for i, (word, pos, ner, coref) in enumerate(sentence):
            lines.append("\t".join([doc_id, str(part), str(i), word, pos, "*", "-", "-", "-", "-", ner, "*", coref]))
        lines.append("")
    lines.append("#end document")
    return "\n".join(lines) + "\n"


def tok(words: str, pos: str | None = None) -> list[tuple]:
    """One (word, pos, ner, coref) tuple per word: the tags given or "-", no NER, no coreference."""
    ws = words.split()
    tags = pos.split() if pos else ["-"] * len(ws)
    return [(w, t, "*", "-") for w, t in zip(ws, tags)]


def with_cells(sentence: list[tuple], **cells) -> list[tuple]:
    """Set NER / coref cells by token index: with_cells(s, ner={0: "(PERSON*", 1: "*)"}, coref={...})."""
    out = []
    for i, (w, p, n, c) in enumerate(sentence):
        out.append((w, p, cells.get("ner", {}).get(i, n), cells.get("coref", {}).get(i, c)))
    return out


def onto_row(doc, word_index, word, pos="-", ner="*", coref="-", speaker="-", part="0", preds=("*",)):
    # OntoNotes aligns its columns with runs of spaces; the reader must accept that as well as tabs.
    return "   ".join([doc, part, str(word_index), word, pos, "*", "-", "-", "-", speaker, ner, *preds, coref])


ONTO = "\n".join(
    [
        "#begin document (bc/cnn/00/cnn_0001); part 000",
        onto_row("bc/cnn/00/cnn_0001", 0, "John", "NNP", "(PERSON*", "(1", "A"),
        onto_row("bc/cnn/00/cnn_0001", 1, "Smith", "NNP", "*)", "1)", "A"),
        onto_row("bc/cnn/00/cnn_0001", 2, "met", "VBD", "*", "-", "A"),
        onto_row("bc/cnn/00/cnn_0001", 3, "Mary", "NNP", "(PERSON)", "(2)", "A"),
        onto_row("bc/cnn/00/cnn_0001", 4, "-LRB-", "-LRB-", "*", "-", "A"),
        onto_row("bc/cnn/00/cnn_0001", 5, "again", "RB", "*", "-", "A"),
        onto_row("bc/cnn/00/cnn_0001", 6, "-RRB-", "-RRB-", "*", "-", "A"),
        onto_row("bc/cnn/00/cnn_0001", 7, ".", ".", "*", "-", "A"),
        "",
        "",  # two blank lines: still one sentence boundary
        onto_row("bc/cnn/00/cnn_0001", 0, "He", "PRP", "*", "(1)", "B"),
        onto_row("bc/cnn/00/cnn_0001", 1, "liked", "VBD", "*", "-", "B"),
        onto_row("bc/cnn/00/cnn_0001", 2, "her", "PRP$", "*", "(2)|(3", "B"),
        onto_row("bc/cnn/00/cnn_0001", 3, "sister", "NN", "*", "3)", "B"),
        onto_row("bc/cnn/00/cnn_0001", 4, ".", ".", "*", "-", "B"),
        "",
        "#end document",
        "#begin document (bc/cnn/00/cnn_0001); part 001",
        onto_row("bc/cnn/00/cnn_0001", 0, "Bye", "UH", "*", "-", "A", part="1", preds=()),
        "#end document",
        "",
    ]
)
