"""Reader for CoNLL-2012 `*_conll` files (OntoNotes 5.0, and WinoBias's `conll_format/` files).

Layout (one token per line, columns separated by tabs or runs of spaces):

    0 document id   1 part   2 word index   3 word   4 POS   5 parse bit   6 predicate lemma
    7 frameset      8 word sense   9 speaker   10 named entities   11..-2 predicate arguments
    -1 coreference

Sentences are separated by blank lines; documents sit between `#begin document (<id>); part <n>`
and `#end document`. The NER column is bracketed (`(PERSON*`, `*`, `*)`, `(PERSON)`); the
coreference column is `-` or `|`-joined `(7`, `7)`, `(7)`. Columns that were not annotated hold
`-` (WinoBias: POS, parse, lemma) or `*` (WinoBias: every NER cell).

Strictness (each raises DataError naming file and line): a token line whose column count differs
from the document's first token line, fewer than 12 columns, a token line outside a document,
`#begin` inside an open document, `#end` without `#begin` or a document never ended, a token line
whose document id or part differs from its `#begin`, word indices that do not count 0, 1, 2, ...
within a sentence (a missing blank line), unbalanced NER or coreference brackets, bytes that are
not UTF-8, any other line starting with `#`. Passed through unchanged (right for the format): blank
or whitespace-only lines, which only end a sentence, however many follow each other, and blank lines
outside documents.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lmbias.errors import ConfigError, DataError
from lmbias.parsers.common import read_text

MIN_COLUMNS = 12  # 11 fixed columns + coreference (no predicate-argument column when no predicate)
WORD, POS, SPEAKER, NER = 3, 4, 9, 10

_BEGIN = re.compile(r"^#begin document \((?P<doc>.*)\);\s*part (?P<part>\d+)\s*$")
_COREF = re.compile(r"^(?:\((?P<single>\d+)\)|\((?P<open>\d+)|(?P<close>\d+)\))$")
_NER = re.compile(r"^(?:\((?P<label>[^()*]+)(?P<star>\*?)(?P<end>\)?)|(?P<inner>\*)(?P<close>\)?))$")
# Bracket tokens of the Penn Treebank, as OntoNotes writes them.
PTB_BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}


@dataclass(frozen=True)
class Span:
    """Tokens [start, end) of one sentence; `label` is the NE type or the coreference chain id."""

    sentence: int
    start: int
    end: int
    label: str


@dataclass
class Sentence:
    words: list[str]
    pos: list[str]
    speakers: list[str]
    entities: list[Span]  # gold named entities of this sentence (sentence index filled in)
    line: int  # file line of the first token

    @property
    def tags(self) -> list[str] | None:
        """Gold POS tags, or None where the column was not annotated (all `-`, as in WinoBias)."""
        if all(t in ("-", "") for t in self.pos):
            return None
        return list(self.pos)


@dataclass
class Document:
    doc_id: str
    part: int
    path: str
    line: int  # line of `#begin document`
    sentences: list[Sentence] = field(default_factory=list)
    chains: dict[str, list[Span]] = field(default_factory=dict)  # coreference chain id -> mentions, in order

    @property
    def key(self) -> str:
        """Unique within a corpus: the document id plus its part (the unit coreference chains live in)."""
        return f"{self.doc_id}#{self.part:03d}"

    @property
    def has_gold_ner(self) -> bool:
        return any(s.entities for s in self.sentences)

    @property
    def n_tokens(self) -> int:
        return sum(len(s.words) for s in self.sentences)


def _parse_ner(cells: list[str], sentence: int, path, lines: list[int]) -> list[Span]:
    spans, open_label, open_start = [], None, 0
    for i, cell in enumerate(cells):
        m = _NER.match(cell)
        if cell == "-" or (m and m.group("inner") and not m.group("close")):
            continue  # `-`: column not annotated; `*`: inside or outside an entity
        if not m:
            raise DataError(f"malformed named-entity cell {cell!r}", path, lines[i])
        if m.group("label") is not None:
            if open_label is not None:
                raise DataError(f"named entity ({m.group('label')} opens inside ({open_label}", path, lines[i])
            if m.group("end"):
                spans.append(Span(sentence, i, i + 1, m.group("label")))
            else:
                open_label, open_start = m.group("label"), i
        else:  # `*)`
            if open_label is None:
                raise DataError("named entity closes (*) without an open one", path, lines[i])
            spans.append(Span(sentence, open_start, i + 1, open_label))
            open_label = None
    if open_label is not None:
        raise DataError(f"named entity ({open_label} is never closed in its sentence", path, lines[open_start])
    return spans


def _parse_coref(cells: list[str], sentence: int, path, lines: list[int], chains: dict[str, list[Span]]) -> None:
    opened: dict[str, list[int]] = {}
    for i, cell in enumerate(cells):
        if cell == "-":
            continue
        for part in cell.split("|"):
            m = _COREF.match(part)
            if not m:
                raise DataError(f"malformed coreference cell {cell!r}", path, lines[i])
            if m.group("single"):
                chains.setdefault(m.group("single"), []).append(Span(sentence, i, i + 1, m.group("single")))
            elif m.group("open"):
                opened.setdefault(m.group("open"), []).append(i)
            else:
                chain = m.group("close")
                if not opened.get(chain):
                    raise DataError(f"coreference mention {chain}) closes without ({chain}", path, lines[i])
                start = opened[chain].pop()
                chains.setdefault(chain, []).append(Span(sentence, start, i + 1, chain))
    for chain, starts in opened.items():
        if starts:
            raise DataError(f"coreference mention ({chain} is never closed in its sentence", path, lines[starts[0]])


def iter_conll(path: str | os.PathLike) -> Iterator[Document]:
    """Documents of one `*_conll` file, in file order (see the module docstring for what is checked)."""
    path = Path(path)
    text = read_text(path)
    doc: Document | None = None
    ncols = 0
    rows: list[list[str]] = []
    row_lines: list[int] = []

    def end_sentence():
        nonlocal rows, row_lines
        if not rows:
            return
        index = len(doc.sentences)
        for expected, (row, line) in enumerate(zip(rows, row_lines)):
            if row[2] != str(expected):
                raise DataError(
                    f"word index {row[2]!r} where {expected} was expected (is a blank line between sentences missing?)",
                    path,
                    line,
                )
        doc.sentences.append(
            Sentence(
                words=[PTB_BRACKETS.get(r[WORD], r[WORD]) for r in rows],
                pos=[r[POS] for r in rows],
                speakers=[r[SPEAKER] for r in rows],
                entities=_parse_ner([r[NER] for r in rows], index, path, row_lines),
                line=row_lines[0],
            )
        )
        _parse_coref([r[-1] for r in rows], index, path, row_lines, doc.chains)
        rows, row_lines = [], []

    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            if doc is not None:
                end_sentence()
            continue
        if line.startswith("#"):
            if line.startswith("#begin"):
                m = _BEGIN.match(line)
                if not m:
                    raise DataError(f"malformed #begin line {line!r}", path, number)
                if doc is not None:
                    raise DataError(
                        f"#begin inside document {doc.doc_id!r} (opened at line {doc.line}, no #end)", path, number
                    )
                doc = Document(doc_id=m.group("doc"), part=int(m.group("part")), path=str(path), line=number)
                ncols = 0
            elif line.strip() == "#end document":
                if doc is None:
                    raise DataError("#end document without #begin", path, number)
                end_sentence()
                yield doc
                doc = None
            else:
                raise DataError(
                    f"unexpected directive {line[:60]!r} (only #begin document / #end document)", path, number
                )
            continue
        if doc is None:
            raise DataError("token line outside a document (no #begin document before it)", path, number)
        cells = line.split()
        if ncols == 0:
            if len(cells) < MIN_COLUMNS:
                raise DataError(
                    f"{len(cells)} columns; a CoNLL-2012 token line has at least {MIN_COLUMNS}", path, number
                )
            ncols = len(cells)
        elif len(cells) != ncols:
            raise DataError(
                f"{len(cells)} columns where this document's lines have {ncols} (document {doc.doc_id!r})", path, number
            )
        if cells[0] != doc.doc_id:
            raise DataError(f"document id {cells[0]!r} differs from its #begin ({doc.doc_id!r})", path, number)
        if not cells[1].isdigit() or int(cells[1]) != doc.part:
            raise DataError(f"part {cells[1]!r} differs from its #begin (part {doc.part})", path, number)
        if cells[WORD] == "[WORD]":
            raise DataError(
                "word column holds [WORD]: this is an OntoNotes skeleton file; fill in the words with the "
                "CoNLL-2012 skeleton2conll script first",
                path,
                number,
            )
        rows.append(cells)
        row_lines.append(number)
    if doc is not None:
        raise DataError(f"document {doc.doc_id!r} has no #end document (end of file reached)", path, doc.line)


def read_conll(path: str | os.PathLike) -> list[Document]:
    return list(iter_conll(path))


def read_conll_files(paths: Iterable[str | os.PathLike]) -> list[Document]:
    """Documents of several files; a (document, part) seen twice is an error naming both places."""
    docs, seen = [], {}
    for path in paths:
        for doc in iter_conll(path):
            if doc.key in seen:
                raise DataError(
                    f"document {doc.doc_id!r} part {doc.part} already read from {seen[doc.key]}", path, doc.line
                )
            seen[doc.key] = f"{doc.path}:{doc.line}"
            docs.append(doc)
    return docs


def find_conll_files(folder: str | os.PathLike, pattern: str, key: str = "corpora.ontonotes") -> list[Path]:
    """Files under `folder` matching the glob `pattern`, sorted; none -> ConfigError naming the keys."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"{key}.path: {str(root)!r} is not a folder")
    files = sorted(p for p in root.glob(pattern) if p.is_file())
    if not files:
        raise ConfigError(f"{key}.pattern: no file under {str(root)!r} matches {pattern!r}")
    return files


# Tokens written without a space before them / after them when a token list becomes text.
_NO_SPACE_BEFORE = {
    ",",
    ".",
    ";",
    ":",
    "!",
    "?",
    ")",
    "]",
    "}",
    "%",
    "'s",
    "'S",
    "'m",
    "'re",
    "'ve",
    "'d",
    "'ll",
    "n't",
    "N'T",
    "'",
    "''",
    "...",
}
_NO_SPACE_AFTER = {"(", "[", "{", "$", "``", "#"}
# Conversational OntoNotes genres write sentence-final punctuation as "/." and "/?".
_SLASH_PUNCT = {"/.": ".", "/?": "?", "/-": "-"}
_QUOTES = {"``": '"', "''": '"'}


def detokenize(words: Sequence[str]) -> str:
    """Treebank tokens -> readable text ("does n't ." -> "doesn't."); the token count is not preserved."""
    out: list[str] = []
    glue = True
    for word in words:
        word = _SLASH_PUNCT.get(word, word)
        if out and not glue and word not in _NO_SPACE_BEFORE:
            out.append(" ")
        out.append(_QUOTES.get(word, word))
        glue = word in _NO_SPACE_AFTER
    return "".join(out)
