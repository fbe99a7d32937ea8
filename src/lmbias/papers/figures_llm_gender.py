"""The llm_gender grid's figure: each bias metric against perplexity, one point per model and method."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter, ScalarFormatter

from lmbias.metrics.summary import AGGREGATE_SEED
from lmbias.papers.figure_data import check_summaries, method_sort_key, parse_method
from lmbias.papers.figure_style import (
    MUTED,
    add_legend,
    method_colours,
    new_figure,
    placeholder,
    placeholder_figure,
    styled,
    subplots,
)

#: The bias columns of resources/published/llm_gender.yaml (tests/papers/test_llm_grid.py keeps the two equal):
#: (benchmark, metric, subset, label, the value of an unbiased model).
LLM_PANELS = (
    ("crows_pairs", "metric_score", "gender", "CrowS-Pairs gender (%)", 50.0),
    ("stereoset", "ss", "gender", "StereoSet gender ss (%)", 50.0),
    ("stereoset", "lms", "gender", "StereoSet gender lms (%)", None),
    ("winobias", "mu_skew", "type1", "WinoBias skew T1", 0.0),
    ("occupations", "aob", "all", "Occupation AOB", 0.0),
    ("da_gender", "da_score", "all", "DA-score", 100.0),
    ("seat", "mean_abs_effect_size", "sent-weat6-8b", "SEAT-6..8b avg. |d|", 0.0),
    ("seat_v1", "effect_size", "occupations-test", "SEAT-v1 d", 0.0),
    ("seat_v2", "effect_size", "occupations-test", "SEAT-v2 d", 0.0),
    ("winogender", "gotcha_gap", "all", "WinoGender gotcha gap", 0.0),
    ("bold", "sentiment_mean_gap", "male-female", "BOLD sentiment gap", 0.0),
    ("winogenerated", "occupation_female_share_r", "all", "Winogenerated r(female share, BLS)", 0.0),
    ("bbq", "amb_bias_score", "all", "BBQ ambiguous bias score", 0.0),
    ("holistic_bias", "likelihood_bias", "all", "HolisticBias likelihood bias", 0.05),
    ("honest", "honest_k20", "female-male", "HONEST@20 female - male", 0.0),
    ("counterfactual_bold", "sentiment_abs_diff", "all", "Counterfactual |sentiment diff|", 0.0),
    ("bold", "toxic_share_gap", "male-female", "BOLD toxic share male - female", 0.0),
)
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: The grid's methods in distinct Okabe & Ito colours (LoRA-CDS/CDA in the colours of CDS/CDA); others as elsewhere.
LLM_METHOD_COLOURS = {
    "pretrained": "#000000",
    "cds-lora": "#0072B2",
    "cda-lora": "#E69F00",
    "self_debias": "#009E73",
    "sd": "#CC79A7",
    "inlp": "#D55E00",
}


def _first_variant_value(rows: pd.DataFrame):
    """The value of the first variant in file order (the metric's default, as the paper tables read it)."""
    if rows.empty:
        return None
    rows = rows[rows["variant"] == rows["variant"].iloc[0]]
    value = float(pd.to_numeric(rows["value"], errors="coerce").iloc[0])
    return None if math.isnan(value) else value


def llm_points(summaries: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """One row per (model, method, panel): x = perplexity, y = the panel's metric (seed "mean" rows, the first
    variant in file order, as the table reads them); and the perplexity benchmark x reads (WikiText-2 where the
    summaries have it, else the first other one, e.g. the GAP stand-in; None: no perplexity rows)."""
    mean = summaries[summaries["seed"].astype(str) == AGGREGATE_SEED]
    ppl = mean[(mean["metric"] == "perplexity") & (mean["subset"].astype(str) == "all")]
    names = sorted(ppl["benchmark"].unique(), key=lambda b: ("wikitext" not in str(b), str(b)))
    lm = names[0] if names else None
    records = []
    for (model, method), frame in mean.groupby(["model", "method"], sort=False):
        x = (
            _first_variant_value(
                frame[(frame["benchmark"] == lm) & (frame["metric"] == "perplexity") & (frame["subset"] == "all")]
            )
            if lm
            else None
        )
        for benchmark, metric, subset, label, _ in LLM_PANELS:
            y = _first_variant_value(
                frame[
                    (frame["benchmark"] == benchmark)
                    & (frame["metric"] == metric)
                    & (frame["subset"].astype(str) == subset)
                ]
            )
            records.append({"model": str(model), "method": str(method), "panel": label, "x": x, "y": y})
    return pd.DataFrame.from_records(records, columns=["model", "method", "panel", "x", "y"]), lm


@styled
def llm_bias_figure(summaries: pd.DataFrame, train_logs: dict | None = None) -> Figure:
    """Each bias metric (a panel) against perplexity, one point per (model, method): colour = method, marker =
    model, a thin line from a model's pretrained point to each of its methods; dashed: an unbiased model."""
    summaries = check_summaries(summaries, "llm_gender/bias_vs_perplexity")
    points, lm = llm_points(summaries)
    title = "Gender bias against perplexity, open decoders (lmbias grid llm_gender)"
    if lm is None:
        return placeholder_figure(
            title,
            "No perplexity rows (a benchmark with measure: perplexity, e.g. "
            "perplexity_wikitext2 or perplexity_gap) in the summaries: run one.",
        )
    models = list(dict.fromkeys(points["model"]))
    methods = sorted(dict.fromkeys(points["method"]), key=method_sort_key)
    colours = {**method_colours(methods), **LLM_METHOD_COLOURS}
    markers = {m: MODEL_MARKERS[i % len(MODEL_MARKERS)] for i, m in enumerate(models)}
    ncols = 3
    nrows = math.ceil(len(LLM_PANELS) / ncols)
    fig = new_figure(3.0 * ncols, 2.5 * nrows + 0.9)
    axes = subplots(fig, nrows, ncols)
    for ax, (benchmark, metric, subset, label, unbiased) in zip(axes.flat, LLM_PANELS):
        sel = points[(points["panel"] == label) & points["x"].notna() & points["y"].notna()]
        if sel.empty:
            placeholder(
                ax,
                f"{label}: no rows ({benchmark} {metric}, subset {subset}) with a perplexity in the "
                "summaries (benchmark not run, or not defined for these methods)",
                width=34,
            )
            continue
        for model in models:
            own = sel[sel["model"] == model]
            base = own[own["method"] == "pretrained"]
            for _, row in own.iterrows():
                colour = colours[parse_method(row["method"]).base]
                if len(base) and row["method"] != "pretrained":
                    ax.plot(
                        [base["x"].iloc[0], row["x"]],
                        [base["y"].iloc[0], row["y"]],
                        color=colour,
                        lw=0.7,
                        alpha=0.5,
                        zorder=1,
                    )
                ax.scatter(
                    [row["x"]],
                    [row["y"]],
                    color=colour,
                    marker=markers[model],
                    s=28,
                    zorder=3,
                    edgecolors="white",
                    linewidths=0.4,
                )
        if unbiased is not None:
            ax.axhline(unbiased, color=MUTED, lw=0.8, ls="--", zorder=0)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(label)
        ax.set_xlabel("perplexity (log scale)")
    for ax in list(axes.flat)[len(LLM_PANELS) :]:
        ax.set_axis_off()
    handles = [Line2D([], [], ls="", marker="o", color=colours[parse_method(m).base], label=m) for m in methods]
    handles += [Line2D([], [], ls="", marker=markers[m], color="#333333", label=m) for m in models]
    add_legend(fig, handles, ncol=min(len(handles), 6))
    fig.suptitle(f"{title}\nx: perplexity on {lm} (lower is better); dashed: an unbiased model", fontsize=10)
    return fig
