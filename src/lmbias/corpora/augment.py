"""Counterfactual corpora: augmentation (CDA, Lu et al.) and substitution (CDS, Hall Maudslay et al.).

Both take a sentence table (columns doc_id, sentence_id, text; any further columns are carried along) and
a ``lmbias.corpora.counterfactual.Swapper``. Names are swapped consistently within a document (rows sharing a
doc_id). Nothing is dropped: a sentence with nothing to swap keeps its row, flagged ``changed=False``.

- CDA: every original row followed by its counterfactual (2x rows). ``is_counterfactual`` marks the copy;
  ``changed`` is True on a copy whose text differs from its original (always False on originals).
- CDS: the same rows, in place; a fraction ``swap_rate`` of the *sentences* (``unit="sentence"``, the
  default and the over-debiasing paper's definition, section 7.3) or of the *documents* (``unit="document"``:
  all sentences of a chosen doc id) is replaced by its counterfactual. ``selection="random"`` (default)
  draws round(rate*N) of the N units with ``random.Random(seed)`` from the sorted keys, so the choice does
  not depend on row order; ``selection="prefix"`` takes the first int(rate*N) units in row order, as the
  over-debiasing authors' code does (DA-Gender ``bert_CDS.py``: ``sents[:int(CDS_ratio * len(sents))]``).
  ``swapped`` marks the replaced rows (``is_counterfactual`` is the same flag, kept for a schema shared
  with CDA).

Both take ``protect``: per row, character spans ``(start, end[, name])`` the swapper must not flip (gold
coreference with a proper noun, Lu et al.'s rule; ``protect_spans`` of the GAP sentences, see
protect_from_table). None: coreference unknown, every gendered word is flipped as the intervention says.
"""

from __future__ import annotations

import logging
import numbers
import random

import pyarrow as pa

from lmbias.errors import ConfigError, DataError

log = logging.getLogger(__name__)

REQUIRED_COLUMNS = ("doc_id", "sentence_id", "text")


def _check_sentences(table: pa.Table, what: str) -> list[str]:
    if not isinstance(table, pa.Table):
        raise TypeError(f"{what}: expected a pyarrow.Table, got {type(table).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise DataError(
            f"{what}: sentence table lacks column(s) {', '.join(missing)} (has {', '.join(table.column_names)})"
        )
    if not pa.types.is_string(table.schema.field("text").type) and not pa.types.is_large_string(
        table.schema.field("text").type
    ):
        raise DataError(f"{what}: column 'text' must be a string column, got {table.schema.field('text').type}")
    texts = table.column("text").to_pylist()
    for row, text in enumerate(texts):
        if text is None:
            raise DataError(f"{what}: row {row} (doc_id {table.column('doc_id')[row].as_py()!r}) has a null text")
    for name in ("doc_id",):
        if table.column(name).null_count:
            raise DataError(f"{what}: column {name!r} has {table.column(name).null_count} null value(s)")
    return texts


def _ordered_columns(table: pa.Table) -> pa.Table:
    rest = [c for c in table.column_names if c not in REQUIRED_COLUMNS]
    return table.select(list(REQUIRED_COLUMNS) + rest)


def protect_from_table(table: pa.Table, column: str = "protect_spans") -> list[list[tuple]] | None:
    """The `column` of a sentence table as swap_texts' protect argument; None when the table has no such
    column (a corpus without gold coreference)."""
    if column not in table.column_names:
        return None
    return [
        [(sp["start"], sp["end"], sp.get("name")) for sp in (spans or [])] for spans in table.column(column).to_pylist()
    ]


def _check_protect(protect, n: int, what: str):
    if protect is not None and len(protect) != n:
        raise ValueError(f"{what}: protect has {len(protect)} entries for {n} rows")
    return protect


