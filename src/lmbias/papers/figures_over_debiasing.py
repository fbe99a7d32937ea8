"""The over-debiasing paper's figure: bias (SEAT and logprob effect sizes) against over-debiasing (1 - DA-score)."""

from __future__ import annotations

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
    method_colours,
    new_figure,
    placeholder,
    placeholder_figure,
    styled,
    subplots,
)

BIAS_PANELS = (
    ("seat_v1", "SEAT-v1", "occupations-test"),
    ("seat_v2", "SEAT-v2", "occupations-test"),
    ("logprob", "logprob-score", "test"),
)
DEBIASING_METHODS = ("cds", "er", "sd")


def _effect_variant_rank(variant: str) -> tuple:
    """Preferred SEAT / logprob variant: ddof=1 (the appendix's sample std), no std_epsilon, one-sided
    alternative, the default pooling of each family."""
    parts = variant_parts(variant)
    pooling = ["mean", "last", "decoder_mean"]
    return (
        parts.get("ddof", "1") != "1",
        "std_epsilon" in parts,
        "alternative" in parts and parts["alternative"] != "greater",
        pooling.index(parts["pooling"]) if parts.get("pooling") in pooling else len(pooling),
        variant,
    )


def _da_variant_rank(variant: str) -> tuple:
    order = ["ratio", "sentence", "tm"]
    assoc = variant_parts(variant).get("association", "")
    return (order.index(assoc) if assoc in order else len(order), variant)


