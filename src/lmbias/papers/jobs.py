"""The papers' jobs (rules/papers.smk): one table (rules paper_table and paper_settings_table) and one figure
(rule paper_figure) from our summaries. Both run inside Snakemake's process (`run:`), logging into their job's
log through lmbias.job_runtime.job_log; the rules name this module as an input, so editing it redraws them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from lmbias.papers.figures import FIGURES
from lmbias.papers.published import load_published_file
from lmbias.papers.table_render import write_table
from lmbias.papers.tables import apply_readings, read_summaries


def paper_table_job(
    paper: str,
    table_id: str,
    published_path: str | os.PathLike,
    summary_paths: Sequence[str],
    pairs: Sequence,
    outputs: Mapping[str, str],
    left_out: Sequence,
    lm_benchmarks: Sequence = (),
    readings: Mapping | None = None,
) -> None:
    """One paper table (`outputs`: parquet, md, html) from our summaries and the published numbers.
    `lm_benchmarks` and `readings` (the paper's readings of its columns) are empty for settings tables."""
    published = load_published_file(published_path, paper)
    write_table(
        published.tables[table_id],
        read_summaries(list(summary_paths)),
        list(pairs),
        parquet=outputs["parquet"],
        markdown=outputs["md"],
        html_path=outputs["html"],
        paper=published,
        left_out=list(left_out),
        lm_benchmarks=list(lm_benchmarks),
        readings=dict(readings or {}),
    )


def paper_figure_job(
    paper: str,
    figure_id: str,
    summary_paths: Sequence[str],
    runs: Sequence,
    model_folders: Sequence[str],
    png_path: str | os.PathLike,
    families: Mapping[str, str],
    readings: Mapping | None = None,
) -> None:
    """One paper figure (png, and svg beside it) drawn by its lmbias.papers.figures.FIGURES entry; `runs`:
    (model, method, seed) of the training runs whose logs it reads, from `model_folders` in the same order."""
    spec = {f.id: f for f in FIGURES[paper]}[figure_id]
    train_logs = {
        (model, method, int(seed)): pd.read_parquet(Path(folder) / "train_log.parquet")
        for (model, method, seed), folder in zip(runs, model_folders)
    }
    # the paper's readings (papers.<paper>.readings): the entries its tables read stand in for their benchmarks
    summaries = apply_readings(read_summaries(list(summary_paths)), dict(readings or {}))
    summaries.attrs["families"] = dict(families)
    spec.draw(summaries, train_logs, Path(png_path).with_suffix(""))
