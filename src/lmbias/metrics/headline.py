"""The one number per benchmark a person reads first, before vs after mitigation: `results/summary.md`.

A summary holds hundreds of rows per (model, method); the main job ends by printing one line per
benchmark, with one column per method (pretrained first: "before"), each cell the mean over seeds with its
interval where the metric has one (or the test's p-value where it has a test instead). Which row is the
headline is fixed per dataset below (`HEADLINES`), with what an unbiased model would score, so the table
can say which way is better. SEAT's headline is derived here: the mean absolute effect size over the
configured tests (as bias-bench averages them), so it has no interval.

The paired pre/post tests (`results/tables/paired/*.parquet`, Bartl et al.) add one line per comparison:
the mean change of the association (after - before) over all professions, per person gender, with the
paired test's p-value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmbias.errors import DataError
from lmbias.io import write_text_atomic

AGGREGATE_SEED = "mean"


@dataclass(frozen=True)
class Headline:
    """The row of one dataset's summary that a person reads first."""

    metric: str
    subset: str | None  # None: the first subset in sorted order (e.g. WinoBias `type1`)
    label: str
    unbiased: str  # what an unbiased model scores, for the reader
    variant_contains: str = ""  # the first variant (sorted) containing this text; none does: the first one
    mean_abs_over_subsets: bool = False  # SEAT: mean |effect size| over the tests


HEADLINES: dict[str, tuple[Headline, ...]] = {
    "winobias": (Headline("mu_skew", None, "WinoBias mean skew", "0"),
                 Headline("mu_stereo", None, "WinoBias mean stereotype", "0")),
    "crows_pairs": (Headline("metric_score", "gender", "CrowS-Pairs metric score (gender)", "50"),),
    "stereoset": (Headline("ss", "gender", "StereoSet stereotype score (gender)", "50"),),
    "seat": (Headline("effect_size", None, "SEAT mean |effect size| over the tests", "0",
                      variant_contains="pooling=mean,ddof=1", mean_abs_over_subsets=True),),
    "seat_templates": (Headline("effect_size", None, "effect size (test terms)", "0",
                                variant_contains="pooling=mean,ddof=1"),),
    "logprob": (Headline("effect_size", "test", "logprob-score effect size (test terms)", "0"),),
    "da_gender": (Headline("da_score", "all", "DA-score (genuine associations kept)", "100",
                           variant_contains="association=ratio"),),
    "bec_pro": (Headline("association_gap", "prof=all", "BEC-Pro male - female association gap", "0"),),
    "occupations": (Headline("aob", "all", "occupation bias (AOB)", "0"),),
    # Not a bias: language-modelling ability (lower = better; a stand-in's variant says so)
    "perplexity": (Headline("perplexity", "all", "perplexity (pseudo- for masked / seq2seq; lower is better)", "n/a"),),
}


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    value = float(value)
    if value != 0 and abs(value) < 0.01:
        return f"{value:.2e}"
    return f"{value:.2f}"


def _cell(rows: pd.DataFrame) -> str:
    row = rows.iloc[0]
    text = _fmt(row["value"])
    if not pd.isna(row.get("ci_low")) and not pd.isna(row.get("ci_high")):
        text += f" [{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]"
    elif not pd.isna(row.get("p_value")):
        text += f" (p {_fmt(row['p_value'])})"
    return text


def headline_cell(summary: pd.DataFrame, benchmark: str, headline: Headline) -> str:
    """The formatted cell of one headline in one summary frame (one model and method); "–" when absent."""
    rows = summary[(summary["benchmark"] == benchmark) & (summary["metric"] == headline.metric)
                   & (summary["seed"].astype(str) == AGGREGATE_SEED)]
    every = sorted(rows["variant"].unique())
    plain = [v for v in every if "online_skew=" not in v] or every  # `online` has only online_skew variants
    variants = [v for v in plain if headline.variant_contains in v] or plain
    if not variants:
        return "–"
    rows = rows[rows["variant"] == variants[0]]
    if headline.mean_abs_over_subsets:
        values = rows["value"].astype(float).abs()
        return f"{_fmt(values.mean())} ({len(values)} tests)" if len(values) else "–"
    subset = headline.subset if headline.subset is not None else (sorted(rows["subset"].unique()) or [None])[0]
    rows = rows[rows["subset"] == subset]
    return _cell(rows) if len(rows) else "–"


