"""SEAT core shared by the classic sent-bias tests and the generated SEAT-v1/v2 (one module per concept).

Scoring embeds every distinct sentence once (`lmbias.engine.embeddings`), for each configured pooling, and
stores per *target* the association the effect size needs,

    s(w, A1, A2) = mean_{a in A1} cos(w, a) - mean_{b in A2} cos(w, b),

so the metric job never touches a vector: effect size and permutation test (`lmbias.metrics.weat`) run on the
cached s(w). Rows: metric ``effect_size`` with ``p_value`` and ``n`` (targets), subset = test name,
variant = ``[version=v1|v2,]pooling=<pooling>,ddof=<0|1>`` (plus ``,alternative=two-sided`` when asked).

Options (config.yaml, ``benchmarks.<name>``):
  scoring.poolings  {mlm: [...], clm: [...], seq2seq: [...], encoder: [...]}; a family left out gets its
                    default (mlm and encoder mean, clm last, seq2seq decoder_mean; `lmbias.engine.embeddings`)
  scoring.pad_to    padding length of the ``*mean_padded`` poolings (128, as the DA-Gender code)
  metric.ddof       list of std ddofs, default [1] (sample std); 0 is the DA-Gender code's
  metric.exact_max, n_samples, seed, alternative   the permutation test (`lmbias.metrics.weat.permutation_test`)

Kept out of `lmbias.benchmarks` (which only declares the BenchmarkDefs) so the two benchmark modules can
share it without importing each other during registry discovery.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lmbias.engine.embeddings import DA_GENDER_PAD_TO, DEFAULT_POOLING, pooling_label
from lmbias.engine.lm import LanguageModel
from lmbias.errors import ConfigError, DataError
from lmbias.metrics.weat import (
    EXACT_MAX,
    N_SAMPLES,
    check_std_epsilon,
    cosine_matrix,
    effect_size,
    permutation_test,
)
from lmbias.options import check_block

TARGET_ROLES = ("targ1", "targ2")
ATTRIBUTE_ROLES = ("attr1", "attr2")

SCORES_SCHEMA = pa.schema(
    [
        ("test", pa.string()),
        ("version", pa.string()),  # "" for the classic tests, v1 | v2 for the generated SEAT-v1/v2
        ("pooling", pa.string()),  # variant label, e.g. mean, mean_padded128, decoder_mean
        ("role", pa.string()),  # targ1 | targ2
        ("category", pa.string()),
        ("unit", pa.string()),  # the target (sentence or phrase) permuted by the test
        ("position", pa.int32()),  # order of the unit within its role
        ("s", pa.float64()),  # s(w, A1, A2)
        ("assoc_attr1", pa.float64()),  # mean cosine with A1
        ("assoc_attr2", pa.float64()),  # mean cosine with A2
        ("n_attr1", pa.int32()),  # associations averaged into assoc_attr1
        ("n_attr2", pa.int32()),
    ]
)


@dataclass(frozen=True)
class SeatScoring:
    """The scoring options of a SEAT entry for one model family: its poolings (the family's list under
    scoring.poolings, else the family's default pooling), pad_to, batch_size and max_length."""

    batch_size: int = 64
    max_length: int = 512
    poolings: tuple[str, ...] = ()
    pad_to: int | None = DA_GENDER_PAD_TO

    @classmethod
    def from_config(cls, scoring_cfg: dict | None, family: str, key: str = "scoring") -> SeatScoring:
        """The options for `family`, the block checked against the schema's seat.scoring (the poolings each
        family allows, ranges, unknown keys); errors name `key`."""
        check_block(scoring_cfg, "benchmarks.seat.scoring", key)
        cfg = dict(scoring_cfg or {})
        poolings = tuple((cfg.get("poolings") or {}).get(family) or [DEFAULT_POOLING[family]])
        return cls(
            batch_size=cfg.get("batch_size", 64),
            max_length=cfg.get("max_length", 512),
            poolings=poolings,
            pad_to=cfg.get("pad_to", DA_GENDER_PAD_TO),
        )


def mask_placeholder(texts: list[str], tokenizer, placeholder: str = "[MASK]") -> list[str]:
    """Swap the generated datasets' literal [MASK] for the model's mask token; a tokenizer without one
    (GPT-2) reads the literal text, as the DA-Gender code does for GPT-2."""
    token = getattr(tokenizer, "mask_token", None)
    if not token or token == placeholder:
        return texts
    return [t.replace(placeholder, token) for t in texts]


def embed_all(
    texts: list[str], lm: LanguageModel, scoring: SeatScoring
) -> dict[str, tuple[dict[str, int], np.ndarray]]:
    """{pooling label: (text -> row, unit-normalised float64 embeddings)} of the distinct texts."""
    # The engine deduplicates (and counts requests vs distinct inputs); rows are then kept once per text.
    vectors = lm.embeddings(
        mask_placeholder(list(texts), lm.tokenizer),
        scoring.poolings,
        batch_size=scoring.batch_size,
        max_length=scoring.max_length,
        pad_to=scoring.pad_to,
    )
    first: dict[str, int] = {}
    for i, t in enumerate(texts):
        first.setdefault(t, i)
    index = {t: k for k, t in enumerate(first)}
    rows = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    out = {}
    for name, vecs in vectors.items():
        vecs = vecs[rows].astype(np.float64)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        if np.any(norms == 0):
            raise DataError(f"pooling {name}: an all-zero sentence embedding; cosine similarity is undefined")
        out[pooling_label(name, scoring.pad_to)] = (index, vecs / norms)
    return out


def score_seat(items: pa.Table, lm: LanguageModel, scoring_cfg: dict | None = None) -> pa.Table:
    """Per-target associations s(w) of every test in results/data/seat.parquet, for each pooling. The poolings
    a family allows are an option's check, so they read lm.family."""
    scoring = SeatScoring.from_config(scoring_cfg, lm.family)
    rows = items.to_pylist()
    if not rows:
        raise DataError("SEAT: no items to score")
    tests: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        tests.setdefault(row["test"], {}).setdefault(row["role"], []).append(row)
    for test, roles in tests.items():
        missing = [r for r in TARGET_ROLES + ATTRIBUTE_ROLES if not roles.get(r)]
        if missing:
            raise DataError(f"SEAT test {test!r} has no {', '.join(missing)} examples")
    embedded = embed_all([r["text"] for r in rows], lm, scoring)
    records = []
    for label, (index, vecs) in embedded.items():
        for test, roles in tests.items():
            attr = {r: vecs[[index[x["text"]] for x in roles[r]]] for r in ATTRIBUTE_ROLES}
            for role in TARGET_ROLES:
                targets = sorted(roles[role], key=lambda x: x["position"])
                tvecs = vecs[[index[x["text"]] for x in targets]]
                a1 = cosine_matrix(tvecs, attr["attr1"]).mean(axis=1)
                a2 = cosine_matrix(tvecs, attr["attr2"]).mean(axis=1)
                for pos, (item, c1, c2) in enumerate(zip(targets, a1, a2)):
                    records.append(
                        {
                            "test": test,
                            "version": "",
                            "pooling": label,
                            "role": role,
                            "category": item["category"],
                            "unit": item["text"],
                            "position": pos,
                            "s": float(c1 - c2),
                            "assoc_attr1": float(c1),
                            "assoc_attr2": float(c2),
                            "n_attr1": len(attr["attr1"]),
                            "n_attr2": len(attr["attr2"]),
                        }
                    )
    return pa.Table.from_pylist(records, schema=SCORES_SCHEMA)


@dataclass(frozen=True)
class SeatOptions:
    ddof: tuple[int, ...] = (1,)
    exact_max: int = EXACT_MAX
    n_samples: int = N_SAMPLES
    seed: int = 0
    alternative: str = "greater"
    std_epsilon: float = 0.0
    #: {name: [tests]}: a mean_abs_effect_size row per name, the mean of |effect size| over those tests
    #: (bias-bench's "average absolute effect size" over SEAT-6 ... 8b, Meade et al. 2022)
    averages: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_config(cls, metric_cfg: dict | None, key: str = "benchmarks.seat.metric") -> SeatOptions:
        check_block(metric_cfg, "benchmarks.seat.metric", key)  # every SEAT entry's metric block is seat's
        cfg = dict(metric_cfg or {})
        ddof = cfg.get("ddof", [1])
        ddof = [ddof] if isinstance(ddof, int) else ddof
        seed = cfg.get("seed", 0)
        alternative = cfg.get("alternative", "greater")
        std_epsilon = check_std_epsilon(cfg.get("std_epsilon", 0.0), f"{key}.std_epsilon")
        averages = cfg.get("averages") or {}
        return cls(
            ddof=tuple(ddof),
            exact_max=cfg.get("exact_max", EXACT_MAX),
            n_samples=cfg.get("n_samples", N_SAMPLES),
            seed=seed,
            alternative=alternative,
            std_epsilon=std_epsilon,
            averages=tuple((name, tuple(tests)) for name, tests in averages.items()),
        )


def variant_name(version: str, pooling: str, ddof: int, alternative: str = "greater", std_epsilon: float = 0.0) -> str:
    """Variant label; std_epsilon appears only when non-zero, so labels without it never change."""
    parts = ([f"version={version}"] if version else []) + [f"pooling={pooling}", f"ddof={ddof}"]
    if std_epsilon:
        parts.append(f"std_epsilon={std_epsilon:g}")
    if alternative != "greater":
        parts.append(f"alternative={alternative}")
    return ",".join(parts)


def seat_metric_rows(scores: pa.Table, options: SeatOptions) -> list[dict]:
    """effect_size rows (with permutation p) per (test, version, pooling) group and ddof."""
    data = scores.to_pydict()
    groups: dict[tuple[str, str, str], dict[str, list[tuple[int, float]]]] = {}
    for test, version, pooling, role, pos, s in zip(
        data["test"], data["version"], data["pooling"], data["role"], data["position"], data["s"]
    ):
        groups.setdefault((test, version, pooling), {}).setdefault(role, []).append((pos, s))
    rows = []
    for (test, version, pooling), roles in groups.items():
        x = np.array([s for _, s in sorted(roles.get("targ1", []))], dtype=np.float64)
        y = np.array([s for _, s in sorted(roles.get("targ2", []))], dtype=np.float64)
        if len(x) == 0 or len(y) == 0:
            raise DataError(f"SEAT scores: test {test!r} ({pooling}) lacks targ1 or targ2 associations")
        perm = permutation_test(
            x,
            y,
            exact_max=options.exact_max,
            n_samples=options.n_samples,
            seed=options.seed,
            alternative=options.alternative,
        )
        for ddof in options.ddof:
            rows.append(
                {
                    "benchmark": "seat",
                    "metric": "effect_size",
                    "variant": variant_name(version, pooling, ddof, options.alternative, options.std_epsilon),
                    "subset": test,
                    "value": effect_size(x, y, ddof=ddof, std_epsilon=options.std_epsilon),
                    "ci_low": math.nan,
                    "ci_high": math.nan,
                    "p_value": perm.p_value,
                    "n": int(len(x) + len(y)),
                }
            )
    return rows + _average_rows(rows, options.averages)


def _average_rows(rows: list[dict], averages) -> list[dict]:
    """mean_abs_effect_size rows: per average and variant, the mean of |effect size| over its tests (n = the
    number of tests). A test the scores do not hold is a ConfigError naming the average."""
    out = []
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for name, tests in averages:
        for variant in variants:
            by_test = {r["subset"]: r["value"] for r in rows if r["variant"] == variant}
            missing = [t for t in tests if t not in by_test]
            if missing:
                raise ConfigError(
                    f"SEAT metric option averages.{name}: test {missing[0]!r} is not scored "
                    f"(scored: {', '.join(sorted(by_test))}); add it to the benchmark's tests"
                )
            out.append(
                {
                    "benchmark": "seat",
                    "metric": "mean_abs_effect_size",
                    "variant": variant,
                    "subset": name,
                    "value": float(np.mean([abs(by_test[t]) for t in tests])),
                    "ci_low": math.nan,
                    "ci_high": math.nan,
                    "p_value": math.nan,
                    "n": len(tests),
                }
            )
    return out
