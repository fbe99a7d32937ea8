"""Splitting multi-sentence contexts (GAP) into sentences with spaCy, keeping document ids.

The DA-Gender and Bartl et al. CDS fine-tuning corpora are GAP's 4,454 Wikipedia contexts split into
sentences. Three splitters are offered (config `corpora.gap.splitter`):

- `parser` (default): the dependency parser's boundaries (spaCy's reference segmentation). Only
  tok2vec + parser run; the tagger, lemmatizer and NER are excluded (same boundaries, ~2x faster).
- `senter`: the pipeline's statistical sentence recogniser (~1.6x faster than `parser` on GAP, but it
  splits off stray backquotes as sentences: 94 % of its sentences equal the parser's).
- `sentencizer`: punctuation rules only (~10x faster; misses headings without a full stop, e.g.
  "First aired: 22 March 2009 The victim ...").

Exact duplicate sentences (GAP has three duplicated contexts, and overlapping windows of the same
Wikipedia page repeat sentences) are removed, the first occurrence kept, and counted. Whitespace
(blank lines, runs of spaces) around a sentence is trimmed and whitespace-only pieces are no
sentence: they pass through as nothing, which is right for a corpus of sentences; an empty context
yields no sentence (GAP's parser already rejects an empty Text with its file and line).
`sentence_id` is the sentence's position in its context before duplicates are removed.

`protect_spans` carries GAP's gold coreference into the sentences: the pronouns a row links to a name
(A-coref / B-coref TRUE; lmbias.corpora.coref.gap_pronoun_links), as character offsets in the sentence
with the name, which the grammatical intervention keeps (Lu et al.'s proper-noun rule, option
`protect_proper_noun_clusters`). A removed duplicate hands its spans to the copy that is kept (the same
text, so the same offsets).

On all of GAP the parser gives 13,585 sentences, 13,494 after removing 91 duplicates; the
over-debiasing paper's 13,436 are NLTK Punkt's split without deduplication (see docs/corpora.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import pyarrow as pa

from lmbias.corpora.nlp import load_spacy
from lmbias.errors import ConfigError, DataError

log = logging.getLogger(__name__)

SPLITTERS = ("parser", "senter", "sentencizer")

SENTENCES_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("split", pa.string()),
        ("sentence_id", pa.int32()),
        ("text", pa.string()),
        ("start_char", pa.int32()),  # offsets of the sentence in its context's text
        ("end_char", pa.int32()),
        # pronouns gold coreference links to a name: sentence-relative [start, end) and the name
        ("protect_spans", pa.list_(pa.struct([("start", pa.int32()), ("end", pa.int32()), ("name", pa.string())]))),
    ]
)

# Components of en_core_web_sm that sentence splitting never needs.
_NOT_FOR_SPLITTING = ["tagger", "attribute_ruler", "lemmatizer", "ner"]


def load_splitter(spacy_model: str = "en_core_web_sm", splitter: str = "parser", key: str = "corpora.gap.splitter"):
    """A spaCy pipeline that sets sentence boundaries and runs nothing else."""
    if splitter == "parser":
        return load_spacy(spacy_model, exclude=_NOT_FOR_SPLITTING + ["senter"])
    if splitter == "senter":
        nlp = load_spacy(spacy_model, exclude=_NOT_FOR_SPLITTING + ["parser"])
        nlp.enable_pipe("senter")
        return nlp
    if splitter == "sentencizer":
        nlp = load_spacy(spacy_model, exclude=_NOT_FOR_SPLITTING + ["parser", "senter", "tok2vec"])
        nlp.add_pipe("sentencizer")
        return nlp
    raise ConfigError(f"{key}: unknown splitter {splitter!r}; choose one of {list(SPLITTERS)}")


def sentence_spans(texts: Iterable[str], nlp, batch_size: int = 128) -> list[list[tuple[int, int]]]:
    """(start_char, end_char) of every sentence of every text, surrounding whitespace trimmed.

    Whitespace-only pieces are left out; an empty text gives no sentence.
    """
    out = []
    for doc in nlp.pipe(texts, batch_size=batch_size):
        spans = []
        text = doc.text
        for sent in doc.sents:
            start, end = sent.start_char, sent.end_char
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if end > start:
                spans.append((start, end))
        out.append(spans)
    return out


def split_contexts(
    doc_ids: Sequence[str],
    splits: Sequence[str],
    texts: Sequence[str],
    nlp,
    batch_size: int = 128,
    dedup: bool = True,
    links=None,
    source=None,
) -> tuple[pa.Table, dict]:
    """Split each context into sentences; returns (table with SENTENCES_SCHEMA, counts).

    links: doc id -> [(start, end, name)] character spans in the context that gold coreference links to a
    name (coref.gap_pronoun_links); they land in the sentences' `protect_spans` (`source` names the input
    in errors). Counts: contexts, duplicate_contexts (identical text seen before), sentences_split (every
    non-empty piece), duplicates_removed, sentences (rows kept), protected_spans.
    """
    from lmbias.corpora.coref import spans_in_sentences

    if not (len(doc_ids) == len(splits) == len(texts)):
        raise ValueError("doc_ids, splits and texts must have the same length")
    seen_ids: set[str] = set()
    for doc_id in doc_ids:
        if doc_id in seen_ids:
            raise DataError(f"document id {doc_id!r} occurs twice among the contexts")
        seen_ids.add(doc_id)
    spans = sentence_spans(texts, nlp, batch_size=batch_size)
    rows = {name: [] for name in SENTENCES_SCHEMA.names}
    seen: dict[str, int] = {}  # sentence text -> its row
    split_count = removed = 0
    for doc_id, split, text, doc_spans in zip(doc_ids, splits, texts, spans):
        protect = spans_in_sentences(links or {}, doc_id, doc_spans, len(text), source)
        for i, (start, end) in enumerate(doc_spans):
            sentence = text[start:end]
            split_count += 1
            spans_here = [{"start": a, "end": b, "name": n} for a, b, n in protect[i]]
            if dedup:
                if sentence in seen:
                    removed += 1
                    kept = rows["protect_spans"][seen[sentence]]
                    kept.extend([sp for sp in spans_here if sp not in kept])
                    kept.sort(key=lambda sp: (sp["start"], sp["end"]))
                    continue
                seen[sentence] = len(rows["doc_id"])
            for name, value in zip(SENTENCES_SCHEMA.names, (doc_id, split, i, sentence, start, end, spans_here)):
                rows[name].append(value)
    counts = {
        "contexts": len(texts),
        "duplicate_contexts": len(texts) - len(set(texts)),
        "sentences_split": split_count,
        "duplicates_removed": removed,
        "sentences": split_count - removed,
        "protected_spans": sum(len(p) for p in rows["protect_spans"]),
    }
    return pa.table(rows, schema=SENTENCES_SCHEMA), counts


def gap_sentences(gap: pa.Table, nlp, batch_size: int = 128, dedup: bool = True, source=None) -> tuple[pa.Table, dict]:
    """GAP contexts (results/data/gap.parquet: split, id, text, and the pronoun/name columns) -> sentences
    with the gold pronoun-name links (protect_spans); see split_contexts. `source` names the table in errors."""
    from lmbias.corpora.coref import gap_pronoun_links

    missing = {"split", "id", "text"} - set(gap.column_names)
    if missing:
        raise DataError(f"GAP table lacks columns {sorted(missing)}", source)
    table, counts = split_contexts(
        gap.column("id").to_pylist(),
        gap.column("split").to_pylist(),
        gap.column("text").to_pylist(),
        nlp,
        batch_size=batch_size,
        dedup=dedup,
        links=gap_pronoun_links(gap, source),
        source=source,
    )
    log.info(
        "GAP: %(contexts)d contexts (%(duplicate_contexts)d duplicated) -> %(sentences_split)d sentences, "
        "%(duplicates_removed)d exact duplicates removed, %(sentences)d kept; %(protected_spans)d pronouns "
        "linked to a name (gold coreference)",
        counts,
    )
    return table, counts
