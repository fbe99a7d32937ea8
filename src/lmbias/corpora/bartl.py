"""Bartl et al.'s (2020) CDS fine-tuning corpus, built from their own gap_flipped.tsv.

Their code (gender-bias-BERT, code/main.py with ``--tune gap_flipped.tsv``) reads the file with pandas
(tab-separated, a header row, a leading unnamed index column, the GAP columns ID, Text, Pronoun, ...) and
fine-tunes on ``sent_tokenize(text)`` of every row's ``Text``, concatenated in file order: no row is skipped
and no sentence removed (the three contexts GAP lists twice stay twice). The other columns (Pronoun, A, B,
their offsets) are the unswapped GAP annotation and are not read.

The file is GAP with name-based CDS already applied, so every row is a counterfactual
(``is_counterfactual`` true). Which sentences differ from GAP is not known from this file alone:
``changed`` is null. NLTK's Punkt (their splitter) is not a dependency of this project; the splitter is a
spaCy option (lmbias.corpora.sentences.load_splitter), by default the sentencizer, whose punctuation rules
are the closest to Punkt (docs/corpora.md, "GAP sentence count").
"""

from __future__ import annotations

import csv
import logging
import os
from pathlib import Path

import pyarrow as pa

from lmbias.errors import DataError

log = logging.getLogger(__name__)

#: The columns of gap_flipped.tsv the corpus reads (the rest are GAP's unswapped annotation).
REQUIRED_COLUMNS = ("ID", "Text")
BARTL_DEFAULTS = {"splitter": "sentencizer", "batch_size": 128}
CORPUS_NAME = "gap-flipped"


def read_flipped_gap(path: str | os.PathLike) -> list[tuple[str, str, int]]:
    """(ID, Text, line) of every row of gap_flipped.tsv, in file order.

    Read as pandas' default CSV dialect reads it (tab, '"' quotes, blank lines skipped). DataError naming
    the file and line for: a header without ID or Text, a row with another number of fields than the
    header, an empty ID or Text (pandas would read NaN, and their sent_tokenize fails on it), a repeated
    ID, bad quoting or bytes that are not UTF-8.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read Bartl et al.'s flipped GAP file: {exc.strerror}", path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"not valid UTF-8 ({exc.reason})", path, raw[: exc.start].count(b"\n") + 1) from None
    reader = csv.reader(text.splitlines(keepends=True), delimiter="\t", quotechar='"', strict=True)
    rows: list[tuple[str, str, int]] = []
    header: list[str] | None = None
    seen: dict[str, int] = {}
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # a blank line (pandas skips them)
            if header is None:
                header = fields
                missing = [c for c in REQUIRED_COLUMNS if c not in header]
                if missing:
                    raise DataError(
                        f"header lacks column(s) {', '.join(missing)} (has {', '.join(header)})", path, line
                    )
                id_col, text_col = header.index("ID"), header.index("Text")
                continue
            if len(fields) != len(header):
                raise DataError(
                    f"expected {len(header)} tab-separated fields as in the header, got {len(fields)}", path, line
                )
            doc_id, context = fields[id_col].strip(), fields[text_col]
            if not doc_id:
                raise DataError("empty ID", path, line)
            if not context.strip():
                raise DataError(f"row {doc_id!r} has an empty Text", path, line)
            if doc_id in seen:
                raise DataError(f"ID {doc_id!r} occurs twice (first at line {seen[doc_id]})", path, line)
            seen[doc_id] = line
            rows.append((doc_id, context, line))
    except csv.Error as exc:
        raise DataError(f"malformed TSV: {exc}", path, reader.line_num) from None
    if header is None:
        raise DataError("empty file: no header row", path, 1)
    if not rows:
        raise DataError("no data rows", path, 2)
    return rows


def gap_split(doc_id: str) -> str:
    """GAP's split from its ID ('development-17' -> 'development')."""
    return doc_id.rsplit("-", 1)[0] if "-" in doc_id else ""


def bartl_corpus(path: str | os.PathLike, nlp, batch_size: int = 128) -> tuple[pa.Table, dict]:
    """gap_flipped.tsv -> every row's Text split into sentences, in file order, none removed; columns of
    lmbias.corpora.jobs.COUNTERFACTUAL_SCHEMA (doc_id = GAP ID, sentence_id = position in its Text)."""
    from lmbias.corpora.sentences import split_contexts

    rows = read_flipped_gap(path)
    ids = [r[0] for r in rows]
    sentences, counts = split_contexts(
        ids, [gap_split(i) for i in ids], [r[1] for r in rows], nlp, batch_size=batch_size, dedup=False, source=path
    )
    n = sentences.num_rows
    table = pa.table(
        {
            "doc_id": sentences.column("doc_id"),
            "sentence_id": sentences.column("sentence_id"),
            "split": sentences.column("split"),
            "text": sentences.column("text"),
            "is_counterfactual": pa.array([True] * n, type=pa.bool_()),
            "changed": pa.nulls(n, type=pa.bool_()),  # unknown: the file holds no original to compare with
        }
    )
    counts = {"rows": len(rows), "sentences": n, "duplicate_contexts": counts["duplicate_contexts"]}
    log.info(
        "%s: %d rows -> %d sentences (file order, none removed; %d contexts repeat another)",
        path,
        counts["rows"],
        n,
        counts["duplicate_contexts"],
    )
    return table, counts
