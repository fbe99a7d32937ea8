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

This module is the registry of the figures (`FIGURES`: paper -> its `FigureSpec`s); each paper's figures are
drawn in lmbias.papers.figures_<paper>, from the rows of lmbias.papers.figure_data in the style of
lmbias.papers.figure_style.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class FigureSpec:
    paper: str  # manela2021 | bartl2020 | lu2018 | over_debiasing
    id: str  # file stem: results/plots/{paper}/{id}.png and .svg
    caption: str  # one or two sentences: what it shows and how it was computed
    needs_train_logs: bool
    draw: Callable[[pd.DataFrame, dict, Path], list[Path]]  # draw(summaries, train_logs, out_stem) -> [png, svg]


# ------------------------------------------------------------------------------------------ specs


def _drawer(module: str, make: str) -> Callable[[pd.DataFrame, dict, Path], list[Path]]:
    """draw(summaries, train_logs, out_stem) of lmbias.papers.<module>.<make>, imported when a figure is drawn:
    the workflow reads this registry on every start (rules/papers_helpers.smk), and matplotlib costs a second
    of CPU to import."""

    def draw(summaries: pd.DataFrame, train_logs: dict, out_stem: Path) -> list[Path]:
        from lmbias.papers.figure_style import save_figure

        fig = getattr(importlib.import_module(f"lmbias.papers.{module}"), make)(summaries, train_logs)
        return save_figure(fig, out_stem)

    draw.__name__ = f"draw_{make}"
    return draw


FIGURES: dict[str, list[FigureSpec]] = {
    "over_debiasing": [
        FigureSpec(
            "over_debiasing",
            "tradeoff",
            "Trade-off between debiasing and over-debiasing: SEAT-v1, SEAT-v2 and logprob-score effect sizes "
            "(x; 0 = unbiased) against 1 - DA-score in percent (y) per model, one point per method and sweep "
            "instances of a method joined in order of their parameter. Values are the summaries' seed means.",
            False,
            _drawer("figures_over_debiasing", "tradeoff_figure"),
        ),
    ],
    "manela2021": [
        FigureSpec(
            "manela2021",
            "skew_stereotype",
            "WinoBias mu_skew against mu_stereo (percent) per model and method at the 0.1 confidence cut-off, "
            "one panel per test type; Online Skewness Mitigation (-O) and GPR fine-tunes (BERT-U/BERT-A) as "
            "distinct markers. Values are the summaries' seed means.",
            False,
            _drawer("figures_manela2021", "skew_stereotype_figure"),
        ),
    ],
    "bartl2020": [
        FigureSpec(
            "bartl2020",
            "associations",
            "Mean BEC-Pro association log(p_T(TM)/p_T(TAM)) of male and female person words per profession "
            "group, before (pretrained) and after each fine-tuning method, per language and model; error bars "
            "are 95 % t-intervals over sentences (over seeds where several).",
            False,
            _drawer("figures_bartl2020", "association_figure"),
        ),
    ],
    "lu2018": [
        FigureSpec(
            "lu2018",
            "occupation_bias",
            "Per-occupation bias B(o), the mean log-likelihood difference of the occupation after a male and a "
            "female prefix, per model with one bar per method, sorted by the pretrained model's bias; the "
            "legend gives each method's aggregate occupation bias (AOB).",
            False,
            _drawer("figures_lu2018", "occupation_figure"),
        ),
        FigureSpec(
            "lu2018",
            "training_curves",
            "Training loss (thin) and the occupation-AOB bias probe (thick, recorded every "
            "eval_bias_every_steps) against the optimizer step for every fine-tuned model, method and seed.",
            True,
            _drawer("figures_lu2018", "training_figure"),
        ),
    ],
    "llm_gender": [
        FigureSpec(
            "llm_gender",
            "bias_vs_perplexity",
            "Each benchmark's gender-bias headline (a panel; dashed: an unbiased model) against perplexity "
            "(WikiText-2 test where run, else the GAP stand-in; log scale), one point per model (marker) and "
            "method (colour), a line from each model's pretrained point to its mitigated ones. Values are "
            "the summaries' seed means, the metric's default variant as the table reads it.",
            False,
            _drawer("figures_llm_gender", "llm_bias_figure"),
        ),
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
