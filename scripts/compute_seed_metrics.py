"""Snakemake script: the metric rows of every benchmark of one model, method and seed (no forward pass)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.engine.evaluation import compute_seed_metrics_job
from lmbias.job_runtime import setup_job_logging

setup_job_logging(snakemake.log[0])  # noqa: F821
compute_seed_metrics_job(
    benchmarks=snakemake.params.benchmarks,  # noqa: F821
    scores_paths=list(snakemake.input.scores),  # noqa: F821
    output_path=snakemake.output[0],  # noqa: F821
    model=snakemake.wildcards.model,  # noqa: F821
    method=snakemake.wildcards.method,  # noqa: F821
    seed=snakemake.wildcards.seed,  # noqa: F821
)
