"""The summary rows a paper figure reads: method names (sweep instances included) and their order, the checks
on the rows given, their aggregate (seed "mean") rows, and the choice of one variant or subset to show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmbias.metrics.summary import AGGREGATE_SEED

SUMMARY_COLUMNS = ("model", "method", "seed", "benchmark", "metric", "variant", "subset", "value")
KEYS = ["model", "method", "benchmark", "metric", "variant", "subset"]


# ------------------------------------------------------------------------------------------ method names


@dataclass(frozen=True)
class MethodName:
    """A method name, possibly a sweep instance `base@param=value[,param=value...]`."""

    name: str
    base: str
    param: str | None = None
    value: float | str | None = None  # the first parameter's value (a float where it parses as one)

    @property
    def is_sweep(self) -> bool:
        return self.param is not None


def parse_method(name: str) -> MethodName:
    """`cds@swap_rate=0.7` -> base cds, param swap_rate, value 0.7; a plain name has no parameter."""
    base, sep, rest = str(name).partition("@")
    if not sep:
        return MethodName(str(name), base)
    first = rest.split(",")[0]
    param, eq, raw = first.partition("=")
    if not eq:
        return MethodName(str(name), base, param or rest, None)
    try:
        value: float | str = float(raw)
    except ValueError:
        value = raw
    return MethodName(str(name), base, param, value)


def method_sort_key(name: str) -> tuple:
    """pretrained first, then by base name; a base's plain entry before its sweep instances, which sort by value."""
    m = parse_method(name)
    numeric = isinstance(m.value, float)
    return (
        m.base != "pretrained",
        m.base,
        m.is_sweep,
        m.param or "",
        not numeric,
        m.value if numeric else 0.0,
        str(m.value) if not numeric else "",
        m.name,
    )


# ------------------------------------------------------------------------------------------ input handling


def check_summaries(summaries, figure: str) -> pd.DataFrame:
    """The summary rows as a DataFrame, or a ValueError naming what `figure` needs."""
    need = (
        f"{figure} needs summary rows: the concatenated results/{{model}}/{{method}}/summary.parquet "
        f"(columns {', '.join(SUMMARY_COLUMNS)})"
    )
    if not isinstance(summaries, pd.DataFrame):
        raise ValueError(f"{need}; got {type(summaries).__name__}")
    missing = [c for c in SUMMARY_COLUMNS if c not in summaries.columns]
    if missing:
        raise ValueError(f"{need}; the rows given lack column(s) {', '.join(missing)}")
    if summaries.empty:
        raise ValueError(f"{need}; no rows were given")
    return summaries


def aggregate_rows(summaries: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, method, benchmark, metric, variant, subset): the summary's aggregate (seed "mean")
    rows; a (model, method) without any is averaged over its seeds here (interval columns left empty when
    there are several). Adds `n_seeds` (and `std`) where the summary lacks them."""
    df = summaries.copy()
    for col in ("ci_low", "ci_high", "p_value", "n", "std", "n_seeds"):
        if col not in df.columns:
            df[col] = np.nan
    for col in ("value", "ci_low", "ci_high", "p_value", "std", "n_seeds"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    for col in ("model", "method", "seed", "benchmark", "metric", "variant", "subset"):
        df[col] = df[col].astype(str)
    is_mean = df["seed"] == AGGREGATE_SEED
    with_mean = set(zip(df.loc[is_mean, "model"], df.loc[is_mean, "method"]))
    agg = df[is_mean].copy()
    per_seed = df[~is_mean]
    seeds = per_seed.groupby(["model", "method"])["seed"].nunique()
    # n_seeds for aggregate rows the summary gave without it
    fill = agg["n_seeds"].isna()
    if fill.any():
        agg.loc[fill, "n_seeds"] = [
            float(seeds.get((m, k), 1)) for m, k in zip(agg.loc[fill, "model"], agg.loc[fill, "method"])
        ]
    rest = per_seed[[(m, k) not in with_mean for m, k in zip(per_seed["model"], per_seed["method"])]]
    if not rest.empty:
        grouped = rest.groupby(KEYS, sort=True)
        averaged = grouped.agg(
            value=("value", "mean"),
            std=("value", "std"),
            n_seeds=("seed", "nunique"),
            ci_low=("ci_low", "first"),
            ci_high=("ci_high", "first"),
            p_value=("p_value", "first"),
            n=("n", "sum"),
        ).reset_index()
        several = averaged["n_seeds"] > 1
        averaged.loc[several, ["ci_low", "ci_high", "p_value"]] = np.nan
        averaged["seed"] = AGGREGATE_SEED
        agg = pd.concat([agg, averaged[agg.columns.intersection(averaged.columns)]], ignore_index=True)
    return agg.sort_values(KEYS, kind="stable").reset_index(drop=True)


def variant_parts(variant: str) -> dict[str, str]:
    """A variant's settings: "ddof=1,pooling=mean" -> {"ddof": "1", "pooling": "mean"} (a bare word maps to "")."""
    parts = {}
    for piece in str(variant).split(","):
        key, eq, value = piece.partition("=")
        parts[key.strip()] = value.strip() if eq else ""
    return parts


def pick_one(
    values: Iterable[str], rank: Callable[[str], tuple] | None = None, preferred: Iterable[str] = ()
) -> str | None:
    """One of `values` (a variant or subset): the first of `preferred` present, else the lowest by `rank`, else the
    first in sorted order; None when there are none."""
    values = sorted(set(values))
    if not values:
        return None
    for p in preferred:
        if p in values:
            return p
    return min(values, key=rank) if rank else values[0]
