"""Small training corpora made from real GAP sentences (../shared/data/gap), shared by the training tests."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def gap_sentences(shared_data: Path, n: int, max_words: int = 40) -> list[str]:
    """The first sentence of the first `n` GAP development texts whose first sentence has at most `max_words` words."""
    out = []
    with open(shared_data / "gap" / "gap-development.tsv", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            first = re.split(r"(?<=\.) ", row["Text"])[0]
            if len(first.split()) <= max_words:
                out.append(first)
            if len(out) == n:
                break
    return out


def write_cda(texts: list[str], swapped: list[str], path: Path) -> Path:
    """A CDA-shaped corpus (results/corpora/gap/cda-*.parquet columns): every sentence and its counterfactual."""
    rows = []
    for i, (t, c) in enumerate(zip(texts, swapped)):
        for cf, text in ((False, t), (True, c)):
            rows.append(
                {
                    "doc_id": f"dev-{i}",
                    "sentence_id": 0,
                    "split": "development",
                    "text": text,
                    "is_counterfactual": cf,
                    "changed": cf and c != t,
                }
            )
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_gpr(shared_data: Path, scanned: int, kept: int, path: Path) -> Path:
    """A GPR corpus from the GAP sentences holding he/she/his/her (the first such pronoun -> [PRONOUN]), every
    fourth example for validation: the first `kept` examples found in `scanned` sentences."""
    gpr = []
    for i, t in enumerate(gap_sentences(shared_data, scanned)):
        m = re.search(r"\b(he|she|his|her)\b", t)
        if m:
            gpr.append(
                {
                    "example_id": str(i),
                    "text": t[: m.start()] + "[PRONOUN]" + t[m.end() :],
                    "label": m.group(1),
                    "gender": "male" if m.group(1) in ("he", "his") else "female",
                    "split": "validation" if len(gpr) % 4 == 3 else "train",
                }
            )
    pq.write_table(pa.Table.from_pylist(gpr[:kept]), path)
    return path