def cda_corpus(sentences: pa.Table, swapper, *, batch_size: int = 256, protect=None) -> pa.Table:
    """Every original sentence followed by its counterfactual: 2x rows, columns doc_id, sentence_id, text,
    (extra input columns), is_counterfactual, changed."""
    texts = _check_sentences(sentences, "cda_corpus")
    protect = _check_protect(protect, len(texts), "cda_corpus")
    sentences = _ordered_columns(sentences)
    doc_ids = sentences.column("doc_id").to_pylist()
    counterfactuals = swapper.swap_texts(texts, batch_size=batch_size, doc_ids=doc_ids, protect=protect)
    n = len(texts)
    doubled = sentences.take(pa.array([i // 2 for i in range(2 * n)], type=pa.int64()))
    out_text, is_cf, changed = [], [], []
    for original, cf in zip(texts, counterfactuals):
        out_text += [original, cf]
        is_cf += [False, True]
        changed += [False, cf != original]
    text_type = sentences.schema.field("text").type
    doubled = doubled.set_column(doubled.column_names.index("text"), "text", pa.array(out_text, type=text_type))
    doubled = doubled.append_column(
        pa.field("is_counterfactual", pa.bool_(), nullable=False), pa.array(is_cf, type=pa.bool_())
    )
    doubled = doubled.append_column(pa.field("changed", pa.bool_(), nullable=False), pa.array(changed, type=pa.bool_()))
    n_changed = sum(changed)
    log.info(
        "CDA (%s%s): %d sentences in (%d documents) -> %d rows out: %d originals + %d counterfactuals, "
        "%d of them changed, %d identical to their original (kept, changed=False)",
        swapper.intervention,
        "+names" if swapper.names else "",
        n,
        len(set(doc_ids)),
        doubled.num_rows,
        n,
        n,
        n_changed,
        n - n_changed,
    )
    return doubled


def check_swap_rate(swap_rate, key: str = "swap_rate") -> float:
    """swap_rate must be a number in (0, 1]; ConfigError naming `key` otherwise."""
    if isinstance(swap_rate, bool) or not isinstance(swap_rate, numbers.Real) or swap_rate != swap_rate:
        raise ConfigError(f"{key}: must be a number in (0, 1], got {swap_rate!r}")
    if not 0 < swap_rate <= 1:
        raise ConfigError(
            f"{key}: must be in (0, 1] (the fraction of sentences to swap, or of documents with "
            f"swap_unit: document), got {swap_rate!r}"
        )
    return float(swap_rate)


def choose_documents(doc_ids, swap_rate: float, seed: int) -> set:
    """The round(swap_rate * N) of the N distinct keys (doc ids, or (doc_id, sentence_id) pairs) to swap:
    seeded, independent of row order."""
    swap_rate = check_swap_rate(swap_rate)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ConfigError(f"seed: must be an integer, got {seed!r}")
    unique = sorted(set(doc_ids), key=lambda v: (type(v).__name__, v))
    n_swap = round(swap_rate * len(unique))
    return set(random.Random(int(seed)).sample(unique, n_swap))


#: What CDS' swap_rate is a fraction of: sentences (the over-debiasing paper, section 7.3: "the number of
#: sentences where a gender word is switched") or whole documents (all their sentences; Hall Maudslay et al.).
SWAP_UNITS = ("sentence", "document")
#: How the swapped units are chosen: a seeded random draw (default), or the first int(swap_rate * N) in row
#: (file) order, as the over-debiasing authors' code does.
SELECTIONS = ("random", "prefix")


def choose_prefix(keys, swap_rate: float) -> set:
    """The first int(swap_rate * N) of the N distinct keys in their order of first appearance (Python's
    float product truncated, as the DA-Gender code computes its size: int(0.29 * 100) == 28)."""
    swap_rate = check_swap_rate(swap_rate)
    unique = list(dict.fromkeys(keys))
    return set(unique[: int(swap_rate * len(unique))])


def cds_corpus(
    documents: pa.Table,
    swapper,
    swap_rate: float,
    seed: int,
    *,
    batch_size: int = 256,
    unit: str = "sentence",
    selection: str = "random",
    protect=None,
) -> pa.Table:
    """In-place substitution of a fraction `swap_rate` of the sentences (unit="sentence", default) or of the
    documents, all their sentences (unit="document"), drawn at random with `seed` (selection="random") or
    taken from the top of the table (selection="prefix").

    Same rows and order as the input; columns doc_id, sentence_id, text, (extra input columns),
    is_counterfactual, changed, swapped.
    """
    check_swap_rate(swap_rate)
    if unit not in SWAP_UNITS:
        raise ConfigError(f"swap_unit: must be one of {list(SWAP_UNITS)}, got {unit!r}")
    if selection not in SELECTIONS:
        raise ConfigError(f"selection: must be one of {list(SELECTIONS)}, got {selection!r}")
    texts = _check_sentences(documents, "cds_corpus")
    protect = _check_protect(protect, len(texts), "cds_corpus")
    documents = _ordered_columns(documents)
    doc_ids = documents.column("doc_id").to_pylist()
    if unit == "document":
        keys = doc_ids
    else:
        keys = list(zip(doc_ids, documents.column("sentence_id").to_pylist()))
    if selection == "prefix":
        chosen = choose_prefix(keys, swap_rate)
    else:
        chosen = choose_documents(keys, swap_rate, seed)  # the same seeded draw for either unit
    rows = [i for i, k in enumerate(keys) if k in chosen]
    swapped_texts = swapper.swap_texts(
        [texts[i] for i in rows],
        batch_size=batch_size,
        doc_ids=[doc_ids[i] for i in rows],
        protect=[protect[i] for i in rows] if protect is not None else None,
    )
    out_text = list(texts)
    swapped = [False] * len(texts)
    changed = [False] * len(texts)
    for i, cf in zip(rows, swapped_texts):
        out_text[i] = cf
        swapped[i] = True
        changed[i] = cf != texts[i]
    text_type = documents.schema.field("text").type
    out = documents.set_column(documents.column_names.index("text"), "text", pa.array(out_text, type=text_type))
    flags = pa.array(swapped, type=pa.bool_())
    out = out.append_column(pa.field("is_counterfactual", pa.bool_(), nullable=False), flags)
    out = out.append_column(pa.field("changed", pa.bool_(), nullable=False), pa.array(changed, type=pa.bool_()))
    out = out.append_column(pa.field("swapped", pa.bool_(), nullable=False), flags)
    n_docs = len(set(doc_ids))
    log.info(
        "CDS (%s%s, swap_rate=%g of %ss, %s): %d sentences in %d documents -> %d rows out; %d %ss "
        "(%d sentences) swapped, %d sentences changed, %d sentences kept as they are",
        swapper.intervention,
        "+names" if swapper.names else "",
        swap_rate,
        unit,
        f"seed={seed}" if selection == "random" else "first in row order",
        len(texts),
        n_docs,
        out.num_rows,
        len(chosen),
        unit,
        len(rows),
        sum(changed),
        len(texts) - len(rows),
    )
    return out
