"""Lu et al.'s (2018, section 4) proper-noun rule where gold coreference is known: "we do not flip gendered
words if they are in a cluster with a proper noun" ("Queen Elizabeth ... she" keeps both).

Two sources of gold coreference feed it:

- CoNLL-2012 files (OntoNotes; WinoBias's conll files share the format): the coreference column's clusters.
  A cluster is *proper* when one of its mentions is a proper noun: the mention's head (its last token
  before a post-modifier, see mention_head) is tagged NNP/NNPS in the gold POS column, or lies inside a
  PERSON name (the gold NER column, or spaCy's PERSON entities where the files carry none, as the
  anonymiser uses). Every token whose innermost mention belongs to a proper cluster is protected: in
  "[his wife]" of Mary's cluster "wife" is protected, "his" (the husband's own mention) follows the
  husband's cluster.
- GAP (Webster et al. 2018): each row links one pronoun to a name (A-coref / B-coref TRUE); that pronoun
  is protected (gap_pronoun_links). GAP annotates one pronoun per row: other pronouns of the same person
  are not annotated and are flipped as before.

Where no coreference is known (plain text corpora) nothing is protected here; the swapper's own
proper-name rules (titles inside names, gendered words in named places and organisations) still apply.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lmbias.corpora.conll import Document, Span
from lmbias.errors import DataError

PROPER_TAGS = frozenset({"NNP", "NNPS"})
# Tokens that start a post-modifier of a noun phrase: the head is the last token before the first of them.
_POSTMOD_TAGS = frozenset(
    {
        "IN",
        "TO",
        "WDT",
        "WP",
        "WP$",
        "WRB",
        ",",
        ":",
        "-LRB-",
        "-RRB-",
        "``",
        "''",
        "CC",
        "VB",
        "VBD",
        "VBG",
        "VBN",
        "VBP",
        "VBZ",
        "MD",
    }
)
_POSTMOD_WORDS = frozenset(
    {
        "of",
        "in",
        "on",
        "at",
        "from",
        "with",
        "for",
        "by",
        "to",
        "about",
        "who",
        "whom",
        "whose",
        "which",
        "that",
        "where",
        ",",
        ":",
        ";",
        "(",
        ")",
        "-",
        "--",
        "and",
        "or",
    }
)
_TRAILING = frozenset({"'s", "'", "’s", ".", "!", "?", '"', "''"})


def mention_head(words: Sequence[str], tags: Sequence[str] | None, start: int, end: int) -> int:
    """Index of the head of mention [start, end): the last token before its first post-modifier (a
    preposition, relative pronoun, comma, conjunction or verb), trailing "'s" and punctuation skipped.

    "the Queen of England" -> Queen; "Bill Clinton 's wife" -> wife; "Mary , who ..." -> Mary. Without gold
    tags (WinoBias) the post-modifier is found by its word.
    """
    stop = end
    for i in range(start + 1, end):  # the first token is never a post-modifier ("In-N-Out", "To Kill ...")
        tag = tags[i] if tags is not None else None
        if (tag in _POSTMOD_TAGS) if tag is not None else (words[i].lower() in _POSTMOD_WORDS):
            stop = i
            break
    head = stop - 1
    while head > start and words[head].lower() in _TRAILING:
        head -= 1
    return head


def proper_clusters(doc: Document, persons: Sequence[Span] = ()) -> set[str]:
    """Ids of the document's coreference chains holding a proper-noun mention (NNP/NNPS head, or a head
    inside a PERSON span of `persons` or of the gold NER column)."""
    names: dict[int, list[Span]] = {}
    for span in list(persons) + [e for s in doc.sentences for e in s.entities if e.label == "PERSON"]:
        names.setdefault(span.sentence, []).append(span)
    out = set()
    for chain, mentions in doc.chains.items():
        for m in mentions:
            sentence = doc.sentences[m.sentence]
            tags = sentence.tags
            head = mention_head(sentence.words, tags, m.start, m.end)
            if (tags is not None and tags[head] in PROPER_TAGS) or any(
                p.start <= head < p.end for p in names.get(m.sentence, ())
            ):
                out.add(chain)
                break
    return out


def protected_tokens(doc: Document, persons: Sequence[Span] = ()) -> dict[int, set[int]]:
    """sentence index -> token indices Lu et al.'s rule keeps: tokens whose innermost coreference mention
    belongs to a cluster with a proper noun (proper_clusters). Empty when the document has none."""
    proper = proper_clusters(doc, persons)
    if not proper:
        return {}
    innermost: dict[tuple[int, int], tuple[int, str]] = {}  # (sentence, token) -> (mention length, chain)
    for chain, mentions in doc.chains.items():
        for m in mentions:
            for i in range(m.start, m.end):
                key = (m.sentence, i)
                if key not in innermost or m.end - m.start < innermost[key][0]:
                    innermost[key] = (m.end - m.start, chain)
    out: dict[int, set[int]] = {}
    for (sentence, i), (_, chain) in innermost.items():
        if chain in proper:
            out.setdefault(sentence, set()).add(i)
    return out


GAP_LINK_COLUMNS = ("id", "text", "pronoun", "pronoun_offset", "a", "a_coref", "b", "b_coref")


def gap_pronoun_links(gap: pa.Table, source: str | os.PathLike | None = None) -> dict[str, list[tuple[int, int, str]]]:
    """GAP id -> [(start, end, name)]: the character span of the row's pronoun in its Text and the name it
    corefers with, for rows whose A-coref or B-coref is TRUE (rows with both FALSE link the pronoun to
    neither name: nothing is known, nothing protected).

    Checks (DataError naming `source` and the row's ID): the offset lies inside Text and points at the
    pronoun, each flag is TRUE or FALSE, and at most one of them is TRUE.
    """
    missing = [c for c in GAP_LINK_COLUMNS if c not in gap.column_names]
    if missing:
        raise DataError(f"GAP table lacks columns {missing} (needed for the coreference links)", source)
    links: dict[str, list[tuple[int, int, str]]] = {}
    for row in gap.select(list(GAP_LINK_COLUMNS)).to_pylist():
        ident, text, pronoun, offset = row["id"], row["text"] or "", row["pronoun"] or "", row["pronoun_offset"]
        where = f"GAP row {ident!r}"
        for flag in ("a_coref", "b_coref"):
            if not isinstance(row[flag], bool):
                raise DataError(f"{where}: {flag} is {row[flag]!r}, not TRUE/FALSE", source)
        if offset is None or not 0 <= offset <= len(text) - len(pronoun) or not pronoun:
            raise DataError(
                f"{where}: Pronoun-offset {offset!r} is outside its Text ({len(text)} characters) "
                f"for pronoun {pronoun!r}",
                source,
            )
        if text[offset : offset + len(pronoun)] != pronoun:
            raise DataError(f"{where}: Pronoun-offset {offset} does not point at {pronoun!r} in Text", source)
        if row["a_coref"] and row["b_coref"]:
            raise DataError(
                f"{where}: A-coref and B-coref are both TRUE (GAP links a pronoun to at most one name)", source
            )
        name = row["a"] if row["a_coref"] else row["b"] if row["b_coref"] else None
        links.setdefault(ident, [])
        if name is not None:
            links[ident].append((offset, offset + len(pronoun), name))
    return links


def spans_in_sentences(
    links: Mapping[str, Sequence[tuple[int, int, str]]],
    doc_id: str,
    sentences: Sequence[tuple[int, int]],
    text_length: int,
    source=None,
) -> list[list[tuple[int, int, str]]]:
    """Each sentence's share of the document's linked spans, in sentence-relative character offsets.

    `sentences`: (start_char, end_char) of the document's sentences. A span inside no sentence (in the
    whitespace between two, or across a boundary) or outside the text is a DataError naming the document.
    """
    out: list[list[tuple[int, int, str]]] = [[] for _ in sentences]
    for start, end, name in links.get(doc_id, ()):
        if not 0 <= start < end <= text_length:
            raise DataError(
                f"GAP row {doc_id!r}: span {start}..{end} is outside its text ({text_length} characters)", source
            )
        for k, (s, e) in enumerate(sentences):
            if s <= start and end <= e:
                out[k].append((start - s, end - s, name))
                break
        else:
            raise DataError(f"GAP row {doc_id!r}: span {start}..{end} lies inside no sentence of the split", source)
    return out
