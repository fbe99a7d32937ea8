"""The one number per benchmark a person reads first, before vs after mitigation: `results/summary.md`.

A summary holds hundreds of rows per (model, method); the main job ends by printing one line per
benchmark, with one column per method (pretrained first: "before"), each cell the mean over seeds with its
interval where the metric has one (or the test's p-value where it has a test instead). Which row is the
headline is fixed by each benchmark's definition (`BenchmarkDef.headlines`, given here as {benchmark:
headlines}), with what an unbiased model would score, so the table can say which way is better. SEAT's
headline is derived here: the mean absolute effect size over the configured tests (as bias-bench averages
them), so it has no interval.

The paired pre/post tests (`results/tables/paired/*.parquet`, Bartl et al.) add one line per comparison:
the mean change of the association (after - before) over all professions, per person gender, with the
paired test's p-value.

The same numbers as a web page, with a figure per headline and the provenance: `lmbias.metrics.summary_page`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lmbias.errors import DataError

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

    @property
    def unbiased_value(self) -> float | None:
        """`unbiased` as a number (the reference line of the page's figure); None where there is none ("n/a")."""
        try:
            return float(self.unbiased)
        except ValueError:
            return None


#: {benchmark name: the headlines of its definition (BenchmarkDef.headlines)}
Headlines = dict[str, tuple[Headline, ...]]


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    value = float(value)
    if value != 0 and abs(value) < 0.01:
        return f"{value:.2e}"
    return f"{value:.2f}"


@dataclass(frozen=True)
class HeadlineValue:
    """One headline number of one summary (one model and method): the mean over seeds, with its interval
    where the metric has one, or its test's p-value; `tests` counts the SEAT tests a mean |effect size| is over."""

    value: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    tests: int | None = None

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.ci_low) or math.isnan(self.ci_high))


def _number(value) -> float:
    return math.nan if value is None or pd.isna(value) else float(value)


def headline_value(summary: pd.DataFrame, benchmark: str, headline: Headline) -> HeadlineValue | None:
    """The headline's row in one summary frame (one model and method) as numbers; None when absent."""
    rows = summary[
        (summary["benchmark"] == benchmark)
        & (summary["metric"] == headline.metric)
        & (summary["seed"].astype(str) == AGGREGATE_SEED)
    ]
    every = sorted(rows["variant"].unique())
    plain = [v for v in every if "online_skew=" not in v] or every  # `online` has only online_skew variants
    variants = [v for v in plain if headline.variant_contains in v] or plain
    if not variants:
        return None
    rows = rows[rows["variant"] == variants[0]]
    if headline.mean_abs_over_subsets:
        values = rows["value"].astype(float).abs()
        return HeadlineValue(float(values.mean()), tests=len(values)) if len(values) else None
    subset = headline.subset if headline.subset is not None else (sorted(rows["subset"].unique()) or [None])[0]
    rows = rows[rows["subset"] == subset]
    if not len(rows):
        return None
    row = rows.iloc[0]
    return HeadlineValue(
        _number(row["value"]), _number(row.get("ci_low")), _number(row.get("ci_high")), _number(row.get("p_value"))
    )


def format_headline_value(found: HeadlineValue | None) -> str:
    """The table cell of a headline value: `value [low, high]`, `value (p ...)`, `value (k tests)` or "–"."""
    if found is None:
        return "–"
    if found.tests is not None:
        return f"{_fmt(found.value)} ({found.tests} tests)"
    text = _fmt(found.value)
    if found.has_interval:
        text += f" [{_fmt(found.ci_low)}, {_fmt(found.ci_high)}]"
    elif not math.isnan(found.p_value):
        text += f" (p {_fmt(found.p_value)})"
    return text


def headline_cell(summary: pd.DataFrame, benchmark: str, headline: Headline) -> str:
    """The formatted cell of one headline in one summary frame (one model and method); "–" when absent."""
    return format_headline_value(headline_value(summary, benchmark, headline))


def _subset_label(summaries: list[pd.DataFrame], benchmark: str, headline: Headline) -> str:
    if headline.subset is not None or headline.mean_abs_over_subsets:
        return headline.label
    subsets = sorted(
        {
            s
            for f in summaries
            for s in f.loc[(f["benchmark"] == benchmark) & (f["metric"] == headline.metric), "subset"]
        }
    )
    return f"{headline.label} ({subsets[0]})" if subsets else headline.label


