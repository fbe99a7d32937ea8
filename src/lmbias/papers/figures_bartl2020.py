"""Bartl et al. (2020)'s figure: mean BEC-Pro associations per profession group and person gender."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from lmbias.papers.figure_data import aggregate_rows, check_summaries, method_sort_key, pick_one
from lmbias.papers.figure_style import (
    FEMALE_COLOUR,
    MALE_COLOUR,
    MUTED,
    add_legend,
    new_figure,
    placeholder,
    placeholder_figure,
    styled,
    subplots,
)

BEC_PRO_SUBSET = re.compile(r"prof=(male|female|balanced)/person=(male|female)")
PROFESSION_GROUPS = ("male", "female", "balanced")
LANGUAGES = {"en": "English", "de": "German"}


def _language(benchmark: str) -> str:
    suffix = benchmark.rsplit("_", 1)[-1]
    return f"{LANGUAGES[suffix]} ({benchmark})" if suffix in LANGUAGES else benchmark


def bec_pro_rows(summaries: pd.DataFrame) -> pd.DataFrame:
    """association_mean per profession group x person gender (BEC-Pro benchmarks, any configured name)."""
    agg = aggregate_rows(summaries)
    rows = agg[(agg["metric"] == "association_mean") & agg["subset"].str.fullmatch(BEC_PRO_SUBSET.pattern)]
    parts = rows["subset"].str.extract(BEC_PRO_SUBSET.pattern)
    rows = rows.assign(group=parts[0], person=parts[1])
    keep = []
    for _, g in rows.groupby(["benchmark", "model"], sort=True):
        keep.append(g[g["variant"] == pick_one(g["variant"], preferred=["test=wilcoxon"])])
    return pd.concat(keep, ignore_index=True) if keep else rows


@styled
def association_figure(summaries: pd.DataFrame, train_logs: dict | None = None) -> Figure:
    """Mean BEC-Pro association per profession group x person gender, before (pretrained) and after each
    fine-tuning method (Bartl et al. 2020, Figure 1): rows = (language, model), columns = methods."""
    rows = bec_pro_rows(check_summaries(summaries, "bartl2020/associations"))
    title = "BEC-Pro associations before and after fine-tuning (Bartl et al. 2020, Figure 1)"
    if rows.empty:
        return placeholder_figure(
            title,
            "No BEC-Pro association_mean rows (subsets prof=<group>/person=<gender>) "
            "in the summaries: run benchmark bec_pro_en (or bec_pro_de with a German model).",
        )
    pairs = sorted({(b, m) for b, m in zip(rows["benchmark"], rows["model"])})
    others = sorted(set(rows["method"]) - {"pretrained"}, key=method_sort_key)
    columns = ["pretrained"] + (others or [None])
    fig = new_figure(0.8 + 3.0 * len(columns), 0.9 + 2.9 * len(pairs))
    axes = subplots(fig, len(pairs), len(columns), sharey="row")
    x = np.arange(len(PROFESSION_GROUPS))
    width = 0.38
    for r, (bench, model) in enumerate(pairs):
        sel = rows[(rows["benchmark"] == bench) & (rows["model"] == model)]
        for c, method in enumerate(columns):
            ax = axes[r, c]
            head = f"{_language(bench)}\n{model}: " + (
                "after fine-tuning" if method is None else "before (pretrained)" if method == "pretrained" else method
            )
            if method is None:
                placeholder(
                    ax, "No fine-tuned method (e.g. cds) in the summaries: the 'after' side is missing.", width=30
                )
                ax.set_title(head)
                continue
            cell = sel[sel["method"] == method].set_index(["group", "person"])
            if cell.empty:
                placeholder(ax, f"No {bench} rows for {model} / {method}.", width=30)
                ax.set_title(head)
                continue
            for offset, person, colour in ((-width / 2, "male", MALE_COLOUR), (width / 2, "female", FEMALE_COLOUR)):
                vals, lows, highs = [], [], []
                for g in PROFESSION_GROUPS:
                    if (g, person) in cell.index:
                        row = cell.loc[(g, person)]
                        vals.append(float(row["value"]))
                        lows.append(float(row["ci_low"]))
                        highs.append(float(row["ci_high"]))
                    else:
                        vals.append(np.nan)
                        lows.append(np.nan)
                        highs.append(np.nan)
                vals, lows, highs = map(np.asarray, (vals, lows, highs))
                ok = np.isfinite(lows) & np.isfinite(highs)
                yerr = np.vstack(
                    [np.where(ok, np.maximum(vals - lows, 0), 0), np.where(ok, np.maximum(highs - vals, 0), 0)]
                )
                ax.bar(
                    x + offset,
                    np.nan_to_num(vals),
                    width,
                    color=colour,
                    label=f"{person} person words",
                    yerr=yerr if ok.any() else None,
                    error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"},
                )
                for i in np.flatnonzero(~np.isfinite(vals)):
                    ax.text(x[i] + offset, 0, "n/a", ha="center", va="bottom", fontsize=6.5, color=MUTED)
            ax.axhline(0, color="#333333", lw=0.8)
            ax.set_xticks(x, [f"{g}-\ndominated" if g != "balanced" else "balanced" for g in PROFESSION_GROUPS])
            ax.set_title(head)
            ax.grid(axis="x", visible=False)
            if c == 0:
                ax.set_ylabel("mean association\nlog(p_T(TM) / p_T(TAM))")
    handles = [
        Patch(color=MALE_COLOUR, label="male person words (he, my brother, …)"),
        Patch(color=FEMALE_COLOUR, label="female person words (she, my sister, …)"),
    ]
    add_legend(
        fig,
        handles,
        ncol=2,
        title="profession groups by U.S. employment statistics; bars: mean, "
        "error bars: 95 % t-interval (or over seeds)",
    )
    fig.suptitle(title, fontsize=10)
    return fig
