"""Anonymising person names in CoNLL-2012 documents, as Manela et al. (2021, section 3.3) did for
their OntoNotes pronoun-resolution (GPR) task: every person name becomes an identity token `[E1]`,
`[E2]`, ... numbered by first appearance and consistent within a document (a CoNLL document part,
the unit coreference chains live in).

Which tokens are names: the gold NER column's PERSON spans where the corpus has gold NER, spaCy's
PERSON entities (run on the gold tokens, so offsets agree) otherwise. `ner="auto"` picks gold when
any document of the corpus carries a bracketed NER cell (OntoNotes gold files), spaCy when none does
(WinoBias's conll files hold `*` in every NER cell).

Which names are the same person, in order of preference: (1) the gold coreference chains (a name
mention that matches, contains or lies inside a chain's mention takes that chain's entity), (2) the
same name string seen before, (3) a one-word mention equal to one word of exactly one earlier
multi-word name ("Smith" after "John Smith"). Each name span collapses to one token tagged NNP.

Each sentence also carries `protect`: its tokens in a gold coreference cluster with a proper noun
(lmbias.corpora.coref, found before the names are replaced), for Lu et al.'s rule in the GPR swap.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from lmbias.corpora.conll import Document, Span, detokenize
from lmbias.errors import ConfigError

log = logging.getLogger(__name__)

NER_SOURCES = ("auto", "gold", "spacy")
ENTITY_TAG = "NNP"


def entity_token(index: int) -> str:
    """The identity token of the index-th (1-based) person of a document."""
    return f"[E{index}]"


def _is_entity_token(word: str) -> bool:
    return word.startswith("[E") and word.endswith("]") and word[2:-1].isdigit()


@dataclass
class AnonymisedSentence:
    doc_key: str
    document: str  # document id without part: the grouping unit for train/validation splits
    sentence_id: int
    words: list[str]
    tags: list[str] | None  # gold POS (names -> NNP), or None where the corpus has no gold POS
    persons: int  # name spans replaced in this sentence
    ner: list[str] | None = None  # gold entities as BIO labels (names -> B-PERSON), None without gold NER
    # token indices (of `words`) in a gold coreference cluster with a proper noun (lmbias.corpora.coref)
    protect: list[int] | None = None


def resolve_ner_source(docs: Sequence[Document], ner: str = "auto", key: str = "corpora.ontonotes.ner") -> str:
    if ner not in NER_SOURCES:
        raise ConfigError(f"{key}: unknown value {ner!r}; choose one of {list(NER_SOURCES)}")
    if ner != "auto":
        return ner
    return "gold" if any(d.has_gold_ner for d in docs) else "spacy"


def gold_persons(doc: Document) -> list[Span]:
    return [e for s in doc.sentences for e in s.entities if e.label == "PERSON"]


def spacy_persons(docs: Sequence[Document], nlp, batch_size: int = 256) -> list[list[Span]]:
    """PERSON spans found by spaCy's NER on each document's gold tokens (only spans with a capital letter)."""
    from spacy.tokens import Doc

    flat = [(d, i, s) for d, doc in enumerate(docs) for i, s in enumerate(doc.sentences)]
    out: list[list[Span]] = [[] for _ in docs]
    inputs = (Doc(nlp.vocab, words=s.words) for _, _, s in flat)
    for (d, i, _), parsed in zip(flat, nlp.pipe(inputs, batch_size=batch_size)):
        out[d].extend(
            Span(i, e.start, e.end, "PERSON")
            for e in parsed.ents
            # a name has a capitalised word: drops spaCy's lower-case false positives ("the hairdresser 's")
            if e.label_ == "PERSON" and any(t.text[:1].isupper() for t in e)
        )
    return out


def _chain_of(mention: Span, chains: dict[str, list[Span]]) -> str | None:
    """The chain whose mention best matches the name span: exact, then the tightest container, then inside."""
    best, best_rank = None, None
    for chain, mentions in chains.items():
        for m in mentions:
            if m.sentence != mention.sentence:
                continue
            if (m.start, m.end) == (mention.start, mention.end):
                rank = (0, 0)
            elif m.start <= mention.start and mention.end <= m.end:
                rank = (1, m.end - m.start)
            elif mention.start <= m.start and m.end <= mention.end:
                rank = (2, -(m.end - m.start))
            else:
                continue
            if best_rank is None or rank < best_rank:
                best, best_rank = chain, rank
    return best


def group_persons(doc: Document, persons: Sequence[Span]) -> dict[Span, int]:
    """Entity number (1-based, by first appearance) for each name mention of the document."""
    ordered = sorted(set(persons), key=lambda s: (s.sentence, s.start, s.end))
    chain_entity: dict[str, int] = {}
    name_entity: dict[str, int] = {}
    words_of: dict[int, set[str]] = {}
    result: dict[Span, int] = {}
    for m in ordered:
        words = doc.sentences[m.sentence].words[m.start : m.end]
        name = " ".join(w.lower() for w in words)
        chain = _chain_of(m, doc.chains)
        entity = chain_entity.get(chain) if chain is not None else None
        if entity is None:
            entity = name_entity.get(name)
        if entity is None and len(words) == 1:
            owners = [e for e, ws in words_of.items() if name in ws]
            if len(owners) == 1:
                entity = owners[0]
        if entity is None:
            entity = len(words_of) + 1
            words_of[entity] = set()
        if len(words) > 1:
            words_of[entity].update(w.lower() for w in words)
        name_entity.setdefault(name, entity)
        if chain is not None:
            chain_entity.setdefault(chain, entity)
        result[m] = entity
    return result


def _bio(n: int, entities: Sequence[Span]) -> list[str]:
    labels = ["O"] * n
    for e in entities:
        labels[e.start : e.end] = [f"B-{e.label}"] + [f"I-{e.label}"] * (e.end - e.start - 1)
    return labels


def anonymise_document(doc: Document, persons: Sequence[Span], gold_ner: bool = False) -> list[AnonymisedSentence]:
    """The document's sentences with each name span replaced by its `[E<n>]` token.

    gold_ner: also carry the gold NER column along (BIO, each name -> B-PERSON), so the swapper can
    keep gendered words inside other entities ("King's College") as they are."""
    from lmbias.corpora.coref import protected_tokens

    entity_of = group_persons(doc, persons)
    protected = protected_tokens(doc, persons)
    by_sentence: dict[int, list[Span]] = {}
    for m in entity_of:
        by_sentence.setdefault(m.sentence, []).append(m)
    out = []
    for i, sentence in enumerate(doc.sentences):
        tags = sentence.tags
        ner = _bio(len(sentence.words), sentence.entities) if gold_ner else None
        spans = sorted(by_sentence.get(i, []), key=lambda s: (s.start, -s.end))
        words, new_tags, new_ner, pos, replaced = [], [], [], 0, 0
        new_index: dict[int, int] = {}  # original token -> its index among `words` (name tokens collapse)
        for m in spans:
            if m.start < pos:
                continue  # overlapping spans (spaCy never, gold rarely): the first one wins
            new_index.update((j, len(words) + j - pos) for j in range(pos, m.start))
            words.extend(sentence.words[pos : m.start])
            if tags is not None:
                new_tags.extend(tags[pos : m.start])
            if ner is not None:
                new_ner.extend(ner[pos : m.start] + ["B-PERSON"])
            words.append(entity_token(entity_of[m]))
            new_tags.append(ENTITY_TAG)
            pos, replaced = m.end, replaced + 1
        new_index.update((j, len(words) + j - pos) for j in range(pos, len(sentence.words)))
        words.extend(sentence.words[pos:])
        if tags is not None:
            new_tags.extend(tags[pos:])
        if ner is not None:
            new_ner.extend(ner[pos:])
        out.append(
            AnonymisedSentence(
                doc_key=doc.key,
                document=doc.doc_id,
                sentence_id=i,
                words=words,
                tags=new_tags if tags is not None else None,
                persons=replaced,
                ner=new_ner if ner is not None else None,
                protect=sorted(new_index[j] for j in protected.get(i, ()) if j in new_index),
            )
        )
    return out


def anonymise_documents(docs: Sequence[Document], ner: str = "auto", nlp=None) -> tuple[list[AnonymisedSentence], dict]:
    """Anonymise a corpus; returns (sentences, counts). `nlp` (a pipeline with NER) is needed for spaCy NER."""
    source = resolve_ner_source(docs, ner)
    if source == "gold":
        persons = [gold_persons(d) for d in docs]
    else:
        if nlp is None:
            raise ConfigError("corpora.ontonotes.ner: spaCy NER is needed (no gold NER) but no pipeline was given")
        persons = spacy_persons(docs, nlp)
    sentences: list[AnonymisedSentence] = []
    entities = 0
    for doc, doc_persons in zip(docs, persons):
        anonymised = anonymise_document(doc, doc_persons, gold_ner=source == "gold")
        entities += len({w for s in anonymised for w in s.words if s.persons and _is_entity_token(w)})
        sentences.extend(anonymised)
    counts = {
        "documents": len(docs),
        "sentences": len(sentences),
        "ner_source": source,
        "name_mentions": sum(s.persons for s in sentences),
        "entities": entities,
    }
    log.info(
        "anonymised %(documents)d documents, %(sentences)d sentences: %(name_mentions)d name mentions of "
        "%(entities)d persons replaced (NER from %(ner_source)s)",
        counts,
    )
    return sentences, counts


ANONYMISED_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),  # document id + part (conll.Document.key)
        ("document", pa.string()),  # document id: the unit of the train/validation split
        ("sentence_id", pa.int32()),
        ("text", pa.string()),  # detokenised, for reading
        ("tokens", pa.list_(pa.string())),
        ("pos", pa.list_(pa.string())),  # null where the corpus has no gold POS
        ("ner", pa.list_(pa.string())),  # gold entities as BIO labels; null without gold NER
        ("persons", pa.int32()),
        # tokens in a gold coreference cluster with a proper noun (Lu et al.'s rule; lmbias.corpora.coref)
        ("protect", pa.list_(pa.int32())),
    ]
)


def sentences_table(sentences: Sequence[AnonymisedSentence]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "doc_id": s.doc_key,
                "document": s.document,
                "sentence_id": s.sentence_id,
                "text": detokenize(s.words),
                "tokens": s.words,
                "pos": s.tags,
                "ner": s.ner,
                "persons": s.persons,
                "protect": s.protect or [],
            }
            for s in sentences
        ],
        schema=ANONYMISED_SCHEMA,
    )


def sentences_from_table(table: pa.Table) -> list[AnonymisedSentence]:
    return [
        AnonymisedSentence(
            doc_key=r["doc_id"],
            document=r["document"],
            sentence_id=r["sentence_id"],
            words=r["tokens"],
            tags=r["pos"],
            persons=r["persons"],
            ner=r["ner"],
            protect=r.get("protect"),
        )
        # a table written before the protect column existed reads as "coreference unknown"
        for r in table.select(
            [c for c in ANONYMISED_SCHEMA.names if c != "protect" or c in table.column_names]
        ).to_pylist()
    ]
