"""BEC-Pro metrics (Bartl et al. 2020): mean association per profession group x person gender, and tests.

association = log(p_T(TM) / p_T(TAM)): the person word's probability with only the person masked (TM),
over its probability with the profession masked too (TAM, the prior). Positive: the profession makes
the person word more likely than the bare template does.

Rows (subset names in parentheses):
* association_mean (prof=<group>/person=<gender>, group in male|female|balanced|all): mean with a 95 %
  t-interval, n sentences;
* association_gap (prof=<group>): mean of male - female association over matched sentences (same
  template and profession; he/she, my brother/my sister, ... paired by position in the person lists),
  with the p-value of a paired test (`test`: wilcoxon, the default, or t) and association_gap_r, its
  effect size r;
* with `per_profession: true`, association_mean per profession x person gender (Bartl's Figure 1).

`paired_test` and `bec_pro_paired_rows` compare two methods' scores (pre vs post mitigation) row by row;
the cross-method table that calls them is a later rule.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lmbias.errors import ConfigError, DataError
from lmbias.lazy import lazy_module
from lmbias.metrics.summary import metric_row
from lmbias.options import check_block

sps = lazy_module("scipy.stats")  # imported on first use: DAG builds never run a test

TESTS = ("wilcoxon", "t")
GROUPS = ("male", "female", "balanced")
GENDERS = ("male", "female")
_ARTICLE = re.compile(r", (?:der|die) <profession>")


@dataclass(frozen=True)
class BecProOptions:
    test: str = "wilcoxon"
    per_profession: bool = False
    drop_artefacts: bool = False

    @classmethod
    def from_config(cls, metric_cfg: dict, key: str = "benchmarks.bec_pro.metric") -> BecProOptions:
        """The options of a metric block, checked against the schema (lmbias.options)."""
        check_block(metric_cfg, "benchmarks.bec_pro_en.metric", key)
        return cls(**(metric_cfg or {}))

    @property
    def variant(self) -> str:
        return f"test={self.test}" + (",drop_artefacts" if self.drop_artefacts else "")


def wilcoxon_z(diff: np.ndarray) -> tuple[float, int]:
    """Normal-approximation z of the Wilcoxon signed-rank statistic (zeros dropped, tie-corrected) and n used.

    z > 0 when the positive differences dominate. r = z / sqrt(n) is the usual effect size.
    """
    d = np.asarray(diff, dtype=np.float64)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return math.nan, 0
    ranks = sps.rankdata(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    mean = n * (n + 1) / 4.0
    _, ties = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float(np.sum(ties**3 - ties)) / 48.0
    if var <= 0:
        return math.nan, n
    return (w_plus - mean) / math.sqrt(var), n


def paired_test(before, after, test: str = "wilcoxon") -> dict:
    """Paired test of after - before: {mean_diff, statistic, p_value, effect_size_r, n}.

    wilcoxon: scipy's signed-rank test (statistic = min(W+, W-); exact p for small samples without ties),
    r = z / sqrt(n) with z from the normal approximation (signed: + when `after` is larger).
    t: paired t-test, r = sign(t) * sqrt(t^2 / (t^2 + df)).
    """
    x = np.asarray(before, dtype=np.float64)
    y = np.asarray(after, dtype=np.float64)
    if x.shape != y.shape:
        raise DataError(f"paired test: {len(x)} values before, {len(y)} after")
    if test not in TESTS:
        raise ConfigError(f"paired test: {test!r} is not one of {', '.join(TESTS)}")
    d = y - x
    out = {
        "mean_diff": float(d.mean()) if len(d) else math.nan,
        "statistic": math.nan,
        "p_value": math.nan,
        "effect_size_r": math.nan,
        "n": int(len(d)),
    }
    if test == "wilcoxon":
        if np.count_nonzero(d) == 0:
            return out
        res = sps.wilcoxon(y, x, zero_method="wilcox", alternative="two-sided")
        z, n = wilcoxon_z(d)
        out.update(
            statistic=float(res.statistic), p_value=float(res.pvalue), effect_size_r=z / math.sqrt(n) if n else math.nan
        )
    else:
        if len(d) < 2 or np.all(d == d[0]):
            return out
        res = sps.ttest_rel(y, x)
        t, df = float(res.statistic), len(d) - 1
        out.update(
            statistic=t, p_value=float(res.pvalue), effect_size_r=math.copysign(math.sqrt(t * t / (t * t + df)), t)
        )
    return out


def _t_interval(values: np.ndarray) -> tuple[float, float]:
    n = len(values)
    if n < 2:
        return math.nan, math.nan
    sem = float(np.std(values, ddof=1)) / math.sqrt(n)
    half = float(sps.t.ppf(0.975, n - 1)) * sem
    mean = float(values.mean())
    return mean - half, mean + half


def _columns(scores: pa.Table, options: BecProOptions) -> dict[str, np.ndarray]:
    keep = np.ones(scores.num_rows, dtype=bool)
    if options.drop_artefacts:
        keep = ~np.asarray(scores.column("artefact").to_pylist(), dtype=bool)
    cols = {}
    for name in ("association", "prof_gender", "gender", "template", "profession_en", "profession", "pair_index"):
        values = scores.column(name).to_pylist()
        cols[name] = np.asarray(values, dtype=np.float64 if name == "association" else object)[keep]
    return cols


def matched_pairs(cols: dict[str, np.ndarray]) -> dict[tuple, dict[str, float]]:
    """{(prof group, template, profession_en, pair index): {"male": assoc, "female": assoc}}."""
    pairs: dict[tuple, dict[str, float]] = {}
    for i in range(len(cols["association"])):
        if cols["pair_index"][i] is None:
            continue
        template = _ARTICLE.sub(", ART <profession>", cols["template"][i])  # German: der/die by person gender
        key = (cols["prof_gender"][i], template, cols["profession_en"][i], int(cols["pair_index"][i]))
        slot = pairs.setdefault(key, {})
        if cols["gender"][i] in slot:
            raise DataError(f"BEC-Pro: two {cols['gender'][i]} rows for {key}")
        slot[cols["gender"][i]] = float(cols["association"][i])
    return {k: v for k, v in pairs.items() if len(v) == 2}


def bec_pro_metric_rows(scores: pa.Table, options: BecProOptions) -> list[dict]:
    cols = _columns(scores, options)
    assoc, group, gender = cols["association"], cols["prof_gender"], cols["gender"]
    rows: list[dict] = []

    def row(metric, subset, value, n, ci=(math.nan, math.nan), p=math.nan):
        rows.append(metric_row("bec_pro", metric, options.variant, subset, value, n, ci, interval="t_items", p_value=p))

    for g in GROUPS + ("all",):
        for person in GENDERS:
            sel = (gender == person) & ((group == g) if g != "all" else True)
            vals = assoc[sel]
            row(
                "association_mean",
                f"prof={g}/person={person}",
                float(vals.mean()) if len(vals) else math.nan,
                len(vals),
                _t_interval(vals),
            )
    pairs = matched_pairs(cols)
    for g in GROUPS + ("all",):
        chosen = [v for k, v in pairs.items() if g == "all" or k[0] == g]
        female = np.array([v["female"] for v in chosen])
        male = np.array([v["male"] for v in chosen])
        res = paired_test(female, male, options.test) if len(chosen) else None
        if res is None:
            row("association_gap", f"prof={g}", math.nan, 0)
            continue
        row("association_gap", f"prof={g}", res["mean_diff"], res["n"], _t_interval(male - female), res["p_value"])
        row("association_gap_r", f"prof={g}", res["effect_size_r"], res["n"], p=res["p_value"])
    if options.per_profession:
        for prof in sorted(set(cols["profession_en"].tolist())):
            for person in GENDERS:
                vals = assoc[(cols["profession_en"] == prof) & (gender == person)]
                row(
                    "association_mean",
                    f"profession={prof}/person={person}",
                    float(vals.mean()) if len(vals) else math.nan,
                    len(vals),
                    _t_interval(vals),
                )
    return rows


def bec_pro_paired_rows(before: pa.Table, after: pa.Table, test: str = "wilcoxon") -> list[dict]:
    """Pre vs post (two methods' score tables of the same benchmark), per profession group x person gender:
    association_change (mean after - before, p-value of the paired test) and association_change_r."""
    b = {r["row_id"]: r for r in before.select(["row_id", "association", "prof_gender", "gender"]).to_pylist()}
    a = {r["row_id"]: r for r in after.select(["row_id", "association"]).to_pylist()}
    if set(a) != set(b):
        raise DataError(f"BEC-Pro paired test: the two score tables cover different rows ({len(b)} vs {len(a)})")
    rows = []
    for g in GROUPS + ("all",):
        for person in GENDERS:
            ids = [i for i, r in b.items() if r["gender"] == person and (g == "all" or r["prof_gender"] == g)]
            res = paired_test([b[i]["association"] for i in ids], [a[i]["association"] for i in ids], test)
            subset = f"prof={g}/person={person}"
            for metric, value in (
                ("association_change", res["mean_diff"]),
                ("association_change_r", res["effect_size_r"]),
            ):
                rows.append(
                    {
                        "benchmark": "bec_pro",
                        "metric": metric,
                        "variant": f"test={test}",
                        "subset": subset,
                        "value": value,
                        "ci_low": math.nan,
                        "ci_high": math.nan,
                        "p_value": res["p_value"],
                        "n": res["n"],
                    }
                )
    return rows
