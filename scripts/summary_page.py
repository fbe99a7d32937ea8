"""Snakemake script: results/summary.md and .html (figures, table, provenance) of the default target."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.metrics.summary_page import write_summary_pages

setup_job_logging(snakemake.log[0])  # noqa: F821
write_summary_pages(
    list(snakemake.input.summaries),  # noqa: F821
    dict(snakemake.params.datasets),  # noqa: F821
    list(snakemake.input.paired),  # noqa: F821
    snakemake.output.md,  # noqa: F821
    snakemake.output.html,  # noqa: F821
)