@dataclass(frozen=True)
class HeadlineRow:
    """One line of the headline table: a benchmark's headline in every summary (None where it lacks it)."""

    benchmark: str
    headline: Headline
    label: str  # the headline's label, with the subset it reads where the headline picks the first one
    values: dict[tuple[str, str], HeadlineValue | None]  # {(model, method): value}, in the summaries' order


def headline_rows(summaries: dict[tuple[str, str], pd.DataFrame], headlines: Headlines) -> list[HeadlineRow]:
    """The headlines of every benchmark in `headlines` ({benchmark: its definition's headlines}) that some
    summary holds, in sorted benchmark order; a headline no summary has a value for is left out."""
    frames = list(summaries.values())
    present = sorted({b for f in frames for b in f["benchmark"].unique()})
    rows = []
    for benchmark in present:
        for headline in headlines.get(benchmark, ()):
            values = {key: headline_value(frame, benchmark, headline) for key, frame in summaries.items()}
            if all(v is None for v in values.values()):
                continue
            rows.append(HeadlineRow(benchmark, headline, _subset_label(frames, benchmark, headline), values))
    return rows


def headline_table(summaries: dict[tuple[str, str], pd.DataFrame], headlines: Headlines) -> list[list[str]]:
    """Rows [benchmark, headline, unbiased, cell per (model, method)] of `headline_rows`."""
    return [
        [row.benchmark, row.label, row.headline.unbiased, *map(format_headline_value, row.values.values())]
        for row in headline_rows(summaries, headlines)
    ]


PAIRED_HEADER = ["comparison", "before", "after", "association change (p)"]


def paired_lines(paths: list[str | Path]) -> list[list[str]]:
    """[comparison, before, after, association change over all professions per person gender (p)] per table."""
    out = []
    for path in paths:
        frame = pd.read_parquet(path)
        if frame.empty:
            continue
        first = frame.iloc[0]
        gap = frame[
            (frame["metric"] == "association_change") & (frame["subset"].astype(str).str.startswith("prof=all"))
        ]
        cells = (
            "; ".join(f"{r['subset']}: {_fmt(r['value'])} (p {_fmt(r['p_value'])})" for _, r in gap.iterrows()) or "–"
        )
        out.append(
            [
                str(first["comparison"]),
                f"{first['before_model']} / {first['before_method']}",
                f"{first['after_model']} / {first['after_method']}",
                cells,
            ]
        )
    return out


def _md_row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def read_summaries(summary_paths: list[str | Path]) -> dict[tuple[str, str], pd.DataFrame]:
    """{(model, method): summary frame} of the given summary.parquet files, in the order given; an empty
    file is a DataError naming it."""
    summaries: dict[tuple[str, str], pd.DataFrame] = {}
    for path in summary_paths:
        frame = pd.read_parquet(path)
        if frame.empty:
            raise DataError("empty summary", path)
        key = (str(frame["model"].iloc[0]), str(frame["method"].iloc[0]))
        summaries[key] = frame
    return summaries


def headline_markdown(
    summaries: dict[tuple[str, str], pd.DataFrame], headlines: Headlines, paired: Sequence[Sequence[str]] = ()
) -> str:
    """The markdown page: the headline table of the summaries (one column per model / method, in their
    order), then the paired tests' lines (`paired_lines`)."""
    header = ["benchmark", "headline", "unbiased", *[f"{m} / {k}" for m, k in summaries]]
    lines = [
        "# lmbias: before and after mitigation",
        "",
        "Mean over seeds; [95 % interval] where the metric has one, (p) where it has a test instead. "
        "`unbiased` is what a model without gender bias scores. Every row of every benchmark is in "
        "`results/<model>/<method>/summary.parquet`.",
        "",
        _md_row(header),
        "|" + "---|" * len(header),
    ]
    lines += [_md_row(r) for r in headline_table(summaries, headlines)]
    if paired:
        lines += [
            "",
            "Paired pre/post tests (item by item; mean association change after - before, all professions):",
            "",
            _md_row(PAIRED_HEADER),
            "|---|---|---|---|",
        ]
        lines += [_md_row(r) for r in paired]
    return "\n".join(lines) + "\n"


def summary_markdown(summary_paths: list[str | Path], headlines: Headlines, paired_paths=()) -> str:
    """The markdown page of the given summary and paired-test files (`headline_markdown`)."""
    return headline_markdown(read_summaries(summary_paths), headlines, paired_lines(paired_paths))
