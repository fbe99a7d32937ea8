"""A tokenised sentence in the one form the swap rules read (lmbias.corpora.swap_rules), built from a spaCy
Doc or from the columns of a CoNLL file: token texts, trailing whitespace, PTB tags, entity labels, parser arcs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_UNKNOWN_TAGS = frozenset({"", "-", "XX", "_", "None"})
#: Splits a phrase into word and punctuation pieces (multi-token dictionary entries, names in protect spans).
WORD_SPLIT_RE = re.compile(r"[^\W_]+|[^\w\s]", re.UNICODE)


def norm_tag(tag) -> str | None:
    """A PTB tag as given, or None where the source has none ("-", "XX", "_", empty ...)."""
    if tag is None:
        return None
    tag = str(tag).strip()
    return None if tag in _UNKNOWN_TAGS else tag


def parse_ner(ner: Sequence[str] | None, n: int) -> tuple[list[str], list[bool]]:
    """Per-token entity label + 'starts an entity' from BIO, plain labels, or CoNLL bracket columns."""
    labels = [""] * n
    starts = [False] * n
    if ner is None:
        return labels, starts
    if len(ner) != n:
        raise ValueError(f"ner has {len(ner)} entries for {n} tokens")
    values = [("" if v is None else str(v).strip()) for v in ner]
    if any(v.startswith("(") or v.endswith(")") for v in values):  # CoNLL-2012: (PERSON* * *)  (PERSON)
        current = ""
        for i, v in enumerate(values):
            if v.startswith("("):
                current = v[1:].rstrip("*)").strip()
                starts[i] = True
            labels[i] = current
            if v.endswith(")"):
                current = ""
        return labels, starts
    prev = ""
    for i, v in enumerate(values):
        if v in ("", "O", "*", "-", "_"):
            prev = ""
            continue
        if v[:2] in ("B-", "I-", "E-", "S-", "L-", "U-"):
            label = v[2:]
            starts[i] = v[0] in "BSU" or label != prev
        else:
            label = v
            starts[i] = label != prev
        labels[i] = label
        prev = label
    return labels, starts


@dataclass
class Sentence:
    """A tokenised sentence/document in the one form the rules read (from spaCy or from a CoNLL file)."""

    texts: list[str]
    ws: list[str]
    tags: list[str | None]
    ents: list[str]
    ent_starts: list[bool]
    deps: list[str | None] = None

    def __post_init__(self):
        if self.deps is None:
            self.deps = [None] * len(self.texts)

    @property
    def n(self) -> int:
        return len(self.texts)

    def entity_spans(self) -> list[tuple[int, int, str]]:
        spans, i = [], 0
        while i < self.n:
            if self.ents[i]:
                j = i + 1
                while j < self.n and self.ents[j] == self.ents[i] and not self.ent_starts[j]:
                    j += 1
                spans.append((i, j, self.ents[i]))
                i = j
            else:
                i += 1
        return spans


def sentence_from_doc(doc, tagged: bool) -> Sentence:
    texts, ws, tags, ents, starts, deps = [], [], [], [], [], []
    has_dep = doc.has_annotation("DEP")
    for t in doc:  # one pass: creating Token objects is the cost here
        texts.append(t.text)
        ws.append(t.whitespace_)
        tags.append(norm_tag(t.tag_) if tagged else None)
        ents.append(t.ent_type_)
        starts.append(t.ent_iob == 3)
        if has_dep:
            deps.append(t.dep_ or None)
    return Sentence(texts=texts, ws=ws, tags=tags, ents=ents, ent_starts=starts, deps=deps if has_dep else None)


def span_tokens(sent: Sentence, spans, length: int) -> tuple[set[int], dict[int, tuple[str, ...]]]:
    """Token indices overlapping the character spans, and those whose span names a proper noun -> its words."""
    starts, pos = [], 0
    for t, w in zip(sent.texts, sent.ws):
        starts.append(pos)
        pos += len(t) + len(w)
    kept: set[int] = set()
    linked: dict[int, tuple[str, ...]] = {}
    for span in spans:
        start, end = int(span[0]), int(span[1])
        name = span[2] if len(span) > 2 else None
        if not 0 <= start < end <= length:
            raise ValueError(f"protect span {start}..{end} is outside its text ({length} characters)")
        for j, s in enumerate(starts):
            if s < end and start < s + len(sent.texts[j]):
                kept.add(j)
                if name:
                    linked[j] = tuple(w.lower() for w in WORD_SPLIT_RE.findall(name))
    return kept, linked
