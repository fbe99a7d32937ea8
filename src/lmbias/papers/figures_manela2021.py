"""Manela et al. (2021)'s figure: WinoBias mu_skew against mu_stereo per model and method (their Figure 4)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from lmbias.papers.figure_data import (
    aggregate_rows,
    check_summaries,
    method_sort_key,
    parse_method,
    pick_one,
    variant_parts,
)
from lmbias.papers.figure_style import (
    MUTED,
    add_legend,
    add_note,
    model_colours,
    new_figure,
    placeholder_figure,
    styled,
    subplots,
)

ONLINE_LABELS = {"none": "", "all_professions": "-O", "referent": "-O (referent)"}
ONLINE_ORDER = ["none", "all_professions", "referent"]
WINOBIAS_DEFAULT = "cutoff=0.1,probability=pair"


#: Marker per method base (plain rows filled; -O open; referent-masked -O half filled), for label-free scatters.
MANELA_MARKERS = {"pretrained": "o", "gpr-u": "s", "gpr-a": "D"}
OTHER_MARKERS = ("P", "X", "v", "<", ">", "h", "p", "*")
FILL_STYLES = {"none": "full", "all_professions": "none", "referent": "left"}
FILL_LABELS = {
    "none": "filled: plain metric",
    "all_professions": "open: -O (Online Skewness Mitigation, professions masked)",
    "referent": "half: -O with only the referent masked",
}


def manela_markers(methods: Iterable[str]) -> dict[str, str]:
    """Marker per method base: pretrained circle, GPR fine-tunes (BERT-U / BERT-A) square / diamond."""
    bases = sorted({parse_method(m).base for m in methods}, key=method_sort_key)
    others = [b for b in bases if b not in MANELA_MARKERS]
    out = {b: MANELA_MARKERS[b] for b in bases if b in MANELA_MARKERS}
    out.update({b: OTHER_MARKERS[i % len(OTHER_MARKERS)] for i, b in enumerate(others)})
    return out


def skew_stereotype_points(summaries: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, test type, online variant, point): mu_skew and mu_stereo (percent). Methods that give
    the same point (an `online` method reproduces pretrained's -O rows) share it; `label` joins them."""
    empty = pd.DataFrame(columns=["model", "subset", "online", "methods", "label", "mu_skew", "mu_stereo"])
    agg = aggregate_rows(summaries)
    rows = agg[
        (agg["benchmark"] == "winobias")
        & agg["metric"].isin(["mu_skew", "mu_stereo"])
        & agg["subset"].str.fullmatch(r"type\d+")
    ]
    rows = rows[~rows["variant"].str.contains("entities=")]
    if rows.empty:
        return empty
    parts = rows["variant"].map(variant_parts)
    rows = rows.assign(
        online=parts.map(lambda p: p.get("online_skew", "none")),
        base_variant=rows["variant"].str.replace(r",?online_skew=[^,]*", "", regex=True),
    )
    keep = []
    for _model, group in rows.groupby("model", sort=True):
        base = pick_one(group["base_variant"], preferred=[WINOBIAS_DEFAULT])
        keep.append(group[group["base_variant"] == base])
    rows = pd.concat(keep)
    wide = rows.pivot_table(
        index=["model", "method", "subset", "online"], columns="metric", values="value", aggfunc="first"
    ).reset_index()
    if "mu_skew" not in wide.columns or "mu_stereo" not in wide.columns:
        return empty
    wide = wide.dropna(subset=["mu_skew", "mu_stereo"])
    if wide.empty:
        return empty
    out = []
    for (model, subset, online, skew, stereo), group in wide.groupby(
        ["model", "subset", "online", "mu_skew", "mu_stereo"], sort=True
    ):
        methods = sorted(group["method"], key=method_sort_key)
        label = " = ".join(f"{m}{ONLINE_LABELS.get(online, '-' + online)}" for m in methods)
        out.append(
            {
                "model": model,
                "subset": subset,
                "online": online,
                "methods": tuple(methods),
                "label": label,
                "mu_skew": float(skew),
                "mu_stereo": float(stereo),
            }
        )
    frame = pd.DataFrame(out)
    order = {v: i for i, v in enumerate(ONLINE_ORDER)}
    frame["_o"] = frame["online"].map(lambda v: order.get(v, len(order)))
    frame["_m"] = frame["methods"].map(lambda ms: method_sort_key(ms[0]))
    return frame.sort_values(["subset", "model", "_m", "_o"]).drop(columns=["_o", "_m"]).reset_index(drop=True)


SKEW_COLOUR, STEREO_COLOUR = "#3A3A3A", "#B8B8B8"  # greys: colour is the model's in this figure