def _fmt(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _one_value(rows: pd.DataFrame, benchmark: str, metric: str, rank, preferred_subsets) -> tuple[pd.DataFrame, str]:
    """Rows of one (benchmark, metric) narrowed to one subset and variant; returns (rows, 'subset, variant')."""
    sel = rows[(rows["benchmark"] == benchmark) & (rows["metric"] == metric)]
    if sel.empty:
        return sel, ""
    subset = pick_one(sel["subset"], preferred=preferred_subsets)
    sel = sel[sel["subset"] == subset]
    variant = pick_one(sel["variant"], rank=rank)
    return sel[sel["variant"] == variant], f"{subset}; {variant}"


@styled
def tradeoff_figure(summaries: pd.DataFrame, train_logs: dict | None = None) -> Figure:
    """Bias (effect size) against over-debiasing (1 - DA-score): rows = models, columns = SEAT-v1, SEAT-v2,
    logprob-score (the over-debiasing paper's Figures 2 and 3)."""
    agg = aggregate_rows(check_summaries(summaries, "over_debiasing/tradeoff"))
    families = summaries.attrs.get("families") or {}  # {model: family}, set by the figure job
    title = (
        "Debiasing vs over-debiasing: bias effect size against loss of genuine associations "
        "(lower is better on both axes)"
    )
    relevant = ((agg["metric"] == "effect_size") & agg["benchmark"].isin([b for b, _, _ in BIAS_PANELS])) | (
        (agg["benchmark"] == "da_gender") & (agg["metric"] == "da_score")
    )
    models = sorted(agg.loc[relevant, "model"].unique())
    if not models:
        return placeholder_figure(
            title,
            "No SEAT-v1 / SEAT-v2 / logprob effect_size rows and no DA-Gender da_score "
            "rows in the summaries: run benchmarks seat_v1, seat_v2, logprob and "
            "da_gender for the pretrained and debiased models.",
        )
    colours = method_colours(agg.loc[relevant, "method"])
    fig = new_figure(11.0, 0.9 + 3.4 * len(models))
    axes = subplots(fig, len(models), len(BIAS_PANELS))
    used_bases: set[str] = set()
    swept: dict[str, set[str]] = {}  # base -> the parameters its joined sweep instances vary
    for r, model in enumerate(models):
        rows = agg[agg["model"] == model]
        da, da_label = _one_value(rows, "da_gender", "da_score", _da_variant_rank, ["all"])
        for c, (bench, label, subset) in enumerate(BIAS_PANELS):
            ax = axes[r, c]
            bias, bias_label = _one_value(rows, bench, "effect_size", _effect_variant_rank, [subset, "all"])
            if bias.empty or da.empty:
                what = [
                    f"{label} ({bench} effect_size)" if bias.empty else None,
                    "DA-score (da_gender da_score)" if da.empty else None,
                ]
                reason = " and ".join(w for w in what if w)
                causal = families.get(model) == "clm"
                extra = " (it is not defined for causal LMs)" if bench == "logprob" and bias.empty and causal else ""
                placeholder(ax, f"{model}: no {reason} rows in the summaries{extra}")
                ax.set_title(f"{model}: {label}")
                continue
            b = bias.set_index("method")
            d = da.set_index("method")
            methods = sorted(set(b.index) | set(d.index), key=method_sort_key)
            missing = []
            points: dict[str, list[tuple]] = {}
            for method in methods:
                if (
                    method not in b.index
                    or method not in d.index
                    or not np.isfinite(b.at[method, "value"])
                    or not np.isfinite(d.at[method, "value"])
                ):
                    missing.append(f"{method} ({'DA-score' if method in b.index else label})")
                    continue
                x = float(b.at[method, "value"])
                y = 100.0 - float(d.at[method, "value"])
                xerr = _err(x, b.at[method, "ci_low"], b.at[method, "ci_high"])
                lo, hi = d.at[method, "ci_low"], d.at[method, "ci_high"]
                yerr = _err(y, 100.0 - hi if np.isfinite(hi) else np.nan, 100.0 - lo if np.isfinite(lo) else np.nan)
                points.setdefault(parse_method(method).base, []).append((parse_method(method), x, y, xerr, yerr))
            for base, pts in points.items():
                used_bases.add(base)
                colour = colours[base]
                sweep = [p for p in pts if p[0].is_sweep]
                if len(sweep) >= 2:
                    swept.setdefault(base, set()).update(p[0].param for p in sweep)
                    ax.plot(
                        [p[1] for p in sweep],
                        [p[2] for p in sweep],
                        "-",
                        color=colour,
                        lw=1.2,
                        alpha=0.8,
                        zorder=2,
                        label=f"_{base} sweep",
                    )
                for m, x, y, xerr, yerr in pts:
                    if xerr is not None or yerr is not None:
                        ax.errorbar(
                            x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.8, alpha=0.6, zorder=1
                        )
                    marker, size = ("*", 11) if base == "pretrained" else (("o", 5) if m.is_sweep else ("D", 6.5))
                    ax.plot(
                        [x],
                        [y],
                        marker=marker,
                        ms=size,
                        color=colour,
                        mec="white" if marker != "*" else colour,
                        mew=0.6,
                        ls="none",
                        zorder=3,
                        label=m.name,
                    )
                    if m.is_sweep:
                        ax.annotate(
                            _fmt(m.value), (x, y), xytext=(3, 3), textcoords="offset points", fontsize=6.5, color=colour
                        )
            ax.axvline(0.0, color="#999999", lw=0.8, ls=":", zorder=0)
            ax.set_title(f"{model}: {label}")
            ax.set_xlabel(f"{label} effect size (0 = unbiased)")
            if c == 0:
                ax.set_ylabel("1 − DA-score (%)")
            notes = [f"{label}: {bias_label}", f"DA: {da_label}"]
            if not any(b != "pretrained" for b in points):
                notes.append("only pretrained: no debiasing method (cds/er/sd or a sweep) in the summaries")
            if missing:
                notes.append("missing: " + ", ".join(missing))
            add_note(ax, "\n".join(notes), width=62, below=True)
            ax.margins(x=0.15, y=0.25)
    handles = [
        Line2D([], [], marker="*" if b == "pretrained" else "D", color=colours[b], ls="none", ms=8, label=b)
        for b in sorted(used_bases, key=method_sort_key)
    ]
    if swept:
        varied = ", ".join(f"{b}: {'/'.join(sorted(p))}" for b, p in sorted(swept.items()))
        handles.append(
            Line2D(
                [],
                [],
                marker="o",
                color=MUTED,
                ms=5,
                lw=1.2,
                label=f"sweep instances joined in order, value annotated ({varied})",
            )
        )
    add_legend(fig, handles, title="method")
    fig.suptitle(title, fontsize=10)
    return fig


def _err(centre: float, low, high):
    """Asymmetric error-bar lengths [[below], [above]] from an interval, or None when it is not finite."""
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return None
    return [[max(centre - float(low), 0.0)], [max(float(high) - centre, 0.0)]]