def _subset_label(summaries: list[pd.DataFrame], benchmark: str, headline: Headline) -> str:
    if headline.subset is not None or headline.mean_abs_over_subsets:
        return headline.label
    subsets = sorted({s for f in summaries for s in f.loc[(f["benchmark"] == benchmark)
                                                          & (f["metric"] == headline.metric), "subset"]})
    return f"{headline.label} ({subsets[0]})" if subsets else headline.label


def headline_table(summaries: dict[tuple[str, str], pd.DataFrame], datasets: dict[str, str]) -> list[list[str]]:
    """Rows [benchmark, headline, unbiased, cell per (model, method)] for every benchmark in `datasets`
    ({benchmark: dataset}) that some summary holds, in sorted benchmark order."""
    frames = list(summaries.values())
    present = sorted({b for f in frames for b in f["benchmark"].unique()})
    rows = []
    for benchmark in present:
        for headline in HEADLINES.get(datasets.get(benchmark, benchmark), ()):
            cells = [headline_cell(frame, benchmark, headline) for frame in frames]
            if all(c == "–" for c in cells):
                continue
            rows.append([benchmark, _subset_label(frames, benchmark, headline), headline.unbiased, *cells])
    return rows


def paired_lines(paths: list[str | Path]) -> list[list[str]]:
    """[comparison, before, after, association change over all professions per person gender (p)] per table."""
    out = []
    for path in paths:
        frame = pd.read_parquet(path)
        if frame.empty:
            continue
        first = frame.iloc[0]
        gap = frame[(frame["metric"] == "association_change") & (frame["subset"].astype(str).str.startswith("prof=all"))]
        cells = "; ".join(f"{r['subset']}: {_fmt(r['value'])} (p {_fmt(r['p_value'])})" for _, r in gap.iterrows()) or "–"
        out.append([str(first["comparison"]), f"{first['before_model']} / {first['before_method']}",
                     f"{first['after_model']} / {first['after_method']}", cells])
    return out


def _md_row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def summary_markdown(summary_paths: list[str | Path], datasets: dict[str, str], paired_paths=()) -> str:
    """The markdown page: the headline table of the given summaries (one column per model / method, in
    the order given), then the paired tests."""
    summaries: dict[tuple[str, str], pd.DataFrame] = {}
    for path in summary_paths:
        frame = pd.read_parquet(path)
        if frame.empty:
            raise DataError("empty summary", path)
        key = (str(frame["model"].iloc[0]), str(frame["method"].iloc[0]))
        summaries[key] = frame
    header = ["benchmark", "headline", "unbiased", *[f"{m} / {k}" for m, k in summaries]]
    lines = ["# lmbias: before and after mitigation", "",
             "Mean over seeds; [95 % interval] where the metric has one, (p) where it has a test instead. "
             "`unbiased` is what a model without gender bias scores. Every row of every benchmark is in "
             "`results/<model>/<method>/summary.parquet`.", "",
             _md_row(header), "|" + "---|" * len(header)]
    lines += [_md_row(r) for r in headline_table(summaries, datasets)]
    paired = paired_lines(paired_paths)
    if paired:
        lines += ["", "Paired pre/post tests (item by item; mean association change after - before, all professions):",
                  "", _md_row(["comparison", "before", "after", "association change (p)"]), "|---|---|---|---|"]
        lines += [_md_row(r) for r in paired]
    return "\n".join(lines) + "\n"


def summary_html(markdown: str) -> str:
    """A self-contained HTML page of the markdown table (for a browser; no converter needed)."""
    import html

    body, table = [], []

    def flush():
        if table:
            head, *rest = table
            body.append("<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr></thead><tbody>"
                        + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rest)
                        + "</tbody></table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            if set(line) <= set("|-"):
                continue
            table.append([c.strip().replace("\\|", "|") for c in line.strip().strip("|").split(" | ")])
            continue
        flush()
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    flush()
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>lmbias summary</title><style>"
            "body{font-family:sans-serif}table{border-collapse:collapse;font-size:13px}"
            "td,th{border:1px solid #bbb;padding:3px 6px}</style></head><body>" + "".join(body) + "</body></html>\n")


def write_summary_pages(summary_paths, datasets: dict[str, str], paired_paths, markdown_path, html_path) -> str:
    """Write results/summary.md and its HTML page atomically; returns the markdown."""
    text = summary_markdown(summary_paths, datasets, paired_paths)
    write_text_atomic(markdown_path, text)
    write_text_atomic(html_path, summary_html(text))
    return text