@styled
def skew_stereotype_figure(summaries: pd.DataFrame, train_logs: dict | None = None) -> Figure:
    """WinoBias mu_skew and mu_stereo per model and method (Manela et al., Figure 4): per test type (type 2, the
    paper's focus, first) the paper's bars and a skew-vs-stereotype scatter (colour = model, marker = method,
    fill = Online Skewness Mitigation variant)."""
    points = skew_stereotype_points(check_summaries(summaries, "manela2021/skew_stereotype"))
    title = "Skew and stereotype on WinoBias (Manela et al. 2021, Figure 4)"
    if points.empty:
        return placeholder_figure(
            title,
            "No WinoBias mu_skew / mu_stereo rows (benchmark winobias, plain or "
            "online_skew variants, subsets type1/type2) in the summaries: "
            "run the winobias benchmark.",
        )
    subsets = sorted(points["subset"].unique(), key=lambda s: (s != "type2", s))
    colours = model_colours(points["model"])
    markers = manela_markers(ms[0] for ms in points["methods"])  # a shared point is drawn as its first method
    n_entries = max(points.groupby("subset").size())
    height = max(3.2, 1.0 + 0.24 * n_entries)
    fig = new_figure(11.0, 0.9 + height * len(subsets))
    axes = subplots(fig, len(subsets), 2, width_ratios=[1.15, 1.0])
    fills_used = set()
    for r, subset in enumerate(subsets):
        bars, scatter = axes[r]
        sel = points[points["subset"] == subset].reset_index(drop=True)
        name = f"T{subset[4:]}" + (" (the paper's focus)" if subset == "type2" else "")
        # the paper's bars: one group per (model, method, variant), top to bottom
        y = np.arange(len(sel))[::-1]
        bars.barh(y + 0.2, sel["mu_skew"], 0.4, color=SKEW_COLOUR, label=r"$\mu_{\mathrm{skew}}$")
        bars.barh(y - 0.2, sel["mu_stereo"], 0.4, color=STEREO_COLOUR, label=r"$\mu_{\mathrm{stereo}}$")
        bars.set_yticks(y, [f"{m} · {lab}" for m, lab in zip(sel["model"], sel["label"])], fontsize=7)
        for ytick, model in zip(bars.get_yticklabels(), sel["model"]):
            ytick.set_color(colours[model])
        bars.set_ylim(-0.7, len(sel) - 0.3)
        bars.grid(axis="y", visible=False)
        bars.set_xlabel("percent (F1 differences)")
        bars.set_title(f"WinoBias {name}: per model and method")
        bars.legend(loc="best", fontsize=7.5)
        for _, p in sel.iterrows():
            base = parse_method(p["methods"][0]).base
            fill = FILL_STYLES.get(p["online"], "bottom")
            fills_used.add(p["online"])
            scatter.plot(
                [p["mu_skew"]],
                [p["mu_stereo"]],
                marker=markers[base],
                ms=8,
                color=colours[p["model"]],
                fillstyle=fill,
                mew=1.3,
                ls="none",
                label=f"{p['model']} · {p['label']}",
                zorder=3,
                **({"markerfacecoloralt": "white"} if fill == "left" else {}),
            )
        scatter.set_title(f"WinoBias {name}: skew vs stereotype")
        scatter.set_xlabel(r"$\mu_{\mathrm{skew}}$ (%): male vs female F1")
        scatter.set_ylabel(r"$\mu_{\mathrm{stereo}}$ (%): pro vs anti F1")
        right = max(5.0, float(sel["mu_skew"].max()) * 1.15)
        top = max(5.0, float(sel["mu_stereo"].max()) * 1.15)
        scatter.set_xlim(-0.03 * right, right)  # 0 is the floor of both; the margin keeps markers at 0 whole
        scatter.set_ylim(-0.03 * top, top)
        have = {parse_method(m).base for ms in sel["methods"] for m in ms}
        missing = []
        if not (sel["online"] != "none").any():
            missing.append("no -O (online_skew) rows")
        if not any(b.startswith("gpr") for b in have):
            missing.append("no GPR fine-tune (gpr-u / gpr-a)")
        if missing:
            add_note(scatter, "not in these summaries: " + "; ".join(missing), width=70, below=True)
    handles = [Line2D([], [], marker="s", color=colours[m], ls="none", ms=7, label=m) for m in sorted(colours)]
    handles += [Line2D([], [], marker=mk, color=MUTED, ls="none", ms=7, label=b) for b, mk in markers.items()]
    handles += [
        Line2D(
            [],
            [],
            marker="o",
            color=MUTED,
            ls="none",
            ms=7,
            fillstyle=FILL_STYLES[v],
            mew=1.3,
            label=FILL_LABELS[v],
            **({"markerfacecoloralt": "white"} if v == "referent" else {}),
        )
        for v in ONLINE_ORDER
        if v in fills_used
    ]
    add_legend(fig, handles, ncol=4, title="scatter: colour = model, marker = method, fill = variant")
    fig.suptitle(title, fontsize=10)
    return fig
