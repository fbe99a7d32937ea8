"""Snakemake script: summary.parquet for one model and method (all metrics, all seeds, provenance)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.engine.evaluation import summarise_job
from lmbias.job_runtime import setup_job_logging

setup_job_logging(snakemake.log[0])  # noqa: F821
summarise_job(
    metric_paths=list(snakemake.input.metrics),  # noqa: F821
    output_path=snakemake.output[0],  # noqa: F821
    slices=snakemake.params.slices,  # noqa: F821
    left_out=snakemake.params.left_out,  # noqa: F821
    aggregate=snakemake.params.aggregate,  # noqa: F821
)
