"""Corpus loading and tokenising, and the (seed, epoch)-seeded length-grouped batch order.

Batches are built GLOBALLY: every process computes the same list of step batches (batch_size x world x
gradient accumulation examples) and takes its contiguous slices of them (trainer.Trainer._epoch_steps), so a
run on N processes, or with accumulation, sees the same step batches as one process with the whole batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lmbias.errors import DataError
from lmbias.io import file_sha256
from lmbias.training.objectives import Encoded

log = logging.getLogger(__name__)

PRONOUN_PLACEHOLDER = "[PRONOUN]"
# lmbias.corpora.gpr: another pronoun hidden too (mask token, no target), and the separator of accumulated
# sentences (the tokenizer's separator token here).
MASKED_PRONOUN = "[MASKED_PRONOUN]"
SENTENCE_SEPARATOR = "[SEP]"
ER_COLUMNS = ("doc_id", "sentence_id", "is_counterfactual")
GPR_COLUMNS = ("label", "split")


@dataclass
class Corpus:
    """Training texts (and for ER each one's counterfactual or None; for GPR the labels), validation split."""

    texts: list[str]
    swaps: list[str | None] | None = None
    labels: list[str] | None = None
    val_texts: list[str] = field(default_factory=list)
    val_labels: list[str] = field(default_factory=list)
    sha256: str = ""
    path: str = ""


def load_corpus(path, settings) -> Corpus:
    """Read the training corpus parquet; DataError naming the file for a missing, unreadable or empty
    file or missing columns."""
    path = Path(path)
    if not path.is_file():
        raise DataError("training corpus not found", path)
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"not a readable parquet file ({exc})", path) from None
    col = settings.text_column
    needed = [col]
    er = settings.er_lambda is not None
    if settings.objective == "gpr":
        needed += GPR_COLUMNS
    elif er:
        needed += ER_COLUMNS
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        why = (
            "gpr needs" if settings.objective == "gpr" else "embedding regularisation needs" if er else "training needs"
        )
        raise DataError(
            f"corpus has no column(s) {', '.join(missing)} ({why} {', '.join(needed)}; it has "
            f"{', '.join(table.column_names)})",
            path,
        )
    rows = table.to_pylist()
    digest = file_sha256(path)
    if settings.objective == "gpr":
        train = [r for r in rows if r["split"] == "train"]
        val = [r for r in rows if r["split"] == "validation"]
        if settings.limit_examples:
            train, val = train[: settings.limit_examples], val[: settings.limit_examples]
        for r in train + val:
            if (r[col] or "").count(PRONOUN_PLACEHOLDER) != 1:
                raise DataError(
                    f"gpr example {r.get('example_id')!r}: text must hold {PRONOUN_PLACEHOLDER} exactly once", path
                )
        corpus = Corpus(
            [r[col] for r in train],
            labels=[_gpr_target(r) for r in train],
            val_texts=[r[col] for r in val],
            val_labels=[_gpr_target(r) for r in val],
            sha256=digest,
        )
        if settings.select_epoch == "validation_accuracy" and not val:
            raise DataError("select_epoch validation_accuracy needs rows with split 'validation'; there are none", path)
    elif er:
        swaps: dict[tuple, str] = {}
        for r in rows:
            if r["is_counterfactual"]:
                swaps[(r["doc_id"], r["sentence_id"])] = r[col]
        originals = [r for r in rows if not r["is_counterfactual"]]
        if settings.limit_examples:
            originals = originals[: settings.limit_examples]
        corpus = Corpus(
            [r[col] for r in originals],
            swaps=[swaps.get((r["doc_id"], r["sentence_id"])) for r in originals],
            sha256=digest,
        )
        if rows and not any(s is not None for s in corpus.swaps):
            raise DataError(
                "embedding regularisation needs counterfactual rows (is_counterfactual true, same "
                "doc_id and sentence_id as an original); there are none",
                path,
            )
    else:
        texts = [r[col] for r in rows]
        if settings.limit_examples:
            texts = texts[: settings.limit_examples]
        corpus = Corpus(texts, sha256=digest)
    corpus.path = str(path)
    bad = [i for i, t in enumerate(corpus.texts) if not isinstance(t, str) or not t.strip()]
    if bad:
        raise DataError(f"row {bad[0]}: empty or null {col!r}", path)
    if not corpus.texts:
        raise DataError("training corpus has no training rows", path)
    return corpus


