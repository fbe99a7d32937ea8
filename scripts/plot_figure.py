"""Snakemake script: one paper figure (png + svg) drawn by its lmbias.papers.figures.FIGURES entry."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

import pandas as pd

from lmbias.job_runtime import setup_job_logging
from lmbias.papers.figures import FIGURES
from lmbias.papers.tables import apply_readings, read_summaries

setup_job_logging(snakemake.log[0])  # noqa: F821
wildcards = snakemake.wildcards  # noqa: F821
spec = {f.id: f for f in FIGURES[wildcards.paper]}[wildcards.figure]
train_logs = {
    (model, method, int(seed)): pd.read_parquet(Path(folder) / "train_log.parquet")
    for (model, method, seed), folder in zip(snakemake.params.runs, snakemake.input.models)  # noqa: F821
}
out_stem = Path(snakemake.output.png).with_suffix("")  # noqa: F821
# the paper's readings (papers.<paper>.readings): the entries its tables read stand in for their benchmarks
summaries = apply_readings(read_summaries(list(snakemake.input.summaries)), dict(snakemake.params.get("readings", {})))  # noqa: F821
summaries.attrs["families"] = dict(snakemake.params.families)  # noqa: F821
spec.draw(summaries, train_logs, out_stem)
