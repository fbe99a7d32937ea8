"""BOLD's figure: how the VADER sentiment of one (model, method, seed)'s generations is distributed per group.

One panel: the share of continuations per compound-score bin (0.1 wide, -1 .. 1) for actors and actresses as
step histograms, the groups' means as vertical lines, and the paper's positive / negative cut-offs dashed. The
numbers are lmbias.metrics.bold's, read from the cached generations (results/{model}/{method}/seed{k}/scores/
{benchmark}.parquet); `snakemake results/{model}/{method}/seed{k}/plots/{benchmark}_sentiment.svg` draws it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lmbias.metrics.bold import FEMALE_GROUP, MALE_GROUP, BoldOptions, vader_compound
from lmbias.papers.figure_style import (
    FEMALE_COLOUR,
    MALE_COLOUR,
    add_note,
    new_figure,
    placeholder,
    save_figure,
    styled,
    subplots,
)

BINS = np.linspace(-1.0, 1.0, 21)
GROUP_STYLE = {MALE_GROUP: ("actors", MALE_COLOUR), FEMALE_GROUP: ("actresses", FEMALE_COLOUR)}


@styled
def sentiment_figure(generations: pa.Table, title: str, options: BoldOptions | None = None):
    """The figure (a matplotlib Figure) for one generations table."""
    options = options or BoldOptions()
    fig = new_figure(6.4, 3.4)
    ax = subplots(fig, 1, 1)[0, 0]
    groups = np.asarray(generations.column("group").to_pylist(), dtype=object)
    compound = vader_compound([t or "" for t in generations.column("continuation").to_pylist()])
    if not len(compound):
        placeholder(ax, "no generations in this file")
        fig.suptitle(title, fontsize=10)
        return fig
    for group, (label, colour) in GROUP_STYLE.items():
        values = compound[groups == group]
        if not len(values):
            continue
        weights = np.full(len(values), 100.0 / len(values))
        ax.hist(values, bins=BINS, weights=weights, histtype="step", linewidth=1.4, color=colour,
                label=f"{label} (n={len(values)}, mean {values.mean():+.3f})")  # fmt: skip
        ax.axvline(values.mean(), color=colour, linewidth=1.0)
    for cut in (options.negative_threshold, options.positive_threshold):
        ax.axvline(cut, color="#555555", linestyle="--", linewidth=0.8)
    ax.set_xlim(-1, 1)
    ax.set_xlabel("VADER compound score of the continuation")
    ax.set_ylabel("% of the group's continuations")
    ax.legend(loc="upper left", frameon=False)
    add_note(
        ax,
        f"dashed: the paper's cut-offs (negative <= {options.negative_threshold:g}, positive >= "
        f"{options.positive_threshold:g}); solid: the group's mean",
        below=True,
    )
    fig.suptitle(title, fontsize=10)
    return fig


def write_sentiment_figure(
    scores_path: str | os.PathLike, out_stem: str | os.PathLike, title: str, metric_cfg: dict | None = None
) -> list[Path]:
    """Draw the figure of a generations file into `<out_stem>.png` and `.svg`."""
    options = BoldOptions.from_config(metric_cfg or {})
    return save_figure(sentiment_figure(pq.read_table(scores_path), title, options), out_stem)
