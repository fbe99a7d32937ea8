"""SEAT-v1 / SEAT-v2 of the DA-Gender paper (appendix A) on the generated `seat_templates` dataset.

Each item (`lmbias.parsers.seat_templates`) is one association asso(t, a): a target sentence and an
attribute sentence whose cosine similarity the effect size averages. Scoring embeds every distinct
sentence once per pooling (v2's [MASK] becomes the model's mask token) and stores, per target unit,

    s(t) = mean cos over its pairs with A1 (male-dominated professions) - mean cos over its pairs with A2,

which for v1 (all pairs) is May et al.'s s(w, A1, A2) and for v2 (pairs within one template) is the
DA-Gender code's per-target average. Metric rows as for the classic tests (`lmbias.benchmarks.seat_core`),
with ``version=v1|v2`` in the variant and subset = ``occupations-<split>``. Positive = male targets sit
closer to male-dominated professions (the stereotypical direction; the paper's Table 7 sign).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lmbias.benchmarks.definition import BenchmarkDef
from lmbias.benchmarks.seat_core import SCORES_SCHEMA, SeatOptions, SeatScoring, embed_all, seat_metric_rows
from lmbias.engine import embeddings
from lmbias.engine.lm import LanguageModel
from lmbias.errors import DataError
from lmbias.metrics import weat
from lmbias.metrics.headline import Headline


def score_seat_templates(items: pa.Table, lm: LanguageModel, scoring_cfg: dict | None = None) -> pa.Table:
    """Per-target-unit associations s(t) of results/data/seat_v1|seat_v2.parquet, for each pooling (the poolings a
    family allows read lm.family: an option's check)."""
    scoring = SeatScoring.from_config(scoring_cfg, lm.family)
    if items.num_rows == 0:
        raise DataError("SEAT-v1/v2: no items to score")
    d = items.to_pydict()
    t_sent, a_sent = d["target_sentence"], d["attribute_sentence"]
    embedded = embed_all(t_sent + a_sent, lm, scoring)

    # Units in first-appearance order within each role; every pair adds to its unit's A1 or A2 sums.
    keys = list(zip(d["test"], d["version"], d["target_role"], d["unit"]))
    unit_ids: dict[tuple, int] = {}
    for key in keys:
        unit_ids.setdefault(key, len(unit_ids))
    uid = np.array([unit_ids[k] for k in keys], dtype=np.int64)
    is_a1 = np.array([r == "attr1" for r in d["attribute_role"]])
    is_a2 = np.array([r == "attr2" for r in d["attribute_role"]])
    if not (is_a1 | is_a2).all():
        raise DataError(
            f"SEAT-v1/v2 items: attribute_role must be attr1 or attr2, found {sorted(set(d['attribute_role']))}"
        )
    n_units = len(unit_ids)
    n1 = np.bincount(uid[is_a1], minlength=n_units)
    n2 = np.bincount(uid[is_a2], minlength=n_units)
    if (n1 == 0).any() or (n2 == 0).any():
        raise DataError("SEAT-v1/v2 items: a target unit lacks pairs with attr1 or attr2")
    category = {}
    for key, cat in zip(keys, d["target_category"]):
        category.setdefault(key, cat)

    records = []
    for label, (index, vecs) in embedded.items():
        tv = vecs[[index[t] for t in t_sent]]
        av = vecs[[index[a] for a in a_sent]]
        cos = np.einsum("ij,ij->i", tv, av)
        c1 = np.bincount(uid[is_a1], weights=cos[is_a1], minlength=n_units) / n1
        c2 = np.bincount(uid[is_a2], weights=cos[is_a2], minlength=n_units) / n2
        position: dict[tuple, int] = {}
        for key, u in unit_ids.items():
            test, version, role, unit = key
            group = (test, version, role)
            position[group] = position.get(group, -1) + 1
            records.append(
                {
                    "test": test,
                    "version": version,
                    "pooling": label,
                    "role": role,
                    "category": category[key],
                    "unit": unit,
                    "position": position[group],
                    "s": float(c1[u] - c2[u]),
                    "assoc_attr1": float(c1[u]),
                    "assoc_attr2": float(c2[u]),
                    "n_attr1": int(n1[u]),
                    "n_attr2": int(n2[u]),
                }
            )
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA)


BENCHMARKS = [
    BenchmarkDef(
        name="seat_templates",
        families=("mlm", "clm", "seq2seq", "encoder"),
        score=score_seat_templates,
        parse_options=SeatOptions.from_config,
        rows=seat_metric_rows,
        description="DA-Gender appendix A: SEAT-v1 (May et al. templates) and SEAT-v2 (Bartl templates, "
        "target or attribute masked) effect sizes with permutation p",
        reads="embeddings",
        headlines=(
            Headline("effect_size", None, "effect size (test terms)", "0", variant_contains="pooling=mean,ddof=1"),
        ),
        library=(embeddings, weat),
    )
]
