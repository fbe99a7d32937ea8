"""Snakemake script: one paper table (parquet, markdown, HTML) from our summaries and the published numbers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # the library of this checkout

from lmbias.job_runtime import setup_job_logging
from lmbias.papers.published import load_published_file
from lmbias.papers.tables import read_summaries, write_table

setup_job_logging(snakemake.log[0])  # noqa: F821
published = load_published_file(snakemake.input.published, snakemake.wildcards.paper)  # noqa: F821
table = published.tables[snakemake.wildcards.table]  # noqa: F821
write_table(
    table,
    read_summaries(list(snakemake.input.summaries)),  # noqa: F821
    list(snakemake.params.pairs),  # noqa: F821
    parquet=snakemake.output.parquet,  # noqa: F821
    markdown=snakemake.output.md,  # noqa: F821
    html_path=snakemake.output.html,  # noqa: F821
    paper=published,
    left_out=list(snakemake.params.left_out),  # noqa: F821
    lm_benchmarks=list(snakemake.params.get("lm_benchmarks", [])),  # noqa: F821  (none for settings tables)
    readings=dict(snakemake.params.get("readings", {})),  # noqa: F821  (the paper's readings of its columns)
)
