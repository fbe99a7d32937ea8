"""Lu et al. (2018)'s figures: per-occupation bias B(o), and the training curves (loss and the occupation-AOB
bias probe during fine-tuning, their section 5.3 and Figure 3).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from lmbias.papers.figure_data import aggregate_rows, check_summaries, method_sort_key, parse_method, pick_one
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


def occupation_rows(summaries: pd.DataFrame) -> pd.DataFrame:
    """occupation_bias per occupation (column `occupation`), one variant per model."""
    agg = aggregate_rows(summaries)
    rows = agg[(agg["metric"] == "occupation_bias") & agg["subset"].str.startswith("occupation/")]
    keep = []
    for _, g in rows.groupby(["model"], sort=True):
        bench = pick_one(g["benchmark"], preferred=["occupations"])
        g = g[g["benchmark"] == bench]
        keep.append(g[g["variant"] == pick_one(g["variant"])])
    if not keep:
        return rows.assign(occupation=pd.Series(dtype=str))
    rows = pd.concat(keep, ignore_index=True)
    return rows.assign(occupation=rows["subset"].str.slice(len("occupation/")))


@styled
def occupation_figure(summaries: pd.DataFrame, train_logs: dict | None = None) -> Figure:
    """Per-occupation bias B(o) per model, methods as grouped bars, occupations sorted by the pretrained model's
    bias (Lu et al. 2018, Figures 2 and 4: original vs CDA)."""
    summaries = check_summaries(summaries, "lu2018/occupation_bias")
    rows = occupation_rows(summaries)
    title = "Per-occupation bias (Lu et al. 2018, Figure 2)"
    if rows.empty:
        return placeholder_figure(
            title,
            "No occupation_bias rows (benchmark occupations, subsets "
            "occupation/<name>) in the summaries: run the occupations benchmark.",
        )
    agg = aggregate_rows(summaries)
    aob = agg[(agg["metric"] == "aob") & (agg["subset"] == "all")]
    models = sorted(rows["model"].unique())
    n_occ = max(rows.groupby("model")["occupation"].nunique())
    n_methods = max(rows.groupby("model")["method"].nunique())
    colours = method_colours(rows["method"])
    fig = new_figure(1.2 + 4.0 * len(models), 1.6 + n_occ * (0.09 + 0.06 * n_methods))
    axes = subplots(fig, 1, len(models))
    for ax, model in zip(axes[0], models):
        sel = rows[rows["model"] == model]
        methods = sorted(sel["method"].unique(), key=method_sort_key)
        table = sel.pivot_table(index="occupation", columns="method", values="value", aggfunc="first")
        ref = "pretrained" if "pretrained" in methods else methods[0]
        table = table.sort_values([ref], kind="stable", na_position="first")
        y = np.arange(len(table))
        height = 0.8 / len(methods)
        for k, method in enumerate(methods):
            vals = table[method].to_numpy(dtype=float) if method in table else np.full(len(table), np.nan)
            a = aob[(aob["model"] == model) & (aob["method"] == method) & (aob["variant"] == sel["variant"].iloc[0])]
            label = method + (f" (AOB {float(a['value'].iloc[0]):.3g})" if len(a) else "")
            ax.barh(
                y - 0.4 + height * (k + 0.5),
                np.nan_to_num(vals),
                height,
                color=colours[parse_method(method).base],
                alpha=1.0 if k == 0 else 0.85,
                label=label,
            )
        ax.set_yticks(y, table.index.tolist(), fontsize=6.5)
        ax.set_ylim(-0.7, len(table) - 0.3)
        ax.axvline(0, color="#333333", lw=0.8)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("bias B(o): log-lik. after male − female prefix\n(nats; > 0: more likely after the male prefix)")
        lonely = "\nno other method (e.g. cda) to compare" if len(methods) == 1 else ""
        ax.set_title(f"{model}\n({sel['variant'].iloc[0]}; sorted by {ref}){lonely}")
        # sorted ascending, so the lowest rows' bars point left: the lower right corner is free
        ax.legend(loc="lower right", fontsize=7, frameon=True, framealpha=0.9)
    fig.suptitle(title, fontsize=10)
    return fig


# ------------------------------------------------------------------------------------------ training curves

SEED_STYLES = ("-", "--", ":", "-.")
LOSS_COLOUR, BIAS_COLOUR = "#0072B2", "#D55E00"


def check_train_logs(train_logs, summaries, figure: str) -> dict:
    need = (
        f"{figure} needs training logs: {{(model, method, seed): DataFrame of "
        f"results/{{model}}/{{method}}/seed{{seed}}/model/train_log.parquet}}"
    )
    if train_logs is None:
        train_logs = {}
    if not isinstance(train_logs, dict):
        raise ValueError(f"{need}; got {type(train_logs).__name__}")
    for key, frame in train_logs.items():
        if not (isinstance(key, tuple) and len(key) == 3):
            raise ValueError(f"{need}; key {key!r} is not a (model, method, seed) tuple")
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"{need}; the value for {key!r} is a {type(frame).__name__}")
    has_summaries = isinstance(summaries, pd.DataFrame) and not summaries.empty
    if not train_logs and not has_summaries:
        raise ValueError(f"{need}; neither training logs nor summary rows were given")
    return train_logs


@styled
def training_figure(summaries: pd.DataFrame | None, train_logs: dict) -> Figure:
    """Loss (thin) and the bias probe (thick) against the optimizer step per trained (model, method), one line
    style per seed (Lu et al. 2018, section 5.3 and Figure 3)."""
    logs = check_train_logs(train_logs, summaries, "lu2018/training_curves")
    title = "Loss and bias during fine-tuning (Lu et al. 2018, Figure 3)"
    if not logs:
        return placeholder_figure(
            title,
            "No training logs: no fine-tuned (model, method, seed) in these results "
            "(pretrained, online and sd are not trained). The figure reads "
            "results/{model}/{method}/seed{seed}/model/train_log.parquet.",
        )
    groups: dict[tuple[str, str], list] = {}
    for (model, method, seed), frame in logs.items():
        groups.setdefault((str(model), str(method)), []).append((str(seed), frame))
    keys = sorted(groups, key=lambda k: (k[0], method_sort_key(k[1])))
    ncols = min(3, len(keys))
    nrows = math.ceil(len(keys) / ncols)
    fig = new_figure(max(7.5, 0.6 + 4.3 * ncols), 0.9 + 3.0 * nrows)
    axes = subplots(fig, nrows, ncols)
    seeds_seen: list[str] = []
    any_bias = False
    for i, key in enumerate(keys):
        ax = axes[i // ncols, i % ncols]
        ax.set_title(f"{key[0]} / {key[1]}")
        runs = sorted(groups[key], key=lambda s: (len(s[0]), s[0]))
        problems = [f"seed {s}: no {c} column" for s, f in runs for c in ("step", "loss") if c not in f.columns]
        if problems:
            placeholder(ax, "Training log unusable: " + "; ".join(problems), width=36)
            continue
        twin = None
        no_bias = []
        for seed, frame in runs:
            if seed not in seeds_seen:
                seeds_seen.append(seed)
            style = SEED_STYLES[seeds_seen.index(seed) % len(SEED_STYLES)]
            frame = frame.sort_values("step")
            steps = frame["step"].to_numpy(dtype=float)
            loss = pd.to_numeric(frame["loss"], errors="coerce").to_numpy(dtype=float)
            few = len(steps) <= 25
            ax.plot(
                steps,
                loss,
                ls=style,
                lw=0.9,
                color=LOSS_COLOUR,
                marker="." if few else None,
                ms=4,
                label=f"loss (seed {seed})",
            )
            bias = pd.to_numeric(frame["bias_metric"], errors="coerce") if "bias_metric" in frame.columns else None
            if bias is None or bias.isna().all():
                no_bias.append(seed)
                continue
            any_bias = True
            if twin is None:
                twin = ax.twinx()
                twin.spines["right"].set_visible(True)
                twin.grid(False)
                twin.set_ylabel("bias: occupation AOB (nats)", color=BIAS_COLOUR)
                twin.tick_params(axis="y", colors=BIAS_COLOUR)
            ok = bias.notna().to_numpy()
            twin.plot(
                steps[ok],
                bias.to_numpy(dtype=float)[ok],
                ls=style,
                lw=2.4,
                color=BIAS_COLOUR,
                marker="o",
                ms=3.5,
                label=f"bias (seed {seed})",
            )
        boundaries = []
        if "epoch" in runs[0][1].columns:
            frame = runs[0][1].sort_values("step")
            change = frame["epoch"].to_numpy()
            boundaries = frame["step"].to_numpy()[1:][np.diff(change) != 0]
            for s in boundaries:
                ax.axvline(float(s) - 0.5, color="#bbbbbb", lw=0.7, ls="--", zorder=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("optimizer step" + (" (dashed grey: epoch boundary)" if len(boundaries) else ""))
        ax.set_ylabel("training loss (nats / token)", color=LOSS_COLOUR)
        ax.tick_params(axis="y", colors=LOSS_COLOUR)
        if no_bias:
            add_note(
                ax, f"bias not recorded for seed {', '.join(no_bias)}: set training.eval_bias_every_steps", width=45
            )
    for j in range(len(keys), nrows * ncols):
        axes[j // ncols, j % ncols].set_axis_off()
    handles = [Line2D([], [], color=LOSS_COLOUR, lw=0.9, label="training loss (thin, left axis)")]
    if any_bias:
        handles.append(
            Line2D([], [], color=BIAS_COLOUR, lw=2.4, label="bias probe: occupation AOB (thick, right axis)")
        )
    if len(seeds_seen) > 1:
        handles += [
            Line2D([], [], color=MUTED, ls=SEED_STYLES[k % len(SEED_STYLES)], label=f"seed {s}")
            for k, s in enumerate(seeds_seen)
        ]
    add_legend(fig, handles, ncol=min(len(handles), 4))
    fig.suptitle(title, fontsize=10)
    return fig