def _gpr_target(row: dict) -> str:
    """The pronoun as written (`surface`: "He" at a sentence start, so a cased tokenizer's target is "He"),
    else the lower-cased `label` (corpora written without `surface`). Uncased tokenizers lower-case it anyway."""
    return row.get("surface") or row["label"]


def encode(tokenizer, texts: list[str], max_length: int, words: bool = False) -> list[Encoded]:
    enc = tokenizer(texts, truncation=True, max_length=max_length, return_special_tokens_mask=True)
    out = []
    for i, ids in enumerate(enc["input_ids"]):
        out.append(
            Encoded(
                ids=list(ids), special=list(enc["special_tokens_mask"][i]), words=enc.word_ids(i) if words else None
            )
        )
    return out


def encode_gpr(tokenizer, texts: list[str], labels: list[str], max_length: int, where) -> list[Encoded]:
    """[PRONOUN] -> mask token; the target is the token the pronoun takes at that position (the label as
    written; lower-cased when as written it is not one token, e.g. "HE" for a cased BPE vocabulary). Other
    pronouns hidden too ([MASKED_PRONOUN]) are mask tokens without a target; [SEP] between accumulated
    sentences becomes the tokenizer's separator token."""
    mask = tokenizer.mask_token
    sep = tokenizer.sep_token or tokenizer.eos_token or ""
    texts = [t.replace(f" {SENTENCE_SEPARATOR} ", f" {sep} ").replace(MASKED_PRONOUN, mask) for t in texts]
    masked = encode(tokenizer, [t.replace(PRONOUN_PLACEHOLDER, mask) for t in texts], max_length)

    def fill(words):
        return encode(tokenizer, [t.replace(PRONOUN_PLACEHOLDER, w) for t, w in zip(texts, words)], max_length)

    filled = fill(labels)
    lowered = None

    def target_positions(m, f):
        # where the masked text has a mask and the filled one the pronoun (other pronouns stay masks in both)
        if len(m.ids) != len(f.ids):
            return []
        return [i for i, (a, b) in enumerate(zip(m.ids, f.ids)) if a == tokenizer.mask_token_id and b != a]

    kept, cut = [], 0
    for k, m in enumerate(masked):
        f = filled[k]
        pos = target_positions(m, f)
        if len(pos) != 1 and labels[k] != labels[k].lower():
            lowered = lowered or fill([w.lower() for w in labels])
            f = lowered[k]
            pos = target_positions(m, f)
        if not pos and len(m.ids) >= max_length:
            cut += 1  # the pronoun lies beyond max_length: no target left
            continue
        if len(pos) != 1:
            raise DataError(
                f"gpr example {k} ({labels[k]!r}): the pronoun is not one token of this tokenizer at the mask position",
                where,
            )
        m.target_pos, m.target = pos[0], f.ids[pos[0]]
        kept.append(m)
    if cut:
        log.warning("%s: %d gpr example(s) dropped: the pronoun lies beyond max_length=%d", where, cut, max_length)
    return kept


def global_batches(
    lengths: list[int], global_batch: int, seed: int, epoch: int, group_by_length: bool, world: int = 1
) -> list[list[int]]:
    """Example indices of every global batch of the epoch, from a permutation seeded by (seed, epoch).

    group_by_length: the permutation is cut into mega-batches of 50 global batches, each sorted by length
    (longest first) and cut into batches whose order is shuffled again, so padding is small and batch
    lengths still vary (as HF's LengthGroupedSampler). A last batch smaller than `world` is dropped.
    """
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    if group_by_length:
        mega = global_batch * 50
        batches = []
        for start in range(0, len(order), mega):
            chunk = sorted(order[start : start + mega].tolist(), key=lambda i: -lengths[i])
            batches += [chunk[k : k + global_batch] for k in range(0, len(chunk), global_batch)]
        perm = rng.permutation(len(batches))
        batches = [batches[p] for p in perm]
    else:
        order = order.tolist()
        batches = [order[k : k + global_batch] for k in range(0, len(order), global_batch)]
    return [b for b in batches if len(b) >= world]
