"""The four papers' figures, drawn from summary rows (and training logs) with matplotlib.

Each figure is a `FigureSpec`: `draw(summaries, train_logs, out_stem)` writes `<out_stem>.png` (150 dpi) and
`<out_stem>.svg` atomically and returns both paths; the `*_figure` functions return the matplotlib Figure,
so tests can read the plotted data back. `summaries` is the concatenation of results/{model}/{method}/
summary.parquet (long format, lmbias.metrics.summary); `train_logs` maps (model, method, seed) to the
train_log.parquet of that fine-tuned model (lmbias.training.jobs.LOG_SCHEMA).

Values come from the aggregate rows (seed "mean"); a (model, method) without them is averaged over its
seeds here. Data a figure needs but the summaries lack (a method not run, a benchmark left out, a metric
not defined for a family) gives a panel that says what is missing, never an invented value. No summary
rows at all is a ValueError naming what is needed.

Output is deterministic (fixed svg.hashsalt, no date in the SVG metadata, DejaVu Sans glyphs as paths), so a
rerun on the same rows gives identical files. Colours: Okabe & Ito's colour-blind-safe palette.

The training curves (loss and bias during fine-tuning, Lu et al. 2018 section 5.3 and Figure 3) sit under
lu2018 (`training_curves`): the bias probe the trainer records is Lu et al.'s occupation AOB.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, NullFormatter, ScalarFormatter

from lmbias.io import file_mode
from lmbias.metrics.summary import AGGREGATE_SEED

DPI = 150
#: rc settings every figure is drawn and saved under (svg.hashsalt fixes the SVG ids; glyphs become paths,
#: so the SVG does not depend on the fonts of the machine that opens it).
STYLE = {
    "svg.hashsalt": "lmbias",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "savefig.dpi": DPI,
    "figure.dpi": DPI,
    "image.composite_image": True,
    "path.simplify": True,
}
#: Okabe & Ito (2008), colour-blind safe; black last.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
#: Fixed colours for the project's method names, so a method keeps its colour in every figure.
METHOD_COLOURS = {"pretrained": "#000000", "cds": "#0072B2", "cda": "#E69F00", "er": "#009E73", "sd": "#CC79A7",
                  "gpr-u": "#56B4E9", "gpr-a": "#D55E00", "online": "#7F7F7F"}
#: Further colour-blind-safe colours (Paul Tol's muted scheme) for method names not listed above.
EXTRA_COLOURS = ("#882255", "#44AA99", "#999933", "#AA4499", "#332288", "#117733", "#DDCC77", "#88CCEE")
MALE_COLOUR, FEMALE_COLOUR = "#0072B2", "#D55E00"
MUTED = "#555555"

SUMMARY_COLUMNS = ("model", "method", "seed", "benchmark", "metric", "variant", "subset", "value")
KEYS = ["model", "method", "benchmark", "metric", "variant", "subset"]


@dataclass(frozen=True)
class FigureSpec:
    paper: str            # manela2021 | bartl2020 | lu2018 | over_debiasing
    id: str               # file stem: results/plots/{paper}/{id}.png and .svg
    caption: str          # one or two sentences: what it shows and how it was computed
    needs_train_logs: bool
    draw: Callable[[pd.DataFrame, dict, Path], list[Path]]   # draw(summaries, train_logs, out_stem) -> [png, svg]


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
    return (m.base != "pretrained", m.base, m.is_sweep, m.param or "", not numeric,
            m.value if numeric else 0.0, str(m.value) if not numeric else "", m.name)


def method_colours(methods: Iterable[str]) -> dict[str, str]:
    """Colour per method *base* name (sweep instances share their base's colour)."""
    bases = sorted({parse_method(m).base for m in methods})
    unknown = [b for b in bases if b not in METHOD_COLOURS]
    out = {b: METHOD_COLOURS[b] for b in bases if b in METHOD_COLOURS}
    out.update({b: EXTRA_COLOURS[i % len(EXTRA_COLOURS)] for i, b in enumerate(unknown)})
    return out


def model_colours(models: Iterable[str]) -> dict[str, str]:
    return {m: OKABE_ITO[i % len(OKABE_ITO)] for i, m in enumerate(sorted(set(models)))}


# ------------------------------------------------------------------------------------------ input handling


def check_summaries(summaries, figure: str) -> pd.DataFrame:
    """The summary rows as a DataFrame, or a ValueError naming what `figure` needs."""
    need = (f"{figure} needs summary rows: the concatenated results/{{model}}/{{method}}/summary.parquet "
            f"(columns {', '.join(SUMMARY_COLUMNS)})")
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
        agg.loc[fill, "n_seeds"] = [float(seeds.get((m, k), 1)) for m, k in zip(agg.loc[fill, "model"], agg.loc[fill, "method"])]
    rest = per_seed[[(m, k) not in with_mean for m, k in zip(per_seed["model"], per_seed["method"])]]
    if not rest.empty:
        grouped = rest.groupby(KEYS, sort=True)
        averaged = grouped.agg(value=("value", "mean"), std=("value", "std"), n_seeds=("seed", "nunique"),
                               ci_low=("ci_low", "first"), ci_high=("ci_high", "first"),
                               p_value=("p_value", "first"), n=("n", "sum")).reset_index()
        several = averaged["n_seeds"] > 1
        averaged.loc[several, ["ci_low", "ci_high", "p_value"]] = np.nan
        averaged["seed"] = AGGREGATE_SEED
        agg = pd.concat([agg, averaged[agg.columns.intersection(averaged.columns)]], ignore_index=True)
    return agg.sort_values(KEYS, kind="stable").reset_index(drop=True)


def _variant_parts(variant: str) -> dict[str, str]:
    parts = {}
    for piece in str(variant).split(","):
        key, eq, value = piece.partition("=")
        parts[key.strip()] = value.strip() if eq else ""
    return parts


def _effect_variant_rank(variant: str) -> tuple:
    """Preferred SEAT / logprob variant: ddof=1 (the appendix's sample std), no std_epsilon, one-sided
    alternative, the default pooling of each family."""
    parts = _variant_parts(variant)
    pooling = ["mean", "last", "decoder_mean"]
    return (parts.get("ddof", "1") != "1", "std_epsilon" in parts, "alternative" in parts and parts["alternative"] != "greater",
            pooling.index(parts["pooling"]) if parts.get("pooling") in pooling else len(pooling), variant)


def _da_variant_rank(variant: str) -> tuple:
    order = ["ratio", "sentence", "tm"]
    assoc = _variant_parts(variant).get("association", "")
    return (order.index(assoc) if assoc in order else len(order), variant)


def _pick(values: Iterable[str], rank: Callable[[str], tuple] | None = None, preferred: Iterable[str] = ()) -> str | None:
    values = sorted(set(values))
    if not values:
        return None
    for p in preferred:
        if p in values:
            return p
    return min(values, key=rank) if rank else values[0]


def _fmt(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# ------------------------------------------------------------------------------------------ drawing helpers


def styled(make):
    """Run a figure function under STYLE: artists read rcParams when they are created, not when saved."""
    import functools

    @functools.wraps(make)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return make(*args, **kwargs)

    return wrapper


def new_figure(width: float, height: float) -> Figure:
    """A pyplot-free Figure on the Agg canvas (no global state, safe in threads)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def subplots(fig: Figure, nrows: int, ncols: int, **kwargs) -> np.ndarray:
    with matplotlib.rc_context(STYLE):
        axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return axes


def placeholder(ax, message: str, width: int = 40) -> None:
    """An empty panel that says what is missing."""
    ax.set_axis_off()
    ax.text(0.5, 0.5, textwrap.fill(message, width), ha="center", va="center", transform=ax.transAxes,
            fontsize=8, color="#333333", bbox={"boxstyle": "round,pad=0.6", "fc": "#f5f5f5", "ec": "#bbbbbb"})


def _note(ax, message: str, width: int = 60, below: bool = False) -> None:
    """A small note in a panel (what is missing from it, which variant it shows): inside the lower left
    corner, or under the x label (constrained layout makes room for it)."""
    text = textwrap.fill(message, width) if "\n" not in message else "\n".join(
        textwrap.fill(line, width) for line in message.split("\n"))
    if below:
        ax.annotate(text, xy=(0.0, 0.0), xycoords="axes fraction", xytext=(0, -34), textcoords="offset points",
                    ha="left", va="top", fontsize=6.5, color=MUTED, annotation_clip=False)
    else:
        ax.text(0.01, 0.01, text, ha="left", va="bottom", transform=ax.transAxes, fontsize=6.5, color=MUTED, zorder=5)


@styled
def placeholder_figure(title: str, message: str) -> Figure:
    fig = new_figure(6.4, 2.6)
    ax = subplots(fig, 1, 1)[0, 0]
    placeholder(ax, message, width=70)
    fig.suptitle(textwrap.fill(title, 80), fontsize=10)
    return fig


def save_figure(fig: Figure, out_stem: str | os.PathLike) -> list[Path]:
    """Write `<out_stem>.png` (150 dpi) and `<out_stem>.svg`: both rendered to temp files, then renamed."""
    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    targets = [out_stem.parent / f"{out_stem.name}.png", out_stem.parent / f"{out_stem.name}.svg"]
    temps = []
    try:
        with matplotlib.rc_context(STYLE):
            for path in targets:
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                os.close(fd)
                temps.append(Path(tmp))
                fmt = path.suffix[1:]
                metadata = {"Date": None} if fmt == "svg" else None
                fig.savefig(tmp, format=fmt, dpi=DPI, metadata=metadata)
                os.chmod(tmp, file_mode())
        for tmp, path in zip(temps, targets):
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise
    return targets


def _legend(fig: Figure, handles: list, ncol: int | None = None, title: str | None = None) -> None:
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=ncol or min(len(handles), 5), frameon=False,
                   title=title, title_fontsize=8)


# ------------------------------------------------------------------------------------------ over-debiasing

BIAS_PANELS = (("seat_v1", "SEAT-v1", "occupations-test"), ("seat_v2", "SEAT-v2", "occupations-test"),
               ("logprob", "logprob-score", "test"))
DEBIASING_METHODS = ("cds", "er", "sd")


def _one_value(rows: pd.DataFrame, benchmark: str, metric: str, rank, preferred_subsets) -> tuple[pd.DataFrame, str]:
    """Rows of one (benchmark, metric) narrowed to one subset and variant; returns (rows, 'subset, variant')."""
    sel = rows[(rows["benchmark"] == benchmark) & (rows["metric"] == metric)]
    if sel.empty:
        return sel, ""
    subset = _pick(sel["subset"], preferred=preferred_subsets)
    sel = sel[sel["subset"] == subset]
    variant = _pick(sel["variant"], rank=rank)
    return sel[sel["variant"] == variant], f"{subset}; {variant}"


@styled
def tradeoff_figure(summaries: pd.DataFrame, train_logs: dict | None = None) -> Figure:
    """Bias (effect size) against over-debiasing (1 - DA-score): rows = models, columns = SEAT-v1, SEAT-v2,
    logprob-score (the over-debiasing paper's Figures 2 and 3)."""
    agg = aggregate_rows(check_summaries(summaries, "over_debiasing/tradeoff"))
    families = summaries.attrs.get("families") or {}  # {model: family}, set by the figure job
    title = ("Debiasing vs over-debiasing: bias effect size against loss of genuine associations "
             "(lower is better on both axes)")
    relevant = ((agg["metric"] == "effect_size") & agg["benchmark"].isin([b for b, _, _ in BIAS_PANELS])) | (
        (agg["benchmark"] == "da_gender") & (agg["metric"] == "da_score"))
    models = sorted(agg.loc[relevant, "model"].unique())
    if not models:
        return placeholder_figure(title, "No SEAT-v1 / SEAT-v2 / logprob effect_size rows and no DA-Gender da_score "
                                         "rows in the summaries: run benchmarks seat_v1, seat_v2, logprob and "
                                         "da_gender for the pretrained and debiased models.")
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
                what = [f"{label} ({bench} effect_size)" if bias.empty else None,
                        "DA-score (da_gender da_score)" if da.empty else None]
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
                if method not in b.index or method not in d.index or not np.isfinite(b.at[method, "value"]) \
                        or not np.isfinite(d.at[method, "value"]):
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
                    ax.plot([p[1] for p in sweep], [p[2] for p in sweep], "-", color=colour, lw=1.2, alpha=0.8,
                            zorder=2, label=f"_{base} sweep")
                for m, x, y, xerr, yerr in pts:
                    if xerr is not None or yerr is not None:
                        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.8, alpha=0.6,
                                    zorder=1)
                    marker, size = ("*", 11) if base == "pretrained" else (("o", 5) if m.is_sweep else ("D", 6.5))
                    ax.plot([x], [y], marker=marker, ms=size, color=colour, mec="white" if marker != "*" else colour,
                            mew=0.6, ls="none", zorder=3, label=m.name)
                    if m.is_sweep:
                        ax.annotate(_fmt(m.value), (x, y), xytext=(3, 3), textcoords="offset points", fontsize=6.5,
                                    color=colour)
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
            _note(ax, "\n".join(notes), width=62, below=True)
            ax.margins(x=0.15, y=0.25)
    handles = [Line2D([], [], marker="*" if b == "pretrained" else "D", color=colours[b], ls="none", ms=8, label=b)
               for b in sorted(used_bases, key=method_sort_key)]
    if swept:
        varied = ", ".join(f"{b}: {'/'.join(sorted(p))}" for b, p in sorted(swept.items()))
        handles.append(Line2D([], [], marker="o", color=MUTED, ms=5, lw=1.2,
                              label=f"sweep instances joined in order, value annotated ({varied})"))
    _legend(fig, handles, title="method")
    fig.suptitle(title, fontsize=10)
    return fig


def _err(centre: float, low, high):
    """Asymmetric error-bar lengths [[below], [above]] from an interval, or None when it is not finite."""
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return None
    return [[max(centre - float(low), 0.0)], [max(float(high) - centre, 0.0)]]


# ------------------------------------------------------------------------------------------ Manela et al. 2021

ONLINE_LABELS = {"none": "", "all_professions": "-O", "referent": "-O (referent)"}
ONLINE_ORDER = ["none", "all_professions", "referent"]
WINOBIAS_DEFAULT = "cutoff=0.1,probability=pair"


#: Marker per method base (plain rows filled; -O open; referent-masked -O half filled), for label-free scatters.
MANELA_MARKERS = {"pretrained": "o", "gpr-u": "s", "gpr-a": "D"}
OTHER_MARKERS = ("P", "X", "v", "<", ">", "h", "p", "*")
FILL_STYLES = {"none": "full", "all_professions": "none", "referent": "left"}
FILL_LABELS = {"none": "filled: plain metric", "all_professions": "open: -O (Online Skewness Mitigation, professions masked)",
               "referent": "half: -O with only the referent masked"}


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
    rows = agg[(agg["benchmark"] == "winobias") & agg["metric"].isin(["mu_skew", "mu_stereo"])
               & agg["subset"].str.fullmatch(r"type\d+")]
    rows = rows[~rows["variant"].str.contains("entities=")]
    if rows.empty:
        return empty
    parts = rows["variant"].map(_variant_parts)
    rows = rows.assign(online=parts.map(lambda p: p.get("online_skew", "none")),
                       base_variant=rows["variant"].str.replace(r",?online_skew=[^,]*", "", regex=True))
    keep = []
    for model, group in rows.groupby("model", sort=True):
        base = _pick(group["base_variant"], preferred=[WINOBIAS_DEFAULT])
        keep.append(group[group["base_variant"] == base])
    rows = pd.concat(keep)
    wide = rows.pivot_table(index=["model", "method", "subset", "online"], columns="metric", values="value",
                            aggfunc="first").reset_index()
    if "mu_skew" not in wide.columns or "mu_stereo" not in wide.columns:
        return empty
    wide = wide.dropna(subset=["mu_skew", "mu_stereo"])
    if wide.empty:
        return empty
    out = []
    for (model, subset, online, skew, stereo), group in wide.groupby(
            ["model", "subset", "online", "mu_skew", "mu_stereo"], sort=True):
        methods = sorted(group["method"], key=method_sort_key)
        label = " = ".join(f"{m}{ONLINE_LABELS.get(online, '-' + online)}" for m in methods)
        out.append({"model": model, "subset": subset, "online": online, "methods": tuple(methods), "label": label,
                    "mu_skew": float(skew), "mu_stereo": float(stereo)})
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
        return placeholder_figure(title, "No WinoBias mu_skew / mu_stereo rows (benchmark winobias, plain or "
                                         "online_skew variants, subsets type1/type2) in the summaries: "
                                         "run the winobias benchmark.")
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
            scatter.plot([p["mu_skew"]], [p["mu_stereo"]], marker=markers[base], ms=8, color=colours[p["model"]],
                         fillstyle=fill, mew=1.3, ls="none", label=f"{p['model']} · {p['label']}", zorder=3,
                         **({"markerfacecoloralt": "white"} if fill == "left" else {}))
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
            _note(scatter, "not in these summaries: " + "; ".join(missing), width=70, below=True)
    handles = [Line2D([], [], marker="s", color=colours[m], ls="none", ms=7, label=m) for m in sorted(colours)]
    handles += [Line2D([], [], marker=mk, color=MUTED, ls="none", ms=7, label=b) for b, mk in markers.items()]
    handles += [Line2D([], [], marker="o", color=MUTED, ls="none", ms=7, fillstyle=FILL_STYLES[v], mew=1.3,
                       label=FILL_LABELS[v], **({"markerfacecoloralt": "white"} if v == "referent" else {}))
                for v in ONLINE_ORDER if v in fills_used]
    _legend(fig, handles, ncol=4, title="scatter: colour = model, marker = method, fill = variant")
    fig.suptitle(title, fontsize=10)
    return fig


# ------------------------------------------------------------------------------------------ Bartl et al. 2020

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
        keep.append(g[g["variant"] == _pick(g["variant"], preferred=["test=wilcoxon"])])
    return pd.concat(keep, ignore_index=True) if keep else rows


@styled
def association_figure(summaries: pd.DataFrame, train_logs: dict | None = None) -> Figure:
    """Mean BEC-Pro association per profession group x person gender, before (pretrained) and after each
    fine-tuning method (Bartl et al. 2020, Figure 1): rows = (language, model), columns = methods."""
    rows = bec_pro_rows(check_summaries(summaries, "bartl2020/associations"))
    title = "BEC-Pro associations before and after fine-tuning (Bartl et al. 2020, Figure 1)"
    if rows.empty:
        return placeholder_figure(title, "No BEC-Pro association_mean rows (subsets prof=<group>/person=<gender>) "
                                         "in the summaries: run benchmark bec_pro_en (or bec_pro_de with a German model).")
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
            head = f"{_language(bench)}\n{model}: " + ("after fine-tuning" if method is None else
                                                      "before (pretrained)" if method == "pretrained" else method)
            if method is None:
                placeholder(ax, f"No fine-tuned method (e.g. cds) in the summaries: the 'after' side is missing.",
                            width=30)
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
                yerr = np.vstack([np.where(ok, np.maximum(vals - lows, 0), 0), np.where(ok, np.maximum(highs - vals, 0), 0)])
                ax.bar(x + offset, np.nan_to_num(vals), width, color=colour, label=f"{person} person words",
                       yerr=yerr if ok.any() else None, error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"})
                for i in np.flatnonzero(~np.isfinite(vals)):
                    ax.text(x[i] + offset, 0, "n/a", ha="center", va="bottom", fontsize=6.5, color=MUTED)
            ax.axhline(0, color="#333333", lw=0.8)
            ax.set_xticks(x, [f"{g}-\ndominated" if g != "balanced" else "balanced" for g in PROFESSION_GROUPS])
            ax.set_title(head)
            ax.grid(axis="x", visible=False)
            if c == 0:
                ax.set_ylabel("mean association\nlog(p_T(TM) / p_T(TAM))")
    handles = [Patch(color=MALE_COLOUR, label="male person words (he, my brother, …)"),
               Patch(color=FEMALE_COLOUR, label="female person words (she, my sister, …)")]
    _legend(fig, handles, ncol=2, title="profession groups by U.S. employment statistics; bars: mean, "
                                         "error bars: 95 % t-interval (or over seeds)")
    fig.suptitle(title, fontsize=10)
    return fig


# ------------------------------------------------------------------------------------------ Lu et al. 2018


def occupation_rows(summaries: pd.DataFrame) -> pd.DataFrame:
    """occupation_bias per occupation (column `occupation`), one variant per model."""
    agg = aggregate_rows(summaries)
    rows = agg[(agg["metric"] == "occupation_bias") & agg["subset"].str.startswith("occupation/")]
    keep = []
    for _, g in rows.groupby(["model"], sort=True):
        bench = _pick(g["benchmark"], preferred=["occupations"])
        g = g[g["benchmark"] == bench]
        keep.append(g[g["variant"] == _pick(g["variant"])])
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
        return placeholder_figure(title, "No occupation_bias rows (benchmark occupations, subsets "
                                         "occupation/<name>) in the summaries: run the occupations benchmark.")
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
            ax.barh(y - 0.4 + height * (k + 0.5), np.nan_to_num(vals), height, color=colours[parse_method(method).base],
                    alpha=1.0 if k == 0 else 0.85, label=label)
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
    need = (f"{figure} needs training logs: {{(model, method, seed): DataFrame of "
            f"results/{{model}}/{{method}}/seed{{seed}}/model/train_log.parquet}}")
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
        return placeholder_figure(title, "No training logs: no fine-tuned (model, method, seed) in these results "
                                         "(pretrained, online and sd are not trained). The figure reads "
                                         "results/{model}/{method}/seed{seed}/model/train_log.parquet.")
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
        for j, (seed, frame) in enumerate(runs):
            if seed not in seeds_seen:
                seeds_seen.append(seed)
            style = SEED_STYLES[seeds_seen.index(seed) % len(SEED_STYLES)]
            frame = frame.sort_values("step")
            steps = frame["step"].to_numpy(dtype=float)
            loss = pd.to_numeric(frame["loss"], errors="coerce").to_numpy(dtype=float)
            few = len(steps) <= 25
            ax.plot(steps, loss, ls=style, lw=0.9, color=LOSS_COLOUR, marker="." if few else None, ms=4,
                    label=f"loss (seed {seed})")
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
            twin.plot(steps[ok], bias.to_numpy(dtype=float)[ok], ls=style, lw=2.4, color=BIAS_COLOUR, marker="o",
                      ms=3.5, label=f"bias (seed {seed})")
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
            _note(ax, f"bias not recorded for seed {', '.join(no_bias)}: set training.eval_bias_every_steps",
                  width=45)
    for j in range(len(keys), nrows * ncols):
        axes[j // ncols, j % ncols].set_axis_off()
    handles = [Line2D([], [], color=LOSS_COLOUR, lw=0.9, label="training loss (thin, left axis)")]
    if any_bias:
        handles.append(Line2D([], [], color=BIAS_COLOUR, lw=2.4, label="bias probe: occupation AOB (thick, right axis)"))
    if len(seeds_seen) > 1:
        handles += [Line2D([], [], color=MUTED, ls=SEED_STYLES[k % len(SEED_STYLES)], label=f"seed {s}")
                    for k, s in enumerate(seeds_seen)]
    _legend(fig, handles, ncol=min(len(handles), 4))
    fig.suptitle(title, fontsize=10)
    return fig


# ------------------------------------------------------------------------------------------ llm_gender (our grid)

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
)
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: The grid's methods in distinct Okabe & Ito colours (LoRA-CDS/CDA in the colours of CDS/CDA); others as elsewhere.
LLM_METHOD_COLOURS = {"pretrained": "#000000", "cds-lora": "#0072B2", "cda-lora": "#E69F00", "self_debias": "#009E73",
                      "sd": "#CC79A7", "inlp": "#D55E00"}


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
        x = _first_variant_value(frame[(frame["benchmark"] == lm) & (frame["metric"] == "perplexity")
                                       & (frame["subset"] == "all")]) if lm else None
        for benchmark, metric, subset, label, _ in LLM_PANELS:
            y = _first_variant_value(frame[(frame["benchmark"] == benchmark) & (frame["metric"] == metric)
                                           & (frame["subset"].astype(str) == subset)])
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
        return placeholder_figure(title, "No perplexity rows (a benchmark with measure: perplexity, e.g. "
                                         "perplexity_wikitext2 or perplexity_gap) in the summaries: run one.")
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
            placeholder(ax, f"{label}: no rows ({benchmark} {metric}, subset {subset}) with a perplexity in the "
                            "summaries (benchmark not run, or not defined for these methods)", width=34)
            continue
        for model in models:
            own = sel[sel["model"] == model]
            base = own[own["method"] == "pretrained"]
            for _, row in own.iterrows():
                colour = colours[parse_method(row["method"]).base]
                if len(base) and row["method"] != "pretrained":
                    ax.plot([base["x"].iloc[0], row["x"]], [base["y"].iloc[0], row["y"]], color=colour, lw=0.7,
                            alpha=0.5, zorder=1)
                ax.scatter([row["x"]], [row["y"]], color=colour, marker=markers[model], s=28, zorder=3,
                           edgecolors="white", linewidths=0.4)
        if unbiased is not None:
            ax.axhline(unbiased, color=MUTED, lw=0.8, ls="--", zorder=0)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(label)
        ax.set_xlabel("perplexity (log scale)")
    for ax in list(axes.flat)[len(LLM_PANELS):]:
        ax.set_axis_off()
    handles = [Line2D([], [], ls="", marker="o", color=colours[parse_method(m).base], label=m) for m in methods]
    handles += [Line2D([], [], ls="", marker=markers[m], color="#333333", label=m) for m in models]
    _legend(fig, handles, ncol=min(len(handles), 6))
    fig.suptitle(f"{title}\nx: perplexity on {lm} (lower is better); dashed: an unbiased model", fontsize=10)
    return fig


# ------------------------------------------------------------------------------------------ specs


def _drawer(make: Callable[[pd.DataFrame, dict], Figure]) -> Callable[[pd.DataFrame, dict, Path], list[Path]]:
    def draw(summaries: pd.DataFrame, train_logs: dict, out_stem: Path) -> list[Path]:
        fig = make(summaries, train_logs)
        return save_figure(fig, out_stem)

    draw.__name__ = f"draw_{make.__name__}"
    draw.__doc__ = make.__doc__
    return draw


FIGURES: dict[str, list[FigureSpec]] = {
    "over_debiasing": [
        FigureSpec("over_debiasing", "tradeoff",
                   "Trade-off between debiasing and over-debiasing: SEAT-v1, SEAT-v2 and logprob-score effect sizes "
                   "(x; 0 = unbiased) against 1 - DA-score in percent (y) per model, one point per method and sweep "
                   "instances of a method joined in order of their parameter. Values are the summaries' seed means.",
                   False, _drawer(tradeoff_figure)),
    ],
    "manela2021": [
        FigureSpec("manela2021", "skew_stereotype",
                   "WinoBias mu_skew against mu_stereo (percent) per model and method at the 0.1 confidence cut-off, "
                   "one panel per test type; Online Skewness Mitigation (-O) and GPR fine-tunes (BERT-U/BERT-A) as "
                   "distinct markers. Values are the summaries' seed means.",
                   False, _drawer(skew_stereotype_figure)),
    ],
    "bartl2020": [
        FigureSpec("bartl2020", "associations",
                   "Mean BEC-Pro association log(p_T(TM)/p_T(TAM)) of male and female person words per profession "
                   "group, before (pretrained) and after each fine-tuning method, per language and model; error bars "
                   "are 95 % t-intervals over sentences (over seeds where several).",
                   False, _drawer(association_figure)),
    ],
    "lu2018": [
        FigureSpec("lu2018", "occupation_bias",
                   "Per-occupation bias B(o), the mean log-likelihood difference of the occupation after a male and a "
                   "female prefix, per model with one bar per method, sorted by the pretrained model's bias; the "
                   "legend gives each method's aggregate occupation bias (AOB).",
                   False, _drawer(occupation_figure)),
        FigureSpec("lu2018", "training_curves",
                   "Training loss (thin) and the occupation-AOB bias probe (thick, recorded every "
                   "eval_bias_every_steps) against the optimizer step for every fine-tuned model, method and seed.",
                   True, _drawer(training_figure)),
    ],
    "llm_gender": [
        FigureSpec("llm_gender", "bias_vs_perplexity",
                   "Each benchmark's gender-bias headline (a panel; dashed: an unbiased model) against perplexity "
                   "(WikiText-2 test where run, else the GAP stand-in; log scale), one point per model (marker) and "
                   "method (colour), a line from each model's pretrained point to its mitigated ones. Values are "
                   "the summaries' seed means, the metric's default variant as the table reads it.",
                   False, _drawer(llm_bias_figure)),
    ],
}


def all_specs() -> list[FigureSpec]:
    return [spec for specs in FIGURES.values() for spec in specs]


def get_spec(paper: str, figure_id: str) -> FigureSpec:
    for spec in FIGURES.get(paper, []):
        if spec.id == figure_id:
            return spec
    known = ", ".join(f"{s.paper}/{s.id}" for s in all_specs())
    raise KeyError(f"no figure {paper}/{figure_id} (known: {known})")
