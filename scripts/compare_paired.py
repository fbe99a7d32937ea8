"""Snakemake script: paired pre/post test of one benchmark between two (model, method) pairs."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.metrics.comparison import paired_comparison_job

setup_job_logging(snakemake.log[0])  # noqa: F821
paired_comparison_job(
    name=snakemake.wildcards.comparison,  # noqa: F821
    entry=snakemake.params.comparison,  # noqa: F821
    benchmark_entry=snakemake.params.benchmark,  # noqa: F821
    before_paths=list(snakemake.input.before),  # noqa: F821
    after_paths=list(snakemake.input.after),  # noqa: F821
    output_path=snakemake.output[0],  # noqa: F821
)
